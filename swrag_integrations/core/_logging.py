"""The package never configures logging: the application does.

Some libraries it calls configure the root logger behind the caller's back: ipex-llm
calls ``logging.basicConfig(level=INFO)`` on import, and onnxruntime's
``quantize_dynamic`` logs through the module-level ``logging.warning``, which installs a
stderr handler on a root logger that has none. That handler stays for the rest of the
process, and every library's records then reach the user's terminal (bm25s sets its own
logger to DEBUG, so ``DEBUG:bm25s:Building index from IDs`` was printed by ``swrag
demo``). `root_logging_kept` runs such a call and puts the root logger back.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

__all__ = ["root_logging_kept"]


@contextlib.contextmanager
def root_logging_kept() -> Iterator[None]:
    """Run the body, then restore the root logger: handlers added meanwhile are removed
    (and closed), its level is set back. Handlers the application had stay untouched."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)
