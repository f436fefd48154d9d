"""LangChain faces of the context steps: document compressors and transformers.

Each class is a thin LangChain wrapper over a framework-free core of
`swrag_integrations.methods.context` (documents in, the core's result as LangChain
``Document`` s out; `core` returns the core, which the LlamaIndex faces use directly):

==============================  ===========================================  ================================
LangChain face                  core                                         kind
==============================  ===========================================  ================================
`DiversityReranker`      `DiversityOrder`           ``BaseDocumentCompressor``
`LostInTheMiddleReorder` `LostInTheMiddle`          compressor and transformer
`BaseReranker`           `Rescorer`                   ``BaseDocumentCompressor``
`EmbeddingReranker`      `EmbeddingRescorer`          ``BaseDocumentCompressor``
`LLMJudgeReranker`       `LLMJudgeRescorer`           ``BaseDocumentCompressor``
`RelevantSegmentExtractor` `SegmentExtractor`            ``BaseDocumentCompressor``
`ContextualChunkHeaders` `ChunkHeaderWriter`         ``BaseDocumentTransformer``
`ContextualEmbeddings`   `HeadedEmbedder`            ``Embeddings``
==============================  ===========================================  ================================

`CompressorReranker` goes the other way: any LangChain ``BaseDocumentCompressor``
(e.g. ``CrossEncoderReranker``) through the `Reranker` interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.methods.context._common import as_embeddings
from swrag_integrations.methods.context.headers import ChunkHeaderWriter, HeadedEmbedder
from swrag_integrations.methods.context.ordering import DiversityOrder, LostInTheMiddle
from swrag_integrations.methods.context.rerank import (
    JUDGE_PROMPT, EmbeddingRescorer, LLMJudgeRescorer, Rescorer, check_top_n, rank_by_order,
)
from swrag_integrations.methods.context.rse import RSEParams, Segment, SegmentExtractor

__all__ = [
    "BaseReranker",
    "CompressorReranker",
    "ContextualChunkHeaders",
    "ContextualEmbeddings",
    "DiversityReranker",
    "EmbeddingReranker",
    "LLMJudgeReranker",
    "LostInTheMiddleReorder",
    "RelevantSegmentExtractor",
    "to_documents",
]


def to_documents(items: Sequence[Any]) -> list[Document]:
    """A core's result (document-like items) as LangChain ``Document`` s."""
    return [item if isinstance(item, Document) else
            Document(page_content=item.page_content, metadata=dict(item.metadata or {}), id=getattr(item, "id", None))
            for item in items]


# ------------------------------------------------------------------------ rerankers
@dataclass(kw_only=True)
class _FaceRescorer(Rescorer):
    """The core of a `BaseReranker` subclass: its own ``score`` method."""

    face: Any

    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        return self.face.score(query, documents)


class BaseReranker(BaseDocumentCompressor, ABC):
    """Score-based reranker as a LangChain document compressor: implement `score`.

    Args:
        top_n: default number of documents kept (``None``: all).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    top_n: int | None = None

    @field_validator("top_n")
    @classmethod
    def _valid_top_n(cls, value: int | None) -> int | None:
        check_top_n(value)
        return value

    @abstractmethod
    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        """One relevance score per document (higher is better)."""

    def core(self) -> Rescorer:
        """The framework-free reranker doing the work."""
        return _FaceRescorer(face=self, top_n=self.top_n)

    def _checked(self, query: str, documents: Sequence[Any], top_n: int | None) -> list[Any]:
        return self.core()._checked(query, documents, top_n)

    def rerank(self, query: str, documents: Sequence[Any], top_n: int | None = None) -> list[Document]:
        """Documents best first with ``relevance_score`` / ``rerank_rank`` metadata."""
        return to_documents(self.core().rerank(query, documents, top_n))

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return self.rerank(query, documents)


class EmbeddingReranker(BaseReranker):
    """`EmbeddingRescorer` as a LangChain compressor (same arguments:
    ``embeddings``, ``piece_tokens``, ``aggregate``, ``top_n``)."""

    embeddings: Any
    piece_tokens: int = 128
    aggregate: Literal["max", "mean", "max_mean"] = "max"

    @field_validator("embeddings", mode="before")
    @classmethod
    def _any_framework(cls, value: Any) -> Any:
        return as_embeddings(value)

    @model_validator(mode="after")
    def _valid(self) -> "EmbeddingReranker":
        self.core()  # one definition of the checks: the core's
        return self

    def core(self) -> EmbeddingRescorer:
        """The framework-free reranker doing the work, built from this face's fields."""
        return EmbeddingRescorer(embeddings=self.embeddings, piece_tokens=self.piece_tokens,
                                 aggregate=self.aggregate, top_n=self.top_n)

    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        """One relevance score per document: the cosine of its sentence pieces to the
        query, aggregated by ``aggregate`` (higher is better).

        Args:
            query: the question the documents are scored against.
            documents: document-like items (``page_content``).

        Returns:
            The scores, in the order of ``documents``.
        """
        return self.core().score(query, documents)


