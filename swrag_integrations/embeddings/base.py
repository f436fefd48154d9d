"""The base class of the package's embedding objects, with or without LangChain.

With ``langchain-core`` installed, :data:`EmbeddingsBase` is LangChain's ``Embeddings``
(so :class:`~.embeddings.MiniLMEmbeddings` and the wrappers of :mod:`.vectors` are
LangChain embeddings, with its async methods); without it, a plain base class with the
same two abstract methods, so the engine and the LlamaIndex face need no LangChain.
"""

from __future__ import annotations

import abc
from typing import Any

__all__ = ["EmbeddingsBase", "embedding_dimension"]


def embedding_dimension(embedding: Any) -> int:
    """The dimension of ``embedding``'s vectors: one query is embedded (a lazily loaded
    model, such as the bundled MiniLM, is loaded by it)."""
    return len(embedding.embed_query("dimension probe"))

try:
    from langchain_core.embeddings import Embeddings as EmbeddingsBase
except ImportError:  # the engine and the LlamaIndex face run without LangChain

    class EmbeddingsBase(abc.ABC):  # type: ignore[no-redef]
        """``embed_documents`` and ``embed_query``, as LangChain's ``Embeddings`` has them."""

        @abc.abstractmethod
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            """One vector per text."""

        @abc.abstractmethod
        def embed_query(self, text: str) -> list[float]:
            """The vector of a query."""
