"""The budget curve of issue 44: one run, every budget, one index per document.

Tiny synthetic data; BM25-only strategies for the runs (no model), the trigram fake embedder
for the default's budget planner.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_embeddings import TrigramEmbedder

from swrag_integrations.evaluation import EvalConfig, run_eval
from swrag_integrations.evaluation import cli as cli_module
from swrag_integrations.evaluation import runner as runner_module
from swrag_integrations.evaluation.datasets import load_examples
from swrag_integrations.evaluation.pipelines import SpanBM25Pipeline

BUDGETS = [40, 90, 300]


def _rows(n: int = 12) -> list[dict]:
    rows = []
    for i in range(n):
        doc = (f"Town {i % 3} has a harbour and a market. " * 15 + f"The keeper of gate {i} is named Keeper{i}. "
               + "Rain fell on the hills all week. " * 15)
        rows.append({"input": f"Who keeps gate {i}?", "context": doc, "answers": [f"Keeper{i}"], "language": "en",
                     "_id": f"id-{i}"})
    return rows


def _data(tmp_path: Path, name: str = "d", n: int = 12) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(n)), encoding="utf-8")
    return path


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]


def test_one_run_gives_one_record_set_per_budget_within_each_budget(tmp_path, monkeypatch):
    path = _data(tmp_path)
    builds, ranks = [], []
    real_build, real_rank = runner_module.build_pipeline, SpanBM25Pipeline.rank
    monkeypatch.setattr(runner_module, "build_pipeline", lambda *a, **k: builds.append(1) or real_build(*a, **k))
    monkeypatch.setattr(SpanBM25Pipeline, "rank", lambda self, q: ranks.append(q) or real_rank(self, q))
    out = tmp_path / "o"
    rows = run_eval([path], [EvalConfig("rcs", 32)], out, budgets=BUDGETS, retrieval_only=True, progress=False,
                    reports=False)
    records = _records(out)
    questions = load_examples(path)
    assert sorted({r["budget"] for r in records}) == BUDGETS
    for budget in BUDGETS:
        mine = [r for r in records if r["budget"] == budget]
        assert sorted(r["qid"] for r in mine) == sorted(e.qid for e in questions)  # one record per question
        assert all(0 < r["context_tokens"] <= budget for r in mine)
    # larger budgets hold more of the document
    mean = {b: sum(r["context_tokens"] for r in records if r["budget"] == b) / len(questions) for b in BUDGETS}
    assert mean[40] < mean[90] < mean[300]
    assert sorted(r["budget"] for r in rows) == BUDGETS  # one summary row per budget
    # the curve costs one index per document and one ranking per question, not one per budget
    assert len(builds) == len({e.context for e in questions})
    assert len(ranks) == len(questions)
    # a resumed run computes nothing new
    run_eval([path], [EvalConfig("rcs", 32)], out, budgets=BUDGETS, retrieval_only=True, progress=False, reports=False)
    assert len(_records(out)) == len(records)


def test_budget_dependent_ranking_rebuilds_the_retriever_on_the_same_index(tmp_path, monkeypatch):
    """The default's retriever plans parents for its budget: each budget gets its own retriever
    (so contexts stay within it), over one index per document."""
    path = _data(tmp_path, n=4)
    builds = []
    real_build = runner_module.build_pipeline
    monkeypatch.setattr(runner_module, "build_pipeline", lambda *a, **k: builds.append(1) or real_build(*a, **k))
    out = tmp_path / "o"
    run_eval([path], [EvalConfig("default", 512)], out, budgets=[60, 400], retrieval_only=True, progress=False,
             reports=False, embeddings=TrigramEmbedder(dim=32))
    records = _records(out)
    assert len(builds) == 4 and len(records) == 8
    assert all(r["context_tokens"] <= r["budget"] for r in records)
    assert max(r["context_tokens"] for r in records if r["budget"] == 60) <= 60
    assert max(r["context_tokens"] for r in records if r["budget"] == 400) > 60


def test_budgets_are_checked(tmp_path, capsys):
    path = _data(tmp_path, n=2)
    with pytest.raises(ValueError, match="given twice"):
        run_eval([path], [EvalConfig("rcs", 32)], tmp_path / "o", budgets=[50, 50], retrieval_only=True,
                 progress=False)
    with pytest.raises(ValueError, match="positive integers"):
        run_eval([path], [EvalConfig("rcs", 32)], tmp_path / "o", budgets=[0], retrieval_only=True, progress=False)
    with pytest.raises(SystemExit):
        cli_module.main(["--data", str(path), "--budgets", "300,x", "--out", str(tmp_path / "o")])
    assert "--budgets" in capsys.readouterr().err
