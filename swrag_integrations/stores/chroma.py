"""Chroma for an index, through ``chromadb`` itself (no LangChain).

* `open_client` -- an embedded (``<dir>/chroma``), server or given client, with
  clear errors; `fresh_client` drops chromadb's cached system for a folder.
* `vector_collection` -- the chunk-vector collection (cosine distance), which the
  engine, both faces and the CLI open through `ChromaStorage` (one adapter).
* `copy_collection` -- start a collection afresh from the vectors it holds.
* `ChromaStorage` -- a `VectorStorage` over such a collection,
  the default storage of `IndexEngine`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from swrag_integrations.stores.storage import EmbeddingSide, PlainDocument
from swrag_integrations.core.paths import private_dir

__all__ = ["open_client", "fresh_client", "vector_collection", "copy_collection", "ChromaStorage", "mmr_select",
           "stale_chroma", "chroma_collection"]

logger = logging.getLogger(__name__)


def stale_chroma(exc: BaseException) -> bool:
    """Whether ``exc`` is embedded Chroma's "Nothing found on disk" for an HNSW segment:
    this process's cached Chroma system holds the state of a collection it searched
    while empty, and another process has written to it since."""
    return type(exc).__name__ == "InternalError" and "nothing found on disk" in str(exc).lower()


def chroma_collection(store: Any) -> Any | None:
    """The ``chromadb`` collection behind a vector store object, or ``None`` when it is no
    Chroma store: ``langchain_chroma.Chroma`` keeps it as ``_collection`` (the one test
    of "is this store Chroma" for reading its vectors, ids and count)."""
    collection = getattr(store, "_collection", None)
    if collection is None or not all(hasattr(collection, name) for name in ("get", "count")):
        return None
    return collection


def open_client(root: Path | None, *, host: str | None = None, port: int | None = None, ssl: bool = False,
                headers: dict[str, str] | None = None, client: Any = None,
                lock_timeout: float = 600.0) -> tuple[Any, str | None]:
    """``(chromadb client, server URL or None)``: ``client`` as given, a server at
    ``host`` (over TLS with ``ssl``; with chromadb's token authentication when
    ``SWRAG_CHROMA_TOKEN`` is set: `server_token`), else an embedded
    database in ``root / "chroma"``.

    Raises:
        ConnectionError: the server does not answer.
        LockTimeout: another process has held the folder's open lock for ``lock_timeout`` s.
        ValueError: the folder cannot hold a Chroma database.
    """
    import chromadb
    from chromadb.config import Settings

    from swrag_integrations.stores.sources import LockTimeout

    settings = Settings(anonymized_telemetry=False)
    if client is not None:
        return client, None
    if host is not None:
        from swrag_integrations.stores.store_uri import server_token

        port = int(port or 8000)
        server = f"{'https' if ssl else 'http'}://{host}:{port}"
        token = server_token("chroma", server)
        if token is not None:  # sent as "Authorization: Bearer TOKEN" by chromadb's provider
            settings = Settings(anonymized_telemetry=False, chroma_client_auth_credentials=token,
                                chroma_client_auth_provider="chromadb.auth.token_authn.TokenAuthClientProvider")
        try:
            found = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers, settings=settings)
            found.heartbeat()
            return found, server
        except Exception as exc:  # chromadb raises ValueError / httpx errors
            raise ConnectionError(
                f"cannot reach the Chroma server at {server} ({exc}). Start one with "
                f"`chroma run --path DIR --host {host} --port {port}` or check host/port."
            ) from exc
    if root is None:
        raise ValueError("give a persist_directory, a host or a client for the Chroma vectors")
    from filelock import FileLock, Timeout

    # chromadb keeps one client per path *string* for the process: a relative path opened
    # from two working folders would reach the first folder's database from the second
    root = Path(root).resolve()
    # Chroma creates its SQLite schema on first open without a lock of its own: two
    # processes opening a new folder at once raced ("table collections already exists")
    try:
        with FileLock(str(root / "chroma.open.lock"), timeout=lock_timeout):
            private_dir(root / "chroma")  # before Chroma makes it 0755 (paths.py)
            return chromadb.PersistentClient(path=str(root / "chroma"), settings=settings), None
    except Timeout as exc:
        raise LockTimeout(f"another process has been opening the Chroma database in {str(root)!r} for over "
                          f"{lock_timeout:.0f} s") from exc
    except Exception as exc:
        raise ValueError(f"cannot open a Chroma database in {str(root / 'chroma')!r}: {exc}") from exc


def fresh_client(client: Any, root: Path, lock_timeout: float = 600.0) -> Any:
    """A new embedded client for ``root`` with a new chromadb ``System``.

    chromadb keeps one ``System`` per folder and process (``SharedSystemClient``),
    shared by every client opened on it. A nearest-neighbour query on a collection
    while it was empty leaves that system's HNSW segment state at "nothing
    persisted"; once another process has written, every search of every handle in
    this process fails with "Error creating hnsw segment reader: Nothing found on
    disk", and chromadb offers no reload. A new ``System`` reads the collection afresh
    (from its files and write log). So the stale system is dropped from chromadb's
    cache (not stopped: other handles may still hold it; they reopen in turn and then
    share the new one) and a new client is opened.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    identifier = getattr(client, "_identifier", None)
    cache = SharedSystemClient._identifier_to_system
    if identifier is not None and cache.get(identifier) is getattr(client, "_system", None):
        cache.pop(identifier, None)
    return open_client(root, lock_timeout=lock_timeout)[0]


