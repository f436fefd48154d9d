"""Tuning/test halves of the dev sets: the split rule, corpus mode, the CLI flag, and refusing to mix halves.

Tiny synthetic data, BM25-only strategies, retrieval only: no model, no embeddings.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from ci_switch import importorskip

from swrag_integrations.evaluation import main, run_eval
from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.evaluation import runner as runner_module
from swrag_integrations.evaluation.datasets import HALF_SALT, HALVES, build_corpus, load_examples

WHOLE = "whole set (tuning and test halves mixed)"


def _rule(key: str) -> str:
    """The documented rule, written out independently of the package."""
    digest = hashlib.sha256(f"{HALF_SALT}\0{key}".encode()).digest()
    return ("tune", "test")[int.from_bytes(digest[:8], "big") % 2]


def _row(i: int, *, with_id: bool = True) -> dict:
    doc = f"Document {i % 7} about town {i % 7}. " * 20 + f"The keeper of gate {i} is named Keeper{i}. " + "Filler. " * 20
    row = {"input": f"Who keeps gate {i}?", "context": doc, "answers": [f"Keeper{i}"], "language": "en"}
    if with_id:
        row["_id"] = f"id-{i}"
    return row


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _by_question(path: Path, half: str | None) -> set[str]:
    return {e.question for e in load_examples(path, half=half)}


ROWS = [_row(i, with_id=i % 5 != 0) for i in range(120)]  # every fifth row without _id: split by its text


def test_halves_are_disjoint_cover_the_set_and_follow_the_rule(tmp_path):
    path = _write(tmp_path / "d.jsonl", ROWS)
    whole = load_examples(path)
    tune, test = load_examples(path, half="tune"), load_examples(path, half="test")
    assert {e.qid for e in tune}.isdisjoint({e.qid for e in test})
    assert sorted(e.qid for e in tune + test) == sorted(e.qid for e in whole)
    # file order is kept within a half
    assert [e.qid for e in tune] == [e.qid for e in whole if e in tune]
    # the real rule: a coin per row from the salted hash of its _id (or of its question and context)
    for row, example in zip(ROWS, whole):
        key = row.get("_id") or "text:" + hashlib.sha1(f"{row['input']}\0{row['context']}".encode()).hexdigest()[:16]
        assert example.half == _rule(key)
    assert len(tune) == sum(e.half == "tune" for e in whole) and 0 < len(tune) < len(whole)
    assert {e.half for e in tune} == {"tune"} and {e.half for e in test} == {"test"}


def test_halves_stable_under_reordering_and_appending(tmp_path):
    base = _write(tmp_path / "base.jsonl", ROWS)
    shuffled = list(ROWS)
    random.Random(3).shuffle(shuffled)
    moved = _write(tmp_path / "shuffled.jsonl", shuffled)
    grown = _write(tmp_path / "grown.jsonl", ROWS + [_row(i, with_id=i % 3 != 0) for i in range(120, 200)])
    for half in HALVES:
        assert _by_question(moved, half) == _by_question(base, half)
        assert _by_question(grown, half) & {r["input"] for r in ROWS} == _by_question(base, half)


def test_half_with_limit_and_bad_half(tmp_path):
    path = _write(tmp_path / "d.jsonl", ROWS)
    tune = load_examples(path, half="tune")
    assert load_examples(path, limit=5, half="tune") == tune[:5]
    assert len(load_examples(path, limit=5)) == 5
    with pytest.raises(ValueError, match="half must be one of tune, test"):
        load_examples(path, half="train")
    with pytest.raises(ValueError, match="half must be one of"):
        run_eval([path], [EvalConfig("rcs", 64)], tmp_path / "o", half="dev", retrieval_only=True, progress=False)


def test_corpus_mode_asks_one_half_but_indexes_every_document(tmp_path, monkeypatch):
    path = _write(tmp_path / "d.jsonl", ROWS[:30])
    seen = []
    real = runner_module.build_corpus

    def spy(examples, *, split=False):
        sources = real(examples, split=split)
        seen.append(len(sources))
        return sources

    monkeypatch.setattr(runner_module, "build_corpus", spy)
    run_eval([path], [EvalConfig("rcs", 64)], tmp_path / "o", mode="corpus", half="test", retrieval_only=True,
             progress=False, reports=False, budget=200)
    assert seen == [len(build_corpus(load_examples(path)))] and seen[0] > len(build_corpus(load_examples(path, half="test")))
    records = json.loads((tmp_path / "o" / "records.json").read_text())
    assert {r["qid"] for r in records} == {e.qid for e in load_examples(path, half="test")}
    assert {r["half"] for r in records} == {"test"}


def test_cli_half_reaches_the_loader_and_every_report(tmp_path):
    path = _write(tmp_path / "d.jsonl", ROWS[:24])
    common = ["--data", str(path), "--strategies", "rcs", "--windows", "64", "--retrieval-only", "--no-progress",
              "--budget", "200", "--bootstrap", "50"]
    assert main([*common, "--half", "tune", "--out", str(tmp_path / "tune")]) == 0
    rows = json.loads((tmp_path / "tune" / "results.json").read_text())
    tune = load_examples(path, half="tune")
    assert {r["half"] for r in rows} == {"tune"} and {r["n"] for r in rows} == {len(tune)}
    records = json.loads((tmp_path / "tune" / "records.json").read_text())
    assert sorted(r["qid"] for r in records) == sorted(e.qid for e in tune)
    assert (tmp_path / "tune" / "table.md").read_text().startswith("# swrag eval: tuning half\n")
    assert (tmp_path / "tune" / "significance.md").read_text().startswith("# swrag eval: tuning half\n")
    # without --half: today's behaviour (every question), said plainly
    assert main([*common, "--out", str(tmp_path / "all")]) == 0
    rows = json.loads((tmp_path / "all" / "results.json").read_text())
    assert {r["half"] for r in rows} == {"all"} and {r["n"] for r in rows} == {24}
    assert (tmp_path / "all" / "table.md").read_text().startswith(f"# swrag eval: {WHOLE}\n")


def test_mixing_halves_is_refused(tmp_path, capsys):
    from swrag_integrations.evaluation.report import rows_half

    path = _write(tmp_path / "d.jsonl", ROWS[:24])
    common = ["--data", str(path), "--strategies", "rcs", "--windows", "64", "--retrieval-only", "--no-progress",
              "--budget", "200", "--bootstrap", "50", "--out", str(tmp_path / "o")]
    assert main([*common, "--half", "tune"]) == 0
    before = (tmp_path / "o" / "results.json").read_text()
    assert main([*common, "--half", "test"]) == 2
    err = capsys.readouterr().err
    assert "holds results of the tuning half" in err and "test half" in err and "another --out" in err
    assert main(common) == 2  # nor the whole set on top of a half
    assert (tmp_path / "o" / "results.json").read_text() == before  # nothing overwritten
    with pytest.raises(ValueError, match="mix results of different halves"):
        rows_half([{"half": "tune"}, {"half": "test"}])
    assert rows_half([{"dataset": "x"}]) == "all"  # results from before the split covered the whole set


def _peer_records(folder: Path, half_of_qid: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "records.jsonl").open("w", encoding="utf-8") as fh:
        for strategy in ("default", "langchain-stock"):
            for qid, half in half_of_qid.items():
                fh.write(json.dumps({"strategy": strategy, "qid": qid, "half": half, "context_recall": 1.0,
                                     "hit": 1.0, "index_id": "i", "chunks": 1, "index_bytes": 1,
                                     "retrieve_seconds": 0.01}) + "\n")


def test_peers_take_the_half_and_refuse_another(tmp_path, monkeypatch, capsys):
    importorskip("scipy")
    from swrag_integrations.cli import eval as cli_module
    from swrag_integrations.evaluation.peers import peers as peers

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    _write(data_dir / "qasper.jsonl", ROWS[:10])
    calls = []
    monkeypatch.setattr(cli_module, "main", lambda argv: calls.append(list(argv)) or 0)
    out = tmp_path / "runs"
    assert peers.main(["--data-dir", str(data_dir), "--out", str(out), "--datasets", "qasper", "--half", "test"]) == 0
    assert calls and calls[0][calls[0].index("--half") + 1] == "test"
    # a test-half report: the heading says so; records of the test half only
    _peer_records(out / "qasper", {"a": "test", "b": "test"})
    (out / "qasper" / "results.json").write_text(json.dumps([{"dataset": "qasper", "half": "test"}]))
    text = peers.report(out, half="test")
    assert text.startswith("# The default against the strongest peers (retrieval only, 1500-token budget): test half")
    assert "| qasper (document) | default | 2 |" in text
    with pytest.raises(ValueError, match="holds results of the test half, but the report is for the tuning half"):
        peers.report(out, half="tune")
    with pytest.raises(ValueError, match="whole set"):
        peers.report(out)
    # a tuning-half question in the folder is refused, not averaged in
    _peer_records(out / "qasper", {"a": "test", "c": "tune"})
    with pytest.raises(ValueError, match="not from the test half"):
        peers.report(out, half="test")
    assert peers.main(["--data-dir", str(data_dir), "--out", str(out), "--half", "test", "--report-only"]) == 2
    assert "peers: error:" in capsys.readouterr().err
