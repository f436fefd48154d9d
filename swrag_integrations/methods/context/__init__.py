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

from typing import Any

from swrag_integrations.methods.context.headers import (
    AUTO_CONTEXT_PROMPT,
    CONTEXT_CHUNK_PROMPT,
    CONTEXT_DOCUMENT_PROMPT,
    ContextualChunkHeaders,
    ContextualEmbeddings,
    HeaderCache,
    HeaderReport,
    clean_header,
    text_to_index,
)
from swrag_integrations.methods.context.ordering import (
    DiversityReranker,
    LostInTheMiddleReorder,
    apply_budget,
    context_diversity,
    greedy_diversity_order,
    litm_order,
    mean_pairwise_cosine_distance,
    mmr_order,
)
from swrag_integrations.methods.context.rerank import JUDGE_PROMPT, BaseReranker, CompressorReranker, EmbeddingReranker, LLMJudgeReranker, Reranker
from swrag_integrations.methods.context.rse import RSE_PRESETS, RelevantSegmentExtractor, RSEParams, Segment, best_segment, chunk_values

__all__ = [
    "AUTO_CONTEXT_PROMPT",
    "BaseReranker",
    "CONTEXT_CHUNK_PROMPT",
    "CONTEXT_DOCUMENT_PROMPT",
    "CompressorNodePostprocessor",
    "CompressorReranker",
    "ContextualChunkHeaders",
    "ContextualEmbeddings",
    "ContextualHeaderTransform",
    "DiversityPostprocessor",
    "DiversityReranker",
    "EmbeddingReranker",
    "HeaderCache",
    "HeaderReport",
    "JUDGE_PROMPT",
    "LLMJudgeReranker",
    "LostInTheMiddlePostprocessor",
    "LostInTheMiddleReorder",
    "RSEParams",
    "RSE_PRESETS",
    "RelevantSegmentExtractor",
    "RelevantSegmentPostprocessor",
    "RerankPostprocessor",
    "Reranker",
    "Segment",
    "apply_budget",
    "best_segment",
    "chunk_values",
    "clean_header",
    "context_diversity",
    "greedy_diversity_order",
    "litm_order",
    "mean_pairwise_cosine_distance",
    "mmr_order",
    "text_to_index",
]

_LAZY = {
    "CompressorNodePostprocessor", "ContextualHeaderTransform", "DiversityPostprocessor",
    "LostInTheMiddlePostprocessor", "RelevantSegmentPostprocessor", "RerankPostprocessor",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from swrag_integrations.methods.context import llama_index as llama_index

        return getattr(llama_index, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
