"""Milvus for an index, through ``pymilvus``' ``MilvusClient`` (no LangChain).

`MilvusStorage` is a `VectorStorage` over one Milvus collection,
on Milvus Lite (a local ``.db`` file, ``pip install swrag-integrations[milvus]``) or a
Milvus server (``http(s)://host:19530``): the same code for both, tested here on Milvus
Lite 3.2 only. It holds what `ChromaStorage` holds -- one entry per small
chunk under the package's vector id, the chunk's exact text and the writer's metadata
(a JSON field), its vector under cosine similarity -- and searches keywords itself:

* the field ``keyword_text`` (the chunk text, or ``index_text(text)``) has an analyser and
  a BM25 ``Function`` turns it into the sparse vector ``sparse``, searched with the BM25
  metric (``k1 = 1.5``, ``b = 0.75``: the bm25s index's values; Milvus Lite 3.2.2 scores
  with ``k1 = 1.5`` whatever the index's ``bm25_k1`` says -- measured with 1.2 and 2.0 --
  so tantivy's 1.2, a local index's keyword index, cannot be matched there);
* the analyser (`ANALYZER`) is ``jieba`` in search mode for every chunk: on Han runs
  it segments words as the package's `tokenize` does (both use jieba's
  ``cut_for_search``), and on other text it splits at spaces and punctuation, which
  gives the word tokens of the standard tokenizer; one field and one analyser therefore
  serve Chinese, English and mixed chunks alike, decided per token as the package does
  (`swrag_integrations.core.lang`), with no language flag to keep per chunk. Milvus
  Lite 3.2 knows only the ``standard`` and ``jieba`` tokenizers (no multi-language
  analyser) and reads only ``stop`` filters, so punctuation is dropped through the stop
  list (the package's English and Chinese stop words plus punctuation); a server also
  applies ``lowercase`` and ``removepunct``.

`MilvusStorage.keyword_search` is the optional keyword capability the engine uses
instead of its in-process BM25 (`IndexEngine`, ``keyword_search="auto"``);
fusion with the dense hits stays the engine's one RRF (`rrf`), not
Milvus' ``hybrid_search``: its ``RRFRanker`` has no per-list weights and the dense side
would lose the engine's MMR and checks.

Against the in-process BM25 (measured on Milvus Lite 3.2.2, tests/stores/test_retrieval_milvus.py):
English and Chinese text gives the same tokens, and with one segment every chunk's score
is the in-process bm25s one (`BM25Index`, same ``k1``, ``b``) times ``k1 + 1``
(Milvus keeps that factor, bm25s' lucene variant drops it), so the rankings agree up to
the order of tied chunks; a local index's tantivy keyword index (``k1 = 1.2``, quantised
lengths) ranks a little differently. Known differences: a
query term given twice counts twice in Milvus (once in process); Latin letters outside
ASCII are cut by jieba (``café`` -> ``caf``, ``é``) and apostrophes split words, on both
sides alike; Milvus Lite keeps BM25 statistics per segment and computes them over the
filtered chunks when a filter is pushed down (a server: collection-wide), so scores can
differ a little in large or filtered collections.

Differences from Chroma, each handled here: collection names allow only letters, digits
and ``_`` (`milvus_collection_name`); a VARCHAR holds at most 65,535 bytes (a longer
chunk is refused with a clear error); Milvus Lite serves one process at a time (a second
process gets `MilvusLiteBusy`: use a Milvus server for several processes); a
collection is created with Strong consistency, so a search sees every acknowledged write.

Milvus Lite is an unauthenticated gRPC server inside this process. pymilvus starts it on
a TCP port of 127.0.0.1, where every local user could read and delete the index while it
is open; `open_milvus` starts it on a Unix socket in a private (0700) folder instead
(`_serve_lite`), which only this user can reach.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

from swrag_integrations.engine.filters import MAX_PUSHED_VALUES
from swrag_integrations.stores.storage import EmbeddingSide, PlainDocument
from swrag_integrations.core.paths import private_dir

__all__ = ["MilvusStorage", "MilvusLiteBusy", "open_milvus", "milvus_collection_name", "milvus_filter", "ANALYZER", "MAX_TEXT_BYTES",
           "MILVUS_EXTRA"]

logger = logging.getLogger(__name__)

MILVUS_EXTRA = "pip install 'swrag-integrations[milvus]'"
MAX_TEXT_BYTES = 65535
"""The longest VARCHAR Milvus stores (bytes of UTF-8)."""

_PUNCTUATION = sorted(set(r"""!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~""") | set("，。、；：？！“”‘’（）《》【】—…·「」『』〈〉～"))


def _stop_words() -> list[str]:
    from swrag_integrations.keyword.bm25 import CHINESE_STOPWORDS, ENGLISH_STOPWORDS

    return sorted(ENGLISH_STOPWORDS | CHINESE_STOPWORDS) + _PUNCTUATION


def analyzer_params() -> dict[str, Any]:
    """The analyser of the keyword field (see the module docstring)."""
    return {"tokenizer": {"type": "jieba", "mode": "search", "hmm": True},
            "filter": ["lowercase", "removepunct", {"type": "stop", "stop_words": _stop_words()}]}


ANALYZER = analyzer_params()
"""``analyzer_params`` of the ``keyword_text`` field."""

class MilvusLiteBusy(ConnectionError):
    """The Milvus Lite file cannot be opened: Milvus Lite serves one process at a time."""


_LITE_GRPC = {"grpc.keepalive_time_ms": 2**31 - 1, "grpc.keepalive_permit_without_calls": 0}
"""gRPC channel options of a Milvus Lite client (see `open_milvus`)."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
_LITE_USERS: dict[str, int] = {}  # Milvus Lite file -> open MilvusStorage handles of this process
_LITE_SERVERS: dict[str, tuple[Any, Any, str]] = {}  # Milvus Lite file -> (gRPC server, MilvusLite, socket folder)
_LITE_LOCK = threading.Lock()


