"""``swrag index --graph``: build or update the passage-phrase graph of an index.

Mounted on the ``index`` subcommand by `add_graph_arguments` (options) and
`update_graph` (run after the files are indexed). The graph is stored in the
index's source store (blob ``graph``, no pickle) and kept in step incrementally: a
re-run extracts only new or changed sources and drops vanished ones.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_graph_arguments", "update_graph"]


def add_graph_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--graph``, ``--graph-unit``, ``--graph-llm`` and ``--graph-rebuild`` to ``parser``."""
    from swrag_integrations.methods.graph.graph import UNITS

    group = parser.add_argument_group("graph retrieval (HippoRAG / GraphRAG)")
    group.add_argument("--graph", action="store_true",
                       help="also build or update the passage-phrase graph of the index (stored with it)")
    group.add_argument("--graph-unit", choices=list(UNITS), default="medium",
                       help="graph passages: small chunks, medium chunks (default), windows or whole sources")
    group.add_argument("--graph-llm", action="store_true",
                       help="extract triples with the local LLM (slow: seconds per passage) instead of the rule "
                            "extractor (capitalised/quoted spans, jieba part-of-speech tags)")
    group.add_argument("--graph-rebuild", action="store_true",
                       help="discard the stored graph and build it again (needed to change unit or extractor)")
    return parser


def update_graph(index: Any, args: argparse.Namespace, *, llm: Any = None) -> Any:
    """Build or update the graph of ``index`` as the options say; prints a summary and
    returns the `BuildReport`. ``llm``: a LangChain LLM for ``--graph-llm``
    (default the local model)."""
    from swrag_integrations.methods.graph.extraction import LLMExtractor, RuleExtractor
    from swrag_integrations.methods.graph.graph import build_graph, load_graph, save_graph

    index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
    extractor: Any
    if getattr(args, "graph_llm", False):
        if llm is None:
            from swrag_integrations.llm import load_llama3
            from swrag_integrations.llm.loader import default_cache_dir

            print("loading the LLM for triple extraction...", file=sys.stderr)
            llm = load_llama3(max_new_tokens=160).as_langchain()
            cache = default_cache_dir() / "graph" / "extraction.sqlite"
        else:
            cache = None
        extractor = LLMExtractor(llm, cache_path=cache)
    else:
        extractor = RuleExtractor()
    with index.store.writer_lock(index.lock_timeout):
        graph = None if getattr(args, "graph_rebuild", False) else load_graph(index)
        unit = getattr(args, "graph_unit", "medium")
        if graph is not None and (graph.meta.get("unit"), graph.meta.get("extractor")) != (unit, extractor.fingerprint()):
            raise ValueError(f"the stored graph was built with unit={graph.meta.get('unit')!r}, extractor="
                             f"{graph.meta.get('extractor')!r}; pass --graph-rebuild to build it again with these options")
        graph, report = build_graph(index, extractor, graph=graph, unit=unit, show_progress=index.show_progress)
        save_graph(graph, index)
    close = getattr(extractor, "close", None)
    if close is not None:
        close()
    print(report.summary())
    if report.extraction.get("calls"):
        e = report.extraction
        print(f"graph extraction: {e['calls']} LLM calls ({e['cached']} cached), {e['failed']} unusable answers, "
              f"{e['fallback']} passages from the rule extractor instead")
    return report
