"""Benchmark: how the index grows -- size on disk, memory and query latency at 10k / 100k / 1M chunks.

    python benchmarks/bench_growth.py [--levels 10000,100000,1000000] [--real-upto 100000] [--workers 2] [--backend onnx-int8]
                                      [--store chroma | milvus | milvus:PATH.db | postgresql://... | pgserver]
                                      [--probes 5]
                                      [--queries 50] [--doc-chars 20000] [--profile] [--out results.json]

The shared corpora (``en.txt`` + ``zh.txt``) are cut into documents of about
``--doc-chars`` characters (at a line break) -- about 100k small chunks of 50 tokens in
all -- and the index is grown level by level in one index, in the store ``--store`` names
(the user-facing choice, ``storage=`` / ``swrag --store``: default the embedded Chroma with
the keyword index in tantivy; ``milvus`` or ``milvus:PATH.db`` for Milvus Lite, keyword search
by Milvus's BM25; ``postgresql://USER@HOST/DB`` for PostgreSQL + pgvector, sources, vectors
and keyword search (BM25 in SQL) in one database, or ``pgserver``: a PostgreSQL the benchmark
starts itself in its temporary folder with ``pgserver``, on a Unix socket only, stopped at the end):

* chunks up to ``--real-upto`` get **real embeddings** (the bundled MiniLM through ``--backend``,
  default the package's own default, ONNX int8 without torch, so a reader costs what a user's
  reader costs; ``sentence-transformers`` loads torch into every process), in
  ``--workers`` worker processes: ``index_documents(..., workers=N)``);
* beyond that, and beyond the corpus, **synthetic vectors with real texts**: the
  corpus documents again (copy ``k`` of document ``j`` is its own source, same text),
  written through the one writer (``write_planned``) with random unit vectors primed
  into the store's ``PrecomputedEmbeddings``. BM25 sees real text at every level;
  the dense side searches random vectors beyond ``--real-upto`` (the output says how
  many of each a level holds).

After each level a fresh process opens the index and measures: its peak memory
(``ru_maxrss``: what serving that index costs; ``/proc/self/smaps_rollup`` splits it into
anonymous memory -- this process's own -- and mapped files, before the first query and after
the queries), and p50/p95 over ``--queries`` queries
(8-word English / 12-character Chinese spans of the corpus) of BM25 (the keyword side
alone), dense (MMR, with the query embedding), hybrid (RRF of both) and hybrid + window
expansion (``as_retriever(k=4, k_child=20)``: the whole windowed parent retriever). At
the level nearest 100k it also times LangChain's ``BM25Retriever`` (rank_bm25,
``str.split``) on the same chunk texts. Printed as a table with the growth factor per
10x and the ratio of each level to the first one (measured in the same run).

Then, in the same fresh process, ``--probes`` times: **add one source** (a corpus document of
``--doc-chars`` characters, real text, under a new source name) through the public path
``index.add_documents`` and **delete it** through ``index.delete`` (median and max of each).
The add is timed without the model's time: the probe documents' chunks are embedded with
MiniLM beforehand (real vectors, that time is reported as ``embed_ms``) and the index's
embedding serves them from a cache (``embed_documents`` only; queries are never cached), so
the figure is what the index and its stores cost per added source at that size. Goals (issue
28): at 1M, add one source <= 200 ms and hybrid + expansion p95 <= 3x its 10k value; a
reader's peak memory <= 2 GB; on PostgreSQL (issue 43) add <= 150 ms and a reader <= 400 MB.
On PostgreSQL, a level that adds at least ``BULK_FROM`` synthetic chunks loads them in bulk
(`PostgresStorage.bulk_load`: the HNSW and GIN indexes built once at the end, with
``--pg-build-memory`` of ``maintenance_work_mem``).

``--profile`` runs the hybrid + expansion queries of the largest level under cProfile
and prints the functions with the most cumulative and own time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import logging  # noqa: E402

logging.getLogger("bm25s").setLevel(logging.WARNING)

from swrag_integrations.embeddings.minilm import BACKENDS, DEFAULT_BACKEND  # noqa: E402

BULK_FROM = 50_000
"""Synthetic chunks from which a PostgreSQL store loads in bulk (`PostgresStorage.bulk_load`)."""
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpus"  # ../shared beside the repo


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))] if values else float("nan")


def corpus_documents(doc_chars: int) -> list[tuple[str, str]]:
    """``(name, text)`` of the corpus cut into documents of about ``doc_chars`` characters."""
    out = []
    for name in ("en.txt", "zh.txt"):
        text = (CORPUS / name).read_text(encoding="utf-8")
        pos, j = 0, 0
        while pos < len(text):
            end = min(len(text), pos + doc_chars)
            cut = text.find("\n", end)
            end = len(text) if cut < 0 or cut - end > doc_chars // 2 else cut + 1
            if text[pos:end].strip():
                out.append((f"{name[:2]}-{j:05d}", text[pos:end]))
                j += 1
            pos = end
    return out


def queries(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = [(CORPUS / name).read_text(encoding="utf-8") for name in ("en.txt", "zh.txt")]
    out = []
    for i in range(n):
        text = texts[i % 2]
        if i % 2:
            pos = rng.randrange(0, len(text) - 20)
            out.append(text[pos:pos + 12].replace("\n", " ").strip() or "红楼梦")
        else:
            pos = rng.randrange(0, len(text) - 400)
            words = text[pos:pos + 400].split()
            out.append(" ".join(words[1:9]) or "the")
    return out


# ------------------------------------------------------------------------ build


def _disk_mb(index, storage: str | None) -> float:
    """MB on disk of the index folder, plus a Milvus Lite file named outside it (``milvus:PATH.db``)
    or the PostgreSQL database (``pg_database_size``)."""
    total = index.engine.disk_size()
    if storage and storage.startswith(("postgresql://", "postgres://")):
        store = index.engine.store
        total += int(store.conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
    if storage and storage.startswith("milvus:") and not storage.startswith("milvus://"):
        path = Path(storage.split(":", 1)[1]).resolve()
        folder = Path(index.persist_directory).resolve()
        if folder not in path.parents:
            files = [path] if path.is_file() else [p for p in path.parent.glob(path.name + "*")]
            total += sum(q.stat().st_size for f in files for q in ([f] if f.is_file() else f.rglob("*"))
                         if q.is_file())
    return total / 1e6


def grow(index_dir: Path, storage: str | None, target: int, real_upto: int, workers: int, doc_chars: int,
         batch_size: int, backend: str, build_memory: str = "3GB") -> dict:
    """Grow the index at ``index_dir`` (vectors in ``storage``) to ``target`` small chunks (in this process)."""
    import numpy as np
    from langchain_core.documents import Document

    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.engine.records import SourceRecord, plan_source
    from swrag_integrations.ingest.writer import write_planned

    index = SlidingWindowIndex(index_dir, storage=storage, embedding=MiniLMEmbeddings(backend=backend),
                               batch_size=batch_size, show_progress=False)
    have = index.engine.count("small")
    t0 = time.perf_counter()
    docs = corpus_documents(doc_chars)
    real = synthetic = 0
    heads = index.engine.store.heads()
    rng = np.random.default_rng(len(heads))
    base_records: dict[str, SourceRecord] = {}
    todo_real: list[Document] = []
    todo_syn: list[tuple[SourceRecord, np.ndarray]] = []
    copy = 0
    while have < target:
        for name, text in docs:
            if have >= target:
                break
            source = f"copy{copy}/{name}"
            doc = Document(page_content=text, metadata={"source": source})
            if copy == 0 and name not in base_records:
                base_records[name] = plan_source(Document(page_content=text, metadata={"source": name}), index.engine.config)
            base = base_records[name]
            from swrag_integrations.engine.ids import source_id_for

            sid = source_id_for(doc)
            if sid in heads:
                continue
            if have + base.n_chunks <= real_upto:
                todo_real.append(doc)
                real += base.n_chunks
            else:
                rec = SourceRecord(sid, base.content_hash, text, base.arrays.copy(), {"source": source},
                                   state="pending", windows=base.windows.copy())
                vecs = rng.standard_normal((rec.n_chunks, 384)).astype(np.float32)
                todo_syn.append((rec, vecs / np.linalg.norm(vecs, axis=1, keepdims=True)))
                synthetic += base.n_chunks
            have += base.n_chunks
        copy += 1
    if todo_real:
        index.engine.index_documents(todo_real, workers=workers)
    # synthetic records in parts of about 100k chunks, so the log shows the write rate while it runs;
    # PostgreSQL loads many at once with its search indexes built at the end (bulk_load)
    bulk = getattr(index.engine.vectors, "bulk_load", None)
    bulk_used = bulk is not None and synthetic >= BULK_FROM
    done = 0
    with bulk(maintenance_work_mem=build_memory) if bulk_used else contextlib.nullcontext():
        while todo_syn:
            part, n = [], 0
            while todo_syn and n < 100_000:
                part.append(todo_syn.pop(0))
                n += part[-1][0].n_chunks
            write_planned(index, part, total_chunks=n)
            done += n
            print(f"     wrote {done:,} / {synthetic:,} synthetic chunks, {time.perf_counter() - t0:.0f} s, "
                  f"load {_load()}", flush=True)
        loaded = time.perf_counter()
    index_s = time.perf_counter() - loaded if bulk_used and done else 0.0
    if index_s:
        print(f"     search indexes built in {index_s:.0f} s (bulk load)", flush=True)
    return {"chunks": index.engine.count("small"), "sources": len(index.engine.source_ids()), "added_real": real,
            "added_synthetic": synthetic, "index_build_s": index_s, "build_s": time.perf_counter() - t0,
            "build_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "disk_mb": _disk_mb(index, storage)}


# ------------------------------------------------------------------------ query


def _cached_minilm(**kwargs):
    """A MiniLM whose ``embed_documents`` serves texts embedded beforehand (``warm``) from a cache.

    Queries (``embed_query``) are never cached. ``misses`` counts the texts it had to embed.
    """
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

    class CachedMiniLM(MiniLMEmbeddings):
        def __init__(self, **kw) -> None:
            super().__init__(**kw)
            self.cache: dict[str, list[float]] = {}
            self.misses = 0

        def warm(self, texts: list[str]) -> None:
            """Embed ``texts`` now (real MiniLM vectors) and keep them."""
            todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
            self.cache.update(zip(todo, super().embed_documents(todo)))

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
            if missing:
                self.misses += len(missing)
                self.cache.update(zip(missing, super().embed_documents(missing)))
            return [self.cache[t] for t in texts]

    return CachedMiniLM(**kwargs)


def measure(index_dir: Path, storage: str | None, n_queries: int, langchain: bool, profile: bool, probes: int,
            doc_chars: int, backend: str) -> dict:
    """Open the index fresh, time the query paths, then adding and deleting one source (in this process)."""
    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.langchain.search import CJKBM25Retriever, DenseChunkRetriever, HybridRetriever

    t0 = time.perf_counter()
    embedding = _cached_minilm(backend=backend)
    index = SlidingWindowIndex(index_dir, storage=storage, embedding=embedding, show_progress=False)
    # the health probe (sampled chunks must find themselves by their text's embedding) cannot pass on
    # synthetic vectors: skip it (it runs once per index object, never per query)
    index.engine.probed = True
    qs = queries(n_queries)
    bm25 = CJKBM25Retriever.from_index(index, k=20)
    dense = DenseChunkRetriever.from_index(index, k=20, search_type="mmr")
    hybrid = HybridRetriever.from_index(index, k=20)
    windowed = index.as_retriever(k=4, k_child=20)
    before_queries = memory_now()  # the model and the index's handles, before any search loads its index
    for fn in (bm25.invoke, dense.invoke, hybrid.invoke, windowed.invoke):
        fn(qs[0])  # English
        fn(qs[1])  # Chinese: jieba loads its dictionary on first use
    open_s = time.perf_counter() - t0
    out: dict = {"open_s": open_s}
    for name, fn in (("bm25", bm25.invoke), ("dense", dense.invoke), ("hybrid", hybrid.invoke),
                     ("window", windowed.invoke)):
        ms = []
        for q in qs:
            t = time.perf_counter()
            fn(q)
            ms.append((time.perf_counter() - t) * 1000)
        out[name] = {"p50": _pct(ms, 0.5), "p95": _pct(ms, 0.95)}
    if profile:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        for q in qs:
            windowed.invoke(q)
        prof.disable()
        for key in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(18)
            out[f"profile_{key}"] = buf.getvalue()
    # the reader's memory now, before the LangChain comparison below loads every chunk text into this process
    out["query_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["memory"] = memory_now()
    out["memory_before_queries"] = before_queries
    if langchain:
        from langchain_community.retrievers import BM25Retriever

        texts = [rec.chunk_text(i) for rec in index.engine.store.iter_records() for i in range(rec.n_chunks)]
        t = time.perf_counter()
        lc = BM25Retriever.from_texts(texts, k=20)
        build = time.perf_counter() - t
        n = min(20, len(qs))
        lc_ms, ours_ms = [], []
        for q in qs[:n]:
            t = time.perf_counter()
            lc.invoke(q)
            lc_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            bm25.invoke(q)
            ours_ms.append((time.perf_counter() - t) * 1000)
        out["langchain_bm25"] = {"chunks": len(texts), "build_s": build, "lc_p50": _pct(lc_ms, 0.5),
                                 "ours_p50": _pct(ours_ms, 0.5), "queries": n}
    out["write_probe"] = write_probe(index, embedding, qs, probes, doc_chars)
    out["writer_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def memory_now() -> dict[str, float]:
    """This process's memory now, in MB, from ``/proc/self/smaps_rollup`` (Linux; empty elsewhere).

    ``rss`` splits into ``anonymous`` (heap: what this process alone holds -- vectors loaded into an
    in-memory HNSW, caches, the model) and ``file`` (pages of mapped files such as the tantivy
    segments and SQLite: the kernel's page cache, shared by every reader of the same index and
    dropped under memory pressure); ``pss`` charges shared pages pro rata.
    """
    try:
        lines = Path("/proc/self/smaps_rollup").read_text().splitlines()
    except OSError:
        return {}
    kb = {}
    for line in lines[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            kb[key.strip()] = int(parts[0])
    mb = {k.lower(): kb.get(k, 0) / 1024 for k in ("Rss", "Pss", "Anonymous")}
    mb["file"] = mb["rss"] - mb["anonymous"]
    return mb


def write_probe(index, embedding, qs: list[str], probes: int, doc_chars: int) -> dict:
    """Add one source and delete it, ``probes`` times, through the public paths; median and max ms.

    Each probe document is a corpus document (real text, about ``doc_chars`` characters) under a
    new source name (one more first, untimed: a warm-up); its chunk vectors are computed
    beforehand (``embed_ms``), so the add is
    what the index costs. The first keyword query after each add is timed too (through the
    retriever, so with Milvus it is the store's BM25).
    """
    from langchain_core.documents import Document

    from swrag_integrations.engine.records import plan_source
    from swrag_integrations.langchain.search import CJKBM25Retriever

    docs = corpus_documents(doc_chars)
    rng = random.Random(1)
    picked = [docs[i] for i in rng.sample(range(len(docs)), probes + 1)]  # the first: an untimed warm-up
    stamp = int(time.time())
    probe_docs = [Document(page_content=text, metadata={"source": f"probe-{stamp}-{k}/{name}"})
                  for k, (name, text) in enumerate(picked)]
    records = [plan_source(d, index.engine.config) for d in probe_docs]
    t = time.perf_counter()
    embedding.warm([rec.chunk_text(i) for rec in records for i in range(rec.n_chunks)])
    embed_ms = (time.perf_counter() - t) * 1000
    bm25 = CJKBM25Retriever.from_index(index, k=20)
    # first-write costs (lock, handles; completing what an interrupted writer left) not counted
    index.delete(index.add_documents([probe_docs.pop(0)]))
    before = index.engine.count("small")
    add_ms, del_ms, first_ms = [], [], []
    for doc in probe_docs:
        misses = embedding.misses
        t = time.perf_counter()
        ids = index.add_documents([doc])
        add_ms.append((time.perf_counter() - t) * 1000)
        if embedding.misses != misses:
            raise RuntimeError("the add embedded texts not warmed beforehand: its time would include the model")
        t = time.perf_counter()
        bm25.invoke(qs[2])
        first_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        index.delete(ids)
        del_ms.append((time.perf_counter() - t) * 1000)
    after = index.engine.count("small")
    if after != before:
        raise RuntimeError(f"probes left the index at {after:,} chunks, not {before:,}")
    out = {"probes": probes, "chunks_per_probe": statistics.median(r.n_chunks for r in records),
           "embed_ms": embed_ms, "add_ms_median": statistics.median(add_ms), "add_ms_max": max(add_ms),
           "delete_ms_median": statistics.median(del_ms), "delete_ms_max": max(del_ms),
           "first_bm25_after_add_ms_median": statistics.median(first_ms), "add_ms": add_ms, "delete_ms": del_ms}
    print(f"     probes at {before:,} chunks ({probes} sources of ~{out['chunks_per_probe']:.0f} chunks, vectors "
          f"precomputed in {embed_ms:.0f} ms): add one source median/max {out['add_ms_median']:.0f}/"
          f"{out['add_ms_max']:.0f} ms, delete it {out['delete_ms_median']:.0f}/{out['delete_ms_max']:.0f} ms; "
          f"first BM25 query after an add {out['first_bm25_after_add_ms_median']:.1f} ms", flush=True)
    return out


# ------------------------------------------------------------------------- main


def _child(args: argparse.Namespace) -> int:
    if args.run == "grow":
        out = grow(Path(args.index_dir), args.store, args.target, args.real_upto, args.workers, args.doc_chars,
                   args.batch_size, args.backend, args.pg_build_memory)
    else:
        out = measure(Path(args.index_dir), args.store, args.queries, args.langchain, args.profile, args.probes,
                      args.doc_chars, args.backend)
    Path(args.result).write_text(json.dumps(out))
    return 0


def _spawn(extra: list[str], result: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = subprocess.call([sys.executable, __file__, *extra, "--result", str(result)], env=env)
    if code != 0:
        raise SystemExit(f"{extra[:2]} failed with exit code {code}")
    return json.loads(result.read_text())


def _split(q: dict) -> str:
    """`` (now: 1200 MB anonymous + 300 MB mapped files)`` from ``memory_now``'s figures, if any."""
    m = q.get("memory") or {}
    b = q.get("memory_before_queries") or {}
    if not m or not b:
        return ""
    return (f" (anonymous {b['anonymous']:.0f} MB before the first query, {m['anonymous']:.0f} MB after the "
            f"queries, + {m['file']:.0f} MB of mapped files)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="10000,100000,1000000")
    parser.add_argument("--real-upto", type=int, default=100000, help="chunks with real MiniLM embeddings")
    parser.add_argument("--workers", type=int, default=2, help="worker processes for the real embeddings")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--doc-chars", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--profile", action="store_true", help="cProfile the windowed queries of the largest level")
    parser.add_argument("--keep", default=None, help="index folder to keep (default: a temp folder, removed)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--store", default=None,
                        help="the vector store (as swrag --store; pgserver: a PostgreSQL started for the run): "
                             "default the embedded Chroma (keyword index in "
                             "tantivy); 'milvus' (Milvus Lite in the index folder) or 'milvus:PATH.db'")
    parser.add_argument("--probes", type=int, default=5, help="sources added and deleted per level")
    parser.add_argument("--pg-build-memory", default="3GB",
                        help="PostgreSQL: maintenance_work_mem of the index builds after a bulk load (about 2 KB "
                             "per chunk keeps the HNSW graph in memory)")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS,
                        help="the MiniLM backend of the writer and the readers (default: the package's, "
                             f"{DEFAULT_BACKEND}; sentence-transformers loads torch into every process)")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--index-dir", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--target", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--langchain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        return _child(args)
    levels = sorted(int(x) for x in args.levels.split(",") if x.strip())
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="swrag-bench-growth-"))
    index_dir = root / "index"
    server = None
    if args.store == "pgserver":  # a PostgreSQL of this run, in its folder (Unix socket only)
        from swrag_integrations.stores.private_postgres import PrivatePostgres

        server = PrivatePostgres(root / "pg")  # kept with --keep: bench_pg_writers --pg-folder reuses it
        args.store = server.create_database("bench", exist_ok=True)
    store_name = args.store or "chroma (embedded; keyword index: tantivy)"
    results: dict = {"levels": [], "load_start": _load(), "real_upto": args.real_upto, "store": store_name,
                     "probes": args.probes}
    print(f"store {store_name}; levels {levels}; real MiniLM vectors up to {args.real_upto:,} chunks, synthetic "
          f"random unit vectors (real texts) beyond; shared machine, {os.cpu_count()} cores, load average "
          f"{results['load_start']}", flush=True)
    store_args = (["--store", args.store] if args.store else []) + ["--backend", args.backend]
    lc_level = min(levels, key=lambda n: abs(n - 100_000))
    try:
        for level in levels:
            grown = _spawn(["--run", "grow", "--index-dir", str(index_dir), *store_args, "--target", str(level), "--real-upto",
                            str(args.real_upto), "--workers", str(args.workers), "--doc-chars", str(args.doc_chars),
                            "--batch-size", str(args.batch_size), "--pg-build-memory", args.pg_build_memory],
                           root / f"grow-{level}.json")
            extra = ["--langchain"] if level == lc_level else []
            if args.profile and level == levels[-1]:
                extra.append("--profile")
            q = _spawn(["--run", "query", "--index-dir", str(index_dir), *store_args, "--queries",
                        str(args.queries), "--probes", str(args.probes), "--doc-chars", str(args.doc_chars), *extra],
                       root / f"query-{level}.json")
            row = {"level": level, **grown, **q, "load": _load()}
            results["levels"].append(row)
            if args.out:  # after every level, so a run stopped later keeps what it measured
                Path(args.out).write_text(json.dumps(results, indent=2))
            print(f"  {level:>9,}: {grown['chunks']:,} chunks in {grown['sources']:,} sources "
                  f"(+{grown['added_real']:,} real, +{grown['added_synthetic']:,} synthetic vectors; build "
                  f"{grown['build_s']:.0f} s, peak {grown['build_peak_mb']:.0f} MB); disk {grown['disk_mb']:.0f} MB; "
                  f"serving peak {q['query_peak_mb']:.0f} MB{_split(q)} (open + first queries {q['open_s']:.1f} s); "
                  + "; ".join(f"{k} p50/p95 {q[k]['p50']:.1f}/{q[k]['p95']:.1f} ms"
                              for k in ("bm25", "dense", "hybrid", "window")) + f"; load {row['load']}", flush=True)
            if "langchain_bm25" in q:
                lc = q["langchain_bm25"]
                print(f"     LangChain BM25Retriever on {lc['chunks']:,} chunks: build {lc['build_s']:.1f} s, p50 "
                      f"{lc['lc_p50']:.1f} ms vs ours {lc['ours_p50']:.2f} ms = {lc['lc_p50'] / lc['ours_p50']:.1f}x "
                      f"({lc['queries']} queries)", flush=True)
            for key in ("profile_cumulative", "profile_tottime"):
                if key in q:
                    print(q[key])
        rows = results["levels"]
        results["load_end"] = _load()
        print(f"\nstore {store_name}; shared machine, {os.cpu_count()} cores, load {results['load_start']} at "
              f"the start, {results['load_end']} at the end")
        print("\n| chunks | sources | real / synthetic vectors | build s | disk MB | serving peak MB | BM25 p50/p95 ms | "
              "dense p50/p95 ms | hybrid p50/p95 ms | hybrid + expansion p50/p95 ms | add 1 source median/max ms | "
              "delete 1 source median/max ms |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        real_total = 0
        for r in rows:
            real_total += r["added_real"]
            w = r["write_probe"]
            print(f"| {r['chunks']:,} | {r['sources']:,} | {min(real_total, r['chunks']):,} / "
                  f"{r['chunks'] - min(real_total, r['chunks']):,} | {r['build_s']:.0f} | {r['disk_mb']:.0f} | "
                  f"{r['query_peak_mb']:.0f} | "
                  + " | ".join(f"{r[k]['p50']:.1f} / {r[k]['p95']:.1f}" for k in ("bm25", "dense", "hybrid", "window"))
                  + f" | {w['add_ms_median']:.0f} / {w['add_ms_max']:.0f} | {w['delete_ms_median']:.0f} / "
                  f"{w['delete_ms_max']:.0f} |")
        for a, b in zip(rows, rows[1:]):
            f = b["chunks"] / a["chunks"]
            print(f"growth {a['chunks']:,} -> {b['chunks']:,} ({f:.1f}x chunks): disk {b['disk_mb'] / a['disk_mb']:.1f}x, "
                  f"memory {b['query_peak_mb'] / a['query_peak_mb']:.1f}x, "
                  + ", ".join(f"{k} p95 {b[k]['p95'] / a[k]['p95']:.1f}x" for k in ("bm25", "dense", "hybrid", "window")))
        first = rows[0]
        add_goal, memory_goal = (150, 400) if store_name.startswith("postgres") else (200, 2048)  # issue 43 / 28
        for r in rows[1:]:
            w, w0 = r["write_probe"], first["write_probe"]
            print(f"{r['chunks']:,} vs {first['chunks']:,} (same run): hybrid + expansion p95 "
                  f"{r['window']['p95'] / first['window']['p95']:.1f}x (goal at 1M: <= 3x), add one source median "
                  f"{w['add_ms_median'] / w0['add_ms_median']:.1f}x ({w['add_ms_median']:.0f} ms; goal at 1M: "
                  f"<= {add_goal} ms), delete one source median {w['delete_ms_median'] / w0['delete_ms_median']:.1f}x, "
                  f"serving memory {r['query_peak_mb'] / first['query_peak_mb']:.1f}x ({r['query_peak_mb']:.0f} MB; "
                  f"goal at 1M: <= {memory_goal} MB), disk {r['disk_mb'] / first['disk_mb']:.1f}x")
        for r in rows:
            added = r["added_real"] + r["added_synthetic"]
            print(f"ingest rate to {r['chunks']:,}: {added / r['build_s']:.0f} chunks/s ({r['added_real']:,} real "
                  f"MiniLM in {args.workers} workers, {r['added_synthetic']:,} synthetic vectors)")
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2))
    finally:
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
