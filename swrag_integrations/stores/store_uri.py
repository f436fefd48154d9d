"""Which vector store an index uses, named by a URI (``swrag ... --store URI``, ``storage="URI"``).

============================ ===============================================================
URI                          the vectors
============================ ===============================================================
``chroma``                   embedded Chroma in the index folder (the default)
``chroma://HOST[:PORT]``     a Chroma server over HTTP (port 8000 by default; sources there too);
                             ``chroma+https://HOST[:PORT]`` over TLS
``milvus``                   Milvus Lite in ``<index folder>/milvus.db``
``milvus:PATH.db``           Milvus Lite in the file ``PATH.db`` (relative to the working folder)
``milvus://HOST[:PORT]``     a Milvus server over HTTP (port 19530 by default);
                             ``milvus+https://HOST[:PORT]`` over TLS
``postgresql://HOST/DB``     PostgreSQL with pgvector: sources, vectors and keywords in one
                             database (any libpq URI, e.g. a Unix-socket folder:
                             ``postgresql:///DB?host=/run/postgresql``; ``postgres://`` too)
============================ ===============================================================

With Milvus the source store stays in the index folder (``--persist-dir``); with
PostgreSQL everything lives in the database (no index folder needed).

A server's token is read from the environment, never from the URI or the command line
(where other local users see it in the process list): ``SWRAG_CHROMA_TOKEN`` (sent as
``Authorization: Bearer TOKEN``, chromadb's token authentication) and
``SWRAG_MILVUS_TOKEN`` (Milvus' ``USER:PASSWORD`` or API key); PostgreSQL's password comes
from libpq's ``PGPASSWORD`` or ``~/.pgpass`` (a URI with a password is refused). Send a token over
``+https`` only: over plain HTTP anyone on the path reads it (a warning says so).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

__all__ = ["StoreURI", "parse_store_uri", "STORE_FORMS", "TOKEN_ENV", "server_token", "check_postgres_uri",
           "redacted_uri"]

logger = logging.getLogger(__name__)

STORE_FORMS = ("chroma", "chroma://HOST[:PORT]", "chroma+https://HOST[:PORT]", "milvus", "milvus:PATH.db",
               "milvus://HOST[:PORT]", "milvus+https://HOST[:PORT]", "postgresql://USER@HOST[:PORT]/DB")
"""The accepted forms, as error messages list them."""

TOKEN_ENV = {"chroma": "SWRAG_CHROMA_TOKEN", "milvus": "SWRAG_MILVUS_TOKEN"}
"""The environment variable holding the token of a server of each kind."""

_SERVER = re.compile(r"^(?P<kind>chroma|milvus)(?P<tls>\+https)?://(?P<host>[^:/@\s]+)(?::(?P<port>\d{1,5}))?/?$")
_DEFAULT_PORT = {"chroma": 8000, "milvus": 19530}


def server_token(kind: str, server: str | None = None) -> str | None:
    """The token for a ``kind`` (``"chroma"``/``"milvus"``) server from its environment
    variable (`TOKEN_ENV`), or ``None`` when unset or empty; warns when it would
    travel over plain HTTP to ``server``."""
    token = os.environ.get(TOKEN_ENV[kind], "").strip() or None
    if token and server is not None and not server.startswith("https://"):
        logger.warning("%s is sent to %s over plain HTTP: anyone on the way can read it; use %s+https://",
                       TOKEN_ENV[kind], server, kind)
    return token


def check_postgres_uri(uri: str) -> str:
    """``uri`` when it is a libpq URI (``postgresql://`` or ``postgres://``) without a
    password; else a one-line ``ValueError``."""
    parts = urlsplit(uri)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"store {uri!r} (--store / storage=): not a postgresql:// URI")
    if parts.password or any(k.lower() == "password" for k in parse_qs(parts.query)):
        raise ValueError("store postgresql://... (--store / storage=): put no password in the URI (other users see it "
                         "in the process list): set PGPASSWORD or use ~/.pgpass")
    return uri


def redacted_uri(uri: str) -> str:
    """The URI as recorded and shown: an empty password field (``user:@host``) left out."""
    return re.sub(r"^(postgres(?:ql)?://[^:/@]*):@", r"\1@", uri)


@dataclass(frozen=True)
class StoreURI:
    """A parsed store URI.

    Attributes:
        kind: ``"chroma"``, ``"milvus"`` or ``"postgres"`` (then ``text`` is the libpq URI).
        host, port, ssl: the server (``host`` is ``None`` for an embedded store).
        path: the Milvus Lite file (``None``: ``<index folder>/milvus.db``, or a server).
        text: the URI as given (for messages).
    """

    kind: str
    host: str | None = None
    port: int | None = None
    ssl: bool = False
    path: Path | None = None
    text: str = ""

    @property
    def server(self) -> str | None:
        """The server's URL (``http(s)://host:port``), or ``None``."""
        if self.host is None:
            return None
        return f"{'https' if self.ssl else 'http'}://{self.host}:{self.port}"

    def lite_path(self, root: Path | None) -> Path:
        """The Milvus Lite file, ``<root>/milvus.db`` when the URI names none.

        Raises:
            ValueError: no file named and no index folder to put it in.
        """
        if self.path is not None:
            return self.path
        if root is None:
            raise ValueError(f"store {self.text!r} keeps Milvus Lite in the index folder: give persist_directory "
                             "(--persist-dir), or name the file: milvus:PATH.db")
        return root / "milvus.db"


def _bad(uri: object, why: str) -> ValueError:
    return ValueError(f"store {uri!r} (--store / storage=): {why}. Use one of: {', '.join(STORE_FORMS)}")


def parse_store_uri(uri: str | os.PathLike) -> StoreURI:
    """Check a store URI (see the module docstring) and return it parsed.

    Args:
        uri: the URI (``chroma``, ``milvus:PATH.db``, ``chroma://HOST[:PORT]``,
            ``postgresql://...``, ...), as a string or a path-like object; surrounding
            whitespace is ignored.

    Returns:
        The parsed `StoreURI`.

    Raises:
        TypeError: ``uri`` is neither a string nor a path-like object.
        ValueError: any other form, credentials in a server URI, a port out of range, a
            Milvus Lite file not ending in ``.db``, or a password in a PostgreSQL URI; the
            message names ``--store`` (and, but for the password, lists the accepted forms).
    """
    text = os.fspath(uri) if isinstance(uri, os.PathLike) else uri
    if not isinstance(text, str):
        raise TypeError(f"store must be a URI string such as 'milvus:./index.db' or a VectorStorage, "
                        f"got {type(uri).__name__}")
    text = text.strip()
    if text.startswith(("postgresql://", "postgres://")):
        return StoreURI("postgres", text=check_postgres_uri(text))
    if text in ("chroma", "milvus"):
        return StoreURI(text, text=text)
    if "://" in text:
        if "@" in text:
            raise _bad("://".join((text.split("://")[0], "...")), "put no credentials in the URI: set "
                       f"{TOKEN_ENV['chroma']} or {TOKEN_ENV['milvus']} in the environment instead")
        match = _SERVER.match(text)
        if match is None:
            raise _bad(text, "not a server address of the form SCHEME://HOST[:PORT] with scheme chroma, "
                             "chroma+https, milvus or milvus+https")
        port = int(match["port"]) if match["port"] else _DEFAULT_PORT[match["kind"]]
        if not 0 < port < 65536:
            raise _bad(text, f"port {port} is out of range")
        return StoreURI(match["kind"], match["host"], port, match["tls"] is not None, text=text)
    scheme, sep, rest = text.partition(":")
    if sep and scheme == "milvus":
        if not rest.strip():
            raise _bad(text, "no Milvus Lite file after 'milvus:'")
        path = Path(rest).expanduser()
        if path.suffix != ".db":
            raise _bad(text, "a Milvus Lite file must end in .db (pymilvus opens only such paths locally)")
        return StoreURI("milvus", path=path, text=text)
    raise _bad(text, "unknown store")
