"""``swrag raptor build|show|ask`` and ``swrag index --raptor``.

Mounted by ``swrag_integrations/cli/app.py`` (``COMMANDS["raptor"]``)::

    from swrag_integrations.methods.raptor.cli_common import store_options
    from swrag_integrations.methods.raptor.raptor.cli import add_arguments, raptor_description
    raptor_parser.description = raptor_description()
    store_options(raptor_parser)
    add_arguments(raptor_parser)          # sets func=run_from_args

and ``add_index_options(index_parser)`` + ``build_after_index(index, args)`` at the end of
``cmd_index`` for ``swrag index --raptor``. Trees are stored in the index's source
store (blob ``raptor/<name>/...``); ``build`` only rebuilds trees of sources that changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_arguments", "add_index_options", "build_after_index", "run_from_args", "raptor_description",
           "make_raptor"]


def raptor_description() -> str:
    return ("Build RAPTOR summary trees over an index's chunks (leaves keep exact offsets), show what each layer "
            "holds, or retrieve with the collapsed tree / tree traversal. Trees live in the index's source store; "
            "'build' rebuilds only trees whose source changed.")


def _tree_options(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    p = prefix
    parser.add_argument(f"--{p}name", default="raptor", help="name of the tree set in the store (default: raptor)")
    parser.add_argument(f"--{p}scope", choices=["document", "corpus"], default="document",
                        help="one tree per source (incremental, default) or one over the corpus")
    parser.add_argument(f"--{p}leaves", choices=["small", "medium", "window"], default="small",
                        help="leaves: the index's small chunks (default), medium chunks or its windows")
    parser.add_argument(f"--{p}summaries", choices=["extractive", "llm"], default="extractive",
                        help="extractive (central sentences, no LLM; default) or llm")
    parser.add_argument(f"--{p}model", default=None,
                        help="LLM for --summaries llm: local path, .gguf or hub id (default: bundled SmolLM2)")
    parser.add_argument(f"--{p}summary-tokens", type=int, default=128, help="summary length limit (default: 128)")
    parser.add_argument(f"--{p}reduction", choices=["auto", "umap", "pca"], default="auto",
                        help="dimension reduction before clustering (auto: UMAP if installed, else PCA)")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``swrag raptor`` options (store options are added by the caller)."""
    sub = parser.add_subparsers(dest="raptor_command", metavar="ACTION")
    build = sub.add_parser("build", help="build or update the trees", description="Build or update the trees.")
    _tree_options(build)
    build.add_argument("--force", action="store_true", help="rebuild unchanged trees too")
    show = sub.add_parser("show", help="what each layer holds", description="Print each tree's layers.")
    _tree_options(show)
    show.add_argument("--source", default=None, help="only this source id (default: all)")
    show.add_argument("--json", action="store_true", help="print JSON")
    ask = sub.add_parser("ask", help="retrieve a budgeted context", description="Retrieve from the trees.")
    _tree_options(ask)
    ask.add_argument("question", help="the question")
    ask.add_argument("--mode", choices=["collapsed", "traverse"], default="collapsed", help="default: collapsed")
    ask.add_argument("--budget", type=int, default=2000, help="context budget in tokens (default: 2000)")
    ask.add_argument("--top-k", type=int, default=5, help="nodes per layer in traversal (default: 5)")
    parser.set_defaults(func=run_from_args)
    return parser


def add_index_options(parser: argparse.ArgumentParser) -> None:
    """``swrag index --raptor`` (and the tree options, prefixed ``--raptor-``)."""
    parser.add_argument("--raptor", action="store_true", help="also build/update RAPTOR trees over the index")
    _tree_options(parser, prefix="raptor-")


def _opt(args: argparse.Namespace, name: str, prefix: str) -> Any:
    return getattr(args, (prefix + name).replace("-", "_"))


