"""Rerankers: one interface, two offline implementations, and adapters both ways.

* :class:`Reranker` — the protocol: ``rerank(query, documents, top_n) -> documents``
  (best first, ``relevance_score`` and ``rerank_rank`` in metadata).
* :class:`BaseReranker` — base class: implement :meth:`BaseReranker.score`; it is also a
  LangChain ``BaseDocumentCompressor`` (so it plugs into ``ContextualCompressionRetriever``).
* :class:`EmbeddingReranker` — re-scores whole candidate windows with any LangChain
  ``Embeddings``. MiniLM truncates its input at 256 word pieces, so a long window
  embedded at once is judged on its head only; instead the window is cut into
  sentence-ish pieces of at most ``piece_tokens`` tokens and scored by the best piece
  (``aggregate="max"``; ``"mean"`` and ``"max_mean"`` also available).
* :class:`LLMJudgeReranker` — relevance probability from the local model: one forward
  pass over a yes/no question, softmax over the logits of the "yes" and "no" answer
  tokens. For any other LangChain LLM it falls back to asking and parsing the answer.
* :class:`CompressorReranker` — any LangChain ``BaseDocumentCompressor`` (e.g.
  ``CrossEncoderReranker``) used through the :class:`Reranker` interface.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, PrivateAttr, field_validator

from swrag_integrations.methods.context._common import annotated, doc_score, llm_text, local_core, sentence_pieces, unit_normalize

__all__ = [
    "Reranker",
    "BaseReranker",
    "EmbeddingReranker",
    "LLMJudgeReranker",
    "CompressorReranker",
    "JUDGE_PROMPT",
]


@runtime_checkable
class Reranker(Protocol):
    """Anything that reorders candidate documents for a query."""

    def rerank(self, query: str, documents: Sequence[Document], top_n: int | None = None) -> list[Document]:
        """Documents best first (at most ``top_n``)."""
        ...


def _check_top_n(top_n: int | None) -> None:
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n <= 0):
        raise ValueError(f"top_n must be a positive int or None, got {top_n!r}")


def _ranked(documents: Sequence[Document], scores: Sequence[float], top_n: int | None) -> list[Document]:
    """Sort by score (stable: ties keep the input order) and annotate metadata."""
    order = sorted(range(len(documents)), key=lambda i: -scores[i])
    if top_n is not None:
        order = order[:top_n]
    return annotated(documents, order, scores, "rerank_rank")


class BaseReranker(BaseDocumentCompressor, ABC):
    """Score-based reranker; also a LangChain document compressor.

    Args:
        top_n: default number of documents kept (``None``: all).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    top_n: int | None = None

    @field_validator("top_n")
    @classmethod
    def _valid_top_n(cls, value: int | None) -> int | None:
        _check_top_n(value)
        return value

    @abstractmethod
    def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        """One relevance score per document (higher is better)."""

    def _checked(self, query: str, documents: Sequence[Document], top_n: int | None) -> list[Document]:
        """Validate a rerank call; the documents as a list (empty: nothing to rank)."""
        _check_top_n(top_n)
        documents = list(documents)
        if documents and (not isinstance(query, str) or not query.strip()):
            raise ValueError("query must be a non-empty string")
        return documents

    def rerank(self, query: str, documents: Sequence[Document], top_n: int | None = None) -> list[Document]:
        """Documents best first with ``relevance_score`` / ``rerank_rank`` metadata."""
        documents = self._checked(query, documents, top_n)
        if not documents:
            return []
        scores = self.score(query, documents)
        if len(scores) != len(documents):
            raise ValueError(f"score() returned {len(scores)} scores for {len(documents)} documents")
        return _ranked(documents, scores, top_n if top_n is not None else self.top_n)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return self.rerank(query, documents)


class EmbeddingReranker(BaseReranker):
    """Cosine similarity of the query to the best sentence-ish piece of each window.

    Args:
        embeddings: any LangChain ``Embeddings`` (normally the index's embedder).
        piece_tokens: maximum piece length in cl100k tokens. 128 keeps English and CJK
            pieces under MiniLM's 256-word-piece truncation.
        aggregate: ``"max"`` (best piece), ``"mean"`` or ``"max_mean"`` (average of both).
        top_n: default number kept.
    """

    embeddings: Embeddings

    @field_validator("embeddings", mode="before")
    @classmethod
    def _any_framework(cls, value: Any) -> Any:
        from swrag_integrations.methods.context._common import as_embeddings

        return as_embeddings(value)
    piece_tokens: int = 128
    aggregate: Literal["max", "mean", "max_mean"] = "max"

    @field_validator("piece_tokens")
    @classmethod
    def _valid_piece(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"piece_tokens must be > 0, got {value}")
        return value

    def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        owners: list[int] = []
        pieces: list[str] = []
        for i, doc in enumerate(documents):
            parts = sentence_pieces(doc.page_content, self.piece_tokens) or [doc.page_content or " "]
            pieces.extend(parts)
            owners.extend([i] * len(parts))
        vectors = unit_normalize(self.embeddings.embed_documents(pieces))
        query_vec = unit_normalize(self.embeddings.embed_query(query))[0]
        sims = vectors @ query_vec
        owners_arr = np.asarray(owners)
        scores = []
        for i in range(len(documents)):
            s = sims[owners_arr == i]
            if self.aggregate == "max":
                scores.append(float(s.max()))
            elif self.aggregate == "mean":
                scores.append(float(s.mean()))
            else:
                scores.append(float((s.max() + s.mean()) / 2))
        return scores


