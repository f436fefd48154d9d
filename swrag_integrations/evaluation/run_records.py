"""A run folder's records, read for the reports of `peers` and `budgets`.

``checked_records`` reads one dataset's ``records.jsonl`` under a run folder (optionally one
budget's), refusing results or records of another half and, without a budget, a folder holding
several budgets; ``metric_cell`` formats a metric's mean with its bootstrap interval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from swrag_integrations.evaluation.datasets import half_label
from swrag_integrations.evaluation.report import read_records, record_budgets

__all__ = ["checked_records", "metric_cell"]


def metric_cell(values: Sequence[float | None]) -> str:
    """``mean [low, high]`` ×100 of ``values`` (``None`` skipped) with its 95% bootstrap interval; ``–`` if none."""
    from swrag_integrations.evaluation.metrics import bootstrap_ci

    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    lo, hi = bootstrap_ci(vals)
    return f"{100 * sum(vals) / len(vals):.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def checked_records(out: Path, name: str, half: str | None, budget: int | None = None) -> dict[str, dict[str, dict]]:
    """The records of dataset ``name`` under ``out`` (of ``budget`` when given), refusing results or
    records of another half, and a folder of several budgets when no ``budget`` is given."""
    from swrag_integrations.evaluation.runner import results_half

    wanted = half or "all"
    found = results_half(out / name)
    if found is not None and found != wanted:
        raise ValueError(f"{out / name} holds results of the {half_label(found)}, but the report is for the "
                         f"{half_label(wanted)}; run the peers with --half {half or '(none)'} into their own --out")
    if budget is None:
        budgets = record_budgets(out / name / "records.jsonl")
        if len(budgets) > 1:
            raise ValueError(f"{out / name} holds records of several budgets ({', '.join(map(str, budgets))}); "
                             "report them with --budgets (one table per budget, budgets.md)")
    recs = read_records(out / name / "records.jsonl", budget)
    if half is not None:
        for strategy, by_qid in recs.items():
            stray = sorted(q for q, r in by_qid.items() if r.get("half") != half)
            if stray:
                raise ValueError(f"{out / name / 'records.jsonl'}: {len(stray)} {strategy} record(s) are not from "
                                 f"the {half_label(half)} (e.g. {stray[0]}); run --half {half} into its own --out")
    return recs
