"""Context construction after retrieval: ordering, segments, headers, reranking.

Framework-free cores (document-like items or the engine's
`ContextSpan` s in, ``PlainDocument`` s out;
each has ``apply(documents, query)``):

* `DiversityOrder` (Haystack greedy diversity order or MMR) and
  `LostInTheMiddle`; `mean_pairwise_cosine_distance` /
  `context_diversity` measure a context's redundancy.
* `ChunkHeaderWriter` (contextual headers per chunk, or one AutoContext
  header per document; KV-cached document prefix with the local model; sqlite cache),
  `text_to_index`, `HeadedEmbedder`.
* `SegmentExtractor` (RSE: best contiguous chunk runs, exact offsets).
* `Reranker` protocol, `Rescorer`, `EmbeddingRescorer`,
  `LLMJudgeRescorer`.

Their LangChain faces (document compressors / transformers, in
`swrag_integrations.methods.context.langchain`): `DiversityReranker`,
`LostInTheMiddleReorder`, `ContextualChunkHeaders`,
`ContextualEmbeddings`, `RelevantSegmentExtractor`, `BaseReranker`,
`EmbeddingReranker`, `LLMJudgeReranker`, `CompressorReranker`.
The LlamaIndex faces (node postprocessors) live in
`swrag_integrations.methods.context.llama_index`. Both are imported lazily from here,
e.g. ``from swrag_integrations.methods.context import RelevantSegmentExtractor``.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

# The faces, imported on first use (importing this package imports no framework). The
# framework-free cores are reached by module path (e.g. ``methods.context.rse.SegmentExtractor``).
_LAZY = {
    "CompressorNodePostprocessor": "llama_index",
    "CompressorReranker": "langchain",
    "ContextualChunkHeaders": "langchain",
    "ContextualHeaderTransform": "llama_index",
    "DiversityPostprocessor": "llama_index",
    "DiversityReranker": "langchain",
    "EmbeddingReranker": "langchain",
    "LLMJudgeReranker": "langchain",
    "LostInTheMiddlePostprocessor": "llama_index",
    "LostInTheMiddleReorder": "langchain",
    "RelevantSegmentExtractor": "langchain",
    "RelevantSegmentPostprocessor": "llama_index",
    "RerankPostprocessor": "llama_index",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "AUTO_CONTEXT_PROMPT": "headers",
    "BaseReranker": "langchain",
    "CONTEXT_CHUNK_PROMPT": "headers",
    "CONTEXT_DOCUMENT_PROMPT": "headers",
    "ContextualEmbeddings": "langchain",
    "HeaderCache": "headers",
    "HeaderReport": "headers",
    "JUDGE_PROMPT": "rerank",
    "RSEParams": "rse",
    "RSE_PRESETS": "rse",
    "Reranker": "rerank",
    "Segment": "rse",
    "apply_budget": "ordering",
    "best_segment": "rse",
    "chunk_values": "rse",
    "clean_header": "swrag_integrations.llm.text",
    "context_diversity": "ordering",
    "greedy_diversity_order": "ordering",
    "litm_order": "ordering",
    "mean_pairwise_cosine_distance": "ordering",
    "mmr_order": "ordering",
    "text_to_index": "headers",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
