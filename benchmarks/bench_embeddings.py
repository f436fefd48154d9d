"""Speed and fidelity of the MiniLM embedding backends on the shared corpus.

    python benchmarks/bench_embeddings.py [--n 10000] [--threads 1,2] [--repeats 1]
                                          [--backends sentence-transformers,onnx,onnx-int8]
    python benchmarks/bench_embeddings.py --cache [--n 10000]

Embeds the same ``n`` small chunks (half English, half Chinese; 50 cl100k tokens each,
cut with ``iter_windows(text, "FFS", 50, 50)`` from ``../shared/data/corpus/en.txt`` and
``zh.txt`` and taken evenly over each corpus) with every backend of
:class:`~swrag_integrations.embeddings.MiniLMEmbeddings`, at each thread count, and prints
chunks/s (wall clock, and per CPU-second, which a busy machine disturbs less), the ratio
to sentence-transformers fp32 at the same thread count *in the same run*, and the
mean/min cosine of every vector to the sentence-transformers vector of the same chunk.
Runs are interleaved (per repeat: every thread count, every backend) and the median is
kept. Goal for the fastest backend: >= 3x sentence-transformers and mean cosine >= 0.99.

``--cache`` instead compares the embedding caches (our sqlite ``CachedEmbeddings``
against LangChain's ``CacheBackedEmbeddings`` over ``LocalFileStore`` and over
``SQLStore``): time to fill, time for ``n`` cached lookups, size on disk, and what a
truncated entry (a crash while writing) does. The model is not run: a deterministic fake
embedding of 384 floats stands in.

The load average is printed at the start and the end: ratios are only comparable within
one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpus"  # ../shared beside the repo
REFERENCE = "sentence-transformers"


def load_chunks(n: int, corpus: Path = CORPUS) -> list[str]:
    """``n`` chunks of 50 tokens, half from each corpus, spread evenly over it."""
    from swrag_integrations.core.windows import iter_windows

    chunks: list[str] = []
    for lang, count in (("en", n - n // 2), ("zh", n // 2)):
        text = (corpus / f"{lang}.txt").read_text(encoding="utf-8")
        spans = list(iter_windows(text, "FFS", 50, 50))
        step = len(spans) / max(count, 1)
        chunks += [text[a:b] for a, b in (spans[int(i * step)] for i in range(count))]
    return chunks


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


def bench_backends(args: argparse.Namespace) -> None:
    import torch

    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

    chunks = load_chunks(args.n, Path(args.corpus))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if REFERENCE not in backends:
        backends.insert(0, REFERENCE)
    threads = [int(t) for t in args.threads.split(",")]
    print(f"{len(chunks)} chunks ({len(chunks) - len(chunks) // 2} en + {len(chunks) // 2} zh), "
          f"threads {threads}, repeats {args.repeats}; start: {_load()}", flush=True)

    models, load_s = {}, {}
    for t in threads:
        for b in backends:
            start = time.perf_counter()
            if b == REFERENCE:
                torch.set_num_threads(t)
            m = MiniLMEmbeddings(backend=b, threads=t if b != REFERENCE else None, cache_dir=args.cache_dir)
            m.encode(chunks[:32])  # load (and export on first use), warm up
            models[b, t], load_s[b, t] = m, time.perf_counter() - start

    wall: dict = {k: [] for k in models}
    cpu: dict = {k: [] for k in models}
    vectors: dict = {}
    for r in range(args.repeats):
        for t in threads:
            torch.set_num_threads(t)
            for b in backends:
                c0, w0 = time.process_time(), time.perf_counter()
                v = models[b, t].encode(chunks)
                w, c = time.perf_counter() - w0, time.process_time() - c0
                wall[b, t].append(len(chunks) / w)
                cpu[b, t].append(len(chunks) / c)
                vectors.setdefault((b, t), v)
                print(f"  run {r + 1}: {b:22s} {t} thr {len(chunks) / w:8.1f} chunks/s "
                      f"({len(chunks) / c:7.1f}/CPU-s)  [{_load()}]", flush=True)

    ref = vectors[REFERENCE, threads[0]].astype(np.float64)
    half = len(chunks) - len(chunks) // 2
    print(f"\nend: {_load()}\n")
    print("| backend | threads | chunks/s | x ST | chunks/CPU-s | x ST (CPU) | mean cos | min cos "
          "| mean cos en / zh | load s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in threads:
        base_w = statistics.median(wall[REFERENCE, t])
        base_c = statistics.median(cpu[REFERENCE, t])
        for b in backends:
            v = vectors[b, t].astype(np.float64)
            cos = (v * ref).sum(1) / (np.linalg.norm(v, axis=1) * np.linalg.norm(ref, axis=1))
            w, c = statistics.median(wall[b, t]), statistics.median(cpu[b, t])
            print(f"| {b} | {t} | {w:.1f} | {w / base_w:.2f} | {c:.1f} | {c / base_c:.2f} | {cos.mean():.4f} "
                  f"| {cos.min():.4f} | {cos[:half].mean():.4f} / {cos[half:].mean():.4f} | {load_s[b, t]:.1f} |")


def _cache_factories(tmp: Path):
    """name -> (factory, files on disk) for the three caches over one fake model."""
    import warnings

    from langchain_core.embeddings import DeterministicFakeEmbedding

    from swrag_integrations.evaluation.embeddings import CachedEmbeddings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # langchain-community's sunset notice
        from langchain_classic.embeddings import CacheBackedEmbeddings
        from langchain_classic.storage import LocalFileStore
        from langchain_community.storage import SQLStore

    base = DeterministicFakeEmbedding(size=384)

    def ours():
        return CachedEmbeddings(base, tmp / "ours.sqlite", namespace="fake")

    def files():
        return CacheBackedEmbeddings.from_bytes_store(base, LocalFileStore(tmp / "files"), namespace="fake",
                                                      key_encoder="sha256")

    def sql():
        store = SQLStore(namespace="fake", db_url=f"sqlite:///{tmp / 'sql.sqlite'}")
        store.create_schema()
        return CacheBackedEmbeddings.from_bytes_store(base, store, namespace="fake", key_encoder="sha256")

    return base, {
        "CachedEmbeddings (ours: sqlite, float32 blobs)": (ours, ["ours.sqlite*"]),
        "CacheBackedEmbeddings + LocalFileStore (json files)": (files, ["files"]),
        "CacheBackedEmbeddings + SQLStore (sqlite, json)": (sql, ["sql.sqlite*"]),
    }


def _fill_in_slices(tmp: str, name: str, chunks: list[str], seed: int, queue) -> None:
    """One of two processes filling/reading the same cache at once, 50 texts per call."""
    import random

    _, factories = _cache_factories(Path(tmp))
    order = list(range(len(chunks)))
    random.Random(seed).shuffle(order)
    errors = []
    cache = factories[name][0]()
    for i in range(0, len(order), 50):
        try:
            cache.embed_documents([chunks[j] for j in order[i : i + 50]])
        except Exception as exc:  # noqa: BLE001
            errors.append(type(exc).__name__)
    queue.put(errors)


def bench_cache(args: argparse.Namespace) -> None:
    import hashlib
    import multiprocessing

    chunks = load_chunks(args.n, Path(args.corpus))
    print(f"{len(chunks)} chunks; start: {_load()}\n")
    print("| cache | fill s | cached lookups s | lookups/s | MB on disk | same vectors "
          "| 2 processes at once | entry cut in half |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp_root:
        for k, name in enumerate(_cache_factories(Path(tmp_root))[1]):
            tmp = Path(tmp_root) / str(k)
            tmp.mkdir()
            base, factories = _cache_factories(tmp)
            make, patterns = factories[name]
            expected = np.asarray(base.embed_documents(chunks), dtype=np.float32)
            t0 = time.perf_counter()
            make().embed_documents(chunks)
            fill = time.perf_counter() - t0
            cache = make()  # reopened: every lookup comes from disk
            t0 = time.perf_counter()
            got = cache.embed_documents(chunks)
            lookup = time.perf_counter() - t0
            same = bool(np.array_equal(np.asarray(got, dtype=np.float32), expected))
            size = sum(p.stat().st_size for pat in patterns for q in tmp.glob(pat)
                       for p in ([q] if q.is_file() else q.rglob("*")) if p.is_file())

            # two processes filling a fresh copy of this cache at the same time
            shared = Path(tmp_root) / f"{k}-shared"
            shared.mkdir()
            ctx = multiprocessing.get_context("fork")
            queue = ctx.Queue()
            procs = [ctx.Process(target=_fill_in_slices, args=(str(shared), name, chunks, seed, queue))
                     for seed in (1, 2)]
            for p in procs:
                p.start()
            errors = [e for _ in procs for e in queue.get()]
            for p in procs:
                p.join()
            final = np.asarray(_cache_factories(shared)[1][name][0]().embed_documents(chunks), dtype=np.float32)
            concurrent = (f"{len(errors)} failed calls ({', '.join(sorted(set(errors)))})" if errors else "no errors")
            concurrent += ", same vectors after" if np.array_equal(final, expected) else ", WRONG vectors after"

            # a stored entry cut in half (files are written in place, not renamed)
            if "LocalFileStore" in name:
                path = tmp / "files" / ("fake" + hashlib.sha256(chunks[0].encode()).hexdigest())
                path.write_bytes(path.read_bytes()[:100])
                try:
                    vec = make().embed_documents(chunks[:1])[0]
                    cut = "re-embedded" if len(vec) == 384 else f"returns {len(vec)} floats"
                except Exception as exc:  # noqa: BLE001
                    cut = f"every lookup raises {type(exc).__name__}"
            else:
                cut = "cannot happen (sqlite transaction)"
            print(f"| {name} | {fill:.2f} | {lookup:.2f} | {len(chunks) / lookup:,.0f} | {size / 1e6:.1f} "
                  f"| {same} | {concurrent} | {cut} |", flush=True)
    print(f"\nend: {_load()}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="chunks in all (half en, half zh)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--backends", default="sentence-transformers,onnx,onnx-int8")
    parser.add_argument("--cache-dir", default=None, help="ONNX export cache (default $SWRAG_CACHE or ~/.cache/swrag)")
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--cache", action="store_true", help="compare the embedding caches instead")
    args = parser.parse_args(argv)
    if args.n < 2:
        parser.error("--n must be >= 2")
    (bench_cache if args.cache else bench_backends)(args)


if __name__ == "__main__":
    main()
