"""The LangChain face: the splitters, the index as a LangChain ``VectorStore`` and its retrievers.

Names are imported on first use. Importing the package registers the package's embedding
objects (`swrag_integrations.embeddings`) as LangChain ``Embeddings``
(`swrag_integrations.langchain.embeddings`), so they pass LangChain's type checks however
they were imported.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports
from swrag_integrations.langchain import embeddings as _embeddings  # noqa: F401 - registers EmbeddingsBase

_LAZY = {
    "DynamicStepTextSplitter": "splitters",
    "DynamicWindowTextSplitter": "splitters",
    "FixedWindowTextSplitter": "splitters",
    "MultiQueryFusionRetriever": "multi_query",
    "load_files": "files",
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
    "offline_encodings": "splitters",
    "parse_query_variants": "multi_query",
    "reciprocal_rank_fusion": "fusion",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
