"""PostgreSQL (with pgvector) for an index: sources, vectors and keywords in one database.

`PostgresStorage` is both the `SourceStore` and the
`VectorStorage` of an `IndexEngine` (``--store
postgresql://USER@HOST:PORT/DB``, ``storage="postgresql:///db?host=/socket/dir"``;
``pip install 'swrag-integrations[postgres]'``). One collection is a handful of tables
whose names derive from the collection name (`table_prefix`):

* ``<p>_sources``: one row per source (text, content hash, metadata ``jsonb``, origin,
  state, the chunk offset arrays);
* ``<p>_chunks``: one row per small chunk (source id, index, offsets, token count,
  window bounds, exact text, metadata ``jsonb``, the vector in a pgvector column under
  an HNSW cosine index, the package's own keyword tokens as a ``tsvector`` under a GIN
  index and their count);
* ``<p>_terms``: BM25 term statistics as deltas (``term``, documents, tokens; the row of
  the empty term counts chunks and their tokens) that writes only insert, so writers of
  different sources never wait on a shared row; `PostgresStorage.compact_terms`
  folds them into one row per term now and then;
* ``<p>_settings`` (the manifest), ``<p>_blobs``, ``<p>_changes`` (the change log),
  ``<p>_fence`` (one row per source id ever written: the epoch of its last writer) and
  ``<p>_writers`` (leases).

**One transaction per source write** (`PostgresStorage.write_source`): the source
row, its chunks, vectors, keyword tokens and term statistics commit together, so a
source is always wholly old or wholly new -- no ``pending`` state, no repair. The
storage says so with ``transactional = True``; the writer (`writer`) then hands
each planned source to `write_source` (and each removal to
`remove`) instead of the pending/vectors/complete sequence.

**Fencing.** `writer_lock` does not exclude other writers: it
takes a *lease*, a row of ``<p>_writers`` whose id (from a sequence: it only grows) is
the writer's epoch and whose expiry a background thread renews (never once expired).
Inside every write transaction the writer locks the source's fence row (``SELECT ... FOR
UPDATE``: two writers of one source serialise there, the later commit wins; writers of
different sources do not meet), records its epoch there, and checks, as the last statement
before ``COMMIT``, that its lease has not expired by the database's clock. A writer stalled
past its lease (a suspended process) therefore raises `LeaseLostError`
and its transaction rolls back: nothing lands. (One that stalls after that check holds
its rows locked meanwhile, so any later writer of those sources commits after it.)

**Keyword search** (`keyword_search`) scores with BM25 in SQL
(``k1 = 1.2``, ``b = 0.75``, Lucene's idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``, the
values of the tantivy index, whose scores are these times ``k1 + 1``) over the tokens of
`tokenize` (jieba for Chinese), written with the chunk; equal scores rank
in document order (source id, then chunk index), as the local index ranks a source's
chunks. ``tsvector`` keeps at most 256 positions per term, so a term's frequency in one
chunk counts up to 256.

**Filters** (`postgres_filter`) are pushed down as parameterised SQL over the
chunks' ``metadata``; every value is a query parameter and every name an
``sql.Identifier``.

The password is never part of the URI (it would show in the process list and in the
manifest): libpq reads it from ``PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections import Counter
from typing import Any, Iterator, Sequence

import numpy as np

from swrag_integrations.engine.filters import MAX_PUSHED_VALUES
from swrag_integrations.engine.records import STATES, SourceRecord
from swrag_integrations.stores.sources import LeaseLostError, LockTimeout, RecordHead
from swrag_integrations.stores.storage import EmbeddingSide, PlainDocument
from swrag_integrations.stores.store_uri import check_postgres_uri, redacted_uri

__all__ = ["PostgresStorage", "postgres_filter", "table_prefix", "keyword_terms", "POSTGRES_EXTRA", "PAUSE_ENV"]

POSTGRES_EXTRA = "pip install 'swrag-integrations[postgres]'"
BM25_K1 = 1.2
BM25_B = 0.75
MAX_POSITIONS = 256  # positions a tsvector keeps per lexeme
COMPACT_EVERY = 500
"""Source writes of one handle between two foldings of the term statistics (`PostgresStorage.compact_terms`)."""
EF_SEARCH = 100
"""The HNSW search beam (``hnsw.ef_search``) at least; wider when more neighbours are asked for.
Chroma's default ``hnsw:search_ef``, so both stores search their graphs as widely: with pgvector's
own default, 40, dense search alone fell behind Chroma on the largest dev set, with 100 it is level,
for a few milliseconds more per query at 1M chunks (docs/reports/postgres_recall.md)."""
SEARCH_INDEXES = (("chunks_terms", "USING gin (terms)"), ("chunks_hnsw", "USING hnsw (embedding vector_cosine_ops)"))
"""The chunks table's search indexes, ``(name, method)``: keyword tokens and vectors."""
_MAX_LEXEME_BYTES = 2046
PAUSE_ENV = ("SWRAG_PG_PAUSE_AT", "SWRAG_PG_PAUSE_FILE")
"""Test hook: when ``SWRAG_PG_PAUSE_AT`` names a point of `PostgresStorage.write_source`
(``"before"``, ``"chunks"``, ``"commit"``), the writer creates the file
``SWRAG_PG_PAUSE_FILE`` there and waits until it is deleted (crash and stall tests)."""


def table_prefix(collection_name: str) -> str:
    """The prefix of a collection's tables: ``swrag_<name>`` when short enough for
    PostgreSQL's 63-byte names, else a shortened name plus a hash of the full one (two
    names never share tables). Used only through ``sql.Identifier``."""
    name = f"swrag_{collection_name}"
    if len(name.encode()) <= 48:
        return name
    return f"{name[:36]}_{hashlib.sha256(collection_name.encode()).hexdigest()[:10]}"


def _import_psycopg() -> Any:
    try:
        import psycopg
        import pgvector.psycopg  # noqa: F401
    except ImportError as exc:
        raise ModuleNotFoundError(f"the PostgreSQL store needs psycopg and pgvector: {POSTGRES_EXTRA}",
                                  name="psycopg") from exc
    return psycopg


