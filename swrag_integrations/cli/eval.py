"""``swrag eval``: the evaluation grid from the command line.

Use `add_arguments` + `run_from_args` to mount it as a subcommand, or
`main` / ``python -m swrag_integrations.evaluation``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET
from swrag_integrations.evaluation.datasets import half_label, load_examples
from swrag_integrations.evaluation.pipelines import PIPELINES, EvalConfig, installed_strategies
from swrag_integrations.evaluation.langchain_llm import check_llm_spec, load_llm
from swrag_integrations.evaluation.runner import DEFAULT_WINDOWS, _make_steps, make_grid, parse_steps, run_eval

__all__ = ["add_arguments", "build_parser", "run_from_args", "main", "check_llm_spec", "load_llm_arg"]

DEFAULT_STRATEGIES = "ffs,dfs,dds,rcs"
EPILOG = """\
steps: fractions of the window for ffs/dfs (and the child size of parent), integers
(delimiter counts) for dds, '=N' for an absolute ffs/dfs step in units; a strategy
that gets none of its kind uses the method's defaults ({defaults}).

examples:
  swrag eval --data ../shared/data/eval/multifieldqa_zh.jsonl --retrieval-only --out results/zh
  swrag eval --data a.jsonl --data b.jsonl --strategies dds,rcs --windows 1024 --steps 3 --out results/ab
  swrag eval --data hotpotqa.jsonl --corpus --split-passages --retrieval-only --out results/hp
  swrag eval --data qasper.jsonl --strategies dds,rcs --windows 512 --steps 3 --retrieval-only \
      --diversity --out results/ctx      # also --litm, --rse, --rerank embedding, --autocontext

