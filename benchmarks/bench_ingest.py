"""Benchmark: ingestion of the shared corpora end to end, one process vs N workers vs Ray.

    python benchmarks/bench_ingest.py [--fraction F] [--workers 2] [--actors 2] [--modes single,workers,ray]
                                      [--batch-size 256] [--out results.json]

Writes ``en.txt`` and ``zh.txt`` of ``../shared/data/corpus`` (the first ``F`` of
each; 10.6 MB and about 70k small chunks at ``F=1``, 6,909 at ``F=0.1``) as two files and indexes them with
the bundled MiniLM (real embeddings, offline) into a fresh embedded index, each mode in
its own process so memory is measured per mode:

* ``single``  -- ``SlidingWindowIndex.add_files(folder)`` (today's path), one process;
* ``workers`` -- ``add_files(folder, workers=N)``: N worker processes + the writer;
* ``ray``     -- ``index_with_ray(index, folder, address="local", actors=A)``: Ray in
  the process (GCS, raylet, A embedding actors, load/plan tasks) + the writer.

Every process gets ``OMP_NUM_THREADS=1`` (one math thread), so the ratios compare
processes, not torch's intra-op threads. Reported per mode: small chunks, wall time,
chunks/s, CPU seconds of the whole process tree (user + system: load-independent),
chunks per CPU-second, and the peak memory of the process tree (sum of PSS, sampled
every 0.5 s; shared pages counted once). The ratios (chunks/s against ``single``) are
within one run; the machine's load average is printed before and after, because on a
shared machine wall-clock ratios follow the CPU share a mode gets, not only its design.

Before the modes, ``--breakdown`` (default on) measures what each part costs per chunk
in one process: load + plan (read, tiktoken, offsets, windows), embed (MiniLM, one
thread), write (the writer with precomputed vectors: source store, Chroma add with its
HNSW insert, BM25 refresh and save). These figures feed ``docs/scaling.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpus"  # ../shared beside the repo


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_corpus(folder: Path, fraction: float) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    size = 0
    for name in ("en.txt", "zh.txt"):
        text = (CORPUS / name).read_text(encoding="utf-8")
        text = text[:int(len(text) * fraction)]
        (folder / name).write_text(text, encoding="utf-8")
        size += len(text.encode("utf-8"))
    return size


# ----------------------------------------------------------------- process tree


def _tree(pid: int):
    import psutil

    try:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


class TreeMonitor:
    """Peak PSS (sum over a process tree) and CPU seconds of every process seen."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid, self.every = pid, every
        self.peak = 0
        self.cpu: dict[int, float] = {}
        self.roles: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for proc in _tree(self.pid):
                try:
                    with proc.oneshot():
                        try:
                            total += proc.memory_full_info().pss
                        except (psutil.AccessDenied, AttributeError):
                            total += proc.memory_info().rss
                        t = proc.cpu_times()
                        self.cpu[proc.pid] = t.user + t.system
                        if proc.pid not in self.roles:
                            self.roles[proc.pid] = _role(proc, self.pid)
                except psutil.NoSuchProcess:
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def __enter__(self) -> "TreeMonitor":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())

    def cpu_by_process(self) -> list[tuple[str, float]]:
        """``(role, CPU seconds)`` of every process seen, the writer (the mode's own process) first."""
        rows = [(self.roles.get(pid, "other"), cpu) for pid, cpu in self.cpu.items()]
        return sorted(rows, key=lambda row: (row[0] != "writer", row[0], -row[1]))


def _role(proc, root: int) -> str:
    """What a process of a mode's tree is: the mode's own process (``writer``), a worker of
    the process pool, the pool's resource tracker, or anything else (Ray's processes)."""
    if proc.pid == root:
        return "writer"
    try:
        cmd = " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - gone or not readable
        return "other"
    if "resource_tracker" in cmd:
        return "tracker"
    return "worker" if "spawn_main" in cmd else "other"


# ------------------------------------------------------------------------ modes


