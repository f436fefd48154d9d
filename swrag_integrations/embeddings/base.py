"""The base class of the package's embedding objects (no framework).

`EmbeddingsBase` has LangChain's ``Embeddings`` interface: ``embed_documents`` and
``embed_query``, and their async forms run in a worker thread. The LangChain face
registers it as a virtual subclass of LangChain's ``Embeddings`` when it is imported
(`swrag_integrations.langchain.embeddings`, imported by the LangChain index and
vector store), so `MiniLMEmbeddings` and the wrappers of
`wrappers` are LangChain ``Embeddings`` for LangChain users, while the engine and
the LlamaIndex face need no LangChain.
"""

from __future__ import annotations

import abc
import asyncio
from typing import Any

__all__ = ["EmbeddingsBase", "embedding_dimension"]


def embedding_dimension(embedding: Any) -> int:
    """The dimension of ``embedding``'s vectors: one query is embedded (a lazily loaded
    model, such as the bundled MiniLM, is loaded by it)."""
    return len(embedding.embed_query("dimension probe"))


class EmbeddingsBase(abc.ABC):
    """``embed_documents`` and ``embed_query``, as LangChain's ``Embeddings`` has them, with
    the async forms (``aembed_documents``/``aembed_query``) running the sync ones in a thread."""

    @abc.abstractmethod
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""

    @abc.abstractmethod
    def embed_query(self, text: str) -> list[float]:
        """The vector of a query."""

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """`embed_documents` in a worker thread."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """`embed_query` in a worker thread."""
        return await asyncio.to_thread(self.embed_query, text)
