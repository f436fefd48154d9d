"""The retrieval levers of issue 29 (swrag_integrations/evaluation/peers/levers.py) on a tiny corpus."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fake_embeddings import TrigramEmbedder

from swrag_integrations.evaluation.datasets import Source
from swrag_integrations.evaluation.peers.levers import DefaultWindowsFusionPipeline, DefaultWindowsLanguagePipeline
from swrag_integrations.evaluation.langchain_pipelines import DefaultPipeline
from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.engine.fusion import rrf

EN = " ".join(f"Paragraph {i} tells of the harbour town number {i} and its trade in copper and wool." for i in range(60))
ZH = "".join(f"第{i}段讲述港口城市{i}的茶叶与丝绸贸易。" for i in range(60))


def _sources():
    return [Source("en", EN), Source("zh", ZH)]


def test_windows_fusion_interleaves_the_default_spans_and_the_keyword_windows():
    config = EvalConfig("default+windows", 512)
    lever = DefaultWindowsFusionPipeline(_sources(), config, embeddings=TrigramEmbedder(), budget=300)
    base = DefaultPipeline(_sources(), EvalConfig("default", 512), embeddings=TrigramEmbedder(), budget=300)
    try:
        question = "copper trade of harbour town 17"
        parents, windows = base.retrieve(question), lever.windows.retrieve(question)
        fused = lever.retrieve(question)
        assert fused == [span for span, _, _ in rrf([parents, windows])]
        assert set(fused[:2]) == {parents[0], windows[0]}  # equal weights: each list's best first
        context = lever.context(question, budget=300)
        texts = {"en": EN, "zh": ZH}
        assert context.n_tokens <= 300 and all(sp.text == texts[sp.source_id][sp.start:sp.end] for sp in context.spans)
        assert lever.chunks == base.chunks + lever.windows.chunks
    finally:
        lever.close()
        base.close()


def test_language_weights_favour_the_keyword_windows_for_chinese_questions_only():
    lever = DefaultWindowsLanguagePipeline(_sources(), EvalConfig("default+windows-lang", 512),
                                           embeddings=TrigramEmbedder(), budget=300)
    try:
        assert lever.weights("港口城市17的贸易") == (1.0, 2.0)
        assert lever.weights("harbour town 17") == (1.0, 0.5)
        question = "港口城市17的茶叶"
        parents, windows = DefaultPipeline.retrieve(lever, question), lever.windows.retrieve(question)
        assert lever.retrieve(question) == [span for span, _, _ in rrf([parents, windows], (1.0, 2.0))]
        assert lever.retrieve(question)[0] == windows[0]  # the doubled list's first span leads
    finally:
        lever.close()


def test_chinese_questions_use_the_chinese_weights_and_others_the_default_retriever():
    from swrag_integrations.evaluation.peers.levers import DefaultChineseWeights85Pipeline

    lever = DefaultChineseWeights85Pipeline(_sources(), EvalConfig("default+zh-bm25-0.85", 512),
                                            embeddings=TrigramEmbedder(), budget=300)
    base = DefaultPipeline(_sources(), EvalConfig("default", 512), embeddings=TrigramEmbedder(), budget=300)
    try:
        assert lever.zh_retriever.settings.weights == (0.85, 0.15)
        assert lever.retriever.settings.weights == base.retriever.settings.weights == (0.5, 0.5)
        assert lever.retriever_for("港口城市17的茶叶") is lever.zh_retriever
        assert lever.retriever_for("harbour town 17") is lever.retriever
        assert lever.retrieve("harbour town 17 copper") == base.retrieve("harbour town 17 copper")
        zh = "港口城市17的茶叶"
        assert [(a, b) for _, a, b in lever.retrieve(zh)] == [
            (d.metadata["start_index"], d.metadata["end_index"]) for d in lever.zh_retriever.retrieve_many([zh])]
    finally:
        lever.close()
        base.close()


def _towns():
    """Eight short sources sharing their words, so a question's hits spread over many of them."""
    return [Source(f"town{i}", " ".join(f"Harbour town {i} sentence {j} tells of copper, wool and the guild hall."
                                        for j in range(40))) for i in range(8)]