def run_mode(mode: str, folder: Path, store: Path, args: argparse.Namespace) -> dict:
    """One mode, in this process (called in a child process by main)."""
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
    from swrag_integrations.langchain.index import SlidingWindowIndex

    embedding = MiniLMEmbeddings(batch_size=64)
    index = SlidingWindowIndex(store, embedding=embedding, batch_size=args.batch_size, show_progress=False)
    t0 = time.perf_counter()
    if mode == "single":
        report = index.add_files(folder)
    elif mode == "workers":
        report = index.add_files(folder, workers=args.workers)
    elif mode == "ray":
        from swrag_integrations.ingest.ray import index_with_ray

        report = index_with_ray(index, folder, address="local", actors=args.actors, node_ip_address=args.ray_ip,
                                object_store_memory=200 * 1024 * 1024)
    else:
        raise ValueError(mode)
    seconds = time.perf_counter() - t0
    return {"mode": mode, "seconds": seconds, "chunks": report.chunks, "added": report.added,
            "served": getattr(index.vectorstore.embeddings, "served", None), "notes": report.notes}


def breakdown(folder: Path, tmp: Path, args: argparse.Namespace) -> dict:
    """CPU seconds per chunk of load+plan, embed and write, in this process (one thread)."""
    import numpy as np

    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.engine.config import IndexConfig
    from swrag_integrations.ingest.workers import embed_texts, load_and_plan
    from swrag_integrations.ingest.writer import write_planned

    config = IndexConfig.resolve().to_json()
    c0, w0 = time.process_time(), time.perf_counter()
    records = [rec for f in sorted(folder.iterdir()) for rec in load_and_plan(str(f), config)[0]]
    plan_cpu, plan_wall = time.process_time() - c0, time.perf_counter() - w0
    n = sum(r.n_chunks for r in records)
    embedding = MiniLMEmbeddings(batch_size=64)
    embedding.embed_query("warm up")
    sample = [r.chunk_text(i) for r in records for i in range(r.n_chunks)]
    step = max(1, len(sample) // args.embed_sample)
    sample = sample[::step][:args.embed_sample]
    c0, w0 = time.process_time(), time.perf_counter()
    embed_texts(embedding, sample)
    embed_cpu, embed_wall = time.process_time() - c0, time.perf_counter() - w0
    rng = np.random.default_rng(0)
    vectors = []
    for rec in records:
        v = rng.standard_normal((rec.n_chunks, 384)).astype(np.float32)
        vectors.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    index = SlidingWindowIndex(tmp / "breakdown", embedding=embedding, batch_size=args.batch_size, show_progress=False)
    c0, w0 = time.process_time(), time.perf_counter()
    write_planned(index, list(zip(records, vectors)))
    write_cpu, write_wall = time.process_time() - c0, time.perf_counter() - w0
    return {"chunks": n, "plan_cpu_ms": 1000 * plan_cpu / n, "plan_wall_ms": 1000 * plan_wall / n,
            "embed_cpu_ms": 1000 * embed_cpu / len(sample), "embed_wall_ms": 1000 * embed_wall / len(sample),
            "embed_sample": len(sample), "write_cpu_ms": 1000 * write_cpu / n, "write_wall_ms": 1000 * write_wall / n,
            "disk_bytes_per_chunk": index.disk_size() / n}


def _child(args: argparse.Namespace) -> int:
    if args.run == "breakdown":
        out = breakdown(Path(args.folder), Path(args.store), args)
    else:
        out = run_mode(args.run, Path(args.folder), Path(args.store), args)
    Path(args.result).write_text(json.dumps(out))
    return 0


def _spawn(run: str, folder: Path, store: Path, args: argparse.Namespace) -> dict:
    result = store.parent / f"{run}.json"
    cmd = [sys.executable, __file__, "--run", run, "--folder", str(folder), "--store", str(store), "--result",
           str(result), "--workers", str(args.workers), "--actors", str(args.actors), "--batch-size",
           str(args.batch_size), "--embed-sample", str(args.embed_sample), "--ray-ip", args.ray_ip]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load_before = _load()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env)
    with TreeMonitor(proc.pid) as mon:
        code = proc.wait()
    wall = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"mode {run} failed with exit code {code}")
    out = json.loads(result.read_text())
    out.update(peak_mb=mon.peak / 1e6, cpu_s=mon.cpu_seconds, process_wall_s=wall, load_before=load_before,
               load_after=_load(), cpu_by_process=mon.cpu_by_process())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fraction", type=float, default=1.0, help="use this fraction of each corpus file")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--actors", type=int, default=2, help="Ray embedding actors")
    parser.add_argument("--modes", default="single,workers,ray")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--embed-sample", type=int, default=2000, help="chunks embedded for the breakdown")
    parser.add_argument("--no-breakdown", action="store_true")
    parser.add_argument("--ray-ip", default="127.0.0.2", help="Ray node IP (loopback; Ray rewrites 127.0.0.1)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        return _child(args)
    if not (0 < args.fraction <= 1):
        parser.error("--fraction must be in (0, 1]")
    if not (CORPUS / "en.txt").is_file():
        print(f"missing {CORPUS}/en.txt", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="swrag-bench-ingest-"))
    results: dict = {"fraction": args.fraction, "cores": os.cpu_count(), "load_start": _load(), "modes": []}
    try:
        folder = tmp / "corpus"
        size = write_corpus(folder, args.fraction)
        results["corpus_mb"] = size / 1e6
        print(f"corpus: {size / 1e6:.2f} MB (fraction {args.fraction}); {os.cpu_count()} cores; load average "
              f"{results['load_start']}; OMP_NUM_THREADS=1 per process", flush=True)
        if not args.no_breakdown:
            b = _spawn("breakdown", folder, tmp / "breakdown-store", args)
            results["breakdown"] = b
            print(f"\ncost per chunk, one process, one thread ({b['chunks']:,} chunks; load {b['load_before']} -> "
                  f"{b['load_after']}):\n"
                  f"  load + plan  {b['plan_cpu_ms']:.3f} ms CPU ({b['plan_wall_ms']:.3f} ms wall)\n"
                  f"  embed        {b['embed_cpu_ms']:.3f} ms CPU ({b['embed_wall_ms']:.3f} ms wall; MiniLM, "
                  f"{b['embed_sample']} chunks)\n"
                  f"  write        {b['write_cpu_ms']:.3f} ms CPU ({b['write_wall_ms']:.3f} ms wall; source store + "
                  f"Chroma + BM25, precomputed vectors)\n"
                  f"  disk         {b['disk_bytes_per_chunk']:.0f} bytes per chunk", flush=True)
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            store = tmp / f"{mode}-store"
            row = _spawn(mode, folder, store, args)
            row["chunks_per_s"] = row["chunks"] / row["seconds"]
            row["chunks_per_cpu_s"] = row["chunks"] / max(row["cpu_s"], 1e-9)
            results["modes"].append(row)
            print(f"  {mode:<8} {row['chunks']:>7,} chunks {row['seconds']:8.1f} s {row['chunks_per_s']:8.1f} chunks/s  "
                  f"CPU {row['cpu_s']:8.1f} s ({row['chunks_per_cpu_s']:.1f} chunks/CPU-s)  peak {row['peak_mb']:7.0f} MB"
                  f"  load {row['load_before']} -> {row['load_after']}", flush=True)
            print("           CPU by process: " + ", ".join(f"{role} {cpu:.1f} s" for role, cpu in row["cpu_by_process"]
                                                             if cpu >= 0.05), flush=True)
            shutil.rmtree(store, ignore_errors=True)
        rows = {r["mode"]: r for r in results["modes"]}
        print("\n| mode | chunks | seconds | chunks/s | x one process | CPU s | chunks/CPU-s | peak MB (PSS) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        base = rows.get("single")
        for r in results["modes"]:
            label = {"single": "1 process", "workers": f"{args.workers} workers + writer",
                     "ray": f"Ray local, {args.actors} actors + writer"}[r["mode"]]
            ratio = f"{r['chunks_per_s'] / base['chunks_per_s']:.2f}x" if base else "-"
            print(f"| {label} | {r['chunks']:,} | {r['seconds']:.1f} | {r['chunks_per_s']:.1f} | {ratio} | "
                  f"{r['cpu_s']:.1f} | {r['chunks_per_cpu_s']:.1f} | {r['peak_mb']:.0f} |")
        results["load_end"] = _load()
        print(f"\nload average: start {results['load_start']}, end {results['load_end']} ({os.cpu_count()} cores); "
              "goal: workers >= 1.7x one process")
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
