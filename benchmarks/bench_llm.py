"""Benchmark the local LLM loader: load times and generation speed per backend.

    python benchmarks/bench_llm.py [--model PATH_OR_ID] [--max-new-tokens 64] [--repeats 3]

Prints the cold load time (GGUF conversion + IPEX-LLM quantization + low-bit cache write,
in a fresh temporary cache), the warm load time (``load_low_bit`` from that cache), and
greedy decoding tokens/s for IPEX-LLM (``--low-bit``, default sym_int8) and plain
transformers fp32 on the same prompt, with their ratio. Not a test.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swrag_integrations.llm import LocalLLM, load_llama3  # noqa: E402

PROMPT = "Explain in a few paragraphs why the sky is blue."


def tokens_per_second(llm: LocalLLM, prompt: str, max_new_tokens: int, repeats: int) -> tuple[float, int]:
    """Median greedy decoding speed over ``repeats`` runs (after one warm-up run)."""
    llm.generate_ids(prompt, max_new_tokens=8)
    rates, count = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        count = len(llm.generate_ids(prompt, max_new_tokens=max_new_tokens))
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model dir, .gguf or hub id (default: bundled SmolLM2)")
    parser.add_argument("--low-bit", default="sym_int8")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}, load average: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="swrag-bench-") as cache:
        cold = load_llama3(args.model, low_bit=args.low_bit, cache_dir=cache)
        what = "GGUF conversion + " if cold.info.converted_gguf else ""
        print(f"cold load ({what}{args.low_bit} quantization + cache write): {cold.info.load_seconds:6.2f} s")
        del cold
        warm = load_llama3(args.model, low_bit=args.low_bit, cache_dir=cache)
        assert warm.info.from_cache
        print(f"warm load (load_low_bit from cache):                  {warm.info.load_seconds:6.2f} s")
        plain = load_llama3(args.model, backend="transformers", cache_dir=cache)
        print(f"transformers fp32 load (conversion cached):            {plain.info.load_seconds:6.2f} s")

        results = {}
        for name, llm in ((f"ipex-llm {args.low_bit}", warm), ("transformers fp32", plain)):
            rate, count = tokens_per_second(llm, args.prompt, args.max_new_tokens, args.repeats)
            results[name] = rate
            print(f"{name:<22} {rate:6.1f} tok/s  ({count} tokens, median of {args.repeats})")
        ipex_rate, plain_rate = results.values()
        print(f"speed-up ipex-llm / transformers: {ipex_rate / plain_rate:.2f}x")


if __name__ == "__main__":
    main()
