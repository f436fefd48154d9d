"""The budget curve of issue 44: context recall and hit per dev set and context budget.

``python -m swrag_integrations.evaluation.peers.peers --budgets 300,500,1000,1500 ...`` runs every
pipeline once per dev set with every budget (each index built once, see
`run_eval`) and writes, from the per-budget records under its ``--out``,
``budgets.md`` (`budget_report`) and ``budgets.png`` (`plot_budgets`).

The table gives, per set and budget, each pipeline's context recall and hit (×100, 95%
bootstrap intervals) and the paired bootstrap of ``default`` minus every other pipeline on
the same questions, for both metrics, as the peers report does at one budget.

**Context recall on free-form answers** (the LEval sets): one definition for every set
(`context_recall`: the share of the gold answer's normalised tokens, with
multiplicity, found in the context; the best gold answer counts). On an extractive set the
answer is a short span, so recall is 1.0 when the span is in the context. LEval's answers are
long and mostly written, not copied (none of the 68 financial answers and 6 of the 158
multi-document answers occur verbatim in their documents), so there recall is partial
credit: common words of the answer are found in almost any context (a floor above 0) and 1.0
is rarely reachable (a ceiling below 1), and ``hit`` (recall 1.0) stays near 0. Recall is kept
as the metric there (the differences between pipelines on the same questions are what the
paired table reports); hit is reported but says little on those sets. Figures are reported
per set, never averaged across sets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from swrag_integrations.evaluation.datasets import ALL_DEV_SETS, check_half, half_label
from swrag_integrations.evaluation.run_records import checked_records, metric_cell

__all__ = ["BUDGET_METRICS", "budget_report", "plot_budgets", "curve"]

BUDGET_METRICS = ("context_recall", "hit")


def _checked(out: Path, name: str, half: str | None, budget: int) -> dict[str, dict[str, dict]]:
    return checked_records(out, name, half, budget)


def curve(out: Path, strategies: Sequence[str], half: str | None, budgets: Sequence[int],
          metric: str = "context_recall") -> dict[str, dict[str, dict[int, float]]]:
    """``dataset -> strategy -> budget -> mean metric`` of the records under ``out``."""
    points: dict[str, dict[str, dict[int, float]]] = {}
    for name, _, _ in ALL_DEV_SETS:
        for budget in budgets:
            recs = _checked(out, name, half, budget)
            for strategy in strategies:
                rows = [r.get(metric) for r in recs.get(strategy, {}).values() if r.get(metric) is not None]
                if rows:
                    points.setdefault(name, {}).setdefault(strategy, {})[budget] = sum(rows) / len(rows)
    return points


def budget_report(out: Path, strategies: Sequence[str], half: str | None, budgets: Sequence[int]) -> str:
    """The Markdown table of the budget curve (see the module docstring).

    Raises:
        ValueError: a dataset's results or records come from another half.
    """
    from swrag_integrations.evaluation.metrics import paired_bootstrap

    check_half(half)
    # the budget cell starts with "≤" so that readers of the table (benchmarks/reports.py) take it as a
    # row label, not as a figure
    table = ["| dataset (mode) | budget (tokens) | pipeline | n | context recall | hit |", "|---|---|---|---|---|---|"]
    pairs = ["| dataset | budget (tokens) | default minus | n | Δ context recall ×100 [95% CI] | p | Δ hit ×100 [95% CI] | p |",
             "|---|---|---|---|---|---|---|---|"]
    for name, mode, _ in ALL_DEV_SETS:
        for budget in budgets:
            recs = _checked(out, name, half, budget)
            for strategy in strategies:
                rows = list(recs.get(strategy, {}).values())
                if rows:
                    cells = " | ".join(metric_cell([r.get(m) for r in rows]) for m in BUDGET_METRICS)
                    table.append(f"| {name} ({mode}) | ≤ {budget} | {strategy} | {len(rows)} | {cells} |")
            ours = recs.get("default", {})
            for strategy in strategies:
                other = recs.get(strategy, {})
                shared = sorted(set(ours) & set(other))
                if strategy == "default" or not shared:
                    continue
                cells = []
                for metric in BUDGET_METRICS:
                    res = paired_bootstrap([float(ours[q][metric]) for q in shared],
                                           [float(other[q][metric]) for q in shared])
                    cells.append(f"{100 * res['diff']:+.1f} [{100 * res['ci_low']:+.1f}, {100 * res['ci_high']:+.1f}] "
                                 f"| {res['p']:.3f}")
                pairs.append(f"| {name} | ≤ {budget} | {strategy} | {len(shared)} | {' | '.join(cells)} |")
    return "\n".join([
        f"# Recall per token: the default and the peers at budgets {', '.join(map(str, budgets))}: "
        f"{half_label(half)}",
        "",
        "Generated by `python -m swrag_integrations.evaluation.peers.peers --budgets ...` from the runs under "
        f"`{out.name}/`. Metrics ×100 with 95% percentile bootstrap intervals (1000 resamples, seed 0). "
        "On the LEval sets (free-form answers) context recall is partial credit and hit stays near 0 "
        "(swrag_integrations/evaluation/peers/budgets.py).",
        "",
        *table, "",
        "## Paired bootstrap: default minus each pipeline (same questions, same budget)", "",
        *pairs, "",
    ])


def plot_budgets(out: Path, strategies: Sequence[str], half: str | None, budgets: Sequence[int],
                 path: str | Path) -> Path | None:
    """Context recall against budget, one panel per dev set, one line per pipeline (PNG).

    Returns:
        the PNG's path, or ``None`` when there is nothing to plot.
    """
    from swrag_integrations.evaluation.report import _pyplot

    points = curve(out, strategies, half, budgets)
    if not points:
        return None
    plt = _pyplot()
    names = list(points)
    cols = min(3, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        for strategy, by_budget in points[name].items():
            xs = sorted(by_budget)
            ax.plot(xs, [100 * by_budget[x] for x in xs], marker="o", label=strategy,
                    linewidth=2.5 if strategy == "default" else 1.2)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("budget (tokens)", fontsize=8)
        ax.set_ylabel("context recall ×100", fontsize=8)
        ax.set_xticks(list(budgets))
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
    fig.suptitle(f"Context recall per budget ({half_label(half)})", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
