"""RAPTOR over sliding windows: a summary tree whose leaves keep exact offsets.

RAPTOR (Sarthi et al., *Recursive Abstractive Processing for Tree-Organized
Retrieval*, ICLR 2024) embeds leaf chunks, soft-clusters them (UMAP + Gaussian
mixtures, ``k`` by BIC), summarises every cluster, embeds the summaries and repeats;
retrieval searches all layers at once (*collapsed tree*, 2000-token budget) or walks
the tree top-down. Here the leaves are the package's own chunks or FFS/DFS/DDS windows
with exact offsets, leaf results are merged by offset like the windowed parent
retriever, and every summary knows which leaves (and offsets) it summarises.

=================  ===================================================================
``clustering``     `cluster_embeddings` (UMAP or PCA, GaussianMixture, BIC)
``tree``           `Leaf`, `RaptorNode`, `RaptorTree` (JSON + .npy)
``leaves``         leaves from a text or from a ``SlidingWindowIndex``
``summarise``      `ExtractiveSummarizer` (no LLM), `LLMSummarizer`, cache
``build``          `TreeBuilder`, `TreeConfig`, `BuildReport`
``store``          `RaptorIndex`: trees beside an index, incremental per document
``search``         collapsed tree / traversal, budgeted assembly, `RaptorSearcher` (framework-free core)
``retrievers``     `RaptorRetriever` (LangChain face)
``llama_index``    `RaptorLlamaIndexRetriever` (LlamaIndex)
``evaluation``     ``swrag eval --strategies raptor,raptor-llm,raptor-traverse``
``cli``            ``swrag raptor build|show|ask``
=================  ===================================================================

Names are imported lazily.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "ClusterConfig": "clustering",
    "ExtractiveSummarizer": "summarise",
    "LLMSummarizer": "summarise",
    "RaptorIndex": "store",
    "RaptorLlamaIndexRetriever": "llama_index",
    "RaptorRetriever": "langchain",
    "TreeConfig": "build",
    "build_tree": "build",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "BuildReport": "build",
    "Cluster": "summarise",
    "DEFAULT_SUMMARY_PROMPT": "summarise",
    "Leaf": "tree",
    "NodeHit": "search",
    "RaptorContext": "search",
    "RaptorNode": "tree",
    "RaptorSearcher": "search",
    "RaptorTree": "tree",
    "Summary": "summarise",
    "SummaryCache": "summarise",
    "SummaryContext": "summarise",
    "SummaryPiece": "search",
    "TreeBuilder": "build",
    "assemble_hits": "search",
    "cluster_embeddings": "clustering",
    "collapsed_hits": "search",
    "context_documents": "langchain",
    "gmm_soft_clusters": "clustering",
    "leaves_from_index": "leaves",
    "leaves_from_text": "leaves",
    "reduce_embeddings": "clustering",
    "sentence_spans": "summarise",
    "traversal_hits": "search",
    "umap_available": "clustering",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
