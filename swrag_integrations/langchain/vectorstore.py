"""The vectors of an index, in any LangChain ``VectorStore``.

`VectorBackend` is the small surface the index uses -- add, delete, look up by
id, search by vector, count -- over whatever store the user runs. Each small chunk is
one LangChain ``Document`` in the store: its exact text as ``page_content`` (so the
store is a normal LangChain store: ``similarity_search`` returns real chunks), and the
metadata ``source_id``, ``chunk_index``, ``start_index``, ``end_index``,
``content_hash``, ``chunk_id``, ``swrag_index`` plus the source's own scalar metadata.
Its id in the store is one of `vector_ids` (a UUID, accepted by every
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
import warnings
from typing import Any, Callable, Sequence

import swrag_integrations.langchain.embeddings  # noqa: F401 - the package's embeddings are LangChain Embeddings
from swrag_integrations.embeddings.wrappers import IndexTextEmbeddings, PrecomputedEmbeddings, precomputed_of
from swrag_integrations.engine.ids import doc_vector_ids
from swrag_integrations.stores.chroma import chroma_collection, stale_chroma

__all__ = ["VectorBackend", "default_chroma", "VectorStoreError", "IndexTextEmbeddings", "PrecomputedEmbeddings",
           "doc_vector_ids", "precomputed_of", "stale_chroma"]

logger = logging.getLogger(__name__)


class VectorStoreError(RuntimeError):
    """The vector store cannot do what the index needs (the message says what and why)."""


def _overrides(obj: Any, name: str) -> bool:
    """True when ``obj``'s class implements ``name`` itself (not VectorStore's default)."""
    from langchain_core.vectorstores import VectorStore

    impl = getattr(type(obj), name, None)
    return impl is not None and impl is not getattr(VectorStore, name, None)


class VectorBackend:
    """A `VectorStorage` over a LangChain ``VectorStore``.

    Args:
        store: the vector store (its ``embeddings`` embed chunk texts at ``add``).
        embedding: the embedding used for queries; default ``store.embeddings``.
        reopen: ``() -> store``: a fresh handle on the same store (a local Chroma read
            afresh), used by `reopen` and once when a search finds this one stale
            (`stale_chroma`).
        rebuild: ``(fence) -> store``: the store started afresh from the vectors it
            holds (`rebuild`); without it a damaged store is re-embedded.
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
        """The `PrecomputedEmbeddings` the store embeds with, if it has one."""
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
        """The store's own filter keywords (`native_filter`)."""
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
        back from a Chroma store's collection (`chroma_collection`); empty
        for a store that cannot return its vectors (the engine embeds those chunks again)."""
        collection = chroma_collection(self.store)
        if collection is None:
            return {}
        out: dict[str, tuple[list[float], dict[str, Any]]] = {}
        ids = list(ids)
        for b in range(0, len(ids), 500):
            got = collection.get(ids=ids[b:b + 500], include=["embeddings", "metadatas"])
            for vid, vec, meta in zip(got["ids"], got["embeddings"], got["metadatas"]):
                out[str(vid)] = (list(map(float, vec)), dict(meta or {}))
        return out

    def held_ids(self) -> list[str] | None:
        """Every vector id the store holds, where the store can list them (Chroma,
        ``InMemoryVectorStore``, FAISS), else ``None``."""
        store = self.store
        collection = chroma_collection(store)
        if collection is not None:
            return [str(v) for v in collection.get(include=[])["ids"]]
        if type(store).__name__ == "InMemoryVectorStore":
            return [str(v) for v in store.store]
        if hasattr(store, "index_to_docstore_id"):  # FAISS
            return [str(v) for v in store.index_to_docstore_id.values()]
        return None

    def count(self) -> int | None:
        """Vectors in the store, where the store can tell (else ``None``)."""
        store = self.store
        try:
            collection = chroma_collection(store)
            if collection is not None:
                return int(collection.count())
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

        ``native``: the store's own filter keywords (`native_filter`).
        Guarded by `_guarded` (an empty store is not queried; a stale embedded
        Chroma is reopened once).
        """
        return self._guarded(lambda: self._search(vector, k, mmr=mmr, fetch_k=fetch_k, lambda_mult=lambda_mult,
                                                  native=native))

    def _guarded(self, search: Callable[[], list[Any]]) -> list[Any]:
        """Run ``search`` unless the store is empty (no hits; an embedded Chroma collection
        queried while empty keeps a state that fails once another process writes). When
        the store reports a stale embedded Chroma system anyway (`stale_chroma`) and
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
        """As `_search_scored`, guarded like `search`."""
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


def default_chroma(client: Any, collection_name: str, embedding: Any) -> Any:
    """A ``langchain_chroma.Chroma`` over an index's collection (cosine distance): what the
    deprecated ``SlidingWindowIndex.vectorstore`` returns for the default Chroma (the
    index itself reads and writes it through `ChromaStorage`)."""
    from langchain_chroma import Chroma

    return Chroma(collection_name=collection_name, embedding_function=embedding, client=client,
                  collection_configuration={"hnsw": {"space": "cosine"}},
                  collection_metadata={"swrag_role": "vectors"})
