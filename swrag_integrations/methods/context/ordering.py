"""Ordering a context: diversity (Haystack's greedy order, or MMR) and lost-in-the-middle.

* `greedy_diversity_order` — Haystack ``SentenceTransformersDiversityRanker``'s
  order: first the document most similar to the query, then repeatedly the one whose
  *average* cosine similarity to the already chosen ones is lowest.
* `mmr_order` — maximal marginal relevance:
  ``lambda * sim(query, d) - (1 - lambda) * max_{s chosen} sim(d, s)``.
* `litm_order` — "lost in the middle" (Liu et al. 2023, arXiv:2307.03172): the
  best documents at both ends, the weakest in the middle. Ranks 1..10 become
  ``1 3 5 7 9 10 8 6 4 2`` (Haystack ``LostInTheMiddleRanker``'s order).
* `mean_pairwise_cosine_distance` — ``mean_{i<j} (1 - cos(v_i, v_j))`` of a
  context, the redundancy measure reported by the evaluation.

Framework-free cores on document-like items or `ContextSpan` s:
`DiversityOrder` and `LostInTheMiddle`. Their LangChain faces
(`DiversityReranker`, `LostInTheMiddleReorder`) live in
`swrag_integrations.methods.context.langchain`, the LlamaIndex ones in
`swrag_integrations.methods.context.llama_index`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

from swrag_integrations._moved import moved_names_getattr
from swrag_integrations.methods.context._common import (
    annotated, as_embeddings, as_items, copy_item, count_tokens, count_words, doc_score, unit_normalize,
)
from swrag_integrations.methods.context.rerank import Rescorer, check_top_n
from swrag_integrations.stores.storage import Embedder, PlainDocument

__all__ = [
    "greedy_diversity_order",
    "mmr_order",
    "litm_order",
    "apply_budget",
    "mean_pairwise_cosine_distance",
    "context_diversity",
    "DiversityOrder",
    "LostInTheMiddle",
]


# ------------------------------------------------------------------ pure functions
def greedy_diversity_order(query_vector: Any, doc_vectors: Any, top_n: int | None = None) -> list[int]:
    """Indices of ``doc_vectors`` in Haystack's greedy diversity order.

    First the document with the highest cosine similarity to the query; then, until
    ``top_n`` are chosen, the remaining document with the lowest *mean* similarity to
    the chosen ones (ties: the earlier input position).
    """
    check_top_n(top_n)
    docs = unit_normalize(doc_vectors) if len(doc_vectors) else np.zeros((0, 0))
    n = docs.shape[0]
    if n == 0:
        return []
    q = unit_normalize(query_vector)[0]
    limit = n if top_n is None else min(top_n, n)
    sims = docs @ docs.T
    chosen = [int(np.argmax(docs @ q))]
    remaining = np.ones(n, dtype=bool)
    remaining[chosen[0]] = False
    total = sims[chosen[0]].copy()  # running sum of similarities to the chosen
    while len(chosen) < limit:
        mean = np.where(remaining, total / len(chosen), np.inf)
        nxt = int(np.argmin(mean))
        chosen.append(nxt)
        remaining[nxt] = False
        total += sims[nxt]
    return chosen


def mmr_order(query_vector: Any, doc_vectors: Any, lambda_mult: float = 0.5, top_n: int | None = None) -> list[int]:
    """Indices in maximal-marginal-relevance order (``lambda_mult=1``: pure relevance,
    ``0``: pure diversity after the first)."""
    check_top_n(top_n)
    if not 0.0 <= lambda_mult <= 1.0:
        raise ValueError(f"lambda_mult must be in [0, 1], got {lambda_mult}")
    if not len(doc_vectors):
        return []
    docs = unit_normalize(doc_vectors)
    n = docs.shape[0]
    q = unit_normalize(query_vector)[0]
    relevance = docs @ q
    sims = docs @ docs.T
    limit = n if top_n is None else min(top_n, n)
    chosen: list[int] = []
    remaining = np.ones(n, dtype=bool)
    redundancy = np.full(n, -np.inf)
    while len(chosen) < limit:
        red = np.where(np.isfinite(redundancy), redundancy, 0.0)
        score = lambda_mult * relevance - (1.0 - lambda_mult) * red
        score = np.where(remaining, score, -np.inf)
        nxt = int(np.argmax(score))
        chosen.append(nxt)
        remaining[nxt] = False
        redundancy = np.maximum(redundancy, sims[nxt])
    return chosen


def litm_order(n: int) -> list[int]:
    """Positions (0-based ranks) in lost-in-the-middle order.

    Odd ranks (1st, 3rd, 5th...) ascending, then even ranks (2nd, 4th...) descending,
    so rank 1 is first and rank 2 last for every ``n``.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    return list(range(0, n, 2)) + list(range(1, n, 2))[::-1]


def apply_budget(
    documents: Sequence[Any], budget: int | None, unit: Literal["word", "token"] = "word"
) -> list[Any]:
    """The longest rank-order prefix of ``documents`` within ``budget`` words/tokens.

    Selection stops at the first document that does not fit (no trimming; use
    `assemble_context` for cut-to-fit). The best
    document is always kept, even if it alone exceeds the budget.
    """
    if budget is None:
        return list(documents)
    if budget <= 0:
        raise ValueError(f"budget must be > 0, got {budget}")
    measure = count_words if unit == "word" else count_tokens
    kept: list[Any] = []
    used = 0
    for doc in documents:
        n = measure(doc.page_content)
        if kept and used + n > budget:
            break
        kept.append(doc)
        used += n
    return kept


