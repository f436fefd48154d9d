"""``swrag tune PATH... --out CONFIG.json``: the tuner from the command line.

Mount it as a subcommand with `add_arguments` + `run` (as ``swrag`` does), or
run it alone: ``python -m swrag_integrations.tuning PATH... --out CONFIG.json``.
`index_options` / `retriever_options` read a configuration file for
``swrag index --config``, ``swrag ask --config`` and friends.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from swrag_integrations.cli.eval import positive_arg
from swrag_integrations.tuning.tune import DEFAULT_HOLDOUT, DEFAULT_MAX_CANDIDATES, DEFAULT_QUESTIONS

__all__ = ["add_arguments", "build_parser", "run", "main", "index_options", "retriever_options"]

EPILOG = """\
The configuration is chosen on self-supervised questions made from your own documents
(a sentence's salient term is the answer, the rest of the sentence -- guarded against
exact string matches -- the question), by successive halving over index and retriever
settings. Everything is kept in CONFIG.json.state/ (questions, scores, embeddings): run
the same command again to resume, or with a larger --budget-minutes to search further.

use it:
  swrag index docs/ --config CONFIG.json       (the index records it; `swrag ask` then uses it)
  swrag ask "question"
  swrag eval --data dev.jsonl --config CONFIG.json --retrieval-only --windows 512 --out results/
  python:  index = SlidingWindowIndex("./store", config="CONFIG.json")
           retriever = index.as_retriever()    # the tuned retriever settings; index.tuned_config
"""


def _minutes(text: str) -> float | None:
    if text.lower() in ("none", "0", "inf"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes (a positive number or 'none'), got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected minutes > 0 (or 'none'), got {text!r}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def _share(text: str) -> float:
    """``--holdout``: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``swrag tune`` options to ``parser``."""
    parser.add_argument("paths", nargs="+", help="files or folders to tune on (.txt .md .pdf .csv), as for swrag index")
    parser.add_argument("--out", required=True, metavar="CONFIG.json", help="where to write the configuration")
    parser.add_argument("--budget-minutes", type=_minutes, default=10.0,
                        help="wall-clock budget, question set and embedding included (default: 10; 'none': no limit)")
    parser.add_argument("--max-configs", type=positive_arg, default=DEFAULT_MAX_CANDIDATES,
                        help=f"configurations in the first rung: the budget in configurations "
                             f"(default: {DEFAULT_MAX_CANDIDATES})")
    parser.add_argument("--questions", type=positive_arg, default=DEFAULT_QUESTIONS,
                        help=f"synthetic questions (default: {DEFAULT_QUESTIONS}); the search uses those not "
                             "held out, its last rung all of them")
    parser.add_argument("--holdout", type=_share, default=DEFAULT_HOLDOUT,
                        help="share of the questions kept aside before the search for the final winner-vs-default "
                             f"test on fresh questions (default: {DEFAULT_HOLDOUT})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the questions, the sample and the order (default: 0)")
    parser.add_argument("--scope", choices=["corpus", "document"], default="corpus",
                        help="corpus: questions search every document (one index for the folder, default); "
                             "document: each question searches its own document only")
    parser.add_argument("--budget", type=positive_arg, default=1500,
                        help="context budget in tokens the configuration is tuned for (default: 1500)")
    parser.add_argument("--space", choices=["default", "small", "full"], default="default",
                        help="configuration space: default (token unit, 50-token fixed and sentence children), "
                             "small (a quick look), full (adds 100-token and 200-character children)")
    parser.add_argument("--verbatim-rate", type=_rate, default=0.1,
                        help="share of synthetic questions that keep their sentence's wording (default: 0.1, as ICT)")
    parser.add_argument("--any-gain", dest="require_significant", action="store_false",
                        help="take the winner whenever it scores higher than today's defaults on the held-out "
                             "synthetic questions (default: only when it is significantly better, paired bootstrap; "
                             "with the previous defaults the looser rule lost 9 points on multi-hop HotpotQA, "
                             "docs/eval/tuning.md)")
    parser.add_argument("--llm", default=None, metavar="SPEC",
                        help="let an LLM write the questions: 'default' (the local model), 'fake:Q1|Q2' or "
                             "'module:factory' (IMPORTS and RUNS factory(): only name code you trust)")
    parser.add_argument("--state", default=None, metavar="DIR", help="state folder (default: CONFIG.json.state)")
    parser.add_argument("--embed-backend", choices=["sentence-transformers", "onnx", "onnx-int8"], default=None,
                        help="how the bundled MiniLM runs; tune with the backend you index with")
    parser.add_argument("--no-progress", action="store_true", help="no progress output")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swrag tune", description="Tune chunking and retrieval settings to your documents, without labelled "
                                       "questions, and write them to a JSON configuration.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    return add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``swrag tune`` for parsed ``args``; prints the choice and the evidence."""
    from swrag_integrations.tuning.config import check_writable
    from swrag_integrations.tuning.space import SearchSpace
    from swrag_integrations.tuning.tune import tune

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    check_writable(args.out)  # before anything slow
    for raw in args.paths:
        if not Path(raw).exists():
            raise FileNotFoundError(f"no such file or directory: {raw}")
    llm = None
    if args.llm:
        from swrag_integrations.cli.eval import load_llm_arg

        llm = load_llm_arg(args.llm)
    embeddings = None
    if args.embed_backend:
        from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

        embeddings = MiniLMEmbeddings(backend=args.embed_backend)
    space = {"default": SearchSpace.default, "small": SearchSpace.small, "full": SearchSpace.full}[args.space]()
    config = tune(args.paths, out=args.out, budget_minutes=args.budget_minutes, max_candidates=args.max_configs,
                  n_questions=args.questions, seed=args.seed, space=space, scope=args.scope,
                  budget_tokens=args.budget, embeddings=embeddings, llm=llm, state_dir=args.state,
                  verbatim_rate=args.verbatim_rate, require_significant=args.require_significant,
                  holdout=args.holdout, progress=not args.no_progress)
    print(config.summary())
    rows = [r for r in config.evidence.get("candidates", []) if r.get("mean") is not None][:5]
    if rows:
        print("top configurations (synthetic context recall, 95% CI, questions):")
        for r in rows:
            print(f"  {100 * r['mean']:5.1f} [{100 * r['ci_low']:5.1f}, {100 * r['ci_high']:5.1f}] n={r['n']:<4} "
                  f"{r['label']}")
    print(f"wrote {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m swrag_integrations.tuning``: exit 0 ok, 2 bad input, 3 missing file."""
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"swrag tune: error: {exc}", file=sys.stderr)
        return 3
    except TimeoutError as exc:
        print(f"swrag tune: error: {exc}", file=sys.stderr)
        return 3
    except (ValueError, TypeError) as exc:
        print(f"swrag tune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("swrag tune: interrupted (run the same command again to resume)", file=sys.stderr)
        return 130


def _config(path: str | os.PathLike) -> Any:
    from swrag_integrations.tuning.config import TunedConfig

    return TunedConfig.load(path)


def index_options(path: str | os.PathLike) -> dict[str, Any]:
    """``SlidingWindowIndex`` keywords of a configuration file (``swrag index --config``)."""
    return _config(path).index_kwargs


def retriever_options(path: str | os.PathLike) -> dict[str, Any]:
    """``as_retriever`` keywords of a configuration file (``swrag ask --config``)."""
    return _config(path).retriever_kwargs
