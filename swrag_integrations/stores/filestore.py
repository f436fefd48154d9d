"""Atomic writes for LangChain's ``LocalFileStore`` (a source store's byte store).

``LocalFileStore.mset`` writes a value with ``Path.write_bytes``: the file is
truncated, then filled. A reader in another process that opens it in between reads
an empty or partial value (``JSONDecodeError`` on the ``meta`` or ``lock`` record of
a `KVSourceStore`), and ``mget``/``mdelete`` test ``exists()`` before
reading or unlinking, so a value deleted in between raises ``FileNotFoundError``.

`AtomicFileStore` wraps such a store (same folder, same keys, same files): a
value is written to a temporary file beside its key (``.swrag.tmp.<random>``) and
renamed over it with ``os.replace``, which POSIX makes atomic, so a reader sees the
old value or the new one, never a mix; a key deleted while it is read is ``None``.
`atomic_byte_store` applies it to every ``LocalFileStore`` a
`KVSourceStore` is given.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

__all__ = ["AtomicFileStore", "atomic_byte_store", "TEMP_PREFIX"]

TEMP_PREFIX = ".swrag.tmp."
"""Name prefix of the temporary files a write renames into place (never a key)."""


class AtomicFileStore:
    """A ``LocalFileStore`` whose writes are atomic (write a temporary file, then rename).

    Implements ``mget``/``mset``/``mdelete``/``yield_keys`` over the wrapped store's
    folder; keys are those of the wrapped store (relative paths, no ``..``). The
    wrapped store's ``chmod_file`` is honoured.

    Args:
        store: a ``langchain_classic.storage.LocalFileStore`` (anything with
            ``root_path`` and ``yield_keys``).
    """

    def __init__(self, store: Any) -> None:
        self.inner = store
        self.root = Path(store.root_path)
        self.chmod_file = getattr(store, "chmod_file", None)

    def __repr__(self) -> str:
        return f"AtomicFileStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        parts = Path(key).parts
        if not key or Path(key).is_absolute() or ".." in parts or parts[-1].startswith(TEMP_PREFIX):
            raise ValueError(f"invalid key for a file store: {key!r}")
        return self.root / key

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values of ``keys`` (``None`` for a missing key, also one deleted meanwhile)."""
        values: list[bytes | None] = []
        for key in keys:
            try:
                values.append(self._path(key).read_bytes())
            except (FileNotFoundError, NotADirectoryError):
                values.append(None)
        return values

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        """Write each value to a temporary file beside its key, then rename it over the key."""
        for key, value in key_value_pairs:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            temp = path.with_name(f"{TEMP_PREFIX}{uuid.uuid4().hex}")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for write_bytes
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(value)
                if self.chmod_file is not None:
                    os.chmod(temp, self.chmod_file)
                os.replace(temp, path)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete ``keys`` (missing ones are ignored, also when another process deleted them first)."""
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        """The keys (starting with ``prefix``), without writes in flight."""
        for key in self.inner.yield_keys(prefix=prefix):
            if not Path(key).name.startswith(TEMP_PREFIX):
                yield key


def _local_file_store_class(store: Any) -> type | None:
    """LangChain's ``LocalFileStore`` class among ``store``'s classes, or ``None``; read
    from the class hierarchy (a class of that name defined in a ``langchain*`` module), so
    nothing here imports LangChain."""
    for cls in type(store).__mro__:
        if cls.__name__ == "LocalFileStore" and cls.__module__.split(".")[0].startswith("langchain"):
            return cls
    return None


def atomic_byte_store(store: Any) -> Any:
    """``store`` wrapped in `AtomicFileStore` if it is a LangChain
    ``LocalFileStore`` (or a subclass that keeps its ``mset``), else ``store`` itself
    (in-memory, Redis and Chroma stores replace a value in one step already)."""
    cls = _local_file_store_class(store)
    if cls is not None and type(store).mset is cls.mset:
        return AtomicFileStore(store)
    return store