def milvus_collection_name(name: str) -> str:
    """The Milvus collection of an index collection ``name``: ``name`` itself when Milvus
    allows it (letters, digits, ``_``), else ``name`` with other characters as ``_`` plus
    a hash of ``name`` (so ``a-b`` and ``a_b`` stay apart)."""
    if _NAME.match(name):
        return name
    clean = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not re.match(r"^[A-Za-z_]", clean):
        clean = "c_" + clean
    return f"{clean[:200]}_{hashlib.sha256(name.encode()).hexdigest()[:10]}"


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Silence these loggers meanwhile (pymilvus and Milvus Lite log tracebacks of errors
    that are reported here with a clear message)."""
    loggers = [logging.getLogger(n) for n in names]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was


def _import_error(exc: ImportError, module: str, needs: str) -> ImportError:
    """The error to raise when importing ``module`` failed with ``exc``: a
    ``ModuleNotFoundError`` naming the extra when ``module`` is not installed, else an
    ``ImportError`` that keeps the real cause (an installed module that fails to import,
    e.g. a dependency or shared library it lacks, is not a missing extra)."""
    import importlib.util

    missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == module
    if not missing:
        try:
            missing = importlib.util.find_spec(module) is None
        except (ImportError, ValueError):
            missing = False
    if missing:
        return ModuleNotFoundError(f"{needs}: {MILVUS_EXTRA}", name=module)
    return ImportError(f"{module} is installed but cannot be imported ({type(exc).__name__}: {exc}); repair that "
                       f"installation (e.g. pip install --force-reinstall {module.replace('_', '-')})")


def _serve_lite(path: Path) -> str:
    """The address (``unix:<socket>``) of this process's Milvus Lite server for the file
    ``path``, started on first use.

    Milvus Lite is a gRPC server without authentication; pymilvus' own start
    (``milvus_lite.server_manager``) binds it to a TCP port on 127.0.0.1, where any local
    user can connect, read every chunk and delete every vector while the index is open.
    Here it listens on a Unix socket inside a new folder of mode 0700 (``mkdtemp``):
    only this user (and root) can reach it. The folder goes when the server stops.

    Raises:
        MilvusLiteBusy: another process has the file open.
        RuntimeError: this platform or milvus-lite version cannot serve on a private socket.
    """
    import socket
    import tempfile

    key = str(path)
    with _LITE_LOCK:
        if key in _LITE_SERVERS:
            return "unix:" + os.path.join(_LITE_SERVERS[key][2], "milvus.sock")
        if not hasattr(socket, "AF_UNIX"):
            raise RuntimeError("Milvus Lite would serve the index on an unauthenticated TCP port that other local "
                               "users can reach; this platform has no Unix sockets to keep it private: use the "
                               "Chroma store or a Milvus server with a token (milvus+https://HOST, "
                               "SWRAG_MILVUS_TOKEN)")
        try:
            from milvus_lite.adapter.grpc.server import DEFAULT_MAX_WORKERS, _build_server
            from milvus_lite.db import MilvusLite
        except ImportError as exc:
            raise RuntimeError(f"this milvus-lite cannot serve a file on a private socket ({exc}); install the "
                               f"version the [milvus] extra names: {MILVUS_EXTRA}") from exc
        try:
            db = MilvusLite(key)
        except Exception as exc:
            raise MilvusLiteBusy(
                f"cannot open the Milvus Lite file {key!r} ({exc}). Milvus Lite serves one process at a "
                "time: close the other process using it, or use a Milvus server (--store milvus://HOST:19530) "
                "for several processes") from exc
        # a short folder: a socket path must stay under ~100 bytes
        folder = tempfile.mkdtemp(prefix="swrag-milvus-",
                                  dir=None if len(tempfile.gettempdir()) < 60 else "/tmp")
        try:
            server = _build_server(db, DEFAULT_MAX_WORKERS)
            if not server.add_insecure_port("unix:" + os.path.join(folder, "milvus.sock")):
                raise RuntimeError(f"gRPC could not listen on a Unix socket in {folder}")
            server.start()
        except BaseException:
            db.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        _LITE_SERVERS[key] = (server, db, folder)
    return "unix:" + os.path.join(folder, "milvus.sock")


def _stop_lite(key: str) -> None:
    """Stop this process's Milvus Lite server of the file ``key`` (releases the file)."""
    with _LITE_LOCK:
        entry = _LITE_SERVERS.pop(key, None)
    if entry is None:
        return
    server, db, folder = entry
    with contextlib.suppress(Exception):
        server.stop(grace=2).wait(5)
    with contextlib.suppress(Exception):
        db.close()
    shutil.rmtree(folder, ignore_errors=True)