class LLMJudgeReranker(BaseReranker):
    """`LLMJudgeRescorer` as a LangChain compressor (same arguments:
    ``llm``, ``prompt``, ``max_document_tokens``, ``top_n``); ``unparsed`` / ``failed``
    count the judge's unparsed answers and failed calls."""

    llm: Any = None
    prompt: str = JUDGE_PROMPT
    max_document_tokens: int = 1024
    _core: LLMJudgeRescorer | None = PrivateAttr(default=None)

    def core(self) -> LLMJudgeRescorer:
        """The judge (one per face: it keeps the loaded model and the counters)."""
        if self._core is None:
            self._core = LLMJudgeRescorer(llm=self.llm, prompt=self.prompt,
                                          max_document_tokens=self.max_document_tokens, top_n=self.top_n)
        return self._core

    @property
    def unparsed(self) -> int:
        return self.core().unparsed

    @property
    def failed(self) -> int:
        return self.core().failed

    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        """One relevance score per document: the judge's P(yes) that it helps answer the query
        (0.5 for an unparsed answer or a failed call; the model is loaded on first use).

        Args:
            query: the question the documents are judged against.
            documents: document-like items (``page_content``).

        Returns:
            The scores in [0, 1], in the order of ``documents``.
        """
        return self.core().score(query, documents)


class DiversityReranker(BaseReranker):
    """`DiversityOrder` as a LangChain compressor (same arguments:
    ``embeddings``, ``strategy``, ``lambda_mult``, ``top_n``). Output metadata:
    ``diversity_rank`` and ``relevance_score`` (cosine to the query)."""

    embeddings: Any
    strategy: Literal["greedy", "mmr"] = "greedy"
    lambda_mult: float = 0.5

    @field_validator("embeddings", mode="before")
    @classmethod
    def _any_framework(cls, value: Any) -> Any:
        return as_embeddings(value)

    @model_validator(mode="after")
    def _valid(self) -> "DiversityReranker":
        self.core()
        return self

    def core(self) -> DiversityOrder:
        """The framework-free diversity order doing the work, built from this face's fields."""
        return DiversityOrder(embeddings=self.embeddings, strategy=self.strategy,
                              lambda_mult=self.lambda_mult, top_n=self.top_n)

    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        """Each document's cosine to the query (its relevance, before the diversity order).

        Args:
            query: the question the documents are compared with.
            documents: document-like items (``page_content``).

        Returns:
            The scores, in the order of ``documents``.
        """
        return self.core().score(query, documents)


class CompressorReranker:
    """Any LangChain ``BaseDocumentCompressor`` as a `Reranker`.

    The compressor's output order is the ranking; its ``relevance_score`` metadata is
    kept when present, otherwise ``1 / rank`` is written.

    Args:
        compressor: the LangChain compressor (e.g. ``CrossEncoderReranker``) that ranks.

    Raises:
        TypeError: If ``compressor`` is not a LangChain ``BaseDocumentCompressor``.
    """

    def __init__(self, compressor: BaseDocumentCompressor) -> None:
        if not isinstance(compressor, BaseDocumentCompressor):
            raise TypeError(f"expected a BaseDocumentCompressor, got {type(compressor).__name__}")
        self.compressor = compressor

    def rerank(self, query: str, documents: Sequence[Any], top_n: int | None = None) -> list[Document]:
        """The documents the compressor keeps, in its order, with ``relevance_score`` and
        ``rerank_rank`` metadata.

        Args:
            query: the question passed to the compressor.
            documents: document-like items to rank (empty: ``[]``).
            top_n: keep at most this many (``None``: all the compressor returns).

        Returns:
            LangChain ``Document`` s, best first.

        Raises:
            ValueError: If ``top_n`` is not a positive int or ``None``.
        """
        check_top_n(top_n)
        documents = to_documents(documents)
        if not documents:
            return []
        return to_documents(rank_by_order(self.compressor.compress_documents(documents, query), top_n))

    def __repr__(self) -> str:
        return f"CompressorReranker({type(self.compressor).__name__})"


