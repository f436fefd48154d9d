"""benchmarks/reports.py (``make reports``, issue 30): figures read back from markdown and JSON,
a moved figure marked and an unmoved one not, a vanished row reported, the committed files left
alone without ``--write``, clear errors, and one real report (grounding) regenerated end to end."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci_switch import SHARED, require_shared
from script_module import script_module

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "reports.py"


@pytest.fixture(scope="module")
def reports():
    with script_module(SCRIPT, "swrag_reports") as module:
        yield module


OLD_MD = """# Peers

prose with 12 numbers that are not in a table

| dataset (mode) | pipeline | n | context recall | chunks | p50 ms |
|---|---|---|---|---|---|
| qasper (document) | default | 30 | 78.4 [63.8, 89.8] | 4225 | 31 |
| qasper (document) | stock | 30 | 73.0 [58.3, 85.8] | 398 | 117 |
| zh (document) | default | 100 | **85.8 [80.8, 90.6]** | 14816 | 12 |
"""

NEW_MD = """# Peers

| dataset (mode) | pipeline | n | context recall | chunks | p50 ms |
|---|---|---|---|---|---|
| qasper (document) | default | 30 | 88.1 [75.0, 95.0] | 4225 | 45 |
| qasper (document) | stock | 30 | 58.4 [44.0, 70.0] | 401 | 90 |
"""


def by_name(rows):
    return {r.figure: r for r in rows}


def test_markdown_cells_keep_their_interval(reports):
    figs = reports.markdown_figures(OLD_MD)
    f = figs["Peers | zh (document) / default | context recall"]
    assert (f.value, f.low, f.high) == (85.8, 80.8, 90.6)
    assert figs["Peers | qasper (document) / stock | chunks"] == reports.Figure(398.0)
    assert reports.parse_cell("96.2%") == reports.Figure(96.2)
    assert reports.parse_cell("3.74x") == reports.Figure(3.74)
    assert reports.parse_cell("1,446") == reports.Figure(1446.0)
    assert reports.parse_cell("+1.4 [−4.0, +7.3]") == reports.Figure(1.4, -4.0, 7.3)
    assert reports.parse_cell("–") is None


def test_moved_unmoved_and_missing_figures(reports):
    old, new = reports.markdown_figures(OLD_MD), reports.markdown_figures(NEW_MD)
    rows = by_name(reports.compare(old, new, (("*p50 ms", None), ("*", 0.0))))
    # 88.1 is inside [63.8, 89.8]: not moved, although the point estimate changed by 9.7
    assert rows["Peers | qasper (document) / default | context recall"].status == "ok"
    # 58.4 is just inside [58.3, 85.8]: ok; the stock row's chunk count (no interval, exact) moved
    assert rows["Peers | qasper (document) / stock | context recall"].status == "ok"
    assert rows["Peers | qasper (document) / stock | chunks"].status == "MOVED"
    assert rows["Peers | qasper (document) / default | chunks"].status == "ok"
    # timings are shown, never judged
    assert rows["Peers | qasper (document) / default | p50 ms"].status == "shown"
    # the zh row disappeared: every figure of it is reported
    missing = [r for r in rows.values() if r.status == "MISSING"]
    assert {r.figure.split(" | ")[1] for r in missing} == {"zh (document) / default"}
    table = reports.format_rows(rows.values())
    assert "| MOVED |" in table and "| MISSING |" in table and "| ok |" not in table


def test_a_point_estimate_outside_the_old_interval_moves(reports):
    old = {"x": reports.Figure(73.0, 58.3, 85.8)}
    assert reports.compare(old, {"x": reports.Figure(58.2, 44.0, 70.0)})[0].status == "MOVED"
    assert reports.compare(old, {"x": reports.Figure(85.8)})[0].status == "ok"


def test_relative_tolerance_for_figures_without_interval(reports):
    old = {"ratio": reports.Figure(3.74)}
    tol = (("ratio", 0.10),)
    assert reports.compare(old, {"ratio": reports.Figure(3.40)}, tol)[0].status == "ok"  # -9%
    assert reports.compare(old, {"ratio": reports.Figure(3.30)}, tol)[0].status == "MOVED"  # -12%
    assert reports.compare({}, {"ratio": reports.Figure(1.0)}, tol)[0].status == "new"


def eval_row(**kw):
    row = {"dataset": "qasper", "mode": "document", "strategy": "dds", "window": 512, "step": "3",
           "split_passages": False, "budget": 1500, "n": 30, "context_recall": 0.727, "recall_ci_low": 0.598,
           "recall_ci_high": 0.832, "hit": 0.5, "source_recall": None, "span_hit": None, "seconds": 9.1}
    row.update(kw)
    return row


def test_eval_results_json(reports):
    old = reports.eval_figures([eval_row(), eval_row(strategy="rcs", step=None)])
    # runs since the tune/test split carry half="all"; older committed rows have no "half": same row
    new = reports.eval_figures([eval_row(context_recall=0.9, hit=0.55, seconds=30.0, half="all")])
    f = old["qasper document dds 512/3: context_recall"]
    assert (f.low, f.high) == (0.598, 0.832)
    rows = by_name(reports.compare(old, new, reports.EVAL_TOLERANCES))
    assert rows["qasper document dds 512/3: context_recall"].status == "MOVED"
    assert rows["qasper document dds 512/3: hit"].status == "MOVED"
    assert rows["qasper document dds 512/3: seconds"].status == "shown"
    assert rows["qasper document dds 512/3: n"].status == "ok"
    assert rows["qasper document rcs 512/None: context_recall"].status == "MISSING"
    assert reports.compare(old, reports.eval_figures([eval_row(hit=0.505)]), reports.EVAL_TOLERANCES)[0].status == "ok"
    tuned = reports.eval_figures([eval_row(half="tune")])
    assert list(tuned)[0].startswith("qasper document dds 512/3 (half=tune): ")


def test_parts_of_several_eval_runs_are_concatenated(reports, tmp_path):
    for i, rows in enumerate(([eval_row()], [eval_row(dataset="zh"), eval_row(dataset="en")]), 1):
        (tmp_path / f"part{i}").mkdir()
        (tmp_path / f"part{i}" / "results.json").write_text(json.dumps(rows), encoding="utf-8")
    reports.merge_parts(tmp_path, 2)
    merged = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert [r["dataset"] for r in merged] == ["qasper", "zh", "en"]
    with pytest.raises(reports.ReportsError, match="part3"):
        reports.merge_parts(tmp_path, 3)


@pytest.fixture
def toy(reports, tmp_path, monkeypatch):
    """A registry of one report whose 'generator' copies a prepared file, in a toy repository."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "figs.json").write_text(json.dumps({"a": {"recall": 0.5, "n": 30}}), encoding="utf-8")
    fresh = tmp_path / "fresh.json"
    fresh.write_text(json.dumps({"a": {"recall": 0.6, "n": 30}}), encoding="utf-8")
    copy = ("{py}", "-c", "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])", str(fresh), "{run}/figs.json")
    report = reports.Report("toy", "nowhere", (copy,), {"figs.json": "docs/figs.json"}, 0.1, "json")
    monkeypatch.setattr(reports, "REPORTS", (report,))
    monkeypatch.setattr(reports, "ROOT", root)
    return root


