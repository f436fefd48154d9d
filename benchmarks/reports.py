"""Regenerate the reports the README and docs/ quote, and say which figures moved (issue 30).

``make reports`` (= ``python benchmarks/reports.py``) runs every registered report's own
generator (the command written next to its figures in README/docs: nothing here evaluates
anything), into a run folder ``runs/reports/<UTC time>/<report>/``, then reads the figures
back from the files the generator wrote and from their committed copies (the baselines) and
prints, per figure: old, new, the rule it was judged by, and its status.

**What "moved" means.** A figure is ``MOVED`` when ``|new - old| > tol * |old|``, ``tol``
being the relative tolerance of the figure's kind (``Report.tolerances``, the first matching
pattern): 0 (exact) for counts (questions, chunks, labels), :data:`SHARE_TOLERANCE` (2% of
the value) for shares of questions (context recall, F1, hit, source recall, span hit: 1.7
points at a recall of 85), a stated figure for timing ratios; ``None`` = shown, never judged
(timings on a shared machine). A 95% interval printed with a figure is shown for reference
and is **not** the rule: a point estimate that jumps 9.7 points but stays inside the old
interval has moved. Otherwise the figure is ``ok``.

A figure the baseline has and the new run lacks is ``MISSING``. Every report that runs names
its baseline; a baseline that is missing or holds no figure fails the report with a line
naming the file and how to write it (``make reports ARGS="--only NAME --write"``; with
``--compare-only --out RUN`` it is written from an earlier run without re-running). The exit
code is 1 when anything moved, went missing, had no baseline or a generator failed
(``--warn-only``: 0), 2 for bad arguments. The committed files are replaced only with
``--write``, after the comparison was printed. ``--list`` shows the reports with their cost and
baseline; ``--quick`` runs the ones of at most ``QUICK_MINUTES``; ``--only NAME ...`` picks
reports. Reports that cannot run here (``Report.blocked``) are listed with the reason and
never faked.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
DATA = "../shared/data/eval"
QUICK_MINUTES = 5.0
EVAL = ("{py}", "-m", "swrag_integrations.evaluation")

Tolerances = tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class Figure:
    """One number of a report: its point estimate and, if it has one, its 95% interval."""

    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Report:
    """A report the README or docs/ quote, and how to regenerate and read it back.

    ``commands`` are argv templates run from the repository root: ``{py}`` is this Python,
    ``{run}`` the report's run folder, ``{part}`` the i-th command's own folder ``{run}/part<i>``
    (their ``results.json`` lists are then concatenated into ``{run}/results.json``),
    ``{data}`` the dev-set folder. ``committed`` maps a
    file the generator writes (relative to ``{run}``; ``stdout.md`` = its standard output)
    to the committed file holding the same figures in the same format (every report that runs
    has one; a raw output is committed as it was written). ``reader`` names how
    figures are read (a key of ``READERS``); ``committed_from`` skips the committed file up
    to that line (the hand-written part before a generator's raw output).
    """

    name: str
    quoted_in: str
    commands: tuple[tuple[str, ...], ...]
    committed: dict[str, str]
    minutes: float
    reader: str
    tolerances: Tolerances = (("*", 0.0),)
    committed_from: str | None = None
    blocked: str | None = None
    note: str = ""


def _eval(*args: str) -> tuple[str, ...]:
    """A ``swrag eval`` command writing into its own part folder (``{part}``): one eval run's
    ``results.json`` holds only its own grid, so the parts are concatenated afterwards."""
    return (*EVAL, *args, "--retrieval-only", "--out", "{part}")


#: Shares of questions (context recall, F1, hit, source recall, span hit) may move by 2% of their
#: value (1.7 points at 85, half of the 3.3 points a whole question of 30 is worth): retrieval-only runs of
#: the same code and data repeat their metrics (docs/eval/parity.md: 801 of 801 identical), so
#: anything beyond is a change. Their 95% intervals are shown, not used as the rule.
SHARE_TOLERANCE = 0.02

#: Eval tables (``results.json``): shares by :data:`SHARE_TOLERANCE`; the number of questions
#: must not change; chunks, tokens, seconds and bytes are shown, not judged (the README quotes
#: none of them from these files; timings come from a shared machine).
EVAL_TOLERANCES: Tolerances = (*((f"*: {m}", SHARE_TOLERANCE) for m in ("context_recall", "f1", "hit", "source_recall",
                                                                        "span_hit")),
                               ("*: n", 0.0), ("*", None))
BENCH_NOTE = "timings on the shared 2-core machine: compare only runs made on a quiet machine"
#: The README's tables of these benchmarks were transcribed from runs whose raw output was not kept.
#: The baselines of these benchmarks were first written on 2026-11-28 (``--write``), on a shared machine.
WRITTEN = "baseline written 2026-11-28 at 7931471 on a shared machine; "

REPORTS: tuple[Report, ...] = (
    Report(
        "grounding", "docs/how-to/grounding-and-views.md 'Measured', docs/eval/grounding.md (both tables)",
        (("{py}", "-m", "swrag_integrations.evaluation.methods.grounding",
          "--records", "docs/eval/grounding_answers.jsonl",
          "--data", "{data}/qasper.jsonl", "--data", "{data}/multifieldqa_zh.jsonl",
          "--source", "sample.md=swrag_integrations/data/sample.md",
          "--labels", "docs/eval/grounding_labels.jsonl", "--labels", "docs/eval/grounding_labels_sample.jsonl",
          "--out", "{run}/grounding.json"),),
        {"grounding.json": "docs/eval/grounding.json"}, 0.5, "json",
        (("*ms_per_answer*", None), ("*seconds_per_sentence*", None), ("*", 0.0))),
    Report(
        "corpus", "docs/eval/README.md, corpus_tables.md (corpus mode grid)",
        (_eval("--data", "{data}/squad_v2_articles.jsonl", "--corpus"),
         _eval("--data", "{data}/hotpotqa.jsonl", "--corpus", "--split-passages")),
        {"results.json": "docs/eval/corpus_results.json"}, 3, "eval-json", EVAL_TOLERANCES),
    Report(
        "corpus_parent", "docs/evaluation/claims.md 'parent 512 (hybrid, windowed)' row, docs/eval/README.md update note",
        (_eval("--data", "{data}/squad_v2_articles.jsonl", "--data", "{data}/hotpotqa.jsonl", "--corpus",
               "--split-passages", "--strategies", "parent", "--windows", "512", "--steps", "3"),),
        {"results.json": "docs/eval/corpus_parent_results.json"}, 4, "eval-json", EVAL_TOLERANCES,
        note="MiniLM embeddings: 2 min with a warm embedding cache, about 4 cold"),
    Report(
        "corpus_anchors", "docs/evaluation/claims.md corpus-mode table (squad / hotpotqa, FFS/DDS/RCS/langchain-stock)",
        (_eval("--data", "{data}/squad_v2_articles.jsonl", "--data", "{data}/hotpotqa.jsonl", "--corpus",
               "--split-passages", "--strategies", "ffs,dfs,dds,rcs,parent,langchain-stock",
               "--windows", "512,1024", "--steps", "1/4,3"),),
        {"results.json": "docs/eval/corpus_anchor_results.json"}, 30, "eval-json", EVAL_TOLERANCES,
        note="command reconstructed from the rows of corpus_anchor_results.json (not written in the docs)"),
    Report(
        "document", "docs/evaluation/claims.md document-mode table, docs/eval/README.md headline, document_tables.md",
        (_eval("--data", "{data}/multifieldqa_zh.jsonl"), _eval("--data", "{data}/qasper.jsonl"),
         _eval("--data", "{data}/hotpotqa.jsonl", "--data", "{data}/squad_v2_articles.jsonl"),
         _eval("--data", "{data}/minilongbench.jsonl")),
        {"results.json": "docs/eval/document_results.json"}, 25, "eval-json", EVAL_TOLERANCES),
    Report(
        "dense", "docs/eval/README.md dense pipelines, dense_tables.md",
        (_eval("--data", "{data}/multifieldqa_zh.jsonl", "--data", "{data}/qasper.jsonl",
               "--strategies", "rcs,dds,parent,langchain-stock", "--steps", "3", "--limit", "30"),),
        {"results.json": "docs/eval/dense_results.json"}, 40, "eval-json", EVAL_TOLERANCES,
        note="the committed run lacks qasper parent/langchain-stock (it did not finish): those show as new"),
    Report(
        "peers", "docs/evaluation/peers.md peer table, docs/eval/peers.md, ranking.md",
        (("{py}", "-m", "swrag_integrations.evaluation.peers.peers", "--data-dir", "{data}", "--out", "{run}",
          "--strategies", "default,default-v1,langchain-ensemble,llamaindex-window,langchain-parent",
          "--peer-config", "docs/eval/peers_tuned.json", "--half", "test", "--report", "{run}/peers.md"),),
        {"peers.md": "docs/eval/peers.md"}, 90, "markdown",
        (("*p50 ms*", None), ("*index MB*", None),
         *((f"*| {m}", SHARE_TOLERANCE) for m in ("context recall", "hit", "source recall", "span hit")),
         ("*", 0.0))),
    Report(
        "budget_curve", "docs/eval/budgets.md (issue 44: recall per token, the curve and its paired table)",
        (("{py}", "-m", "swrag_integrations.evaluation.peers.peers", "--data-dir", "{data}", "--out", "{run}",
          "--datasets", "multifieldqa_zh,qasper,minilongbench,squad_v2_articles,hotpotqa,cmrc2018_corpus,"
                        "leval_scientific_qa,leval_natural_question,leval_multidoc_qa,leval_financial_qa,"
                        "leval_legal_contract_qa,drcd_corpus",
          "--strategies", "default,langchain-ensemble,llamaindex-window,langchain-parent",
          "--budgets", "300,500,1000,1500", "--peer-config", "docs/eval/peers_tuned_budgets.json", "--half", "test",
          "--report", "{run}/budget_curve.md"),),
        {"budget_curve.md": "docs/eval/budget_curve.md"}, 300, "markdown",
        (*((f"*| {m}", SHARE_TOLERANCE) for m in ("context recall", "hit")), ("*", 0.0)),
        note="baseline written 2026-11-28: the six original sets at 7fe817e (10:10-10:37 UTC), the five LEval "
             "tasks at 2c6caa0 (13:37-14:28 UTC), drcd_corpus at 6eab825 (15:18-15:24 UTC), one run folder, "
             "shared machine; the per-budget peer choices are docs/eval/peers_tuned_budgets.json (peer_tuning "
             "--budgets 300,500,1000,1500 on the tuning halves); the run also writes budget_curve.png"),
    Report(
        "f1_local_model", "docs/evaluation/claims.md F1 of the local model (docs/eval/f1_local_model_results.json)",
        (), {}, 60, "eval-json", EVAL_TOLERANCES,
        blocked="its command is not written next to the figure, and generating with the local LLM takes "
                "minutes per answer on 2 cores"),
    Report(
        "graph", "docs/how-to/raptor-and-graph.md graph rows, docs/eval/graph.md",
        (("{py}", "-m", "swrag_integrations.evaluation.methods.graph_measure", "eval", "--data", "{data}/hotpotqa.jsonl", "--corpus",
          "--split-passages", "--retrieval-only", "--windows", "512", "--steps", "3", "--strategies",
          "parent,dds,hipporag,hipporag-ppr,hipporag-ppr-only,graphrag-local", "--out", "{run}"),),
        {"results.json": "docs/eval/graph_results.json"}, 60, "eval-json", EVAL_TOLERANCES,
        note="baseline written 2026-11-28 at 7931471 (graph.md quotes it beside the hand-written tables)"),
    Report(
        "raptor", "docs/how-to/raptor-and-graph.md RAPTOR rows, docs/eval/raptor.md",
        (_eval("--data", "{data}/qasper.jsonl", "--strategies", "raptor,raptor-traverse", "--windows", "100",
               "--budget", "2000"),
         _eval("--data", "{data}/qasper.jsonl", "--strategies", "parent,dds", "--windows", "512", "--steps", "3",
               "--budget", "2000")),
        {"results.json": "docs/eval/raptor_results.json"}, 30, "eval-json", EVAL_TOLERANCES,
        note="baseline written 2026-11-28 at 7931471 (raptor.md quotes it beside the hand-written tables)"),
    Report(
        "context_quality", "docs/how-to/context-quality.md table, docs/eval/context_quality.md",
        (), {}, 120, "eval-json", EVAL_TOLERANCES,
        blocked="one swrag eval run per step and dataset (see context_quality.md); the table was assembled "
                "by hand from them, so there is no single generator to re-run"),
    Report(
        "tuning", "docs/how-to/tuning.md table, docs/eval/tuning.md",
        (), {}, 300, "markdown",
        blocked="tuning.measure reads and writes /work/runs/tune2 (not in the repository); the five "
                "dataset runs take hours (commands at the end of tuning.md)"),
    Report(
        "bench_splitters", "docs/development/benchmarks.md splitter table, docs/bench_splitters.md (its 'Raw output')",
        (("{py}", "benchmarks/bench_splitters.py", "--clock", "cpu"),),
        {"stdout.md": "docs/bench_splitters.md"}, 15, "markdown",
        # counts are exact; the target ratios moved by up to 0.08 of their value between the doc's four
        # quiet runs (100 KB DFS 0.95-1.03x, DDS token spans 0.88-0.91x); single MB/s figures by more
        (("*chunks*", 0.0), ("*windows*", 0.0), ("*| result", None), ("Targets*", 0.08), ("*", 0.15)),
        committed_from="## Raw output", note=BENCH_NOTE + " (the doc's runs: quiet machine, load 0.6-1.0)"),
    Report(
        "bench_embeddings", "docs/how-to/scaling.md embeddings table (onnx-int8 3.74x by CPU)",
        (("{py}", "benchmarks/bench_embeddings.py", "--n", "4000", "--threads", "1"),),
        {"stdout.md": "docs/reports/bench_embeddings.md"}, 6, "markdown", (("*cos*", 0.001), ("*", 0.15)),
        note=WRITTEN + BENCH_NOTE),
    Report(
        "bench_backends", "docs/how-to/vector-stores.md backends table",
        (("{py}", "benchmarks/bench_backends.py", "--data", "qasper"),),
        {"stdout.md": "docs/reports/bench_backends.md"}, 10, "markdown",
        (("*recall*", 0.0), ("*", None)), note=WRITTEN + BENCH_NOTE),
    # the commands the docs write above their ingestion, growth and keyword tables
    Report(
        "bench_ingest", "docs/how-to/scaling.md ingestion table",
        (("{py}", "benchmarks/bench_ingest.py", "--fraction", "0.3", "--modes", "single,workers", "--no-breakdown"),),
        {"stdout.md": "docs/reports/bench_ingest.md"}, 8, "markdown", (("*| chunks", 0.0), ("*", None)),
        note=WRITTEN + BENCH_NOTE),
    Report(
        "bench_growth", "docs/how-to/scaling.md growth table (default store rows), docs/scaling.md",
        (("{py}", "benchmarks/bench_growth.py", "--levels", "10000,100000,1000000", "--real-upto", "10000"),),
        {"stdout.md": "docs/reports/bench_growth.md"}, 45, "markdown", (("*", None),),
        note="26 min on 2026-11-28; " + WRITTEN + BENCH_NOTE),
    Report(
        "bench_growth_milvus", "docs/how-to/scaling.md growth table (Milvus Lite rows), docs/scaling.md",
        (("{py}", "benchmarks/bench_growth.py", "--levels", "10000,100000", "--real-upto", "10000",
          "--store", "milvus:{run}/milvus.db"),),
        {"stdout.md": "docs/reports/bench_growth_milvus.md"}, 15, "markdown", (("*", None),),
        note="stops at 100k (an earlier 1M reader passed 7.6 GB); " + WRITTEN + BENCH_NOTE),
    Report(
        "bench_growth_postgres", "docs/how-to/scaling.md growth table (PostgreSQL rows), docs/scaling.md",
        (("{py}", "benchmarks/bench_growth.py", "--levels", "10000,100000,1000000", "--real-upto", "10000",
          "--store", "pgserver"),),
        {"stdout.md": "docs/reports/bench_growth_postgres.md"}, 40, "markdown", (("*", None),),
        note="a PostgreSQL 16 + pgvector that pgserver starts (private folder, Unix socket); loads past 50k "
             "synthetic chunks in bulk (bulk_load); " + WRITTEN + BENCH_NOTE),
    Report(
        "bench_pg_writers", "docs/how-to/scaling.md PostgreSQL writers table",
        (("{py}", "benchmarks/bench_pg_writers.py", "--writers", "1,4,1,4,1,4", "--sources", "40"),),
        {"stdout.md": "docs/reports/bench_pg_writers.md"}, 5, "markdown", (("*", None),),
        note=WRITTEN + BENCH_NOTE),
    Report(
        "bench_keyword", "docs/scaling.md keyword-index table",
        (("{py}", "benchmarks/bench_keyword.py", "--levels", "10000,100000,1000000", "--old-writes-upto", "100000",
          "--probes", "15", "--queries", "100"),),
        {"stdout.md": "docs/reports/bench_keyword.md"}, 20, "markdown", (("*", None),),
        note=WRITTEN + BENCH_NOTE),
)


class ReportsError(ValueError):
    """Bad arguments (unknown report, missing file): printed as one line, exit 2."""


class MissingBaseline(ReportsError):
    """A report's committed baseline is missing or holds no figure: the report fails (exit 1)
    unless ``--write`` writes it from the run."""


# --- reading figures -----------------------------------------------------------------------

_NUMBER = r"[-+−]?\d[\d,]*(?:\.\d+)?"
_CELL = re.compile(rf"^\**\s*(?P<v>{_NUMBER})\s*(?P<pct>%)?\s*x?\**\s*"  # 84.5 / **3.74** / 96.2% / 3.74x
                   rf"(?:\[\s*(?P<lo>{_NUMBER})\s*,\s*(?P<hi>{_NUMBER})\s*\])?")  # [79.2, 89.5]


def _num(text: str) -> float:
    return float(text.replace(",", "").replace("−", "-"))


def parse_cell(cell: str) -> Figure | None:
    """The figure at the start of a table cell (``84.5 [79.2, 89.5]``, ``96.2%``, ``3.74x``,
    ``**99.3 [98.0, 100]**``), or ``None`` for a cell that does not start with a number."""
    m = _CELL.match(cell.strip())
    if not m:
        return None
    lo, hi = m.group("lo"), m.group("hi")
    return Figure(_num(m.group("v")), _num(lo) if lo else None, _num(hi) if hi else None)


def markdown_figures(text: str, start: str | None = None) -> dict[str, Figure]:
    """Every numeric cell of the markdown tables in ``text`` (from the line ``start`` on), keyed
    ``heading | row | column``: the row is named by its cells before the first number."""
    lines = text.splitlines()
    if start is not None:
        at = next((i for i, line in enumerate(lines) if line.strip() == start), None)
        if at is None:
            raise ReportsError(f"line {start!r} not found in the committed file")
        lines = lines[at:]
    out: dict[str, Figure] = {}
    heading, header = "", None
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("#"):
            heading, header = s.lstrip("#").strip(), None
            continue
        if not s.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue
        figures = [parse_cell(c) for c in cells]
        first = next((j for j, f in enumerate(figures) if f is not None), len(cells))
        row = " / ".join(cells[:first]) or cells[0]
        for j in range(first, len(cells)):
            if figures[j] is not None:
                column = header[j] if j < len(header) else str(j)
                out[f"{heading} | {row} | {column}"] = figures[j]
    return out


def json_figures(data: Any, prefix: str = "") -> dict[str, Figure]:
    """Every number in a JSON document, keyed by its path (``labels:all.precision``)."""
    out: dict[str, Figure] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(json_figures(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.update(json_figures(value, f"{prefix}[{i}]"))
    elif isinstance(data, (int, float)) and not isinstance(data, bool) and math.isfinite(data):
        out[prefix] = Figure(float(data))
    return out


_EVAL_KEY = ("dataset", "mode", "split_passages", "strategy", "window", "step", "multi_query", "budget", "llm")
_EVAL_METRICS = {"context_recall": ("recall_ci_low", "recall_ci_high"), "f1": ("f1_ci_low", "f1_ci_high"),
                 "hit": None, "source_recall": None, "span_hit": None, "n": None, "chunks": None,
                 "context_tokens": None, "seconds": None, "index_bytes": None}


def eval_figures(rows: Any) -> dict[str, Figure]:
    """The figures of a ``swrag eval`` ``results.json`` (a list of rows), keyed by the row's
    configuration and the metric (``qasper document dds 512/3: context_recall``); context
    recall and F1 carry their bootstrap intervals."""
    if not isinstance(rows, list):
        raise ReportsError("a swrag eval results.json must hold a list of rows")
    out: dict[str, Figure] = {}
    for row in rows:
        mode = row.get("mode", "")
        if row.get("split_passages"):
            mode += " split"
        config = f"{row.get('dataset')} {mode} {row.get('strategy')} {row.get('window')}/{row.get('step')}"
        extras = [f"{k}={row[k]}" for k in ("multi_query", "budget", "llm", "half")
                  if row.get(k) not in (None, False, 1500, "all")]  # the defaults, and keys older runs lack
        if extras:
            config += " (" + ", ".join(extras) + ")"
        for metric, ci in _EVAL_METRICS.items():
            value = row.get(metric)
            if value is None:
                continue
            low = high = None
            if ci is not None and row.get(ci[0]) is not None:
                low, high = row[ci[0]], row[ci[1]]
            out[f"{config}: {metric}"] = Figure(float(value), low, high)
    return out


READERS: dict[str, Callable[[str, str | None], dict[str, Figure]]] = {
    "markdown": lambda text, start: markdown_figures(text, start),
    "json": lambda text, start: json_figures(json.loads(text)),
    "eval-json": lambda text, start: eval_figures(json.loads(text)),
}


def read_figures(path: Path, reader: str, start: str | None = None) -> dict[str, Figure]:
    """The figures of one file, read with the named reader."""
    if reader not in READERS:
        raise ReportsError(f"unknown reader {reader!r}; one of {', '.join(READERS)}")
    return READERS[reader](path.read_text(encoding="utf-8"), start)


# --- comparing ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One line of the comparison: ``status`` is ok, MOVED, MISSING, new or shown."""

    figure: str
    old: Figure | None
    new: Figure | None
    status: str
    rule: str


def tolerance_for(name: str, tolerances: Tolerances) -> float | None:
    """The relative tolerance of the first pattern matching ``name`` (``None``: not judged)."""
    for pattern, tol in tolerances:
        if fnmatch.fnmatchcase(name, pattern):
            return tol
    return 0.0


def compare(old: dict[str, Figure], new: dict[str, Figure], tolerances: Tolerances = (("*", 0.0),)) -> list[Row]:
    """Compare regenerated figures with the committed ones.

    Every figure, with or without a 95% interval, moved when ``|new - old| > tol * |old|``
    (tol from ``tolerances``; ``None``: shown, not judged; a relative slack of 1e-9 absorbs
    float printing). An interval is shown next to the rule, never used as it. Figures only in
    ``old`` are MISSING, only in ``new`` are new.
    """
    rows: list[Row] = []
    for name in sorted(old.keys() | new.keys()):
        o, n = old.get(name), new.get(name)
        if n is None:
            rows.append(Row(name, o, None, "MISSING", "row or figure gone from the new run"))
            continue
        if o is None:
            rows.append(Row(name, None, n, "new", "not in the committed file"))
            continue
        tol = tolerance_for(name, tolerances)
        if tol is None:
            rows.append(Row(name, o, n, "shown", "not judged"))
            continue
        moved = abs(n.value - o.value) > tol * abs(o.value) + 1e-9 * max(1.0, abs(o.value))
        rows.append(Row(name, o, n, "MOVED" if moved else "ok", f"±{tol:.0%}" if tol else "exact"))
    return rows


def _fmt(f: Figure | None) -> str:
    if f is None:
        return "–"
    return f"{f.value:.6g}"


def _interval(f: Figure | None) -> str:
    if f is None or f.low is None:
        return ""
    return f"[{f.low:.6g}, {f.high:.6g}]"


def format_rows(rows: Iterable[Row], all_rows: bool = False) -> str:
    """A markdown table of the comparison (``all_rows``: also the unchanged and shown ones)."""
    lines = ["| figure | old | new | rule (old 95% interval) | status |", "|---|---:|---:|---|---|"]
    for r in rows:
        if all_rows or r.status in ("MOVED", "MISSING"):
            rule = f"{r.rule} (old {_interval(r.old)})" if _interval(r.old) else r.rule
            lines.append(f"| {r.figure} | {_fmt(r.old)} | {_fmt(r.new)} | {rule} | {r.status} |")
    return "\n".join(lines) + "\n"


# --- running ------------------------------------------------------------------------------

def find(names: Sequence[str]) -> list[Report]:
    """The reports named, in the order given; an unknown name raises :class:`ReportsError`."""
    by_name = {r.name: r for r in REPORTS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ReportsError(f"unknown report(s) {', '.join(unknown)}; known: {', '.join(by_name)} (see --list)")
    return [by_name[n] for n in names]


def list_text() -> str:
    """The registry as a table: name, cost, baseline, and why a report cannot run here."""
    lines = ["| report | minutes (2 cores) | quick | baseline | quoted in | note |", "|---|---:|---|---|---|---|"]
    for r in REPORTS:
        note = f"NOT RUN HERE: {r.blocked}" if r.blocked else r.note
        quick = "yes" if r.minutes <= QUICK_MINUTES and not r.blocked else ""
        base = ", ".join(c if (ROOT / c).is_file() else f"{c} (MISSING: write it with ARGS=\"--only {r.name} --write\")"
                         for c in r.committed.values()) or "none"
        lines.append(f"| {r.name} | {r.minutes:g} | {quick} | {base} | {r.quoted_in} | {note} |")
    return "\n".join(lines) + "\n"


def _expand(argv: Sequence[str], run: Path, part: Path, data: str) -> list[str]:
    values = {"{py}": sys.executable, "{run}": str(run), "{part}": str(part), "{data}": data}
    out = []
    for arg in argv:
        for key, value in values.items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


def merge_parts(run: Path, n_parts: int, name: str = "results.json") -> None:
    """Concatenate the ``name`` lists of ``run/part1 .. partN`` into ``run/name`` (the rows of
    several ``swrag eval`` runs, as the committed ``*_results.json`` hold them)."""
    rows: list[Any] = []
    for i in range(1, n_parts + 1):
        path = run / f"part{i}" / name
        if not path.is_file():
            raise ReportsError(f"the generator did not write {path}")
        rows += json.loads(path.read_text(encoding="utf-8"))
    (run / name).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


def run_report(report: Report, run: Path, data: str, log: Callable[[str], None] = print) -> str | None:
    """Run the report's commands into ``run`` (stdout appended to ``run/stdout.md``, stderr to
    ``run/stderr.log``); the error text of the first failing command, or ``None``."""
    run.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    uses_parts = False
    for i, argv in enumerate(report.commands, 1):
        uses_parts = uses_parts or any("{part}" in a for a in argv)
        cmd = _expand(argv, run, run / f"part{i}", data)
        log(f"[{report.name}] {' '.join(cmd)}")
        t0 = time.monotonic()
        with (run / "stdout.md").open("a", encoding="utf-8") as out, \
                (run / "stderr.log").open("a", encoding="utf-8") as err:
            code = subprocess.call(cmd, cwd=ROOT, env=env, stdout=out, stderr=err)
        log(f"[{report.name}] exit {code} after {time.monotonic() - t0:.0f} s")
        if code != 0:
            tail = (run / "stderr.log").read_text(encoding="utf-8").strip().splitlines()[-3:]
            return f"exit {code}: " + " / ".join(tail)
    if uses_parts:
        merge_parts(run, len(report.commands))
    return None


def compare_report(report: Report, run: Path, root: Path | None = None) -> list[Row]:
    """Compare each file the report wrote in ``run`` with its committed copy under ``root``
    (default: this repository).

    Raises:
        MissingBaseline: the report names no baseline, or one is missing or holds no figure.
        ReportsError: the generator did not write a file it should have.
    """
    root = ROOT if root is None else root
    if not report.committed:
        raise MissingBaseline(f"{report.name}: the registry names no committed baseline for it "
                              f"(Report.committed in benchmarks/reports.py)")
    rows: list[Row] = []
    for produced, committed in report.committed.items():
        path = run / produced
        if not path.is_file():
            raise ReportsError(f"{report.name}: the generator did not write {path}")
        new = read_figures(path, report.reader)
        old_path = root / committed
        how = f'write it from this run with make reports ARGS="--only {report.name} --compare-only --out {run.parent} --write"'
        if not old_path.is_file():
            raise MissingBaseline(f"{report.name}: no committed baseline {committed}; {how}")
        old = read_figures(old_path, report.reader, report.committed_from) if old_path.read_text(encoding="utf-8").strip() else {}
        if not old:
            raise MissingBaseline(f"{report.name}: the committed baseline {committed} holds no figure; {how}")
        rows += compare(old, new, report.tolerances)
    return rows


def write_baseline(report: Report, run: Path) -> list[str]:
    """Copy the files the report wrote in ``run`` over its committed baselines (``--write``);
    the paths written."""
    written = []
    for produced, committed in report.committed.items():
        target = ROOT / committed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run / produced, target)
        written.append(committed)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``make reports``: see the module docstring."""
    parser = argparse.ArgumentParser(prog="python benchmarks/reports.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="show the reports, their cost and baseline, and stop")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these reports")
    parser.add_argument("--quick", action="store_true", help=f"run only the reports of at most {QUICK_MINUTES:g} minutes")
    parser.add_argument("--data-dir", default=DATA, help=f"the dev sets (default {DATA})")
    parser.add_argument("--out", default=None, help="run folder (default runs/reports/<UTC time>)")
    parser.add_argument("--compare-only", action="store_true", help="do not run: compare what --out already holds")
    parser.add_argument("--write", action="store_true", help="copy the regenerated files over the committed baselines (or write a missing one)")
    parser.add_argument("--warn-only", action="store_true", help="exit 0 even when figures moved")
    parser.add_argument("--all-rows", action="store_true", help="print unchanged figures too")
    args = parser.parse_args(argv)
    try:
        if args.list:
            print(list_text(), end="")
            return 0
        reports = find(args.only) if args.only else [r for r in REPORTS if not args.quick or r.minutes <= QUICK_MINUTES]
        if args.compare_only and not args.out:
            raise ReportsError("--compare-only needs --out RUN_FOLDER (a folder of an earlier run)")
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = Path(args.out) if args.out else ROOT / "runs" / "reports" / stamp
        bad = 0
        summary: list[str] = []
        for report in reports:
            if report.blocked:
                summary.append(f"{report.name}: not run ({report.blocked})")
                continue
            run = out / report.name
            if not args.compare_only:
                error = run_report(report, run, args.data_dir)
                if error:
                    bad += 1
                    summary.append(f"{report.name}: FAILED ({error}; log in {run})")
                    continue
            try:
                rows = compare_report(report, run)
            except MissingBaseline as exc:
                if args.write and report.committed and not report.committed_from:
                    summary.append(f"{report.name}: no baseline before; wrote " + ", ".join(write_baseline(report, run)))
                else:
                    bad += 1
                    summary.append(f"{report.name}: FAILED ({exc})")
                continue
            except (ReportsError, ValueError) as exc:  # no output file, or one the reader cannot parse
                bad += 1
                summary.append(f"{report.name}: FAILED ({exc})")
                continue
            counts = {s: sum(r.status == s for r in rows) for s in ("ok", "MOVED", "MISSING", "new", "shown")}
            text = format_rows(rows, args.all_rows)
            (run / "comparison.md").write_text(format_rows(rows, True), encoding="utf-8")
            print(f"\n## {report.name}: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + "\n")
            if counts["MOVED"] or counts["MISSING"] or args.all_rows:
                print(text)
            bad += counts["MOVED"] + counts["MISSING"] > 0
            summary.append(f"{report.name}: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
            if args.write and report.committed_from:
                summary.append(f"{report.name}: not written (the committed file is hand-written around the raw "
                               f"output: paste {run} by hand)")
            elif args.write:
                summary += [f"{report.name}: wrote {c}" for c in write_baseline(report, run)]
        print("\n## Summary (run folder " + str(out) + ")\n\n" + "\n".join(f"* {s}" for s in summary))
        return 1 if bad and not args.warn_only else 0
    except (ReportsError, OSError, json.JSONDecodeError) as exc:
        print(f"reports: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
