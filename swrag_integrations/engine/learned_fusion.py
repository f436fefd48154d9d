"""Learned fusion of the first stage: a tiny logistic model instead of fixed RRF weights.

The default ranks small-chunk hits by weighted reciprocal-rank fusion of BM25 and dense
search (`swrag_integrations.engine.fusion.rrf`, weights 0.5/0.5). This module ranks the
same candidates by a logistic model over features of each hit (`hit_features`):

* ``bm25_rr`` / ``dense_rr`` -- the reciprocal of the hit's BM25 / dense rank (0 when
  that search did not find it);
* ``bm25_norm`` -- its BM25 score over the best BM25 score of the candidates (0 if none);
* ``relevance`` -- the cosine of query and chunk (`IndexEngine.search_children`);
* ``window_hits`` -- ``log(1 + n)``, ``n`` the other candidates inside this hit's window;
* ``source_share`` -- the share of the candidates that come from the hit's source;
* ``position`` -- where the chunk sits in its source (chunk index / chunks, 0..1).

`rerank` scores a candidate pool (a wider first stage, ``POOL_FACTOR`` times ``k_child``),
keeps the ``k`` best and gives them the model's probability as their ``score``, so
stage 2 (`swrag_integrations.engine.parents.rank_parents`, by best hit then summed
score) and the budget planner run unchanged.

`first_stage` is the one definition of stage 1 that every retriever, the trace and the
evaluation use: it chooses the fusion from the settings (`fusion_for`: RRF by default;
``fusion="learned"`` always the model; ``fusion="auto"`` the model for a hybrid search when
the budget is at most `LEARNED_FUSION_MAX_BUDGET` tokens, RRF otherwise). The model is not
the default: it qualified on the six sets it was fitted beside but lost on a set it never
saw (docs/eval/levers.md). The evaluation strategies
``default+learned-fusion`` (always learned) and ``default+rrf`` (always RRF) keep the two
measurable side by side (`swrag_integrations.evaluation.methods.learned_fusion`).

The coefficients live in ``fusion_model.json`` beside this module. They were fitted on the
tuning halves of the six original dev sets only (never the test halves) by::

    python -m swrag_integrations.evaluation.methods.fit_fusion --data-dir /work/shared/data/eval \\
        --out swrag_integrations/engine/fusion_model.json

(label of a candidate: it comes from a gold source and its chunk holds at least half of
a gold answer's tokens, `swrag_integrations.evaluation.metrics.context_recall`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from functools import lru_cache
from typing import Any, Sequence

from swrag_integrations.engine.protocols import ChildHit
from swrag_integrations.engine.settings import RetrieverSettings

__all__ = ["FEATURES", "FusionModel", "hit_features", "load_model", "rerank", "MODEL_PATH", "POOL_FACTOR",
           "LEARNED_FUSION_MAX_BUDGET", "fusion_for", "first_stage"]

FEATURES: tuple[str, ...] = ("bm25_rr", "bm25_norm", "dense_rr", "relevance", "window_hits", "source_share",
                             "position")
"""The features of a candidate hit, in the order of the model's coefficients."""

MODEL_PATH = Path(__file__).with_name("fusion_model.json")
"""The fitted model shipped with the package."""

POOL_FACTOR = 2
"""The candidate pool is this many times ``k_child`` hits of the RRF first stage."""


LEARNED_FUSION_MAX_BUDGET = 500
"""Under ``fusion="auto"`` the learned fusion ranks stage 1 at budgets up to this many tokens.

Where the model helped on the six original dev sets (both halves) in
docs/eval/levers.md; on the six sets added later it did not hold at every budget, so it
is an option (``fusion="auto"`` or ``"learned"``), not the default."""


def fusion_for(settings: RetrieverSettings) -> str:
    """``"learned"`` or ``"rrf"``: the fusion stage 1 uses under ``settings``.

    ``fusion="auto"``: learned when the search is hybrid (`RetrieverSettings.hybrid`) and
    ``budget_tokens`` is at most `LEARNED_FUSION_MAX_BUDGET`, else RRF. (``"learned"`` on a
    search that is not hybrid is refused by `RetrieverSettings` itself.)
    """
    if settings.fusion != "auto":
        return settings.fusion
    tight = settings.budget_tokens is not None and settings.budget_tokens <= LEARNED_FUSION_MAX_BUDGET
    return "learned" if settings.hybrid and tight else "rrf"


def _has_ranker_metadata(hits: Sequence[ChildHit]) -> bool:
    """Whether ``hits`` carry the per-ranker metadata `hit_features` reads (an `IndexEngine`'s do)."""
    return all("rrf_score" in h.metadata and "relevance" in h.metadata for h in hits)