# ------------------------------------------------------------------------ ordering
class LostInTheMiddleReorder(BaseDocumentCompressor, BaseDocumentTransformer):
    """`LostInTheMiddle` as a LangChain compressor *and* transformer
    (same arguments: ``budget``, ``budget_unit``, ``top_n``, ``sort_by_score``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    budget: int | None = None
    budget_unit: Literal["word", "token"] = "word"
    top_n: int | None = None
    sort_by_score: bool = False

    @model_validator(mode="after")
    def _valid(self) -> "LostInTheMiddleReorder":
        self.core()
        return self

    def core(self) -> LostInTheMiddle:
        """The framework-free reorder doing the work, built from this face's fields."""
        return LostInTheMiddle(budget=self.budget, budget_unit=self.budget_unit, top_n=self.top_n,
                               sort_by_score=self.sort_by_score)

    def reorder(self, documents: Sequence[Any]) -> list[Document]:
        """The documents in lost-in-the-middle order (best at both ends), after ``top_n`` and
        ``budget`` cut the rank-order list; ``rank`` metadata (1-based input rank) set where missing.

        Args:
            documents: documents or spans in rank order (best first), or in any order
                with ``sort_by_score``.

        Returns:
            LangChain ``Document`` s in context order.
        """
        return to_documents(self.core().reorder(documents))

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The compressor interface: `reorder` (``query`` and ``callbacks`` are not used).

        Args:
            documents: the retrieved documents, best first.
            query: ignored (the order needs no query).
            callbacks: ignored.

        Returns:
            The documents in lost-in-the-middle order.
        """
        return self.reorder(documents)

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """The transformer interface: `reorder`.

        Args:
            documents: the documents, best first.
            **kwargs: ignored.

        Returns:
            The documents in lost-in-the-middle order.
        """
        return self.reorder(documents)

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """The async transformer interface: `reorder` (runs inline; it does no I/O).

        Args:
            documents: the documents, best first.
            **kwargs: ignored.

        Returns:
            The documents in lost-in-the-middle order.
        """
        return self.reorder(documents)


# ----------------------------------------------------------------------------- RSE
class RelevantSegmentExtractor(BaseDocumentCompressor):
    """`SegmentExtractor` as a LangChain compressor: ranked small chunk
    ``Document`` s in, best contiguous segments out (same arguments as the core: ``preset``,
    ``chunks``, ``budget_tokens``, the preset overrides, ``score_key``,
    ``score_normalization``, ``order``). Output metadata: ``source_id``, ``start_index``,
    ``end_index``, ``first_chunk``, ``last_chunk``, ``segment_value`` (= ``score``),
    ``rank``, ``n_tokens`` and ``hit_ranks``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    preset: Literal["balanced", "precise", "expansive"] = "balanced"
    chunks: Any = Field(default=None, exclude=True)
    budget_tokens: int | None = 1500
    max_length: int | None = None
    overall_max_length: int | None = None
    minimum_value: float | None = None
    irrelevant_chunk_penalty: float | None = None
    decay_rate: float | None = None
    score_key: str | None = None
    score_normalization: Literal["auto", "none", "rank"] = "auto"
    order: Literal["value", "document"] = "value"
    encoding_name: str = DEFAULT_ENCODING

    @model_validator(mode="after")
    def _valid(self) -> "RelevantSegmentExtractor":
        self.core()
        return self

    def core(self) -> SegmentExtractor:
        """The framework-free segment extractor doing the work, built from this face's fields."""
        return SegmentExtractor(**{name: getattr(self, name) for name in type(self).model_fields})

    @property
    def params(self) -> RSEParams:
        return self.core().params

    def extract(self, documents: Sequence[Any]) -> list[Segment]:
        """Segments for ranked chunk documents (best first); empty input → ``[]``."""
        return self.core().extract(documents)

    def compress_documents(
        self, documents: Sequence[Document], query: str | None = None, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The compressor interface: the best contiguous segments of the ranked chunks.

        Args:
            documents: small chunk documents in rank order (best first), with ``source_id``
                and ``chunk_index`` metadata (plus ``start_index``/``end_index`` unless
                ``chunks`` is set).
            query: ignored (the chunks' scores and ranks carry the relevance).
            callbacks: ignored.

        Returns:
            The segments as LangChain ``Document`` s (see the class docstring for their metadata).

        Raises:
            ValueError: If a candidate lacks ``source_id``/``chunk_index`` metadata or its
                ``chunk_index`` is not an int.
            LookupError: If a segment needs a chunk that was not retrieved and ``chunks``
                cannot supply it, or a chunk's text does not match its offsets.
        """
        return to_documents(self.core().apply(documents))


# ------------------------------------------------------------------------- headers
class ContextualChunkHeaders(ChunkHeaderWriter, BaseDocumentTransformer):
    """`ChunkHeaderWriter` as a LangChain ``BaseDocumentTransformer``
    (same arguments); the chunks it returns are LangChain ``Document`` s."""

    def _make(self, page_content: str, metadata: dict[str, Any], id: str | None = None) -> Document:
        return Document(page_content=page_content, metadata=metadata, id=id)


class ContextualEmbeddings(HeadedEmbedder, Embeddings):
    """`HeadedEmbedder` as LangChain ``Embeddings`` (same arguments:
    ``base``, ``headers``)."""
