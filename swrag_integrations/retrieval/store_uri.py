"""Which vector store an index uses, named by a URI (``swrag ... --store URI``, ``storage="URI"``).

============================ ===============================================================
URI                          the vectors
============================ ===============================================================
``chroma``                   embedded Chroma in the index folder (the default)
``chroma://HOST[:PORT]``     a Chroma server (port 8000 by default; sources there too)
``milvus``                   Milvus Lite in ``<index folder>/milvus.db``
``milvus:PATH.db``           Milvus Lite in the file ``PATH.db`` (relative to the working folder)
``milvus://HOST[:PORT]``     a Milvus server over HTTP (port 19530 by default);
                             ``milvus+https://HOST[:PORT]`` over TLS
============================ ===============================================================

With Milvus the source store stays in the index folder (``--persist-dir``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StoreURI", "parse_store_uri", "STORE_FORMS"]

STORE_FORMS = ("chroma", "chroma://HOST[:PORT]", "milvus", "milvus:PATH.db", "milvus://HOST[:PORT]",
               "milvus+https://HOST[:PORT]")
"""The accepted forms, as error messages list them."""

_SERVER = re.compile(r"^(?P<scheme>chroma|milvus|milvus\+https)://(?P<host>[^:/\s]+)(?::(?P<port>\d{1,5}))?/?$")
_DEFAULT_PORT = {"chroma": 8000, "milvus": 19530, "milvus+https": 19530}


@dataclass(frozen=True)
class StoreURI:
    """A parsed store URI.

    Attributes:
        kind: ``"chroma"`` or ``"milvus"``.
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

    Raises:
        ValueError: any other form; the message names ``--store`` and lists the accepted forms.
    """
    text = os.fspath(uri) if isinstance(uri, os.PathLike) else uri
    if not isinstance(text, str):
        raise TypeError(f"store must be a URI string such as 'milvus:./index.db' or a VectorStorage, "
                        f"got {type(uri).__name__}")
    text = text.strip()
    if text in ("chroma", "milvus"):
        return StoreURI(text, text=text)
    if "://" in text:
        match = _SERVER.match(text)
        if match is None:
            raise _bad(text, "not a server address of the form SCHEME://HOST[:PORT] with scheme chroma, milvus "
                             "or milvus+https")
        scheme = match["scheme"]
        port = int(match["port"]) if match["port"] else _DEFAULT_PORT[scheme]
        if not 0 < port < 65536:
            raise _bad(text, f"port {port} is out of range")
        return StoreURI("milvus" if scheme.startswith("milvus") else "chroma", match["host"], port,
                        scheme == "milvus+https", text=text)
    scheme, sep, rest = text.partition(":")
    if sep and scheme == "milvus":
        if not rest.strip():
            raise _bad(text, "no Milvus Lite file after 'milvus:'")
        path = Path(rest).expanduser()
        if path.suffix != ".db":
            raise _bad(text, "a Milvus Lite file must end in .db (pymilvus opens only such paths locally)")
        return StoreURI("milvus", path=path, text=text)
    raise _bad(text, "unknown store")
