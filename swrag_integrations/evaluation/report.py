"""Markdown tables and matplotlib plots of evaluation results.

* `markdown_table`: rows strategy / window / step, one column per dataset (the
  layout of the method's Table 2); cells ``mean ×100 [95% CI]``.
* `significance_table`: every configuration against the RCS baseline of the same
  window (paired bootstrap over the same questions).
* `plot_heatmaps`: window × step heatmaps per strategy and dataset (the method's
  Figure 5).
* `plot_multi_query`: single- vs multi-query bars for configurations run both ways.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Sequence

from swrag_integrations.evaluation.datasets import half_label
from swrag_integrations.evaluation.metrics import bootstrap_ci, paired_bootstrap
from swrag_integrations.evaluation.pipelines import PIPELINES

__all__ = [
    "markdown_table",
    "significance_table",
    "plot_heatmaps",
    "plot_multi_query",
    "write_reports",
    "read_records",
    "primary_metric",
    "steps_table",
    "rows_half",
]


def rows_half(rows: Sequence[dict], where: str = "the results") -> str | None:
    """The one half that summary ``rows`` come from: ``"tune"``, ``"test"`` or ``"all"`` (``None`` if no rows).

    Rows without a ``half`` field predate the split and covered the whole set (``"all"``).

    Raises:
        ValueError: the rows come from more than one half (naming ``where`` and the fix),
            so no table or comparison can mix a tuning and a test figure.
    """
    halves = sorted({row.get("half") or "all" for row in rows})
    if len(halves) > 1:
        raise ValueError(f"{where} mix results of different halves ({', '.join(halves)}); "
                         "report each half from its own run (swrag eval --half tune|test, its own --out)")
    return halves[0] if halves else None


def primary_metric(rows: Sequence[dict]) -> str:
    """``"f1"`` when any row has F1, else ``"context_recall"``."""
    return "f1" if any(r.get("f1") is not None for r in rows) else "context_recall"


def _step_order(step) -> float:
    if step is None:
        return 0.0
    text = str(step)
    if text.startswith("="):
        return float(text[1:])
    try:
        return float(Fraction(text))
    except ValueError:
        return 0.0


def _row_sort_key(row: dict):
    strategy = row["strategy"]
    names = list(PIPELINES)
    order = names.index(strategy) if strategy in names else len(names)
    return (order, row["window"], -_step_order(row["step"]) if strategy != "dds" else _step_order(row["step"]),
            row["unit"], row["multi_query"], row.get("steps") or "")


def _config_label(row: dict) -> tuple[str, str, str]:
    step = "-" if row.get("step") is None else str(row["step"])
    strategy = row["strategy"].upper() if row["strategy"] in ("ffs", "dfs", "dds", "rcs") else row["strategy"]
    if row.get("multi_query"):
        strategy += " +MQ"
    if row.get("unit") == "char":
        strategy += " (char)"
    if row.get("steps"):
        strategy += f" +{row['steps']}"
    return strategy, str(row["window"]), step


def _fmt(value, scale: float = 100.0, digits: int = 2) -> str:
    if value is None:
        return "–"
    return f"{value * scale:.{digits}f}"


def markdown_table(rows: Sequence[dict], metric: str | None = None, *, with_ci: bool = True) -> str:
    """Table 2 layout: one row per configuration, one column per dataset.

    Args:
        rows: summary rows (`summarize`).
        metric: ``"f1"``, ``"context_recall"``, ``"hit"``, ``"source_recall"``,
            ``"span_hit"``; default `primary_metric`.
        with_ci: add the 95% bootstrap interval (F1 / recall only).
    """
    metric = metric or primary_metric(rows)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    configs: dict[tuple, dict[str, dict]] = {}
    for row in sorted(rows, key=_row_sort_key):
        configs.setdefault(_config_label(row), {})[row["dataset"]] = row
    ci = {"f1": ("f1_ci_low", "f1_ci_high"), "context_recall": ("recall_ci_low", "recall_ci_high")}.get(metric)
    lines = [
        "| strategy | window | step | " + " | ".join(datasets) + " |",
        "|---|---:|---:|" + "---:|" * len(datasets),
    ]
    for (strategy, window, step), by_ds in configs.items():
        cells = []
        for ds in datasets:
            row = by_ds.get(ds)
            if row is None or row.get(metric) is None:
                cells.append("–")
                continue
            cell = _fmt(row[metric])
            if with_ci and ci and row.get(ci[0]) is not None:
                cell += f" [{_fmt(row[ci[0]], digits=1)}, {_fmt(row[ci[1]], digits=1)}]"
            cells.append(cell)
        lines.append(f"| {strategy} | {window} | {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_ID_FIELDS = ("strategy", "window", "step", "unit", "multi_query", "steps")


def _config_id(rec: dict) -> tuple:
    return (rec["strategy"], rec["window"], rec["step"], rec["unit"], rec["multi_query"], rec.get("steps") or "")


def significance_table(
    records: Sequence[dict], metric: str | None = None, *, seed: int = 0, n_resamples: int = 1000
) -> str:
    """Each configuration minus its baseline.

    Without context steps the baseline is RCS of the same window/unit/query mode; a
    configuration run with context steps (``steps``) is compared with the same
    configuration without steps. Paired bootstrap over the questions both were run on;
    ``*`` marks a 95% interval that excludes zero.
    """
    if metric is None:
        metric = "f1" if any(r.get("f1") is not None for r in records) else "context_recall"
    by: dict[tuple, dict[tuple, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for rec in records:
        if rec.get(metric) is None:
            continue
        by[(rec["dataset"], rec["mode"])][_config_id(rec)][rec["qid"]] = rec[metric]
    lines = [
        f"Paired bootstrap ({n_resamples} resamples, seed {seed}) of {metric} minus the baseline (the RCS of the same "
        "window; for rows with context steps, the same configuration without steps); `*` = 95% interval excludes 0.\n",
        "| dataset | strategy | window | step | n | diff ×100 | 95% CI | p |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    rows = 0
    for (dataset, _mode), configs in by.items():
        for cid in sorted(configs, key=lambda c: _row_sort_key(dict(zip(_ID_FIELDS, c)))):
            strategy, window, step, unit, mq, steps = cid
            if steps:
                base = configs.get((strategy, window, step, unit, mq, ""))
            else:
                base = configs.get(("rcs", window, None, unit, mq, ""))
                if strategy == "rcs":
                    continue
            if base is None:
                continue
            qids = [q for q in configs[cid] if q in base]
            if not qids:
                continue
            res = paired_bootstrap([configs[cid][q] for q in qids], [base[q] for q in qids], seed=seed, n_resamples=n_resamples)
            mark = "*" if res["significant"] else ""
            label = _config_label(dict(zip(_ID_FIELDS, cid)))
            lines.append(
                f"| {dataset} | {label[0]} | {window} | {label[2]} | {len(qids)} | {res['diff'] * 100:+.2f}{mark} | "
                f"[{res['ci_low'] * 100:+.1f}, {res['ci_high'] * 100:+.1f}] | {res['p']:.3f} |"
            )
            rows += 1
    if not rows:
        lines.append("| (no configuration shares questions with an RCS baseline) | | | | | | | |")
    return "\n".join(lines) + "\n"


def steps_table(records: Sequence[dict], metric: str | None = None, *, seed: int = 0, n_resamples: int = 1000) -> str:
    """Context steps against their baseline (the same configuration without steps).

    One row per (dataset, mode, configuration, steps): mean ×100 with its 95% bootstrap
    CI, the paired-bootstrap difference to the baseline over the shared questions
    (``*``: 95% interval excludes 0), the mean ``context_diversity`` (mean pairwise
    cosine distance of the context pieces, where measured) and the mean context tokens.
    """
    if metric is None:
        metric = "f1" if any(r.get("f1") is not None for r in records) else "context_recall"
    by: dict[tuple, dict[str, dict[str, dict]]] = defaultdict(lambda: defaultdict(dict))
    for rec in records:
        if rec.get(metric) is None:
            continue
        cid = (rec["dataset"], rec["mode"], *_config_id(rec)[:5])
        by[cid][rec.get("steps") or ""][rec["qid"]] = rec
    lines = [
        f"{metric} ×100 [95% bootstrap CI]; Δ = paired bootstrap ({n_resamples} resamples, seed {seed}) against the same "
        "configuration without steps, `*` = 95% interval excludes 0; diversity = mean pairwise cosine distance of "
        "the context pieces (questions with ≥ 2 pieces).\n",
        "| dataset | mode | configuration | steps | n | mean ×100 [95% CI] | Δ ×100 [95% CI] | p | diversity | tokens |",
        "|---|---|---|---|---:|---|---|---:|---:|---:|",
    ]
    order = {"": 0}
    for cid in sorted(by, key=lambda c: (c[0], c[1], _row_sort_key(dict(zip(_ID_FIELDS, c[2:]))))):
        dataset, mode = cid[:2]
        label = _config_label(dict(zip(_ID_FIELDS[:5], cid[2:])))
        config = f"{label[0]} {label[1]}" + (f"/{label[2]}" if label[2] != "-" else "")
        variants = by[cid]
        base = variants.get("")
        for steps in sorted(variants, key=lambda s: (order.get(s, 1), s)):
            recs = variants[steps]
            values = [r[metric] for r in recs.values()]
            mean = sum(values) / len(values)
            lo, hi = bootstrap_ci(values, seed=seed, n_resamples=n_resamples)
            delta, p = "–", "–"
            if steps and base:
                qids = [q for q in recs if q in base]
                if qids:
                    res = paired_bootstrap([recs[q][metric] for q in qids], [base[q][metric] for q in qids],
                                           seed=seed, n_resamples=n_resamples)
                    mark = "*" if res["significant"] else ""
                    delta = f"{res['diff'] * 100:+.2f}{mark} [{res['ci_low'] * 100:+.1f}, {res['ci_high'] * 100:+.1f}]"
                    p = f"{res['p']:.3f}"
            div = [r["context_diversity"] for r in recs.values() if r.get("context_diversity") is not None]
            div_cell = f"{sum(div) / len(div):.3f}" if div else "–"
            tokens = [r.get("context_tokens") for r in recs.values() if r.get("context_tokens") is not None]
            tok_cell = f"{sum(tokens) / len(tokens):.0f}" if tokens else "–"
            lines.append(
                f"| {dataset} | {mode} | {config} | {steps or 'baseline'} | {len(values)} | {mean * 100:.2f} "
                f"[{lo * 100:.1f}, {hi * 100:.1f}] | {delta} | {p} | {div_cell} | {tok_cell} |"
            )
    return "\n".join(lines) + "\n"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_heatmaps(rows: Sequence[dict], path: str | os.PathLike, metric: str | None = None) -> Path | None:
    """Window × step heatmaps, one panel per (dataset, strategy); returns the PNG path."""
    metric = metric or primary_metric(rows)
    rows = [r for r in rows if not r.get("multi_query") and r.get(metric) is not None]
    if any(not r.get("steps") for r in rows):  # one cell per configuration: the baseline
        rows = [r for r in rows if not r.get("steps")]
    if not rows:
        return None
    plt = _pyplot()
    import numpy as np

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    strategies = [s for s in PIPELINES if any(r["strategy"] == s for r in rows)]
    fig, axes = plt.subplots(
        len(datasets), len(strategies), figsize=(2.6 * len(strategies) + 1, 2.3 * len(datasets) + 0.8), squeeze=False, layout="constrained"
    )
    vmin = min(r[metric] for r in rows)
    vmax = max(r[metric] for r in rows)
    image = None
    for i, ds in enumerate(datasets):
        for j, strategy in enumerate(strategies):
            ax = axes[i][j]
            sel = [r for r in rows if r["dataset"] == ds and r["strategy"] == strategy]
            if not sel:
                ax.axis("off")
                continue
            windows = sorted({r["window"] for r in sel})
            steps = sorted({r["step"] for r in sel}, key=lambda s: (_step_order(s) if strategy == "dds" else -_step_order(s)))
            grid = np.full((len(windows), len(steps)), np.nan)
            for r in sel:
                grid[windows.index(r["window"]), steps.index(r["step"])] = r[metric]
            image = ax.imshow(grid, vmin=vmin, vmax=vmax, cmap="viridis", aspect="auto")
            ax.set_xticks(range(len(steps)), ["-" if s is None else str(s) for s in steps], fontsize=8)
            ax.set_yticks(range(len(windows)), [str(w) for w in windows], fontsize=8)
            for (y, x), value in np.ndenumerate(grid):
                if not np.isnan(value):
                    ax.text(x, y, f"{value * 100:.1f}", ha="center", va="center", fontsize=7,
                            color="white" if value < (vmin + vmax) / 2 else "black")
            if i == 0:
                ax.set_title(strategy.upper() if strategy in ("ffs", "dfs", "dds", "rcs") else strategy, fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{ds}\nwindow", fontsize=8)
            if i == len(datasets) - 1:
                ax.set_xlabel("step", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label=f"{metric} (×100 in cells)")
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_multi_query(rows: Sequence[dict], path: str | os.PathLike, metric: str | None = None) -> Path | None:
    """Grouped bars: single vs multi-query for every configuration run both ways."""
    metric = metric or primary_metric(rows)
    pairs: dict[tuple, dict[bool, dict]] = defaultdict(dict)
    for r in rows:
        if r.get(metric) is None:
            continue
        pairs[(r["dataset"], r["strategy"], r["window"], r["step"], r["unit"], r.get("steps") or "")][bool(r["multi_query"])] = r
    pairs = {k: v for k, v in pairs.items() if True in v and False in v}
    if not pairs:
        return None
    plt = _pyplot()
    import numpy as np

    datasets = list(dict.fromkeys(k[0] for k in pairs))
    fig, axes = plt.subplots(len(datasets), 1, figsize=(max(6, 0.7 * len(pairs) + 3), 3.2 * len(datasets)), squeeze=False)
    for i, ds in enumerate(datasets):
        ax = axes[i][0]
        keys = sorted((k for k in pairs if k[0] == ds), key=lambda k: _row_sort_key(pairs[k][False]))
        x = np.arange(len(keys))
        for offset, mq, label in ((-0.2, False, "single query"), (0.2, True, "multi-query")):
            values = [pairs[k][mq][metric] for k in keys]
            lows = [pairs[k][mq].get("ci_low") for k in keys]
            highs = [pairs[k][mq].get("ci_high") for k in keys]
            err = None
            if pairs[keys[0]][mq].get("ci_metric") == metric and all(v is not None for v in lows + highs):
                err = np.array([[v - lo for v, lo in zip(values, lows)], [hi - v for v, hi in zip(values, highs)]])
                err = np.clip(err, 0, None)
            ax.bar(x + offset, values, width=0.4, label=label, yerr=err, capsize=2)
        ax.set_xticks(x, [" ".join(_config_label(pairs[k][False])) for k in keys], rotation=45, ha="right", fontsize=7)
        ax.set_ylabel(metric)
        ax.set_title(ds, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_reports(out: str | os.PathLike, rows: Sequence[dict], records: Sequence[dict], *, seed: int = 0,
                  n_resamples: int = 1000) -> list[Path]:
    """Write ``table.md`` (+ ``significance.md``), ``heatmap.png``, ``multi_query.png``."""
    out = Path(out)
    written = []
    metric = primary_metric(rows)
    heading = f"# swrag eval: {half_label(rows_half(rows))}\n\n"
    parts = [heading, f"## {metric} ×100 [95% bootstrap CI]\n", markdown_table(rows, metric)]
    if metric == "f1":
        parts += ["\n## context_recall ×100 [95% bootstrap CI]\n", markdown_table(rows, "context_recall")]
    parts += ["\n## hit (share of questions with recall 1.0) ×100\n", markdown_table(rows, "hit", with_ci=False)]
    for extra in ("source_recall", "span_hit"):
        if any(r.get(extra) is not None for r in rows):
            parts += [f"\n## {extra} ×100\n", markdown_table(rows, extra, with_ci=False)]
    (out / "table.md").write_text("".join(parts), encoding="utf-8")
    written.append(out / "table.md")
    (out / "significance.md").write_text(heading + significance_table(records, seed=seed, n_resamples=n_resamples), encoding="utf-8")
    written.append(out / "significance.md")
    if any(r.get("steps") for r in records):
        (out / "steps.md").write_text(steps_table(records, seed=seed, n_resamples=n_resamples), encoding="utf-8")
        written.append(out / "steps.md")
    for maker, name in ((plot_heatmaps, "heatmap.png"), (plot_multi_query, "multi_query.png")):
        path = maker(rows, out / name)
        if path is not None:
            written.append(path)
    return written


def read_records(path: Path, budget: int | None = None) -> dict[str, dict[str, dict]]:
    """A run's ``records.jsonl`` as strategy -> qid -> record (the last record of a question wins, as on resume).

    Args:
        path: the ``records.jsonl`` file (missing: no records).
        budget: only the records of this context budget (a run with ``--budgets`` holds
            one record per question and budget); ``None``: every record.
    """
    out: dict[str, dict[str, dict]] = {}
    if path.exists():
        for line in path.open(encoding="utf-8"):
            if line.strip():
                rec = json.loads(line)
                if budget is None or rec.get("budget") == budget:
                    out.setdefault(rec["strategy"], {})[rec["qid"]] = rec
    return out


def record_budgets(path: Path) -> list[int]:
    """The distinct context budgets of the records in ``path`` (``records.jsonl``), ascending."""
    found = set()
    if path.exists():
        for line in path.open(encoding="utf-8"):
            if line.strip():
                budget = json.loads(line).get("budget")
                if budget is not None:
                    found.add(int(budget))
    return sorted(found)
