"""The budget curve of issue 44: one run, every budget; per-budget records, report, plot and peer tuning.

Tiny synthetic data; BM25-only strategies for the runs (no model), the trigram fake embedder
for the default's budget planner, hand-made records for the report and the tuning choices.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_embeddings import TrigramEmbedder
from script_module import script_module

from swrag_integrations.evaluation import run_eval
from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.cli import eval as cli_module
from swrag_integrations.evaluation import runner as runner_module
from swrag_integrations.evaluation.datasets import load_examples
from swrag_integrations.evaluation.peers.peer_tuning import (
    PEER_GRIDS,
    load_peer_config,
    peer_strategy_name,
    tune_peers,
    write_choices,
)
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
    with pytest.raises(SystemExit):  # one or the other, never silently one of them
        cli_module.main(["--data", str(path), "--budget", "700", "--budgets", "300,500", "--out", str(tmp_path / "o")])
    assert "not allowed with argument --budget" in capsys.readouterr().err


# ---------------------------------------------------------------- the report and the plot


def _rec(strategy, qid, budget, recall):
    return {"strategy": strategy, "qid": qid, "budget": budget, "context_recall": recall, "hit": float(recall == 1.0),
            "index_id": "i1", "chunks": 10, "index_bytes": 1000, "retrieve_seconds": 0.01, "half": "test"}


def _write_run(out: Path) -> None:
    folder = out / "qasper"
    folder.mkdir(parents=True)
    rows = []
    for budget in (300, 500):
        for i in range(20):
            rows.append(_rec("default", f"q{i}", budget, 1.0 if budget == 500 or i % 2 else 0.5))
            rows.append(_rec("langchain-ensemble-tuned", f"q{i}", budget, 0.5))
    folder.joinpath("records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_budget_report_table_pairs_and_plot(tmp_path, capsys):
    from swrag_integrations.evaluation.peers.peers import main as peers_main
    from swrag_integrations.evaluation.peers.peers import report

    out = tmp_path / "run"
    _write_run(out)
    code = peers_main(["--data-dir", str(tmp_path), "--out", str(out), "--datasets", "qasper", "--report-only",
                       "--half", "test", "--budgets", "300,500",
                       "--strategies", "default,langchain-ensemble-tuned"])
    assert code == 0, capsys.readouterr().err
    text = (out / "budgets.md").read_text()
    assert "| qasper (document) | ≤ 300 | default | 20 | 75.0 [" in text
    assert "| qasper (document) | ≤ 500 | default | 20 | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] |" in text
    assert "| qasper (document) | ≤ 500 | langchain-ensemble-tuned | 20 | 50.0 [50.0, 50.0] | 0.0 [0.0, 0.0] |" in text
    # default minus the tuned peer at 500: +50 recall and +100 hit on every question
    assert "| qasper | ≤ 500 | langchain-ensemble-tuned | 20 | +50.0 [+50.0, +50.0] | 0.000 | +100.0 [+100.0, +100.0] |" in text
    assert "| qasper | ≤ 300 | langchain-ensemble-tuned | 20 | +25.0 [" in text
    # benchmarks/reports.py reads one figure per (set, budget, pipeline, metric): the budget is part of the row name
    with script_module(Path(__file__).resolve().parents[2] / "benchmarks" / "reports.py", "swrag_reports") as reports:
        figures = reports.markdown_figures(text)
    assert figures[next(k for k in figures if "≤ 500 / default |" in k and k.endswith("| context recall"))].value == 100.0
    assert figures[next(k for k in figures if "≤ 300 / default |" in k and k.endswith("| context recall"))].value == 75.0
    png = out / "budgets.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the one-budget report refuses a folder of several budgets instead of mixing them
    with pytest.raises(ValueError, match="several budgets.*--budgets"):
        report(out, ["default"], half="test")


# ---------------------------------------------------------------- per-budget peer tuning


def test_peer_tuning_chooses_per_budget(tmp_path, monkeypatch):
    (tmp_path / "qasper.jsonl").write_text("")
    peer = "langchain-parent"
    small, large = PEER_GRIDS[peer][1], PEER_GRIDS[peer][-1]
    calls = []

    def fake_eval(cmd):
        """Write the tuning records the grid would give: ``small`` wins at 300, ``large`` at 1000."""
        calls.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        rows = []
        for options in PEER_GRIDS[peer]:
            name = peer_strategy_name(peer, options)
            for budget in (300, 1000):
                best = (options == small and budget == 300) or (options == large and budget == 1000)
                for i in range(4):
                    rows.append({"strategy": name, "qid": f"q{i}", "budget": budget, "half": "tune",
                                 "context_recall": 0.9 if best else 0.4, "index_id": f"d{i}", "index_bytes": 10})
        (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return 0

    monkeypatch.setattr(cli_module, "main", fake_eval)
    results = tune_peers(tmp_path, tmp_path / "out", ["qasper"], [peer], budgets=[300, 1000])
    assert calls and calls[0][calls[0].index("--budgets") + 1] == "300,1000"  # one run for every budget
    by_budget = results["qasper"][peer]["by_budget"]
    assert by_budget["300"]["chosen"]["options"] == small and by_budget["1000"]["chosen"]["options"] == large
    assert by_budget["300"]["chosen"]["n"] == 4 and len(by_budget["300"]["candidates"]) == len(PEER_GRIDS[peer])
    path = tmp_path / "peers_tuned.json"
    doc = write_choices(path, results)
    assert doc["budgets"] == [300, 1000]
    assert load_peer_config(path, 300) == {"qasper": {peer: small}}
    assert load_peer_config(path, 1000) == {"qasper": {peer: large}}
    assert load_peer_config(path, 500) == {}  # not tuned for 500: its peers run untuned
    assert load_peer_config(path) == {}  # no choice at the file's one budget
    # a later run for another budget joins the file without dropping the others
    write_choices(path, {"qasper": {peer: {"by_budget": {"500": by_budget["300"]}}}})
    assert json.loads(path.read_text())["budgets"] == [300, 500, 1000]
    assert load_peer_config(path, 1000) == {"qasper": {peer: large}}
    assert load_peer_config(path, 500) == {"qasper": {peer: small}}


def test_peers_run_each_budget_with_its_own_tuned_configuration(tmp_path):
    from swrag_integrations.evaluation.peers.peers import _budget_calls

    tuned = {300: {"langchain-parent": {"child_size": 64}}, 500: {"langchain-parent": {"child_size": 64}},
             1000: {"langchain-parent": {"child_size": 128}}}
    calls = _budget_calls(["default", "langchain-parent"], tuned, [300, 500, 1000, 1500], tmp_path)
    assert (["default", "langchain-parent"], [1500]) not in calls
    assert (["default"], [300, 500, 1000, 1500]) in calls  # one index for the whole curve
    assert (["langchain-parent"], [1500]) in calls  # no choice at 1500: the plain anchor
    assert (["langchain-parent-tuned"], [300, 500]) in calls and (["langchain-parent-tuned"], [1000]) in calls
    record = json.loads((tmp_path / "peer_config.json").read_text())
    assert record == {"langchain-parent@300": {"child_size": 64}, "langchain-parent@500": {"child_size": 64},
                      "langchain-parent@1000": {"child_size": 128}}
    with pytest.raises(ValueError, match="other peer configurations"):
        _budget_calls(["langchain-parent"], {300: {"langchain-parent": {"child_size": 128}}}, [300], tmp_path)


def test_a_tuned_configuration_keeps_its_retriever_options_at_every_budget(tmp_path):
    """``swrag eval --config FILE --budgets ...``: the configuration's retriever is rebuilt for each
    budget with the file's options (not replaced by the default retriever)."""
    from langchain_core.embeddings.fake import DeterministicFakeEmbedding

    from swrag_integrations.evaluation.datasets import Source
    from swrag_integrations.evaluation.pipelines import build_pipeline
    from swrag_integrations.tuning import TunedConfig
    from swrag_integrations.tuning.evaluation import register_config
    from swrag_integrations.tuning.space import Candidate

    path = TunedConfig.from_candidate(Candidate.make({"child": "fixed"}, {"k_child": 7}),
                                      budget_tokens=999).save(tmp_path / "budget-curve.json")
    name = register_config(path)
    text = " ".join(f"Paragraph {i} talks about roads and weather in the valley." for i in range(40))
    pipe = build_pipeline(EvalConfig(name, 512), [Source("s", text)], embeddings=DeterministicFakeEmbedding(size=16),
                          budget=300)
    try:
        assert (pipe.retriever.k_child, pipe.retriever.budget_tokens) == (7, 300)
        pipe.set_budget(120)
        assert (pipe.retriever.k_child, pipe.retriever.budget_tokens) == (7, 120)
    finally:
        pipe.close()
