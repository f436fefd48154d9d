"""Metrics, passage splitting, span checks and budgeted assembly (hand-computed cases)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from swrag_integrations.evaluation.context import assemble_by_offset, assemble_by_text, count_tokens
from swrag_integrations.evaluation.datasets import Example, gold_sources, gold_spans, split_passages
from swrag_integrations.evaluation.metrics import (
    bootstrap_ci,
    context_recall,
    normalize_answer,
    paired_bootstrap,
    qa_f1,
    source_recall,
    span_hit,
)
from swrag_integrations.evaluation.datasets import build_corpus, example_sources, source_id


# ------------------------------------------------------------------ F1 (English)


def test_normalize_answer_drops_case_punctuation_articles():
    assert normalize_answer("The  Cat, sat on a mat!") == "cat sat on mat"
    assert normalize_answer("An apple") == "apple"
    assert normalize_answer("theatre") == "theatre"  # only whole words are articles


def test_f1_english_exact_and_partial():
    assert qa_f1("The cat sat on the mat.", ["a cat sat on a mat"]) == 1.0
    # pred {cat, sat}; gold {cat, sat, on, mat}: P = 1, R = 1/2 -> F1 = 2/3
    assert qa_f1("cat sat", ["the cat sat on the mat"]) == pytest.approx(2 / 3)
    # multisets: pred x x y, gold x y y -> common 2, P = R = 2/3
    assert qa_f1("x x y", ["x y y"]) == pytest.approx(2 / 3)
    # no overlap, empty prediction
    assert qa_f1("dog", ["cat"]) == 0.0
    assert qa_f1("", ["cat"]) == 0.0


def test_f1_is_max_over_gold_answers():
    assert qa_f1("Paris", ["London", "paris!"]) == 1.0
    # 'in paris france' vs 'paris' -> P 1/3, R 1 -> 0.5; vs 'paris france' -> P 2/3, R 1 -> 0.8
    assert qa_f1("in Paris France", ["Paris", "Paris, France"]) == pytest.approx(0.8)


# ------------------------------------------------------------------ F1 (Chinese)


def test_f1_chinese_jieba_tokens_without_punctuation():
    # jieba: 厦门大学。 -> 厦门大学 / 。 ; the full stop is dropped
    assert qa_f1("厦门大学", ["厦门大学。"], "zh") == 1.0
    # jieba: 他出生于上海市 -> 他出 / 生于 / 上海市 ; gold 上海市: P 1/3, R 1 -> 0.5
    assert qa_f1("他出生于上海市", ["上海市"], "zh") == pytest.approx(0.5)
    assert qa_f1("北京", ["上海市"], "zh") == 0.0


# -------------------------------------------------------------- context recall


def test_context_recall_counts_multiplicity():
    # gold tokens 42, 42, 43; the context holds 42 twice and no 43 -> 2/3
    assert context_recall("The answer is 42 and again 42.", ["42 42 43"]) == pytest.approx(2 / 3)
    assert context_recall("only one 42 here", ["42 42"]) == pytest.approx(1 / 2)
    assert context_recall("nothing", ["the"]) == 0.0  # answer normalises to no tokens


def test_context_recall_max_over_answers_and_chinese():
    assert context_recall("Paris is in France", ["Lyon", "Paris"]) == 1.0
    # context tokens: 会议 在 厦门大学 举办 -> gold 厦门大学 found
    assert context_recall("会议在厦门大学举办。", ["厦门大学。"], "zh") == 1.0
    assert context_recall("会议在北京举办。", ["厦门大学。"], "zh") == 0.0


# --------------------------------------------------------------- bootstrap


def test_bootstrap_ci_seeded_and_sane():
    values = [0, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    low, high = bootstrap_ci(values, seed=3)
    assert (low, high) == bootstrap_ci(values, seed=3)
    assert low <= sum(values) / len(values) <= high
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert bootstrap_ci([0.25]) == (0.25, 0.25)
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    assert bootstrap_ci([1, None, 0, None]) == bootstrap_ci([1, 0])  # None = not measured
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci(values, alpha=1.5)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci(values, n_resamples=0)


def _percentile_reference(values, n_resamples=1000, alpha=0.05, seed=0):
    """The percentile bootstrap written out: resample indices with default_rng(seed), take quantiles."""
    data = np.asarray(values, dtype=float)
    idx = np.random.default_rng(seed).integers(0, data.size, size=(n_resamples, data.size))
    means = data[idx].mean(axis=1)
    return means, float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def test_bootstrap_ci_two_values_hand_computed():
    # resampled means of {0, 1} are 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4: the
    # 2.5% and 97.5% percentiles of 1000 of them are 0 and 1
    assert bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)
    # a 10% interval (47.5% to 52.5% percentiles) lies inside the half of the resamples whose mean is 1/2
    assert bootstrap_ci([0.0, 1.0], alpha=0.9) == (0.5, 0.5)


@pytest.mark.parametrize("seed", [0, 7])
def test_bootstrap_ci_is_the_seeded_percentile_interval(seed):
    rng = random.Random(seed)
    values = [rng.random() ** 3 for _ in range(40)]
    _, low, high = _percentile_reference(values, seed=seed)
    assert bootstrap_ci(values, seed=seed) == pytest.approx((low, high), abs=1e-12)
    _, low90, high90 = _percentile_reference(values, n_resamples=500, alpha=0.1, seed=seed)
    assert bootstrap_ci(values, seed=seed, n_resamples=500, alpha=0.1) == pytest.approx((low90, high90), abs=1e-12)
    assert bootstrap_ci(values, seed=seed) != bootstrap_ci(values, seed=seed + 1)


def test_paired_bootstrap_detects_a_constant_shift():
    a = [0.9, 0.8, 1.0, 0.7, 0.95, 0.85]
    b = [x - 0.5 for x in a]
    res = paired_bootstrap(a, b)
    assert res["diff"] == pytest.approx(0.5)
    assert res["significant"] and res["ci_low"] == pytest.approx(0.5)
    assert res["p"] == 0.0
    same = paired_bootstrap(a, a)
    assert not same["significant"] and same["diff"] == 0.0
    assert same["p"] == 1.0
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 0.0])
    assert math.isnan(paired_bootstrap([], [])["diff"])


def test_paired_bootstrap_resamples_questions_together():
    # per-question differences d = a - b; the paired interval is the percentile
    # interval of resampled mean(d), and p doubles the share on the far side of 0
    rng = random.Random(5)
    a = [rng.random() for _ in range(30)]
    b = [x - 0.05 + 0.2 * (rng.random() - 0.5) for x in a]
    d = [x - y for x, y in zip(a, b)]
    means, low, high = _percentile_reference(d, seed=4)
    res = paired_bootstrap(a, b, seed=4)
    assert res["diff"] == pytest.approx(sum(d) / len(d))
    assert (res["ci_low"], res["ci_high"]) == pytest.approx((low, high), abs=1e-12)
    p = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    assert res["p"] == pytest.approx(p)
    assert res["significant"] == (low > 0 or high < 0)
    # symmetric differences around 0: nothing significant, p = 1 (both sides hold >= half)
    sym = paired_bootstrap([1.0, 0.0], [0.0, 1.0])
    assert sym["diff"] == 0.0 and not sym["significant"] and sym["p"] == 1.0


# -------------------------------------------------------------- spans, sources


def test_span_hit_exact_offsets():
    retrieved = [("d", 0, 100), ("e", 50, 80)]
    assert span_hit(retrieved, "d", [(90, 95)])
    assert span_hit(retrieved, "d", [(0, 100)])  # boundaries inclusive
    assert not span_hit(retrieved, "d", [(95, 105)])  # crosses the end
    assert not span_hit(retrieved, "e", [(40, 45)])  # right source, outside
    assert not span_hit(retrieved, "x", [(10, 20)])  # other source
    assert span_hit(retrieved, "d", [(300, 310), (10, 12)])  # any gold span


def test_source_recall_share():
    assert source_recall(["a", "b"], ["a"]) == 1.0
    assert source_recall(["a"], ["a", "b"]) == 0.5
    assert source_recall([], ["a"]) == 0.0


def test_gold_spans_from_answer_char_starts():
    ctx = "Normandy is a region in France. France is big."
    ex = Example("q", "where?", ctx, ("France", "Francia"), answer_char_starts=(24, 0))
    assert gold_spans(ex) == [(24, 30)]  # the second start does not spell its answer


# ------------------------------------------------------------ passage splitting


HOTPOT = (
    "Passage 1:\nEd Wood (film)\nEd Wood is a 1994 film.\n"
    "Passage 2:\nScott Derrickson\nScott Derrickson is an American director.\n"
    "Passage 3:\nEd Wood\nEdward Davis Wood Jr. was an American filmmaker.\n"
)


def test_split_passages_offsets_and_titles():
    passages = split_passages(HOTPOT)
    assert [p.index for p in passages] == [1, 2, 3]
    assert [p.title for p in passages] == ["Ed Wood (film)", "Scott Derrickson", "Ed Wood"]
    assert passages[1].text(HOTPOT) == "Scott Derrickson\nScott Derrickson is an American director."
    assert HOTPOT[passages[2].start : passages[2].end].endswith("filmmaker.")
    assert split_passages("no blocks here") == []


def test_passage_sources_and_gold():
    ex = Example("q", "same nationality?", HOTPOT, ("yes",), supporting_facts=(("Scott Derrickson", 0), ("Ed Wood", 0)))
    sources = example_sources(ex, split=True)
    assert len(sources) == 3
    gold = gold_sources(ex, split=True)
    titles = {s.source_id: s.title for s in sources}
    assert sorted(titles[g] for g in gold) == ["Ed Wood", "Scott Derrickson"]  # not "Ed Wood (film)"
    assert gold_sources(ex, split=False) == [source_id(HOTPOT)]
    # the same passage in another question gets the same id (corpus de-duplication)
    other = Example("q2", "?", "Passage 7:\nEd Wood\nEdward Davis Wood Jr. was an American filmmaker.", ("x",))
    corpus = build_corpus([ex, other], split=True)
    assert len(corpus) == 3


# -------------------------------------------------------------- assembly budget


TEXT = " ".join(f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(300))


@pytest.mark.parametrize("budget", [1, 7, 50, 333, 1500])
def test_assembled_context_never_exceeds_budget(budget):
    rng = random.Random(budget)
    texts = {"a": TEXT, "b": TEXT[::-1]}
    for _ in range(5):
        ranked = []
        for _ in range(30):
            src = rng.choice("ab")
            start = rng.randrange(0, len(TEXT) - 10)
            ranked.append((src, start, min(len(TEXT), start + rng.randrange(5, 2000))))
        ctx = assemble_by_offset(ranked, texts, budget)
        assert count_tokens(ctx.text) <= budget
        assert ctx.text_tokens == count_tokens(ctx.text)
        for src, a, b in ctx.offsets:  # exact source text
            assert texts[src][a:b] in ctx.text
        stock = assemble_by_text([texts[s][a:b] for s, a, b in ranked], budget, spans=ranked)
        assert count_tokens(stock.text) <= budget


def test_assembly_merges_overlaps_by_offset():
    texts = {"a": TEXT}
    ctx = assemble_by_offset([("a", 0, 200), ("a", 100, 300), ("a", 300, 350)], texts, 10_000)
    assert ctx.offsets == [("a", 0, 350)]  # overlapping and touching spans form one block
    assert ctx.text == TEXT[:350]
    # the stock assembly pays for the overlap twice
    stock = assemble_by_text([TEXT[0:200], TEXT[100:300]], 10_000, spans=[("a", 0, 200), ("a", 100, 300)])
    assert count_tokens(stock.text) > count_tokens(TEXT[:300])
