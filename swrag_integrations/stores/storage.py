"""The vector storage of an index engine: a small, framework-free interface.

`IndexEngine` keeps every store-agnostic part of an index (the source
store, the keyword index, the writer and its checks) and talks to the vectors only
through `VectorStorage`. Three implementations ship:

* `ChromaStorage` -- an embedded (or server) Chroma collection through
  ``chromadb`` itself (no LangChain), the engine's default;
* `VectorBackend` -- any LangChain ``VectorStore`` (the LangChain face
  `SlidingWindowIndex` uses it, also for its default Chroma);
* `MilvusStorage` -- a Milvus collection (Milvus Lite file or server)
  through ``pymilvus``, which also searches keywords (BM25) itself.

All hold the same data: one entry per small chunk, its exact text, the metadata of
`chunk_documents` and the id `vector_id`, under cosine
similarity; the first two share one Chroma collection, so an index written through one
opens with the other. The stores are named by URI in `store_uri`.

Optional capabilities beyond the protocol (looked up with ``getattr``):

* ``keyword_search(query, k, *, native=None) -> [(chunk, score)]`` -- the ``k`` best
  chunks by the store's own keyword index, best first (``native``: as for
  `VectorStorage.search`). The engine then searches keywords there instead of in
  its in-process BM25 (``IndexEngine(keyword_search="auto")``), checks every hit as it
  checks dense ones and fuses both with its one RRF.
* ``stored_vectors(vector_ids) -> {vector_id: (vector, metadata)}`` -- the vectors the
  store holds, read back; the engine measures keyword-only hits' relevance on them
  (`relevances`) instead of embedding those chunks again.
* ``close()`` -- release the store (`close` calls it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

__all__ = ["Embedder", "PlainDocument", "VectorStorage"]


@runtime_checkable
class Embedder(Protocol):
    """Any embedding object: LangChain ``Embeddings``, `MiniLMEmbeddings`
    or your own class with these two methods."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a query."""
        ...


@dataclass
class PlainDocument:
    """A text with its metadata and id, without any framework: a document given to
    `index_documents` or a chunk a storage returns. It has
    the attribute names of a LangChain ``Document``, so code reading either needs no
    conversion (the engine takes both)."""

    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


class EmbeddingSide:
    """The embedding side every storage adapter shares: the query embedding and the
    `PrecomputedEmbeddings` the adapter embeds chunk texts through (with ``index_text``
    applied), so vectors computed elsewhere pass through unchanged."""

    embedding: Any
    precomputed: Any

    def _use_embedding(self, embedding: Any, index_text: Any = None) -> None:
        """Embed queries with ``embedding`` and chunk texts with it after ``index_text``."""
        from swrag_integrations.embeddings.wrappers import IndexTextEmbeddings, PrecomputedEmbeddings

        self.embedding = embedding
        self.precomputed = PrecomputedEmbeddings(IndexTextEmbeddings(embedding, index_text) if index_text
                                                 else embedding)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed chunk texts as `add` would (with ``index_text`` applied).

        Args:
            texts: the chunk texts.

        Returns:
            One vector per text.
        """
        return self.precomputed.base.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The query vector of ``text`` (the embedding's ``embed_query``).

        Args:
            text: the query.

        Returns:
            The vector as a list.
        """
        return list(self.embedding.embed_query(text))


@runtime_checkable
class VectorStorage(Protocol):
    """What `IndexEngine` needs from a vector store.

    Attributes:
        kind: a name for messages (``"Chroma"``, ``"FAISS"``...).
        embedding: the query embedding (an `Embedder`).
        can_get: `present` works (else vector checks are skipped).
        can_delete: `delete` works (else sources cannot be replaced or removed).
        precomputed: the `PrecomputedEmbeddings` the storage embeds
            chunks with, or ``None``: then vectors computed elsewhere (worker
            processes, Ray) cannot be written as they are and the storage embeds.
        reopenable: `reopen` re-reads a local collection other processes wrote to.
    """

    kind: str
    embedding: Any
    can_get: bool
    can_delete: bool
    precomputed: Any
    reopenable: bool

    def add(self, chunks: Sequence[Any], ids: Sequence[str]) -> None:
        """Add (or overwrite) chunks (``page_content``, ``metadata``) under vector ids."""
        ...

    def delete(self, ids: Sequence[str]) -> int:
        """Delete these vector ids where present; returns how many were asked to go."""
        ...

    def present(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``{vector_id: metadata}`` of the given ids that the storage holds."""
        ...

    def count(self) -> int | None:
        """Vectors held, where the storage can tell (else ``None``)."""
        ...

    def search(self, vector: Sequence[float], k: int, *, mmr: bool = False, fetch_k: int | None = None,
               lambda_mult: float = 0.5, native: dict[str, Any] | None = None) -> list[Any]:
        """The ``k`` nearest chunks of a query vector, best first (MMR optional)."""
        ...

    def search_scored(self, vector: Sequence[float], k: int, *,
                      native: dict[str, Any] | None = None) -> list[tuple[Any, float]]:
        """The ``k`` nearest chunks with relevance scores in [0, 1], best first."""
        ...

    def native_filter(self, flt: Any) -> dict[str, Any] | None:
        """The storage's own filter arguments for a `MetadataFilter`
        (passed back as ``native=``), or ``None`` when it cannot filter."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The query vector of ``text``."""
        ...

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of chunk texts, as `add` would compute them."""
        ...

    def reopen(self) -> None:
        """Read a local collection afresh (after another process wrote to it)."""
        ...

    def rebuild(self, fence: Any = None) -> bool:
        """Start the collection afresh from the vectors it holds (its search structure
        is damaged), calling ``fence()`` right before it drops the old one; ``False``
        when it cannot (the engine then embeds everything again)."""
        ...