def first_stage(index: Any, query: str, settings: RetrieverSettings, *, filter: Any = None) -> list[ChildHit]:
    """Stage 1 of the windowed parent retrieval for one query: ``settings.k_child`` small-chunk
    hits of ``index`` (a `ChunkIndex`), best first -- the one definition every retriever,
    `swrag_integrations.engine.trace.trace` and the evaluation use.

    RRF (`fusion_for` gives ``"rrf"``): ``index.search_children`` as it is. Learned: a pool
    of ``POOL_FACTOR * k_child`` RRF hits re-ranked by the shipped model (`rerank`).
    Under ``fusion="auto"`` an index other than an `IndexEngine` (e.g. a LlamaIndex
    retriever's nodes, which lack the ranker metadata the model reads) keeps RRF; ``filter``: an already parsed metadata filter or ``None``.

    Raises:
        ValueError: ``fusion="learned"`` on an index whose hits lack the ranker metadata.
    """
    from swrag_integrations.engine.engine import IndexEngine

    s = settings
    extra = {"filter": filter} if filter is not None else {}
    # "auto" uses the model only on an engine (whose hits carry the ranker metadata)
    learned = fusion_for(s) == "learned" and (s.fusion == "learned" or isinstance(index, IndexEngine))
    k = POOL_FACTOR * s.k_child if learned else s.k_child
    hits = index.search_children(query, k, search_type=s.search_type, weights=s.weights, rrf_c=s.rrf_c, **extra)
    if not learned or not hits:
        return hits
    if not _has_ranker_metadata(hits):
        raise ValueError(f"fusion='learned' needs hits with BM25/dense ranker metadata, which "
                         f"{type(index).__name__} does not give; use fusion='rrf' or 'auto' with this index")
    return rerank(hits, s.k_child, _shipped_model())


@lru_cache(maxsize=1)
def _shipped_model() -> FusionModel:
    """The shipped model (`MODEL_PATH`), read once."""
    return load_model()


def hit_features(hits: Sequence[ChildHit]) -> list[list[float]]:
    """The `FEATURES` of every hit of one query's candidate pool, in the hits' order.

    Reads the per-ranker metadata `IndexEngine.search_children` writes (``bm25_rank``,
    ``bm25_score``, ``dense_rank``, ``relevance``, ``n_chunks``); a missing key counts as
    "not found by that ranker" (0).
    """
    best_bm25 = max((float(h.metadata.get("bm25_score") or 0.0) for h in hits), default=0.0)
    per_source: dict[str, list[int]] = {}
    for h in hits:
        per_source.setdefault(h.source_id, []).append(h.chunk_index)
    rows = []
    for h in hits:
        meta = h.metadata
        bm25_rank, dense_rank = meta.get("bm25_rank"), meta.get("dense_rank")
        bm25_score = float(meta.get("bm25_score") or 0.0)
        others = per_source[h.source_id]
        inside = sum(1 for c in others if h.lower <= c <= h.upper) - 1
        n_chunks = int(meta.get("n_chunks") or 0)
        rows.append([
            1.0 / bm25_rank if bm25_rank else 0.0,
            bm25_score / best_bm25 if best_bm25 > 0 else 0.0,
            1.0 / dense_rank if dense_rank else 0.0,
            float(meta.get("relevance") or 0.0),
            math.log1p(max(inside, 0)),
            len(others) / len(hits),
            h.chunk_index / (n_chunks - 1) if n_chunks > 1 else 0.0,
        ])
    return rows


@dataclass(frozen=True)
class FusionModel:
    """A logistic model over `FEATURES`: ``p = 1 / (1 + exp(-(intercept + coef . x)))``."""

    coef: tuple[float, ...]
    intercept: float
    features: tuple[str, ...] = FEATURES
    meta: Any = None  # how it was fitted (data, sizes), kept for the record; never read

    def __post_init__(self) -> None:
        if tuple(self.features) != FEATURES:
            raise ValueError(f"fusion model features must be {FEATURES}, got {tuple(self.features)}; refit it")
        if len(self.coef) != len(FEATURES):
            raise ValueError(f"fusion model needs {len(FEATURES)} coefficients, got {len(self.coef)}; refit it")

    def score(self, row: Sequence[float]) -> float:
        """The probability that a candidate with features ``row`` holds the answer."""
        z = self.intercept + sum(w * x for w, x in zip(self.coef, row))
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def to_json(self) -> str:
        """The model as the JSON `load_model` reads."""
        return json.dumps({"features": list(self.features), "coef": list(self.coef), "intercept": self.intercept,
                           "meta": self.meta}, indent=2, ensure_ascii=False) + "\n"


def load_model(path: str | Path | None = None) -> FusionModel:
    """The fitted model of ``path`` (default: the one shipped, `MODEL_PATH`).

    Raises:
        ValueError: the file is not a fusion model of these `FEATURES`.
    """
    path = Path(path) if path is not None else MODEL_PATH
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return FusionModel(tuple(float(c) for c in data["coef"]), float(data["intercept"]),
                           tuple(data["features"]), data.get("meta"))
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a fusion model ({exc}); refit it with "
                         "python -m swrag_integrations.evaluation.methods.fit_fusion") from None


def rerank(hits: Sequence[ChildHit], k: int, model: FusionModel | None = None) -> list[ChildHit]:
    """The ``k`` best of a candidate pool by the model, best first.

    Each returned hit is a copy whose ``score`` is the model's probability and whose
    ``rank`` is its new 1-based rank (metadata gains ``fusion_score``); ties keep the
    pool's (RRF) order.
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    model = model if model is not None else load_model()
    scores = [model.score(row) for row in hit_features(hits)]
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))[:k]
    return [replace(hits[i], score=scores[i], rank=r, metadata={**hits[i].metadata, "fusion_score": scores[i]})
            for r, i in enumerate(order, start=1)]