def _stop_every_lite() -> None:
    """Stop every Milvus Lite server of this process (at exit: their socket folders go too)."""
    for key in list(_LITE_SERVERS):
        _stop_lite(key)


atexit.register(_stop_every_lite)


def open_milvus(*, path: Path | None = None, server: str | None = None, token: str | None = None) -> Any:
    """A ``MilvusClient`` for a Milvus Lite file ``path`` (created private, 0700 with the folders
    above it that are missing: milvus-lite >= 3.2 keeps a folder there) or a ``server`` URL
    (``https://`` for TLS), with clear errors. A server's ``token`` defaults to
    ``SWRAG_MILVUS_TOKEN`` (`server_token`).

    Raises:
        ModuleNotFoundError: pymilvus (or, for a file, milvus-lite) is not installed; names the extra.
        MilvusLiteBusy: the Lite file cannot be opened (another process has it open).
        ValueError: the Lite file's folder cannot be created.
        ConnectionError: the server does not answer.
    """
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise _import_error(exc, "pymilvus", "the Milvus store needs pymilvus") from exc
    if path is not None:
        try:
            import milvus_lite  # noqa: F401
        except ImportError as exc:
            raise _import_error(exc, "milvus_lite", "a local Milvus file needs milvus-lite") from exc
        path = Path(path).expanduser().absolute()
        with contextlib.suppress(ImportError):  # Milvus Lite's analyser segments with jieba: no start-up chatter
            import jieba

            jieba.setLogLevel(logging.WARNING)
        try:
            private_dir(path)  # milvus-lite >= 3.2 keeps its data in a folder at `path`: 0700 when new
        except OSError as exc:
            raise ValueError(f"cannot create the folder of the Milvus Lite file {str(path)!r} ({exc})") from exc
        address = _serve_lite(path)
        try:
            with _quiet("pymilvus.decorators"):
                # no keepalive pings to the in-process server: it answers idle pings with GOAWAY
                # "too_many_pings", which gRPC prints to stderr every 10-20 s of an idle handle
                return MilvusClient(uri=address, grpc_options=_LITE_GRPC, timeout=30)
        except Exception as exc:
            if not _LITE_USERS.get(str(path)):
                _stop_lite(str(path))
            raise ConnectionError(f"cannot connect to this process's Milvus Lite server of {str(path)!r} "
                                  f"({exc})") from exc
    if token is None:
        from swrag_integrations.stores.store_uri import server_token

        token = server_token("milvus", server)
    try:
        with _quiet("pymilvus.decorators"):
            client = MilvusClient(uri=server, token=token or "", timeout=30)
            client.list_collections()
        return client
    except Exception as exc:
        raise ConnectionError(f"cannot reach the Milvus server at {server} ({exc}); start one (see "
                              "https://milvus.io/docs/install_standalone-docker.md) or check --store") from exc


