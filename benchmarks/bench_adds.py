"""Benchmark: many small sources in one add against one large source of as many chunks.

    python benchmarks/bench_adds.py [--sources 400] [--fake] [--store chroma|memory]

Both writes go through ``SlidingWindowIndex.add_texts`` into a fresh index, in one run:
``--sources`` one-line texts (one small chunk each) in one call, then one text of about
as many small chunks. Printed: the seconds of each, their ratio, and the embedding calls
and vector-store writes each made (counted by wrapping the embedding and the store), so
a write path that writes per source shows up as a ratio far above 1 (issue 42 item 12).
Measured on this 2-core machine, bundled MiniLM: before store writes were batched across
sources 4.34 s against 0.89 s (4.9x, 400 store writes); after, 1.69 s against 0.80 s (2.1x,
2 store writes). The embedding still runs once per source: see
``swrag_integrations/ingest/writer.py`` ``_rows``.
``--fake``: a deterministic fake embedding instead of the bundled MiniLM (measures the
index's own overhead only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Counting:
    """An embedding that counts ``embed_documents`` calls (and passes them on)."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    def embed_documents(self, texts):
        self.calls += 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def _timed_add(texts: list[str], embedding, store: str) -> tuple[float, int, int, int]:
    from swrag_integrations.langchain.index import SlidingWindowIndex

    with tempfile.TemporaryDirectory() as tmp:
        counting = Counting(embedding)
        index = (SlidingWindowIndex(Path(tmp) / "idx", embedding=counting, show_progress=False) if store == "chroma"
                 else SlidingWindowIndex(embedding=counting, show_progress=False))
        index.add_texts(["warm up the model and the store"])  # first-write costs out of the timing
        writes = [0]
        add = index.engine.vectors.add

        def counted(*args, **kwargs):
            writes[0] += 1
            return add(*args, **kwargs)

        index.engine.vectors.add = counted
        counting.calls = 0
        t0 = time.perf_counter()
        index.add_texts(texts)
        seconds = time.perf_counter() - t0
        chunks = index.count("small") - 1
        index.close()
        return seconds, counting.calls, writes[0], chunks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=400)
    parser.add_argument("--fake", action="store_true")
    parser.add_argument("--store", choices=("chroma", "memory"), default="chroma")
    args = parser.parse_args(argv)
    if args.fake:
        from langchain_core.embeddings import DeterministicFakeEmbedding

        embedding = DeterministicFakeEmbedding(size=384)
    else:
        from swrag_integrations.embeddings.minilm import default_embeddings

        embedding = default_embeddings()
    lines = [f"Line {i}: the keeper logged the weather over the bay, the ships that passed the headland, the "
             f"state of the lamp and the lens, the oil burned since dusk and the names of the men on watch." for i in
             range(args.sources)]
    many = _timed_add(lines, embedding, args.store)
    one = _timed_add([" ".join(lines)], embedding, args.store)
    print(f"{'write':<34} {'s':>8} {'chunks':>7} {'embed calls':>12} {'store writes':>13}")
    print(f"{f'{args.sources} one-line sources, one call':<34} {many[0]:8.3f} {many[3]:7d} {many[1]:12d} {many[2]:13d}")
    print(f"{'one source':<34} {one[0]:8.3f} {one[3]:7d} {one[1]:12d} {one[2]:13d}")
    print(f"ratio (many / one): {many[0] / one[0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
