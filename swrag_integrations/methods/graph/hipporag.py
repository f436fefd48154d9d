"""HippoRAG over sliding windows: query phrases -> personalized PageRank -> windows.

For a question, `HippoRAG`:

1. links it to graph phrases (`QueryLinker`: verbatim phrases and the
   question's entities by embedding; each weighted by its specificity, 1 / passages);
2. optionally seeds passage nodes with the index's hybrid ranking too (HippoRAG 2
   scales normalised dense passage scores by 0.05: ``passage_seed_weight``);
3. runs personalized PageRank from these seeds (igraph, PRPACK; damping 0.5 as in
   HippoRAG) and ranks passages by their probability;
4. fuses that ranking with the hybrid one by weighted RRF (``graph_weight``: 1 = the
   graph alone, 0 = the hybrid retriever alone);
5. turns each passage into its focus chunk (the hybrid search's hit in it, else the
   chunk holding the most probability of the phrases) and hands these hits to the windowed parent
   retriever's planner (`spans_for`): widened
   to their windows, merged by offset, cut to the token budget.

When no phrase is linked and the hybrid search finds nothing, nothing is returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from swrag_integrations.engine.parents import check_query, spans_for
from swrag_integrations.engine.settings import DEFAULT_BUDGET_TOKENS
from swrag_integrations.methods.graph.common import QueryLinker, Seed, fuse_rankings, hybrid_passages, passage_hits
from swrag_integrations.methods.graph.graph import PassageGraph

__all__ = ["HippoRAG", "HippoRanking"]


@dataclass
class HippoRanking:
    """One question's ranking: the fused ``passages`` and how they came about."""

    passages: list[tuple[str, float]]
    seeds: list[Seed] = field(default_factory=list)
    ppr: list[tuple[str, float]] = field(default_factory=list)
    hybrid: list[tuple[str, float]] = field(default_factory=list)
    top_phrases: list[tuple[str, float]] = field(default_factory=list)
    phrase_weights: dict[str, float] = field(default_factory=dict)
    best_chunks: dict[str, int] = field(default_factory=dict)


