"""``swrag view``: write an offline HTML view of windows, retrieval or an answer.

Mounted by ``swrag_integrations/cli/app.py`` (``COMMANDS["view"]``): ``add_arguments`` adds the
options below to the ``view`` subparser, ``run`` runs it; the options shared with the other
subcommands come from ``swrag_integrations.cli.common``.

Subcommands::

    swrag view split [FILE] [--strategy DDS,FFS] [--window 128] [--step 3,32] [--unit token] [-o FILE]
    swrag view retrieval QUESTION [--persist-dir DIR] [--k-child 30] [--budget 1500] [--k N]
                         [--expand window] [--search-type similarity] [-o FILE]
    swrag view answer RESULT.json [--persist-dir DIR] [-o FILE]

Bad input raises ``FileNotFoundError`` (missing file or index: exit 3 from ``swrag``) or
``ValueError`` (bad option, a span outside the text: exit 2), each with a message.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping

from swrag_integrations.engine.settings import DEFAULT_K_CHILD, DEFAULT_SEARCH_TYPE

__all__ = ["add_arguments", "run", "write_answer_page", "parse_configs", "read_source"]


def _split_list(value: str, name: str, cast: Any = str) -> list[Any]:
    items = [v.strip() for v in str(value).split(",")]
    if not items or any(not v for v in items):
        raise ValueError(f"{name}: expected a comma-separated list, got {value!r}")
    out = []
    for item in items:
        try:
            out.append(cast(item))
        except ValueError:
            raise ValueError(f"{name}: {item!r} is not an integer") from None
    return out


def parse_configs(strategy: str, window: str, step: str | None, unit: str) -> list[Any]:
    """The `WindowConfig` s of comma-separated option
    values; a list of one value applies to every configuration; the step defaults to
    3 delimiters for DDS and ``window // 4`` units otherwise (as ``swrag split``)."""
    from swrag_integrations.core.windows import WindowConfig

    strategies = [s.upper() for s in _split_list(strategy, "--strategy")]
    windows = _split_list(window, "--window", int)
    steps = _split_list(step, "--step", int) if step is not None else [None]
    units = _split_list(unit, "--unit")
    n = max(len(strategies), len(windows), len(steps), len(units))
    lists = {"--strategy": strategies, "--window": windows, "--step": steps, "--unit": units}
    for name, values in lists.items():
        if len(values) not in (1, n):
            raise ValueError(f"{name}: {len(values)} values given for {n} configurations (give 1 or {n})")
    configs = []
    for i in range(n):
        pick = {name: values[i if len(values) > 1 else 0] for name, values in lists.items()}
        strat, win = pick["--strategy"], pick["--window"]
        stp = pick["--step"] if pick["--step"] is not None else (3 if strat == "DDS" else max(1, win // 4))
        configs.append(WindowConfig(strategy=strat, window_size=win, step=stp, unit=pick["--unit"]))
    return configs


def write_answer_page(result: Mapping[str, Any], path: str | Path, *, index: Any = None,
                      grounding: Any = None) -> Path:
    """Write the answer view of a RAG result (``{"question", "answer", "sources"[, "grounding"]}``,
    e.g. from ``swrag ask``) to ``path``; with ``index``, the cited sources' full texts
    are read from it (for supports outside the retrieved spans)."""
    from swrag_integrations.view.answer import AnswerView

    from swrag_integrations.engine.trace import source_piece

    texts: dict[str, str] = {}
    bases: dict[str, int] = {}
    if index is not None:
        for src in result.get("sources") or []:
            sid = src.get("source_id") if isinstance(src, Mapping) else None
            if sid is not None and sid not in texts:
                try:
                    bases[sid], texts[sid] = source_piece(index, sid)
                except LookupError:
                    pass
    view = AnswerView(result, grounding=grounding, source_texts=texts, source_bases=bases)
    return view.save(path)


def read_source(path: Path, encoding: str | None = None) -> str:
    """A text file exactly as the index reads it (`read_text`;
    ``encoding``: the fallback for a file that is not UTF-8)."""
    from swrag_integrations.ingest.files import read_text

    return read_text(path, encoding=encoding)


def _out(args: argparse.Namespace, kind: str) -> Path:
    path = Path(args.out or f"swrag-view-{kind}.html").expanduser()
    if path.is_dir():
        raise IsADirectoryError(f"--out {path} is a directory; give a file name")
    if not path.parent.exists():
        raise FileNotFoundError(f"--out: the folder {path.parent} does not exist")
    return path


def _run_split(args: argparse.Namespace) -> int:
    from swrag_integrations.cli.common import sample_path
    from swrag_integrations.view.split import WindowsView

    path = Path(args.path) if args.path else sample_path()
    text = read_source(path, args.encoding)
    configs = parse_configs(args.strategy, args.window, args.step, args.unit)
    out = _out(args, "split")
    WindowsView(text, *configs, source=path.name).save(out)
    print(f"wrote {out} ({out.stat().st_size:,} bytes): {path.name} under {len(configs)} configuration(s)")
    return 0


def _run_retrieval(args: argparse.Namespace) -> int:
    from swrag_integrations.cli.common import open_engine
    from swrag_integrations.view.retrieval import RetrievalView

    if not args.question.strip():
        raise ValueError("the question must not be empty")
    for name in ("k_child", "budget", "k"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {value}")
    if args.context_chars < 0:
        raise ValueError(f"--context-chars must be >= 0, got {args.context_chars}")
    out = _out(args, "retrieval")
    index = open_engine(args, must_exist=True)
    if index.count() == 0:
        raise ValueError("the index is empty: run `swrag index PATH...` first")
    view = RetrievalView.from_index(index, args.question, k_child=args.k_child, budget_tokens=args.budget, k=args.k,
                                    expand=args.expand, search_type=args.search_type,
                                    context_chars=args.context_chars)
    view.save(out)
    print(f"wrote {out} ({out.stat().st_size:,} bytes): {len(view.hits)} hits, {len(view.spans)} context spans")
    return 0


def _run_answer(args: argparse.Namespace) -> int:
    path = Path(args.result)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a JSON file ({exc})") from exc
    if not isinstance(result, dict) or "answer" not in result and "sentences" not in result:
        raise ValueError(f"{path}: expected a JSON object with 'answer' and 'sources' (and optionally 'grounding'), "
                         "or a grounding result with 'sentences'")
    out = _out(args, "answer")
    index = None
    if args.persist_dir is not None or args.host is not None or getattr(args, "store", None) is not None:
        from swrag_integrations.cli.common import open_engine

        index = open_engine(args, must_exist=True)
    write_answer_page(result, out, index=index)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``swrag view`` subcommands (split, retrieval, answer) to ``parser``."""
    from swrag_integrations.cli.common import ENCODING_HELP, store_options

    sub = parser.add_subparsers(dest="view", metavar="VIEW", required=True)
    out_help = "HTML file to write (default: swrag-view-{split,retrieval,answer}.html)"

    split = sub.add_parser(
        "split", help="a document under one or more splitter configurations",
        description="Write the windows of a text file (read as `swrag index` reads it) as HTML: every window as a band over the text, window "
                    "starts and delimiter units marked, a table of windows; comma-separated values give several "
                    "configurations side by side (e.g. --strategy DDS,FFS).")
    split.add_argument("path", nargs="?", help="text file (default: the bundled sample document)")
    split.add_argument("--strategy", default="DDS", help="FFS, DFS or DDS; comma-separated for several (default: DDS)")
    split.add_argument("--window", default="128", help="window size in --unit; comma-separated (default: 128)")
    split.add_argument("--step", default=None,
                       help="step: units for FFS/DFS (default window/4), delimiters for DDS (default 3); comma-separated")
    split.add_argument("--unit", default="token", help="token or char; comma-separated (default: token)")
    split.add_argument("--encoding", default=None, help=ENCODING_HELP)
    split.add_argument("-o", "--out", default=None, help=out_help)

    ret = sub.add_parser(
        "retrieval", help="a question against an index: hits, windows, budgeted spans, cuts",
        description="Run the windowed parent retrieval for a question and write what matched (with each ranker's "
                    "rank), the windows the hits widened to, the spans merged under the budget and what was cut.")
    ret.add_argument("question", help="the question")
    store_options(ret)
    ret.add_argument("--k-child", type=int, default=DEFAULT_K_CHILD,
                     help=f"small chunks fetched by stage 1 (default: {DEFAULT_K_CHILD})")
    ret.add_argument("--budget", type=int, default=1500, help="context budget in tokens (default: 1500)")
    ret.add_argument("--k", type=int, default=None, help="cap on returned spans (default: as many as fit)")
    ret.add_argument("--expand", choices=["window", "medium", "chunk"], default="window",
                     help="what a hit widens to (default: window)")
    ret.add_argument("--search-type", choices=["mmr", "similarity"], default=DEFAULT_SEARCH_TYPE,
                     help=f"dense search (default: {DEFAULT_SEARCH_TYPE})")
    ret.add_argument("--context-chars", type=int, default=240,
                     help="characters of source text shown around each window (default: 240)")
    ret.add_argument("-o", "--out", default=None, help=out_help)

    ans = sub.add_parser(
        "answer", help="an answer with its sources (and grounding, when given)",
        description="Write the answer view of a JSON result {question, answer, sources[, grounding]} (the RAG "
                    "chain's output; grounding as in docs/view.md). With --persist-dir the cited sources' texts "
                    "are read from that index.")
    ans.add_argument("result", help="JSON file")
    store_options(ans, default_dir=None)
    ans.add_argument("-o", "--out", default=None, help=out_help)


def run(args: argparse.Namespace) -> int:
    """Run ``swrag view``; returns the exit code (errors are raised, with a message)."""
    kind = getattr(args, "view", None)
    if kind == "split":
        return _run_split(args)
    if kind == "retrieval":
        return _run_retrieval(args)
    if kind == "answer":
        return _run_answer(args)
    print("swrag view: choose split, retrieval or answer (see --help)", file=sys.stderr)
    return 2
