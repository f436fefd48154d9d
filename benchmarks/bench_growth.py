"""Benchmark: how the index grows -- size on disk, memory and query latency at 10k / 100k / 1M chunks.

    python benchmarks/bench_growth.py [--levels 10000,100000,1000000] [--real-upto 100000] [--workers 2]
                                      [--queries 50] [--doc-chars 20000] [--profile] [--out results.json]

The shared corpora (``en.txt`` + ``zh.txt``) are cut into documents of about
``--doc-chars`` characters (at a line break) -- about 100k small chunks of 50 tokens in
all -- and the index is grown level by level in one embedded index (Chroma + SQLite):

* chunks up to ``--real-upto`` get **real embeddings** (the bundled MiniLM, in
  ``--workers`` worker processes: ``index_documents(..., workers=N)``);
* beyond that, and beyond the corpus, **synthetic vectors with real texts**: the
  corpus documents again (copy ``k`` of document ``j`` is its own source, same text),
  written through the one writer (``write_planned``) with random unit vectors primed
  into the store's ``PrecomputedEmbeddings``. BM25 sees real text at every level;
  the dense side searches random vectors beyond ``--real-upto`` (the output says how
  many of each a level holds).

After each level a fresh process opens the index and measures: its peak memory
(``ru_maxrss``: what serving that index costs), and p50/p95 over ``--queries`` queries
(8-word English / 12-character Chinese spans of the corpus) of BM25 (the keyword side
alone), dense (MMR, with the query embedding), hybrid (RRF of both) and hybrid + window
expansion (``as_retriever(k=4, k_child=20)``: the whole windowed parent retriever). At
the level nearest 100k it also times LangChain's ``BM25Retriever`` (rank_bm25,
``str.split``) on the same chunk texts. Printed as a table with the growth factor per
10x; goal: hybrid + expansion p95 at 1M <= 10x its p95 at 10k.

``--profile`` runs the hybrid + expansion queries of the largest level under cProfile
and prints the functions with the most cumulative and own time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
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


def grow(store: Path, target: int, real_upto: int, workers: int, doc_chars: int, batch_size: int) -> dict:
    """Grow the index at ``store`` to ``target`` small chunks (in this process)."""
    import numpy as np
    from langchain_core.documents import Document

    from swrag_integrations.retrieval import MiniLMEmbeddings, SlidingWindowIndex
    from swrag_integrations.retrieval.records import SourceRecord, plan_source
    from swrag_integrations.retrieval.writer import write_planned

    index = SlidingWindowIndex(store, embedding=MiniLMEmbeddings(batch_size=64), batch_size=batch_size,
                               show_progress=False)
    have = index.count("small")
    t0 = time.perf_counter()
    docs = corpus_documents(doc_chars)
    real = synthetic = 0
    heads = index.store.heads()
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
                base_records[name] = plan_source(Document(page_content=text, metadata={"source": name}), index.config)
            base = base_records[name]
            from swrag_integrations.retrieval.ids import source_id_for

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
        index.index_documents(todo_real, workers=workers)
    if todo_syn:
        write_planned(index, todo_syn, total_chunks=synthetic)
    return {"chunks": index.count("small"), "sources": len(index.source_ids()), "added_real": real,
            "added_synthetic": synthetic, "build_s": time.perf_counter() - t0,
            "build_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "disk_mb": index.disk_size() / 1e6}


# ------------------------------------------------------------------------ query


def measure(store: Path, n_queries: int, langchain: bool, profile: bool) -> dict:
    """Open the index fresh and time the query paths (in this process)."""
    from swrag_integrations.retrieval import MiniLMEmbeddings, SlidingWindowIndex

    t0 = time.perf_counter()
    index = SlidingWindowIndex(store, embedding=MiniLMEmbeddings(batch_size=64), show_progress=False)
    # the health probe (sampled chunks must find themselves by their text's embedding) cannot pass on
    # synthetic vectors: skip it (it runs once per index object, never per query)
    index._probed = True
    qs = queries(n_queries)
    bm25 = index.bm25_retriever(k=20)
    dense = index.dense_retriever(k=20, search_type="mmr")
    hybrid = index.hybrid_retriever(k=20)
    windowed = index.as_retriever(k=4, k_child=20)
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
    if langchain:
        from langchain_community.retrievers import BM25Retriever

        texts = [rec.chunk_text(i) for rec in index.store.iter_records() for i in range(rec.n_chunks)]
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
    out["query_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["write_probe"] = write_probe(index, qs)
    return out


def write_probe(index, qs: list[str]) -> dict:
    """What one small write costs at this size, and the first keyword query after it (profiled)."""
    import cProfile
    import io
    import pstats

    from langchain_core.documents import Document

    doc = Document(page_content=f"A probe document written at {time.time()}. " * 40, metadata={"source": "probe"})
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    index.index_documents([doc])
    prof.disable()
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    index.keyword.search(qs[2], 20)
    first_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    index.keyword.search(qs[4], 20)
    next_ms = (time.perf_counter() - t) * 1000
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats("swrag_integrations|bm25s", 14)
    text = buf.getvalue()
    print(f"     write probe at {index.count('small'):,} chunks: one 1-source add {add_s:.2f} s; the first BM25 query "
          f"after it {first_ms:.0f} ms, the next {next_ms:.1f} ms\n" + text[text.find("ncalls"):], flush=True)
    return {"add_s": add_s, "first_query_ms": first_ms, "next_query_ms": next_ms}


# ------------------------------------------------------------------------- main


def _child(args: argparse.Namespace) -> int:
    if args.run == "grow":
        out = grow(Path(args.store), args.target, args.real_upto, args.workers, args.doc_chars, args.batch_size)
    else:
        out = measure(Path(args.store), args.queries, args.langchain, args.profile)
    Path(args.result).write_text(json.dumps(out))
    return 0


def _spawn(extra: list[str], result: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = subprocess.call([sys.executable, __file__, *extra, "--result", str(result)], env=env)
    if code != 0:
        raise SystemExit(f"{extra[:2]} failed with exit code {code}")
    return json.loads(result.read_text())


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
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--target", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--langchain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        return _child(args)
    levels = sorted(int(x) for x in args.levels.split(",") if x.strip())
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="swrag-bench-growth-"))
    store = root / "index"
    results: dict = {"levels": [], "load_start": _load(), "real_upto": args.real_upto}
    print(f"levels {levels}; real MiniLM vectors up to {args.real_upto:,} chunks, synthetic random unit vectors "
          f"(real texts) beyond; {os.cpu_count()} cores, load average {results['load_start']}", flush=True)
    lc_level = min(levels, key=lambda n: abs(n - 100_000))
    try:
        for level in levels:
            grown = _spawn(["--run", "grow", "--store", str(store), "--target", str(level), "--real-upto",
                            str(args.real_upto), "--workers", str(args.workers), "--doc-chars", str(args.doc_chars),
                            "--batch-size", str(args.batch_size)], root / f"grow-{level}.json")
            extra = ["--langchain"] if level == lc_level else []
            if args.profile and level == levels[-1]:
                extra.append("--profile")
            q = _spawn(["--run", "query", "--store", str(store), "--queries", str(args.queries), *extra],
                       root / f"query-{level}.json")
            row = {"level": level, **grown, **q, "load": _load()}
            results["levels"].append(row)
            print(f"  {level:>9,}: {grown['chunks']:,} chunks in {grown['sources']:,} sources "
                  f"(+{grown['added_real']:,} real, +{grown['added_synthetic']:,} synthetic vectors; build "
                  f"{grown['build_s']:.0f} s, peak {grown['build_peak_mb']:.0f} MB); disk {grown['disk_mb']:.0f} MB; "
                  f"serving peak {q['query_peak_mb']:.0f} MB (open + first queries {q['open_s']:.1f} s); "
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
        print("\n| chunks | sources | real / synthetic vectors | disk MB | serving peak MB | BM25 p50/p95 ms | "
              "dense p50/p95 ms | hybrid p50/p95 ms | hybrid + expansion p50/p95 ms |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        real_total = 0
        for r in rows:
            real_total += r["added_real"]
            print(f"| {r['chunks']:,} | {r['sources']:,} | {min(real_total, r['chunks']):,} / "
                  f"{r['chunks'] - min(real_total, r['chunks']):,} | {r['disk_mb']:.0f} | {r['query_peak_mb']:.0f} | "
                  + " | ".join(f"{r[k]['p50']:.1f} / {r[k]['p95']:.1f}" for k in ("bm25", "dense", "hybrid", "window"))
                  + " |")
        for a, b in zip(rows, rows[1:]):
            f = b["chunks"] / a["chunks"]
            print(f"growth {a['chunks']:,} -> {b['chunks']:,} ({f:.1f}x chunks): disk {b['disk_mb'] / a['disk_mb']:.1f}x, "
                  f"memory {b['query_peak_mb'] / a['query_peak_mb']:.1f}x, "
                  + ", ".join(f"{k} p95 {b[k]['p95'] / a[k]['p95']:.1f}x" for k in ("bm25", "dense", "hybrid", "window")))
        if len(rows) > 1:
            first, last = rows[0], rows[-1]
            ratio = last["window"]["p95"] / first["window"]["p95"]
            print(f"hybrid + expansion p95 at {last['chunks']:,} / at {first['chunks']:,}: {ratio:.1f}x "
                  f"(goal <= 10x for 1M vs 10k)")
        results["load_end"] = _load()
        print(f"load average: start {results['load_start']}, end {results['load_end']} ({os.cpu_count()} cores)")
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