def test_a_moved_run_fails_and_leaves_the_committed_file(reports, toy, tmp_path, capsys):
    committed = (toy / "docs" / "figs.json").read_text(encoding="utf-8")
    assert reports.main(["--out", str(tmp_path / "run1")]) == 1
    out = capsys.readouterr().out
    assert "| a.recall | 0.5 | 0.6 | exact | MOVED |" in out
    assert "| a.n |" not in out.split("## Summary")[0]  # unmoved figures are not printed (only in comparison.md)
    assert (toy / "docs" / "figs.json").read_text(encoding="utf-8") == committed
    assert "| a.n | 30 | 30 | exact | ok |" in (tmp_path / "run1" / "toy" / "comparison.md").read_text()
    assert reports.main(["--out", str(tmp_path / "run2"), "--warn-only"]) == 0
    assert reports.main(["--out", str(tmp_path / "run3"), "--write"]) == 1
    assert json.loads((toy / "docs" / "figs.json").read_text())["a"]["recall"] == 0.6
    assert reports.main(["--out", str(tmp_path / "run3"), "--compare-only"]) == 0  # now equal


def test_a_failing_generator_is_reported(reports, toy, tmp_path, monkeypatch, capsys):
    broken = reports.Report("toy", "nowhere", (("{py}", "-c", "raise SystemExit('no data here')"),),
                            {"figs.json": "docs/figs.json"}, 0.1, "json")
    monkeypatch.setattr(reports, "REPORTS", (broken,))
    assert reports.main(["--out", str(tmp_path / "run")]) == 1
    assert "toy: FAILED (exit 1: no data here" in capsys.readouterr().out