context steps (see swrag_integrations/evaluation/steps.py): each run's steps are part of the
record keys (field 'steps' in results.json), so runs with different steps can share --out.
--rse, --contextual and --autocontext need ffs/dfs/dds/rcs.
""".format(defaults="; ".join(f"{k} {','.join(v)}" for k, v in ((n, p.default_steps) for n, p in PIPELINES.items()) if v))


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _strategies(text: str) -> list[str]:
    items = [s.lower() for s in _csv_list(text)]
    bad = [s for s in items if s not in PIPELINES]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"unknown strategy {bad or text!r}; choose from {','.join(PIPELINES)}")
    return items


def _windows(text: str) -> list[int]:
    try:
        values = [int(v) for v in _csv_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"windows must be integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"windows must be positive integers, got {text!r}")
    return values


def _budgets(text: str) -> list[int]:
    """argparse type of ``--budgets``: distinct positive integers, comma-separated."""
    from swrag_integrations.evaluation.runner import check_budgets

    try:
        return check_budgets([int(v) for v in _csv_list(text)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected distinct positive integers such as 300,500,1000,1500, "
                                         f"got {text!r}") from None


def _steps(text: str) -> list[str]:
    try:
        return parse_steps(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_arg(text: str) -> int:
    """argparse type: a positive integer (shared by the eval and tune subcommands)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``swrag eval`` options to ``parser``."""
    parser.add_argument("--data", action="append", required=True, metavar="FILE.jsonl",
                        help="LongBench-format JSONL (repeatable); the dataset name is the file stem")
    parser.add_argument("--strategies", type=_strategies, default=None,
                        help=f"comma-separated, from {','.join(PIPELINES)} (default: {DEFAULT_STRATEGIES}, or none "
                             "besides --config when it is given)")
    parser.add_argument("--config", action="append", default=[], metavar="CONFIG.json",
                        help="also evaluate a configuration written by `swrag tune` (repeatable), as the strategy "
                             "config-<file stem>; --windows does not apply to it (run once), --budget and --k win "
                             "over the file's")
    parser.add_argument("--windows", type=_windows, default=list(DEFAULT_WINDOWS),
                        help="window sizes in --unit (default: 512,1024,2048)")
    parser.add_argument("--steps", type=_steps, default=None,
                        help="e.g. 1/2,1/4,1/8 (ffs/dfs) and 2,3,5 (dds); default: the method's per strategy")
    parser.add_argument("--unit", choices=["token", "char"], default="token", help="window unit (default: token)")
    parser.add_argument("--limit", type=positive_arg, default=None, help="first N questions of each dataset")
    parser.add_argument("--half", choices=["tune", "test"], default=None,
                        help="only the fixed tuning or test half of each dataset's questions (a hash of each row's "
                             "_id; corpus mode still indexes every document); default: the whole set, reported as "
                             "'whole set (tuning and test halves mixed)'")
    parser.add_argument("--retrieval-only", action="store_true",
                        help="compute context recall only (no answer generation, f1 is null)")
    parser.add_argument("--multi-query", action="store_true",
                        help="also run every configuration with LLM-written query variants (single and multi)")
    parser.add_argument("--n-queries", type=positive_arg, default=3, help="query variants per question (default: 3)")
    parser.add_argument("--corpus", action="store_true",
                        help="corpus mode: index all documents of a dataset once; every question searches all")
    parser.add_argument("--split-passages", action="store_true",
                        help="cut 'Passage i:' blocks (HotpotQA) into separate source documents")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=positive_arg, default=DEFAULT_BUDGET,
                        help=f"context budget in cl100k tokens, same for every configuration (default: {DEFAULT_BUDGET})")
    budget.add_argument("--budgets", type=_budgets, default=None, metavar="B1,B2,...",
                        help="several budgets in one run, e.g. 300,500,1000,1500 (a budget curve: each index is "
                             "built once and every question answered under each budget; instead of --budget)")
    parser.add_argument("--k", type=positive_arg, default=None,
                        help="cap on ranked chunks assembled (default: fill the budget; stock retrievers fetch 20)")
    parser.add_argument("--llm", default="default", metavar="SPEC",
                        help="the LLM for answers, query variants, --rerank llm and headers: 'default' (the local "
                             "model, swrag_integrations.llm.load_llama3), 'fake:A|B' (FakeListLLM with canned "
                             "answers) or 'module:factory', which IMPORTS the Python module and RUNS factory() "
                             "(arbitrary code: only name code you trust); it must return a LangChain LLM, chat "
                             "model or Runnable. Not loaded with --retrieval-only unless a step needs it")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    parser.add_argument("--bootstrap", type=positive_arg, default=1000, help="bootstrap resamples (default: 1000)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plots", action="store_true", help="skip Markdown tables and PNG plots")
    steps = parser.add_argument_group("context steps (swrag_integrations.methods.context)")
    steps.add_argument("--diversity", nargs="?", const="greedy", default=None, choices=["greedy", "mmr"],
                       help="re-order the top candidates for diversity (greedy = Haystack's order, default; mmr)")
    steps.add_argument("--litm", action="store_true",
                       help="lost-in-the-middle order of the assembled pieces (same text: recall cannot change)")
    steps.add_argument("--rse", action="store_true", help="relevant segment extraction (ffs/dfs/dds/rcs only)")
    steps.add_argument("--rerank", choices=["embedding", "llm"], default=None,
                       help="re-score the top candidates: MiniLM best-piece cosine, or the LLM's P(yes)")
    headers = steps.add_mutually_exclusive_group()
    headers.add_argument("--contextual", action="store_true",
                         help="index header + chunk, one LLM header per chunk (slow; ffs/dfs/dds/rcs only)")
    headers.add_argument("--autocontext", action="store_true",
                         help="index header + chunk, one LLM title/summary per document (ffs/dfs/dds/rcs only)")
    steps.add_argument("--header-doc-tokens", type=positive_arg, default=6000,
                       help="document tokens the header LLM reads (default: 6000; AutoContext reads the head)")
    steps.add_argument("--step-pool", type=positive_arg, default=None,
                       help="candidates given to rerank/diversity/RSE (default: 10)")
    steps.add_argument("--measure-diversity", action="store_true",
                       help="record context_diversity (mean pairwise cosine distance of the context pieces) "
                            "without --diversity")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output directory (records.jsonl there is reused: reruns resume)")
    return parser


def build_parser() -> argparse.ArgumentParser:
    """Parser of ``swrag eval`` (stand-alone)."""
    parser = argparse.ArgumentParser(
        prog="swrag eval",
        description="Evaluate chunking/retrieval strategies on LongBench-format QA sets "
                    "(context recall without an LLM, LongBench F1 with one).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return add_arguments(parser)


load_llm_arg = load_llm
"""The LLM of an ``--llm`` value: `swrag_integrations.evaluation.langchain_llm.load_llm`
(one loader for ``swrag eval``, ``swrag tune``, the runner and RAPTOR's summaries)."""


def _register_configs(paths: Sequence[str]) -> list[str]:
    """Register every ``--config`` file as an eval strategy; returns their names.

    Raises:
        FileNotFoundError / ValueError: a missing or malformed file (the message names it).
    """
    if not paths:
        return []
    from swrag_integrations.tuning.evaluation import config_strategy_name, register_config

    names = [config_strategy_name(p) for p in paths]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"--config files {list(paths)} share the strategy name(s) {dupes}: rename one file")
    return [register_config(p, n) for p, n in zip(paths, names)]


