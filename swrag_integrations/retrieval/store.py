"""Source store: each source text stored once, with its per-chunk offset arrays.

Chroma keeps only what dense search needs (vector, ``source_id``, ``chunk_index``);
everything else about a chunk is a slice of its source: ``text[start:end]`` plus a row
of the source's int32 arrays (start, end, n_tokens, window bounds). Two backends:

* :class:`SqliteSourceStore` -- one SQLite file beside the Chroma data (local
  ``persist_directory``): text stored once, uncompressed, no full-text index.
* :class:`ChromaSourceStore` -- a ``<collection>_sources`` collection on the same
  Chroma client (server / in-memory clients, where no local directory is owned): one
  record per source with a 1-d placeholder vector, the text as its document.

Both cache decoded records in memory (bounded by characters) so a query touching a
large source does not reload it.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

__all__ = ["SourceRecord", "SqliteSourceStore", "ChromaSourceStore"]

# rows of SourceRecord.arrays
START, END, N_TOKENS, WIN_LO, WIN_HI, WIN_START, WIN_END = range(7)


@dataclass
class SourceRecord:
    """One source: its text, content hash, per-chunk arrays and user metadata.

    ``arrays`` has shape ``(7, n_chunks)``: start, end, n_tokens, window lower/upper
    chunk bound, window start/end character offset. ``complete`` is False while its
    vectors are being written (then a re-add resumes the job).
    """

    source_id: str
    content_hash: str
    text: str
    arrays: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)
    complete: bool = True

    @property
    def n_chunks(self) -> int:
        return int(self.arrays.shape[1])

    def chunk_text(self, i: int) -> str:
        return self.text[int(self.arrays[START, i]):int(self.arrays[END, i])]

    def chunk_metadata(self, i: int, medium_size: int) -> dict[str, Any]:
        a = self.arrays
        meta = dict(self.metadata)
        meta.update(
            source_id=self.source_id, level="small", chunk_index=int(i), start_index=int(a[START, i]),
            end_index=int(a[END, i]), n_tokens=int(a[N_TOKENS, i]), window_lower_bound=int(a[WIN_LO, i]),
            window_upper_bound=int(a[WIN_HI, i]), window_start_index=int(a[WIN_START, i]),
            window_end_index=int(a[WIN_END, i]), medium_index=int(i) // medium_size, n_chunks=self.n_chunks,
            content_hash=self.content_hash, chunk_id=f"{self.source_id}:s:{int(i)}",
        )
        return meta

    def medium_metadata(self, j: int, medium_size: int) -> dict[str, Any]:
        a = self.arrays
        first = int(j) * medium_size
        last = min(first + medium_size, self.n_chunks) - 1
        sl = slice(first, last + 1)
        meta = dict(self.metadata)
        meta.update(
            source_id=self.source_id, level="medium", medium_index=int(j), first_chunk=first, last_chunk=last,
            start_index=int(a[START, first]), end_index=int(a[END, last]), n_tokens=int(a[N_TOKENS, sl].sum()),
            window_lower_bound=int(a[WIN_LO, sl].min()), window_upper_bound=int(a[WIN_HI, sl].max()),
            window_start_index=int(a[WIN_START, sl].min()), window_end_index=int(a[WIN_END, sl].max()),
            n_chunks=self.n_chunks, content_hash=self.content_hash, chunk_id=f"{self.source_id}:m:{int(j)}",
        )
        return meta

    def n_mediums(self, medium_size: int) -> int:
        return -(-self.n_chunks // medium_size)

    # packing
    def arrays_bytes(self) -> bytes:
        if self.arrays.size and int(self.arrays.max()) >= 2**31:
            raise ValueError(f"source {self.source_id!r} is too long for the index (offsets >= 2**31)")
        return np.ascontiguousarray(self.arrays, dtype="<i4").tobytes()

    @staticmethod
    def arrays_from_bytes(raw: bytes, n_chunks: int) -> np.ndarray:
        arr = np.frombuffer(raw, dtype="<i4").astype(np.int64)
        return arr.reshape(7, n_chunks)


class _Cache:
    """LRU of SourceRecords bounded by total characters."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[str, SourceRecord] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, sid: str) -> SourceRecord | None:
        with self._lock:
            rec = self._items.get(sid)
            if rec is not None:
                self._items.move_to_end(sid)
            return rec

    def put(self, rec: SourceRecord) -> None:
        with self._lock:
            self._drop(rec.source_id)
            self._items[rec.source_id] = rec
            self._chars += len(rec.text)
            while self._chars > self.max_chars and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._chars -= len(old.text)

    def _drop(self, sid: str) -> None:
        old = self._items.pop(sid, None)
        if old is not None:
            self._chars -= len(old.text)

    def drop(self, sids: Iterable[str]) -> None:
        with self._lock:
            for sid in sids:
                self._drop(sid)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0


