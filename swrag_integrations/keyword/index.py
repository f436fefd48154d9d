"""The keyword side of an index: BM25 over the complete sources' small chunks.

`KeywordIndex` is derived from the source store and never trusted beyond it.

**Local index (SQLite source store): incremental.** BM25 lives in a tantivy index
(`TantivyBM25Index`) in a directory beside the source store's file
(``<dir>/sources/<collection>.keyword``). Catching up with the store's change log
deletes the changed sources (one term each) and adds their chunks again, in one
tantivy commit; the store generation it reflects is recorded after the commit. A crash
before the commit leaves the previous commit; a crash between the commit and the
record leaves an older generation than the contents: either way the next open replays
the log from the recorded generation, and replaying a source is idempotent (its
documents are deleted, then written from the store). Any handle (writer or reader) may
commit a catch-up, one at a time (the keyword index's own writer lock); the store
generation is read before the changes, so what is recorded never runs ahead of what was
applied. Other processes' commits are seen on the next query (the searcher reloads when
the recorded state changed). The directory carries a random label that the store keeps
too (blob ``keyword-owner``): one beside another store (the file replaced) is rebuilt. An index written by an older version (a bm25s snapshot
blob) is migrated on first open (logged) without tokenising again. Scores are tantivy's
BM25 (``k1 = 1.2``, quantised document lengths: see `TantivyBM25Index`);
giving ``k1``, ``b`` or ``method`` selects the snapshot backend instead.

**Other source stores (a Chroma server, LangChain byte stores): a snapshot.** Its
snapshot (a blob in the source store: the `BM25Index`, the store
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
import uuid
from pathlib import Path
from typing import Any, Callable

import numpy as np

from swrag_integrations.keyword.bm25 import BM25Index
from swrag_integrations.keyword.tantivy import TantivyBM25Index
from swrag_integrations.engine.ids import parse_chunk_id

__all__ = ["KeywordIndex", "StorageKeyword", "keyword_mode"]

logger = logging.getLogger(__name__)

BLOB_NAME = "bm25"
OWNER_BLOB = "keyword-owner"  # a random label of the store, also kept by its tantivy index
_MAGIC = b"SWBM2"


def _source_of(chunk_id: str) -> str:
    parsed = parse_chunk_id(chunk_id)
    return parsed.source_id if parsed is not None else chunk_id


def keyword_directory(store: Any) -> Path | None:
    """Where a local source store's keyword index lives (``<file stem>.keyword`` beside
    its SQLite file), or ``None`` for other stores."""
    from swrag_integrations.stores.sources import SqliteSourceStore

    return store.path.with_name(store.path.stem + ".keyword") if isinstance(store, SqliteSourceStore) else None


class KeywordIndex:
    """BM25 over chunk ids ``<source_id>:s:<i>``, kept in step with a source store.

    Args:
        store: the `SourceStore`.
        index_text: ``chunk text -> text to index`` (identity by default).
        bm25_kwargs: passed to `BM25Index` (on a rebuild) or
            `TantivyBM25Index` (``k1``, ``b`` or ``method``, which tantivy
            does not take, select the snapshot backend).

    ``incremental`` tells which backend this handle uses.
    """

    def __init__(self, store: Any, *, index_text: Callable[[str], str] | None = None, **bm25_kwargs: Any) -> None:
        self.store = store
        self.index_text = index_text or (lambda text: text)
        self.bm25_kwargs = bm25_kwargs
        directory = None if {"k1", "b", "method"} & set(bm25_kwargs) else keyword_directory(store)
        self.bm25: BM25Index | TantivyBM25Index
        if directory is not None:
            self.bm25 = TantivyBM25Index(directory, group=_source_of, **bm25_kwargs)
        else:
            self.bm25 = BM25Index(**bm25_kwargs)
        self.generation = -1
        self.rebuilt = False  # the last refresh had to rebuild (reported by status)
        self._by_source: dict[str, list[str]] = {}
        self._lock = threading.RLock()

    @property
    def incremental(self) -> bool:
        """This handle's backend is the tantivy index (a local source store), not a snapshot."""
        return isinstance(self.bm25, TantivyBM25Index)

    # ---------------------------------------------------------------- loading
    def load(self) -> None:
        """Load the stored snapshot if it is sound, then catch up with the store."""
        if self.incremental:
            self._load_incremental()
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

    def _load_incremental(self) -> None:
        """Open the tantivy index, creating it (from an older snapshot if there is one),
        then catch up with the store."""
        assert isinstance(self.bm25, TantivyBM25Index)
        with self._lock:
            missing = False
            self.bm25.owner = self._owner(create=False)
            if not self.bm25.exists():
                with self._writing():
                    self.bm25.owner = self._owner(create=True)
                    if not self.bm25.exists():  # not created by another handle meanwhile
                        missing = self._create_incremental()
            self.refresh()
            self.rebuilt = self.rebuilt or (missing and len(self.bm25) > 0)

    def _owner(self, *, create: bool) -> str:
        """The store's label that its tantivy index must carry (written into the store when
        ``create`` and there is none: under the keyword writer lock). A keyword directory
        beside another store (the store file replaced or recreated, e.g. at the same
        generation) carries another label, so it is rebuilt instead of trusted."""
        raw = self.store.get_blob(OWNER_BLOB)
        if raw is None and create:
            raw = uuid.uuid4().hex.encode()
            self.store.put_blob(OWNER_BLOB, raw)
        return "" if raw is None else raw.decode("ascii", "replace")

    def _create_incremental(self) -> bool:
        """Create the tantivy index (inside the caller's transaction): from the stored bm25s
        snapshot of an older version when it decodes, else empty (the refresh that follows
        fills it). Returns True when nothing usable was stored."""
        assert isinstance(self.bm25, TantivyBM25Index)
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
                       "an incremental tantivy index (once; the snapshot is then removed)",
                       self.store, len(old), generation)
        self.bm25.add_encoded(old)
        self.bm25.generation = generation
        return False

    def _writing(self) -> contextlib.AbstractContextManager:
        """A write transaction on the tantivy index (its writer lock, then one commit). It
        holds no lock of the source store: only reads of the store happen inside."""
        assert isinstance(self.bm25, TantivyBM25Index)
        return self.bm25.transaction()

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

    def refresh(self, generation: int | None = None) -> bool:
        """Bring BM25 up to the store's generation; returns True when something changed
        (``generation``: the store's as the caller's search read it; ``None``: read here)."""
        if self.incremental:
            return self._refresh_incremental(generation)
        with self._lock:
            current = self.store.generation() if generation is None else generation
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

    def _refresh_incremental(self, generation: int | None = None) -> bool:
        """Replay the store's change log into the tantivy index, commit, record the new
        generation (cost: the changed sources; ``generation``: see `refresh`)."""
        assert isinstance(self.bm25, TantivyBM25Index)
        with self._lock:
            stored = self.bm25.generation
            if stored == (self.store.generation() if generation is None else generation):
                self.generation = stored
                return False
            with self._writing():
                stored = self.bm25.generation  # again, under the writer lock: another handle may have caught up
                current = self.store.generation()  # before reading the changes: the record never runs ahead
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
            assert isinstance(self.bm25, TantivyBM25Index)
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
        if isinstance(self.bm25, TantivyBM25Index):
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
            if isinstance(self.bm25, TantivyBM25Index):
                self.bm25.add(ids, texts)  # their sources were deleted above
            else:
                self.bm25.upsert(ids, texts)

    # ----------------------------------------------------------------- saving
    def save(self) -> None:
        """Store the snapshot (call while holding the writer lock, after `refresh`).

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
    def search(self, query: str, k: int, *, allow: Callable[..., Any] | None = None,
               generation: int | None = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` best first (after catching up with the store); ``allow``:
        see `search` (a metadata filter's chunk predicate);
        ``generation``: the search's snapshot of the store's (see `refresh`)."""
        self.refresh(generation)
        return self.bm25.search(query, k, allow=allow)

    def __len__(self) -> int:
        return len(self.bm25)

    def sources(self) -> set[str]:
        """The ids of the sources that have keyword documents."""
        if isinstance(self.bm25, TantivyBM25Index):
            return self.bm25.groups()
        return set(self._by_source)

    def check(self) -> list[str]:
        """Integrity problems of the stored keyword index (the tantivy index: opened afresh
        and read whole; the snapshot backend checks its checksum on load instead); empty
        when sound."""
        return self.bm25.check() if isinstance(self.bm25, TantivyBM25Index) else []


