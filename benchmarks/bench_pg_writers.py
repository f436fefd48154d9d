"""Benchmark: concurrent writers of different sources on the PostgreSQL store.

    python benchmarks/bench_pg_writers.py [--store postgresql://... | pgserver] [--writers 1,4]
                                          [--sources 40] [--doc-chars 20000]
                                          [--pg-folder DIR --database bench --collection NAME]

Each writer is its own process with its own index handle; together they write
``--sources`` sources (corpus documents of about ``--doc-chars`` characters, real text,
about 100 chunks each, under names no other writer uses) through the one write path
(``write_planned``) with precomputed random unit vectors, so embedding is excluded. The
figure is the chunks written per second of wall time from the first writer's start to the
last one's end, for each number of writers, in one run (the ratio is what counts on a
shared machine). ``pgserver`` starts a private PostgreSQL for the run (`PrivatePostgres`:
a 0700 folder, Unix socket only) and stops it at the end: in a temporary folder, or in
``--pg-folder`` (kept), e.g. the one ``bench_growth.py --store pgserver --keep DIR`` left in
``DIR/pg``, so that with that index's ``--collection`` the writers add to an index of 1M
chunks. Goal (issue 43): 4 writers at least 2x one writer's throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAMP = f"{int(time.time())}-{os.getpid()}"
"""Part of every source name: a run on a kept index writes new sources, never ones an earlier run wrote
(those would be unchanged, so skipped, and the round would time nothing)."""
CORPUS = Path(os.environ.get("SWRAG_DATA", "/work/shared/data")) / "corpus" / "en.txt"


def _writer(uri: str, collection: str, tag: str, first: int, count: int, doc_chars: int) -> None:
    """Write ``count`` sources (corpus pieces ``first..``) as writer ``tag``."""
    import numpy as np

    from swrag_integrations.engine.engine import IndexEngine
    from swrag_integrations.engine.records import plan_source
    from swrag_integrations.ingest.writer import write_planned
    from swrag_integrations.stores.storage import PlainDocument

    class Unused:  # vectors are given: the embedding is never called for chunks
        def embed_documents(self, texts):
            raise AssertionError("precomputed vectors expected")

        def embed_query(self, text):
            return [1.0] + [0.0] * 383

    text = CORPUS.read_text(encoding="utf-8")
    engine = IndexEngine.open(storage=uri, collection_name=collection, embedding=Unused())
    rng = np.random.default_rng(first)
    planned = []
    for i in range(first, first + count):
        piece = text[(i * doc_chars) % max(1, len(text) - doc_chars):][:doc_chars]
        rec = plan_source(PlainDocument(piece, {"source": f"{tag}-{i}"}), engine.config)
        vecs = rng.standard_normal((rec.n_chunks, 384)).astype(np.float32)
        planned.append((rec, vecs / np.linalg.norm(vecs, axis=1, keepdims=True)))
    print(json.dumps({"ready": time.time()}), flush=True)
    sys.stdin.readline()  # start together
    write_planned(engine, planned)
    print(json.dumps({"done": time.time(), "chunks": sum(r.n_chunks for r, _ in planned)}), flush=True)
    engine.close()


def run(uri: str, writers: int, sources: int, doc_chars: int, round_: int) -> dict:
    """One measurement: ``writers`` processes sharing ``sources`` sources."""
    per = sources // writers
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, __file__, "--child", uri, "--tag", f"{STAMP}r{round_}w{w}",
                               "--first", str(round_ * sources + w * per), "--count", str(per),
                               "--doc-chars", str(doc_chars)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env) for w in range(writers)]
    for p in procs:
        json.loads(p.stdout.readline())
    start = time.time()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    ends = [json.loads(p.stdout.readline()) for p in procs]
    for p in procs:
        p.wait(timeout=600)
    chunks = sum(e["chunks"] for e in ends)
    wall = max(e["done"] for e in ends) - start
    return {"writers": writers, "sources": per * writers, "chunks": chunks, "wall_s": wall, "chunks_per_s": chunks / wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default="pgserver")
    parser.add_argument("--writers", default="1,4")
    parser.add_argument("--sources", type=int, default=40)
    parser.add_argument("--doc-chars", type=int, default=20000)
    parser.add_argument("--collection", default="bench_writers",
                        help="the index's collection (another index's, e.g. bench_growth's, measures at its size)")
    parser.add_argument("--pg-folder", default=None,
                        help="with --store pgserver: the data folder of a PostgreSQL to start again and keep "
                             "(e.g. bench_growth.py --keep DIR --store pgserver leaves DIR/pg)")
    parser.add_argument("--database", default="bench", help="with --store pgserver: the database")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _writer(args.child, args.collection, args.tag, args.first, args.count, args.doc_chars)
        return 0
    server = None
    uri = args.store
    if uri == "pgserver":  # a private PostgreSQL: a temporary one, or the one kept in --pg-folder
        from swrag_integrations.stores.private_postgres import PrivatePostgres

        server = PrivatePostgres(args.pg_folder) if args.pg_folder else PrivatePostgres(prefix="swrag-bench-pg-")
        uri = server.create_database(args.database, exist_ok=bool(args.pg_folder))
    try:
        rows = [run(uri, int(n), args.sources, args.doc_chars, i) for i, n in enumerate(args.writers.split(","))]
        with open("/proc/loadavg") as fh:
            load = " ".join(fh.read().split()[:3])
        print(f"PostgreSQL writers; {os.cpu_count()} cores, load {load}")
        print("| writers | sources | chunks | wall s | chunks/s | vs 1 writer (mean of its rounds) |")
        print("|---:|---:|---:|---:|---:|---:|")
        ones = [r["chunks_per_s"] for r in rows if r["writers"] == 1] or [rows[0]["chunks_per_s"]]
        one = sum(ones) / len(ones)  # rounds alternate (--writers 1,4,1,4): caches warm up as the index is written
        for r in rows:
            print(f"| {r['writers']} | {r['sources']} | {r['chunks']:,} | {r['wall_s']:.1f} | {r['chunks_per_s']:.0f} | "
                  f"{r['chunks_per_s'] / one:.2f}x |")
        for n in sorted({r["writers"] for r in rows}):
            mean = sum(r["chunks_per_s"] for r in rows if r["writers"] == n) / sum(r["writers"] == n for r in rows)
            print(f"{n} writer(s): {mean:.0f} chunks/s on average over their rounds, {mean / one:.2f}x one writer's "
                  "average (goal for 4: >= 2x)")
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