class _BaseStore:
    def __init__(self, cache_chars: int = 64_000_000) -> None:
        self._cache = _Cache(cache_chars)

    # backend API
    def _load(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        raise NotImplementedError

    def _hashes(self, sids: Sequence[str]) -> dict[str, tuple[str, bool]]:
        raise NotImplementedError

    def get_many(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        """Records by source id (missing ids are left out)."""
        out: dict[str, SourceRecord] = {}
        missing = []
        for sid in dict.fromkeys(sids):
            rec = self._cache.get(sid)
            if rec is None:
                missing.append(sid)
            else:
                out[sid] = rec
        if missing:
            for sid, rec in self._load(missing).items():
                self._cache.put(rec)
                out[sid] = rec
        return out

    def get(self, sid: str) -> SourceRecord | None:
        return self.get_many([sid]).get(sid)

    def status(self, sids: Sequence[str]) -> dict[str, tuple[str, bool]]:
        """``{source_id: (content_hash, complete)}`` read from the backend (not the cache)."""
        return self._hashes(list(dict.fromkeys(sids)))


class SqliteSourceStore(_BaseStore):
    """Sources in one SQLite file (text stored once, arrays as int32 blobs)."""

    def __init__(self, path: str | Path, cache_chars: int = 64_000_000) -> None:
        super().__init__(cache_chars)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._con = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        with self._lock:
            self._con.execute(
                "CREATE TABLE IF NOT EXISTS sources (source_id TEXT PRIMARY KEY, content_hash TEXT NOT NULL, "
                "complete INTEGER NOT NULL, n_chunks INTEGER NOT NULL, metadata TEXT NOT NULL, "
                "arrays BLOB NOT NULL, text TEXT NOT NULL)"
            )

    def _rows(self, sql: str, sids: Sequence[str]) -> Iterator[tuple]:
        with self._lock:
            for b in range(0, len(sids), 500):
                part = list(sids[b:b + 500])
                marks = ",".join("?" * len(part))
                yield from self._con.execute(sql.format(marks=marks), part).fetchall()

    def _load(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        out = {}
        sql = ("SELECT source_id, content_hash, complete, n_chunks, metadata, arrays, text FROM sources "
               "WHERE source_id IN ({marks})")
        for sid, h, complete, n, meta, raw, text in self._rows(sql, sids):
            out[sid] = SourceRecord(sid, h, text, SourceRecord.arrays_from_bytes(raw, n), json.loads(meta), bool(complete))
        return out

    def _hashes(self, sids: Sequence[str]) -> dict[str, tuple[str, bool]]:
        sql = "SELECT source_id, content_hash, complete FROM sources WHERE source_id IN ({marks})"
        return {sid: (h, bool(c)) for sid, h, c in self._rows(sql, sids)}

    def put(self, records: Sequence[SourceRecord]) -> None:
        rows = [(r.source_id, r.content_hash, int(r.complete), r.n_chunks, json.dumps(r.metadata, ensure_ascii=False),
                 r.arrays_bytes(), r.text) for r in records]
        with self._lock:
            self._con.execute("BEGIN")
            try:
                self._con.executemany("INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
        self._cache.drop(r.source_id for r in records)

    def mark_complete(self, sids: Sequence[str]) -> None:
        with self._lock:
            for b in range(0, len(sids), 500):
                part = list(sids[b:b + 500])
                self._con.execute(f"UPDATE sources SET complete = 1 WHERE source_id IN ({','.join('?' * len(part))})", part)
        self._cache.drop(sids)

    def delete(self, sids: Sequence[str]) -> None:
        with self._lock:
            for b in range(0, len(sids), 500):
                part = list(sids[b:b + 500])
                self._con.execute(f"DELETE FROM sources WHERE source_id IN ({','.join('?' * len(part))})", part)
        self._cache.drop(sids)

    def clear(self) -> None:
        with self._lock:
            self._con.execute("DELETE FROM sources")
            self._con.execute("VACUUM")
        self._cache.clear()

    def ids(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._con.execute("SELECT source_id FROM sources ORDER BY source_id")]

    def n_chunks_of(self, sids: Sequence[str] | None) -> dict[str, int]:
        """``{source_id: n_chunks}`` of the given sources (all when ``None``)."""
        if sids is None:
            with self._lock:
                return dict(self._con.execute("SELECT source_id, n_chunks FROM sources").fetchall())
        return dict(self._rows("SELECT source_id, n_chunks FROM sources WHERE source_id IN ({marks})", list(sids)))

    def iter_records(self, batch: int = 200) -> Iterator[SourceRecord]:
        ids = self.ids()
        for b in range(0, len(ids), batch):
            yield from self._load(ids[b:b + batch]).values()

    def close(self) -> None:
        with self._lock:
            self._con.close()


class ChromaSourceStore(_BaseStore):
    """Sources as records of a ``<collection>_sources`` Chroma collection (server mode)."""

    def __init__(self, client: Any, name: str, cache_chars: int = 64_000_000) -> None:
        super().__init__(cache_chars)
        self.client = client
        self.name = name
        self.collection = client.get_or_create_collection(name, embedding_function=None, metadata={"swrag_role": "sources"})

    @staticmethod
    def _meta(r: SourceRecord) -> dict[str, Any]:
        return {
            "content_hash": r.content_hash, "complete": bool(r.complete), "n_chunks": r.n_chunks,
            "metadata_json": json.dumps(r.metadata, ensure_ascii=False),
            "arrays": base64.b64encode(r.arrays_bytes()).decode("ascii"),
        }

    def _load(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        out = {}
        for b in range(0, len(sids), 100):
            got = self.collection.get(ids=list(sids[b:b + 100]), include=["documents", "metadatas"])
            for sid, text, m in zip(got["ids"], got["documents"], got["metadatas"]):
                arrays = SourceRecord.arrays_from_bytes(base64.b64decode(m["arrays"]), int(m["n_chunks"]))
                out[sid] = SourceRecord(sid, m["content_hash"], text or "", arrays, json.loads(m["metadata_json"]),
                                        bool(m["complete"]))
        return out

    def _hashes(self, sids: Sequence[str]) -> dict[str, tuple[str, bool]]:
        out = {}
        for b in range(0, len(sids), 100):
            got = self.collection.get(ids=list(sids[b:b + 100]), include=["metadatas"])
            for sid, m in zip(got["ids"], got["metadatas"]):
                out[sid] = (m["content_hash"], bool(m["complete"]))
        return out

    def put(self, records: Sequence[SourceRecord]) -> None:
        for b in range(0, len(records), 50):
            part = records[b:b + 50]
            self.collection.upsert(ids=[r.source_id for r in part], embeddings=[[0.0] for _ in part],
                                   documents=[r.text for r in part], metadatas=[self._meta(r) for r in part])
        self._cache.drop(r.source_id for r in records)

    def mark_complete(self, sids: Sequence[str]) -> None:
        for b in range(0, len(sids), 100):
            part = list(sids[b:b + 100])
            self.collection.update(ids=part, metadatas=[{"complete": True} for _ in part])
        self._cache.drop(sids)

    def delete(self, sids: Sequence[str]) -> None:
        for b in range(0, len(sids), 100):
            self.collection.delete(ids=list(sids[b:b + 100]))
        self._cache.drop(sids)

    def clear(self) -> None:
        self.client.delete_collection(self.name)
        self.collection = self.client.get_or_create_collection(self.name, embedding_function=None,
                                                               metadata={"swrag_role": "sources"})
        self._cache.clear()

    def ids(self) -> list[str]:
        return sorted(self.collection.get(include=[])["ids"])

    def n_chunks_of(self, sids: Sequence[str] | None) -> dict[str, int]:
        """``{source_id: n_chunks}`` of the given sources (all when ``None``)."""
        if sids is not None:
            out = {}
            for b in range(0, len(sids), 100):
                got = self.collection.get(ids=list(sids[b:b + 100]), include=["metadatas"])
                out.update((sid, int(m["n_chunks"])) for sid, m in zip(got["ids"], got["metadatas"]))
            return out
        out = {}
        page, offset = 1000, 0
        while True:
            # metadata includes the packed arrays; page to keep responses small
            got = self.collection.get(include=["metadatas"], limit=page, offset=offset)
            for sid, m in zip(got["ids"], got["metadatas"]):
                out[sid] = int(m["n_chunks"])
            offset += len(got["ids"])
            if len(got["ids"]) < page:
                return out

    def iter_records(self, batch: int = 50) -> Iterator[SourceRecord]:
        ids = self.ids()
        for b in range(0, len(ids), batch):
            yield from self._load(ids[b:b + batch]).values()

    def close(self) -> None:
        pass
