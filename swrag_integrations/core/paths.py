"""Where swrag keeps its files when no location is given: one place per user, whatever
the working directory (XDG base directories).

* caches (converted and low-bit models, ONNX exports, the demo's index):
  ``$SWRAG_CACHE``, else ``$XDG_CACHE_HOME/swrag``, else ``~/.cache/swrag``;
* data (the default index of ``swrag index`` / ``ask`` / ``status``; ``SlidingWindowIndex()``
  without a location is in memory): ``$SWRAG_HOME``, else ``$XDG_DATA_HOME/swrag``, else
  ``~/.local/share/swrag``; the index is its ``index`` folder.

**Private by default.** Everything swrag keeps for a user (indexed documents, their
vectors, keyword indexes, LLM outputs, converted models) is created private, as the XDG
base-directory spec asks of these folders: every folder it creates for them is made 0700
(`private_dir`) and every database file it creates itself is made 0600
(`private_file`; SQLite gives a database's ``-wal``/``-shm`` files the database
file's mode). The rule for folders that already exist: **their mode is left alone**. A
folder the user made and passed in (``--persist-dir ~/notes-index``, ``$SWRAG_HOME``) keeps
whatever mode the user chose; only the folders swrag creates, there or anywhere, are
private. Files that libraries write inside these folders (Chroma's vector segments,
tantivy's segments, lock files) take their library's mode, but sit in folders no other
user can enter. (Evaluation and benchmark outputs, written where ``--out`` says, are not
covered.)

Before 0.3 the default index was ``./.swrag/index`` under the working directory. An
existing one there is still used (with a warning saying how to move it) as long as
``$SWRAG_HOME`` does not choose a location, so no index is lost.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

LEGACY_INDEX = Path(".swrag") / "index"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Make sure the folder ``path`` exists; return it (``~`` expanded).

    Each folder this call creates -- ``path`` and any missing parent -- is created 0700
    (owner only, whatever the umask; a umask can only remove more). A folder that already
    exists keeps its mode: a user's own folder is never chmod-ed. Safe when another process
    creates the same folders at the same time.

    Raises:
        FileExistsError / NotADirectoryError (``OSError``): ``path`` or a parent is a file.
        PermissionError: a parent cannot be written.
    """
    path = Path(path).expanduser()
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        if current.exists() or current.is_symlink():  # a file or a dangling link where a folder should be
            raise FileExistsError(f"{str(current)!r} exists and is not a folder")
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
    return path


def private_file(path: str | os.PathLike[str]) -> Path:
    """Make sure the file ``path`` exists (empty when new) in a folder made by
    `private_dir`; return it.

    A new file is created 0600; an existing one keeps its mode. Called before a database
    is opened, so that SQLite, which gives its ``-wal`` / ``-shm`` / journal files the mode
    of the database file, creates those 0600 too.
    """
    path = Path(path).expanduser()
    private_dir(path.parent)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    except FileExistsError:
        pass
    return path


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
