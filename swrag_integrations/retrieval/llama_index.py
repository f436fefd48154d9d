"""LlamaIndex face of the windowed retriever (a thin wrapper, same logic).

``WindowedLlamaIndexRetriever`` is a ``llama_index.core.retrievers.BaseRetriever``
returning ``NodeWithScore`` whose node text is the merged window text and whose
metadata is the LangChain document's metadata (``source_id``, ``start_index``,
``end_index``...). It wraps any LangChain retriever, normally a
:class:`~swrag_integrations.retrieval.WindowedParentRetriever` (or a
:class:`~swrag_integrations.retrieval.MultiQueryFusionRetriever` around one).
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

__all__ = ["WindowedLlamaIndexRetriever", "document_to_node"]


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
