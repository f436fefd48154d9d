"""Golden test of the default retriever: the spans it returns for 8 recorded questions.

``tests/data/golden_default_retriever.json`` holds two documents, eight questions and what
the default retriever (``SlidingWindowIndex(...).as_retriever()``, every option at its
default) returned for each of them, with the deterministic bag-of-trigrams embedding below:
the chunk count and, per question, every context piece in order (source, character offsets,
rank, tokens, score and a hash of its text). The test rebuilds the index with the current
code and requires the same pieces in the same order, so any change of chunking, search,
ranking or assembly fails it. It is a regression test against the *last recording*, not a
comparison with any older code: each intended change of retrieval re-records it.

History of the recording: first recorded at commit 78abfea, the last commit before the
index-engine restructuring (issue 26; the engine reproduced it exactly); re-recorded at
dc6a375 when a local index's keyword index moved from the bm25s snapshot (k1 1.5) to
tantivy (k1 1.2, quantised lengths: issue 28): the same spans, two questions with two
low-ranked pieces swapped, slightly different scores; on the six dev sets' tuning halves the
default's context recall did not move (cmrc2018 97.7 -> 97.8, 2 of 205 questions; the other
five identical). The full-model comparison of the old and new engine on the six dev sets is
docs/eval/parity.md.
Re-recorded again when apostrophes became word separators (``walrus's`` -> walrus, as
Milvus' analyser splits it: issue 42): the same spans for six questions (three with slightly
different scores), one with its pieces reordered, one ("What does the writer lock protect?")
with two pieces merged and one low-ranked piece swapped; the default's context recall on the
English dev sets' tuning halves did not move (qasper 73.6, hotpotqa 94.8, minilongbench 91.6,
squad_v2_articles 100).

Re-record (only for an intended change of retrieval, and say so in the commit)::

    PYTHONPATH=<checkout> python tests/engine/test_retrieval_golden.py --record DOC.md DOC2.md

writes the fixture from the code on ``PYTHONPATH`` (the documents' text is stored in it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_core.documents import Document
from fake_embeddings import TrigramEmbedder
from langchain_core.embeddings import Embeddings

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "golden_default_retriever.json"

QUESTIONS = [
    "How much does each chunk cost to embed on one CPU?",
    "What happens at 10M and 100M chunks?",
    "When should ingestion move to a Ray cluster?",
    "Which levers of corpus-mode ranking were tried?",
    "How were the ranking levers measured?",
    "How does the default compare with the peers and the goal?",
    "What does the writer lock protect?",
    "Does dense similarity or MMR pick the children?",
]


class TrigramEmbeddings(TrigramEmbedder, Embeddings):
    """The shared trigram embedding (tests/fake_embeddings.py) at 256 dimensions, as a
    LangChain ``Embeddings``."""

    def __init__(self) -> None:
        super().__init__(dim=256)


def default_retrieval(documents: list[dict[str, str]], questions: list[str], folder: str | Path) -> dict[str, Any]:
    """Index ``documents`` (``{"source", "text"}``) in a new ``SlidingWindowIndex`` at
    ``folder`` with every default, ask ``as_retriever()`` each question and return the
    chunk count and, per question, the pieces it returned (in order)."""
    from swrag_integrations.langchain.index import SlidingWindowIndex

    index = SlidingWindowIndex(folder, embedding=TrigramEmbeddings(), show_progress=False)
    index.add_documents([Document(page_content=d["text"], metadata={"source": d["source"]}) for d in documents])
    retriever = index.as_retriever()
    results = []
    for question in questions:
        results.append([
            {
                "source": doc.metadata["source"],
                "start_index": int(doc.metadata["start_index"]),
                "end_index": int(doc.metadata["end_index"]),
                "rank": int(doc.metadata["rank"]),
                "n_tokens": int(doc.metadata["n_tokens"]),
                "score": round(float(doc.metadata["score"]), 9),
                "sha256": hashlib.sha256(doc.page_content.encode("utf-8")).hexdigest(),
            }
            for doc in retriever.invoke(question)
        ])
    return {"chunks": index.engine.count("small"), "results": results}


def test_default_retriever_returns_the_recorded_spans(tmp_path):
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    got = default_retrieval(fixture["documents"], fixture["questions"], tmp_path / "index")
    assert got["chunks"] == fixture["chunks"]
    for question, want, pieces in zip(fixture["questions"], fixture["results"], got["results"]):
        assert pieces == want, f"the default retriever's context for {question!r} changed"
    assert len(got["results"]) == len(fixture["results"]) == len(QUESTIONS)


def _record(paths: list[str]) -> None:
    """Write the fixture from the code on ``PYTHONPATH`` (see the module docstring)."""
    import subprocess

    import swrag_integrations

    root = Path(swrag_integrations.__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    documents = [{"source": Path(p).name, "text": Path(p).read_text(encoding="utf-8")} for p in paths]
    with tempfile.TemporaryDirectory() as folder:
        got = default_retrieval(documents, QUESTIONS, Path(folder) / "index")
    fixture = {"recorded_with": commit, "embedding": "TrigramEmbeddings (tests/engine/test_retrieval_golden.py)",
               "documents": documents, "questions": QUESTIONS, **got}
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE} ({commit}, {got['chunks']} chunks)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="record the golden fixture with the code on PYTHONPATH")
    parser.add_argument("--record", nargs="+", metavar="DOC", required=True, help="documents to index")
    _record(parser.parse_args().record)
    sys.exit(0)
