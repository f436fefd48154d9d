"""Measurements of graph retrieval (not a test; see docs/eval/graph.md).

``python -m swrag_integrations.evaluation.methods.graph_measure eval --data F.jsonl --out DIR [swrag eval options]``
runs ``swrag eval`` with the graph strategies plus variants registered here
(``hipporag-ppr``: the PPR ranking alone, HippoRAG-2 passage seeds; ``hipporag-ppr-only``:
PPR from phrases alone, no hybrid signal at all; ``hipporag-w03``/``-w07``: graph_weight 0.3 / 0.7; ``hipporag-noseeds``: no passage
seeds from the hybrid ranking; ``hipporag-k20``/``-k15``: 20 / 15 ranked passages instead of 30 (budget left for widening);
``hipporag-whole``: every chunk of a ranked passage is a hit
(no focus chunk); ``hipporag-chunks[-ppr]``: graph passages
are the 50-token small chunks instead of medium chunks; ``graphrag-local-graph``: local
search ranking alone; ``*-llm``: the local LLM's triples) and appends each graph build's report (time, size, extraction counts)
to ``DIR/graph_builds.jsonl``.

``python -m swrag_integrations.evaluation.methods.graph_measure table DIR [DIR...]`` prints context and source
recall with 95% bootstrap CIs and the paired bootstrap against ``parent`` over the
records of those folders.

``python -m swrag_integrations.evaluation.methods.graph_measure global --data F.jsonl --out DIR`` measures
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

from swrag_integrations.evaluation.pipelines import PipelineSpec, register_pipeline
from swrag_integrations.evaluation.methods.graph import GraphRAGLocalLLMPipeline, GraphRAGLocalPipeline, HippoRAGLLMPipeline, HippoRAGPipeline

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


class HippoRAGW03(_Recorded, HippoRAGPipeline):
    options = {"graph_weight": 0.3}


class HippoRAGW07(_Recorded, HippoRAGPipeline):
    options = {"graph_weight": 0.7}


class HippoRAGNoSeeds(_Recorded, HippoRAGPipeline):
    options = {"passage_seed_weight": 0.0}


class HippoRAGWhole(_Recorded, HippoRAGPipeline):
    options = {"focus": False}


class HippoRAGK20(_Recorded, HippoRAGPipeline):
    k_passages = 20


class HippoRAGK15(_Recorded, HippoRAGPipeline):
    k_passages = 15


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
    "hipporag": HippoRAGRecorded, "hipporag-ppr": HippoRAGPPR, "hipporag-ppr-only": HippoRAGPPROnly,
    "hipporag-w03": HippoRAGW03, "hipporag-w07": HippoRAGW07, "hipporag-noseeds": HippoRAGNoSeeds,
    "hipporag-whole": HippoRAGWhole, "hipporag-k20": HippoRAGK20, "hipporag-k15": HippoRAGK15,
    "hipporag-chunks": HippoRAGChunks, "hipporag-chunks-ppr": HippoRAGChunksPPR,
    "hipporag-llm": HippoRAGLLMRecorded, "graphrag-local": GraphRAGLocalRecorded,
    "graphrag-local-graph": GraphRAGLocalGraph, "graphrag-local-llm": GraphRAGLocalLLMRecorded,
}


def run_eval_cmd(argv: list[str]) -> int:
    global BUILDS
    from swrag_integrations.cli.eval import build_parser, run_from_args

    for name, cls in VARIANTS.items():
        register_pipeline(name, PipelineSpec(cls, None, needs_embeddings=True))
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    BUILDS = out / "graph_builds.jsonl"
    return run_from_args(args)


def table(dirs: list[str], baseline: str = "parent", seed: int = 0, n_resamples: int = 1000) -> str:
    """Markdown table over the ``records.jsonl`` of ``dirs``: per strategy the means with
    95% bootstrap CIs of context recall and source recall, and the paired bootstrap of
    each against ``baseline`` on the same questions."""
    from swrag_integrations.evaluation.metrics import bootstrap_ci, paired_bootstrap

    records: dict[str, dict[str, dict]] = {}
    for folder in dirs:
        for line in (Path(folder) / "records.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if not row.get("steps"):
                records.setdefault(row["strategy"], {})[row["qid"]] = row
    base = records.get(baseline, {})
    lines = ["| strategy | n | context recall [95% CI] | vs parent (paired) | source recall [95% CI] | vs parent (paired) |",
             "|---|---|---|---|---|---|"]
    for strategy, rows in records.items():
        qids = sorted(rows)
        cells = [strategy, str(len(qids))]
        for metric in ("context_recall", "source_recall"):
            vals = [rows[q][metric] for q in qids]
            if any(v is None for v in vals):
                cells += ["-", "-"]
                continue
            lo, hi = bootstrap_ci(vals, seed=seed, n_resamples=n_resamples)
            cells.append(f"{100 * sum(vals) / len(vals):.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
            shared = [q for q in qids if q in base and base[q][metric] is not None]
            if strategy == baseline or not shared:
                cells.append("")
                continue
            got = paired_bootstrap([rows[q][metric] for q in shared], [base[q][metric] for q in shared], seed=seed,
                                   n_resamples=n_resamples)
            cells.append(f"{100 * got['diff']:+.1f} [{100 * got['ci_low']:+.1f}, {100 * got['ci_high']:+.1f}]"
                         + (" *" if got["significant"] else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("eval", "global", "table"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "eval":
        return run_eval_cmd(argv[1:])
    if argv[0] == "table":
        print(table(argv[1:]))
        return 0
    return run_global_cmd(argv[1:])


GLOBAL_QUESTIONS = ("What are the main topics of these documents?",
                    "Which people appear in these documents, and what are they known for?")


def run_global_cmd(argv: list[str]) -> int:
    """Global search cost as the number of reports grows (local LLM, extractive reports)."""
    import tempfile

    from swrag_integrations.evaluation.datasets import build_corpus, load_examples
    from swrag_integrations.evaluation.embeddings import default_embeddings
    from swrag_integrations.llm import load_llama3
    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.methods.graph.graph import build_graph
    from swrag_integrations.methods.graph.graphrag import GraphRAG

    parser = argparse.ArgumentParser(prog="measure global")
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--limit", type=int, default=30, help="rows of the data file forming the corpus")
    parser.add_argument("--split-passages", action="store_true")
    parser.add_argument("--counts", default="1,2,4,8,16", help="numbers of reports searched")
    parser.add_argument("--map-tokens", type=int, default=800)
    parser.add_argument("--reduce-tokens", type=int, default=800)
    parser.add_argument("--max-new-tokens", type=int, default=120)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = build_corpus(load_examples(args.data, limit=args.limit), split=args.split_passages)
    emb = default_embeddings(out / "embeddings.sqlite")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        index = SlidingWindowIndex(tmp, embedding=emb, show_progress=False, strategy="DDS", window_size=512, step=3)
        index.add_texts([s.text for s in sources], ids=[s.source_id for s in sources])
        t0 = time.perf_counter()
        graph, report = build_graph(index)
        searcher = GraphRAG(index, graph)
        communities = searcher.build_communities()
        searcher.build_reports()
        setup = {"sources": len(sources), "graph": report.stats, "graph_seconds": round(time.perf_counter() - t0, 2),
                 "communities": len(communities), "levels": searcher.levels(),
                 "leaves": len(searcher.level_communities(None)), "report_seconds": searcher.report_stats["seconds"]}
        print(json.dumps(setup), flush=True)
        llm = load_llama3(max_new_tokens=args.max_new_tokens).as_langchain()
        for count in [int(c) for c in args.counts.split(",")]:
            gs = searcher.global_search(llm, max_reports=count, map_tokens=args.map_tokens,
                                        reduce_tokens=args.reduce_tokens)
            for question in GLOBAL_QUESTIONS:
                result = gs.invoke(question)
                row = {"reports": count, "question": question, **result.stats, "answer": result.answer[:300],
                       "top_points": [p[:2] for p in result.points[:3]]}
                rows.append(row)
                print(json.dumps(row, ensure_ascii=False), flush=True)
        index.engine.store.close()
    (out / "global_cost.json").write_text(json.dumps({"setup": setup, "rows": rows}, indent=2, ensure_ascii=False),
                                          encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