def test_adaptive_k_child_focuses_spread_single_hop_questions_only():
    from swrag_integrations.evaluation.peers.levers import DefaultAdaptiveK10Pipeline, DefaultAdaptiveKPipeline

    lever = DefaultAdaptiveKPipeline(_towns(), EvalConfig("default+adaptive-k15", 512),
                                     embeddings=TrigramEmbedder(), budget=300)
    one = DefaultAdaptiveK10Pipeline([Source("en", EN)], EvalConfig("default+adaptive-k10", 512),
                                     embeddings=TrigramEmbedder(), budget=300)
    base = DefaultPipeline([Source("en", EN)], EvalConfig("default", 512), embeddings=TrigramEmbedder(), budget=300)
    try:
        assert lever.retriever.settings.k_child == 30 and lever.focused_retriever.settings.k_child == 15
        assert one.focused_retriever.settings.k_child == 10
        spread = "copper and wool of the harbour town guild hall"
        assert lever.hit_spread(spread) >= lever.SPREAD
        assert lever.retriever_for(spread) is lever.focused_retriever
        focused = [(lever._ids[d.metadata["source_id"]], d.metadata["start_index"], d.metadata["end_index"])
                   for d in lever.focused_retriever.retrieve_many([spread])]
        default = [(lever._ids[d.metadata["source_id"]], d.metadata["start_index"], d.metadata["end_index"])
                   for d in lever.retriever.retrieve_many([spread])]
        assert lever.retrieve(spread) == focused != default
        # a multi-hop cue keeps the default's coverage, however spread the hits
        hop = "Which harbour town had the guild hall that traded copper and wool?"
        assert lever.hit_spread(hop) >= lever.SPREAD and lever.retriever_for(hop) is lever.retriever
        # one source (document mode): the hits cannot spread, so the lever is the default
        question = "copper trade of harbour town 17"
        assert one.hit_spread(question) == 1 and one.retriever_for(question) is one.retriever
        assert one.retrieve(question) == base.retrieve(question)
    finally:
        lever.close()
        one.close()
        base.close()


def test_choice_rule_takes_the_best_mean_margin_that_loses_no_set_significantly():
    from swrag_integrations.evaluation.peers.levers import choose_lever, margins_markdown

    def m(diff, low, high):
        return {"diff": diff, "ci_low": low, "ci_high": high, "n": 10}

    sets = ["a", "b"]
    margins = {
        "steady": {"a": m(0.01, -0.01, 0.03), "b": m(0.0, 0.0, 0.0)},          # mean +0.5
        "bold": {"a": m(0.08, 0.02, 0.12), "b": m(-0.03, -0.05, -0.01)},       # mean +2.5, but b significantly worse
        "partial": {"a": m(0.10, 0.05, 0.15)},                                 # not run on b
    }
    assert choose_lever(margins, sets) == "steady"
    assert choose_lever({"flat": {"a": m(0.0, 0.0, 0.0), "b": m(-0.01, -0.03, 0.01)}}, sets) is None
    table = margins_markdown(margins, sets)
    assert "| steady | +1.0 [-1.0, +3.0] | +0.0 [+0.0, +0.0] | +0.50 | yes |" in table
    assert "| partial | +10.0 [+5.0, +15.0] | – | – | no |" in table


