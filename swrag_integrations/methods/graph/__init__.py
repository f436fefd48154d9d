"""Graph retrieval over sliding windows: HippoRAG (personalized PageRank) and GraphRAG (communities).

One passage-phrase graph (:class:`PassageGraph`) is built over a
:class:`~swrag_integrations.langchain.index.SlidingWindowIndex`'s chunks or windows
(:func:`build_graph`), from phrases and triples given by a rule extractor
(:class:`RuleExtractor`, no model) or any LangChain LLM (:class:`LLMExtractor`).

* :class:`HippoRAG` -- query phrases -> personalized PageRank -> passages, fused with
  the hybrid ranking, widened to windows and merged by offset under the budget;
  :class:`HippoRAGRetriever` (LangChain) and :class:`HippoRAGLlamaIndexRetriever`.
* :class:`GraphRAG` -- Leiden community hierarchy, community reports (extractive or
  by an LLM), local search (:class:`GraphRAGLocalRetriever`,
  :class:`GraphRAGLocalLlamaIndexRetriever`) and global search
  (:class:`GlobalSearch`: map over reports, reduce).

Graph algorithms come from ``igraph`` (PRPACK PageRank) and ``leidenalg``; install
them with the ``graph`` extra. Names are imported on first use.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_NAMES = {
    "Extraction": ".extraction", "ExtractionStats": ".extraction", "RuleExtractor": ".extraction",
    "LLMExtractor": ".extraction", "parse_extraction": ".extraction", "normalize_phrase": ".extraction",
    "Passage": ".graph", "PassageGraph": ".graph", "BuildReport": ".graph", "build_graph": ".graph",
    "passages_from_index": ".graph", "save_graph": ".graph", "load_graph": ".graph",
    "QueryLinker": ".common", "Seed": ".common",
    "HippoRAG": ".hipporag", "HippoRanking": ".hipporag",
    "Community": ".communities", "CommunityReport": ".communities", "detect_communities": ".communities",
    "extractive_report": ".communities", "llm_report": ".communities",
    "GraphRAG": ".graphrag", "GlobalSearch": ".graphrag", "GlobalSearchResult": ".graphrag",
    "HippoRAGRetriever": ".langchain", "GraphRAGLocalRetriever": ".langchain",
    "HippoRAGLlamaIndexRetriever": ".llama_index", "GraphRAGLocalLlamaIndexRetriever": ".llama_index",
}

__all__ = sorted(_NAMES)


__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