# ---------------------------------------------------------------------------- filters


def _path(key: str) -> str:
    return f"metadata[{json.dumps(key, ensure_ascii=False)}]"


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _plain(text: str) -> bool:
    """Whether Milvus reads ``text`` back exactly from its JSON literal: no control
    character (its ``\\uXXXX`` escape is read wrongly and crashed the search) and no
    backslash (escaped likewise); quotes are read back exactly."""
    return not any(ord(ch) < 32 or ch in "\\\x7f" for ch in text)


def _expression(flt: Any) -> str | None:
    """A Milvus expression that every chunk passing ``flt`` passes (``None``: no
    condition, i.e. all pass). Parts whose Milvus semantics differ from
    `matches` are left out (``None``): ``$ne``/``$nin``
    (Milvus fails missing keys and values of another type, the package passes them),
    equality with a boolean, and keys or strings that are not `_plain`; the engine
    checks every hit against the filter itself, so a wider expression only costs a
    larger fetch."""
    if flt.op in ("and", "or"):
        parts = [_expression(f) for f in flt.args]
        if flt.op == "or" and any(p is None for p in parts):
            return None
        kept = [p for p in parts if p is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else "(" + f" {flt.op} ".join(kept) + ")"
    if flt.op in ("$ne", "$nin") or not _plain(flt.key):
        return None
    if flt.op in ("$eq", "$in"):
        values = list(flt.value) if flt.op == "$in" else [flt.value]
        if len(values) > MAX_PUSHED_VALUES or any(isinstance(v, bool) or (isinstance(v, str) and not _plain(v))
                                                  for v in values):
            return None
        parts = [f"{_path(flt.key)} == {_literal(v)}" for v in values]
        return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"
    op = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[flt.op]
    return f"{_path(flt.key)} {op} {_literal(flt.value)}"


def milvus_filter(flt: Any) -> str | None:
    """A Milvus filter expression over the ``metadata`` JSON field for a
    `MetadataFilter`, or ``None`` when no part of it can be pushed down
    (see `_expression`)."""
    return _expression(flt)


# ---------------------------------------------------------------------------- the storage


class MilvusStorage(EmbeddingSide):
    """A `VectorStorage` over a Milvus collection, with BM25 in the store.

    Args:
        client: a ``MilvusClient`` (`open_milvus`).
        collection_name: the index's collection (mapped by `milvus_collection_name`).
        embedding: embeds queries, and chunk texts at `add` (wrapped in a
            `PrecomputedEmbeddings`, so vectors computed elsewhere are
            written as they are).
        index_text: ``chunk text -> text to embed and to index for BM25`` (the stored
            text stays exact).
        lite_path: the Milvus Lite file, if it is one (for `close`).
        server: the server URL, if it is one (for messages).
    """

    kind = "Milvus"
    can_get = True
    can_delete = True
    reopenable = False  # Milvus Lite serves one process; a server is read afresh by every request

    def __init__(self, client: Any, collection_name: str, embedding: Any, *, index_text: Any = None,
                 lite_path: Path | None = None, server: str | None = None) -> None:
        self.client = client
        self.collection_name = milvus_collection_name(collection_name)
        self.index_text = index_text or (lambda text: text)
        self._use_embedding(embedding, index_text)
        self.lite_path = Path(lite_path).absolute() if lite_path is not None else None
        self.server = server
        self._exists = False
        self._closed = False
        if self.lite_path is not None:
            with _LITE_LOCK:
                _LITE_USERS[str(self.lite_path)] = _LITE_USERS.get(str(self.lite_path), 0) + 1
        if self.client.has_collection(self.collection_name):
            self._load()

    @classmethod
    def open(cls, uri: Any, collection_name: str, embedding: Any, *, root: Path | None = None,
             index_text: Any = None, token: str | None = None) -> "MilvusStorage":
        """The storage a ``milvus...`` store URI names (`.store_uri`); ``root``: the
        index folder (for ``milvus`` alone: ``<root>/milvus.db``)."""
        from swrag_integrations.stores.store_uri import parse_store_uri

        spec = uri if not isinstance(uri, str) else parse_store_uri(uri)
        if spec.kind != "milvus":
            raise ValueError(f"store {spec.text!r} is not a Milvus store")
        if spec.host is not None:
            return cls(open_milvus(server=spec.server, token=token), collection_name, embedding,
                       index_text=index_text, server=spec.server)
        path = spec.lite_path(root)
        return cls(open_milvus(path=path), collection_name, embedding, index_text=index_text, lite_path=path)

    def __repr__(self) -> str:
        where = self.server or (str(self.lite_path) if self.lite_path else "client")
        return f"MilvusStorage({where!r}, {self.collection_name!r})"

    # ------------------------------------------------------------------ the collection
    def _load(self) -> None:
        self.client.load_collection(self.collection_name)
        self._exists = True

    def _ready(self) -> bool:
        """Whether the collection exists (another handle may have created it since)."""
        if not self._exists and self.client.has_collection(self.collection_name):
            self._load()
        return self._exists

    def _create(self, dim: int) -> None:
        """Create the collection for ``dim``-dimensional vectors (see the module docstring)."""
        from pymilvus import DataType, Function, FunctionType

        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        schema.add_field("keyword_text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES, enable_analyzer=True,
                         analyzer_params=ANALYZER)
        schema.add_field("metadata", DataType.JSON)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name="keyword_bm25", function_type=FunctionType.BM25,
                                     input_field_names=["keyword_text"], output_field_names=["sparse"]))
        params = self.client.prepare_index_params()
        params.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
        params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                         params={"bm25_k1": 1.5, "bm25_b": 0.75})
        # Strong: a search sees every write acknowledged before it (a source is marked
        # complete only after its vectors are written; readers must then find them)
        with _quiet("grpc._server"):  # Milvus Lite logs the AllocTimestamp (not implemented) of the index wait
            self.client.create_collection(self.collection_name, schema=schema, index_params=params,
                                          consistency_level="Strong")
        self._load()

    # ------------------------------------------------------------------ writing
    def _rows(self, ids: Sequence[str], texts: Sequence[str], keyword_texts: Sequence[str],
              metadatas: Sequence[dict[str, Any]], vectors: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
        rows = []
        for vid, text, kw, meta, vec in zip(ids, texts, keyword_texts, metadatas, vectors):
            for what, value in (("text", text), ("keyword text", kw)):
                size = len(value.encode("utf-8"))
                if size > MAX_TEXT_BYTES:
                    raise ValueError(
                        f"a chunk's {what} is {size} bytes (chunk {meta.get('chunk_id', vid)!r}); Milvus stores at "
                        f"most {MAX_TEXT_BYTES}: index with a smaller chunk_size, or use the Chroma store")
            rows.append({"id": str(vid), "text": text, "keyword_text": kw, "metadata": dict(meta),
                         "vector": [float(x) for x in vec]})
        return rows

    def add(self, chunks: Sequence[Any], ids: Sequence[str]) -> None:
        """Write (or overwrite) chunks under vector ids (an upsert, in batches of 500).

        The collection is created at the first write, for the dimension of the first
        vector. The stored text stays exact; ``index_text`` shapes what is embedded and
        indexed for BM25.

        Args:
            chunks: the chunks (``page_content``, ``metadata``); nothing happens when empty.
            ids: one vector id per chunk, in the same order.

        Raises:
            ValueError: a chunk's text (or keyword text) is longer than Milvus stores
                (``MAX_TEXT_BYTES`` UTF-8 bytes).
        """
        if not chunks:
            return
        texts = [c.page_content for c in chunks]
        vectors = self.precomputed.embed_documents(texts)
        rows = self._rows(list(ids), texts, [self.index_text(t) for t in texts], [dict(c.metadata) for c in chunks],
                          vectors)
        if not self._ready():
            self._create(len(rows[0]["vector"]))
        for b in range(0, len(rows), 500):
            self.client.upsert(self.collection_name, rows[b:b + 500])

    def delete(self, ids: Sequence[str]) -> int:
        """Delete these vector ids where present (in batches of 1000).

        Args:
            ids: the vector ids; repeated ids count once.

        Returns:
            How many distinct ids were asked to go (absent ones included; none is
            deleted while the collection does not exist yet).
        """
        ids = list(dict.fromkeys(str(i) for i in ids))
        if ids and self._ready():
            for b in range(0, len(ids), 1000):
                self.client.delete(self.collection_name, ids=ids[b:b + 1000])
        return len(ids)

    # ------------------------------------------------------------------ reading
    def present(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The metadata of those of the given ids the collection holds.

        Args:
            ids: the vector ids to look up.

        Returns:
            ``{vector id: metadata}``; absent ids are left out (all of them while the
            collection does not exist yet).
        """
        out: dict[str, dict[str, Any]] = {}
        ids = [str(i) for i in ids]
        if not ids or not self._ready():
            return out
        for b in range(0, len(ids), 500):
            for row in self.client.get(self.collection_name, ids=ids[b:b + 500], output_fields=["metadata"]):
                out[str(row["id"])] = dict(row.get("metadata") or {})
        return out

    def count(self) -> int | None:
        """How many vectors the collection holds (``count(*)``).

        Returns:
            The count; 0 while the collection does not exist yet.
        """
        if not self._ready():
            return 0
        rows = self.client.query(self.collection_name, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def _search(self, data: Any, field: str, n: int, native: dict[str, Any] | None,
                output: list[str]) -> list[dict[str, Any]]:
        if n <= 0 or not self._ready():
            return []
        got = self.client.search(self.collection_name, data=[data], anns_field=field, limit=int(n),
                                 filter=(native or {}).get("filter") or "", output_fields=output)
        return list(got[0]) if got else []

    @staticmethod
    def _chunk(hit: dict[str, Any]) -> PlainDocument:
        entity = hit.get("entity") or {}
        return PlainDocument(page_content=entity.get("text") or "", metadata=dict(entity.get("metadata") or {}),
                             id=str(hit["id"]))

    def search(self, vector: Sequence[float], k: int, *, mmr: bool = False, fetch_k: int | None = None,
               lambda_mult: float = 0.5, native: dict[str, Any] | None = None) -> list[Any]:
        """The ``k`` nearest chunks, best first; with ``mmr`` the ones
        `mmr_select` picks among ``fetch_k``, in similarity order (as
        `ChromaStorage` returns them)."""
        query = [float(x) for x in vector]
        if not mmr:
            return [self._chunk(h) for h in self._search(query, "vector", k, native, ["text", "metadata"])]
        from swrag_integrations.stores.chroma import mmr_select

        hits = self._search(query, "vector", max(k, fetch_k or 4 * k), native, ["text", "metadata", "vector"])
        if not hits:
            return []
        picked = set(mmr_select(vector, [h["entity"]["vector"] for h in hits], k, lambda_mult))
        return [self._chunk(h) for i, h in enumerate(hits) if i in picked]

    def search_scored(self, vector: Sequence[float], k: int, *,
                      native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """The ``k`` nearest chunks with their cosine similarity clipped to [0, 1]."""
        hits = self._search([float(x) for x in vector], "vector", k, native, ["text", "metadata"])
        return [(self._chunk(h), min(1.0, max(0.0, float(h["distance"])))) for h in hits]

    def keyword_search(self, query: str, k: int, *, native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """The ``k`` best chunks for ``query`` by BM25 in the store, with their BM25
        scores, best first (chunks without a query term are not returned).

        Milvus Lite reports a BM25 hit's distance as the negative score, a server as the
        score; the score returned here is its absolute value in both cases.
        """
        hits = self._search(query, "sparse", k, native, ["text", "metadata"])
        return [(self._chunk(h), abs(float(h["distance"]))) for h in hits if float(h["distance"]) != 0.0]

    def native_filter(self, flt: Any) -> dict[str, Any] | None:
        """Milvus' filter expression for a `MetadataFilter` (`milvus_filter`).

        The expression may cover only part of the filter: the engine checks every hit
        against the filter itself.

        Args:
            flt: the `MetadataFilter`.

        Returns:
            ``{"filter": expression}`` to pass back as ``native=``, or ``None`` when no
            part of the filter can be pushed down to Milvus.
        """
        expr = milvus_filter(flt)
        return None if expr is None else {"filter": expr}

    # ------------------------------------------------------------------ upkeep
    def reopen(self) -> None:
        """Nothing to do: Milvus Lite serves this process alone, and a server answers
        every request from its current data (Strong consistency)."""

    def held_ids(self) -> list[str] | None:
        """Every vector id the collection holds."""
        return [str(r["id"]) for r in self.rows(fields=["id"])]

    def rows(self, batch_size: int = 1000,
             fields: Sequence[str] = ("text", "keyword_text", "metadata", "vector")) -> list[dict[str, Any]]:
        """Every stored row (``id`` and ``fields``; by default ``text``, ``keyword_text``,
        ``metadata``, ``vector``), read through a query iterator (a server caps offset
        paging at 16,384 rows)."""
        if not self._ready():
            return []
        out: list[dict[str, Any]] = []
        # Milvus Lite has no AllocTimestamp: its gRPC server logs the call as an error and
        # the iterator falls back to a client-side timestamp (and warns); both are noise here
        with _quiet("grpc._server", "pymilvus.client.iterator.query_iterator"):
            it = self.client.query_iterator(self.collection_name, batch_size=batch_size, filter="",
                                            output_fields=list(fields))
            try:
                while True:
                    batch = it.next()
                    if not batch:
                        break
                    out.extend(batch)
            finally:
                it.close()
        return out

    def rebuild(self, fence: Any = None) -> bool:
        """Drop the collection and write everything it held into a new one (the vectors
        as stored: nothing is embedded; the BM25 vectors are derived again from the
        keyword text). ``fence``: called right before the drop.

        Returns ``False``, changing nothing, when the collection holds no rows (e.g. a
        rebuild killed between its drop and its writes): there is nothing to copy, so
        the engine embeds every chunk again from the source store instead."""
        rows = [{"id": str(r["id"]), "text": r["text"], "keyword_text": r["keyword_text"],
                 "metadata": dict(r.get("metadata") or {}), "vector": [float(x) for x in r["vector"]]}
                for r in self.rows()]
        if not rows:
            return False
        if fence is not None:
            fence()
        if self._ready():
            self.client.drop_collection(self.collection_name)
        self._exists = False
        self._create(len(rows[0]["vector"]))
        for b in range(0, len(rows), 500):
            self.client.upsert(self.collection_name, rows[b:b + 500])
        return True

    def close(self) -> None:
        """Let go of the store: for Milvus Lite, the last handle of this process stops its
        server and releases the file for other processes."""
        if self._closed:
            return
        self._closed = True
        if self.lite_path is None:
            self.client.close()
            return
        key = str(self.lite_path)
        with _LITE_LOCK:
            left = _LITE_USERS.get(key, 1) - 1
            if left > 0:
                _LITE_USERS[key] = left
                return
            _LITE_USERS.pop(key, None)
        with contextlib.suppress(Exception):
            self.client.close()
        _stop_lite(key)
