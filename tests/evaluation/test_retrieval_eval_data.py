"""Retrieval on the shared evaluation data: the chunk holding a known answer is found and widened.

Uses the real bundled MiniLM on an English SQuAD article and BM25 (jieba) on
multifieldqa_zh. Skipped when ../shared/data/eval is not there, failed instead when ``CI`` is set.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ast
import json

import pytest
from ci_switch import SHARED, importorskip, require_shared
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.assemble import count_tokens

DATA = SHARED / "data" / "eval"  # ../shared beside the repo


@pytest.fixture(autouse=True, scope="module")
def _eval_data():
    """Every test here reads ../shared/data/eval: skip without it, fail in CI."""
    require_shared("data", "eval")


def _rows(name):
    with open(DATA / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _list(value):
    return value if isinstance(value, list) else ast.literal_eval(value)


@pytest.fixture(scope="module")
def normans(tmp_path_factory):
    importorskip("sentence_transformers")
    rows = [r for r in _rows("squad_v2_articles.jsonl") if r["title"] == "Normans"]
    index = SlidingWindowIndex(tmp_path_factory.mktemp("squad"), show_progress=False)  # real MiniLM
    index.add_documents([Document(page_content=rows[0]["context"], metadata={"source": "Normans"})])
    return index, rows


@pytest.mark.parametrize("question_no", [1, 3])
def test_squad_answer_chunk_found_and_widened(normans, question_no):
    index, rows = normans
    row = rows[question_no]
    context = row["context"]
    start = _list(row["answer_char_starts"])[0]
    answer = _list(row["answers"])[0]
    assert context[start:start + len(answer)] == answer
    retriever = index.as_retriever(k=3)
    hits = retriever.find_chunks(row["input"])
    top_hit = hits[0].metadata
    assert top_hit["start_index"] <= start < top_hit["end_index"]  # the small chunk is found precisely
    docs = retriever.invoke(row["input"])
    top = docs[0]
    m = top.metadata
    assert m["start_index"] <= start < m["end_index"]  # ... and widened to its window
    assert top.page_content == context[m["start_index"]:m["end_index"]]
    assert answer in top.page_content
    assert count_tokens(top.page_content) > top_hit["n_tokens"]
    assert sum(count_tokens(d.page_content) for d in docs) <= 1500


def test_multifieldqa_zh_bm25_finds_source_and_answer(tmp_path):
    rows = sorted(_rows("multifieldqa_zh.jsonl"), key=lambda r: (len(r["context"]), r["_id"]))[:6]
    index = SlidingWindowIndex(tmp_path, embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    index.add_documents([Document(page_content=r["context"], metadata={"source": r["_id"]}) for r in rows])
    retriever = index.as_retriever(k=3, weights=(1.0, 0.0))  # BM25 with jieba; the fake dense part is noise
    for row in rows:
        docs = retriever.invoke(row["input"])
        assert docs[0].metadata["source"] == row["_id"], row["input"]
    row = next(r for r in rows if "王德山" in r["input"])
    answer = _list(row["answers"])[0].rstrip("。")
    docs = retriever.invoke(row["input"])
    assert answer in docs[0].page_content
    m = docs[0].metadata
    assert docs[0].page_content == row["context"][m["start_index"]:m["end_index"]]
