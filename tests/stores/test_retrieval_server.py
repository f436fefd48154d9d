"""A real Chroma server (``chroma run``): index over HTTP, restart, query again."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ci_switch import missing
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex

CHROMA = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))

TEXT = " ".join(f"Station {i} on the northern line serves the village of Vill{i}." for i in range(120))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(path: Path, port: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
    proc = subprocess.Popen(
        [CHROMA, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=env,
    )
    import chromadb
    from chromadb.config import Settings

    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chroma server exited early: {log.read_text(errors='replace')[-2000:]}")
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False)).heartbeat()
            return proc
        except Exception:
            time.sleep(0.3)
    _stop(proc)
    raise RuntimeError("chroma server did not answer its heartbeat within 60 s")


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


def test_http_index_survives_restart(tmp_path):
    if not Path(CHROMA).exists():
        missing("the chroma CLI", "pip install chromadb (a dependency of the package)")
    port = _free_port()
    data, log = tmp_path / "server-data", tmp_path / "chroma.log"
    embedding = DeterministicFakeEmbedding(size=16)
    doc = Document(page_content=TEXT, metadata={"source": "stations.txt"})
    proc = None
    try:
        proc = _start(data, port, log)
        idx = SlidingWindowIndex(host="127.0.0.1", port=port, collection_name="stations", embedding=embedding,
                                 show_progress=False)
        assert idx.engine.index_documents([doc])["added"] == 1
        query = "Which station serves Vill77?"
        before = [(d.page_content, d.metadata["start_index"]) for d in idx.as_retriever(k=2, weights=(1.0, 0.0)).invoke(query)]
        assert "Vill77" in before[0][0]
        assert before[0][0] == TEXT[before[0][1]:before[0][1] + len(before[0][0])]
        _stop(proc)
        proc = None
        with pytest.raises(ConnectionError, match="chroma run"):
            SlidingWindowIndex(host="127.0.0.1", port=port, collection_name="stations", embedding=embedding)
        proc = _start(data, port, log)
        again = SlidingWindowIndex(host="127.0.0.1", port=port, collection_name="stations", embedding=embedding,
                                   show_progress=False)
        assert again.engine.count("small") == idx.engine.count("small") > 0
        after = [(d.page_content, d.metadata["start_index"]) for d in again.as_retriever(k=2, weights=(1.0, 0.0)).invoke(query)]
        assert after == before
        assert again.engine.index_documents([doc])["unchanged"] == 1
        # sources and the BM25 snapshot live on the server too (a Chroma collection as a byte store)
        assert again.engine.keyword.generation == again.engine.store.generation() and not again.engine.keyword.rebuilt
        assert len(again.engine.keyword) == again.engine.count("small")
        assert again.engine.status().healthy
    finally:
        _stop(proc)
