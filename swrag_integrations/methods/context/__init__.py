"""Context construction after retrieval: ordering, segments, headers, reranking.

LangChain classes (document compressors / transformers):

* :class:`DiversityReranker` (Haystack greedy diversity order or MMR) and
  :class:`LostInTheMiddleReorder`; :func:`mean_pairwise_cosine_distance` /
  :func:`context_diversity` measure a context's redundancy.
* :class:`ContextualChunkHeaders` (contextual headers per chunk, or one AutoContext
  header per document; KV-cached document prefix with the local model; sqlite cache),
  :func:`text_to_index`, :class:`ContextualEmbeddings`.
* :class:`RelevantSegmentExtractor` (RSE: best contiguous chunk runs, exact offsets).
* :class:`Reranker` protocol, :class:`BaseReranker`, :class:`EmbeddingReranker`,
  :class:`LLMJudgeReranker`, :class:`CompressorReranker`.

LlamaIndex wrappers live in :mod:`swrag_integrations.methods.context.llama_index` (imported
lazily from here, e.g. ``from swrag_integrations.methods.context import RelevantSegmentPostprocessor``).
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

# Imported on first use (the LlamaIndex wrappers import LlamaIndex).
_LAZY = {
    "CompressorNodePostprocessor": "llama_index",
    "CompressorReranker": "rerank",
    "ContextualChunkHeaders": "headers",
    "ContextualHeaderTransform": "llama_index",
    "DiversityPostprocessor": "llama_index",
    "DiversityReranker": "ordering",
    "EmbeddingReranker": "rerank",
    "LLMJudgeReranker": "rerank",
    "LostInTheMiddlePostprocessor": "llama_index",
    "LostInTheMiddleReorder": "ordering",
    "RelevantSegmentExtractor": "rse",
    "RelevantSegmentPostprocessor": "llama_index",
    "RerankPostprocessor": "llama_index",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "AUTO_CONTEXT_PROMPT": "headers",
    "BaseReranker": "rerank",
    "CONTEXT_CHUNK_PROMPT": "headers",
    "CONTEXT_DOCUMENT_PROMPT": "headers",
    "ContextualEmbeddings": "headers",
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
    "clean_header": "headers",
    "context_diversity": "ordering",
    "greedy_diversity_order": "ordering",
    "litm_order": "ordering",
    "mean_pairwise_cosine_distance": "ordering",
    "mmr_order": "ordering",
    "text_to_index": "headers",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
