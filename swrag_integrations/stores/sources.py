"""Source stores: the one truth of an index.

A source store keeps every source once (`SourceRecord`: exact text,
chunk offsets, state), the index's manifest, a numbered log of changes, and the
derived keyword index as a blob. Everything else (vectors, BM25) is derived from it
and checked against it. Two implementations of `SourceStore`:

* `SqliteSourceStore` -- one SQLite file (the default for a local index):
  changes are transactions, readers never block writers (WAL), and the writer lock
  is a file lock beside the database (``filelock``).
* `KVSourceStore` -- any LangChain ``BaseStore[str, bytes]`` (``LocalFileStore``,
  ``InMemoryByteStore``, Redis, ...) or a Chroma collection through
  `ChromaByteStore` (the default when the vectors live on a Chroma server).
  The writer lock is a lease record (owner, expiry and an *epoch* that grows by one
  with every acquisition), renewed by a background thread for as long as the lock is
  held. The epoch is a fencing token: every write of the holder (records, states,
  manifest, blobs) first checks that the lease still carries its epoch, and the index's
  writer checks it again right before every vector write
  (`KVSourceStore.check_writer`); a writer whose lease expired and was taken by
  another one raises `LeaseLostError` and writes nothing more.

The *generation* counts changes: every ``put``/``set_state``/``remove`` call bumps it
once and logs the source ids it touched, so a derived part that remembers the
generation it reflects can catch up by replaying `SourceStore.changes_since`.
The record cache of a store is such a derived part: before any record is served from
it, the cache replays the change log since the generation it last saw and drops what
another handle or process changed, so a long-lived handle never uses replaced text.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np

from swrag_integrations.engine.records import STATES, SourceRecord
from swrag_integrations.core.paths import private_file

__all__ = ["SourceStore", "RecordHead", "SqliteSourceStore", "KVSourceStore", "ChromaByteStore", "LockTimeout",
           "SourceStoreError", "LeaseLostError"]

logger = logging.getLogger(__name__)

_LOG_KEEP = 200_000  # change-log rows kept; older generations make readers rebuild instead of catching up
_BLOB_PART = 4 << 20


class SourceStoreError(RuntimeError):
    """The source store is missing, unreadable or inconsistent (the message says how to repair it)."""


class LockTimeout(TimeoutError):
    """Another writer held the index for longer than the timeout."""


class LeaseLostError(SourceStoreError):
    """This writer's lease expired and another writer took the index: it stopped writing."""


class RecordHead(NamedTuple):
    """What a store knows of a source without loading its text."""

    content_hash: str
    state: str
    id_span: int
    n_chunks: int
    origin: str | None


