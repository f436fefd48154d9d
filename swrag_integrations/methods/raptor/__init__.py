"""RAPTOR over sliding windows: a summary tree whose leaves keep exact offsets.

RAPTOR (Sarthi et al., *Recursive Abstractive Processing for Tree-Organized
Retrieval*, ICLR 2024) embeds leaf chunks, soft-clusters them (UMAP + Gaussian
mixtures, ``k`` by BIC), summarises every cluster, embeds the summaries and repeats;
retrieval searches all layers at once (*collapsed tree*, 2000-token budget) or walks
the tree top-down. Here the leaves are the package's own chunks or FFS/DFS/DDS windows
with exact offsets, leaf results are merged by offset like the windowed parent
retriever, and every summary knows which leaves (and offsets) it summarises.

=================  ===================================================================
``clustering``     :func:`cluster_embeddings` (UMAP or PCA, GaussianMixture, BIC)
``tree``           :class:`Leaf`, :class:`RaptorNode`, :class:`RaptorTree` (JSON + .npy)
``leaves``         leaves from a text or from a ``SlidingWindowIndex``
``summarise``      :class:`ExtractiveSummarizer` (no LLM), :class:`LLMSummarizer`, cache
``build``          :class:`TreeBuilder`, :class:`TreeConfig`, :class:`BuildReport`
``store``          :class:`RaptorIndex`: trees beside an index, incremental per document
``search``         collapsed tree / traversal, budgeted assembly, :class:`RaptorSearcher` (framework-free core)
``retrievers``     :class:`RaptorRetriever` (LangChain face)
``llama_index``    :class:`RaptorLlamaIndexRetriever` (LlamaIndex)
``evaluation``     ``swrag eval --strategies raptor,raptor-llm,raptor-traverse``
``cli``            ``swrag raptor build|show|ask``
=================  ===================================================================

Names are imported lazily.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "ClusterConfig": "clustering", "cluster_embeddings": "clustering", "umap_available": "clustering",
    "reduce_embeddings": "clustering", "gmm_soft_clusters": "clustering",
    "Leaf": "tree", "RaptorNode": "tree", "RaptorTree": "tree",
    "leaves_from_text": "leaves", "leaves_from_index": "leaves",
    "ExtractiveSummarizer": "summarise", "LLMSummarizer": "summarise", "SummaryCache": "summarise",
    "DEFAULT_SUMMARY_PROMPT": "summarise", "sentence_spans": "summarise", "Summary": "summarise",
    "Cluster": "summarise", "SummaryContext": "summarise",
    "TreeBuilder": "build", "TreeConfig": "build", "BuildReport": "build", "build_tree": "build",
    "RaptorIndex": "store",
    "collapsed_hits": "search", "traversal_hits": "search", "assemble_hits": "search", "RaptorContext": "search",
    "SummaryPiece": "search", "NodeHit": "search", "RaptorSearcher": "search",
    "RaptorRetriever": "langchain", "context_documents": "langchain",
    "RaptorLlamaIndexRetriever": "llama_index",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
