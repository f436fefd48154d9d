"""Context construction after retrieval: ordering, segments, headers, reranking.

Framework-free cores (document-like items or the engine's
:class:`~swrag_integrations.engine.assemble.ContextSpan` s in, ``PlainDocument`` s out;
each has ``apply(documents, query)``):

* :class:`DiversityOrder` (Haystack greedy diversity order or MMR) and
  :class:`LostInTheMiddle`; :func:`mean_pairwise_cosine_distance` /
  :func:`context_diversity` measure a context's redundancy.
* :class:`ChunkHeaderWriter` (contextual headers per chunk, or one AutoContext
  header per document; KV-cached document prefix with the local model; sqlite cache),
  :func:`text_to_index`, :class:`HeadedEmbedder`.
* :class:`SegmentExtractor` (RSE: best contiguous chunk runs, exact offsets).
* :class:`Reranker` protocol, :class:`Rescorer`, :class:`EmbeddingRescorer`,
  :class:`LLMJudgeRescorer`.

Their LangChain faces (document compressors / transformers, in
:mod:`swrag_integrations.methods.context.langchain`): :class:`DiversityReranker`,
:class:`LostInTheMiddleReorder`, :class:`ContextualChunkHeaders`,
:class:`ContextualEmbeddings`, :class:`RelevantSegmentExtractor`, :class:`BaseReranker`,
:class:`EmbeddingReranker`, :class:`LLMJudgeReranker`, :class:`CompressorReranker`.
The LlamaIndex faces (node postprocessors) live in
:mod:`swrag_integrations.methods.context.llama_index`. Both are imported lazily from here,
e.g. ``from swrag_integrations.methods.context import RelevantSegmentExtractor``.
"""

from __future__ import annotations

from typing import Any

from swrag_integrations.methods.context.headers import (
    AUTO_CONTEXT_PROMPT,
    CONTEXT_CHUNK_PROMPT,
    CONTEXT_DOCUMENT_PROMPT,
    ChunkHeaderWriter,
    HeadedEmbedder,
    HeaderCache,
    HeaderReport,
    clean_header,
    text_to_index,
)
from swrag_integrations.methods.context.ordering import (
    DiversityOrder,
    LostInTheMiddle,
    apply_budget,
    context_diversity,
    greedy_diversity_order,
    litm_order,
    mean_pairwise_cosine_distance,
    mmr_order,
)
from swrag_integrations.methods.context.rerank import JUDGE_PROMPT, EmbeddingRescorer, LLMJudgeRescorer, Reranker, Rescorer
from swrag_integrations.methods.context.rse import RSE_PRESETS, RSEParams, Segment, SegmentExtractor, best_segment, chunk_values

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

# The faces, imported on first use (importing this package imports no framework).
_LAZY = {
    **dict.fromkeys((
        "BaseReranker", "CompressorReranker", "ContextualChunkHeaders", "ContextualEmbeddings", "DiversityReranker",
        "EmbeddingReranker", "LLMJudgeReranker", "LostInTheMiddleReorder", "RelevantSegmentExtractor",
    ), "langchain"),
    **dict.fromkeys((
        "CompressorNodePostprocessor", "ContextualHeaderTransform", "DiversityPostprocessor",
        "LostInTheMiddlePostprocessor", "RelevantSegmentPostprocessor", "RerankPostprocessor",
    ), "llama_index"),
}


def __getattr__(name: str) -> Any:
    face = _LAZY.get(name)
    if face == "langchain":
        from swrag_integrations.methods.context import langchain

        return getattr(langchain, name)
    if face == "llama_index":
        from swrag_integrations.methods.context import llama_index

        return getattr(llama_index, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
