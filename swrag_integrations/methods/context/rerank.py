"""Rerankers, framework-free: one interface and two offline implementations.

* `Reranker` — the protocol: ``rerank(query, documents, top_n) -> documents``
  (best first, ``relevance_score`` and ``rerank_rank`` in metadata).
* `Rescorer` — base class of the cores: implement `Rescorer.score`; documents
  are document-like items (``page_content``, ``metadata``, ``id``) or
  `ContextSpan` s, results ``PlainDocument`` s.
* `EmbeddingRescorer` — re-scores whole candidate windows with any embedder
  (``embed_documents``/``embed_query``). MiniLM truncates its input at 256 word pieces, so a long window
  embedded at once is judged on its head only; instead the window is cut into
  sentence-ish pieces of at most ``piece_tokens`` tokens and scored by the best piece
  (``aggregate="max"``; ``"mean"`` and ``"max_mean"`` also available).
* `LLMJudgeRescorer` — relevance probability from the local model: one forward
  pass over a yes/no question, softmax over the logits of the "yes" and "no" answer
  tokens. For any other LLM (``invoke``) it falls back to asking and parsing the answer.

The LangChain faces (``BaseReranker``, ``EmbeddingReranker``, ``LLMJudgeReranker``,
``CompressorReranker``: document compressors) are in `swrag_integrations.methods.context.langchain`.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

import numpy as np

from swrag_integrations._moved import moved_names_getattr
from swrag_integrations.methods.context._common import (
    annotated, as_embeddings, as_items, copy_item, doc_score, llm_text, local_core, sentence_pieces,
    unit_normalize,
)
from swrag_integrations.stores.storage import PlainDocument

__all__ = [
    "Reranker",
    "Rescorer",
    "EmbeddingRescorer",
    "LLMJudgeRescorer",
    "rank_by_order",
    "JUDGE_PROMPT",
]


@runtime_checkable
class Reranker(Protocol):
    """Anything that reorders candidate documents for a query."""

    def rerank(self, query: str, documents: Sequence[Any], top_n: int | None = None) -> list[Any]:
        """Documents best first (at most ``top_n``)."""
        ...


def check_top_n(top_n: int | None) -> None:
    """``ValueError`` unless ``top_n`` is a positive int or ``None``."""
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n <= 0):
        raise ValueError(f"top_n must be a positive int or None, got {top_n!r}")


def _ranked(documents: Sequence[Any], scores: Sequence[float], top_n: int | None) -> list[PlainDocument]:
    """Sort by score (stable: ties keep the input order) and annotate metadata."""
    order = sorted(range(len(documents)), key=lambda i: -scores[i])
    if top_n is not None:
        order = order[:top_n]
    return annotated(documents, order, scores, "rerank_rank")


@dataclass(kw_only=True)
class Rescorer(ABC):
    """Score-based reranker core: implement `score`.

    Args:
        top_n: default number of documents kept (``None``: all).
    """

    top_n: int | None = None

    def __post_init__(self) -> None:
        check_top_n(self.top_n)

    @abstractmethod
    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        """One relevance score per document (higher is better)."""

    def _checked(self, query: str, documents: Sequence[Any], top_n: int | None) -> list[Any]:
        """Validate a rerank call; the documents as a list (empty: nothing to rank)."""
        check_top_n(top_n)
        documents = as_items(documents)
        if documents and (not isinstance(query, str) or not query.strip()):
            raise ValueError("query must be a non-empty string")
        return documents

    def rerank(self, query: str, documents: Sequence[Any], top_n: int | None = None) -> list[PlainDocument]:
        """Documents best first with ``relevance_score`` / ``rerank_rank`` metadata."""
        documents = self._checked(query, documents, top_n)
        if not documents:
            return []
        scores = self.score(query, documents)
        if len(scores) != len(documents):
            raise ValueError(f"score() returned {len(scores)} scores for {len(documents)} documents")
        return _ranked(documents, scores, top_n if top_n is not None else self.top_n)

    def apply(self, documents: Sequence[Any], query: str | None = None) -> list[PlainDocument]:
        """The context-step interface: `rerank` with the default ``top_n``."""
        return self.rerank(query or "", documents)


@dataclass(kw_only=True)
class EmbeddingRescorer(Rescorer):
    """Cosine similarity of the query to the best sentence-ish piece of each window.

    Args:
        embeddings: any embedder (``embed_documents``/``embed_query``, normally the
            index's; a LlamaIndex embedding model is wrapped).
        piece_tokens: maximum piece length in cl100k tokens. 128 keeps English and CJK
            pieces under MiniLM's 256-word-piece truncation.
        aggregate: ``"max"`` (best piece), ``"mean"`` or ``"max_mean"`` (average of both).
        top_n: default number kept.
    """

    embeddings: Any
    piece_tokens: int = 128
    aggregate: Literal["max", "mean", "max_mean"] = "max"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.embeddings = as_embeddings(self.embeddings)
        if self.piece_tokens <= 0:
            raise ValueError(f"piece_tokens must be > 0, got {self.piece_tokens}")
        if self.aggregate not in ("max", "mean", "max_mean"):
            raise ValueError(f"aggregate must be 'max', 'mean' or 'max_mean', got {self.aggregate!r}")

    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
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


@dataclass(kw_only=True)
class LLMJudgeRescorer(Rescorer):
    """Relevance = P(yes) from an LLM asked whether the passage answers the question.

    With the local model (a `LocalLLM` or its LangChain
    adapter) this is one forward pass per document, no generation: the chat-templated
    prompt is run and the next-token logits of the single-token spellings of "yes" and
    "no" (``yes``, `` yes``, ``Yes``...) are soft-maxed against each other:
    ``P(yes) = sum exp(yes logits) / sum exp(yes and no logits)``.

    With any other LLM / chat model (``invoke``) the answer is generated and parsed: a
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
    _answer_ids: tuple[list[int], list[int]] | None = field(default=None, init=False, repr=False)

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

    def _local_scores(self, core: Any, query: str, documents: Sequence[Any]) -> list[float]:
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

    def _generic_scores(self, llm: Any, query: str, documents: Sequence[Any]) -> list[float]:
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

    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        llm = self._model()
        core = local_core(llm)
        if core is not None:
            return self._local_scores(core, query, documents)
        return self._generic_scores(llm, query, documents)


def rank_by_order(documents: Sequence[Any], top_n: int | None = None) -> list[PlainDocument]:
    """Documents already in rank order, annotated like a `Rescorer`'s: their
    ``relevance_score`` kept when finite, otherwise ``1 / rank``; ``rerank_rank`` set."""
    check_top_n(top_n)
    out = as_items(documents)
    if top_n is not None:
        out = out[:top_n]
    ranked = []
    for rank, doc in enumerate(out, start=1):
        meta = dict(doc.metadata or {})
        score = doc_score(doc, "relevance_score")
        meta["relevance_score"] = score if score is not None and math.isfinite(score) else 1.0 / rank
        meta["rerank_rank"] = rank
        ranked.append(copy_item(doc, meta))
    return ranked


# The LangChain classes moved to the face module; the old names still resolve, with a warning.
__getattr__ = moved_names_getattr(__name__)