def _validate(args: argparse.Namespace) -> list[EvalConfig]:
    """Check every input and option (no model or ``--llm`` code is loaded); returns the grid."""
    check_llm_spec(args.llm)
    for path in args.data:
        if not Path(path).is_file():
            raise FileNotFoundError(f"no such dataset file: {path}")
        try:
            load_examples(path)
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 JSONL ({exc.reason} at byte {exc.start})") from None
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    tuned = _register_configs(getattr(args, "config", None) or [])
    strategies = list(args.strategies or ([] if tuned else _strategies(DEFAULT_STRATEGIES)))
    strategies += [name for name in tuned if name not in strategies]
    strategies = installed_strategies(strategies, "swrag eval")
    configs = make_grid(
        strategies, args.windows, args.steps or [], unit=args.unit,
        multi_query=(False, True) if args.multi_query else False,
    )
    # a tuned configuration fixes its own windows: one run each, not one per --windows value
    configs = [c for c in configs if c.strategy not in tuned or c.window == args.windows[0]]
    steps = _make_steps(None, args.diversity, args.litm, args.rse, args.rerank, args.contextual,
                        args.autocontext, args.step_pool)
    for config in configs:
        steps.check(config.strategy)
    return configs


def run_from_args(args: argparse.Namespace) -> int:
    """Run the grid described by parsed ``args``; prints where the results went.

    Every dataset file and option is checked before the LLM is loaded, so a typo
    fails at once and ``--llm module:factory`` code only runs for a valid run.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configs = _validate(args)
    need_llm = (not args.retrieval_only or args.multi_query or args.rerank == "llm"
                or args.contextual or args.autocontext)
    llm = load_llm_arg(args.llm) if need_llm else None
    rows = run_eval(
        args.data, configs, args.out,
        mode="corpus" if args.corpus else "document",
        split_passages=args.split_passages,
        budget=args.budget,
        budgets=args.budgets,
        k=args.k,
        limit=args.limit,
        half=args.half,
        retrieval_only=args.retrieval_only,
        llm=llm,
        n_queries=args.n_queries,
        progress=not args.no_progress,
        seed=args.seed,
        n_resamples=args.bootstrap,
        reports=not args.no_plots,
        diversity=args.diversity,
        litm=args.litm,
        rse=args.rse,
        rerank=args.rerank,
        contextual=args.contextual,
        autocontext=args.autocontext,
        step_pool=args.step_pool,
        header_document_tokens=args.header_doc_tokens,
        measure_diversity=True if (args.measure_diversity or args.diversity) else None,
    )
    metric = "f1" if not args.retrieval_only else "context_recall"
    print(f"{len(rows)} result rows ({len(configs)} configurations, {half_label(args.half)}) -> "
          f"{Path(args.out) / 'results.json'}")
    for row in sorted(rows, key=lambda r: -(r.get(metric) or 0))[:5]:
        step = f"/{row['step']}" if row["step"] else ""
        extra = f" +{row['steps']}" if row.get("steps") else ""
        print(f"  {row['dataset']:<20} {row['strategy']:>15} {row['window']}{step}{' +MQ' if row['multi_query'] else ''}{extra}: "
              f"{metric}={row[metric]:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] n={row['n']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m swrag_integrations.evaluation ...``.

    A bad value or a missing file is reported as one line on stderr, never a traceback
    (an unknown option exits through argparse, status 2).

    Args:
        argv: The command-line arguments (``None``: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 on success, 2 for an invalid argument or value, 3 for a
        missing file or folder.
    """
    args = build_parser().parse_args(argv)
    try:
        return run_from_args(args)
    except (FileNotFoundError, IsADirectoryError) as exc:
        print(f"swrag eval: error: {exc}", file=sys.stderr)
        return 3
    except (ValueError, TypeError) as exc:
        print(f"swrag eval: error: {exc}", file=sys.stderr)
        return 2
