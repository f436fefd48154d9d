"""The keyword side of an index: BM25 over the complete sources' small chunks.

:class:`KeywordIndex` is derived from the source store and never trusted beyond it:
its snapshot (a blob in the source store: the :class:`~.bm25.BM25Index`, the store
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

import hashlib
import io
import json
import logging
import struct
import threading
from typing import Any, Callable

import numpy as np

from .bm25 import BM25Index
from .ids import parse_chunk_id

__all__ = ["KeywordIndex"]

logger = logging.getLogger(__name__)

BLOB_NAME = "bm25"
_MAGIC = b"SWBM2"


class KeywordIndex:
    """BM25 over chunk ids ``<source_id>:s:<i>``, kept in step with a source store.

    Args:
        store: the :class:`~.sources.SourceStore`.
        index_text: ``chunk text -> text to index`` (identity by default).
        bm25_kwargs: passed to :class:`~.bm25.BM25Index` on a rebuild.
    """

    def __init__(self, store: Any, *, index_text: Callable[[str], str] | None = None, **bm25_kwargs: Any) -> None:
        self.store = store
        self.index_text = index_text or (lambda text: text)
        self.bm25_kwargs = bm25_kwargs
        self.bm25 = BM25Index(**bm25_kwargs)
        self.generation = -1
        self.rebuilt = False  # the last refresh had to rebuild (reported by status)
        self._by_source: dict[str, list[str]] = {}
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- loading
    def load(self) -> None:
        """Load the stored snapshot if it is sound, then catch up with the store."""
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

    def rebuild(self) -> None:
        """BM25 from scratch over every complete source of the store."""
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
        stale = [cid for sid in sids for cid in self._by_source.pop(sid, [])]
        self.bm25.delete(stale)
        live = sorted(sid for sid in sids if sid in heads and heads[sid].state == "complete")
        for b in range(0, len(live), 200):
            records = self.store.get_many(live[b:b + 200])
            ids, texts = [], []
            for sid in live[b:b + 200]:
                rec = records.get(sid)
                if rec is None or not rec.complete:  # changed again meanwhile: the next refresh sees it
                    continue
                cids = rec.chunk_ids()
                self._by_source[sid] = cids
                ids.extend(cids)
                texts.extend(self.index_text(rec.chunk_text(i)) for i in range(rec.n_chunks))
            self.bm25.upsert(ids, texts)

    # ----------------------------------------------------------------- saving
    def save(self) -> None:
        """Store the snapshot (call while holding the writer lock, after :meth:`refresh`)."""
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
        return set(self._by_source)