def test_trim_lever_cuts_the_wide_windows_to_their_hits_best_sentences_under_the_budget():
    from swrag_integrations.engine.assemble import ContextSpan
    from swrag_integrations.engine.trim import narrow_hits, trim_windows
    from swrag_integrations.evaluation.peers.levers import DefaultTrimPipeline, DefaultTrimS1Pipeline
    from swrag_integrations.keyword.bm25 import tokenize

    sources = _towns()
    texts = {s.source_id: s.text for s in sources}
    lever = DefaultTrimPipeline(sources, EvalConfig("default+trim", 512), embeddings=TrigramEmbedder(), budget=200)
    base = DefaultPipeline(sources, EvalConfig("default", 512), embeddings=TrigramEmbedder(), budget=200)
    try:
        assert lever.wide_retriever.settings.budget_tokens == lever.FETCH * 200
        question = "copper and wool of the harbour town guild hall"
        windows = lever._spans(lever.wide_retriever.retrieve_many([question]))
        hits = [ContextSpan(lever._ids[h.source_id], h.start, h.end, texts[lever._ids[h.source_id]][h.start:h.end])
                for h in lever.wide_retriever.find_chunks(question)]
        terms = set(tokenize(question))
        narrowed = narrow_hits(hits, texts, lambda sentence: len(terms.intersection(tokenize(sentence))))
        assert any((n.start, n.end) != (h.start, h.end) for n, h in zip(narrowed, hits))  # multi-sentence hits
        expected = trim_windows([ContextSpan(src, a, b, texts[src][a:b]) for src, a, b in windows], texts,
                                narrowed, 200, sentences=0)
        ranked = lever.retrieve(question)
        assert ranked == [(sp.source_id, sp.start, sp.end) for sp in expected] != windows
        context = lever.context(question, budget=200)
        assert context.text_tokens <= 200
        assert all(sp.text == texts[sp.source_id][sp.start:sp.end] for sp in context.spans)

        def hits_in(ctx):
            return sum(any(sp.source_id == h.source_id and sp.start <= h.start and h.end <= sp.end for sp in ctx.spans)
                       for h in narrowed)

        assert hits_in(context) > hits_in(base.context(question, budget=200))
        lever.set_budget(300)
        assert lever.wide_retriever.settings.budget_tokens == lever.FETCH * 300
        assert DefaultTrimS1Pipeline.SENTENCES == 1 and lever.SENTENCES == 0
    finally:
        lever.close()
        base.close()


def test_budget_k_child_follows_the_budget():
    from swrag_integrations.evaluation.peers.levers import DefaultBudgetK50Pipeline, DefaultBudgetKPipeline

    lever = DefaultBudgetKPipeline(_towns(), EvalConfig("default+budget-k25", 512), embeddings=TrigramEmbedder(),
                                   budget=300)
    try:
        assert lever.retriever.settings.k_child == 12
        question = "copper and wool of the harbour town guild hall"
        assert len(lever.retriever.find_chunks(question)) == 12
        same = lever.make_retriever(k_child=12)
        assert lever.retrieve(question) == lever._spans(same.retrieve_many([question]))
        lever.set_budget(500)
        assert lever.retriever.settings.k_child == 20
        lever.set_budget(1500)
        assert lever.retriever.settings.k_child == 30  # never above the default's
        assert lever.k_child_for(10) == 1  # at least one hit
        assert issubclass(DefaultBudgetK50Pipeline, DefaultBudgetKPipeline) and DefaultBudgetK50Pipeline.TOKENS_PER_HIT == 50
    finally:
        lever.close()


def test_margins_over_a_baseline_of_another_run_pair_questions_per_budget(tmp_path):
    """``--baseline-run``/``--budget``: the same strategy in two run folders (e.g. two
    embeddings), paired by question within one budget."""
    import json

    from swrag_integrations.evaluation.peers.levers import lever_margins

    def write(run, recalls):
        (tmp_path / run / "qasper").mkdir(parents=True)
        rows = [{"strategy": "default", "qid": f"q{i}", "budget": b, "half": "test", "context_recall": r}
                for b, values in recalls.items() for i, r in enumerate(values)]
        (tmp_path / run / "qasper" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write("e5", {300: [1.0, 1.0, 0.5, 1.0], 500: [1.0, 1.0, 1.0, 1.0]})
    write("minilm", {300: [0.0, 1.0, 0.5, 0.0], 500: [1.0, 1.0, 1.0, 1.0], 1000: [0.0, 0.0, 0.0, 0.0]})
    at300 = lever_margins(tmp_path / "e5", ["default"], "test", datasets=["qasper"], budget=300,
                          baseline_run=tmp_path / "minilm")
    assert at300["default"]["qasper"]["diff"] == pytest.approx(0.5) and at300["default"]["qasper"]["n"] == 4
    at500 = lever_margins(tmp_path / "e5", ["default"], "test", datasets=["qasper"], budget=500,
                          baseline_run=tmp_path / "minilm")
    assert at500["default"]["qasper"]["diff"] == 0.0
    with pytest.raises(ValueError, match="several budgets"):
        lever_margins(tmp_path / "e5", ["default"], "test", datasets=["qasper"], baseline_run=tmp_path / "minilm")