def _check_fraction(value: float, name: str, upper_open: bool = False) -> float:
    value = float(value)
    if not (0.0 <= value < 1.0 if upper_open else 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be in [0, 1{')' if upper_open else ']'}, got {value!r}")
    return value


class HippoRAG:
    """The HippoRAG retrieval core over a `SlidingWindowIndex`
    and its `PassageGraph` (framework-free; the retrievers wrap it).

    Args:
        index: the index (hybrid search, chunk rows, windows).
        graph: the passage-phrase graph built over it (`build_graph`).
        extractor: gives the question's entities (default the rule extractor).
        embeddings: for linking entities to phrases (default the index's).
        damping: PageRank damping (probability of following an edge).
        graph_weight: weight of the PPR ranking against the hybrid one (RRF).
        passage_seed_weight: reset weight of the hybrid ranking's passages (0: phrases only).
        k_child: small chunks the hybrid search fetches.
        link_top_k: seeds kept (see `QueryLinker`).
        link_threshold: lowest cosine of an embedding link (see `QueryLinker`).
        search_type: the hybrid search's dense mode.
        weights: the hybrid search's (BM25, dense) weights.
        focus: a passage gives one hit chunk (the hybrid search's, else the one holding
            most PageRank mass of phrases) instead of all its chunks (see
            `passage_hits`).

    Raises:
        TypeError: ``graph`` is not a `PassageGraph`, or ``index`` lacks what a
            `SlidingWindowIndex` has.
        ValueError: ``k_child`` is not a positive int, or ``passage_seed_weight`` is negative.
    """

    def __init__(self, index: Any, graph: PassageGraph, *, extractor: Any = None, embeddings: Any = None,
                 damping: float = 0.5, graph_weight: float = 0.5, passage_seed_weight: float = 0.05,
                 k_child: int = 30, link_top_k: int = 10, link_threshold: float = 0.8,
                 search_type: str = "mmr", weights: Sequence[float] = (0.5, 0.5), focus: bool = True) -> None:
        if not isinstance(graph, PassageGraph):
            raise TypeError(f"graph must be a PassageGraph, got {type(graph).__name__}")
        index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
        for name in ("search_children", "chunk_rows", "store", "config"):
            if not hasattr(index, name):
                raise TypeError(f"index must be a SlidingWindowIndex (needs {name}), got {type(index).__name__}")
        if isinstance(k_child, bool) or not isinstance(k_child, int) or k_child <= 0:
            raise ValueError(f"k_child must be a positive int, got {k_child!r}")
        if passage_seed_weight < 0:
            raise ValueError(f"passage_seed_weight must be >= 0, got {passage_seed_weight!r}")
        self.index = index
        self.graph = graph
        self.damping = _check_fraction(damping, "damping", upper_open=True)
        self.graph_weight = _check_fraction(graph_weight, "graph_weight")
        self.passage_seed_weight = float(passage_seed_weight)
        self.k_child = k_child
        self.focus = bool(focus)
        self.search_type = search_type
        self.weights = tuple(weights)
        emb = embeddings if embeddings is not None else getattr(getattr(index, "vectors", None), "embedding", None)
        self.linker = QueryLinker(graph, extractor=extractor, embeddings=emb, link_top_k=link_top_k,
                                  link_threshold=link_threshold)

    @property
    def encoding_name(self) -> str:
        return self.index.encoding_name

    def rank(self, query: str, k_passages: int = 30) -> HippoRanking:
        """The fused passage ranking of one question (at most ``k_passages``)."""
        check_query(query)
        if isinstance(k_passages, bool) or not isinstance(k_passages, int) or k_passages <= 0:
            raise ValueError(f"k_passages must be a positive int, got {k_passages!r}")
        seeds = self.linker.link(query)
        need_hybrid = self.graph_weight < 1.0 or self.passage_seed_weight > 0
        best_chunks: dict[str, int] = {}
        hybrid = hybrid_passages(self.index, self.graph, query, k_child=self.k_child, search_type=self.search_type,
                                 weights=self.weights, best_chunks=best_chunks) if need_hybrid else []
        reset: dict[tuple[str, str], float] = {("phrase", s.key): s.weight for s in seeds}
        if self.passage_seed_weight > 0 and hybrid:
            top = hybrid[0][1] or 1.0
            for pid, score in hybrid:
                reset[("passage", pid)] = reset.get(("passage", pid), 0.0) + self.passage_seed_weight * score / top
        ppr: list[tuple[str, float]] = []
        top_phrases: list[tuple[str, float]] = []
        if reset:
            scores = self.graph.personalized_pagerank(reset, damping=self.damping)
            phrases, pids = self.graph.nodes()
            base = len(phrases)
            order = np.argsort(-scores[base:], kind="stable")[:k_passages]
            ppr = [(pids[i], float(scores[base + i])) for i in order.tolist() if scores[base + i] > 0]
            top = np.argsort(-scores[:base], kind="stable")[:20]
            top_phrases = [(self.graph.names.get(phrases[i], phrases[i]), float(scores[i])) for i in top.tolist()
                           if scores[i] > 0]
            phrase_weights = {phrases[i]: float(scores[i]) for i in top.tolist() if scores[i] > 0}
        else:
            phrase_weights = {}
        fused = fuse_rankings([p for p, _ in ppr], [p for p, _ in hybrid[:k_passages]],
                              self.graph_weight if ppr else 0.0)
        return HippoRanking(fused[:k_passages], seeds, ppr, hybrid, top_phrases[:10], phrase_weights, best_chunks)

    def hits(self, query: str, k_passages: int = 30) -> list:
        """Small-chunk hits (`ChildHit`) of the ranked passages."""
        ranking = self.rank(query, k_passages)
        ppr = dict(ranking.ppr)
        extra = {pid: {"ppr_score": ppr.get(pid, 0.0)} for pid, _ in ranking.passages}
        hits = passage_hits(self.index, self.graph, ranking.passages, extra, focus=self.focus,
                            phrase_weights=ranking.phrase_weights, best_chunks=ranking.best_chunks)
        linked = [s.name for s in ranking.seeds]
        for hit in hits:
            hit.metadata["linked_phrases"] = ", ".join(linked)
        return hits

    def spans(self, queries: Sequence[str], *, budget_tokens: int | None = DEFAULT_BUDGET_TOKENS, k: int | None = None,
              k_passages: int = 30, expand: str = "window") -> list:
        """Budgeted, offset-merged `ContextSpan` s
        for one question (several phrasings share the budget)."""
        queries = [check_query(q) for q in queries]
        if not queries:
            raise ValueError("queries must not be empty")
        return spans_for([self.hits(q, k_passages) for q in queries], self.index, budget_tokens=budget_tokens,
                         k=k, expand=expand)
