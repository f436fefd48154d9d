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
                                        embeddings=TrigramEmbedder(), budget=1500)
    try:
        question = "copper trade of harbour town 2"
        pool = pipe.retriever.index.search_children(question, POOL_FACTOR * pipe.retriever.k_child)
        assert len(pool) > pipe.retriever.k_child  # a wider pool than the default's stage 1
        hits = rerank(pool, pipe.retriever.k_child, load_model())
        want = [(pipe._ids.get(s.source_id, s.source_id), s.start, s.end)
                for s in spans_for([hits], pipe.retriever.index, budget_tokens=1500)]
        got = pipe.retrieve(question)
        assert got == want and got  # learned at 1500 too, where the default ("auto") is RRF
        rrf = pipe.retriever.index.search_children(question, pipe.retriever.k_child)
        assert got != [(pipe._ids.get(s.source_id, s.source_id), s.start, s.end)
                       for s in spans_for([rrf], pipe.retriever.index, budget_tokens=1500)]
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


# --- the learned fusion in the default retriever (fusion="auto"/"rrf"/"learned") ---

QUESTIONS = ("copper trade of harbour town 2", "guild hall bell of town 1")


@pytest.fixture(scope="module")
def towns_index(tmp_path_factory):
    """Four towns' texts over a trigram embedding: RRF and the model order their hits differently."""
    import random

    from fake_embeddings import TrigramEmbedder

    from swrag_integrations.langchain.index import SlidingWindowIndex

    rng = random.Random(3)
    words = "copper wool guild hall harbour ships lighthouse grain salt market river bridge tower bell".split()
    texts = [" ".join(f"Town {i} sentence {j}: the {rng.choice(words)} and the {rng.choice(words)} of town {i} "
                      "were known." for j in range(40)) for i in range(4)]
    idx = SlidingWindowIndex(tmp_path_factory.mktemp("towns") / "idx", embedding=TrigramEmbedder(),
                             show_progress=False)
    idx.add_texts(texts, metadatas=[{"source": f"t{i}"} for i in range(4)])
    yield idx
    idx.engine.store.close()


def _keys(hits) -> list[tuple[str, int]]:
    return [(h.source_id, h.chunk_index) for h in hits]


def _spans(items) -> list[tuple[str, int, int]]:
    """(source, start, end) of spans, Documents or LlamaIndex nodes."""
    out = []
    for item in items:
        if hasattr(item, "start") and hasattr(item, "source_id"):  # a ContextSpan
            out.append((item.source_id, item.start, item.end))
            continue
        meta = item.node.metadata if hasattr(item, "node") else item.metadata
        out.append((meta["source_id"], int(meta["start_index"]), int(meta["end_index"])))
    return out


def _learned(engine, question: str, k_child: int = 30):
    """The model's re-ranking of the wider RRF pool, computed here from the engine's own search."""
    from swrag_integrations.engine.learned_fusion import POOL_FACTOR

    return rerank(engine.search_children(question, POOL_FACTOR * k_child), k_child, load_model())


def _expected(engine, hits, budget: int, k: int | None = None):
    from swrag_integrations.engine.parents import spans_for

    return _spans(spans_for([hits], engine, budget_tokens=budget, k=k))


@pytest.mark.parametrize("question", QUESTIONS)
def test_auto_fusion_at_500_ranks_stage_one_by_the_model(towns_index, question):
    engine = towns_index.engine
    want = _learned(engine, question)
    assert _keys(want) != _keys(engine.search_children(question, 30))  # the two orders differ here
    default = towns_index.as_retriever(budget_tokens=500)  # the default stays RRF at every budget
    assert default.settings.fusion == "rrf"
    assert _spans(default.invoke(question)) == _expected(engine, engine.search_children(question, 30), 500)
    retriever = towns_index.as_retriever(budget_tokens=500, fusion="auto")
    assert _keys(retriever.find_chunks(question)) == _keys(want)
    got = _spans(retriever.invoke(question))
    assert got == _expected(engine, want, 500) and got
    assert got != _expected(engine, engine.search_children(question, 30), 500)