class StorageKeyword:
    """The keyword side of an index whose storage searches keywords itself
    (``vectors.keyword_search(query, k, native=...)``, e.g. `MilvusStorage`):
    the surface of `KeywordIndex` the writer, the health checks and
    `CJKBM25Retriever` use, with nothing kept in this process (the
    storage derives its BM25 from the chunks it holds, so there is no snapshot to load,
    save or rebuild)."""

    rebuilt = False

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @property
    def generation(self) -> int:
        """Always the store's: the storage is written together with the sources."""
        return self.engine.store.generation()

    def load(self) -> None:
        """Nothing to load."""

    def refresh(self) -> bool:
        """Nothing to catch up with (``False``)."""
        return False

    def save(self) -> None:
        """Nothing to save."""

    def rebuild(self) -> None:
        """Nothing to rebuild (the storage's `rebuild` covers it)."""

    def search(self, query: str, k: int, *, allow: Callable[..., Any] | None = None,
               native: dict[str, Any] | None = None, generation: int | None = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` best first (`storage_keyword_hits`)."""
        return self.engine.storage_keyword_hits(query, k, allow=allow, native=native, generation=generation)

    def __len__(self) -> int:
        """Chunks the storage holds (each one is searchable by keyword)."""
        return int(self.engine.vectors.count() or 0)


def keyword_mode(keyword_search: str, vectors: Any) -> str:
    """``"store"`` or ``"local"`` for the engine's ``keyword_search`` argument."""
    offered = callable(getattr(vectors, "keyword_search", None))
    if keyword_search == "auto":
        return "store" if offered else "local"
    if keyword_search == "local":
        return "local"
    if keyword_search == "store":
        if not offered:
            raise ValueError(f"keyword_search='store': the vector store ({vectors.kind}) has no keyword search of "
                             "its own; use 'auto' or 'local'")
        return "store"
    raise ValueError(f"keyword_search must be 'auto', 'store' or 'local', got {keyword_search!r}")
