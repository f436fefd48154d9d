"""The evaluation grid end to end on tiny synthetic data (fake LLM, no model download)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.embeddings.fake import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM

from swrag_integrations.cli.eval import build_parser
from swrag_integrations.evaluation import main, make_grid, run_eval
from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.evaluation.runner import parse_steps
from swrag_integrations.evaluation import runner as runner_module

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUIRED = {
    "dataset", "strategy", "window", "step", "unit", "multi_query", "n", "context_recall", "hit", "f1",
    "ci_low", "ci_high", "seconds", "mode", "budget", "k", "source_recall", "span_hit", "chunks", "index_bytes",
}


def _filler(topic: str, n: int) -> str:
    return " ".join(f"The {topic} report paragraph {i} lists ordinary facts about {topic} weather and roads." for i in range(n))


def _rows():
    doc_en = _filler("harbour", 40) + " The secret code of the harbour is 4711 and it never changes. " + _filler("market", 40)
    doc_en2 = _filler("castle", 30) + " The castle was built by Queen Matilda in 1120. " + _filler("garden", 30)
    doc_zh = "这是一个关于城市的报告。" * 30 + "全国会议在厦门大学举办。" + "天气很好，道路通畅。" * 30
    start = doc_en.index("4711")
    return [
        {"input": "What is the secret code of the harbour?", "context": doc_en, "answers": ["4711"], "language": "en",
         "_id": "q1", "answer_char_starts": [start]},
        {"input": "Does the secret code of the harbour change?", "context": doc_en, "answers": ["never changes"],
         "language": "en", "_id": "q2"},
        {"input": "Who built the castle?", "context": doc_en2, "answers": ["Queen Matilda"], "language": "en", "_id": "q3"},
        {"input": "全国会议在哪所大学举办？", "context": doc_zh, "answers": ["厦门大学。"], "language": "zh", "_id": "q4"},
    ]


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in _rows()) + "\n", encoding="utf-8")
    return path


GRID = [
    EvalConfig("dds", 64, "2"),
    EvalConfig("ffs", 64, "1/2"),
    EvalConfig("dfs", 64, "1/4"),
    EvalConfig("rcs", 64),
]


def test_make_grid_defaults_and_steps():
    grid = make_grid(["ffs", "dds", "rcs"], [512, 1024])
    assert len(grid) == 2 * 3 + 2 * 3 + 2
    assert {c.step for c in grid if c.strategy == "ffs"} == {"1/2", "1/4", "1/8"}
    assert {c.step for c in grid if c.strategy == "dds"} == {"2", "3", "5"}
    assert EvalConfig("ffs", 1024, "1/4").step_units == 256
    grid = make_grid(["ffs", "dds"], [512], "1/2,3", multi_query=(False, True))
    assert {(c.strategy, c.step, c.multi_query) for c in grid} == {
        ("ffs", "1/2", False), ("ffs", "1/2", True), ("dds", "3", False), ("dds", "3", True)}
    assert parse_steps("1/2, 2,=100") == ["1/2", "2", "=100"]
    with pytest.raises(ValueError):
        parse_steps("3/2")
    with pytest.raises(ValueError):
        make_grid(["nope"], [512])


def test_grid_with_fake_llm(tmp_path, data):
    llm = FakeListLLM(responses=["4711"])
    rows = run_eval([data], GRID, tmp_path / "out", budget=120, llm=llm, progress=False, n_resamples=200)
    assert len(rows) == len(GRID)
    for row in rows:
        assert REQUIRED <= set(row)
        assert row["n"] == 4 and row["mode"] == "document" and row["budget"] == 120
        # the fake model always says 4711: F1 1 on q1, 0 elsewhere
        assert row["f1"] == pytest.approx(0.25)
        assert row["ci_metric"] == "f1" and row["ci_low"] <= row["f1"] <= row["ci_high"]
        assert 0.0 <= row["context_recall"] <= 1.0 and row["span_hit"] is not None
    records = json.loads((tmp_path / "out" / "records.json").read_text())
    assert len(records) == 4 * len(GRID)
    assert all(r["context_tokens"] <= 120 for r in records)
    assert all(r["prediction"] == "4711" for r in records)
    q1 = [r for r in records if r["qid"] == "q1"]
    assert all(r["context_recall"] == 1.0 and r["span_hit"] == 1.0 for r in q1)  # BM25 finds the code
    out = tmp_path / "out"
    for name in ("results.json", "results.csv", "records.csv", "records.jsonl", "table.md", "significance.md"):
        assert (out / name).is_file(), name
    assert "| strategy | window | step | tiny |" in (out / "table.md").read_text()


def test_retrieval_only_cli(tmp_path, data, capsys):
    out = tmp_path / "cli"
    code = main([
        "--data", str(data), "--strategies", "dds,ffs,rcs", "--windows", "64,128", "--steps", "1/2,3",
        "--retrieval-only", "--budget", "200", "--limit", "3", "--no-progress", "--out", str(out),
    ])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    assert len(rows) == 2 * 3
    for row in rows:
        assert REQUIRED <= set(row)
        assert row["f1"] is None and row["n"] == 3 and row["ci_metric"] == "context_recall"
        assert row["ci_low"] <= row["context_recall"] <= row["ci_high"]
    assert {(r["strategy"], r["step"]) for r in rows} == {("dds", "3"), ("ffs", "1/2"), ("rcs", None)}
    assert "results.json" in capsys.readouterr().out
    # plots: valid PNGs
    import matplotlib.image as mpimg

    png = out / "heatmap.png"
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert mpimg.imread(str(png)).shape[0] > 100


def test_cli_usage_errors(tmp_path, data, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", str(data), "--out", str(tmp_path), "--strategies", "bogus"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", str(data), "--out", str(tmp_path), "--steps", "1/0"])
    assert main(["--data", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path), "--retrieval-only"]) == 3


def _comparable(rows):
    drop = {"seconds"}
    return sorted(({k: v for k, v in r.items() if k not in drop} for r in rows), key=lambda r: json.dumps(r, sort_keys=True))


def test_resume_after_interrupt(tmp_path, data, monkeypatch):
    out = tmp_path / "resume"
    run_eval([data], GRID, out, retrieval_only=True, progress=False, max_questions=5, reports=False)
    lines = (out / "records.jsonl").read_text().splitlines()
    assert len(lines) == 5
    # a kill in the middle of a write leaves half a line behind
    with (out / "records.jsonl").open("a") as fh:
        fh.write('{"key": "half a rec')
    calls = []
    original = runner_module._question_record

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(runner_module, "_question_record", counting)
    rows = run_eval([data], GRID, out, retrieval_only=True, progress=False, n_resamples=200)
    assert len(calls) == 4 * len(GRID) - 5  # nothing recomputed
    again = run_eval([data], GRID, out, retrieval_only=True, progress=False, n_resamples=200)
    assert len(calls) == 4 * len(GRID) - 5  # a finished run recomputes nothing
    monkeypatch.setattr(runner_module, "_question_record", original)
    fresh = run_eval([data], GRID, tmp_path / "fresh", retrieval_only=True, progress=False, n_resamples=200)
    assert _comparable(rows) == _comparable(fresh) == _comparable(again)


def test_multi_query_and_plots(tmp_path, data):
    import matplotlib.image as mpimg

    llm = FakeListLLM(responses=["1. harbour secret code number\n2. castle builder name"])
    grid = make_grid(["dds", "rcs"], [64], ["2"], multi_query=(False, True))
    out = tmp_path / "mq"
    rows = run_eval([data], grid, out, retrieval_only=True, llm=llm, progress=False, budget=150, n_resamples=100)
    assert {r["multi_query"] for r in rows} == {False, True}
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    mq = [r for r in records if r["multi_query"]]
    assert mq and all(r["queries"] == ["harbour secret code number", "castle builder name"] for r in mq)
    assert (out / "cache" / "queries.jsonl").is_file()  # variants generated once per question
    assert len((out / "cache" / "queries.jsonl").read_text().splitlines()) == 4
    for name in ("heatmap.png", "multi_query.png"):
        path = out / name
        assert path.read_bytes()[:8] == PNG_MAGIC, name
        assert mpimg.imread(str(path)).ndim == 3


def test_stock_and_parent_pipelines_with_fake_embeddings(tmp_path, data):
    emb = DeterministicFakeEmbedding(size=16)
    grid = [EvalConfig("langchain-stock", 64), EvalConfig("parent", 64, "3")]
    rows = run_eval([data], grid, tmp_path / "lc", retrieval_only=True, embeddings=emb, progress=False,
                    budget=150, n_resamples=100)
    assert {r["strategy"] for r in rows} == {"langchain-stock", "parent"}
    records = json.loads((tmp_path / "lc" / "records.json").read_text())
    assert all(r["context_tokens"] <= 150 for r in records)
    texts = {r["input"]: r["context"] for r in _rows()}
    for rec in records:  # spans are exact offsets into the question's document
        doc = texts[rec["question"]]
        assert rec["spans"] and all(0 <= a < b <= len(doc) for _, a, b in rec["spans"])
    for row in rows:
        assert row["chunks"] > 0 and row["index_bytes"] > 0
