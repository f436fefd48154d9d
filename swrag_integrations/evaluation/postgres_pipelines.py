"""The default strategy with the index in PostgreSQL (``swrag eval`` strategies ``default@postgres*``).

* ``default@postgres``: `DefaultPipeline` (same chunking, ``k``, fusion and budget) with
  the whole index on `PostgresStorage`, so keyword
  search is the in-database BM25 (the package's own tokens, jieba for Chinese; term
  statistics written in the source's transaction) and dense search is pgvector's HNSW.
* ``default+keyword-only`` / ``default@postgres+keyword-only``: the two with the
  retriever's fusion weights (BM25, dense) = (1, 0), so only keyword search ranks (the
  engine skips the dense search): tantivy's BM25 against the SQL BM25.
* ``default+dense-only`` / ``default@postgres+dense-only``: weights (0, 1), only dense
  search ranks: Chroma's HNSW against pgvector's HNSW (the same vectors).

The two pairs tell the keyword effect and the dense effect of the database apart. (The
engine's ``keyword_search="local"`` on PostgreSQL is no such control: without a local
source store it falls back to the ``bm25s`` snapshot, not the tantivy index of ``default``.)

The database is a real PostgreSQL 16 with pgvector that ``pgserver`` starts on first use in
a private temporary folder (mode 0700, Unix socket only) and stops when the process exits
(`EvalPostgres`); each pipeline gets a fresh database, dropped by its ``close``.
"""

from __future__ import annotations

import threading
from typing import Any

from swrag_integrations.evaluation.langchain_pipelines import DefaultPipeline
from swrag_integrations.evaluation.pipelines import PipelineSpec, register_pipeline

__all__ = ["EvalPostgres", "DefaultPostgresPipeline", "DefaultKeywordOnlyPipeline", "DefaultDenseOnlyPipeline",
           "DefaultPostgresKeywordOnlyPipeline", "DefaultPostgresDenseOnlyPipeline", "POSTGRES_REQUIRES",
           "KEYWORD_ONLY", "DENSE_ONLY"]

POSTGRES_REQUIRES: tuple[tuple[str, str], ...] = (
    ("psycopg", "psycopg[binary]>=3.1"), ("pgvector", "pgvector>=0.3"), ("pgserver", "pgserver>=0.1.4"))
"""The packages the ``default@postgres*`` strategies need (`PipelineSpec.requires`)."""
KEYWORD_ONLY = {"weights": (1.0, 0.0)}
"""Retriever options that rank by keyword search alone (the dense search is skipped)."""
DENSE_ONLY = {"weights": (0.0, 1.0)}
"""Retriever options that rank by dense search alone (the keyword search is skipped)."""


class EvalPostgres:
    """One PostgreSQL server per process for the evaluation (`PrivatePostgres`: a private
    temporary folder, Unix socket only), started on first use and stopped at exit."""

    _lock = threading.Lock()
    _server: Any = None

    @classmethod
    def new_database(cls) -> str:
        """The URI of a new, empty database (with pgvector) on this process's server."""
        with cls._lock:
            if cls._server is None:
                from swrag_integrations.stores.private_postgres import PrivatePostgres

                cls._server = PrivatePostgres(prefix="swrag-eval-pg-")
        return cls._server.create_database()

    @classmethod
    def drop_database(cls, uri: str) -> None:
        """Drop the database of ``uri`` (made by `new_database`), closing its connections."""
        if cls._server is not None:
            cls._server.drop_database(uri)

    @classmethod
    def stop(cls) -> None:
        """Stop the server and remove its folder (also done at exit)."""
        with cls._lock:
            if cls._server is not None:
                cls._server.stop()
                cls._server = None


class DefaultPostgresPipeline(DefaultPipeline):
    """`DefaultPipeline` with the index in PostgreSQL + pgvector (a fresh database of
    `EvalPostgres`): keyword search in SQL, dense search in pgvector."""

    def _store_options(self) -> dict:
        self._database = EvalPostgres.new_database()
        return dict(storage=self._database)  # keyword_search "auto": the store's own BM25

    def close(self) -> None:
        super().close()
        database = getattr(self, "_database", None)
        if database is not None:
            EvalPostgres.drop_database(database)
            self._database = None


class DefaultKeywordOnlyPipeline(DefaultPipeline):
    """`DefaultPipeline` ranked by keyword search alone (tantivy's BM25)."""

    RETRIEVER_OPTIONS = KEYWORD_ONLY


class DefaultDenseOnlyPipeline(DefaultPipeline):
    """`DefaultPipeline` ranked by dense search alone (Chroma's HNSW)."""

    RETRIEVER_OPTIONS = DENSE_ONLY


class DefaultPostgresKeywordOnlyPipeline(DefaultPostgresPipeline):
    """`DefaultPostgresPipeline` ranked by keyword search alone (the SQL BM25)."""

    RETRIEVER_OPTIONS = KEYWORD_ONLY


class DefaultPostgresDenseOnlyPipeline(DefaultPostgresPipeline):
    """`DefaultPostgresPipeline` ranked by dense search alone (pgvector's HNSW)."""

    RETRIEVER_OPTIONS = DENSE_ONLY


for _name, _builder, _requires, _description in (
    ("default@postgres", DefaultPostgresPipeline, POSTGRES_REQUIRES,
     "the defaults with the index in PostgreSQL (pgserver): BM25 in SQL, dense in pgvector"),
    ("default+keyword-only", DefaultKeywordOnlyPipeline, (),
     "the defaults ranked by keyword search alone (weights 1, 0): the control of default@postgres+keyword-only"),
    ("default+dense-only", DefaultDenseOnlyPipeline, (),
     "the defaults ranked by dense search alone (weights 0, 1): the control of default@postgres+dense-only"),
    ("default@postgres+keyword-only", DefaultPostgresKeywordOnlyPipeline, POSTGRES_REQUIRES,
     "default@postgres ranked by the SQL BM25 alone (weights 1, 0)"),
    ("default@postgres+dense-only", DefaultPostgresDenseOnlyPipeline, POSTGRES_REQUIRES,
     "default@postgres ranked by pgvector alone (weights 0, 1)"),
):
    register_pipeline(_name, PipelineSpec(_builder, None, needs_embeddings=True, requires=_requires,
                                          description=_description))
