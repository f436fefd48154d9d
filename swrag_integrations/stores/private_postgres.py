"""A private PostgreSQL for tests, benchmarks and the evaluation (`PrivatePostgres`).

``pgserver`` (PyPI, in the ``[test]`` extra) ships PostgreSQL 16 with pgvector and starts it
from Python, as root too. `PrivatePostgres` starts one in a folder only its user can read
(mode 0700), listening on a Unix socket in that folder and on no TCP port (pgserver starts
``postgres -h ""``), so no other user of the machine can reach it; databases are created
and dropped with ``psycopg.sql.Identifier`` names, each with the ``vector`` extension.
Users point the index at their own server instead (``--store postgresql://...``).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

__all__ = ["PrivatePostgres"]


class PrivatePostgres:
    """A PostgreSQL server of this process in a private folder (see the module docstring).

    Args:
        folder: where the server keeps its data (created 0700); default a new temporary
            folder, removed by `stop`. A given folder is kept (its server can be started
            again on it).
        prefix: the temporary folder's name prefix.

    Raises:
        RuntimeError: the server could not start (the message names the folder and the cause).
    """

    def __init__(self, folder: str | Path | None = None, *, prefix: str = "swrag-pg-") -> None:
        import pgserver
        import psycopg

        self.owned = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix=prefix)) if folder is None else Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        self._names = itertools.count()
        try:
            self.server: Any = pgserver.get_server(self.folder, cleanup_mode="stop")
            with psycopg.connect(self.server.get_uri(), autocommit=True) as con:
                con.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:
            if self.owned:
                shutil.rmtree(self.folder, ignore_errors=True)
            raise RuntimeError(f"pgserver could not start PostgreSQL in {self.folder}: "
                               f"{type(exc).__name__}: {exc}") from exc
        self._stopped = False
        atexit.register(self.stop)

    def uri(self, database: str | None = None) -> str:
        """The libpq URI of ``database`` (default the server's own ``postgres``; the name
        percent-encoded)."""
        return self.server.get_uri(quote(database, safe="")) if database else self.server.get_uri()

    def create_database(self, name: str | None = None, *, exist_ok: bool = False) -> str:
        """Create a database (default name: ``swrag_<pid>_<n>``) with pgvector; its URI."""
        import psycopg
        from psycopg import sql

        name = name or f"swrag_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.uri(), autocommit=True) as con:
            there = con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if there and not exist_ok:
                raise ValueError(f"database {name!r} already exists on {self.folder}")
            if not there:
                con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        with psycopg.connect(self.uri(name), autocommit=True) as con:
            con.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.uri(name)

    def drop_database(self, uri_or_name: str) -> None:
        """Drop a database (by name, or the URI `create_database` gave), closing its connections."""
        import psycopg
        from psycopg import sql

        if self._stopped:
            return
        name = unquote(uri_or_name.split("?", 1)[0].rsplit("/", 1)[-1]) if "://" in uri_or_name else uri_or_name
        with psycopg.connect(self.uri(), autocommit=True) as con:
            con.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def stop(self) -> None:
        """Stop the server (and remove its folder when it was a temporary one); idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.server.cleanup()
        if self.owned:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "PrivatePostgres":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
