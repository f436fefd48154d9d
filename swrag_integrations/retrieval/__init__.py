"""Windowed retrieval: small chunks found precisely, widened to merged windows.

LangChain first (:class:`SlidingWindowIndex`, :class:`WindowedParentRetriever`,
:class:`HybridRetriever`, :class:`CJKBM25Retriever`, :class:`MultiQueryFusionRetriever`),
LlamaIndex counterpart in :mod:`swrag_integrations.retrieval.llama_index`
(imported lazily: ``from swrag_integrations.retrieval import WindowedLlamaIndexRetriever``,
``MiniLMLlamaIndexEmbedding``).
"""

from __future__ import annotations

from typing import Any

from .assemble import AssembledContext, ContextSpan, assemble_context, count_tokens, merge_spans
from .bm25 import BM25Index, CJKBM25Retriever, contains_cjk, tokenize
from .fusion import HybridRetriever, doc_key, reciprocal_rank_fusion
from .index import IndexConfig, SlidingWindowIndex, load_files, source_id_for, source_key
from .multi_query import MultiQueryFusionRetriever, generate_queries, parse_query_variants
from .retriever import WindowedParentRetriever

__all__ = [
    "AssembledContext",
    "BM25Index",
    "CJKBM25Retriever",
    "ContextSpan",
    "HybridRetriever",
    "IndexConfig",
    "MiniLMEmbeddings",
    "MiniLMLlamaIndexEmbedding",
    "MultiQueryFusionRetriever",
    "SlidingWindowIndex",
    "WindowedLlamaIndexRetriever",
    "WindowedParentRetriever",
    "assemble_context",
    "contains_cjk",
    "count_tokens",
    "default_embeddings",
    "doc_key",
    "generate_queries",
    "load_files",
    "merge_spans",
    "minilm_model_path",
    "parse_query_variants",
    "reciprocal_rank_fusion",
    "source_id_for",
    "source_key",
    "tokenize",
]

_LAZY = {
    "MiniLMEmbeddings": ("embeddings", "MiniLMEmbeddings"),
    "default_embeddings": ("embeddings", "default_embeddings"),
    "minilm_model_path": ("embeddings", "minilm_model_path"),
    "WindowedLlamaIndexRetriever": ("llama_index", "WindowedLlamaIndexRetriever"),
    "MiniLMLlamaIndexEmbedding": ("llama_index", "MiniLMLlamaIndexEmbedding"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
