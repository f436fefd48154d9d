"""The learned fusion of the first stage (swrag_integrations/engine/learned_fusion.py) and its
evaluation strategy ``default+learned-fusion``."""

from __future__ import annotations

import json
import math
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from swrag_integrations.engine.learned_fusion import (FEATURES, MODEL_PATH, FusionModel, hit_features, load_model,
                                                      rerank)
from swrag_integrations.engine.parents import rank_parents
from swrag_integrations.engine.protocols import ChildHit


def _hit(source: str, chunk: int, rank: int, *, bm25: int | None = None, bm25_score: float | None = None,
         dense: int | None = None, relevance: float = 0.0, window: tuple[int, int] | None = None,
         n_chunks: int = 11) -> ChildHit:
    lower, upper = window if window is not None else (chunk - 2, chunk + 2)
    meta = {"relevance": relevance, "n_chunks": n_chunks}
    if bm25 is not None:
        meta.update(bm25_rank=bm25, bm25_score=bm25_score)
    if dense is not None:
        meta["dense_rank"] = dense
    return ChildHit(source, chunk, 1.0 / (60 + rank), rank, lower, upper, lower * 10, upper * 10 + 10,
                    chunk * 10, chunk * 10 + 10, meta)


def test_features_of_a_toy_pool():
    pool = [
        _hit("a", 5, 1, bm25=1, bm25_score=8.0, dense=2, relevance=0.7, window=(3, 7)),
        _hit("a", 6, 2, bm25=2, bm25_score=4.0, window=(4, 8)),
        _hit("b", 0, 3, dense=1, relevance=0.9, window=(0, 2), n_chunks=1),
        _hit("a", 10, 4, dense=3, relevance=0.2, window=(8, 10)),
    ]
    rows = hit_features(pool)
    assert len(rows) == 4 and all(len(r) == len(FEATURES) for r in rows)
    f = [dict(zip(FEATURES, r)) for r in rows]
    assert f[0] == pytest.approx({"bm25_rr": 1.0, "bm25_norm": 1.0, "dense_rr": 0.5, "relevance": 0.7,
                                  "window_hits": math.log(2), "source_share": 0.75, "position": 0.5})
    assert f[1]["bm25_rr"] == 0.5 and f[1]["bm25_norm"] == 0.5 and f[1]["dense_rr"] == 0.0
    assert f[1]["window_hits"] == pytest.approx(math.log(2))  # chunk 5 lies in window 4..8; chunk 10 does not
    assert f[2] == pytest.approx({"bm25_rr": 0.0, "bm25_norm": 0.0, "dense_rr": 1.0, "relevance": 0.9,
                                  "window_hits": 0.0, "source_share": 0.25, "position": 0.0})
    assert f[3]["position"] == 1.0 and f[3]["window_hits"] == 0.0
    assert hit_features([]) == []


def test_the_shipped_model_ranks_a_window_with_more_and_better_hits_first():
    # source "b": one weak hit ranked first by RRF; source "a": three strong hits in one window
    pool = [
        _hit("b", 40, 1, bm25=9, bm25_score=1.0, dense=12, relevance=0.3, window=(38, 42), n_chunks=80),
        _hit("a", 5, 2, bm25=1, bm25_score=9.0, dense=1, relevance=0.8, window=(3, 7), n_chunks=80),
        _hit("a", 6, 3, bm25=2, bm25_score=8.0, dense=2, relevance=0.75, window=(4, 8), n_chunks=80),
        _hit("a", 4, 4, bm25=3, bm25_score=7.0, dense=3, relevance=0.7, window=(2, 6), n_chunks=80),
    ]
    model = load_model()
    ranked = rerank(pool, 4, model)
    assert [h.source_id for h in ranked] == ["a", "a", "a", "b"]
    assert [h.rank for h in ranked] == [1, 2, 3, 4]
    assert all(h.score == h.metadata["fusion_score"] for h in ranked)
    assert ranked[0].score > ranked[-1].score
    parents = rank_parents(ranked, index=None)
    assert parents[0].source_id == "a" and len(parents[0].hits) == 3
    assert [h.source_id for h in rerank(pool, 2, model)] == ["a", "a"]  # the k best of the pool
    assert pool[0].rank == 1 and "fusion_score" not in pool[0].metadata  # the pool is not changed


def test_rerank_keeps_the_pool_order_on_ties_and_checks_k():
    flat = FusionModel(tuple(0.0 for _ in FEATURES), 0.0)
    pool = [_hit("a", i, i + 1, bm25=10 - i, bm25_score=float(i + 1)) for i in range(5)]
    assert [h.chunk_index for h in rerank(pool, 3, flat)] == [0, 1, 2]
    with pytest.raises(ValueError, match="k must be > 0"):
        rerank(pool, 0, flat)


