"""The default strategy with the index in PostgreSQL (``swrag eval`` strategies ``default@postgres*``).

* ``default@postgres``: `DefaultPipeline` (same chunking, ``k``, fusion and budget) with
  the whole index on `PostgresStorage`, so keyword
  search is the in-database BM25 (the package's own tokens, jieba for Chinese; term
  statistics written in the source's transaction) and dense search is pgvector's HNSW.
* ``default@postgres+local-bm25``: the same, except that keyword search runs in the
  in-process tantivy BM25 of ``default`` (``keyword_search="local"``): only the dense
  side is pgvector. Against ``default`` it measures the dense effect (pgvector HNSW
  against Chroma HNSW); against ``default@postgres`` the keyword effect (SQL BM25 against
  tantivy).

The database is a real PostgreSQL 16 with pgvector that ``pgserver`` starts on first use in
a private temporary folder (mode 0700, Unix socket only) and stops when the process exits
(`EvalPostgres`); each pipeline gets a fresh database, dropped by its ``close``.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
from typing import Any

from swrag_integrations.evaluation.langchain_pipelines import DefaultPipeline
from swrag_integrations.evaluation.pipelines import PipelineSpec, register_pipeline

__all__ = ["EvalPostgres", "DefaultPostgresPipeline", "DefaultPostgresLocalKeywordPipeline", "POSTGRES_REQUIRES"]

POSTGRES_REQUIRES: tuple[tuple[str, str], ...] = (
    ("psycopg", "psycopg[binary]>=3.1"), ("pgvector", "pgvector>=0.3"), ("pgserver", "pgserver>=0.1.4"))
"""The packages the ``default@postgres*`` strategies need (`PipelineSpec.requires`)."""


class EvalPostgres:
    """One PostgreSQL server per process for the evaluation, started lazily by ``pgserver``
    in a private temporary folder and stopped (folder removed) at exit."""

    _lock = threading.Lock()
    _server: Any = None
    _folder: str | None = None
    _count = itertools.count()

    @classmethod
    def _admin_uri(cls) -> str:
        with cls._lock:
            if cls._server is None:
                import pgserver
                import psycopg

                folder = tempfile.mkdtemp(prefix="swrag-eval-pg-")  # mode 0700
                try:
                    server = pgserver.get_server(folder, cleanup_mode="stop")
                    with psycopg.connect(server.get_uri(), autocommit=True) as con:
                        con.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except Exception as exc:
                    shutil.rmtree(folder, ignore_errors=True)
                    raise RuntimeError(f"pgserver could not start PostgreSQL in {folder}: "
                                       f"{type(exc).__name__}: {exc}") from exc
                cls._server, cls._folder = server, folder
                atexit.register(cls.stop)
            return cls._server.get_uri()

    @classmethod
    def new_database(cls) -> str:
        """The URI of a new, empty database (with pgvector) on this process's server."""
        import psycopg

        admin = cls._admin_uri()
        name = f"swrag_eval_{os.getpid()}_{next(cls._count)}"
        with psycopg.connect(admin, autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(cls._server.get_uri(name), autocommit=True) as con:
            con.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return cls._server.get_uri(name)

    @classmethod
    def drop_database(cls, uri: str) -> None:
        """Drop the database of ``uri`` (made by `new_database`); its connections must be closed."""
        import psycopg

        if cls._server is None:
            return
        name = uri.split("?", 1)[0].rsplit("/", 1)[-1]
        with psycopg.connect(cls._server.get_uri(), autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @classmethod
    def stop(cls) -> None:
        """Stop the server and remove its folder (registered with ``atexit``)."""
        with cls._lock:
            if cls._server is not None:
                cls._server.cleanup()
                shutil.rmtree(cls._folder or "", ignore_errors=True)
                cls._server = cls._folder = None


class DefaultPostgresPipeline(DefaultPipeline):
    """`DefaultPipeline` with the index in PostgreSQL + pgvector (a fresh database of
    `EvalPostgres`): keyword search in SQL, dense search in pgvector."""

    KEYWORD_SEARCH = "auto"  # the store's own keyword search (PostgresStorage has one)

    def _store_options(self) -> dict:
        self._database = EvalPostgres.new_database()
        return dict(storage=self._database, keyword_search=self.KEYWORD_SEARCH)

    def close(self) -> None:
        super().close()
        database = getattr(self, "_database", None)
        if database is not None:
            EvalPostgres.drop_database(database)
            self._database = None


class DefaultPostgresLocalKeywordPipeline(DefaultPostgresPipeline):
    """`DefaultPostgresPipeline` with keyword search in the in-process BM25 of ``default``:
    only the dense side differs from ``default``."""

    KEYWORD_SEARCH = "local"


register_pipeline("default@postgres", PipelineSpec(
    DefaultPostgresPipeline, None, needs_embeddings=True, requires=POSTGRES_REQUIRES,
    description="the defaults with the index in PostgreSQL (pgserver): BM25 in SQL, dense in pgvector"))
register_pipeline("default@postgres+local-bm25", PipelineSpec(
    DefaultPostgresLocalKeywordPipeline, None, needs_embeddings=True, requires=POSTGRES_REQUIRES,
    description="default@postgres with keyword search in the in-process BM25: only dense search in pgvector"))