@runtime_checkable
class SourceStore(Protocol):
    """What `SlidingWindowIndex` needs from a source store."""

    def get_many(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        """The records of these sources as the store holds them now.

        Args:
            sids: source ids; unknown ones are left out of the result.

        Returns:
            ``{source id: SourceRecord}``, text included.
        """

    def heads(self, sids: Sequence[str] | None = None) -> dict[str, RecordHead]:
        """What the store knows of sources without loading their text.

        Args:
            sids: source ids (unknown ones are left out), or ``None`` for every source.

        Returns:
            ``{source id: RecordHead}``.
        """

    def unfinished(self) -> dict[str, RecordHead]:
        """The heads of the sources that are not ``complete`` (``pending`` or
        ``deleting``: what an interrupted writer left); every write checks them first.

        Returns:
            ``{source id: RecordHead}``.
        """

    def put(self, records: Sequence[SourceRecord]) -> int:
        """Write (or replace) records, and log their ids as one change.

        Args:
            records: the records, each with its text, chunk offsets and state.

        Returns:
            The new generation.

        Raises:
            LeaseLostError: a store fenced by a lease lost it to another writer.
        """

    def set_state(self, sids: Sequence[str], state: str, *, id_span: int | None = None) -> int:
        """Set the state of sources (unknown ids are skipped), logged as one change.

        Args:
            sids: the source ids.
            state: one of ``STATES`` (``pending``, ``complete``, ``deleting``).
            id_span: ``None`` keeps each source's vector-id span; a negative value
                shrinks it to the source's chunk count (once stale vectors are gone);
                otherwise the span becomes at least this value.

        Returns:
            The new generation.

        Raises:
            ValueError: ``state`` is not one of ``STATES``.
            LeaseLostError: a store fenced by a lease lost it to another writer.
        """

    def remove(self, sids: Sequence[str]) -> int:
        """Delete sources where present, logged as one change.

        Args:
            sids: the source ids.

        Returns:
            The new generation.

        Raises:
            LeaseLostError: a store fenced by a lease lost it to another writer.
        """

    def generation(self) -> int:
        """The number of the latest change (0 for a new store); every ``put``,
        ``set_state`` and ``remove`` raises it by one.

        Returns:
            The current generation.
        """

    def changes_since(self, generation: int) -> set[str] | None:
        """The source ids changed after ``generation``, from the change log.

        Args:
            generation: a generation this caller saw earlier.

        Returns:
            The ids (empty when nothing changed), or ``None`` when the log no longer
            reaches back that far or ``generation`` is ahead of the store: the caller
            then rebuilds what it derived.
        """

    def get_meta(self) -> dict[str, Any]:
        """The index's manifest (``{}`` when none was written).

        Returns:
            The manifest as written by `set_meta`.
        """

    def set_meta(self, meta: dict[str, Any]) -> None:
        """Replace the index's manifest.

        Args:
            meta: the manifest (JSON-serialisable).

        Raises:
            LeaseLostError: a store fenced by a lease lost it to another writer.
        """

    def get_blob(self, name: str) -> bytes | None:
        """A named blob (e.g. the keyword index), whole or not at all.

        Args:
            name: the blob's name.

        Returns:
            Its bytes, or ``None`` when there is none.
        """

    def put_blob(self, name: str, data: bytes | None) -> None:
        """Write (or replace) a named blob so that readers never see it half written.

        Args:
            name: the blob's name.
            data: its bytes, or ``None`` to delete it.

        Raises:
            LeaseLostError: a store fenced by a lease lost it to another writer.
        """

    def writer_lock(self, timeout: float) -> contextlib.AbstractContextManager:
        """The index's exclusive writer lock, held for the ``with`` block.

        Args:
            timeout: seconds to wait for another writer to release it.

        Returns:
            A context manager holding the lock while entered.

        Raises:
            LockTimeout: on entering, another writer held it for over ``timeout`` seconds.
        """

    def check(self) -> list[str]:
        """Check the store's integrity.

        Returns:
            One line per problem found; empty when the store is sound.
        """

    def clear(self) -> None:
        """Delete every source, the change log and the blobs (the writer lock stays;
        a SQLite store keeps its manifest and generation, a key-value store drops them).

        Raises:
            LeaseLostError: a store fenced by a lease lost it to another writer.
        """

    def close(self) -> None:
        """Release the store's resources (its database connection); the handle is not
        used afterwards."""


class _Cache:
    """LRU of SourceRecords bounded by total characters (shared by the stores)."""

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


class _CachedStore:
    """``get_many`` through a record cache that is checked against the change log.

    Records are immutable once loaded, but another handle (or process) may replace or
    remove a source at any time; before records are served from the cache, the cache
    replays `changes_since` the generation it last saw and drops every source
    changed since (all of them when the log no longer reaches back). Subclasses
    provide ``_load``, ``generation`` and ``changes_since``.
    """

    def unfinished(self) -> dict[str, RecordHead]:
        """Heads of the sources that are not ``complete`` (``pending`` or ``deleting``: what an
        interrupted writer left). Every write checks for them first, so a store that can
        answer without listing every source overrides this (SQLite: an index on ``state``)."""
        return {sid: h for sid, h in self.heads().items() if h.state != "complete"}

    def __init__(self, cache_chars: int) -> None:
        self._cache = _Cache(cache_chars)
        self._cache_generation = -1  # the store generation the cached records are known to reflect
        self._cache_sync = threading.Lock()

    def _load(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        raise NotImplementedError

    def generation(self) -> int:
        raise NotImplementedError

    def changes_since(self, generation: int) -> set[str] | None:
        raise NotImplementedError

    def _sync_cache(self) -> int:
        """Drop cached records changed since the cache last looked; returns the generation
        the cache now reflects (records loaded after this call are at least that new)."""
        with self._cache_sync:
            current = self.generation()
            seen = self._cache_generation
            if current != seen:
                changed = self.changes_since(seen) if 0 <= seen < current else None
                if changed is None:
                    self._cache.clear()
                else:
                    self._cache.drop(changed)
                self._cache_generation = current
            return current

    def get_many(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        """Records by source id (unknown ids are left out), as the store holds them now."""
        seen = self._sync_cache()
        out: dict[str, SourceRecord] = {}
        missing = []
        for sid in dict.fromkeys(sids):
            rec = self._cache.get(sid)
            if rec is None:
                missing.append(sid)
            else:
                out[sid] = rec
        if missing:
            loaded = self._load(missing)
            out.update(loaded)
            with self._cache_sync:
                # another thread synced meanwhile: these records may predate what it dropped
                if self._cache_generation == seen:
                    for rec in loaded.values():
                        self._cache.put(rec)
        return out

    def get(self, sid: str) -> SourceRecord | None:
        return self.get_many([sid]).get(sid)

    def iter_records(self, sids: Sequence[str] | None = None, batch: int = 200) -> Iterator[SourceRecord]:
        """All records (or those of ``sids``), loaded in batches (not cached)."""
        ids = sorted(self.heads()) if sids is None else list(sids)  # type: ignore[attr-defined]
        for b in range(0, len(ids), batch):
            yield from self._load(ids[b:b + batch]).values()


# --------------------------------------------------------------------------- SQLite


class SqliteSourceStore(_CachedStore):
    """Sources in one SQLite file (text stored once, chunk arrays as int32 blobs).

    Args:
        path: the database file (created with its folder if missing).
        cache_chars: characters of decoded records kept in memory.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS sources (source_id TEXT PRIMARY KEY, content_hash TEXT NOT NULL, "
        "state TEXT NOT NULL, id_span INTEGER NOT NULL, n_chunks INTEGER NOT NULL, origin TEXT, "
        "metadata TEXT NOT NULL, arrays BLOB NOT NULL, windows BLOB, text TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS sources_origin ON sources(origin)",
        "CREATE INDEX IF NOT EXISTS sources_state ON sources(state)",  # unfinished(): no scan per write
        "CREATE TABLE IF NOT EXISTS changes (generation INTEGER NOT NULL, source_id TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS changes_generation ON changes(generation)",
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS blobs (name TEXT PRIMARY KEY, data BLOB NOT NULL)",
    )

    def __init__(self, path: str | os.PathLike, cache_chars: int = 64_000_000) -> None:
        super().__init__(cache_chars)
        self.path = Path(path)
        private_file(self.path)  # 0600 in a 0700 folder when new (paths.py); -wal/-shm follow
        self._lock = threading.RLock()
        try:
            self._con = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=60)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA busy_timeout=60000")
            with self._write():
                for sql in self._SCHEMA:
                    self._con.execute(sql)
        except sqlite3.DatabaseError as exc:
            raise SourceStoreError(
                f"the source store {self.path} is not a readable SQLite database ({exc}). It holds the index's texts: "
                f"restore it from a backup, or move it away and index the files again (the vectors alone cannot "
                f"be served)"
            ) from exc

    def __repr__(self) -> str:
        return f"SqliteSourceStore({str(self.path)!r})"

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def _rows(self, sql: str, sids: Sequence[str]) -> Iterator[tuple]:
        with self._lock:
            for b in range(0, len(sids), 500):
                part = list(sids[b:b + 500])
                yield from self._con.execute(sql.format(marks=",".join("?" * len(part))), part).fetchall()

    def _load(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        sql = ("SELECT source_id, content_hash, state, id_span, n_chunks, metadata, arrays, windows, text "
               "FROM sources WHERE source_id IN ({marks})")
        return {sid: SourceRecord(sid, h, text, SourceRecord.arrays_from_bytes(raw, n), json.loads(meta), state, span,
                                  SourceRecord.windows_from_bytes(win))
                for sid, h, state, span, n, meta, raw, win, text in self._rows(sql, sids)}

    _HEAD_COLUMNS = "source_id, content_hash, state, id_span, n_chunks, origin"

    @staticmethod
    def _heads_of(rows: Iterable[tuple]) -> dict[str, RecordHead]:
        """Rows of ``_HEAD_COLUMNS`` as ``{source_id: RecordHead}``."""
        return {r[0]: RecordHead(r[1], r[2], int(r[3]), int(r[4]), r[5]) for r in rows}

    def unfinished(self) -> dict[str, RecordHead]:
        with self._lock:
            rows = self._con.execute(f"SELECT {self._HEAD_COLUMNS} FROM sources WHERE state != 'complete'").fetchall()
        return self._heads_of(rows)

    def heads(self, sids: Sequence[str] | None = None) -> dict[str, RecordHead]:
        cols = self._HEAD_COLUMNS
        if sids is None:
            with self._lock:
                rows = self._con.execute(f"SELECT {cols} FROM sources").fetchall()
        else:
            rows = list(self._rows(f"SELECT {cols} FROM sources WHERE source_id IN ({{marks}})", list(sids)))
        return self._heads_of(rows)

    def _log(self, sids: Sequence[str]) -> int:
        gen = self._generation_locked() + 1
        self._con.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(gen),))
        self._con.executemany("INSERT INTO changes VALUES (?, ?)", [(gen, sid) for sid in dict.fromkeys(sids)])
        if gen % 1000 == 0:
            self._con.execute("DELETE FROM changes WHERE rowid <= (SELECT MAX(rowid) FROM changes) - ?", (_LOG_KEEP,))
        return gen

    def put(self, records: Sequence[SourceRecord]) -> int:
        rows = [(r.source_id, r.content_hash, r.state, r.id_span, r.n_chunks, r.origin,
                 json.dumps(r.metadata, ensure_ascii=False), r.arrays_bytes(), r.windows_bytes(), r.text)
                for r in records]
        with self._write():
            self._con.executemany("INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            gen = self._log([r.source_id for r in records])
        self._cache.drop(r.source_id for r in records)
        return gen

    def set_state(self, sids: Sequence[str], state: str, *, id_span: int | None = None) -> int:
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {state!r}")
        sids = list(dict.fromkeys(sids))
        with self._write():
            for b in range(0, len(sids), 500):
                part = sids[b:b + 500]
                marks = ",".join("?" * len(part))
                if id_span is None:
                    self._con.execute(f"UPDATE sources SET state = ? WHERE source_id IN ({marks})", [state, *part])
                elif id_span < 0:  # shrink the id span to the chunk count (after stale vectors are gone)
                    self._con.execute(f"UPDATE sources SET state = ?, id_span = n_chunks WHERE source_id IN ({marks})",
                                      [state, *part])
                else:
                    self._con.execute(f"UPDATE sources SET state = ?, id_span = MAX(id_span, ?) "
                                      f"WHERE source_id IN ({marks})", [state, id_span, *part])
            gen = self._log(sids)
        self._cache.drop(sids)
        return gen

    def remove(self, sids: Sequence[str]) -> int:
        sids = list(dict.fromkeys(sids))
        with self._write():
            for b in range(0, len(sids), 500):
                part = sids[b:b + 500]
                self._con.execute(f"DELETE FROM sources WHERE source_id IN ({','.join('?' * len(part))})", part)
            gen = self._log(sids)
        self._cache.drop(sids)
        return gen

    def _generation_locked(self) -> int:
        row = self._con.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def generation(self) -> int:
        with self._lock:
            return self._generation_locked()

    def changes_since(self, generation: int) -> set[str] | None:
        with self._lock:
            current = self._generation_locked()
            if generation >= current:
                return set() if generation == current else None
            first = self._con.execute("SELECT MIN(generation) FROM changes").fetchone()[0]
            if first is None or first > generation + 1:
                return None
            rows = self._con.execute("SELECT DISTINCT source_id FROM changes WHERE generation > ?", (generation,))
            return {r[0] for r in rows}

    def get_meta(self) -> dict[str, Any]:
        with self._lock:
            row = self._con.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()
        return json.loads(row[0]) if row else {}

    def set_meta(self, meta: dict[str, Any]) -> None:
        with self._write():
            self._con.execute("INSERT OR REPLACE INTO meta VALUES ('manifest', ?)", (json.dumps(meta, sort_keys=True),))

    def get_blob(self, name: str) -> bytes | None:
        with self._lock:
            row = self._con.execute("SELECT data FROM blobs WHERE name = ?", (name,)).fetchone()
        return bytes(row[0]) if row else None

    def put_blob(self, name: str, data: bytes | None) -> None:
        with self._write():
            if data is None:
                self._con.execute("DELETE FROM blobs WHERE name = ?", (name,))
            else:
                self._con.execute("INSERT OR REPLACE INTO blobs VALUES (?, ?)", (name, sqlite3.Binary(data)))

    def writer_lock(self, timeout: float = 600.0) -> contextlib.AbstractContextManager:
        """An exclusive file lock beside the database (all processes of this machine)."""
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.path) + ".lock", timeout=timeout)

        @contextlib.contextmanager
        def held() -> Iterator[None]:
            try:
                lock.acquire()
            except Timeout as exc:
                raise LockTimeout(
                    f"another process has been writing to the index at {self.path.parent} for over {timeout:.0f} s; "
                    f"retry when it is done (or raise the lock timeout)") from exc
            try:
                yield
            finally:
                lock.release()

        return held()

    def check_writer(self) -> None:
        """Nothing to check: the file lock is held by the operating system until it is
        released or this process ends, so it cannot be lost while the process runs."""

    def check(self) -> list[str]:
        """Integrity problems (``PRAGMA quick_check``); empty when sound."""
        with self._lock:
            rows = [r[0] for r in self._con.execute("PRAGMA quick_check").fetchall()]
        return [] if rows == ["ok"] else [f"sqlite: {r}" for r in rows]

    def clear(self) -> None:
        with self._write():
            for table in ("sources", "changes", "blobs"):
                self._con.execute(f"DELETE FROM {table}")
            self._log([])
        self._cache.clear()

    def close(self) -> None:
        with self._lock:
            self._con.close()


# ------------------------------------------------------------------ key-value stores


class _Lease:
    """A lease this handle holds: its epoch (the fencing token), the holding thread, the
    renewal thread and why it was lost (``None`` while held)."""

    def __init__(self, epoch: int, holder: int) -> None:
        self.epoch = epoch
        self.holder = holder
        self.depth = 0
        self.lost: str | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None


class KVSourceStore(_CachedStore):
    """Sources in any LangChain ``BaseStore[str, bytes]`` (a "byte store").

    Keys: ``src/<id>`` (the record), ``head/<id>`` (its state, without the text),
    ``log/<generation>``, ``meta``, ``blob/<name>/<part>``, ``lock``. Writes are not
    transactional: a record is written before its head, so a reader that sees a head
    finds its record; the index's states (``pending``/``complete``) make a crash
    between the two harmless.

    Args:
        store: the byte store (e.g. ``LocalFileStore("sources/")``; a ``LocalFileStore``
            is written atomically, through `AtomicFileStore`).
        lease_seconds: how long a writer's lease lasts without renewal.
    """

    def __init__(self, store: Any, *, lease_seconds: float = 60.0, cache_chars: int = 64_000_000) -> None:
        super().__init__(cache_chars)
        for name in ("mget", "mset", "mdelete", "yield_keys"):
            if not callable(getattr(store, name, None)):
                raise TypeError(f"source_store must be a LangChain BaseStore[str, bytes] (no {name}()): "
                                f"got {type(store).__name__}")
        from swrag_integrations.stores.filestore import atomic_byte_store

        self.store = atomic_byte_store(store)  # a LocalFileStore writes in place: readers would see torn values
        self.lease_seconds = lease_seconds
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.RLock()
        self._lease: _Lease | None = None  # while this handle holds the writer lock
        self._threads = threading.Lock()  # one thread of this handle holds the lease at a time

    def __repr__(self) -> str:
        return f"KVSourceStore({self.store!r})"

    def _json(self, key: str) -> Any:
        raw = self.store.mget([key])[0]
        return None if raw is None else json.loads(raw)

    def _load(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        out = {}
        for sid, raw in zip(sids, self.store.mget([f"src/{s}" for s in sids])):
            if raw is not None:
                out[sid] = SourceRecord.from_bytes(bytes(raw))
        return out

    def heads(self, sids: Sequence[str] | None = None) -> dict[str, RecordHead]:
        if sids is None:
            sids = [k[5:] for k in self.store.yield_keys(prefix="head/")]
        out = {}
        for sid, raw in zip(sids, self.store.mget([f"head/{s}" for s in sids])):
            if raw is not None:
                h = json.loads(raw)
                out[sid] = RecordHead(h["content_hash"], h["state"], int(h["id_span"]), int(h["n_chunks"]), h.get("origin"))
        return out

    @staticmethod
    def _head_bytes(head: RecordHead) -> bytes:
        return json.dumps(head._asdict()).encode()

    def _log(self, sids: Sequence[str]) -> int:
        meta = self._json("meta") or {}
        gen = int(meta.get("generation", 0)) + 1
        first = int(meta.get("first_logged", gen))
        self.store.mset([(f"log/{gen:012d}", json.dumps(list(dict.fromkeys(sids))).encode())])
        if gen - first >= _LOG_KEEP // 100:  # keep the log short: drop the oldest entries
            self.store.mdelete([f"log/{g:012d}" for g in range(first, gen - _LOG_KEEP // 200)])
            first = gen - _LOG_KEEP // 200
        meta.update(generation=gen, first_logged=first)
        self.store.mset([("meta", json.dumps(meta).encode())])
        return gen

    def put(self, records: Sequence[SourceRecord]) -> int:
        with self._lock:
            self.check_writer()
            self.store.mset([(f"src/{r.source_id}", r.to_bytes()) for r in records])
            self.store.mset([(f"head/{r.source_id}", self._head_bytes(
                RecordHead(r.content_hash, r.state, r.id_span, r.n_chunks, r.origin))) for r in records])
            gen = self._log([r.source_id for r in records])
        self._cache.drop(r.source_id for r in records)
        return gen

    def set_state(self, sids: Sequence[str], state: str, *, id_span: int | None = None) -> int:
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {state!r}")
        with self._lock:
            self.check_writer()
            records = self._load(list(dict.fromkeys(sids)))
            for rec in records.values():
                rec.state = state
                rec.id_span = rec.n_chunks if id_span is not None and id_span < 0 else max(rec.id_span, id_span or 0)
            self.store.mset([(f"src/{r.source_id}", r.to_bytes()) for r in records.values()])
            self.store.mset([(f"head/{r.source_id}", self._head_bytes(
                RecordHead(r.content_hash, r.state, r.id_span, r.n_chunks, r.origin))) for r in records.values()])
            gen = self._log(list(sids))
        self._cache.drop(sids)
        return gen

    def remove(self, sids: Sequence[str]) -> int:
        with self._lock:
            self.check_writer()
            self.store.mdelete([f"head/{s}" for s in sids])
            self.store.mdelete([f"src/{s}" for s in sids])
            gen = self._log(list(sids))
        self._cache.drop(sids)
        return gen

    def generation(self) -> int:
        return int((self._json("meta") or {}).get("generation", 0))

    def changes_since(self, generation: int) -> set[str] | None:
        meta = self._json("meta") or {}
        current = int(meta.get("generation", 0))
        if generation >= current:
            return set() if generation == current else None
        if int(meta.get("first_logged", 1)) > generation + 1:
            return None
        keys = [f"log/{g:012d}" for g in range(generation + 1, current + 1)]
        out: set[str] = set()
        for raw in self.store.mget(keys):
            if raw is None:
                return None
            out.update(json.loads(raw))
        return out

    def get_meta(self) -> dict[str, Any]:
        return dict((self._json("meta") or {}).get("manifest") or {})

    def set_meta(self, meta: dict[str, Any]) -> None:
        with self._lock:
            self.check_writer()
            current = self._json("meta") or {}
            current["manifest"] = meta
            self.store.mset([("meta", json.dumps(current).encode())])

    def get_blob(self, name: str) -> bytes | None:
        head = self._json(f"blobmeta/{name}")
        if head is None:
            return None
        parts = self.store.mget([f"blob/{name}.{head['tag']}/{i}" for i in range(int(head["parts"]))])
        if any(p is None for p in parts):
            return None
        return b"".join(bytes(p) for p in parts)

    def put_blob(self, name: str, data: bytes | None) -> None:
        with self._lock:
            self.check_writer()
            old = self._json(f"blobmeta/{name}")
            if data is not None:
                parts = [data[i:i + _BLOB_PART] for i in range(0, len(data), _BLOB_PART)] or [b""]
                tag = uuid.uuid4().hex[:8]  # new parts under a new tag, then the pointer: never half old, half new
                self.store.mset([(f"blob/{name}.{tag}/{i}", p) for i, p in enumerate(parts)])
                self.store.mset([(f"blobmeta/{name}", json.dumps({"parts": len(parts), "tag": tag}).encode())])
            else:
                self.store.mdelete([f"blobmeta/{name}"])
            if old is not None and old.get("tag"):
                self.store.mdelete([f"blob/{name}.{old['tag']}/{i}" for i in range(int(old["parts"]))])

    def writer_lock(self, timeout: float = 600.0) -> contextlib.AbstractContextManager:
        """The index's lease: a ``lock`` record (owner, expiry, epoch), renewed every
        third of ``lease_seconds`` by a background thread while held (re-entrant for
        this handle). Writes made while it is held are fenced by its epoch
        (`check_writer`); it is released only if this writer still holds it."""

        @contextlib.contextmanager
        def held() -> Iterator[None]:
            with self._lock:
                if self._lease is not None and self._lease.holder == threading.get_ident():
                    self._lease.depth += 1
                    nested = True
                else:
                    nested = False
            if nested:
                try:
                    yield
                finally:
                    self._lease.depth -= 1
                return
            # other threads of this handle wait here (the lease record cannot tell them apart)
            if not self._threads.acquire(timeout=timeout):
                raise LockTimeout(f"another thread of this process has held the index's lease for over {timeout:.0f} s")
            try:
                lease = self._acquire(timeout)
                try:
                    yield
                finally:
                    self._release(lease)
            finally:
                self._threads.release()

        return held()

    def _acquire(self, timeout: float) -> "_Lease":
        deadline = time.monotonic() + timeout
        while True:
            found = self._read_lease()
            if not found.get("owner") or found.get("owner") == self._owner or found.get("expires", 0) < time.time():
                epoch = int(found.get("epoch", 0)) + 1
                self._write_lease(epoch)
                time.sleep(0.05)  # another writer may have written at the same moment: the last one wins
                now = self._read_lease()
                if now.get("owner") == self._owner and int(now.get("epoch", -1)) == epoch:
                    break
            if time.monotonic() > deadline:
                raise LockTimeout(f"another writer ({found.get('owner')}) holds the index's lease; retry when it is "
                                  f"done (leases expire after {self.lease_seconds:.0f} s without renewal)")
            time.sleep(0.2)
        lease = _Lease(epoch, threading.get_ident())
        with self._lock:
            self._lease = lease
        lease.thread = threading.Thread(target=self._keep, args=(lease,), name="swrag-lease", daemon=True)
        lease.thread.start()
        return lease

    def _release(self, lease: "_Lease") -> None:
        lease.stop.set()
        if lease.thread is not None:
            lease.thread.join(timeout=self.lease_seconds)
        with self._lock:
            self._lease = None
            found = self._read_lease()
            if found.get("owner") == self._owner and int(found.get("epoch", -1)) == lease.epoch:
                # freed, not deleted: the next writer's epoch continues from this one
                self.store.mset([("lock", json.dumps({"owner": None, "expires": 0, "epoch": lease.epoch}).encode())])

    def _keep(self, lease: "_Lease") -> None:
        """The renewal thread: extends the lease until released, or until it is lost."""
        while not lease.stop.wait(self.lease_seconds / 3):
            try:
                with self._lock:
                    if lease.stop.is_set():
                        return
                    self._verify(lease)
                    self._write_lease(lease.epoch)
            except LeaseLostError:
                return
            except Exception as exc:  # noqa: BLE001 - a failed renewal is retried; the writes check the lease
                logger.warning("renewing the writer lease failed (%s); retrying", exc)

    def _read_lease(self) -> dict[str, Any]:
        """The ``lock`` record (``{}`` when there is none). A store whose writes are not
        atomic (``LocalFileStore``) can show a record half-written by another writer:
        read again until it decodes."""
        for attempt in range(50):
            try:
                return self._json("lock") or {}
            except ValueError:
                time.sleep(0.01 * (attempt + 1))
        raise SourceStoreError(f"the writer lease record of {self!r} does not decode; delete its 'lock' key "
                               f"when no writer is running")

    def _write_lease(self, epoch: int) -> None:
        lease = {"owner": self._owner, "expires": time.time() + self.lease_seconds, "epoch": epoch}
        self.store.mset([("lock", json.dumps(lease).encode())])

    def _verify(self, lease: "_Lease") -> None:
        """Raise `LeaseLostError` unless the stored lease is still ``lease`` (lock held)."""
        if lease.lost is None:
            found = self._read_lease()
            if found.get("owner") != self._owner or int(found.get("epoch", -1)) != lease.epoch:
                lease.lost = (f"this writer's lease on the index (epoch {lease.epoch}) expired and another writer "
                              f"took it (now {found.get('owner') or 'free'}, epoch {found.get('epoch')}), so it stopped "
                              f"and writes nothing more; what it left pending is finished by the next write. Run the "
                              f"write again (a stall longer than lease_seconds={self.lease_seconds:g} s, e.g. a "
                              f"suspended process, causes this)")
        if lease.lost is not None:
            raise LeaseLostError(lease.lost)

    def check_writer(self) -> None:
        """Raise `LeaseLostError` when this handle holds the writer lock but its lease
        now belongs to another writer (the fencing check before every write). Writes made
        outside `writer_lock` are not fenced."""
        with self._lock:
            if self._lease is not None:
                self._verify(self._lease)

    def renew_lock(self) -> None:
        """Extend this writer's lease now (the lock renews itself while held); raises
        `LeaseLostError` if it was lost."""
        with self._lock:
            if self._lease is not None:
                self._verify(self._lease)
                self._write_lease(self._lease.epoch)

    def _decodes(self, key: str) -> bool:
        try:
            raw = self.store.mget([key])[0]
            SourceRecord.from_bytes(bytes(raw))
            return True
        except Exception:  # noqa: BLE001 - any failure is the finding
            return False

    def check(self) -> list[str]:
        problems = []
        heads = self.heads()
        records = set(k[4:] for k in self.store.yield_keys(prefix="src/"))
        for sid in sorted(set(heads) - records):
            problems.append(f"source {sid}: state record without its text")
        for sid in sorted(set(heads) & records):
            if not self._decodes(f"src/{sid}"):
                problems.append(f"source {sid}: record does not decode")
        return problems

    def clear(self) -> None:
        with self._lock:
            self.check_writer()
            keys = [k for k in self.store.yield_keys() if k != "lock"]
            for b in range(0, len(keys), 500):
                self.store.mdelete(keys[b:b + 500])
        self._cache.clear()

    def close(self) -> None:
        pass


class ChromaByteStore:
    """A LangChain-style byte store over a Chroma collection (for a Chroma server).

    Values are kept base64-encoded in record metadata with a 1-d placeholder vector;
    the collection holds nothing else. Implements ``mget``/``mset``/``mdelete``/
    ``yield_keys`` (the ``BaseStore`` interface used by `KVSourceStore`).
    """

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name
        self.collection = client.get_or_create_collection(name, embedding_function=None,
                                                          metadata={"swrag_role": "sources"})

    def __repr__(self) -> str:
        return f"ChromaByteStore({self.name!r})"

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        found: dict[str, bytes] = {}
        for b in range(0, len(keys), 100):
            got = self.collection.get(ids=list(keys[b:b + 100]), include=["metadatas"])
            for key, meta in zip(got["ids"], got["metadatas"]):
                found[key] = base64.b64decode(meta["v"])
        return [found.get(k) for k in keys]

    def mset(self, pairs: Sequence[tuple[str, bytes]]) -> None:
        pairs = list(pairs)
        for b in range(0, len(pairs), 50):
            part = pairs[b:b + 50]
            self.collection.upsert(ids=[k for k, _ in part], embeddings=np.zeros((len(part), 1), dtype=np.float32),
                                   metadatas=[{"v": base64.b64encode(v).decode("ascii")} for _, v in part])

    def mdelete(self, keys: Sequence[str]) -> None:
        keys = list(keys)
        for b in range(0, len(keys), 100):
            self.collection.delete(ids=keys[b:b + 100])

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        offset, page = 0, 1000
        while True:
            ids = self.collection.get(include=[], limit=page, offset=offset)["ids"]
            for key in ids:
                if prefix is None or key.startswith(prefix):
                    yield key
            if len(ids) < page:
                return
            offset += len(ids)
