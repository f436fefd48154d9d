"""LlamaIndex face of the windowed retriever (a thin wrapper, same logic).

``WindowedLlamaIndexRetriever`` is a ``llama_index.core.retrievers.BaseRetriever``
returning ``NodeWithScore`` whose node text is the merged window text and whose
metadata is the LangChain document's metadata (``source_id``, ``start_index``,
``end_index``...). It wraps any LangChain retriever, normally a
:class:`~swrag_integrations.retrieval.WindowedParentRetriever` (or a
:class:`~swrag_integrations.retrieval.MultiQueryFusionRetriever` around one).

``MiniLMLlamaIndexEmbedding`` is the bundled MiniLM as a LlamaIndex ``BaseEmbedding``:
a thin adapter over :class:`~swrag_integrations.retrieval.MiniLMEmbeddings` (by default
the process-wide shared instance, so the model is loaded once for both frameworks).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langchain_core.documents import Document
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
from pydantic import PrivateAttr

__all__ = ["WindowedLlamaIndexRetriever", "MiniLMLlamaIndexEmbedding", "document_to_node"]


def document_to_node(doc: Document, rank: int) -> NodeWithScore:
    """A LangChain ``Document`` as a LlamaIndex ``NodeWithScore`` (text unchanged)."""
    meta = {k: v for k, v in (doc.metadata or {}).items()}
    node_id = doc.id or f"{meta.get('source_id', 'doc')}:{meta.get('start_index', rank)}-{meta.get('end_index', '')}"
    node = TextNode(
        id_=str(node_id),
        text=doc.page_content,
        metadata=meta,
        start_char_idx=meta.get("start_index"),
        end_char_idx=meta.get("end_index"),
        excluded_embed_metadata_keys=list(meta),
        excluded_llm_metadata_keys=[k for k in meta if k not in ("source", "title")],
    )
    if meta.get("source_id") is not None:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=str(meta["source_id"]))
    score = meta.get("score", meta.get("rrf_score"))
    return NodeWithScore(node=node, score=float(score) if score is not None else None)


class WindowedLlamaIndexRetriever(BaseRetriever):
    """Use a LangChain (windowed) retriever from LlamaIndex.

    Args:
        retriever: a LangChain retriever, e.g. ``SlidingWindowIndex.as_retriever()``.
        index: alternatively a :class:`SlidingWindowIndex`; ``retriever_kwargs`` then
            go to ``index.as_retriever``.
    """

    def __init__(self, retriever: Any = None, *, index: Any = None, callback_manager=None, **retriever_kwargs: Any) -> None:
        if (retriever is None) == (index is None):
            raise ValueError("give exactly one of retriever or index")
        if retriever is None:
            retriever = index.as_retriever(**retriever_kwargs)
        elif retriever_kwargs:
            raise ValueError("retriever keyword arguments are only used together with index=")
        self._lc_retriever = retriever
        super().__init__(callback_manager=callback_manager)

    @property
    def langchain_retriever(self) -> Any:
        return self._lc_retriever

    @staticmethod
    def _query(query_bundle: QueryBundle) -> str:
        query = query_bundle.query_str
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        return query

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        docs = self._lc_retriever.invoke(self._query(query_bundle))
        return [document_to_node(d, i) for i, d in enumerate(docs, start=1)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        docs = await self._lc_retriever.ainvoke(self._query(query_bundle))
        return [document_to_node(d, i) for i, d in enumerate(docs, start=1)]


class MiniLMLlamaIndexEmbedding(BaseEmbedding):
    """The bundled all-MiniLM-L6-v2 as a LlamaIndex embedding model (offline).

    Wraps a :class:`~swrag_integrations.retrieval.MiniLMEmbeddings` (the LangChain
    ``Embeddings`` used by :class:`~swrag_integrations.retrieval.SlidingWindowIndex`), so
    both frameworks embed identically and share one loaded model.

    Args:
        embeddings: the core to wrap (any LangChain ``Embeddings``; default: the shared
            :func:`~swrag_integrations.retrieval.default_embeddings` instance, or a new
            ``MiniLMEmbeddings`` when ``model_path``/``device``/... are given).
        model_path, device, normalize, max_seq_length, batch_size: passed to a new
            ``MiniLMEmbeddings`` (only without ``embeddings``).
        embed_batch_size: texts per LlamaIndex batch (default: the core's batch size).
        callback_manager: LlamaIndex callbacks.

    Example::

        from llama_index.core import Settings
        Settings.embed_model = MiniLMLlamaIndexEmbedding()
    """

    _core: Any = PrivateAttr()

    def __init__(
        self,
        embeddings: Any = None,
        *,
        model_path: str | os.PathLike | None = None,
        device: str | None = None,
        normalize: bool | None = None,
        max_seq_length: int | None = None,
        batch_size: int | None = None,
        embed_batch_size: int | None = None,
        callback_manager: Any = None,
        **kwargs: Any,
    ) -> None:
        from .embeddings import MiniLMEmbeddings, default_embeddings

        options = {k: v for k, v in dict(device=device, normalize=normalize, max_seq_length=max_seq_length,
                                         batch_size=batch_size).items() if v is not None}
        if embeddings is None:
            if model_path is None and not options:
                embeddings = default_embeddings()
            else:
                embeddings = MiniLMEmbeddings(model_path, **options)
        elif model_path is not None or options:
            raise ValueError("give either embeddings or MiniLM options (model_path, device, ...), not both")
        if not (hasattr(embeddings, "embed_documents") and hasattr(embeddings, "embed_query")):
            raise TypeError(f"embeddings must be LangChain Embeddings, got {type(embeddings).__name__}")
        name = str(getattr(embeddings, "model_path", type(embeddings).__name__))
        batch = embed_batch_size or int(getattr(embeddings, "batch_size", 0) or 10)
        kwargs.setdefault("model_name", name)
        super().__init__(embed_batch_size=batch, callback_manager=callback_manager, **kwargs)
        self._core = embeddings

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMLlamaIndexEmbedding"

    @property
    def langchain_embeddings(self) -> Any:
        """The wrapped LangChain ``Embeddings``."""
        return self._core

    def _get_query_embedding(self, query: str) -> list[float]:
        return list(self._core.embed_query(query))

    def _get_text_embedding(self, text: str) -> list[float]:
        return list(self._core.embed_documents([text])[0])

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [list(v) for v in self._core.embed_documents(list(texts))]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
