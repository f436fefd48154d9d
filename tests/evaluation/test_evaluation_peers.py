"""The peers report (python -m swrag_integrations.evaluation.peers.peers) from hand-made records."""

from __future__ import annotations

import json

import pytest
from ci_switch import importorskip

importorskip("scipy")

from swrag_integrations.evaluation.peers.peers import main, report  # noqa: E402


def _write(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "records.jsonl").open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def _row(strategy, qid, recall, **extra):
    return {"strategy": strategy, "qid": qid, "context_recall": recall, "hit": float(recall == 1.0),
            "source_recall": extra.get("source_recall"), "span_hit": extra.get("span_hit"), "index_id": "i1",
            "chunks": 10, "index_bytes": 2_000_000, "retrieve_seconds": extra.get("seconds", 0.01)}


def test_report_tables_pairs_and_margin(tmp_path):
    rows = [_row("default", f"q{i}", 1.0, seconds=0.02) for i in range(20)]
    rows += [_row("langchain-ensemble", f"q{i}", 0.5) for i in range(20)]
    rows += [_row("langchain-stock", f"q{i}", 1.0 if i % 2 else 0.0) for i in range(20)]
    # a resumed run repeats a question: the last record wins
    rows += [_row("langchain-stock", "q0", 1.0)]
    _write(tmp_path / "qasper", rows)
    text = report(tmp_path)
    assert "| qasper (document) | default | 20 | 100.0 [100.0, 100.0] |" in text
    assert "| qasper (document) | langchain-ensemble | 20 | 50.0 [50.0, 50.0] |" in text
    assert "| 10 | 2.0 | 20 |" in text  # chunks, index MB, retrieve p50 ms of the default
    # default minus the ensemble: a constant +50 on every question
    assert "| qasper | langchain-ensemble | 20 | +50.0 [+50.0, +50.0] | 0.000 | yes |" in text
    # the stock pipeline: q0 rewritten to 1.0, so 11 of 20 questions at 1.0
    assert "| qasper | langchain-stock | 20 | +45.0" in text
    assert "| qasper | 100.0 | langchain-stock 55.0 | +45.0 |" in text  # the best peer: the highest mean


def test_best_peer_is_the_highest_mean(tmp_path):
    rows = [_row("default", f"q{i}", 0.8) for i in range(10)]
    rows += [_row("langchain-ensemble", f"q{i}", 0.9) for i in range(10)]
    rows += [_row("llamaindex-window", f"q{i}", 0.7) for i in range(10)]
    _write(tmp_path / "cmrc2018_corpus", rows)
    text = report(tmp_path)
    assert "| cmrc2018_corpus | 80.0 | langchain-ensemble 90.0 | -10.0 |" in text
    assert "| cmrc2018_corpus | langchain-ensemble | 10 | -10.0 [-10.0, -10.0] | 0.000 | yes |" in text


def test_bad_input(tmp_path, capsys):
    assert main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--datasets", "nope"]) == 2
    assert "unknown dataset" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--datasets", "qasper"]) == 3
    assert "no such file" in capsys.readouterr().err


def test_tuned_peer_counts_as_a_peer_in_the_margin(tmp_path):
    rows = [_row("default", f"q{i}", 0.8) for i in range(10)]
    rows += [_row("langchain-ensemble", f"q{i}", 0.7) for i in range(10)]
    rows += [_row("langchain-ensemble-tuned", f"q{i}", 0.9) for i in range(10)]
    _write(tmp_path / "multifieldqa_zh", rows)
    text = report(tmp_path, ["default", "langchain-ensemble", "langchain-ensemble-tuned"])
    assert "| multifieldqa_zh | 80.0 | langchain-ensemble-tuned 90.0 | -10.0 |" in text


def test_peer_config_file_is_checked(tmp_path, capsys):
    (tmp_path / "qasper.jsonl").write_text("")
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"half": "test", "sets": {}}))
    assert main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--datasets", "qasper",
                 "--peer-config", str(bad)]) == 2
    assert "tuning half" in capsys.readouterr().err
