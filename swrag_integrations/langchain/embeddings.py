"""The package's embedding objects as LangChain ``Embeddings``.

Importing this module registers `EmbeddingsBase`
as a virtual subclass of LangChain's ``Embeddings`` (an ``abc.ABC``), so
``isinstance(MiniLMEmbeddings(), Embeddings)`` holds, as it does for the wrappers
(``IndexTextEmbeddings``, ``PrecomputedEmbeddings``); the LangChain index and vector store
import it. The classes themselves live framework-free in `swrag_integrations.embeddings`.
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from swrag_integrations.embeddings.base import EmbeddingsBase

__all__ = ["Embeddings", "EmbeddingsBase"]

Embeddings.register(EmbeddingsBase)
