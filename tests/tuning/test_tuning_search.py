"""Successive halving: finds the known best, respects its budgets, resumes, groups evaluations."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from swrag_integrations.tuning.search import SearchState, plan_rungs, successive_halving
from swrag_integrations.tuning.space import DEFAULT_CANDIDATE, Candidate, SearchSpace

QUESTIONS = [f"q{i}" for i in range(90)]


def noisy(candidate: int, qid: str) -> float:
    """A toy objective: true mean 0.3 + candidate/100 (candidate 41 is the best), plus
    +-0.2 of deterministic per-question noise."""
    h = int(hashlib.sha1(f"{candidate}-{qid}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return 0.3 + candidate / 100 + 0.4 * (h - 0.5)


def toy(candidates, calls=None):
    def evaluate(c, qids):
        if calls is not None:
            calls.append((c, list(qids)))
        return [noisy(c, q) for q in qids]
    return evaluate


def test_plan_rungs():
    assert plan_rungs(27, 270, eta=3, min_questions=10) == [(27, 10), (9, 30), (3, 90), (1, 270)]
    assert plan_rungs(48, 240, eta=3, min_questions=20) == [(48, 27), (16, 80), (6, 240)]
    assert plan_rungs(1, 100) == [(1, 100)]
    assert plan_rungs(10, 15, min_questions=20) == [(10, 15)]  # too few questions to halve
    with pytest.raises(ValueError, match="eta"):
        plan_rungs(5, 50, eta=1)


def test_finds_the_known_best():
    cands = list(range(42))
    result = successive_halving(cands, toy(cands), QUESTIONS, key=str, eta=3, min_questions=10, seed=0,
                                progress=False)
    assert result.best == 41
    assert result.stopped == "done"
    assert [len(r.candidates) for r in result.rungs] == [42, 14, 5]
    assert result.rungs[-1].questions == 90
    # halving saved work: fewer evaluations than the full grid
    assert result.evaluations < 42 * 90 / 2


def test_respects_the_budget_in_configurations():
    calls = []
    cands = list(range(27))
    result = successive_halving(cands, toy(cands, calls), QUESTIONS, key=str, eta=3, min_questions=10,
                                progress=False)
    plan = plan_rungs(27, 90, eta=3, min_questions=10)
    # every candidate is evaluated once per rung it reaches, only on questions it lacks
    assert len(calls) == sum(n for n, _ in plan)
    expected = plan[0][0] * plan[0][1] + sum(plan[k][0] * (plan[k][1] - plan[k - 1][1]) for k in range(1, len(plan)))
    assert result.evaluations == expected


def test_respects_the_deadline():
    cands = list(range(30))

    started = []

    def slow(c, qids):
        started.append(time.monotonic())
        time.sleep(0.05)
        return [noisy(c, q) for q in qids]

    t0 = time.monotonic()
    result = successive_halving(cands, slow, QUESTIONS, key=str, eta=3, min_questions=10, deadline=0.5,
                                progress=False)
    # the deadline is checked between evaluations: at most the one running when it passed
    # ends after it, none starts later (counted, not timed, so a loaded machine cannot fail it)
    late = [b for a, b in zip(started, started[1:]) if a - t0 > 0.5]  # checked after a deadline-late start
    assert late == [], f"{len(late)} evaluations started after the deadline had passed"
    assert result.stopped == "budget"
    assert 0 < len(result.rungs[0].evaluated) < 30
    seen = result.rungs[0].evaluated
    assert result.best_key == max(seen, key=lambda k: result.mean(k, 10))  # the best of what was seen


def test_resumes_from_the_state_file(tmp_path):
    cands = list(range(20))
    full = successive_halving(cands, toy(cands), QUESTIONS, key=str, min_questions=10, seed=4, progress=False)

    class Stop(Exception):
        pass

    seen = []

    def interrupted(c, qids):
        if len(seen) == 12:
            raise Stop
        seen.append(c)
        return [noisy(c, q) for q in qids]

    path = tmp_path / "scores.jsonl"
    with pytest.raises(Stop):
        successive_halving(cands, interrupted, QUESTIONS, key=str, min_questions=10, seed=4, progress=False,
                           state=SearchState(path, {"run": 1}))
    calls = []
    state = SearchState(path, {"run": 1})
    assert state.resumed == 12 * full.rungs[0].questions
    resumed = successive_halving(cands, toy(cands, calls), QUESTIONS, key=str, min_questions=10, seed=4,
                                 progress=False, state=state)
    assert resumed.best == full.best
    assert [r.kept for r in resumed.rungs] == [r.kept for r in full.rungs]
    assert {c for c, _ in calls[:8]}.isdisjoint(seen)  # the first rung's evaluated ones were not redone
    assert resumed.evaluations == full.evaluations - 12 * full.rungs[0].questions


def test_a_cut_line_is_ignored_and_other_runs_are_refused(tmp_path):
    path = tmp_path / "scores.jsonl"
    state = SearchState(path, {"corpus": "abc"})
    state.record("k1", {"q1": 0.5, "q2": 1.0})
    with path.open("a") as fh:
        fh.write('{"key": "k1", "scores": {"q3": 0.')  # killed mid-line
    again = SearchState(path, {"corpus": "abc"})
    assert again.scores("k1") == {"q1": 0.5, "q2": 1.0}
    again.record("k1", {"q3": 0.25})
    assert SearchState(path, {"corpus": "abc"}).scores("k1")["q3"] == 0.25
    with pytest.raises(ValueError, match="corpus differ"):
        SearchState(path, {"corpus": "xyz"})
    bad = tmp_path / "other.jsonl"
    bad.write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(ValueError, match="not a tuning state file"):
        SearchState(bad, {})


def test_evaluations_are_grouped_by_index():
    space = SearchSpace.default()
    cands = space.sample(24, seed=1, include=[DEFAULT_CANDIDATE])
    calls = []

    def evaluate(c, qids):
        calls.append(c.index_key)
        return [0.5 + 0.001 * (hash(c.key + q) % 10) for q in qids]

    successive_halving(cands, evaluate, QUESTIONS, key=lambda c: c.key, group=lambda c: c.index_key,
                       min_questions=10, progress=False)
    first = calls[:24]
    # within a rung each index configuration appears as one contiguous run
    runs = [k for i, k in enumerate(first) if i == 0 or first[i - 1] != k]
    assert len(runs) == len(set(first))
    # the next rung visits the groups in reverse order, so it opens with indexes built last
    second = calls[24:32]
    order0 = list(dict.fromkeys(first))
    order1 = list(dict.fromkeys(second))
    assert order1 == [k for k in reversed(order0) if k in order1]


def test_candidates_and_space():
    d = Candidate.make()
    assert d == DEFAULT_CANDIDATE
    assert d.index_kwargs == {"chunk_size": 50, "child": "sentence", "strategy": "chunks", "window_size": 6, "step": 3,
                              "unit": "token"}
    assert d.retriever_kwargs["k_child"] == 30 and d.retriever_kwargs["weights"] == (0.5, 0.5)
    c = Candidate.make({"child": "sentence", "strategy": "DDS"}, {"k_child": 10, "weights": [0.75, 0.25]})
    assert c.index_kwargs["window_size"] == 300 and c.index_kwargs["step"] == 3  # the index's own resolution
    assert Candidate.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    with pytest.raises(ValueError, match="unknown index parameter"):
        Candidate.make({"chunk": 3})
    with pytest.raises(ValueError, match="k_child"):
        Candidate.make(retriever={"k_child": 0})
    with pytest.raises(ValueError, match="weights"):
        Candidate.make(retriever={"weights": (0, 0)})
    space = SearchSpace.default()
    assert space.size() == 16 * 54  # 16 index shapes x (3 k_child x 2 searches x 3 weights x 3 expansions)
    sample = space.sample(48, seed=0, include=[DEFAULT_CANDIDATE])
    assert sample == space.sample(48, seed=0, include=[DEFAULT_CANDIDATE])
    assert sample[0] == DEFAULT_CANDIDATE and len(set(sample)) == 48
    assert len({c.index_key for c in sample}) == 16  # every index shape is in the first rung
    assert sample != space.sample(48, seed=1, include=[DEFAULT_CANDIDATE])
    small = SearchSpace.small()
    assert len(small.sample(10_000)) == small.size()
    assert SearchSpace.from_dict(json.loads(json.dumps(space.to_dict()))).candidates() == space.candidates()
