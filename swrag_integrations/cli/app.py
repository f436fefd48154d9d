"""The ``swrag`` command.

Subcommands:
    index   index files or folders (txt/md/pdf/csv) into a persistent store
    status  the health of every part of an index
    repair  make vectors and keyword index agree with the stored sources again
    ask     answer a question from the index with the local LLM, citing sources
    view    write an HTML view of windows, retrieval or an answer
    demo    the main job: index the bundled sample and answer questions end to end
    split   print the sliding windows of a file (or the bundled sample)
    eval    evaluation grid (context recall, F1) on LongBench-style JSONL
    tune    pick chunking and retrieval settings for a corpus (no labelled questions)
    bench   run a benchmark script of a source checkout
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from swrag_integrations.cli.common import (
    EXIT_INPUT,
    EXIT_UNHEALTHY,
    EXIT_USAGE,
    ENCODING_HELP,
    answer_options,
    config_option,
    load_llm,
    missing_extra_message,
    open_engine,
    open_index,
    read_text,
    sample_path,
    store_options,
)
from swrag_integrations.core.windows import WindowConfig, iter_chunks
from swrag_integrations.engine.protocols import as_engine

__all__ = ["main", "build_parser", "sample_path", "DEMO_QUESTIONS", "COMMANDS", "DiskFullError", "disk_full_message",
           "EXIT_USAGE", "EXIT_INPUT", "EXIT_UNHEALTHY"]


def _print_windows(text: str, config: WindowConfig, limit: int | None) -> int:
    count = 0
    for chunk in iter_chunks(config, text):
        if limit is None or count < limit:
            preview = chunk.text.replace("\n", "⏎")
            if len(preview) > 90:
                preview = preview[:60] + " … " + preview[-27:]
            print(f"  [{chunk.index:3d}] {chunk.start:6d}-{chunk.end:<6d} {preview}")
        count += 1
    if limit is not None and count > limit:
        print(f"  ... {count - limit} more")
    return count


def cmd_split(args: argparse.Namespace) -> int:
    path = Path(args.path) if args.path else sample_path()
    text = read_text(path, getattr(args, "encoding", None))
    strategies = [s.strip().upper() for s in args.strategy.split(",")]
    for strategy in strategies:
        step = args.step if args.step is not None else (3 if strategy == "DDS" else max(1, args.window // 4))
        config = WindowConfig(strategy=strategy, window_size=args.window, step=step, unit=args.unit)
        print(f"{strategy} window={args.window} step={step} unit={args.unit} ({path.name})")
        total = _print_windows(text, config, args.limit)
        print(f"  {total} windows\n")
    return 0


DEMO_QUESTIONS = (
    "When was the Marrow Point Lighthouse first lit?",
    "Why was the fog signal silenced?",
    "灯塔有多高？",
)


def filter_from_options(pairs: Sequence[str]) -> dict | None:
    """The filter of ``--filter`` items (`filter_from_pairs`),
    a ``source`` value naming a file as the index does: relative to the working folder."""
    from swrag_integrations.ingest.files import source_identity
    from swrag_integrations.engine.filters import filter_from_pairs

    return filter_from_pairs(pairs, values=lambda key, value: source_identity(value) if key == "source" else value)


def _check_answer_options(args: argparse.Namespace) -> None:
    """``--k`` and ``--budget`` checked before anything is opened or loaded (one line
    naming the option, not the retriever's validation dump)."""
    from swrag_integrations.engine.settings import positive_int

    for option, value in (("--k", args.k), ("--budget", args.budget)):
        if value is not None:
            positive_int(option, value)


def _retrieval_options(index: Any, args: argparse.Namespace) -> dict:
    """The retriever settings ``--k``, ``--budget`` and ``--filter`` give (the budget
    1500 unless the index has tuned settings of its own)."""
    options = {"k": args.k} if args.k is not None else {}
    if args.budget is not None:
        options["budget_tokens"] = args.budget
    if not getattr(index, "engine", index).manifest.get("tuned"):  # the tuned settings, else the defaults
        options.setdefault("budget_tokens", 1500)
    if getattr(args, "filter", None):
        options["filter"] = filter_from_options(args.filter)
    return options


def _retrieve(index: Any, question: str, options: dict) -> dict:
    """``--retrieval-only``: the windows for ``question`` and their sources, through the
    framework-free retrieval (`trace` over the engine, the
    functions both frameworks' retrievers run) with the index's tuned settings, if any,
    under ``options``."""
    from swrag_integrations.methods.chain import _sources, format_context
    from swrag_integrations.engine.settings import RetrieverSettings
    from swrag_integrations.stores.storage import PlainDocument
    from swrag_integrations.engine.trace import trace

    engine = getattr(index, "engine", index)
    tuned = (engine.manifest.get("tuned") or {}).get("retriever") or {}
    settings = {k: v for k, v in tuned.items() if v is not None and k in RetrieverSettings.keys()}
    if isinstance(settings.get("weights"), list):
        settings["weights"] = tuple(settings["weights"])
    flt = options.get("filter")
    settings.update((k, v) for k, v in options.items() if k != "filter")
    spans = trace(engine, question, RetrieverSettings(**settings), filter=flt).spans
    docs = [PlainDocument(span.text, {**span.metadata, "source_id": span.source_id, "start_index": span.start,
                                      "end_index": span.end}) for span in spans]
    return {"question": question, "answer": None, "context": format_context(docs), "sources": _sources(docs),
            "grounding": None, "docs": docs}


def _uses_chain(args: argparse.Namespace) -> bool:
    """Whether an answer needs the LangChain chain: ``--multi-query`` (its retriever asks
    the LLM for query variants through LangChain). Everything else answers through the
    framework-free engine and the local LLM core (`answer_locally`)."""
    return bool(getattr(args, "multi_query", False))


def _answer(index, question: str, args: argparse.Namespace, llm=None) -> dict:
    options = _retrieval_options(index, args)
    if llm is None:
        retrieved = _retrieve(index, question, options)
        retrieved.pop("docs")
        return retrieved
    if not _uses_chain(args):
        from swrag_integrations.methods.chain import answer_locally

        return answer_locally(llm, question, _retrieve(index, question, options)["docs"])
    from swrag_integrations.methods.langchain_chain import build_rag_chain
    from swrag_integrations.langchain.multi_query import MultiQueryFusionRetriever

    retriever = index.as_retriever(**options)
    lc_llm = llm.as_langchain()
    retriever = MultiQueryFusionRetriever(retriever=retriever, llm=lc_llm)
    return build_rag_chain(retriever, lc_llm).invoke(question)


def _load_answering_llm(args: argparse.Namespace) -> Any:
    """The local LLM for ``ask``/``demo``, after checking that what answers with it can be
    imported (the LangChain chain and LLM adapter for ``--multi-query`` only): a missing
    extra is reported before the model is loaded, not after."""
    if _uses_chain(args):
        from swrag_integrations.methods.langchain_chain import build_rag_chain  # noqa: F401
        from swrag_integrations.llm.langchain_llm import LangChainLLM  # noqa: F401

    return load_llm(args)


def _print_answer(result: dict, *, as_json: bool = False) -> None:
    """The answer with ``[n]`` citations per sentence, unsupported sentences and claims
    marked, one entry per distinct cited span (or the whole result as JSON)."""
    if as_json:
        import json

        print(json.dumps(result, ensure_ascii=False, indent=2))
        return
    from swrag_integrations.methods.grounding.langchain import format_grounded_answer

    print(format_grounded_answer(result))  # starts with the "Q: ..." line
    print()


def cmd_index(args: argparse.Namespace) -> int:
    # a missing path is skipped with a warning (the others are indexed), and the run exits non-zero
    missing = [raw for raw in args.paths if not Path(raw).exists()]
    for raw in missing:
        dangling = f" (a symlink to the missing {os.readlink(raw)})" if Path(raw).is_symlink() else ""
        print(f"swrag: warning: no such file or directory: {raw}{dangling}; skipped", file=sys.stderr)
    if len(missing) == len(args.paths):
        raise FileNotFoundError("no such file or directory: " + ", ".join(missing))
    args.paths = [raw for raw in args.paths if raw not in missing]
    import time

    from swrag_integrations.cli.common import ingest_from_args

    if getattr(args, "bulk", False):  # refused before anything is created where the store is known
        from swrag_integrations.cli.common import _index_location
        from swrag_integrations.stores.store_uri import parse_store_uri

        if args.store and parse_store_uri(args.store).kind != "postgres":
            raise _bulk_refused(f"got --store {args.store}")
        if not args.store and not _index_location(args, must_exist=False).exists():  # a new default (Chroma) index
            raise _bulk_refused("a new index without --store is Chroma")
    address, workers = getattr(args, "ray", None), getattr(args, "workers", None)
    ray_started = False
    if address:
        # Connect before the index is opened: a bad or unreachable address writes nothing.
        from swrag_integrations.ingest.ray import connect_ray

        try:
            ray_started = connect_ray(address, num_cpus=(workers or 2) + 1,
                                      node_ip_address=getattr(args, "ray_node_ip", None))
        except ImportError:
            print("swrag: error: --ray needs the [ray] extra: pip install 'swrag-integrations[ray]'", file=sys.stderr)
            return EXIT_USAGE
    try:
        # the framework-free engine; the LangChain face only for a tuned configuration (its
        # chunking merged with the options, the configuration recorded)
        face = bool(getattr(args, "config", None))
        index = as_engine(open_index(args, must_exist=False)) if face else open_engine(args, must_exist=False)
        loading = contextlib.nullcontext()
        if getattr(args, "bulk", False):
            bulk_load = getattr(index.vectors, "bulk_load", None)
            if bulk_load is None:
                raise _bulk_refused(f"this index's store is {getattr(index.vectors, 'kind', type(index.vectors).__name__)}")
            loading = bulk_load()
        began = time.perf_counter()
        with loading:
            report = ingest_from_args(index, args)
        seconds = time.perf_counter() - began
    finally:
        if ray_started:
            import ray

            ray.shutdown()
    print(report.summary())
    how = (f"Ray at {address}, {workers or 2} embedding actors" if address else
           f"{workers} worker processes" if workers else "one process")
    rate = f", {report.chunks / seconds:.0f} chunks/s" if report.chunks and seconds > 0 else ""
    print(f"done in {seconds:.1f} s ({how}{rate})")
    if getattr(args, "graph", False):
        from swrag_integrations.cli.graph import update_graph

        update_graph(index, args)
    if getattr(args, "raptor", False):
        from swrag_integrations.cli.raptor import build_after_index

        build_after_index(index, args)
    for note in report.notes:
        print(f"note: {note}")
    print(f"index: {index.count()} small chunks from {len(index.source_ids())} sources")
    if missing:
        print(f"swrag: error: {len(missing)} of the given paths did not exist (skipped): {', '.join(missing)}",
              file=sys.stderr)
        return EXIT_INPUT
    return 0


def _bulk_refused(why: str) -> ValueError:
    """The one-line error of ``swrag index --bulk`` on a store that has no bulk load."""
    return ValueError(f"--bulk needs a PostgreSQL store (--store postgresql://...); {why}: drop --bulk")


def cmd_status(args: argparse.Namespace) -> int:
    import json

    from swrag_integrations.core.paths import cache_dir

    # the engine, not the LangChain face: status reads the parts, so it needs neither the
    # face nor (without --deep) the embedding model or bm25s
    index = open_engine(args, must_exist=True)
    status = index.status(deep=args.deep, probe=args.deep)  # the embedding model only for --deep
    if args.json:
        print(json.dumps({**status.to_dict(), "cache": str(cache_dir())}, indent=2, ensure_ascii=False))
    else:
        print("\n".join([*status.lines(), *_store_checks(index.vectors), f"cache: {cache_dir()}"]))
    return 0 if status.healthy else EXIT_UNHEALTHY


def _store_checks(storage: object) -> list[str]:
    """The line saying what ``status``/``repair`` check on a store that says so itself
    (``storage.checks``, e.g. a transactional PostgreSQL store), else none."""
    checks = getattr(storage, "checks", None)
    return [f"  checks: {checks}"] if isinstance(checks, str) and checks else []


def cmd_repair(args: argparse.Namespace) -> int:
    index = open_engine(args, must_exist=True)
    report = index.repair(deep=args.deep)
    print(f"repaired: {report.repaired} source(s), removed unfinished: {report.removed}")
    for note in report.notes:
        print(f"note: {note}")
    status = index.status()
    print("\n".join([*status.lines(), *_store_checks(index.vectors)]))
    return 0 if status.healthy else EXIT_UNHEALTHY


def cmd_ask(args: argparse.Namespace) -> int:
    if not args.question.strip():
        raise ValueError("the question must not be empty")
    _check_answer_options(args)
    # the framework-free engine, except for --multi-query (the LangChain chain) and a --config
    # (checked and recorded by the LangChain face)
    engine_only = not _uses_chain(args) and not getattr(args, "config", None)
    index = open_engine(args, must_exist=True) if engine_only else open_index(args, must_exist=True)
    if as_engine(index).count() == 0:
        raise ValueError("the index is empty: run `swrag index PATH...` first")
    llm = None if args.retrieval_only else _load_answering_llm(args)
    result = _answer(index, args.question, args, llm)
    _print_answer(result, as_json=args.json)
    if args.view:
        from swrag_integrations.cli.view import write_answer_page

        path = write_answer_page(result, args.view, index=index)
        print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Index the bundled sample into an embedded store and answer questions end to end."""
    _check_answer_options(args)
    from swrag_integrations.ingest.files import load_files

    from swrag_integrations.engine.ids import source_id_for

    store = getattr(args, "store", None)
    own_index = args.persist_dir is None and not args.host and not (store or "").startswith("chroma://")
    if args.persist_dir is None:
        from swrag_integrations.llm.loader import default_cache_dir

        # a folder per kind of store: an index's sources belong to the store its vectors are in
        args.persist_dir = str(default_cache_dir() / ("demo-index" if store in (None, "chroma") else "demo-index-milvus"))
    # the framework-free engine, as `swrag index`/`ask` (the LangChain face only for --multi-query)
    index = open_index(args, must_exist=False) if _uses_chain(args) else open_engine(args, must_exist=False)
    docs = load_files([sample_path()]).documents
    report = as_engine(index).index_documents(docs)
    if own_index:  # the demo's own store holds only this sample (not copies from other checkouts)
        keep = {source_id_for(d) for d in docs}
        stale = [sid for sid in as_engine(index).source_ids() if sid not in keep]
        if stale:
            as_engine(index).delete_sources(stale)
    print(f"indexed {sample_path().name}: {report.summary()}\n")
    llm = None if args.retrieval_only else _load_answering_llm(args)
    for question in args.question or DEMO_QUESTIONS:
        _print_answer(_answer(index, question, args, llm), as_json=args.json)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from swrag_integrations.cli.eval import run_from_args

    return run_from_args(args)


def cmd_tune(args: argparse.Namespace) -> int:
    from swrag_integrations.cli.tune import run

    return run(args)


def cmd_bench(args: argparse.Namespace) -> int:
    import runpy

    script = Path(__file__).resolve().parents[2] / "benchmarks" / f"bench_{args.name}.py"
    if not script.is_file():
        raise FileNotFoundError(f"benchmark {script} not found (benchmarks ship with a source checkout)")
    sys.argv = [str(script), *args.args]
    runpy.run_path(str(script), run_name="__main__")
    return 0


def _configure_split(split: argparse.ArgumentParser) -> None:
    split.description = "Print the windows of a text file (read as `swrag index` reads it)."
    split.add_argument("path", nargs="?", help="text file (default: the bundled sample document)")
    split.add_argument("--strategy", default="DDS", help="FFS, DFS, DDS or a comma-separated list (default: DDS)")
    split.add_argument("--window", type=int, default=128, help="window size in --unit (default: 128)")
    split.add_argument("--step", type=int, default=None, help="step: units for FFS/DFS (default window/4), delimiters for DDS (default 3)")
    split.add_argument("--unit", choices=["token", "char"], default="token", help="length unit (default: token)")
    split.add_argument("--limit", type=int, default=None, help="print at most this many windows per strategy")
    split.add_argument("--encoding", default=None, help=ENCODING_HELP)
    split.set_defaults(func=cmd_split)


def _configure_demo(demo: argparse.ArgumentParser) -> None:
    demo.description = ("Index the bundled sample document into an embedded store and answer a few questions end to "
                        "end with the local LLM.")
    store_options(demo, default_dir=None)
    answer_options(demo)
    demo.add_argument("--question", action="append", help="ask this instead of the built-in questions (repeatable)")
    demo.set_defaults(func=cmd_demo)


def _configure_index(index: argparse.ArgumentParser) -> None:
    from swrag_integrations.cli.graph import add_graph_arguments
    from swrag_integrations.cli.raptor import add_index_options as raptor_index_options
    from swrag_integrations.cli.common import add_ingest_arguments

    index.description = (
        "Index .txt, .md, .pdf and .csv files (folders are searched recursively). Re-indexing is "
        "idempotent; files that vanished or became empty are removed from the "
        "index (CSV rows and PDF pages too), unless --keep-missing. A file is indexed under the path "
        "it was reached by (a symlink's own path, not its target's). Files that cannot be read "
        "faithfully (binary, not UTF-8/UTF-16/GB18030, broken PDF) are skipped with a warning. "
        "--workers N spreads loading, cutting and embedding over N processes, --ray ADDRESS over a "
        "Ray cluster; one writer either way, and an interrupted run is finished by the next one.")
    index.add_argument("paths", nargs="+", help="files or folders")
    store_options(index)
    index.add_argument("--encoding", default=None, help=ENCODING_HELP)
    index.add_argument("--errors", choices=["strict", "replace"], default="strict",
                       help="'replace' indexes undecodable bytes as U+FFFD instead of skipping the file (lossy)")
    index.add_argument("--keep-missing", action="store_true",
                       help="do not remove sources of files that are gone or empty under the given paths")
    add_graph_arguments(index)
    raptor_index_options(index)
    config_option(index, "its chunking, recorded in the index with its retriever settings (which "
                         "`swrag ask` then uses)")
    add_ingest_arguments(index)
    index.add_argument("--strategy", choices=["FFS", "DFS", "DDS"], type=str.upper, default=None, help="window strategy (default: small chunks with W=6/S=3 windows)")
    index.add_argument("--window", type=int, default=None, help="window size in tokens for --strategy")
    index.add_argument("--step", type=int, default=None, help="step for --strategy")
    index.set_defaults(func=cmd_index)


def _configure_status(status: argparse.ArgumentParser) -> None:
    status.description = ("Print the index's sources, unfinished writes and the health of its vectors "
                          "and keyword index. Exit code 4 when a repair is needed.")
    store_options(status)
    status.add_argument("--deep", action="store_true",
                        help="also check the vectors with the embedding model (loads it), every vector id and the "
                             "source store's integrity")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_status)


def _configure_repair(repair: argparse.ArgumentParser) -> None:
    repair.description = ("Finish interrupted writes, write missing vectors, rebuild a damaged vector "
                          "collection and the keyword index, all from the source store (the files "
                          "are not needed).")
    store_options(repair)
    repair.add_argument("--deep", action="store_true", help="check every source's vectors, not only the counts")
    repair.set_defaults(func=cmd_repair)


def _configure_ask(ask: argparse.ArgumentParser) -> None:
    ask.description = "Answer a question from the index with the local LLM and cite the source windows."
    ask.add_argument("question", help="the question")
    store_options(ask)
    answer_options(ask)
    config_option(ask, "the index must have its chunking; its retriever settings are used (and recorded in the "
                       "index)")
    ask.add_argument("--filter", action="append", metavar="KEY=VALUE", default=None,
                     help="only sources whose metadata has KEY=VALUE; also KEY!=VALUE and, for numbers, KEY>VALUE, "
                          ">=, <, <=. Repeatable: different keys must all hold, a key given twice matches either "
                          "value. A source path is taken relative to the working folder, as `swrag index` takes "
                          "it, e.g. --filter source=docs/a.md --filter year>=2020")
    ask.add_argument("--view", metavar="FILE", default=None,
                     help="also write the answer with its sources as a self-contained HTML page")
    ask.set_defaults(func=cmd_ask)


def _configure_raptor(raptor: argparse.ArgumentParser) -> None:
    from swrag_integrations.cli.raptor import add_arguments, raptor_description

    raptor.description = raptor_description()
    store_options(raptor)
    add_arguments(raptor)


def _configure_view(view: argparse.ArgumentParser) -> None:
    from swrag_integrations.cli.view import add_arguments, run

    view.description = ("Write one self-contained HTML file (no network): the windows of a document under one or "
                        "more splitter configurations, a question against an index, or an answer with its sources.")
    add_arguments(view)
    view.set_defaults(func=run)


def _configure_eval(ev: argparse.ArgumentParser) -> None:
    from swrag_integrations.cli.eval import add_arguments

    ev.description = "Evaluate strategies on LongBench-style JSONL (context recall, F1)."
    add_arguments(ev)
    ev.set_defaults(func=cmd_eval)


def _configure_tune(tune: argparse.ArgumentParser) -> None:
    from swrag_integrations.cli.tune import EPILOG, add_arguments

    tune.description = ("Tune chunking and retrieval settings to your documents, without labelled questions, and "
                        "write them to a JSON configuration.")
    tune.epilog = EPILOG
    tune.formatter_class = argparse.RawDescriptionHelpFormatter
    add_arguments(tune)
    tune.set_defaults(func=cmd_tune)


def _configure_bench(bench: argparse.ArgumentParser) -> None:
    bench.description = "Run benchmarks/bench_NAME.py of a source checkout."
    bench.add_argument("name", choices=["splitters", "retrieval", "backends", "embeddings", "llm", "ingest", "growth"], help="which benchmark")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    bench.set_defaults(func=cmd_bench)


COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "split": ("print the windows of a text file", _configure_split),
    "demo": ("index the bundled sample and answer questions (the main job)", _configure_demo),
    "index": ("index files or folders", _configure_index),
    "status": ("health of an index", _configure_status),
    "repair": ("repair an index from its stored sources", _configure_repair),
    "ask": ("answer a question from the index", _configure_ask),
    "raptor": ("RAPTOR summary trees over an index", _configure_raptor),
    "view": ("write an HTML view of windows, retrieval or an answer", _configure_view),
    "eval": ("run the evaluation grid", _configure_eval),
    "tune": ("pick chunking and retrieval settings for your documents (no labelled questions)", _configure_tune),
    "bench": ("run a benchmark (source checkout)", _configure_bench),
}
"""Subcommand -> (one-line help, the function that adds its arguments). A subcommand's
arguments, and so its modules, are set up only when it is the one being run."""


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on a command line (the first argument that is not an option), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``swrag`` parser. Every subcommand is listed; only the arguments of ``commands``
    are set up (their modules imported), or every subcommand's when ``commands`` is ``None``."""
    chosen = set(COMMANDS if commands is None else commands)
    from swrag_integrations import __version__

    parser = argparse.ArgumentParser(
        prog="swrag",
        description="Sliding-window RAG: split documents into overlapping windows (FFS, DFS, DDS).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, configure) in COMMANDS.items():
        subparser = sub.add_parser(name, help=help_text, description=help_text)
        if name in chosen:
            configure(subparser)
    return parser


DISK_NEARLY_FULL = 64 << 20
"""Free bytes below which a store's unexplained write error is taken for a full disk."""

_DISK_FULL_TEXTS = ("database or disk is full", "no space left on device", "(os error 28)", "disk quota exceeded")


class DiskFullError(OSError):
    """The disk holding the index ran out of space (the message says where and what to do)."""


def disk_full_message(exc: BaseException, persist_dir: str | os.PathLike | None) -> str | None:
    """One line saying the disk is full, when ``exc`` (or an exception it was raised
    from) means that, else ``None``.

    A full disk is: an ``OSError`` with ``ENOSPC``/``EDQUOT``; SQLite's "database or
    disk is full" (the source store, Chroma's own database); or an internal Chroma
    error (it reports a failed write as e.g. "Error in compaction: Failed to apply
    logs to the metadata segment", without the reason) while the disk holding
    ``persist_dir`` has less than `DISK_NEARLY_FULL` bytes free.
    """
    import errno
    import shutil

    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    free = None
    if persist_dir is not None:
        folder = Path(persist_dir).expanduser().absolute()
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            free = None
    full = any(isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) for e in chain)
    full = full or any(text in str(e).lower() for e in chain for text in _DISK_FULL_TEXTS)
    full = full or (free is not None and free < DISK_NEARLY_FULL and
                    any(type(e).__module__.startswith("chromadb") and type(e).__name__ == "InternalError"
                        for e in chain))
    if not full:
        return None
    where = f" holding {persist_dir}" if persist_dir is not None else " of the index (the Chroma server's?)"
    left = f" ({free // 1024} KiB free)" if free is not None else ""
    return (f"no space left on the disk{where}{left}: free some space (or use another --persist-dir) and run the "
            f"command again; an interrupted write is finished by the next one or by `swrag repair` "
            f"[{type(chain[0]).__name__}: {chain[0]}]")


def _run(args: argparse.Namespace) -> int:
    """``args.func(args)``, a full disk raised as `DiskFullError`."""
    try:
        return args.func(args)
    except Exception as exc:
        persist = None if getattr(args, "host", None) else getattr(args, "persist_dir", None)
        message = disk_full_message(exc, persist)
        if message is None:
            raise
        raise DiskFullError(message) from exc


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"swrag: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``swrag`` command; returns the exit code (never raises for bad input).

    Exit codes: 0 ok, 2 bad usage or input, 3 missing file/index, server down, damaged
    or locked index, a full disk, 4 ``status``/``repair``: the index needs a repair, 1 an unexpected
    error (``SWRAG_DEBUG=1`` prints its traceback).

    Args:
        argv: The arguments after ``swrag``; ``None`` reads ``sys.argv``.
    """
    import sqlite3
    import warnings

    argv = list(sys.argv[1:] if argv is None else argv)
    command = command_of(argv)
    try:
        parser = build_parser([command] if command in COMMANDS else [])
        args = parser.parse_args(argv)
    except ModuleNotFoundError as exc:  # the subcommand's extra is not installed
        message = missing_extra_message(exc, command)
        if message is None:
            raise
        print(f"swrag: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    warnings.showwarning = _show_warning
    try:
        return _run(args)
    except DiskFullError as exc:
        print(f"swrag: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("swrag: interrupted", file=sys.stderr)
        return 130
    except (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError) as exc:
        print(f"swrag: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except (ConnectionError, TimeoutError, sqlite3.DatabaseError) as exc:
        print(f"swrag: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except (ValueError, TypeError, OverflowError, LookupError) as exc:
        print(f"swrag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:
        message = missing_extra_message(exc, command)
        if message is None:
            return _unexpected(exc)
        print(f"swrag: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:  # a part installed without what it needs: the message says what to install
        print(f"swrag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a message, never a traceback
        # the engine's own errors: this handler must not need a framework (a [cli] install has none)
        from swrag_integrations.engine.engine import IndexDamagedError
        from swrag_integrations.stores.sources import SourceStoreError

        if isinstance(exc, (IndexDamagedError, SourceStoreError)):
            print(f"swrag: error: {exc}", file=sys.stderr)
            return EXIT_INPUT
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> int:
    """Report an unexpected error in one line (its traceback with ``SWRAG_DEBUG=1``); exit code 1."""
    if os.environ.get("SWRAG_DEBUG"):
        raise exc
    print(f"swrag: error: unexpected {type(exc).__name__}: {exc} (set SWRAG_DEBUG=1 for the traceback)",
          file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