def test_model_json_round_trip_and_bad_files(tmp_path):
    shipped = load_model()
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    assert tuple(data["features"]) == FEATURES and len(shipped.coef) == len(FEATURES)
    assert data["meta"]["fitted_on"] == "tuning halves"
    copy = tmp_path / "model.json"
    copy.write_text(shipped.to_json(), encoding="utf-8")
    again = load_model(copy)
    assert again.coef == shipped.coef and again.intercept == shipped.intercept
    row = [0.5] * len(FEATURES)
    z = shipped.intercept + 0.5 * sum(shipped.coef)
    assert again.score(row) == pytest.approx(1 / (1 + math.exp(-z)))
    copy.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="is not a fusion model.*refit"):
        load_model(copy)
    copy.write_text(json.dumps({"features": ["bm25_rr"], "coef": [1.0], "intercept": 0.0}), encoding="utf-8")
    with pytest.raises(ValueError, match="features must be"):
        load_model(copy)


def test_default_learned_fusion_strategy_ranks_the_default_pool_by_the_model():
    from fake_embeddings import TrigramEmbedder

    from swrag_integrations.engine.learned_fusion import POOL_FACTOR
    from swrag_integrations.engine.parents import spans_for
    from swrag_integrations.evaluation.datasets import Source
    from swrag_integrations.evaluation.methods.learned_fusion import DefaultLearnedFusionPipeline
    from swrag_integrations.evaluation.pipelines import PIPELINES, EvalConfig

    assert PIPELINES["default+learned-fusion"].builder is DefaultLearnedFusionPipeline
    towns = [Source(f"town{i}", " ".join(f"Harbour town {i} sentence {j} tells of copper, wool and the guild hall."
                                         for j in range(40))) for i in range(4)]
    pipe = DefaultLearnedFusionPipeline(towns, EvalConfig("default+learned-fusion", 512),
                                        embeddings=TrigramEmbedder(), budget=300)
    try:
        question = "copper trade of harbour town 2"
        pool = pipe.retriever.find_chunks(question, POOL_FACTOR * pipe.retriever.k_child)
        assert len(pool) > pipe.retriever.k_child  # a wider pool than the default's stage 1
        hits = rerank(pool, pipe.retriever.k_child, pipe.model)
        want = [(pipe._ids.get(s.source_id, s.source_id), s.start, s.end)
                for s in spans_for([hits], pipe.retriever.index, budget_tokens=300)]
        got = pipe.retrieve(question)
        assert got == want and got
        assert got != pipe._spans(pipe.retriever.retrieve_many([question]))  # not the RRF default
    finally:
        pipe.close()


def test_fit_learns_the_sign_of_a_feature_that_separates_the_labels():
    import random

    from swrag_integrations.evaluation.methods.fit_fusion import fit

    rng = random.Random(0)

    def rows(n: int):
        xs, ys = [], []
        for _ in range(n):
            good = rng.random() < 0.3
            row = [rng.random() for _ in FEATURES]
            row[FEATURES.index("bm25_norm")] = rng.uniform(0.6, 1.0) if good else rng.uniform(0.0, 0.5)
            xs.append(row)
            ys.append(int(good))
        return xs, ys

    model = fit({"big": rows(400), "small": rows(60)})
    assert model.features == FEATURES and model.meta["rows"] == {"big": [400, model.meta["rows"]["big"][1]],
                                                                 "small": [60, model.meta["rows"]["small"][1]]}
    strongest = max(range(len(FEATURES)), key=lambda i: abs(model.coef[i]))
    assert FEATURES[strongest] == "bm25_norm" and model.coef[strongest] > 0
    high, low = [0.5] * len(FEATURES), [0.5] * len(FEATURES)
    high[strongest], low[strongest] = 0.9, 0.1
    assert model.score(high) > 0.5 > model.score(low)


def test_fitting_labels_the_candidates_whose_chunk_holds_the_answer():
    from fake_embeddings import TrigramEmbedder

    from swrag_integrations.evaluation.datasets import Example, example_sources
    from swrag_integrations.evaluation.methods.fit_fusion import candidate_rows
    from swrag_integrations.evaluation.pipelines import EvalConfig, build_pipeline

    context = " ".join(f"Harbour town {i} traded copper and wool with its neighbours." for i in range(40))
    context += " The guild hall of harbour town 17 was built from blue granite quarried at Kestrel Point."
    example = Example("q1", "What was the guild hall of harbour town 17 built from?", context,
                      ("blue granite quarried at Kestrel Point",))
    pipe = build_pipeline(EvalConfig("default", 512), example_sources(example), embeddings=TrigramEmbedder())
    try:
        rows, labels = candidate_rows(pipe, example, split=False)
        hits = pipe.retriever.find_chunks(example.question, 60)
        assert len(rows) == len(labels) == len(hits) and all(len(r) == len(FEATURES) for r in rows)
        holding = [int("blue granite quarried at Kestrel" in context[h.start:h.end]) for h in hits]
        assert labels == holding and sum(labels) >= 1
        other = Example("q2", example.question, context, ("basalt",))  # an answer no chunk holds
        assert sum(candidate_rows(pipe, other, split=False)[1]) == 0
    finally:
        pipe.close()
