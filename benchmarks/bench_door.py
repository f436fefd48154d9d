"""One query and one small add, timed on two code trees in one run (issue 40, item 3).

    python benchmarks/bench_door.py [--baseline-tree PATH] [--rounds 15] [--per-round 10] [--chunks 300] [--queries-only]

Each tree runs in its own worker process (``PYTHONPATH=<tree>``) that builds the same
small index with the bundled MiniLM ONNX embedding (``swrag_integrations/data/sample.md``
plus ``--chunks`` paragraphs cut from it, shuffled with a fixed seed) and then times, per
round, ``--per-round`` calls of each operation: ``similarity_search`` (k=4; and with a
metadata filter passing half the sources), the LangChain retriever's ``invoke`` (windows;
and ``expand="medium"``), the LlamaIndex retriever's ``retrieve`` and ``add_documents``
of one new source of about 2k tokens. Rounds
alternate between the trees (old, new, new, old, ...), so a load that comes and goes on
a shared machine falls on both alike. Printed: a markdown table of the medians (ms) over
all calls, and new/old; then ``/proc/loadavg`` before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
QUERIES = ["How are windows merged under the token budget?", "exact character offsets of chunks",
           "hybrid BM25 and dense search", "What does the splitter do with Chinese text?",
           "sliding window parent retriever"]
QUERY_OPS = ("similarity_search", "similarity_search (filter)", "retriever.invoke", "retriever.invoke (expand=medium)",
             "LlamaIndex retrieve")
ADD_OP = "add_documents (1 source, ~2k tokens)"
OPS = (*QUERY_OPS, ADD_OP)
FILTER = {"group": 0}  # half the sources
ADD_CHARS = 8000  # about 2k tokens of sample.md's English


def _worker(chunks: int) -> None:
    """Build the index, then answer ``round N`` lines on stdin with one JSON line of timings."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from langchain_core.documents import Document

    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.embeddings.minilm import default_embeddings

    text = (HERE / "swrag_integrations" / "data" / "sample.md").read_text(encoding="utf-8")
    paras = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40]
    rng = random.Random(7)
    docs = [Document(page_content=text, metadata={"source": "sample.md", "group": 0})]
    for i in range(chunks):
        picked = rng.sample(paras, min(3, len(paras)))
        docs.append(Document(page_content="\n\n".join(picked), metadata={"source": f"part{i}.md", "group": i % 2}))
    with tempfile.TemporaryDirectory() as tmp:
        from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

        index = SlidingWindowIndex(Path(tmp) / "idx", embedding=default_embeddings(), show_progress=False)
        index.add_documents(docs)
        retriever, medium = index.as_retriever(), index.as_retriever(expand="medium")
        llama = WindowedLlamaIndexRetriever(index)
        queries = dict(zip(QUERY_OPS, (lambda q: index.similarity_search(q, k=4),
                                       lambda q: index.similarity_search(q, k=4, filter=FILTER),
                                       retriever.invoke, medium.invoke, llama.retrieve)))
        for q in QUERIES:  # warm-up: model, probe, caches
            for run in queries.values():
                run(q)
        print(json.dumps({"ready": True}), flush=True)
        n_add = 0
        for line in sys.stdin:
            per_round, queries_only = int(line.split()[1]), "queries" in line.split()
            out: dict[str, list[float]] = {op: [] for op in OPS}
            for i in range(per_round):
                q = QUERIES[i % len(QUERIES)]
                for op, run in queries.items():
                    t = time.perf_counter()
                    run(q)
                    out[op].append(time.perf_counter() - t)
                if queries_only:
                    continue
                n_add += 1
                doc = Document(page_content=_add_text(n_add, paras), metadata={"source": f"note{n_add}.md", "group": 1})
                t = time.perf_counter()
                index.add_documents([doc])
                out[ADD_OP].append(time.perf_counter() - t)
            print(json.dumps(out), flush=True)


def _add_text(n: int, paras: list[str]) -> str:
    """A new text of about :data:`ADD_CHARS` characters: paragraphs in an order of its own."""
    rng, out, size = random.Random(1000 + n), [f"Note {n}."], 0
    while size < ADD_CHARS:
        out.append(rng.choice(paras))
        size += len(out[-1]) + 2
    return "\n\n".join(out)


def _start(tree: Path, chunks: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", "--chunks", str(chunks)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(tree))
    line = proc.stdout.readline()
    if not line or not json.loads(line).get("ready"):
        raise RuntimeError(f"the worker on {tree} did not start (see its stderr)")
    return proc


def _round(proc: subprocess.Popen, per_round: int, queries_only: bool = False) -> dict[str, list[float]]:
    proc.stdin.write(f"round {per_round}{' queries' if queries_only else ''}\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", type=Path, default=None, help="a checkout of the code to compare with")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=300, help="paragraph documents added beside sample.md")
    parser.add_argument("--queries-only", action="store_true",
                        help="time the queries only (no add between them: more calls, less noise)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.chunks)
        return 0
    load_before = Path("/proc/loadavg").read_text().strip()
    trees = {"new": HERE}
    if args.baseline_tree is not None:
        trees = {"old": args.baseline_tree.resolve(), "new": HERE}
    procs = {name: _start(tree, args.chunks) for name, tree in trees.items()}
    times: dict[str, dict[str, list[float]]] = {name: {op: [] for op in OPS} for name in trees}
    try:
        names = list(trees)
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                for op, values in _round(procs[name], args.per_round, args.queries_only).items():
                    times[name][op].extend(values)
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait(timeout=120)
    load_after = Path("/proc/loadavg").read_text().strip()
    n = args.rounds * args.per_round
    print(f"bench_door: {n} calls per operation and tree, {args.rounds} interleaved rounds; index: sample.md + "
          f"{args.chunks} documents, bundled MiniLM ONNX; trees: " + ", ".join(f"{k}={v}" for k, v in trees.items()))
    print()
    if "old" in trees:
        print("| operation | old median ms | new median ms | new/old |")
        print("|---|---:|---:|---:|")
        for op in (QUERY_OPS if args.queries_only else OPS):
            old, new = statistics.median(times["old"][op]) * 1e3, statistics.median(times["new"][op]) * 1e3
            print(f"| {op} | {old:.2f} | {new:.2f} | {new / old:.2f} |")
    else:
        print("| operation | median ms |")
        print("|---|---:|")
        for op in (QUERY_OPS if args.queries_only else OPS):
            print(f"| {op} | {statistics.median(times['new'][op]) * 1e3:.2f} |")
    print()
    print(f"/proc/loadavg before: {load_before}; after: {load_after}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
