"""Where swrag keeps its files when no location is given: one place per user, whatever
the working directory (XDG base directories).

* caches (converted and low-bit models, ONNX exports, the demo's index):
  ``$SWRAG_CACHE``, else ``$XDG_CACHE_HOME/swrag``, else ``~/.cache/swrag``;
* data (the default index of ``swrag index`` / ``ask`` / ``status``; ``SlidingWindowIndex()``
  without a location is in memory): ``$SWRAG_HOME``, else ``$XDG_DATA_HOME/swrag``, else
  ``~/.local/share/swrag``; the index is its ``index`` folder.

Before 0.3 the default index was ``./.swrag/index`` under the working directory. An
existing one there is still used (with a warning saying how to move it) as long as
``$SWRAG_HOME`` does not choose a location, so no index is lost.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

LEGACY_INDEX = Path(".swrag") / "index"


def _xdg(variable: str, fallback: str) -> Path:
    """``$variable`` when it is an absolute path (the XDG rule: relative ones are ignored),
    else ``~/fallback``."""
    value = os.environ.get(variable)
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / fallback


def cache_dir() -> Path:
    """The cache root: ``$SWRAG_CACHE``, ``$XDG_CACHE_HOME/swrag`` or ``~/.cache/swrag``."""
    override = os.environ.get("SWRAG_CACHE")
    if override:
        return Path(override).expanduser()
    return _xdg("XDG_CACHE_HOME", ".cache") / "swrag"


def data_dir() -> Path:
    """The data root: ``$SWRAG_HOME``, ``$XDG_DATA_HOME/swrag`` or ``~/.local/share/swrag``."""
    override = os.environ.get("SWRAG_HOME")
    if override:
        return Path(override).expanduser()
    return _xdg("XDG_DATA_HOME", ".local/share") / "swrag"


def default_index_dir() -> Path:
    """The index used when none is given: ``data_dir() / "index"``, or an existing
    ``./.swrag/index`` (the old default; a ``UserWarning`` says how to move it) unless
    ``$SWRAG_HOME`` is set."""
    legacy = LEGACY_INDEX.resolve()
    if not os.environ.get("SWRAG_HOME") and (legacy / "sources").is_dir():
        warnings.warn(f"using the index in {legacy} (the default location before 0.3); the default is now "
                      f"{data_dir() / 'index'}: move the folder there, or pass --persist-dir {LEGACY_INDEX}",
                      UserWarning, stacklevel=2)
        return legacy
    return data_dir() / "index"