def make_raptor(index: Any, args: argparse.Namespace, prefix: str = "") -> Any:
    """The `RaptorIndex` the options describe."""
    from swrag_integrations.methods.raptor.build import TreeConfig
    from swrag_integrations.methods.raptor.clustering import ClusterConfig
    from swrag_integrations.methods.raptor.store import RaptorIndex
    from swrag_integrations.methods.raptor.summarise import ExtractiveSummarizer, LLMSummarizer

    index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
    tokens = _opt(args, "summary-tokens", prefix)
    if tokens <= 0:
        raise ValueError(f"--summary-tokens must be > 0, got {tokens}")
    if _opt(args, "summaries", prefix) == "llm":
        llm = None
        model = _opt(args, "model", prefix)
        if model:
            from swrag_integrations.llm import load_llama3

            llm = load_llama3(model, max_new_tokens=tokens + 32).as_langchain()
        summarizer: Any = LLMSummarizer(llm, max_tokens=tokens, cache=index.store, encoding_name=index.encoding_name)
    else:
        summarizer = ExtractiveSummarizer(tokens, encoding_name=index.encoding_name)
    config = TreeConfig(cluster=ClusterConfig(reduction=_opt(args, "reduction", prefix)))
    return RaptorIndex(index, name=_opt(args, "name", prefix), summarizer=summarizer, config=config,
                       scope=_opt(args, "scope", prefix), leaves=_opt(args, "leaves", prefix))


def build_after_index(index: Any, args: argparse.Namespace) -> None:
    """For ``swrag index --raptor``: bring the trees up to date after indexing."""
    if not getattr(args, "raptor", False):
        return
    report = make_raptor(index, args, prefix="raptor-").build()
    print(f"raptor: {report.summary()}")
    for note in report.notes[:20]:
        print(f"note: {note}")


def _show(raptor: Any, args: argparse.Namespace) -> int:
    keys = [args.source] if args.source else raptor.keys()
    if args.source and args.source not in raptor.keys():
        raise LookupError(f"no RAPTOR tree for source {args.source!r} (run `swrag raptor build` first)")
    rows = []
    for key in keys:
        tree = raptor.get(key)
        if tree is None:
            continue
        layers = tree.describe()
        for row in layers:
            k = row["layer"]
            top = [i for i in tree.layer(k)][:3]
            row["examples"] = [{"id": tree.nodes[i].node_id, "kind": tree.nodes[i].kind,
                                "text": " ".join(tree.nodes[i].text.split())[:160],
                                "leaves": [f"{s}:{a}-{b}" for s, a, b in tree.leaf_spans(i)][:4]} for i in top]
        rows.append({"tree": key, "layers": layers, "notes": tree.meta.get("notes", [])})
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("no RAPTOR trees: run `swrag raptor build`")
    for item in rows:
        print(f"tree {item['tree']}")
        for row in item["layers"]:
            print(f"  layer {row['layer']}: {row['nodes']} nodes {row['kinds']}, mean {row['mean_chars']} chars")
            for ex in row["examples"]:
                print(f"    {ex['kind']:<10} {ex['text'][:100]!r}  <- {', '.join(ex['leaves'])}")
        for note in item["notes"]:
            print(f"  note: {note}")
    return 0


def _ask(raptor: Any, args: argparse.Namespace) -> int:
    if args.budget <= 0 or args.top_k <= 0:
        raise ValueError("--budget and --top-k must be > 0")
    if not raptor.keys():
        raise LookupError("no RAPTOR trees in this index: run `swrag raptor build` first")
    ctx = raptor.search(args.question, mode=args.mode, budget_tokens=args.budget, top_k=args.top_k)
    print(f"Q: {args.question}  ({args.mode}, {ctx.text_tokens} of {args.budget} tokens)")
    for rank, item in enumerate(ctx.items, 1):
        text = " ".join(item.text.split())
        text = text if len(text) <= 100 else text[:97] + "..."
        if hasattr(item, "source_id"):
            layers = item.metadata.get("raptor_layers")
            print(f"  [{rank}] {item.source_id} {item.start}-{item.end} (layers {layers}): {text}")
        else:
            leaves = ", ".join(f"{s}:{a}-{b}" for s, a, b in item.leaves[:3])
            print(f"  [{rank}] summary L{item.layer} of {leaves}{' ...' if len(item.leaves) > 3 else ''}: {text}")
    return 0


def run_from_args(args: argparse.Namespace) -> int:
    """Run ``swrag raptor ACTION`` (needs the store options of ``swrag``)."""
    from swrag_integrations.cli.common import open_engine

    action = getattr(args, "raptor_command", None)
    if action is None:
        print("usage: swrag raptor {build,show,ask} ... (see --help)", file=sys.stderr)
        return 2
    index = open_engine(args, must_exist=True)
    raptor = make_raptor(index, args)
    if action == "build":
        report = raptor.build(force=args.force)
        print(report.summary())
        for note in report.notes[:20]:
            print(f"note: {note}")
        return 0
    if action == "show":
        return _show(raptor, args)
    return _ask(raptor, args)