def _pause(point: str) -> None:
    """The test hook of `PAUSE_ENV`."""
    if os.environ.get(PAUSE_ENV[0]) != point:
        return
    flag = os.environ.get(PAUSE_ENV[1])
    if not flag:
        return
    with open(flag, "w") as fh:
        fh.write(str(os.getpid()))
    while os.path.exists(flag):
        time.sleep(0.02)


def keyword_terms(text: str) -> tuple[str, int, list[str]]:
    """The ``tsvector`` literal of a chunk's keyword tokens (`tokenize`,
    each token with its positions), the token count (the chunk's BM25 length) and the
    distinct tokens."""
    from swrag_integrations.keyword.bm25 import tokenize

    tokens = [t for t in tokenize(text) if len(t.encode()) <= _MAX_LEXEME_BYTES]
    positions: dict[str, list[int]] = {}
    for i, tok in enumerate(tokens):
        positions.setdefault(tok, []).append(min(i + 1, 16383))
    parts = []
    for tok, pos in positions.items():
        quoted = tok.replace("\\", "\\\\").replace("'", "\\'")
        parts.append(f"'{quoted}':{','.join(str(p) for p in sorted(set(pos))[:MAX_POSITIONS])}")
    return " ".join(parts), len(tokens), list(positions)


def _vector_text(vector: Any) -> str:
    """A vector in pgvector's text form (``[x,y,...]``) for ``COPY``: 9 significant digits,
    which give back every float32 exactly, formatted about twice as fast as pgvector's own
    dumper (each float's shortest double form)."""
    return "[" + ",".join(map("{:.9g}".format, np.asarray(vector, dtype=np.float32).tolist())) + "]"


def _floats(vector: Any) -> list[float]:
    """A stored vector (pgvector's ``Vector``, or an array) as a list of floats."""
    to_list = getattr(vector, "to_list", None)
    return [float(x) for x in (to_list() if callable(to_list) else vector)]