@pytest.mark.parametrize("question", QUESTIONS)
def test_default_retriever_at_1500_is_rrf_as_before(towns_index, question):
    engine = towns_index.engine
    rrf = _expected(engine, engine.search_children(question, 30), 1500)
    assert _spans(towns_index.as_retriever().invoke(question)) == rrf
    assert _spans(towns_index.as_retriever(fusion="rrf").invoke(question)) == rrf
    assert _spans(towns_index.as_retriever(fusion="learned").invoke(question)) == _expected(
        engine, _learned(engine, question), 1500) != rrf


def test_call_time_budget_and_fusion_switch_the_fusion(towns_index):
    engine = towns_index.engine
    question = QUESTIONS[0]
    retriever = towns_index.as_retriever(fusion="auto")  # 1500 tokens: RRF
    learned, rrf = _learned(engine, question), engine.search_children(question, 30)
    assert _spans(retriever.invoke(question, budget_tokens=500)) == _expected(engine, learned, 500)
    assert _spans(retriever.invoke(question, budget_tokens=300, fusion="rrf")) == _expected(engine, rrf, 300)
    assert _spans(retriever.invoke(question, fusion="learned")) == _expected(engine, learned, 1500)
    assert _spans(retriever.retrieve_many([question], budget_tokens=300)) == _expected(engine, learned, 300)
    with pytest.raises(ValueError, match="fusion must be one of"):
        retriever.invoke(question, fusion="bogus")


def test_fusion_rrf_at_300_is_todays_rrf(towns_index):
    engine = towns_index.engine
    for question in QUESTIONS:
        got = _spans(towns_index.as_retriever(budget_tokens=300, fusion="rrf").invoke(question))
        assert got == _expected(engine, engine.search_children(question, 30), 300)


def test_learned_fusion_needs_a_hybrid_search(towns_index):
    from ci_switch import importorskip

    from swrag_integrations.engine.learned_fusion import fusion_for
    from swrag_integrations.engine.settings import RetrieverSettings

    for weights in ((1.0, 0.0), (0.0, 1.0)):
        with pytest.raises(ValueError, match="fusion='learned' needs a hybrid search"):
            RetrieverSettings(fusion="learned", weights=weights)
        with pytest.raises(ValueError, match="fusion='learned' needs a hybrid search"):
            towns_index.as_retriever(fusion="learned", weights=weights)
        with pytest.raises(ValueError, match="fusion='learned' needs a hybrid search"):
            towns_index.as_retriever(weights=weights).invoke(QUESTIONS[0], fusion="learned")
        # "auto" on a BM25-only or dense-only search stays RRF at any budget
        assert fusion_for(RetrieverSettings(weights=weights, budget_tokens=300)) == "rrf"
    assert fusion_for(RetrieverSettings(budget_tokens=500, fusion="auto")) == "learned"
    assert fusion_for(RetrieverSettings(budget_tokens=501, fusion="auto")) == "rrf"
    assert fusion_for(RetrieverSettings(budget_tokens=None, fusion="auto")) == "rrf"
    assert fusion_for(RetrieverSettings(budget_tokens=300)) == "rrf"  # the default
    importorskip("llama_index.core")
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    with pytest.raises(ValueError, match="fusion='learned' needs a hybrid search"):
        WindowedLlamaIndexRetriever(towns_index, fusion="learned", weights=(1.0, 0.0))


