"""The LangChain face: the splitters, the index as a LangChain ``VectorStore`` and its retrievers.

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "DynamicStepTextSplitter": "splitters",
    "DynamicWindowTextSplitter": "splitters",
    "FixedWindowTextSplitter": "splitters",
    "MultiQueryFusionRetriever": "multi_query",
    "PrecomputedEmbeddings": "vectorstore",
    "SlidingWindowIndex": "index",
    "SlidingWindowTextSplitter": "splitters",
    "VectorStoreError": "vectorstore",
    "WindowedParentRetriever": "retriever",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "CJKBM25Retriever": "search",
    "DDSTextSplitter": "splitters",
    "DFSTextSplitter": "splitters",
    "DenseChunkRetriever": "search",
    "FFSTextSplitter": "splitters",
    "HybridRetriever": "search",
    "IndexTextEmbeddings": "vectorstore",
    "TokenLength": "splitters",
    "VectorBackend": "vectorstore",
    "generate_queries": "multi_query",
    "load_files": "files",
    "offline_encodings": "splitters",
    "parse_query_variants": "multi_query",
    "reciprocal_rank_fusion": "fusion",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
