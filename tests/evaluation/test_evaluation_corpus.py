"""Corpus mode (issue 7): one index for all documents, source-level metrics."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.embeddings import Embeddings

from swrag_integrations.evaluation import main, run_eval
from swrag_integrations.evaluation.embeddings import CachedEmbeddings
from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.evaluation.datasets import example_sources, load_examples, source_id


def _filler(topic: str, n: int) -> str:
    return " ".join(f"Paragraph {i} about {topic} repeats common words about {topic}." for i in range(n))


ARTICLES = {
    "Normans": _filler("normans", 15) + " The Normans gave their name to Normandy, a region in France. " + _filler("vikings", 15),
    "Oxygen": _filler("oxygen", 15) + " Oxygen was discovered by Carl Wilhelm Scheele in 1771. " + _filler("air", 15),
    "Victoria": _filler("victoria", 15) + " Lake Victoria is the largest lake in Africa. " + _filler("lakes", 15),
}


def _squad_rows():
    qs = [
        ("Normans", "In what country is Normandy located?", "France"),
        ("Normans", "Who gave their name to Normandy?", "The Normans"),
        ("Oxygen", "Who discovered oxygen?", "Carl Wilhelm Scheele"),
        ("Victoria", "What is the largest lake in Africa?", "Lake Victoria"),
    ]
    rows = []
    for i, (title, q, a) in enumerate(qs):
        ctx = ARTICLES[title]
        rows.append({"input": q, "context": ctx, "answers": [a], "answer_char_starts": [ctx.index(a)],
                     "language": "en", "_id": f"s{i}", "title": title})
    return rows


HOTPOT_ROWS = [
    {
        "input": "Were Scott Derrickson and Ed Wood of the same nationality?",
        "context": "Passage 1:\nEd Wood (film)\nEd Wood is a 1994 American biographical film by Tim Burton.\n"
                   "Passage 2:\nScott Derrickson\nScott Derrickson is an American director and screenwriter.\n"
                   "Passage 3:\nWoodson, Arkansas\nWoodson is a census-designated place in Pulaski County.\n"
                   "Passage 4:\nEd Wood\nEdward Davis Wood Jr. was an American filmmaker and actor.\n",
        "answers": ["yes"], "language": "en", "_id": "h1",
        "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
    },
    {
        "input": "Which county is Woodson, Arkansas in?",
        "context": "Passage 1:\nWoodson, Arkansas\nWoodson is a census-designated place in Pulaski County.\n"
                   "Passage 2:\nTyler Bates\nTyler Bates is an American musician and composer.\n",
        "answers": ["Pulaski County"], "language": "en", "_id": "h2",
        "supporting_facts": [["Woodson, Arkansas", 0]],
    },
]


def _write(path: Path, rows) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_corpus_mode_source_recall_and_span_hit(tmp_path):
    data = _write(tmp_path / "squad_mini.jsonl", _squad_rows())
    grid = [EvalConfig("dds", 64, "3"), EvalConfig("ffs", 64, "1/2"), EvalConfig("rcs", 64)]
    rows = run_eval([data], grid, tmp_path / "out", mode="corpus", retrieval_only=True, budget=120, k=8,
                    progress=False, n_resamples=100)
    assert len(rows) == 3
    for row in rows:
        assert row["mode"] == "corpus" and row["budget"] == 120 and row["k"] == 8 and row["n"] == 4
        assert row["source_recall"] == 1.0  # the distinctive words lead to the right article
        assert row["span_hit"] == 1.0  # and the exact answer span is inside a retrieved span
    records = json.loads((tmp_path / "out" / "records.json").read_text())
    # one index for the whole corpus: 3 distinct articles, shared by every question
    assert {r["index_id"] for r in records} == {"corpus"}
    assert all(r["context_tokens"] <= 120 for r in records)
    table = (tmp_path / "out" / "table.md").read_text()
    assert "## source_recall" in table and "## span_hit" in table


def test_corpus_mode_span_hit_is_exact(tmp_path):
    # a budget too small for the sentence with the answer: the source is found, the span is not
    data = _write(tmp_path / "squad_tiny_budget.jsonl", _squad_rows()[2:3])
    rows = run_eval([data], [EvalConfig("rcs", 16)], tmp_path / "o", mode="corpus", retrieval_only=True, budget=3,
                    progress=False, n_resamples=50, reports=False)
    rec = json.loads((tmp_path / "o" / "records.json").read_text())[0]
    start = ARTICLES["Oxygen"].index("Carl Wilhelm Scheele")
    inside = any(a <= start and start + len("Carl Wilhelm Scheele") <= b for _, a, b in rec["spans"])
    assert rec["span_hit"] == (1.0 if inside else 0.0)
    assert rows[0]["span_hit"] == rec["span_hit"]


def test_hotpot_passages_split_in_corpus_cli(tmp_path):
    data = _write(tmp_path / "hotpot_mini.jsonl", HOTPOT_ROWS)
    out = tmp_path / "hp"
    code = main(["--data", str(data), "--corpus", "--split-passages", "--strategies", "dds,rcs", "--windows", "32",
                 "--steps", "2", "--retrieval-only", "--budget", "200", "--no-progress", "--out", str(out)])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    assert {r["strategy"] for r in rows} == {"dds", "rcs"}
    for row in rows:
        assert row["mode"] == "corpus" and row["split_passages"] is True
        assert row["source_recall"] is not None and row["span_hit"] is None
    records = json.loads((out / "records.json").read_text())
    # "Woodson, Arkansas" occurs in both questions' contexts: 5 distinct passages in all
    examples = load_examples(data)
    ids = {s.source_id for e in examples for s in example_sources(e, split=True)}
    assert len(ids) == 5
    h2 = [r for r in records if r["qid"] == "h2"]
    assert all(r["source_recall"] == 1.0 for r in h2)
    h1 = [r for r in records if r["qid"] == "h1"]
    assert all(0.0 <= r["gold_sources_found"] <= 1.0 for r in h1)
    assert all(r["source_recall"] in (0.0, 1.0) for r in records)


class _Counting(Embeddings):
    def __init__(self):
        self.seen = []

    def embed_documents(self, texts):
        self.seen.extend(texts)
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def test_embedding_cache_by_text_hash(tmp_path):
    base = _Counting()
    path = tmp_path / "emb.sqlite"
    cache = CachedEmbeddings(base, path, namespace="count")
    assert cache.embed_documents(["a", "bb", "a"]) == [[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]]
    assert base.seen == ["a", "bb"]
    cache.close()
    again = CachedEmbeddings(base, path, namespace="count")  # reopened from disk
    assert again.embed_documents(["bb", "ccc"]) == [[2.0, 1.0], [3.0, 1.0]]
    assert base.seen == ["a", "bb", "ccc"] and again.hits == 1 and again.misses == 1
    other = CachedEmbeddings(base, path, namespace="other-model")
    other.embed_query("a")
    assert base.seen[-1] == "a"  # another model does not share vectors


def test_source_ids_are_content_hashes():
    assert source_id("x") == source_id("x") != source_id("y")
