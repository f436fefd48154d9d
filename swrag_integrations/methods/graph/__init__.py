"""Graph retrieval over sliding windows: HippoRAG (personalized PageRank) and GraphRAG (communities).

One passage-phrase graph (`PassageGraph`) is built over a
`SlidingWindowIndex`'s chunks or windows
(`build_graph`), from phrases and triples given by a rule extractor
(`RuleExtractor`, no model) or any LangChain LLM (`LLMExtractor`).

* `HippoRAG` -- query phrases -> personalized PageRank -> passages, fused with
  the hybrid ranking, widened to windows and merged by offset under the budget;
  `HippoRAGRetriever` (LangChain) and `HippoRAGLlamaIndexRetriever`.
* `GraphRAG` -- Leiden community hierarchy, community reports (extractive or
  by an LLM), local search (`GraphRAGLocalRetriever`,
  `GraphRAGLocalLlamaIndexRetriever`) and global search
  (`GlobalSearch`: map over reports, reduce).

Graph algorithms come from ``igraph`` (PRPACK PageRank) and ``leidenalg``; install
them with the ``graph`` extra. Names are imported on first use.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_NAMES = {
    "GraphRAG": ".graphrag",
    "GraphRAGLocalLlamaIndexRetriever": ".llama_index",
    "GraphRAGLocalRetriever": ".langchain",
    "HippoRAG": ".hipporag",
    "HippoRAGLlamaIndexRetriever": ".llama_index",
    "HippoRAGRetriever": ".langchain",
    "LLMExtractor": ".extraction",
    "build_graph": ".graph",
    "load_graph": ".graph",
    "save_graph": ".graph",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "BuildReport": ".graph",
    "Community": ".communities",
    "CommunityReport": ".communities",
    "Extraction": ".extraction",
    "ExtractionStats": ".extraction",
    "GlobalSearch": ".graphrag",
    "GlobalSearchResult": ".graphrag",
    "HippoRanking": ".hipporag",
    "Passage": ".graph",
    "PassageGraph": ".graph",
    "QueryLinker": ".common",
    "RuleExtractor": ".extraction",
    "Seed": ".common",
    "detect_communities": ".communities",
    "extractive_report": ".communities",
    "llm_report": ".communities",
    "normalize_phrase": ".extraction",
    "parse_extraction": ".extraction",
    "passages_from_index": ".graph",
}

__all__ = sorted(_NAMES)


__getattr__, __dir__ = lazy_exports(__name__, _NAMES, _DEPRECATED)
