"""The keyword side of an index: BM25 over the complete sources' small chunks.

:class:`KeywordIndex` is derived from the source store and never trusted beyond it.

**Local index (SQLite source store): incremental.** BM25 lives in SQLite FTS5 tables
(:class:`~.bm25.SqliteBM25Index`) inside the source store's file, with the store
generation they reflect. Catching up with the store's change log rewrites only the
changed sources' rows, in one transaction together with the new generation: a crash
leaves the previous generation, which the next open replays forward. Any handle
(writer or reader) may commit a catch-up: the tables are derived, the generation is
read inside the transaction (the store cannot change meanwhile: same file) and only
ever moves forward, and replaying a source is idempotent. An index written by an
older version (a bm25s snapshot blob) is migrated on first open (logged) without
tokenising again.

**Other source stores (a Chroma server, LangChain byte stores): a snapshot.** Its
snapshot (a blob in the source store: the :class:`~.bm25.BM25Index`, the store
generation it reflects and a SHA-256 of the payload) is loaded only if the checksum
matches, then brought up to date by replaying the store's change log since that
generation (or rebuilt from the store when the log no longer reaches back, the
snapshot is newer than the store, or it does not decode). Only ``complete`` sources
are in it, so a half-written source is never found by keyword search.

Writers save a new snapshot after every change while holding the writer lock; a
reader that finds the store ahead of the snapshot (another process wrote since)
catches up in memory. Two writers can therefore never lose each other's documents:
each one replays the other's changes before it saves.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import struct
import threading
from typing import Any, Callable, Iterator

import numpy as np

from .bm25 import BM25Index, SqliteBM25Index
from .ids import parse_chunk_id

__all__ = ["KeywordIndex"]

logger = logging.getLogger(__name__)

BLOB_NAME = "bm25"
_MAGIC = b"SWBM2"


def _source_of(chunk_id: str) -> str:
    parsed = parse_chunk_id(chunk_id)
    return parsed.source_id if parsed is not None else chunk_id


def _local_database(store: Any) -> Any:
    """The SQLite file of a local source store, or ``None``."""
    from .sources import SqliteSourceStore

    return store.path if isinstance(store, SqliteSourceStore) else None


class KeywordIndex:
    """BM25 over chunk ids ``<source_id>:s:<i>``, kept in step with a source store.

    Args:
        store: the :class:`~.sources.SourceStore`.
        index_text: ``chunk text -> text to index`` (identity by default).
        bm25_kwargs: passed to :class:`~.bm25.BM25Index` (on a rebuild) or
            :class:`~.bm25.SqliteBM25Index` (a bm25s ``method`` other than ``"lucene"``
            selects the snapshot backend).

    ``incremental`` tells which backend this handle uses.
    """

    def __init__(self, store: Any, *, index_text: Callable[[str], str] | None = None, **bm25_kwargs: Any) -> None:
        self.store = store
        self.index_text = index_text or (lambda text: text)
        self.bm25_kwargs = bm25_kwargs
        database = _local_database(store) if bm25_kwargs.get("method", "lucene") == "lucene" else None
        self.incremental = database is not None
        self.bm25: BM25Index | SqliteBM25Index
        if database is not None:
            self.bm25 = SqliteBM25Index(database, group=_source_of, **bm25_kwargs)
        else:
            self.bm25 = BM25Index(**bm25_kwargs)
        self.generation = -1
        self.rebuilt = False  # the last refresh had to rebuild (reported by status)
        self._by_source: dict[str, list[str]] = {}
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- loading
    def load(self) -> None:
        """Load the stored snapshot if it is sound, then catch up with the store."""
        if self.incremental:
            self._load_tables()
            return
        with self._lock:
            raw = self.store.get_blob(BLOB_NAME)
            damaged = False
            if raw is not None:
                try:
                    self.bm25, self.generation = self._decode(raw)
                    self._by_source = self._group(self.bm25.ids)
                except Exception as exc:  # noqa: BLE001 - any damage means: rebuild
                    logger.warning("the stored BM25 index is damaged (%s); rebuilding it from the source store", exc)
                    self.generation, damaged = -1, True
            self.refresh()
            # a missing snapshot is only a problem when there was something to index
            self.rebuilt = self.rebuilt or damaged or (raw is None and len(self.bm25) > 0)

    def _load_tables(self) -> None:
        """Open the FTS5 tables, creating them (from an older snapshot if there is one),
        then catch up with the store."""
        assert isinstance(self.bm25, SqliteBM25Index)
        with self._lock:
            missing = False
            if not self.bm25.exists():
                with self._writing():
                    if not self.bm25.exists():  # not created by another handle meanwhile
                        missing = self._create_tables()
            self.refresh()
            self.rebuilt = self.rebuilt or (missing and len(self.bm25) > 0)

    def _create_tables(self) -> bool:
        """Create the FTS5 tables (inside the caller's transaction): from the stored bm25s
        snapshot of an older version when it decodes, else empty (the refresh that follows
        fills them). Returns True when nothing usable was stored."""
        assert isinstance(self.bm25, SqliteBM25Index)
        self.bm25.create()
        raw = self.store.get_blob(BLOB_NAME)
        if raw is None:
            return True
        try:
            old, generation = self._decode(raw)
        except Exception as exc:  # noqa: BLE001 - any damage means: rebuild
            logger.warning("the stored BM25 snapshot is damaged (%s); building the keyword index from the source "
                           "store", exc)
            return True
        logger.warning("migrating the keyword index of %s: the BM25 snapshot (%d chunks, generation %d) becomes "
                       "incremental SQLite FTS5 tables (once; the snapshot is then removed)",
                       self.store, len(old), generation)
        self.bm25.add_encoded(old)
        self.bm25.generation = generation
        return False

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write transaction on the keyword tables, holding the source store's connection
        lock first: the store's own writes take that lock, then the file's write lock, so
        taking them in the same order here means a writer thread and a catching-up reader
        thread of one process never wait for each other's lock."""
        assert isinstance(self.bm25, SqliteBM25Index)
        with getattr(self.store, "_lock", None) or contextlib.nullcontext(), self.bm25.transaction():
            yield

    def _decode(self, raw: bytes) -> tuple[BM25Index, int]:
        if raw[:5] != _MAGIC:
            raise ValueError("bad magic (an older snapshot format)")
        (n,) = struct.unpack("<I", raw[5:9])
        head = json.loads(raw[9:9 + n])
        payload = raw[9 + n:]
        if hashlib.sha256(payload).hexdigest() != head["sha256"]:
            raise ValueError("checksum mismatch")
        with np.load(io.BytesIO(payload), allow_pickle=False) as data:
            bm25 = BM25Index.from_bytes(data["bm25"].tobytes())
        return bm25, int(head["generation"])

    @staticmethod
    def _group(ids: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for cid in ids:
            parsed = parse_chunk_id(cid)
            if parsed is not None:
                out.setdefault(parsed.source_id, []).append(cid)
        return out

    def refresh(self) -> bool:
        """Bring BM25 up to the store's generation; returns True when something changed."""
        if self.incremental:
            return self._refresh_tables()
        with self._lock:
            current = self.store.generation()
            if current == self.generation:
                return False
            changed = None if self.generation < 0 else self.store.changes_since(self.generation)
            if changed is None:
                self.rebuilt = self.generation >= 0  # the log no longer reaches back to the snapshot
                self.rebuild()
                return True
            self._apply(changed)
            self.generation = current
            return True

    def _refresh_tables(self) -> bool:
        """Replay the store's change log into the FTS5 tables and commit it with the new
        generation in one transaction (cost: the changed sources)."""
        assert isinstance(self.bm25, SqliteBM25Index)
        with self._lock:
            stored = self.bm25.generation
            if stored == self.store.generation():
                self.generation = stored
                return False
            with self._writing():
                stored = self.bm25.generation  # again, inside the transaction: another handle may have caught up
                current = self.store.generation()
                if stored == current:
                    self.generation = stored
                    return False
                changed = None if stored < 0 else self.store.changes_since(stored)
                if changed is None:
                    self.rebuilt = self.rebuilt or stored >= 0  # the log no longer reaches back (or the store is older)
                    self.rebuild()
                else:
                    self._apply(changed)
                    self.bm25.generation = current
            self.generation = current
            return True

    def rebuild(self) -> None:
        """BM25 from scratch over every complete source of the store."""
        if self.incremental:
            assert isinstance(self.bm25, SqliteBM25Index)
            with self._lock, self._writing():
                generation = self.store.generation()
                self.bm25.clear()
                heads = self.store.heads()
                self._apply({sid for sid, head in heads.items() if head.state == "complete"}, heads)
                self.bm25.generation = self.generation = generation
            return
        with self._lock:
            generation = self.store.generation()
            self.bm25 = BM25Index(**self.bm25_kwargs)
            self._by_source = {}
            heads = self.store.heads()
            self._apply({sid for sid, head in heads.items() if head.state == "complete"}, heads)
            self.generation = generation

    def _apply(self, sids: set[str], heads: dict | None = None) -> None:
        """Make BM25 agree with the store for these sources."""
        if not sids:
            return
        heads = heads if heads is not None else self.store.heads(sorted(sids))
        if isinstance(self.bm25, SqliteBM25Index):
            self.bm25.delete_groups(sorted(sids))
        else:
            self.bm25.delete([cid for sid in sids for cid in self._by_source.pop(sid, [])])
        live = sorted(sid for sid in sids if sid in heads and heads[sid].state == "complete")
        for b in range(0, len(live), 200):
            records = self.store.get_many(live[b:b + 200])
            ids, texts = [], []
            for sid in live[b:b + 200]:
                rec = records.get(sid)
                if rec is None or not rec.complete:  # changed again meanwhile: the next refresh sees it
                    continue
                cids = rec.chunk_ids()
                if not self.incremental:
                    self._by_source[sid] = cids
                ids.extend(cids)
                texts.extend(self.index_text(rec.chunk_text(i)) for i in range(rec.n_chunks))
            self.bm25.upsert(ids, texts)

    # ----------------------------------------------------------------- saving
    def save(self) -> None:
        """Store the snapshot (call while holding the writer lock, after :meth:`refresh`).

        Incremental backend: every refresh commits already, so this only catches up
        (and removes a migrated snapshot that a crash left behind)."""
        if self.incremental:
            with self._lock:
                self.refresh()
                if self.store.get_blob(BLOB_NAME) is not None:
                    self.store.put_blob(BLOB_NAME, None)
                self.rebuilt = False
            return
        with self._lock:
            out = io.BytesIO()
            np.savez(out, bm25=np.frombuffer(self.bm25.to_bytes(), dtype=np.uint8))
            payload = out.getvalue()
            head = json.dumps({"generation": self.generation, "sha256": hashlib.sha256(payload).hexdigest(),
                               "n_docs": len(self.bm25)}).encode()
            self.store.put_blob(BLOB_NAME, _MAGIC + struct.pack("<I", len(head)) + head + payload)
            self.rebuilt = False

    # -------------------------------------------------------------- querying
    def search(self, query: str, k: int, *, allow: Callable[..., Any] | None = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` best first (after catching up with the store); ``allow``:
        see :meth:`~.bm25.BM25Index.search` (a metadata filter's chunk predicate)."""
        self.refresh()
        return self.bm25.search(query, k, allow=allow)

    def __len__(self) -> int:
        return len(self.bm25)

    def sources(self) -> set[str]:
        if isinstance(self.bm25, SqliteBM25Index):
            return self.bm25.groups()
        return set(self._by_source)

    def check(self) -> list[str]:
        """Integrity problems of the stored keyword index (the FTS5 tables: reads them all;
        the snapshot backend checks its checksum on load instead); empty when sound."""
        return self.bm25.check() if isinstance(self.bm25, SqliteBM25Index) else []
