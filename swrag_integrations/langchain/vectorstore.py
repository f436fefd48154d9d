"""The vectors of an index, in any LangChain ``VectorStore``.

:class:`VectorBackend` is the small surface the index uses -- add, delete, look up by
id, search by vector, count -- over whatever store the user runs. Each small chunk is
one LangChain ``Document`` in the store: its exact text as ``page_content`` (so the
store is a normal LangChain store: ``similarity_search`` returns real chunks), and the
metadata ``source_id``, ``chunk_index``, ``start_index``, ``end_index``,
``content_hash``, ``chunk_id``, ``swrag_index`` plus the source's own scalar metadata.
Its id in the store is one of :func:`~.ids.vector_ids` (a UUID, accepted by every
store). The store embeds the texts itself, with its own embedding.

Per-store capabilities (tested: embedded Chroma, Chroma server, ``InMemoryVectorStore``,
FAISS, Qdrant local mode):

============================ =============================================================
capability                   without it
============================ =============================================================
``delete(ids)``              the index refuses to replace or delete sources (clear error)
``get_by_ids``               deletes try every id (FAISS: must exist), vector checks skip
``max_marginal_relevance..`` MMR falls back to plain similarity (one warning)
count (Chroma/FAISS/memory/  health checks compare per source instead of in total
Qdrant known)
============================ =============================================================
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any, Callable, Sequence

from swrag_integrations.embeddings.base import EmbeddingsBase

__all__ = ["VectorBackend", "default_chroma", "VectorStoreError", "IndexTextEmbeddings", "PrecomputedEmbeddings",
           "doc_vector_ids", "precomputed_of", "stale_chroma"]

logger = logging.getLogger(__name__)


class VectorStoreError(RuntimeError):
    """The vector store cannot do what the index needs (the message says what and why)."""


def doc_vector_ids(doc: Any) -> list[str]:
    """The ids a chunk document a store returned may have in that store: its own id
    (stores differ: some set ``Document.id``, Qdrant puts it in ``metadata["_id"]``)
    and those derived from the chunk id and content hash in its metadata under each
    id scheme (:func:`~swrag_integrations.engine.ids.vector_ids`; a document does not say which its index uses)."""
    from swrag_integrations.engine.ids import vector_id

    meta = doc.metadata or {}
    out = []
    if meta.get("chunk_id"):
        if meta.get("content_hash"):
            out.append(vector_id(str(meta["chunk_id"]), str(meta["content_hash"])))
        out.append(vector_id(str(meta["chunk_id"])))
    value = doc.id if doc.id is not None else meta.get("_id", meta.get("id"))
    if value is not None:
        out.append(str(value))
    return out


def _overrides(obj: Any, name: str) -> bool:
    """True when ``obj``'s class implements ``name`` itself (not VectorStore's default)."""
    from langchain_core.vectorstores import VectorStore

    impl = getattr(type(obj), name, None)
    return impl is not None and impl is not getattr(VectorStore, name, None)


class VectorBackend:
    """A :class:`~.storage.VectorStorage` over a LangChain ``VectorStore``.

    Args:
        store: the vector store (its ``embeddings`` embed chunk texts at ``add``).
        embedding: the embedding used for queries; default ``store.embeddings``.
        reopen: ``() -> store``: a fresh handle on the same store (a local Chroma read
            afresh), used by :meth:`reopen` and once when a search finds this one stale
            (:func:`stale_chroma`).
        rebuild: ``(fence) -> store``: the store started afresh from the vectors it
            holds (:meth:`rebuild`); without it a damaged store is re-embedded.
    """

    def __init__(self, store: Any, embedding: Any = None, *, reopen: Callable[[], Any] | None = None,
                 rebuild: Callable[[Any], Any] | None = None) -> None:
        from langchain_core.vectorstores import VectorStore

        if not isinstance(store, VectorStore):
            raise TypeError(f"vectorstore must be a LangChain VectorStore, got {type(store).__name__}")
        self.store = store
        try:
            own = store.embeddings
        except Exception:  # noqa: BLE001 - some stores raise instead of returning None
            own = None
        self.embedding = embedding if embedding is not None else own
        if self.embedding is None:
            raise ValueError(f"{type(store).__name__} exposes no embeddings: pass embedding= (the one the store uses)")
        self.kind = type(store).__name__
        self.can_delete = _overrides(store, "delete")
        self.can_get = _overrides(store, "get_by_ids")
        self.can_mmr = _overrides(store, "max_marginal_relevance_search_by_vector")
        self._warned_mmr = False
        self._reopen = reopen
        self._rebuild = rebuild
        self.reopenable = reopen is not None
        self._nonempty = False
        self._warned_scores = False

    def __repr__(self) -> str:
        return f"VectorBackend({self.kind})"

    @property
    def precomputed(self) -> "PrecomputedEmbeddings | None":
        """The :class:`PrecomputedEmbeddings` the store embeds with, if it has one."""
        return precomputed_of(self.store)

    def reopen(self) -> None:
        """Open the store afresh (the ``reopen`` given; nothing without one)."""
        if self._reopen is not None:
            self.store = self._reopen()

    def rebuild(self, fence: Any = None) -> bool:
        """Start the store afresh from the vectors it holds (the ``rebuild`` given);
        ``False`` without one."""
        if self._rebuild is None:
            return False
        self.store = self._rebuild(fence)
        return True

    def native_filter(self, flt: Any) -> dict[str, Any] | None:
        """The store's own filter keywords (:func:`~.filters.native_filter`)."""
        from swrag_integrations.engine.filters import native_filter

        return native_filter(flt, self.store)

    # ------------------------------------------------------------ writing
    def add(self, documents: Sequence[Any], ids: Sequence[str]) -> None:
        """Add (or overwrite) chunk documents under the given vector ids."""
        from langchain_core.documents import Document

        if not documents:
            return
        docs = [d if isinstance(d, Document) else Document(page_content=d.page_content, metadata=dict(d.metadata))
                for d in documents]
        got = self.store.add_documents(docs, ids=list(ids))
        if got is not None and len(got) != len(ids):
            raise VectorStoreError(f"{self.kind}.add_documents stored {len(got)} of {len(ids)} vectors")

    def delete(self, ids: Sequence[str]) -> int:
        """Delete these vector ids where present; returns how many were asked to go."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        if not self.can_delete:
            raise VectorStoreError(f"{self.kind} cannot delete vectors by id, so sources cannot be replaced or removed; "
                                   "use a store that implements delete(ids)")
        if self.can_get:  # some stores (FAISS) refuse ids they do not hold
            ids = list(self.present(ids))
            if not ids:
                return 0
        for b in range(0, len(ids), 1000):
            ok = self.store.delete(ids=ids[b:b + 1000])
            if ok is False:
                raise VectorStoreError(f"{self.kind}.delete failed")
        return len(ids)

    # ------------------------------------------------------------ reading
    def present(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``{vector_id: metadata}`` of the given ids that the store holds."""
        if not self.can_get:
            raise VectorStoreError(f"{self.kind} cannot look vectors up by id")
        out: dict[str, dict[str, Any]] = {}
        ids = list(ids)
        for b in range(0, len(ids), 500):
            asked = set(ids[b:b + 500])
            for doc in self.store.get_by_ids(ids[b:b + 500]):
                vid = next((v for v in doc_vector_ids(doc) if v in asked), None)
                if vid is not None:
                    out[vid] = dict(doc.metadata or {})
        return out

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        """``{vector_id: (vector, metadata)}`` of the given ids that the store holds, read
        back from a ``langchain_chroma.Chroma`` (``get(include=["embeddings", ...])``); empty
        for a store that cannot return its vectors (the engine embeds those chunks again)."""
        if not type(self.store).__module__.startswith("langchain_chroma"):
            return {}
        out: dict[str, tuple[list[float], dict[str, Any]]] = {}
        ids = list(ids)
        for b in range(0, len(ids), 500):
            got = self.store.get(ids=ids[b:b + 500], include=["embeddings", "metadatas"])
            for vid, vec, meta in zip(got["ids"], got["embeddings"], got["metadatas"]):
                out[str(vid)] = (list(map(float, vec)), dict(meta or {}))
        return out

    def held_ids(self) -> list[str] | None:
        """Every vector id the store holds, where the store can list them (Chroma,
        ``InMemoryVectorStore``, FAISS), else ``None``."""
        store = self.store
        if hasattr(store, "_collection") and hasattr(store._collection, "get"):  # Chroma
            return [str(v) for v in store._collection.get(include=[])["ids"]]
        if type(store).__name__ == "InMemoryVectorStore":
            return [str(v) for v in store.store]
        if hasattr(store, "index_to_docstore_id"):  # FAISS
            return [str(v) for v in store.index_to_docstore_id.values()]
        return None

    def count(self) -> int | None:
        """Vectors in the store, where the store can tell (else ``None``)."""
        store = self.store
        try:
            if hasattr(store, "_collection") and hasattr(store._collection, "count"):  # Chroma
                return int(store._collection.count())
            if hasattr(store, "index") and hasattr(store.index, "ntotal"):  # FAISS
                return int(store.index.ntotal)
            if type(store).__name__ == "InMemoryVectorStore":
                return len(store.store)
            if hasattr(store, "client") and hasattr(store, "collection_name") and hasattr(store.client, "count"):
                return int(store.client.count(store.collection_name, exact=True).count)  # Qdrant
        except Exception as exc:  # noqa: BLE001 - a count is advisory
            logger.debug("could not count vectors in %s: %s", self.kind, exc)
        return None

    def search(self, vector: Sequence[float], k: int, *, mmr: bool = False, fetch_k: int | None = None,
               lambda_mult: float = 0.5, native: dict[str, Any] | None = None) -> list[Any]:
        """The ``k`` nearest chunk documents of a query vector, best first (MMR optional).

        ``native``: the store's own filter keywords (:func:`~.filters.native_filter`).
        Guarded by :meth:`_guarded` (an empty store is not queried; a stale embedded
        Chroma is reopened once).
        """
        return self._guarded(lambda: self._search(vector, k, mmr=mmr, fetch_k=fetch_k, lambda_mult=lambda_mult,
                                                  native=native))

    def _guarded(self, search: Callable[[], list[Any]]) -> list[Any]:
        """Run ``search`` unless the store is empty (no hits; an embedded Chroma collection
        queried while empty keeps a state that fails once another process writes). When
        the store reports a stale embedded Chroma system anyway (:func:`stale_chroma`) and
        the backend has ``reopen``, the store is reopened once and asked again."""
        if not self._nonempty:
            held = self.count()
            if held == 0:
                return []
            self._nonempty = True  # held, or cannot tell: not asked again
        try:
            return search()
        except Exception as exc:
            if self._reopen is None or not stale_chroma(exc):
                raise
            logger.info("reopening the embedded Chroma store after: %s", exc)
            self.store = self._reopen()
            return search()

    def _search(self, vector: Sequence[float], k: int, *, mmr: bool, fetch_k: int | None,
                lambda_mult: float, native: dict[str, Any] | None = None) -> list[Any]:
        vec = [float(x) for x in vector]
        extra = dict(native or {})
        if mmr and self.can_mmr:
            fetch = max(k, fetch_k or 4 * k, int(extra.pop("fetch_k", 0)))
            return self.store.max_marginal_relevance_search_by_vector(
                vec, k=k, fetch_k=fetch, lambda_mult=lambda_mult, **extra)
        if mmr and not self._warned_mmr:
            warnings.warn(f"{self.kind} has no MMR search; using plain similarity", stacklevel=3)
            self._warned_mmr = True
        return self.store.similarity_search_by_vector(vec, k=k, **extra)

    def search_scored(self, vector: Sequence[float], k: int, *,
                      native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """As :meth:`_search_scored`, guarded like :meth:`search`."""
        return self._guarded(lambda: self._search_scored(vector, k, native=native))

    def _search_scored(self, vector: Sequence[float], k: int, *,
                       native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """The ``k`` nearest chunk documents with relevance scores in [0, 1], best first.

        The store ranks; its own relevance function (``_select_relevance_score_fn``:
        Chroma's distances, FAISS, Qdrant) turns its scores into relevances, a store
        without one is taken to return similarities (``InMemoryVectorStore``: cosine).
        Scores are clipped to [0, 1]; where the store's relevance function disagrees
        with its own ranking (e.g. FAISS ``IndexFlatIP`` without
        ``distance_strategy=MAX_INNER_PRODUCT``) a warning says so and each score is
        capped by the one ranked above it, so scores never rise down the list.
        """
        vec = [float(x) for x in vector]
        store = self.store
        extra = dict(native or {})
        if hasattr(store, "similarity_search_by_vector_with_relevance_scores"):  # Chroma: (doc, distance)
            pairs = store.similarity_search_by_vector_with_relevance_scores(vec, k=k, **extra)
        elif hasattr(store, "similarity_search_with_score_by_vector"):
            pairs = store.similarity_search_with_score_by_vector(vec, k=k, **extra)
        else:
            docs = self.store.similarity_search_by_vector(vec, k=k, **extra)
            return [(doc, 1.0 / (1 + rank)) for rank, doc in enumerate(docs)]  # the rank is all there is
        try:
            relevance = store._select_relevance_score_fn()
        except (NotImplementedError, ValueError):
            relevance = float
        out, previous = [], 1.0
        for doc, raw in pairs:
            score = min(1.0, max(0.0, float(relevance(raw))))
            if score > previous + 1e-9:
                if not self._warned_scores:
                    warnings.warn(f"{self.kind}'s relevance scores rise down its own ranking (check its distance "
                                  "strategy against its index, e.g. FAISS IndexFlatIP needs "
                                  "distance_strategy=MAX_INNER_PRODUCT); scores are capped to keep rank order",
                                  stacklevel=3)
                    self._warned_scores = True
                score = previous
            out.append((doc, score))
            previous = score
        return out

    def embed_query(self, text: str) -> list[float]:
        return list(self.embedding.embed_query(text))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of chunk texts with the store's own embedding (as its ``add`` makes them)."""
        try:
            own = self.store.embeddings
        except Exception:  # noqa: BLE001 - some stores raise instead of returning None
            own = None
        return (own or self.embedding).embed_documents(texts)


def stale_chroma(exc: BaseException) -> bool:
    """Whether ``exc`` is embedded Chroma's "Nothing found on disk" for an HNSW segment:
    this process's cached Chroma system holds the state of a collection it searched
    while empty, and another process has written to it since."""
    return type(exc).__name__ == "InternalError" and "nothing found on disk" in str(exc).lower()


def default_chroma(client: Any, collection_name: str, embedding: Any) -> Any:
    """The default store: a ``langchain_chroma.Chroma`` collection with cosine distance."""
    from langchain_chroma import Chroma

    return Chroma(collection_name=collection_name, embedding_function=embedding, client=client,
                  collection_configuration={"hnsw": {"space": "cosine"}},
                  collection_metadata={"swrag_role": "vectors"})


class IndexTextEmbeddings(EmbeddingsBase):
    """Embeds ``index_text(text)`` for documents (e.g. a chunk with its contextual header)
    and queries as they are, so a store keeps exact chunk texts but searches the indexed ones.

    Args:
        base: the embeddings to wrap.
        index_text: ``chunk text -> text to embed``.
    """

    def __init__(self, base: Any, index_text: Any) -> None:
        self.base = base
        self.index_text = index_text

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.base.embed_documents([self.index_text(t) for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.base.embed_query(text)

    def __getattr__(self, name: str) -> Any:  # model_path etc. of the wrapped embeddings
        if name in ("base", "index_text"):
            raise AttributeError(name)
        return getattr(self.base, name)


class PrecomputedEmbeddings(EmbeddingsBase):
    """Serves document vectors it was primed with; embeds anything else with ``base``.

    A LangChain vector store embeds texts itself in ``add_documents``. To write vectors
    computed elsewhere (worker processes, Ray actors) through *any* store, give the store
    this object as its embedding: the writer calls `prime` with a batch's chunk
    texts and their vectors right before it adds that batch, and the store's call to
    `embed_documents` returns them (each primed text is served once, then
    forgotten, so memory stays bounded). Texts that were not primed, and every query,
    go to ``base``, so the store behaves exactly as with ``base`` alone.

    The default Chroma store of `SlidingWindowIndex` is built with it;
    for your own store::

        store = FAISS(embedding_function=PrecomputedEmbeddings(embeddings), ...)

    The index finds it on ``vectorstore.embeddings``; a store without it still works
    with ``workers=`` and Ray, but then the workers only plan and the writer embeds.

    Args:
        base: the embeddings the vectors were (and unprimed texts are) computed with.
    """

    def __init__(self, base: Any) -> None:
        if isinstance(base, PrecomputedEmbeddings):
            base = base.base
        self.base = base
        self._primed: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self.served = 0  # vectors served from primed ones (for tests and reports)

    def prime(self, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Remember ``vectors[i]`` as the vector of ``texts[i]`` (served once)."""
        texts = list(texts)
        if len(texts) != len(vectors):
            raise ValueError(f"prime() got {len(texts)} texts and {len(vectors)} vectors")
        with self._lock:
            for text, vec in zip(texts, vectors):
                self._primed[text] = [float(x) for x in vec]

    def forget(self) -> None:
        """Drop every primed vector not served yet."""
        with self._lock:
            self._primed.clear()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        texts = list(texts)
        with self._lock:
            found = [self._primed.get(t) for t in texts]
            for t, vec in zip(texts, found):
                if vec is not None:
                    self._primed.pop(t, None)
            self.served += sum(v is not None for v in found)
        missing = [i for i, vec in enumerate(found) if vec is None]
        if missing:
            fresh = self.base.embed_documents([texts[i] for i in missing])
            for i, vec in zip(missing, fresh):
                found[i] = list(vec)
        return found  # type: ignore[return-value]

    def embed_query(self, text: str) -> list[float]:
        return self.base.embed_query(text)

    async def aembed_query(self, text: str) -> list[float]:
        return await self.base.aembed_query(text)

    def __getattr__(self, name: str) -> Any:  # model_path etc. of the wrapped embeddings
        if name in ("base", "_primed", "_lock", "served"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def __repr__(self) -> str:
        return f"PrecomputedEmbeddings({self.base!r})"


def precomputed_of(store: Any) -> PrecomputedEmbeddings | None:
    """The :class:`PrecomputedEmbeddings` a vector store embeds with, if it has one."""
    try:
        own = store.embeddings
    except Exception:  # noqa: BLE001 - some stores raise instead of returning None
        return None
    return own if isinstance(own, PrecomputedEmbeddings) else None
