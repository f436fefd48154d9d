"""Measurements of graph retrieval (not a test; see docs/eval/graph.md).

``python -m swrag_integrations.graph.measure eval --data F.jsonl --out DIR [swrag eval options]``
runs ``swrag eval`` with the graph strategies plus variants registered here
(``hipporag-ppr``: the PPR ranking alone, HippoRAG-2 passage seeds; ``hipporag-ppr-only``:
PPR from phrases alone, no hybrid signal at all; ``hipporag-chunks[-ppr]``: graph passages
are the 50-token small chunks instead of medium chunks; ``graphrag-local-graph``: local
search ranking alone; ``*-llm``: the local LLM's triples) and appends each graph build's report (time, size, extraction counts)
to ``DIR/graph_builds.jsonl``.

``python -m swrag_integrations.graph.measure global --data F.jsonl --out DIR`` measures
global search's cost (LLM calls, prompt/answer tokens, seconds) as the number of
community reports grows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..evaluation.pipelines import PipelineSpec, register_pipeline
from .evaluation import GraphRAGLocalLLMPipeline, GraphRAGLocalPipeline, HippoRAGLLMPipeline, HippoRAGPipeline

BUILDS: Path | None = None


def _record(pipe: Any) -> None:
    if BUILDS is None:
        return
    report = pipe.build_report
    row = {"strategy": type(pipe).__name__, "options": pipe.options, "sources": len(pipe.sources),
           "chunks": pipe.chunks, "graph_seconds": round(pipe.graph_seconds, 2), "stats": report.stats,
           "extraction": report.extraction, "synonym_edges": report.synonym_edges,
           "graph_bytes": len(pipe.graph.to_bytes())}
    communities = getattr(pipe.searcher, "communities", None)
    if communities is not None:
        row["communities"] = len(communities)
        row["levels"] = 1 + max((c.level for c in communities), default=-1)
    with BUILDS.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


class _Recorded:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        _record(self)


class HippoRAGRecorded(_Recorded, HippoRAGPipeline):
    pass


class HippoRAGPPR(_Recorded, HippoRAGPipeline):
    options = {"graph_weight": 1.0}


class HippoRAGPPROnly(_Recorded, HippoRAGPipeline):
    options = {"graph_weight": 1.0, "passage_seed_weight": 0.0}


class HippoRAGChunks(_Recorded, HippoRAGPipeline):
    unit = "chunks"


class HippoRAGChunksPPR(_Recorded, HippoRAGPipeline):
    unit = "chunks"
    options = {"graph_weight": 1.0}


class HippoRAGLLMRecorded(_Recorded, HippoRAGLLMPipeline):
    pass


class GraphRAGLocalRecorded(_Recorded, GraphRAGLocalPipeline):
    pass


class GraphRAGLocalGraph(_Recorded, GraphRAGLocalPipeline):
    options = {"graph_weight": 1.0}


class GraphRAGLocalLLMRecorded(_Recorded, GraphRAGLocalLLMPipeline):
    pass


VARIANTS = {
    "hipporag": "HippoRAGRecorded", "hipporag-ppr": "HippoRAGPPR", "hipporag-ppr-only": "HippoRAGPPROnly",
    "hipporag-chunks": "HippoRAGChunks", "hipporag-chunks-ppr": "HippoRAGChunksPPR",
    "hipporag-llm": "HippoRAGLLMRecorded", "graphrag-local": "GraphRAGLocalRecorded",
    "graphrag-local-graph": "GraphRAGLocalGraph", "graphrag-local-llm": "GraphRAGLocalLLMRecorded",
}


def run_eval_cmd(argv: list[str]) -> int:
    global BUILDS
    from ..evaluation.cli import build_parser, run_from_args

    for name, cls in VARIANTS.items():
        register_pipeline(name, PipelineSpec(f"{__name__}:{cls}", None, needs_embeddings=True))
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    BUILDS = out / "graph_builds.jsonl"
    return run_from_args(args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("eval", "global"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "eval":
        return run_eval_cmd(argv[1:])
    return run_global_cmd(argv[1:])


def run_global_cmd(argv: list[str]) -> int:  # filled in with the global search
    raise NotImplementedError


if __name__ == "__main__":
    raise SystemExit(main())