def _query_literal(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------------------- filters


def postgres_filter(flt: Any) -> tuple[Any, list[Any]] | None:
    """``(condition, params)``: a parameterised SQL condition on a chunk's ``metadata``
    (table alias ``c``) that every chunk passing ``flt`` passes, or ``None`` when no part
    of it can be pushed down. Order comparisons with non-numbers are left out (the engine
    checks every hit against the filter itself)."""
    from psycopg import sql

    if flt.op in ("and", "or"):
        parts = [postgres_filter(f) for f in flt.args]
        if flt.op == "or" and any(p is None for p in parts):
            return None
        kept = [p for p in parts if p is not None]
        if not kept:
            return None
        joined = sql.SQL(" AND " if flt.op == "and" else " OR ").join(p[0] for p in kept)
        return sql.SQL("({})").format(joined), [v for p in kept for v in p[1]]
    if flt.op in ("$eq", "$in", "$ne", "$nin"):
        # jsonb containment compares as MetadataFilter.matches does: numbers by value (1 == 1.0),
        # booleans apart from numbers, a missing key or another type never equal (so $ne passes them)
        values = list(flt.value) if flt.op in ("$in", "$nin") else [flt.value]
        if not values or len(values) > MAX_PUSHED_VALUES:
            return None
        cond = sql.SQL(" OR ").join(sql.SQL("c.metadata @> %s::jsonb") for _ in values)
        form = "(NOT ({}))" if flt.op in ("$ne", "$nin") else "({})"
        return sql.SQL(form).format(cond), [json.dumps({flt.key: v}, ensure_ascii=False) for v in values]
    if flt.op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(flt.value, bool) or not isinstance(flt.value, (int, float)):
            return None
        op = sql.SQL({"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[flt.op])
        cond = sql.SQL("(jsonb_typeof(c.metadata -> %s) = 'number' AND (c.metadata -> %s) {} %s::jsonb)").format(op)
        return cond, [flt.key, flt.key, json.dumps(flt.value)]
    return None


# ---------------------------------------------------------------------------- the storage


class _Lease:
    """A writer's lease: its row id (the epoch) and whether renewal failed."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.lost = False
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.depth = 1
        self.creating = False  # holds the collection's advisory lock (no manifest yet)


class PostgresStorage(EmbeddingSide):
    """Sources, vectors and keywords of one index in PostgreSQL (see the module docstring).

    Args:
        conninfo: a libpq URI without a password (`check_postgres_uri`).
        collection_name: the index's collection (tables: `table_prefix`).
        embedding: embeds queries, and chunk texts not given with vectors.
        index_text: ``chunk text -> text to embed and to index for BM25``.
        lease_seconds: how long a writer's lease lasts without renewal.

    Raises:
        ValueError: ``lease_seconds`` not positive, or vectors of another dimension than
            the index holds.
        ConnectionError: the database cannot be reached (the message names the URI
            without its password).
    """

    kind = "PostgreSQL"
    can_get = True
    can_delete = True
    reopenable = False  # every query reads the committed state
    transactional = True
    checks = ("transactional store: every source commits whole, so there are no unfinished writes to finish; "
              "status --deep checks that each source's chunks are all of its current version and that the BM25 "
              "statistics count the chunks held and that the search indexes exist; repair builds search indexes an "
              "interrupted bulk load left out and rebuilds the HNSW index (REINDEX) when a probe does not find "
              "its own vectors")
    """What ``swrag status`` and ``swrag repair`` check on this store (they print it)."""

    def __init__(self, conninfo: str, collection_name: str, embedding: Any, *, index_text: Any = None,
                 lease_seconds: float = 60.0) -> None:
        psycopg = _import_psycopg()
        self.conninfo = check_postgres_uri(conninfo)
        self.collection_name = collection_name
        self._index_text = index_text
        self.index_text = index_text or (lambda text: text)
        self.set_embedding(embedding)
        if not lease_seconds > 0:
            raise ValueError(f"lease_seconds must be > 0, got {lease_seconds!r}")
        self.lease_seconds = float(lease_seconds)
        self.prefix = table_prefix(collection_name)
        self._lock = threading.RLock()
        self._lease: _Lease | None = None
        self._dim: int | None = None
        self._writes = 0
        self._bulk = False  # inside bulk_load: the search indexes are built at its end
        self._closed = False
        try:
            self.conn = psycopg.connect(self.conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConnectionError(f"cannot connect to PostgreSQL at {redacted_uri(self.conninfo)} ({first}); "
                                  "check --store (storage=) and PGPASSWORD/~/.pgpass") from exc
        self._create_schema()

    def set_embedding(self, embedding: Any) -> None:
        """Embed with ``embedding`` (queries; chunks not given with vectors)."""
        self._use_embedding(embedding, self._index_text)

    @classmethod
    def open(cls, uri: Any, collection_name: str, embedding: Any, *, index_text: Any = None,
             lease_seconds: float = 60.0) -> "PostgresStorage":
        """The storage a ``postgresql://`` store URI (or its `StoreURI`) names."""
        text = getattr(uri, "text", uri)
        return cls(text, collection_name, embedding, index_text=index_text, lease_seconds=lease_seconds)

    def __repr__(self) -> str:
        return f"PostgresStorage({redacted_uri(self.conninfo)!r}, {self.collection_name!r})"

    # ------------------------------------------------------------------ schema
    def _t(self, kind: str) -> Any:
        from psycopg import sql

        return sql.Identifier(f"{self.prefix}_{kind}")

    def _sql(self, text: str, **tables: str) -> Any:
        """``text`` with ``{name}`` table placeholders filled with this collection's tables."""
        from psycopg import sql

        return sql.SQL(text).format(**{k: self._t(v) for k, v in tables.items()})

    def _create_schema(self) -> None:
        """Create the tables (idempotent; concurrent openers serialise on an advisory lock)."""
        from pgvector.psycopg import register_vector

        key = self._key()
        statements = [
            "CREATE TABLE IF NOT EXISTS {sources} (source_id text PRIMARY KEY, content_hash text NOT NULL, "
            "state text NOT NULL, id_span integer NOT NULL, n_chunks integer NOT NULL, origin text, "
            "metadata jsonb NOT NULL, arrays bytea NOT NULL, windows bytea, text text NOT NULL)",
            "CREATE INDEX IF NOT EXISTS {sources_origin} ON {sources} (origin)",
            "CREATE TABLE IF NOT EXISTS {terms} (term text NOT NULL, df bigint NOT NULL, len bigint NOT NULL)",
            "CREATE INDEX IF NOT EXISTS {terms_term} ON {terms} (term)",
            "CREATE TABLE IF NOT EXISTS {settings} (key text PRIMARY KEY, value jsonb NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {blobs} (name text PRIMARY KEY, data bytea NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {changes} (generation bigserial PRIMARY KEY, source_id text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {fence} (source_id text PRIMARY KEY, epoch bigint NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {writers} (epoch bigserial PRIMARY KEY, expires timestamptz NOT NULL, "
            "pid integer)",
        ]
        names = dict(sources="sources", sources_origin="sources_origin", terms="terms", terms_term="terms_term",
                     settings="settings", blobs="blobs", changes="changes", fence="fence", writers="writers")
        with self._lock, self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            for st in statements:
                self.conn.execute(self._sql(st, **names))
        register_vector(self.conn)
        self._dim = self._chunk_dim()

    def _chunk_dim(self) -> int | None:
        """The dimension of the chunks table's vectors, or ``None`` before the first write."""
        row = self.conn.execute(
            "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attname = 'embedding'",
            (self._t("chunks").as_string(self.conn),)).fetchone()
        return int(row[0]) if row else None

    def _ensure_chunks(self, dim: int) -> None:
        """The chunks table for ``dim``-dimensional vectors, with its indexes (first write)."""
        if self._dim is not None:
            if self._dim != dim:
                raise ValueError(f"this PostgreSQL index holds {self._dim}-dimensional vectors, got {dim}: use the "
                                 "embedding the index was built with, or another collection_name")
            return
        from psycopg import sql

        with self._lock, self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key(),))
            self.conn.execute(sql.SQL(
                "CREATE TABLE IF NOT EXISTS {chunks} (vector_id text PRIMARY KEY, source_id text NOT NULL, "
                "chunk_index integer NOT NULL, start_index integer NOT NULL, end_index integer NOT NULL, "
                "n_tokens integer, window_lower integer, window_upper integer, content_hash text NOT NULL, "
                "text text NOT NULL, metadata jsonb NOT NULL, terms tsvector NOT NULL, n_terms integer NOT NULL, "
                "embedding vector({dim}) NOT NULL)").format(chunks=self._t("chunks"), dim=sql.Literal(int(dim))))
            self.conn.execute(self._sql("CREATE INDEX IF NOT EXISTS {i} ON {chunks} (source_id)",
                                        i="chunks_source", chunks="chunks"))
            if not self._bulk:
                self._create_search_indexes()
        self._dim = self._chunk_dim()

    def _absent_search_indexes(self) -> list[str]:
        """The names of `SEARCH_INDEXES` the database does not hold (the chunks table exists)."""
        return [name for name, _ in SEARCH_INDEXES if not self.conn.execute(
            "SELECT to_regclass(%s)", (self._t(name).as_string(self.conn),)).fetchone()[0]]

    def _create_search_indexes(self) -> list[str]:
        """Create the keyword (GIN) and vector (HNSW) indexes that are missing; their names."""
        made = self._absent_search_indexes()
        methods = dict(SEARCH_INDEXES)
        for name in made:
            self.conn.execute(self._sql("CREATE INDEX IF NOT EXISTS {i} ON {chunks} " + methods[name], i=name,
                                        chunks="chunks"))
        return made

    def missing_search_indexes(self) -> list[str]:
        """The search indexes the chunks table lacks (an interrupted `bulk_load` leaves them
        out; searches stay correct but scan the table)."""
        if not self._ready():
            return []
        with self._lock:
            return self._absent_search_indexes()

    def restore_indexes(self, maintenance_work_mem: str | None = None) -> list[str]:
        """Build the search indexes that are missing (`swrag repair` calls this); their names.

        ``maintenance_work_mem``: PostgreSQL's setting for this build (a size in its units;
        an HNSW build that fits in it is much faster); default the server's.
        """
        if not self._ready():
            return []
        with self._lock:
            if maintenance_work_mem is not None:
                self.conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (str(maintenance_work_mem),))
            try:
                return self._create_search_indexes()
            finally:
                if maintenance_work_mem is not None:
                    self.conn.execute("RESET maintenance_work_mem")

    @contextlib.contextmanager
    def bulk_load(self, *, maintenance_work_mem: str | None = "1GB") -> Iterator["PostgresStorage"]:
        """Load many sources fast: the search indexes are dropped for the load and built once
        at the end, as pgvector advises for an initial load (building an HNSW graph at once is
        far cheaper than inserting into it row by row).

        Writes inside still commit one source per transaction, with the writer's lease
        checked; searches meanwhile stay correct but scan the whole table (slow). If the
        process dies inside, `check` (``swrag status --deep``) names the missing indexes
        and ``swrag repair`` builds them.

        Args:
            maintenance_work_mem: PostgreSQL's memory for the index builds (default one
                gigabyte; an HNSW graph of 1M 384-dimensional vectors needs about two to be
                built in memory, see docs/how-to/scaling.md); ``None``: the server's setting.

        Example:
            >>> with engine.store.bulk_load():            # doctest: +SKIP
            ...     engine.index_documents(documents)
        """
        self._bulk = True
        try:
            if self._ready():
                with self._lock:
                    for name, _ in SEARCH_INDEXES:
                        self.conn.execute(self._sql("DROP INDEX IF EXISTS {i}", i=name))
            yield self
        finally:
            self._bulk = False
            self.restore_indexes(maintenance_work_mem)

    def _ready(self) -> bool:
        """Whether the chunks table exists (another handle may have created it since)."""
        if self._dim is None:
            with self._lock:
                self._dim = self._chunk_dim()
        return self._dim is not None

    # ------------------------------------------------------------------ leases
    def writer_lock(self, timeout: float = 600.0) -> contextlib.AbstractContextManager:
        """A lease for this handle's writes (not exclusive: see the module docstring);
        reentrant. ``timeout`` is unused: a lease never waits for another writer."""

        @contextlib.contextmanager
        def held() -> Iterator[None]:
            with self._lock:
                if self._lease is not None:
                    self._lease.depth += 1
                    lease = self._lease
                else:
                    creating = not self.get_meta() and self._create_lock(timeout)
                    epoch = self.conn.execute(self._sql(
                        "INSERT INTO {w} (expires, pid) VALUES (clock_timestamp() + make_interval(secs => %s), %s) "
                        "RETURNING epoch", w="writers"), (self.lease_seconds, os.getpid())).fetchone()[0]
                    lease = self._lease = _Lease(int(epoch))
                    lease.creating = creating
                    lease.thread = threading.Thread(target=self._renew, args=(lease,), daemon=True,
                                                    name="swrag-pg-lease")
                    lease.thread.start()
            try:
                yield
            finally:
                with self._lock:
                    lease.depth -= 1
                    if lease.depth == 0:
                        self._lease = None
                        lease.stop.set()
                        with contextlib.suppress(Exception):
                            self.conn.execute(self._sql("DELETE FROM {w} WHERE epoch = %s", w="writers"),
                                              (lease.epoch,))
                        if lease.creating:
                            with contextlib.suppress(Exception):
                                self.conn.execute("SELECT pg_advisory_unlock(%s)", (self._key(),))
                if lease.depth == 0 and lease.thread is not None:
                    lease.thread.join(timeout=5)

        return held()

    def _key(self) -> int:
        """The advisory-lock key of this collection."""
        return int.from_bytes(hashlib.sha256(self.prefix.encode()).digest()[:8], "big", signed=True)

    def _create_lock(self, timeout: float) -> bool:
        """Before the index has a manifest: hold the collection's advisory lock (session
        level) until this lease ends, so two first-time writers do not both create one
        (the second then finds the first one's). Polls up to ``timeout`` seconds.

        Raises:
            LockTimeout: another first-time writer held it longer.
        """
        deadline = time.monotonic() + float(timeout)
        while not self.conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key(),)).fetchone()[0]:
            if time.monotonic() > deadline:
                raise LockTimeout(f"another process has been creating the index {self!r} for more than "
                                  f"{timeout:g} s; try again later (lock_timeout=)")
            time.sleep(0.05)
        return True

    def _renew(self, lease: _Lease) -> None:
        """Renew ``lease`` every third of its length on a connection of its own, while it
        has not expired (an expired lease stays lost)."""
        psycopg = _import_psycopg()
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True)
        except Exception:  # noqa: BLE001 - the commit-time check fails the writer instead
            return
        try:
            while not lease.stop.wait(self.lease_seconds / 3):
                row = conn.execute(self._sql(
                    "UPDATE {w} SET expires = clock_timestamp() + make_interval(secs => %s) "
                    "WHERE epoch = %s AND expires > clock_timestamp() RETURNING epoch", w="writers"),
                    (self.lease_seconds, lease.epoch)).fetchone()
                if row is None:
                    lease.lost = True
                    return
        except Exception:  # noqa: BLE001
            lease.lost = True
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _lease_alive(self, lease: _Lease) -> bool:
        row = self.conn.execute(self._sql("SELECT expires > clock_timestamp() FROM {w} WHERE epoch = %s",
                                          w="writers"), (lease.epoch,)).fetchone()
        return bool(row and row[0])

    def check_writer(self) -> None:
        """Raise `LeaseLostError` when this handle's lease expired."""
        lease = self._lease
        if lease is not None and (lease.lost or not self._lease_alive(lease)):
            lease.lost = True
            raise LeaseLostError(f"this writer's lease on {self!r} expired (it stalled for more than "
                                 f"{self.lease_seconds:g} s): nothing more was written; run the write again")

    def renew_lock(self) -> None:
        """Nothing to do: a background thread renews the lease."""

    def _fence_sources(self, sids: Sequence[str]) -> None:
        """Inside a transaction: lock the sources' fence rows (sorted: no deadlock), so two
        writers of one source serialise, and record this writer's epoch on them."""
        sids = sorted(set(sids))
        if not sids:
            return
        self.conn.execute(self._sql("INSERT INTO {f} SELECT unnest(%s::text[]), 0 ON CONFLICT DO NOTHING",
                                    f="fence"), (sids,))
        self.conn.execute(self._sql("SELECT source_id FROM {f} WHERE source_id = ANY(%s) ORDER BY source_id "
                                    "FOR UPDATE", f="fence"), (sids,))
        lease = self._lease
        if lease is not None:  # who wrote each source last (for diagnosis; the lease itself fences)
            self.conn.execute(self._sql("UPDATE {f} SET epoch = %s WHERE source_id = ANY(%s)", f="fence"),
                              (lease.epoch, sids))

    @contextlib.contextmanager
    def _transaction(self, sids: Sequence[str]) -> Iterator[None]:
        """One fenced transaction touching ``sids``: their fence rows locked first, the
        lease checked last, right before ``COMMIT``."""
        with self._lock, self.conn.transaction():
            self._fence_sources(sids)
            yield
            _pause("commit")
            self.check_writer()

    def _log(self, sids: Sequence[str]) -> None:
        self.conn.execute(self._sql("INSERT INTO {c} (source_id) SELECT unnest(%s::text[])", c="changes"),
                          (list(dict.fromkeys(sids)),))

    # ------------------------------------------------------------------ writing
    def _drop_chunks(self, where: Any, params: Sequence[Any]) -> None:
        """Inside a transaction: delete chunks (``where`` on alias ``c``) and take their
        terms off the statistics."""
        if not self._ready():
            return
        self.conn.execute(self._sql(
            "INSERT INTO {terms} (term, df, len) "
            "SELECT u.lexeme, -count(*), 0 FROM {chunks} c, unnest(c.terms) u WHERE ", terms="terms",
            chunks="chunks") + where + self._sql(" GROUP BY u.lexeme"), params)
        self.conn.execute(self._sql("INSERT INTO {terms} (term, df, len) SELECT '', -count(*), -coalesce(sum(n_terms), 0) "
                                    "FROM {chunks} c WHERE ", terms="terms", chunks="chunks") + where, params)
        self.conn.execute(self._sql("DELETE FROM {chunks} c WHERE ", chunks="chunks") + where, params)

    def _insert_chunks(self, docs: Sequence[Any], ids: Sequence[str], vectors: Sequence[Any]) -> None:
        """Inside a transaction: insert chunk rows and add their terms to the statistics."""
        rows = []
        df: Counter[str] = Counter()
        total = 0
        for doc, vid, vec in zip(docs, ids, vectors):
            meta = dict(doc.metadata)
            terms, n_terms, distinct = keyword_terms(self.index_text(doc.page_content))
            rows.append((str(vid), str(meta.get("source_id")), int(meta.get("chunk_index", 0)),
                         int(meta.get("start_index", 0)), int(meta.get("end_index", 0)), meta.get("n_tokens"),
                         meta.get("window_lower_bound"), meta.get("window_upper_bound"),
                         str(meta.get("content_hash", "")), doc.page_content, json.dumps(meta, ensure_ascii=False),
                         terms, n_terms, _vector_text(vec)))
            df.update(distinct)
            total += n_terms
        if not rows:
            return
        self._ensure_chunks(len(vectors[0]))
        with self.conn.cursor() as cur:
            # COPY: one round trip for the chunks (an INSERT per row was most of a write's time)
            with cur.copy(self._sql(
                    "COPY {chunks} (vector_id, source_id, chunk_index, start_index, end_index, n_tokens, "
                    "window_lower, window_upper, content_hash, text, metadata, terms, n_terms, embedding) "
                    "FROM STDIN", chunks="chunks")) as copy:
                for row in rows:
                    copy.write_row(row)
            terms_list = ["", *df]
            cur.execute(self._sql("INSERT INTO {terms} (term, df, len) SELECT * FROM unnest(%s::text[], %s::bigint[], "
                                  "%s::bigint[])", terms="terms"),
                        (terms_list, [len(rows), *df.values()], [total] + [0] * len(df)))

    def _upsert_sources(self, records: Sequence[SourceRecord]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(self._sql(
                "INSERT INTO {s} (source_id, content_hash, state, id_span, n_chunks, origin, metadata, arrays, "
                "windows, text) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s) ON CONFLICT (source_id) DO "
                "UPDATE SET content_hash = EXCLUDED.content_hash, state = EXCLUDED.state, id_span = EXCLUDED.id_span, "
                "n_chunks = EXCLUDED.n_chunks, origin = EXCLUDED.origin, metadata = EXCLUDED.metadata, "
                "arrays = EXCLUDED.arrays, windows = EXCLUDED.windows, text = EXCLUDED.text", s="sources"),
                [(r.source_id, r.content_hash, r.state, r.id_span, r.n_chunks, r.origin,
                  json.dumps(r.metadata, ensure_ascii=False), r.arrays_bytes(), r.windows_bytes(), r.text)
                 for r in records])

    def write_source(self, record: SourceRecord, docs: Sequence[Any], ids: Sequence[str],
                     vectors: Sequence[Any]) -> None:
        """Write one source whole, in one transaction: its row (as ``complete``), its
        chunks (``docs``: `chunk_documents`, under vector ``ids``, with
        their ``vectors``), their keyword tokens and the term statistics, replacing
        whatever version of the source was there.

        Raises:
            LeaseLostError: this writer's lease expired, or a newer writer wrote the
                source meanwhile; nothing was written.
        """
        if len(docs) != len(ids) or len(ids) != len(vectors):
            raise ValueError(f"write_source got {len(docs)} chunks, {len(ids)} ids and {len(vectors)} vectors")
        from psycopg import sql

        record.state = "complete"
        record.id_span = record.n_chunks
        _pause("before")
        with self._transaction([record.source_id]):
            self._drop_chunks(sql.SQL("c.source_id = %s"), (record.source_id,))
            self._insert_chunks(docs, ids, vectors)
            _pause("chunks")
            self._upsert_sources([record])
            self._log([record.source_id])
        self._writes += 1
        if self._writes % COMPACT_EVERY == 0:
            self.compact_terms()

    def compact_terms(self) -> int:
        """Fold the term statistics' delta rows into one row per term (dropping terms no
        chunk holds any more), in one statement: rows other writers have not committed yet
        are not seen, so they stay as they are. Returns the rows left. Runs every
        `COMPACT_EVERY` source writes of a handle and at `rebuild`."""
        with self._lock:
            self.conn.execute(self._sql(
                "WITH gone AS (DELETE FROM {t} RETURNING term, df, len) INSERT INTO {t} (term, df, len) "
                "SELECT term, sum(df), sum(len) FROM gone GROUP BY term HAVING sum(df) != 0 OR term = ''",
                t="terms"))
            return int(self.conn.execute(self._sql("SELECT count(*) FROM {t}", t="terms")).fetchone()[0])

    def add(self, chunks: Sequence[Any], ids: Sequence[str]) -> None:
        """Write (or overwrite) chunks under vector ids, in one transaction (the engine
        writes through `write_source`; this serves callers of the plain protocol)."""
        if not chunks:
            return
        from psycopg import sql

        vectors = self.precomputed.embed_documents([c.page_content for c in chunks])
        sids = [str(c.metadata.get("source_id")) for c in chunks]
        with self._transaction(sids):
            self._drop_chunks(sql.SQL("c.vector_id = ANY(%s)"), ([str(i) for i in ids],))
            self._insert_chunks(chunks, ids, vectors)

    def delete(self, ids: Sequence[str]) -> int:
        """Delete these vector ids where present (with their term statistics)."""
        from psycopg import sql

        ids = list(dict.fromkeys(str(i) for i in ids))
        if ids and self._ready():
            with self._lock, self.conn.transaction():
                self._drop_chunks(sql.SQL("c.vector_id = ANY(%s)"), (ids,))
                _pause("commit")
                self.check_writer()
        return len(ids)

    # ------------------------------------------------------------------ the source store
    def get_many(self, sids: Sequence[str]) -> dict[str, SourceRecord]:
        """Records by source id (unknown ids left out), as committed now."""
        sids = list(dict.fromkeys(str(s) for s in sids))
        if not sids:
            return {}
        with self._lock:
            rows = self.conn.execute(self._sql(
                "SELECT source_id, content_hash, state, id_span, n_chunks, metadata, arrays, windows, text FROM {s} "
                "WHERE source_id = ANY(%s)", s="sources"), (sids,)).fetchall()
        return {sid: SourceRecord(sid, h, text, SourceRecord.arrays_from_bytes(bytes(raw), n), meta, state, span,
                                  SourceRecord.windows_from_bytes(bytes(win) if win is not None else None))
                for sid, h, state, span, n, meta, raw, win, text in rows}

    def iter_records(self, sids: Sequence[str] | None = None, batch: int = 200) -> Iterator[SourceRecord]:
        """Records of ``sids`` (all when ``None``), read in batches."""
        sids = sorted(self.heads()) if sids is None else list(sids)
        for b in range(0, len(sids), batch):
            yield from self.get_many(sids[b:b + batch]).values()

    def heads(self, sids: Sequence[str] | None = None) -> dict[str, RecordHead]:
        """The head (hash, state, id span, chunk count, origin) of each source in ``sids`` (``None``: every source)."""
        query = "SELECT source_id, content_hash, state, id_span, n_chunks, origin FROM {s}"
        with self._lock:
            if sids is None:
                rows = self.conn.execute(self._sql(query, s="sources")).fetchall()
            else:
                rows = self.conn.execute(self._sql(query + " WHERE source_id = ANY(%s)", s="sources"),
                                         (list(dict.fromkeys(str(s) for s in sids)),)).fetchall()
        return {r[0]: RecordHead(r[1], r[2], int(r[3]), int(r[4]), r[5]) for r in rows}

    def unfinished(self) -> dict[str, RecordHead]:
        """Sources not ``complete``: none, unless written through `set_state`."""
        with self._lock:
            rows = self.conn.execute(self._sql(
                "SELECT source_id, content_hash, state, id_span, n_chunks, origin FROM {s} WHERE state != 'complete'",
                s="sources")).fetchall()
        return {r[0]: RecordHead(r[1], r[2], int(r[3]), int(r[4]), r[5]) for r in rows}

    def put(self, records: Sequence[SourceRecord]) -> int:
        """Write source rows (their chunks stay: a metadata-only change), fenced."""
        records = list(records)
        with self._transaction([r.source_id for r in records]):
            self._upsert_sources(records)
            self._log([r.source_id for r in records])
        return self.generation()

    def set_state(self, sids: Sequence[str], state: str, *, id_span: int | None = None) -> int:
        """Set the state (and optionally the id span) of these sources; returns how many changed.

        Raises:
            ValueError: a state that is not one of the store's states.
        """
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {state!r}")
        sids = list(sids)
        with self._transaction(sids):
            if id_span is None:
                self.conn.execute(self._sql("UPDATE {s} SET state = %s WHERE source_id = ANY(%s)", s="sources"),
                                  (state, sids))
            else:
                self.conn.execute(self._sql("UPDATE {s} SET state = %s, id_span = CASE WHEN %s < 0 THEN n_chunks "
                                            "ELSE %s END WHERE source_id = ANY(%s)", s="sources"),
                                  (state, id_span, id_span, sids))
            self._log(sids)
        return self.generation()

    def remove(self, sids: Sequence[str]) -> int:
        """Remove sources with their chunks and term statistics, in one transaction."""
        from psycopg import sql

        sids = list(dict.fromkeys(str(s) for s in sids))
        if not sids:
            return self.generation()
        with self._transaction(sids):
            self._drop_chunks(sql.SQL("c.source_id = ANY(%s)"), (sids,))
            self.conn.execute(self._sql("DELETE FROM {s} WHERE source_id = ANY(%s)", s="sources"), (sids,))
            self._log(sids)
        return self.generation()

    def generation(self) -> int:
        """The newest change-log entry (it grows with every write)."""
        with self._lock:
            return int(self.conn.execute(self._sql("SELECT coalesce(max(generation), 0) FROM {c}",
                                                   c="changes")).fetchone()[0])

    def changes_since(self, generation: int) -> set[str] | None:
        """Source ids changed after ``generation``. A transaction may commit after one
        that took a later generation, so this is a hint (this store keeps no cache)."""
        with self._lock:
            rows = self.conn.execute(self._sql("SELECT DISTINCT source_id FROM {c} WHERE generation > %s",
                                               c="changes"), (int(generation),)).fetchall()
        return {r[0] for r in rows}

    def get_meta(self) -> dict[str, Any]:
        """The index manifest (``{}`` before the first write)."""
        with self._lock:
            row = self.conn.execute(self._sql("SELECT value FROM {t} WHERE key = 'manifest'", t="settings")).fetchone()
        return dict(row[0]) if row else {}

    def set_meta(self, meta: dict[str, Any]) -> None:
        """Replace the index manifest with ``meta`` (committed at once)."""
        with self._lock:
            self.conn.execute(self._sql("INSERT INTO {t} VALUES ('manifest', %s::jsonb) ON CONFLICT (key) DO UPDATE "
                                        "SET value = EXCLUDED.value", t="settings"), (json.dumps(meta),))

    def get_blob(self, name: str) -> bytes | None:
        """The blob stored under ``name``, or ``None``."""
        with self._lock:
            row = self.conn.execute(self._sql("SELECT data FROM {b} WHERE name = %s", b="blobs"), (name,)).fetchone()
        return bytes(row[0]) if row else None

    def put_blob(self, name: str, data: bytes | None) -> None:
        """Store ``data`` under ``name``; ``None`` deletes the blob."""
        with self._lock:
            if data is None:
                self.conn.execute(self._sql("DELETE FROM {b} WHERE name = %s", b="blobs"), (name,))
            else:
                self.conn.execute(self._sql("INSERT INTO {b} VALUES (%s, %s) ON CONFLICT (name) DO UPDATE "
                                            "SET data = EXCLUDED.data", b="blobs"), (name, data))

    def check(self) -> list[str]:
        """What this store checks (it has no pending states to finish): every complete
        source has exactly its chunks, of its version, and the term statistics count
        the chunks held. Problems as sentences (empty: none)."""
        problems = []
        if not self._ready():
            return problems
        with self._lock:
            bad = self.conn.execute(self._sql(
                "SELECT s.source_id FROM {s} s LEFT JOIN (SELECT source_id, count(*) n, "
                "array_agg(DISTINCT content_hash) h "
                "FROM {c} GROUP BY source_id) c ON c.source_id = s.source_id "
                "WHERE coalesce(c.n, 0) != s.n_chunks OR (c.n > 0 AND c.h != ARRAY[s.content_hash]) LIMIT 5",
                s="sources", c="chunks")).fetchall()
            orphans = self.conn.execute(self._sql(
                "SELECT count(*) FROM {c} c WHERE NOT EXISTS (SELECT 1 FROM {s} s WHERE s.source_id = c.source_id)",
                s="sources", c="chunks")).fetchone()[0]
            stats = self.conn.execute(self._sql("SELECT coalesce(sum(df), 0) FROM {t} WHERE term = ''", t="terms")
                                      ).fetchone()[0]
            held = self.conn.execute(self._sql("SELECT count(*) FROM {c}", c="chunks")).fetchone()[0]
        if bad:
            problems.append(f"{len(bad)} source(s) whose chunks do not match their record (e.g. {bad[0][0]!r})")
        if orphans:
            problems.append(f"{orphans} chunk(s) of no source")
        if int(stats) != int(held):
            problems.append(f"the BM25 statistics count {stats} chunks, the table holds {held}")
        missing = [] if self._bulk else self.missing_search_indexes()
        if missing:
            problems.append(f"search index(es) {', '.join(missing)} missing (an interrupted bulk load?): searches "
                            "scan the whole table; `swrag repair` builds them")
        return problems

    def clear(self) -> None:
        """Drop every source, chunk and statistic of the collection (keeps the manifest)."""
        with self._lock, self.conn.transaction():
            for kind in ("sources", "terms", "changes", "blobs"):
                self.conn.execute(self._sql("DELETE FROM {t}", t=kind))
            if self._ready():
                self.conn.execute(self._sql("DELETE FROM {t}", t="chunks"))

    def close(self) -> None:
        """Close the connection."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(Exception):
                self.conn.close()

    # ------------------------------------------------------------------ reading vectors
    def present(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``{vector id: chunk metadata}`` of those of ``ids`` the chunks table holds."""
        ids = [str(i) for i in ids]
        if not ids or not self._ready():
            return {}
        with self._lock:
            rows = self.conn.execute(self._sql("SELECT vector_id, metadata FROM {c} WHERE vector_id = ANY(%s)",
                                               c="chunks"), (ids,)).fetchall()
        return {r[0]: dict(r[1]) for r in rows}

    def stored_vectors(self, vector_ids: Sequence[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        """``{vector_id: (vector, metadata)}`` of the ids held."""
        ids = [str(i) for i in vector_ids]
        if not ids or not self._ready():
            return {}
        with self._lock:
            rows = self.conn.execute(self._sql("SELECT vector_id, embedding, metadata FROM {c} "
                                               "WHERE vector_id = ANY(%s)", c="chunks"), (ids,)).fetchall()
        return {r[0]: (_floats(r[1]), dict(r[2])) for r in rows}

    def held_ids(self) -> list[str]:
        """Every vector id the chunks table holds."""
        if not self._ready():
            return []
        with self._lock:
            return [r[0] for r in self.conn.execute(self._sql("SELECT vector_id FROM {c}", c="chunks")).fetchall()]

    def count(self) -> int | None:
        """How many chunk vectors the index holds."""
        if not self._ready():
            return 0
        with self._lock:
            return int(self.conn.execute(self._sql("SELECT count(*) FROM {c}", c="chunks")).fetchone()[0])

    def native_filter(self, flt: Any) -> dict[str, Any] | None:
        """The parsed filter as a parameterised SQL condition (``{"where", "params"}``), or ``None``
        when it has no SQL form (the engine then filters after the search)."""
        pushed = postgres_filter(flt)
        return None if pushed is None else {"where": pushed[0], "params": pushed[1]}

    @staticmethod
    def _where(native: dict[str, Any] | None) -> tuple[Any, list[Any]]:
        from psycopg import sql

        if not native:
            return sql.SQL("TRUE"), []
        return native["where"], list(native["params"])

    def _nearest(self, vector: Sequence[float], n: int, native: dict[str, Any] | None,
                 with_vectors: bool = False) -> list[tuple[Any, ...]]:
        from psycopg import sql

        if n <= 0 or not self._ready():
            return []
        where, params = self._where(native)
        q = np.asarray(vector, dtype=np.float32)
        query = sql.SQL("SELECT c.text, c.metadata, c.vector_id, c.embedding <=> %s AS d{extra} FROM {chunks} c "
                        "WHERE {where} ORDER BY c.embedding <=> %s LIMIT %s").format(
            extra=sql.SQL(", c.embedding" if with_vectors else ""), chunks=self._t("chunks"), where=where)
        with self._lock, self.conn.transaction():
            # HNSW returns at most ef_search rows: ask for what is wanted (pgvector caps it at 1000)
            self.conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(EF_SEARCH, min(1000, n))),))
            rows = self.conn.execute(query, [q, *params, q, int(n)]).fetchall()
            if native and len(rows) < n:
                # the filter dropped HNSW's candidates (pgvector filters after the graph search):
                # the exact nearest of the rows that pass, by a scan without the index
                self.conn.execute("SELECT set_config('enable_indexscan', 'off', true), "
                                  "set_config('enable_seqscan', 'on', true)")
                rows = self.conn.execute(query, [q, *params, q, int(n)]).fetchall()
            return rows

    def search(self, vector: Sequence[float], k: int, *, mmr: bool = False, fetch_k: int | None = None,
               lambda_mult: float = 0.5, native: dict[str, Any] | None = None) -> list[Any]:
        """The ``k`` nearest chunks, best first; with ``mmr`` the ones
        `mmr_select` picks among ``fetch_k``."""
        if not mmr:
            return [PlainDocument(r[0], dict(r[1]), r[2]) for r in self._nearest(vector, k, native)]
        from swrag_integrations.stores.chroma import mmr_select

        rows = self._nearest(vector, max(k, fetch_k or 4 * k), native, with_vectors=True)
        if not rows:
            return []
        picked = set(mmr_select(vector, [_floats(r[4]) for r in rows], k, lambda_mult))
        return [PlainDocument(r[0], dict(r[1]), r[2]) for i, r in enumerate(rows) if i in picked]

    def search_scored(self, vector: Sequence[float], k: int, *,
                      native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """The ``k`` nearest chunks with their cosine similarity clipped to [0, 1]."""
        return [(PlainDocument(r[0], dict(r[1]), r[2]), min(1.0, max(0.0, 1.0 - float(r[3]))))
                for r in self._nearest(vector, k, native)]

    def keyword_search(self, query: str, k: int, *, native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """The ``k`` best chunks for ``query`` by BM25 in the database (see the module
        docstring), with their scores, best first; chunks without a query term are not
        returned.

        Exact top ``k`` without scoring every chunk that holds a common query term (MaxScore,
        Turtle & Flood 1995): a term adds at most its idf to a chunk's score (``tf / (tf + K)
        < 1``), so after the chunks holding the rarest terms are scored, a chunk holding
        none of them scores below the sum of the other terms' idf; once that sum is at most
        the ``k``-th best score found, the rest cannot enter the top ``k`` (nor tie with it)
        and are never read. Otherwise the next-rarest term joins the candidates and the
        query runs again (at most once per term).
        """
        from swrag_integrations.keyword.bm25 import tokenize

        terms = sorted({t for t in tokenize(query) if len(t.encode()) <= _MAX_LEXEME_BYTES})
        if not terms or k <= 0 or not self._ready():
            return []
        where, params = self._where(native)
        with self._lock, self.conn.transaction():
            stats = dict((t, (int(df), int(ln))) for t, df, ln in self.conn.execute(self._sql(
                "SELECT term, sum(df), sum(len) FROM {t} WHERE term = ANY(%s) GROUP BY term", t="terms"),
                ([*terms, ""],)).fetchall())
            n_docs, total = stats.get("", (0, 0))
            if n_docs <= 0:
                return []
            avgdl = max(total / n_docs, 1e-9)
            df = {t: max(stats.get(t, (0, 0))[0], 0) for t in terms}
            terms = [t for t in terms if df[t] > 0] or terms
            idf = {t: float(np.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5))) for t in terms}
            rarest = sorted(terms, key=lambda t: (-idf[t], t))
            rest = [sum(idf[t] for t in rarest[j:]) for j in range(len(rarest) + 1)]  # the best a chunk can
            # reach holding none of rarest[:j]
            j, held = 0, 0
            while j < len(rarest) and held < k:  # enough candidates to fill k (before overlaps)
                held += df[rarest[j]]
                j += 1
            while True:
                rows = self._bm25_rows(rarest[:j], terms, idf, avgdl, where, params, k)
                if j >= len(rarest):
                    break
                theta = float(rows[-1][3]) if len(rows) >= k else 0.0
                if rest[j] * (1 + 1e-9) <= theta:
                    break
                j += 1  # one more term: the k-th best score only grows, so fewer terms may do than
                # the current score would ask for (the rarer terms' chunks are read again: few)
        return [(PlainDocument(r[0], dict(r[1]), r[2]), float(r[3])) for r in rows if float(r[3]) > 0]

    def _bm25_rows(self, candidates: Sequence[str], terms: Sequence[str], idf: dict[str, float], avgdl: float,
                   where: Any, params: Sequence[Any], k: int) -> list[tuple[Any, ...]]:
        """The ``k`` best chunks holding one of ``candidates``, scored over all ``terms``:
        ``(text, metadata, vector id, score)``, best first, ties in document order."""
        from psycopg import sql

        tsquery = " | ".join(_query_literal(t) for t in candidates)
        return self.conn.execute(sql.SQL(
            "SELECT c.text, c.metadata, c.vector_id, s.score FROM (SELECT c.vector_id, "
            "sum(q.idf * u.tf / (u.tf + %s * (1 - %s + %s * c.n_terms / %s))) AS score "
            "FROM {chunks} c CROSS JOIN LATERAL (SELECT lexeme, cardinality(positions) AS tf "
            "FROM unnest(c.terms)) u JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf) ON q.term = u.lexeme "
            "WHERE c.terms @@ %s::tsquery AND {where} GROUP BY c.vector_id, c.n_terms "
            "ORDER BY score DESC, c.source_id, c.chunk_index LIMIT %s) s JOIN {chunks} c "
            "ON c.vector_id = s.vector_id ORDER BY s.score DESC, c.source_id, c.chunk_index").format(
                chunks=self._t("chunks"), where=where),
            [BM25_K1, BM25_B, BM25_B, avgdl, list(terms), [idf[t] for t in terms], tsquery, *params,
             int(k)]).fetchall()

    # ------------------------------------------------------------------ upkeep
    def reopen(self) -> None:
        """Nothing to do: every query reads the committed state."""

    def rebuild(self, fence: Any = None) -> bool:
        """Rebuild the HNSW index from the stored vectors (``REINDEX``; nothing embedded)."""
        if not self._ready():
            return False
        if fence is not None:
            fence()
        if not self.restore_indexes():
            with self._lock:
                self.conn.execute(self._sql("REINDEX INDEX {i}", i="chunks_hnsw"))
        self.compact_terms()
        return True