def test_llama_index_retriever_at_500_uses_the_learned_fusion(towns_index):
    from ci_switch import importorskip

    importorskip("llama_index.core")
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    engine = towns_index.engine
    question = QUESTIONS[1]
    learned = _learned(engine, question)
    got = _spans(WindowedLlamaIndexRetriever(towns_index, budget_tokens=500, fusion="auto").retrieve(question))
    assert got == _expected(engine, learned, 500) and got
    capped = WindowedLlamaIndexRetriever(towns_index, similarity_top_k=2, budget_tokens=500,
                                         fusion="learned").retrieve(question)
    assert _spans(capped) == _expected(engine, learned, 500, k=2) and len(capped) == 2
    rrf = WindowedLlamaIndexRetriever(towns_index, budget_tokens=500).retrieve(question)  # the default
    assert _spans(rrf) == _expected(engine, engine.search_children(question, 30), 500) != got


def test_trace_shows_the_hits_the_retriever_used(towns_index):
    question = QUESTIONS[0]
    retriever = towns_index.as_retriever(budget_tokens=500, fusion="auto")
    tr = retriever.trace(question)
    learned = _learned(towns_index.engine, question)
    assert _keys(tr.hits) == _keys(learned)
    assert [h.rank for h in tr.hits] == list(range(1, len(learned) + 1))
    assert all("fusion_score" in h.metadata for h in tr.hits)
    assert _spans(tr.spans) == _spans(retriever.invoke(question))  # explain() shows what invoke() returns
    assert _keys(retriever.trace(question, budget_tokens=1500).hits) == _keys(
        towns_index.engine.search_children(question, 30))


def test_fusion_is_a_setting_every_face_checks(towns_index):
    from ci_switch import importorskip

    from swrag_integrations.engine.settings import DEFAULT_SETTINGS, RetrieverSettings

    assert DEFAULT_SETTINGS.fusion == "rrf" and towns_index.as_retriever().settings.fusion == "rrf"
    with pytest.raises(ValueError, match="fusion must be one of"):
        RetrieverSettings(fusion="bogus")
    with pytest.raises(ValueError, match="fusion must be one of"):
        towns_index.as_retriever(fusion="bogus")
    with pytest.raises(TypeError, match="unexpected keyword"):
        towns_index.as_retriever().invoke(QUESTIONS[0], fusion_mode="rrf")
    importorskip("llama_index.core")
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    with pytest.raises(ValueError, match="fusion must be one of"):
        WindowedLlamaIndexRetriever(towns_index, fusion="bogus")
    assert WindowedLlamaIndexRetriever(towns_index, fusion="auto").settings.fusion == "auto"


def test_default_rrf_strategy_is_registered_with_rrf():
    from swrag_integrations.evaluation.methods.learned_fusion import DefaultLearnedFusionPipeline, DefaultRRFPipeline
    from swrag_integrations.evaluation.pipelines import PIPELINES

    assert PIPELINES["default+rrf"].builder is DefaultRRFPipeline
    assert DefaultRRFPipeline.RETRIEVER_OPTIONS == {"fusion": "rrf"}
    assert DefaultLearnedFusionPipeline.RETRIEVER_OPTIONS == {"fusion": "learned"}


class _PlainIndex:
    """A `ChunkIndex`-like search whose hits carry no ranker metadata (as a LlamaIndex
    retriever's nodes): it records the ``k`` it was asked for."""

    encoding_name = "cl100k_base"

    def __init__(self) -> None:
        self.asked: list[int] = []

    def search_children(self, query, k, **kwargs):
        self.asked.append(k)
        return [ChildHit("s", i, 1.0 / (60 + i), i + 1, i, i, i * 10, i * 10 + 10, i * 10, i * 10 + 10, {})
                for i in range(k)]


def test_first_stage_without_ranker_metadata():
    from swrag_integrations.engine.learned_fusion import first_stage
    from swrag_integrations.engine.settings import RetrieverSettings

    plain = _PlainIndex()
    hits = first_stage(plain, "q", RetrieverSettings(budget_tokens=300))  # "auto": RRF, no wider pool
    assert plain.asked == [30] and [h.chunk_index for h in hits] == list(range(30))
    with pytest.raises(ValueError, match="fusion='learned' needs hits with BM25/dense ranker metadata"):
        first_stage(plain, "q", RetrieverSettings(fusion="learned"))