def mean_pairwise_cosine_distance(vectors: Any) -> float:
    """``mean_{i<j} (1 - cos(v_i, v_j))``; 0.0 for fewer than two vectors."""
    if vectors is None or len(vectors) < 2:
        return 0.0
    v = unit_normalize(vectors)
    n = v.shape[0]
    sims = v @ v.T
    upper = sims[np.triu_indices(n, k=1)]
    return float(np.mean(1.0 - upper))


def context_diversity(documents: Sequence[Any], embeddings: Embedder) -> float:
    """`mean_pairwise_cosine_distance` of the documents' (or strings', or spans') embeddings."""
    texts = [d if isinstance(d, str) else getattr(d, "page_content", getattr(d, "text", str(d))) for d in documents]
    if len(texts) < 2:
        return 0.0
    return mean_pairwise_cosine_distance(embeddings.embed_documents(texts))


# -------------------------------------------------------------------------- cores
@dataclass(kw_only=True)
class DiversityOrder(Rescorer):
    """Reorder (and optionally cut) candidates for diversity, with any embedder.

    Args:
        embeddings: the embedder (``embed_documents``/``embed_query``, normally the
            index's; a LlamaIndex embedding model is wrapped).
        strategy: ``"greedy"`` (Haystack's greedy diversity order) or ``"mmr"``.
        lambda_mult: MMR trade-off (1 = relevance only).
        top_n: number of documents returned (``None``: all, reordered).

    Window texts longer than the embedder's limit (MiniLM: 256 word pieces) are judged
    on their head; pass the small chunks or a shorter text if that matters.
    Output metadata: ``diversity_rank`` and ``relevance_score`` (cosine to the query).
    """

    embeddings: Any
    strategy: Literal["greedy", "mmr"] = "greedy"
    lambda_mult: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        self.embeddings = as_embeddings(self.embeddings)
        if self.strategy not in ("greedy", "mmr"):
            raise ValueError(f"strategy must be 'greedy' or 'mmr', got {self.strategy!r}")
        if not 0.0 <= self.lambda_mult <= 1.0:
            raise ValueError(f"lambda_mult must be in [0, 1], got {self.lambda_mult}")

    def _vectors(self, query: str, documents: Sequence[Any]) -> tuple[Any, Any]:
        """Unit document vectors and the unit query vector."""
        docs = unit_normalize(self.embeddings.embed_documents([d.page_content for d in documents]))
        return docs, unit_normalize(self.embeddings.embed_query(query))[0]

    def score(self, query: str, documents: Sequence[Any]) -> list[float]:
        docs, q = self._vectors(query, documents)
        return [float(x) for x in docs @ q]

    def rerank(self, query: str, documents: Sequence[Any], top_n: int | None = None) -> list[PlainDocument]:
        documents = self._checked(query, documents, top_n)
        if not documents:
            return []
        vectors, q = self._vectors(query, documents)
        limit = top_n if top_n is not None else self.top_n
        if self.strategy == "greedy":
            order = greedy_diversity_order(q, vectors, limit)
        else:
            order = mmr_order(q, vectors, self.lambda_mult, limit)
        return annotated(documents, order, vectors @ q, "diversity_rank")


@dataclass(kw_only=True)
class LostInTheMiddle:
    """Best documents at both ends of the context, weakest in the middle.

    Input is taken to be in rank order (best first) unless ``sort_by_score`` is set.
    Ranks 1..10 are returned as 1 3 5 7 9 10 8 6 4 2 for every list length: rank 1
    always opens the context and rank 2 closes it.

    LangChain's ``LongContextReorder`` (langchain_community) is *not* reused: it
    reverses the list and alternates insert-at-front / append, which puts rank 1 first
    only for odd lengths; for even lengths it returns the mirror image (1..10 →
    2 4 6 8 10 9 7 5 3 1, best document last). Both keep the best at the ends, but the
    position of the top document would depend on the parity of the list, which makes
    results across ``k`` harder to compare (tested in ``tests/methods/test_context_ordering.py``).

    Args:
        budget: optional word or token budget: only the longest rank-order prefix of the
            documents that fits is reordered and returned (see `apply_budget`).
        budget_unit: ``"word"`` (whitespace words, like Haystack's
            ``word_count_threshold``) or ``"token"`` (cl100k tokens).
        top_n: keep at most this many (before reordering).
        sort_by_score: sort by the metadata score (``relevance_score``/``score``/
            ``rrf_score``, descending) first.
    """

    budget: int | None = None
    budget_unit: Literal["word", "token"] = "word"
    top_n: int | None = None
    sort_by_score: bool = False

    def __post_init__(self) -> None:
        for name in ("budget", "top_n"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0 or None, got {value}")
        if self.budget_unit not in ("word", "token"):
            raise ValueError(f"budget_unit must be 'word' or 'token', got {self.budget_unit!r}")

    def reorder(self, documents: Sequence[Any]) -> list[PlainDocument]:
        """The documents (or spans) in lost-in-the-middle order; ``rank`` metadata set
        (1-based input rank) where missing."""
        docs = as_items(documents)
        if self.sort_by_score:
            docs.sort(key=lambda d: -(doc_score(d) if doc_score(d) is not None else float("-inf")))
        if self.top_n is not None:
            docs = docs[: self.top_n]
        docs = apply_budget(docs, self.budget, self.budget_unit)
        out = []
        for rank, i in [(i + 1, i) for i in litm_order(len(docs))]:
            doc = docs[i]
            meta = dict(doc.metadata or {})
            meta.setdefault("rank", rank)
            out.append(copy_item(doc, meta))
        return out

    def apply(self, documents: Sequence[Any], query: str | None = None) -> list[PlainDocument]:
        """The context-step interface (``query`` is not needed)."""
        return self.reorder(documents)


# The LangChain classes moved to the face module; the old names still resolve, with a warning.
__getattr__ = moved_names_getattr(__name__)
