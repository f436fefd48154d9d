"""benchmarks/reports.py (``make reports``, issues 30 and 42): figures read back from markdown and
JSON, a moved figure marked by the tolerance of its kind (never by the old 95% interval) and an
unmoved one not, a vanished row reported, a missing or empty baseline failing with how to write
it, the committed files left alone without ``--write``, the docs' own commands in the registry,
clear errors, and one real report (grounding) regenerated end to end."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci_switch import SHARED, require_shared
from script_module import script_module

REPO = Path(__file__).resolve().parents[2]
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
    peers = reports.find(["peers"])[0]
    rows = by_name(reports.compare(old, new, peers.tolerances))
    # 88.1 is inside the old [63.8, 89.8] but 9.7 points (12%) above 78.4: moved
    assert rows["Peers | qasper (document) / default | context recall"].status == "MOVED"
    # 58.4 is just inside [58.3, 85.8], 14.6 points below 73.0: moved; so did the exact chunk count
    assert rows["Peers | qasper (document) / stock | context recall"].status == "MOVED"
    assert rows["Peers | qasper (document) / stock | chunks"].status == "MOVED"
    assert rows["Peers | qasper (document) / default | chunks"].status == "ok"
    # timings are shown, never judged
    assert rows["Peers | qasper (document) / default | p50 ms"].status == "shown"
    # the zh row disappeared: every figure of it is reported
    missing = [r for r in rows.values() if r.status == "MISSING"]
    assert {r.figure.split(" | ")[1] for r in missing} == {"zh (document) / default"}
    table = reports.format_rows(rows.values())
    assert "| MOVED |" in table and "| MISSING |" in table and "| ok |" not in table


def test_a_figure_with_an_interval_moves_by_its_tolerance_not_its_interval(reports):
    old = {"qasper: context_recall": reports.Figure(78.4, 63.8, 89.8)}
    tol = reports.EVAL_TOLERANCES
    assert reports.SHARE_TOLERANCE == 0.02
    # inside the old interval, but beyond 2% of 78.4 (1.57 points): moved
    assert reports.compare(old, {"qasper: context_recall": reports.Figure(88.1, 75.0, 95.0)}, tol)[0].status == "MOVED"
    assert reports.compare(old, {"qasper: context_recall": reports.Figure(80.1)}, tol)[0].status == "MOVED"
    assert reports.compare(old, {"qasper: context_recall": reports.Figure(76.9)}, tol)[0].status == "ok"
    assert reports.compare(old, {"qasper: context_recall": reports.Figure(79.9)}, tol)[0].status == "ok"
    # the interval is shown next to the rule, not used as it
    moved = reports.compare(old, {"qasper: context_recall": reports.Figure(88.1)}, tol)
    assert "| ±2% (old [63.8, 89.8]) | MOVED |" in reports.format_rows(moved)


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
    # inside the old interval [0.598, 0.832], but 2.3 points (3.2%) above 0.727: moved; 1.3 points (1.8%): ok
    for recall, status in ((0.75, "MOVED"), (0.74, "ok")):
        rows = by_name(reports.compare(old, reports.eval_figures([eval_row(context_recall=recall)]),
                                       reports.EVAL_TOLERANCES))
        assert rows["qasper document dds 512/3: context_recall"].status == status, recall
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
    for r in reports.REPORTS:  # a baseline not in the repository is shown with how to write it
        for committed in r.committed.values():
            if not (REPO / committed).is_file():
                assert f'{committed} (MISSING: write it with ARGS="--only {r.name} --write")' in out


def test_every_report_that_runs_names_a_baseline(reports):
    """No report is regenerated with nothing to compare it with (six were, and exited 0)."""
    runnable = [r for r in reports.REPORTS if not r.blocked]
    assert {r.name for r in runnable if not r.committed} == set()
    assert all(r.commands for r in runnable)


def _quoted(text: str) -> str:
    return " ".join(text.replace("`", " ").split())


def test_the_benchmark_reports_run_the_commands_the_docs_quote(reports):
    """The ingestion and growth entries ran other commands (--fraction 0.1; levels to 100k) than the
    ones written above their tables: every benchmark report's command is written in the docs pages
    its ``quoted_in`` names (the README only links to them)."""
    benches = [r for r in reports.REPORTS if r.name.startswith("bench_")]
    assert {"bench_ingest", "bench_growth", "bench_growth_milvus"} <= {r.name for r in benches}
    for r in benches:
        pages = re.findall(r"docs/[\w./-]+\.md", r.quoted_in)
        assert pages, f"{r.name}: quoted_in names no docs page: {r.quoted_in!r}"
        quoted = _quoted(" ".join((REPO / page).read_text(encoding="utf-8") for page in pages))
        for argv in r.commands:
            command = " ".join(argv[1:]).replace("{run}/milvus.db", "PATH.db")
            assert command in quoted, f"{r.name}: {command!r} is not the command {pages} quote"


@pytest.mark.parametrize("content", [None, "", "{}"])
def test_a_missing_or_empty_baseline_fails_and_says_how_to_write_it(reports, toy, tmp_path, capsys, content):
    """A missing committed file read as empty and passed; so did one without figures."""
    baseline = toy / "docs" / "figs.json"
    if content is None:
        baseline.unlink()
    else:
        baseline.write_text(content, encoding="utf-8")
    run = tmp_path / "run"
    assert reports.main(["--out", str(run)]) == 1
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("* toy: "))
    assert "FAILED" in line and "docs/figs.json" in line
    assert ("no committed baseline" if content is None else "holds no figure") in line
    assert f'ARGS="--only toy --compare-only --out {run} --write"' in line
    assert baseline.exists() == (content is not None)  # left as it was
    # the command it names writes the baseline from the run; then the same run compares equal
    assert reports.main(["--only", "toy", "--compare-only", "--out", str(run), "--write"]) == 0
    assert "toy: no baseline before; wrote docs/figs.json" in capsys.readouterr().out
    assert baseline.read_bytes() == (run / "toy" / "figs.json").read_bytes()
    assert reports.main(["--only", "toy", "--compare-only", "--out", str(run)]) == 0


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
            if not (REPO / committed).is_file():  # not written yet: fails its report (test above)
                continue
            figs = reports.read_figures(REPO / committed, r.reader, r.committed_from)
            assert len(figs) > 10, committed
            with_interval += any(f.low is not None for f in figs.values())
            assert {row.status for row in reports.compare(figs, figs, r.tolerances)} <= {"ok", "shown"}
    assert with_interval >= 6  # the five eval results files and peers.md