def test_a_generator_that_writes_nothing_fails_its_report_only(reports, toy, tmp_path, monkeypatch, capsys):
    silent = reports.Report("silent", "nowhere", (("{py}", "-c", "pass"),), {"figs.json": "docs/figs.json"}, 0.1, "json")
    monkeypatch.setattr(reports, "REPORTS", (silent, *reports.REPORTS))
    assert reports.main(["--out", str(tmp_path / "run")]) == 1
    out = capsys.readouterr().out
    assert "silent: FAILED (silent: the generator did not write" in out
    assert "toy: 1 ok, 1 MOVED" in out  # the next report still ran


def test_list_shows_costs_and_what_cannot_run(reports, capsys):
    assert reports.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "| peers | 90 |" in out and "| grounding | 0.5 | yes |" in out
    assert "NOT RUN HERE" in out
    names = [r.name for r in reports.REPORTS]
    assert len(names) == len(set(names))
    for r in reports.REPORTS:  # every baseline named in the registry is in the repository
        for committed in r.committed.values():
            assert (REPO / committed).is_file(), committed


def test_unknown_report_is_a_clear_error_without_traceback():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--only", "grounding", "nosuch"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown report(s) nosuch" in proc.stderr and "--list" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_raw_output_heading_is_a_clear_error(reports):
    with pytest.raises(reports.ReportsError, match="'## Raw output' not found"):
        reports.markdown_figures("# x\n| a | b |\n|---|---|\n| r | 1 |\n", "## Raw output")


def test_grounding_regenerates_equal_to_the_committed_figures(reports, tmp_path, capsys):
    require_shared("data", "eval")
    code = reports.main(["--only", "grounding", "--out", str(tmp_path), "--data-dir", str(SHARED / "data" / "eval")])
    comparison = (tmp_path / "grounding" / "comparison.md").read_text(encoding="utf-8")
    assert code == 0, capsys.readouterr().out
    statuses = {line.rsplit("|", 2)[1].strip() for line in comparison.splitlines()[2:]}
    assert statuses == {"ok", "shown"}  # shown: the checker's milliseconds, not judged
    # the figures docs/eval/grounding.md quotes are among those compared
    assert "| labels:all.precision | 0.971429 | 0.971429 | exact | ok |" in comparison
    assert "| multifieldqa_zh.flagged | 75 | 75 | exact | ok |" in comparison


def test_every_committed_baseline_reads_back(reports):
    """The reader of each report understands its committed file: figures found, intervals where
    the tables print them, and a file compared with itself moves nothing."""
    with_interval = 0
    for r in reports.REPORTS:
        for committed in r.committed.values():
            figs = reports.read_figures(REPO / committed, r.reader, r.committed_from)
            assert len(figs) > 10, committed
            with_interval += any(f.low is not None for f in figs.values())
            assert {row.status for row in reports.compare(figs, figs, r.tolerances)} <= {"ok", "shown"}
    assert with_interval >= 6  # the five eval results files and peers.md
