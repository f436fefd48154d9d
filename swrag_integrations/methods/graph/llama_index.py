"""LlamaIndex-native graph retrievers: ``NodeWithScore`` straight from the core's spans.

`HippoRAGLlamaIndexRetriever` and `GraphRAGLocalLlamaIndexRetriever` are
LlamaIndex ``BaseRetriever`` s over `HippoRAG` /
`GraphRAG` local search; each returned node is one merged window
(``start_char_idx``/``end_char_idx`` exact, ``metadata["source_id"]``) made by
`swrag_integrations.llama_index.convert.span_to_node`; no LangChain object on the way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from swrag_integrations.llama_index.convert import span_to_node
from swrag_integrations.engine.parents import check_query
from swrag_integrations.engine.settings import DEFAULT_BUDGET_TOKENS, positive_int

__all__ = ["HippoRAGLlamaIndexRetriever", "GraphRAGLocalLlamaIndexRetriever"]


class _GraphLlamaIndexRetriever(BaseRetriever):
    _kind: type | None = None

    def __init__(self, searcher: Any, *, k: int | None = None, k_passages: int = 30, budget_tokens: int | None = DEFAULT_BUDGET_TOKENS,
                 expand: str = "window", callback_manager: Any = None) -> None:
        kind = self._searcher_type()
        if not isinstance(searcher, kind):
            raise TypeError(f"searcher must be a {kind.__name__}, got {type(searcher).__name__}")
        if expand not in ("window", "medium", "chunk"):
            raise ValueError(f"expand must be 'window', 'medium' or 'chunk', got {expand!r}")
        self.searcher = searcher
        self.k = positive_int("k", k, optional=True)
        self.k_passages = positive_int("k_passages", k_passages)
        self.budget_tokens = positive_int("budget_tokens", budget_tokens, optional=True)
        self.expand = expand
        super().__init__(callback_manager=callback_manager)

    @staticmethod
    def _searcher_type() -> type:
        raise NotImplementedError

    def _nodes(self, query: str) -> list[NodeWithScore]:
        spans = self.searcher.spans([check_query(query)], budget_tokens=self.budget_tokens, k=self.k,
                                    k_passages=self.k_passages, expand=self.expand)
        return [span_to_node(span) for span in spans]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._nodes, query_bundle.query_str)


class HippoRAGLlamaIndexRetriever(_GraphLlamaIndexRetriever):
    """HippoRAG as a LlamaIndex retriever (arguments as `HippoRAGRetriever`)."""

    @staticmethod
    def _searcher_type() -> type:
        from swrag_integrations.methods.graph.hipporag import HippoRAG

        return HippoRAG


class GraphRAGLocalLlamaIndexRetriever(_GraphLlamaIndexRetriever):
    """GraphRAG local search as a LlamaIndex retriever (windows only)."""

    @staticmethod
    def _searcher_type() -> type:
        from swrag_integrations.methods.graph.graphrag import GraphRAG

        return GraphRAG
