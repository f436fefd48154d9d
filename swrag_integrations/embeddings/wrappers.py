"""Embedding wrappers an index builds its stores with (no framework).

* `IndexTextEmbeddings` -- embeds ``index_text(text)`` for documents (a chunk with
  its contextual header), queries as they are;
* `PrecomputedEmbeddings` -- serves document vectors computed elsewhere (worker
  processes, Ray actors) to a store that embeds texts itself;
* `precomputed_of` -- the `PrecomputedEmbeddings` a vector store embeds with.

Both are `EmbeddingsBase` objects, so LangChain takes them as its
``Embeddings`` once its face is imported (`swrag_integrations.langchain.embeddings`).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from swrag_integrations.embeddings.base import EmbeddingsBase

__all__ = ["IndexTextEmbeddings", "PrecomputedEmbeddings", "precomputed_of"]


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
        """The primed vector of each text (then forgotten); texts not primed are embedded by ``base``.

        Args:
            texts: The document texts a store asks vectors for.

        Returns:
            One vector per text, in input order.
        """
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
        """Embed a query with ``base`` (queries are never primed).

        Args:
            text: The query to embed.

        Returns:
            ``base``'s vector of ``text``.
        """
        return self.base.embed_query(text)

    async def aembed_query(self, text: str) -> list[float]:
        """Embed a query with ``base``'s ``aembed_query`` (queries are never primed).

        Args:
            text: The query to embed.

        Returns:
            ``base``'s vector of ``text``.
        """
        return await self.base.aembed_query(text)

    def __getattr__(self, name: str) -> Any:  # model_path etc. of the wrapped embeddings
        if name in ("base", "_primed", "_lock", "served"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def __repr__(self) -> str:
        return f"PrecomputedEmbeddings({self.base!r})"


def precomputed_of(store: Any) -> PrecomputedEmbeddings | None:
    """The `PrecomputedEmbeddings` a vector store embeds with, if it has one."""
    try:
        own = store.embeddings
    except Exception:  # noqa: BLE001 - some stores raise instead of returning None
        return None
    return own if isinstance(own, PrecomputedEmbeddings) else None