JUDGE_PROMPT = (
    "Read the passage and decide whether it contains information that helps to answer "
    "the question.\n\nPassage:\n{document}\n\nQuestion: {query}\n\n"
    "Does the passage help to answer the question? Reply with yes or no only."
)
_YES = ("yes", " yes", "Yes", " Yes", "YES")
_NO = ("no", " no", "No", " No", "NO")


class LLMJudgeReranker(BaseReranker):
    """Relevance = P(yes) from an LLM asked whether the passage answers the question.

    With the local model (a `LocalLLM` or its LangChain
    adapter) this is one forward pass per document, no generation: the chat-templated
    prompt is run and the next-token logits of the single-token spellings of "yes" and
    "no" (``yes``, `` yes``, ``Yes``...) are soft-maxed against each other:
    ``P(yes) = sum exp(yes logits) / sum exp(yes and no logits)``.

    With any other LangChain LLM / chat model the answer is generated and parsed: a
    reply starting with yes scores 1, no scores 0, anything else 0.5
    (``unparsed`` counts those). A call that raises also scores 0.5 (``failed``).

    Args:
        llm: the model (default: `load_llama3`, loaded on
            first use).
        prompt: template with ``{document}`` and ``{query}``.
        max_document_tokens: documents longer than this (model tokens for the local
            model, cl100k tokens otherwise) are cut to their head.
    """

    llm: Any = None
    prompt: str = JUDGE_PROMPT
    max_document_tokens: int = 1024
    unparsed: int = 0
    failed: int = 0
    _answer_ids: tuple[list[int], list[int]] | None = PrivateAttr(default=None)

    def _model(self) -> Any:
        if self.llm is None:
            from swrag_integrations.llm import load_llama3

            self.llm = load_llama3()
        return self.llm

    def _ids(self, core: Any) -> tuple[list[int], list[int]]:
        if self._answer_ids is None:
            def single(words: Sequence[str]) -> list[int]:
                ids = []
                for w in words:
                    tok = core.tokenizer.encode(w, add_special_tokens=False)
                    if len(tok) == 1 and tok[0] not in ids:
                        ids.append(int(tok[0]))
                return ids

            yes, no = single(_YES), single(_NO)
            if not yes or not no:
                raise ValueError("the tokenizer has no single-token 'yes'/'no'; use a LangChain LLM fallback")
            self._answer_ids = (yes, no)
        return self._answer_ids

    def _local_scores(self, core: Any, query: str, documents: Sequence[Document]) -> list[float]:
        import torch

        yes, no = self._ids(core)
        scores = []
        for doc in documents:
            text = doc.page_content
            ids = core.tokenizer.encode(text, add_special_tokens=False)
            if len(ids) > self.max_document_tokens:
                text = core.tokenizer.decode(ids[: self.max_document_tokens], skip_special_tokens=True)
            prompt_ids = core.encode(self.prompt.format(document=text, query=query))
            with torch.no_grad():
                # use_cache stays on: IPEX-LLM's patched attention needs a cache object
                out = core.model(input_ids=torch.tensor([prompt_ids], device=core.device))
            logits = out.logits
            last = logits[0, -1] if logits.dim() == 3 else logits[-1]
            last = last.float()
            pick = torch.cat([last[yes], last[no]])
            probs = torch.softmax(pick, dim=0)
            scores.append(float(probs[: len(yes)].sum()))
        return scores

    def _generic_scores(self, llm: Any, query: str, documents: Sequence[Document]) -> list[float]:
        from swrag_integrations.methods.context._common import trim_to_tokens

        scores = []
        for doc in documents:
            text, _ = trim_to_tokens(doc.page_content, self.max_document_tokens)
            try:
                answer = llm_text(llm.invoke(self.prompt.format(document=text, query=query)))
            except Exception:  # noqa: BLE001 - a failing judge must not break retrieval
                self.failed += 1
                scores.append(0.5)
                continue
            match = re.match(r"\W*(yes|no)\b", answer.strip(), flags=re.IGNORECASE)
            if match is None:
                self.unparsed += 1
                scores.append(0.5)
            else:
                scores.append(1.0 if match.group(1).lower() == "yes" else 0.0)
        return scores

    def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        llm = self._model()
        core = local_core(llm)
        if core is not None:
            return self._local_scores(core, query, documents)
        return self._generic_scores(llm, query, documents)


class CompressorReranker:
    """Any LangChain ``BaseDocumentCompressor`` as a `Reranker`.

    The compressor's output order is the ranking; its ``relevance_score`` metadata is
    kept when present, otherwise ``1 / rank`` is written.
    """

    def __init__(self, compressor: BaseDocumentCompressor) -> None:
        if not isinstance(compressor, BaseDocumentCompressor):
            raise TypeError(f"expected a BaseDocumentCompressor, got {type(compressor).__name__}")
        self.compressor = compressor

    def rerank(self, query: str, documents: Sequence[Document], top_n: int | None = None) -> list[Document]:
        _check_top_n(top_n)
        documents = list(documents)
        if not documents:
            return []
        out = list(self.compressor.compress_documents(documents, query))
        if top_n is not None:
            out = out[:top_n]
        ranked = []
        for rank, doc in enumerate(out, start=1):
            meta = dict(doc.metadata or {})
            score = doc_score(doc, "relevance_score")
            meta["relevance_score"] = score if score is not None and math.isfinite(score) else 1.0 / rank
            meta["rerank_rank"] = rank
            ranked.append(Document(page_content=doc.page_content, metadata=meta, id=doc.id))
        return ranked

    def __repr__(self) -> str:
        return f"CompressorReranker({type(self.compressor).__name__})"
