"""Benchmark: the keyword index's writes and queries at 10k / 100k / 1M chunks.

    python benchmarks/bench_keyword.py [--levels 10000,100000,1000000] [--old-upto 1000000]
                                       [--queries 50] [--probes 3] [--out results.json]

* **old**: :class:`~swrag_integrations.keyword.bm25.BM25Index` (bm25s), saved whole
  after every write (``to_bytes`` written atomically to a file, as ``KeywordIndex.save``
  put it into the source store);
* **tantivy**: :class:`~swrag_integrations.keyword.tantivy.TantivyBM25Index`, one commit
  per write (delete the source's term, add its chunks, commit, wait for the merges that
  commit started, record the generation: as ``KeywordIndex.refresh`` does).

Texts: the shared corpora (``en.txt`` + ``zh.txt``) cut into documents of about 20,000
characters and each document into the index's default small chunks (``plan_source``,
sentence chunks up to 50 tokens; about 90k chunks). Past the corpus the documents are
**repeated** (copy ``k`` of document ``j`` is its own source with the same text): real
text, but every term's document frequency grows with the copies. Both indexes get
the same tokens (one tokenisation per distinct chunk text, cached; the probes are new
text, tokenised inside the timed write).

At each level: add one new source (20 chunks of fresh text), run one query (the first
after a write: the old index rebuilds its score matrix there) and delete the source
again, ``--probes`` times (median), and p50/p95 of ``--queries`` keyword queries (8-word
English / 12-character Chinese spans of the corpus, as in ``bench_growth.py``), k = 20,
after a warm-up query. The old index is grown only up to ``--old-upto`` chunks, and its
writes timed only up to ``--old-writes-upto`` (a write of it at 1M chunks takes minutes;
past that level only its queries are timed, "nan" in the write columns).
Add/delete: median and max over the probes (a tantivy commit
sometimes starts a merge of earlier segments and waits for it).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import logging  # noqa: E402

logging.getLogger("bm25s").setLevel(logging.WARNING)

from bench_growth import _load, _pct, corpus_documents, queries  # noqa: E402


def corpus_chunks() -> list[tuple[str, list[str]]]:
    """``(document name, chunk texts)`` of the corpus, cut as the index cuts by default."""
    from langchain_core.documents import Document

    from swrag_integrations.engine.config import IndexConfig
    from swrag_integrations.engine.records import plan_source

    config = IndexConfig()
    out = []
    for name, text in corpus_documents(20000):
        rec = plan_source(Document(page_content=text, metadata={"source": name}), config)
        out.append((name, [rec.chunk_text(i) for i in range(rec.n_chunks)]))
    return out


def probe_texts(seed: int, n: int = 20) -> list[str]:
    """``n`` chunks of fresh text (random corpus words in a new order, plus a new word)."""
    rng = random.Random(seed)
    words = [w for w in (ROOT.parent / "shared" / "data" / "corpus" / "en.txt").read_text(encoding="utf-8")
             [:200000].split() if w.isalpha()]
    return [" ".join(rng.choice(words) for _ in range(40)) + f" probe{seed}x{i}" for i in range(n)]


class Grower:
    """Feeds both indexes the same stream of sources (copies of the corpus documents)."""

    def __init__(self, chunks: list[tuple[str, list[str]]]) -> None:
        self.chunks = chunks
        self.pos = 0
        self.total = 0

    def take(self, target: int) -> list[tuple[str, list[str]]]:
        out = []
        while self.total < target:
            copy, j = divmod(self.pos, len(self.chunks))
            name, texts = self.chunks[j]
            out.append((f"copy{copy}-{name}", texts))
            self.pos += 1
            self.total += len(texts)
        return out


def chunk_ids(source: str, n: int) -> list[str]:
    return [f"{source}:s:{i}" for i in range(n)]


class Old:
    """The bm25s snapshot, saved whole after each write."""

    name = "old (bm25s snapshot)"

    def __init__(self, folder: Path, tokenizer) -> None:
        from swrag_integrations.keyword.bm25 import BM25Index

        self.index = BM25Index(tokenizer=tokenizer)
        self.path = folder / "old.npz"

    def bulk(self, sources) -> None:
        for source, texts in sources:
            self.index.upsert(chunk_ids(source, len(texts)), texts)
        self.index.save(self.path)

    def add(self, source: str, texts: list[str]) -> None:
        self.index.upsert(chunk_ids(source, len(texts)), texts)
        self.index.save(self.path)

    def delete(self, source: str, n: int) -> None:
        self.index.delete(chunk_ids(source, n))
        self.index.save(self.path)

    def written(self) -> int:
        """The whole snapshot is written on every save."""
        return self.path.stat().st_size

    def search(self, query: str) -> list:
        return self.index.search(query, 20)

    def disk(self) -> int:
        return self.path.stat().st_size


class Tantivy:
    """tantivy, one commit per write (the source's documents and the generation, as
    ``KeywordIndex.refresh`` commits them)."""

    name = "tantivy"

    def __init__(self, folder: Path, tokenizer) -> None:
        from swrag_integrations.keyword.tantivy import TantivyBM25Index

        self.path = folder / "tantivy"
        self.index = TantivyBM25Index(self.path, tokenizer=tokenizer, group=lambda cid: cid.split(":", 1)[0])
        self.index.create()
        self.generation = 0
        self._files: dict[str, tuple[int, int]] = {}

    def bulk(self, sources) -> None:
        for b in range(0, len(sources), 200):
            with self.index.transaction():
                for source, texts in sources[b:b + 200]:
                    self.index.add(chunk_ids(source, len(texts)), texts)
                self.generation += 1
                self.index.generation = self.generation

    def written(self) -> int:
        """Bytes of the files created or changed since the last call."""
        now = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in self.path.rglob("*") if p.is_file()}
        out = sum(size for name, (size, mtime) in now.items() if self._files.get(name) != (size, mtime))
        self._files = now
        return out

    def add(self, source: str, texts: list[str]) -> None:
        with self.index.transaction():
            self.index.delete_groups([source])
            self.index.add(chunk_ids(source, len(texts)), texts)
            self.generation += 1
            self.index.generation = self.generation

    def delete(self, source: str, n: int) -> None:
        with self.index.transaction():
            self.index.delete_groups([source])
            self.generation += 1
            self.index.generation = self.generation

    def search(self, query: str) -> list:
        return self.index.search(query, 20)

    def disk(self) -> int:
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())


def measure(impl, level: int, qs: list[str], probes: int, writes: bool = True) -> dict:
    """Writes (unless ``writes`` is false: then only the queries are timed) and queries at one level."""
    nan = float("nan")
    adds, dels, add_bytes, del_bytes, firsts = [nan], [nan], [nan], [nan], [nan]
    if writes:
        adds, dels, add_bytes, del_bytes, firsts = [], [], [], [], []
    for p in range(probes if writes else 0):
        texts = probe_texts(level + p)
        source = f"probe-{level}-{p}"
        impl.written()
        t = time.perf_counter()
        impl.add(source, texts)
        adds.append((time.perf_counter() - t) * 1000)
        add_bytes.append(impl.written())
        t = time.perf_counter()
        impl.search(qs[p % len(qs)])
        firsts.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        impl.delete(source, len(texts))
        dels.append((time.perf_counter() - t) * 1000)
        del_bytes.append(impl.written())
    impl.search(qs[0])  # warm-up (the old index rebuilds its score matrix on the first query after a write)
    impl.search(qs[1])  # (and jieba loads on the first Chinese query)
    times = []
    for q in qs:
        t = time.perf_counter()
        impl.search(q)
        times.append((time.perf_counter() - t) * 1000)
    return {"add_ms": statistics.median(adds), "delete_ms": statistics.median(dels),
            "add_max_ms": max(adds), "delete_max_ms": max(dels),
            "first_query_after_add_ms": statistics.median(firsts), "add_bytes_written": statistics.median(add_bytes), "delete_bytes_written": statistics.median(del_bytes),
            "query_p50_ms": _pct(times, 0.5), "query_p95_ms": _pct(times, 0.95), "disk_mb": impl.disk() / 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="10000,100000,1000000")
    parser.add_argument("--old-upto", type=int, default=1000000, help="grow the old (bm25s) index only this far")
    parser.add_argument("--old-writes-upto", type=int, default=None,
                        help="time the old index's writes only this far (past it: its queries only; default --old-upto)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--probes", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    levels = sorted(int(x) for x in args.levels.split(",") if x.strip())
    from swrag_integrations.keyword.bm25 import tokenize

    tokenizer = functools.lru_cache(maxsize=None)(lambda text: tuple(tokenize(text)))
    cached = lambda text: list(tokenizer(text))  # noqa: E731
    print(f"load average at start: {_load()} (shared machine: to be re-measured quiet)", flush=True)
    t0 = time.perf_counter()
    chunks = corpus_chunks()
    print(f"corpus: {len(chunks)} documents, {sum(len(c) for _, c in chunks):,} chunks "
          f"(cut in {time.perf_counter() - t0:.0f} s)", flush=True)
    qs = queries(args.queries)
    folder = Path(tempfile.mkdtemp(prefix="swrag-bench-keyword-"))
    impls = {"old": Old(folder, cached), "tantivy": Tantivy(folder, cached)}
    growers = {key: Grower(chunks) for key in impls}
    upto = {"old": args.old_upto, "tantivy": levels[-1]}
    rows = []
    for level in levels:
        row = {"level": level, "load": _load()}
        for key, impl in impls.items():
            if level > upto[key]:
                continue
            t = time.perf_counter()
            impl.bulk(growers[key].take(level))
            build = time.perf_counter() - t
            writes = key != "old" or level <= (args.old_upto if args.old_writes_upto is None else args.old_writes_upto)
            row[key] = dict(measure(impl, level, qs, args.probes, writes), chunks=growers[key].total, grow_s=build)
            r = row[key]
            print(f"{level:>9,} {impl.name:<22} chunks {r['chunks']:,} (grown in {build:.0f} s): "
                  f"add one source {r['add_ms']:.1f} ms (max {r['add_max_ms']:.1f}; "
                  f"{r['add_bytes_written'] / 1e3:,.0f} kB written), "
                  f"delete {r['delete_ms']:.1f} ms (max {r['delete_max_ms']:.1f}; "
                  f"{r['delete_bytes_written'] / 1e3:,.0f} kB), "
                  f"first query after an add {r['first_query_after_add_ms']:.1f} ms, "
                  f"query p50/p95 {r['query_p50_ms']:.2f} / {r['query_p95_ms']:.2f} ms, disk {r['disk_mb']:.0f} MB; "
                  f"load {_load()}", flush=True)
        rows.append(row)
    print("\n| chunks | impl | add one source ms (median, max) | delete one source ms (median, max) | "
          "bytes written per add | first query after an add ms | query p50 / p95 ms | disk MB | load |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        for key in impls:
            if key in row:
                r = row[key]
                print(f"| {r['chunks']:,} | {key} | {r['add_ms']:.1f}, {r['add_max_ms']:.1f} | "
                      f"{r['delete_ms']:.1f}, {r['delete_max_ms']:.1f} | "
                      f"{r['add_bytes_written'] / 1e3:,.0f} kB | {r['first_query_after_add_ms']:.1f} | "
                      f"{r['query_p50_ms']:.2f} / {r['query_p95_ms']:.2f} | "
                      f"{r['disk_mb']:.0f} | {row['load']} |")
        if "old" in row and "tantivy" in row:
            o, n = row["old"], row["tantivy"]
            def ratio(key: str, digits: int) -> str:
                """tantivy / old, or n/a where the old index's writes were not timed."""
                value = n[key] / max(o[key], 1e-9)
                return "n/a" if value != value else f"{value:.{digits}f}x"

            print(f"|  | tantivy / old | {ratio('add_ms', 3)} | {ratio('delete_ms', 3)} | "
                  f"{ratio('add_bytes_written', 4)} | {ratio('first_query_after_add_ms', 3)} | "
                  f"{ratio('query_p50_ms', 1)} / {ratio('query_p95_ms', 1)} | {ratio('disk_mb', 1)} | |")
    print(f"load average at end: {_load()}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
