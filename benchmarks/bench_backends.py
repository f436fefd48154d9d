"""The windowed index on each vector store: recall, index time and query latency. Not a test.

    python benchmarks/bench_backends.py [--data qasper] [--limit N]

Builds the same index (real MiniLM embeddings, default chunking) over all documents of
a dev set (corpus mode: one index, every question searches it) on each backend --
embedded Chroma, a Chroma server started here on 127.0.0.1, ``InMemoryVectorStore``,
FAISS (flat inner product, source store in a ``LocalFileStore``) and Qdrant's local
mode -- and runs the dev questions through ``WindowedParentRetriever`` (default 1500-
token budget). Prints context recall x100, the index build time and query p50/p95 per
backend. Embeddings are computed once and served from memory to every backend, so
"index s" is the store's own cost (planning, writes, BM25) plus one cached lookup per
chunk; the one-time embedding cost is printed separately.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402

from swrag_integrations.evaluation.datasets import build_corpus, load_examples  # noqa: E402
from swrag_integrations.evaluation.metrics import context_recall  # noqa: E402
from swrag_integrations.langchain.index import SlidingWindowIndex  # noqa: E402
from swrag_integrations.embeddings.minilm import default_embeddings  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "eval"


class MemoEmbeddings(Embeddings):
    """Each text embedded once by the wrapped model, then served from memory."""

    def __init__(self, base: Embeddings) -> None:
        self.base, self.memo, self.seconds = base, {}, 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            started = time.perf_counter()
            self.memo.update(zip(todo, self.base.embed_documents(todo)))
            self.seconds += time.perf_counter() - started
        return [self.memo[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.base.embed_query(text)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _chroma_server(path: Path) -> tuple[subprocess.Popen, int]:
    import chromadb
    from chromadb.config import Settings

    port = _free_port()
    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    proc = subprocess.Popen([chroma, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False)).heartbeat()
            return proc, port
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("the chroma server did not start")


def backends(tmp: Path, emb: Embeddings):
    """(name, factory) pairs; each factory returns a fresh, empty index."""

    def chroma_embedded():
        return SlidingWindowIndex(tmp / "chroma", embedding=emb, show_progress=False)

    def chroma_server():
        proc, port = _chroma_server(tmp / "server")
        chroma_server.proc = proc
        return SlidingWindowIndex(host="127.0.0.1", port=port, embedding=emb, show_progress=False)

    def in_memory():
        from langchain_core.stores import InMemoryByteStore
        from langchain_core.vectorstores import InMemoryVectorStore

        return SlidingWindowIndex(vectorstore=InMemoryVectorStore(emb), source_store=InMemoryByteStore(),
                                  show_progress=False)

    def faiss_store():
        import faiss
        from langchain_classic.storage import LocalFileStore
        from langchain_community.docstore.in_memory import InMemoryDocstore
        from langchain_community.vectorstores import FAISS

        dim = len(emb.embed_query("dimension probe"))
        store = FAISS(embedding_function=emb, index=faiss.IndexFlatIP(dim), docstore=InMemoryDocstore(),
                      index_to_docstore_id={})
        return SlidingWindowIndex(vectorstore=store, source_store=LocalFileStore(tmp / "faiss-sources"),
                                  show_progress=False)

    def qdrant_local():
        from langchain_qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient
        from qdrant_client.models import Distance, VectorParams

        client = QdrantClient(path=str(tmp / "qdrant"))
        dim = len(emb.embed_query("dimension probe"))
        client.create_collection("chunks", vectors_config=VectorParams(size=dim, distance=Distance.COSINE))
        store = QdrantVectorStore(client=client, collection_name="chunks", embedding=emb)
        return SlidingWindowIndex(tmp / "qdrant-sources", vectorstore=store, show_progress=False)

    return [("Chroma (embedded)", chroma_embedded), ("Chroma server (127.0.0.1)", chroma_server),
            ("InMemoryVectorStore", in_memory), ("FAISS + LocalFileStore", faiss_store),
            ("Qdrant (local mode)", qdrant_local)], chroma_server


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="qasper", help="dev set name in ../shared/data/eval (default: qasper)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions")
    args = parser.parse_args(argv)
    path = DATA / f"{args.data}.jsonl"
    if not path.is_file():
        print(f"missing {path} (the shared dev data)", file=sys.stderr)
        return 3
    examples = load_examples(path, args.limit)
    sources = build_corpus(examples)
    docs = [Document(page_content=s.text, id=s.source_id) for s in sources]
    emb = MemoEmbeddings(default_embeddings())
    from swrag_integrations.engine.config import IndexConfig
    from swrag_integrations.engine.records import plan_source

    config = IndexConfig.resolve()
    emb.embed_documents([rec.chunk_text(i) for rec in map(lambda d: plan_source(d, config), docs)
                         for i in range(rec.n_chunks)])  # once, before any backend is timed
    rows = []
    with tempfile.TemporaryDirectory(prefix="swrag-bench-backends-") as tmp:
        pairs, server = backends(Path(tmp), emb)
        try:
            for name, factory in pairs:
                index = factory()
                started = time.perf_counter()
                index.index_documents(docs)
                build = time.perf_counter() - started
                retriever = index.as_retriever()
                retriever.invoke(examples[0].question)  # warm-up (model, probe)
                recalls, times = [], []
                for ex in examples:
                    t0 = time.perf_counter()
                    got = retriever.invoke(ex.question)
                    times.append(time.perf_counter() - t0)
                    recalls.append(context_recall("\n\n".join(d.page_content for d in got), ex.answers, ex.language))
                times.sort()
                rows.append((name, 100 * statistics.mean(recalls), build, 1000 * statistics.median(times),
                             1000 * times[int(0.95 * (len(times) - 1))], index.count("small")))
                print(f"{name}: done", file=sys.stderr)
        finally:
            proc = getattr(server, "proc", None)
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"\n{args.data}: {len(examples)} questions over {len(sources)} documents (corpus mode), "
          f"{rows[0][5]} small chunks; embedding them once with MiniLM took {emb.seconds:.1f} s\n")
    print("| backend | context recall | index s | query p50 ms | query p95 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, recall, build, p50, p95, _ in rows:
        print(f"| {name} | {recall:.1f} | {build:.1f} | {p50:.0f} | {p95:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