def vector_collection(client: Any, name: str) -> Any:
    """The chunk-vector collection ``name`` (created with cosine distance)."""
    return client.get_or_create_collection(name=name, embedding_function=None,
                                           configuration={"hnsw": {"space": "cosine"}},
                                           metadata={"swrag_role": "vectors"})


def copy_collection(client: Any, name: str, fence: Any = None) -> Any:
    """Delete collection ``name`` and write everything it held into a new one of that
    name (the vectors as stored: nothing is embedded); returns the new collection.
    ``fence``: called right before the delete (the writer's lease check)."""
    old = client.get_collection(name)
    rows: dict[str, list] = {"ids": [], "embeddings": [], "documents": [], "metadatas": []}
    offset = 0
    while True:
        got = old.get(include=["embeddings", "documents", "metadatas"], limit=1000, offset=offset)
        if not got["ids"]:
            break
        for key in rows:
            rows[key].extend(got[key])
        offset += len(got["ids"])
    if fence is not None:
        fence()
    client.delete_collection(name)
    fresh = vector_collection(client, name)
    for b in range(0, len(rows["ids"]), 1000):
        fresh.upsert(ids=rows["ids"][b:b + 1000], embeddings=rows["embeddings"][b:b + 1000],
                     documents=rows["documents"][b:b + 1000], metadatas=rows["metadatas"][b:b + 1000])
    return fresh


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-by-row cosine similarities of ``a`` and ``b`` (0 where a row is all zeros)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        sim = np.dot(a, b.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    sim[~np.isfinite(sim)] = 0.0
    return sim


def mmr_select(query: Any, candidates: Any, k: int, lambda_mult: float) -> list[int]:
    """Indices of ``k`` of ``candidates`` (rows) chosen by maximal marginal relevance
    under cosine similarity: the first is the most similar to ``query``, each next one
    maximises ``lambda_mult * sim(query, c) - (1 - lambda_mult) * max sim(c, chosen)``
    (ties: the earlier candidate). The query is taken in float32 and the candidates as
    the store returned them, as ``langchain_chroma`` does, so both faces of an index
    pick the same chunks even among near-ties."""
    cand = np.asarray(candidates)
    if not len(cand) or k <= 0:
        return []
    relevance = _cosine(np.asarray(query, dtype=np.float32)[None, :], cand)[0]
    chosen = [int(np.argmax(relevance))]
    # the highest similarity of each candidate to any chosen one, updated with the newest
    # pick only: each step costs one column of similarities, not one per chosen candidate
    redundancy = _cosine(cand, cand[chosen[-1:]])[:, 0]
    while len(chosen) < min(k, len(cand)):
        score = lambda_mult * relevance - (1 - lambda_mult) * redundancy
        score[chosen] = -np.inf
        chosen.append(int(np.argmax(score)))
        redundancy = np.maximum(redundancy, _cosine(cand, cand[chosen[-1:]])[:, 0])
    return chosen


class ChromaStorage(EmbeddingSide):
    """A `VectorStorage` over a Chroma collection, through ``chromadb``.

    Args:
        client: a chromadb client (`open_client`).
        collection_name: the vector collection.
        embedding: embeds queries, and chunk texts at `add` (wrapped in a
            `PrecomputedEmbeddings`, so vectors computed elsewhere are
            written as they are).
        index_text: ``chunk text -> text to embed`` for the chunks (e.g. with a header).
        root: the folder of an embedded client (``None`` for a server): enables
            `reopen`.
        lock_timeout: for reopening the embedded database.
    """

    kind = "Chroma"
    can_get = True
    can_delete = True

    def __init__(self, client: Any, collection_name: str, embedding: Any, *, index_text: Any = None,
                 root: Path | None = None, lock_timeout: float = 600.0) -> None:
        self.client = client
        self.collection_name = collection_name
        self._use_embedding(embedding, index_text)
        self.root = root
        self.reopenable = root is not None
        self.lock_timeout = lock_timeout
        self.collection = vector_collection(client, collection_name)

    def __repr__(self) -> str:
        return f"ChromaStorage({self.collection_name!r})"

    def add(self, chunks: Sequence[Any], ids: Sequence[str]) -> None:
        """Embed chunks and write (or overwrite) them under their vector ids.

        The texts are embedded through `PrecomputedEmbeddings` (with ``index_text`` when
        given); text and metadata are stored with each vector.

        Args:
            chunks: the chunks (``page_content``, ``metadata``); nothing happens when empty.
            ids: one vector id per chunk, in the same order.
        """
        if not chunks:
            return
        texts = [c.page_content for c in chunks]
        vectors = self.precomputed.embed_documents(texts)
        self.collection.upsert(ids=list(ids), embeddings=[list(map(float, v)) for v in vectors], documents=texts,
                               metadatas=[dict(c.metadata) for c in chunks])

    def delete(self, ids: Sequence[str]) -> int:
        """Delete these vector ids where present (in batches of 1000).

        Args:
            ids: the vector ids; repeated ids count once.

        Returns:
            How many distinct ids were asked to go (absent ones included).
        """
        ids = list(dict.fromkeys(ids))
        for b in range(0, len(ids), 1000):
            self.collection.delete(ids=ids[b:b + 1000])
        return len(ids)

    def present(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The metadata of those of the given ids the collection holds.

        Args:
            ids: the vector ids to look up.

        Returns:
            ``{vector id: metadata}``; absent ids are left out.
        """
        out: dict[str, dict[str, Any]] = {}
        ids = list(ids)
        for b in range(0, len(ids), 500):
            got = self.collection.get(ids=ids[b:b + 500], include=["metadatas"])
            for vid, meta in zip(got["ids"], got["metadatas"]):
                out[str(vid)] = dict(meta or {})
        return out

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        """``{vector id: (vector, metadata)}`` of the ids the collection holds (the
        vectors its search compares; `relevances` reads them
        instead of embedding those chunks again)."""
        out: dict[str, tuple[list[float], dict[str, Any]]] = {}
        ids = list(ids)
        for b in range(0, len(ids), 500):
            got = self.collection.get(ids=ids[b:b + 500], include=["embeddings", "metadatas"])
            for vid, vec, meta in zip(got["ids"], got["embeddings"], got["metadatas"]):
                out[str(vid)] = (list(map(float, vec)), dict(meta or {}))
        return out

    def count(self) -> int | None:
        """How many vectors the collection holds (Chroma always can tell).

        Returns:
            The collection's count.
        """
        return int(self.collection.count())

    def held_ids(self) -> list[str] | None:
        """Every vector id the collection holds."""
        return [str(v) for v in self.collection.get(include=[])["ids"]]

    def _query(self, vector: Sequence[float], n: int, native: dict[str, Any] | None,
               include: list[str]) -> dict[str, Any]:
        if self.count() == 0:  # an empty collection is never queried (see fresh_client)
            return {}
        where = (native or {}).get("where")

        def run() -> dict[str, Any]:
            return self.collection.query(query_embeddings=[[float(x) for x in vector]], n_results=n, where=where,
                                         include=include)
        try:
            return run()
        except Exception as exc:
            if not (self.reopenable and stale_chroma(exc)):
                raise
            logger.info("reopening the embedded Chroma store after: %s", exc)
            self.reopen()
            return run()

    @staticmethod
    def _chunks(got: dict[str, Any]) -> list[PlainDocument]:
        if not got:
            return []
        return [PlainDocument(page_content=doc or "", metadata=dict(meta or {}), id=str(vid))
                for vid, doc, meta in zip(got["ids"][0], got["documents"][0], got["metadatas"][0])]

    def search(self, vector: Sequence[float], k: int, *, mmr: bool = False, fetch_k: int | None = None,
               lambda_mult: float = 0.5, native: dict[str, Any] | None = None) -> list[Any]:
        """The ``k`` nearest chunks of a query vector, best first.

        An empty collection is not queried (it returns ``[]``); an embedded store whose
        cached state went stale (another process wrote) is reopened once and queried again.

        Args:
            vector: the query vector.
            k: how many chunks to return.
            mmr: pick by maximal marginal relevance (`mmr_select`) among ``fetch_k``
                nearest, returned in similarity order.
            fetch_k: candidates for MMR (default ``4 * k``, at least ``k``).
            lambda_mult: MMR's trade-off between relevance (1) and diversity (0).
            native: the filter arguments `native_filter` returned (``None``: no filter).

        Returns:
            `PlainDocument` chunks with their ids and metadata.
        """
        if not mmr:
            return self._chunks(self._query(vector, k, native, ["documents", "metadatas"]))
        got = self._query(vector, max(k, fetch_k or 4 * k), native, ["documents", "metadatas", "embeddings"])
        chunks = self._chunks(got)
        if not chunks:
            return []
        picked = set(mmr_select(vector, got["embeddings"][0], k, lambda_mult))
        # the chosen ones in similarity order, as langchain_chroma returns them (the same
        # ranking through either face)
        return [c for i, c in enumerate(chunks) if i in picked]

    def search_scored(self, vector: Sequence[float], k: int, *,
                      native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """The ``k`` nearest chunks with relevance scores, best first.

        Args:
            vector: the query vector.
            k: how many chunks to return.
            native: the filter arguments `native_filter` returned (``None``: no filter).

        Returns:
            ``(chunk, score)`` pairs, the score ``1 - cosine distance`` clipped to [0, 1].
        """
        got = self._query(vector, k, native, ["documents", "metadatas", "distances"])
        chunks = self._chunks(got)
        return [(c, min(1.0, max(0.0, 1.0 - float(d)))) for c, d in zip(chunks, got["distances"][0])] if chunks else []

    def native_filter(self, flt: Any) -> dict[str, Any] | None:
        """Chroma's ``where`` argument for a `MetadataFilter`.

        The ``where`` may be wider than the filter (see ``MetadataFilter.to_chroma``):
        the engine checks every hit against the filter itself.

        Args:
            flt: the `MetadataFilter`.

        Returns:
            ``{"where": ...}`` to pass back as ``native=``, or ``None`` when Chroma cannot
            narrow the search by it.
        """
        where = flt.to_chroma()  # exact, or wider (see MetadataFilter.to_chroma): the engine checks every hit
        return None if where is None else {"where": where}

    def reopen(self) -> None:
        """Read the embedded collection afresh after another process wrote to it.

        Opens a client with a new chromadb system (`fresh_client`); does nothing for a
        server or a given client (no ``root``).
        """
        if self.root is None:
            return
        self.client = fresh_client(self.client, self.root, self.lock_timeout)
        self.collection = vector_collection(self.client, self.collection_name)

    def rebuild(self, fence: Any = None) -> bool:
        """Copy the stored vectors into a new collection (`copy_collection`);
        ``False``, changing nothing, when the collection holds none: the engine then
        embeds every chunk again from the source store."""
        if not self.count():
            return False
        self.collection = copy_collection(self.client, self.collection_name, fence)
        return True
