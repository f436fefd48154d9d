"""Import a script (a file outside the package, e.g. under benchmarks/) as a module for tests."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator


@contextlib.contextmanager
def script_module(path: Path, name: str) -> Iterator[ModuleType]:
    """``path`` executed as module ``name`` (registered in ``sys.modules`` while in use, so
    its dataclasses and pickling resolve), removed again afterwards."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
