"""RAPTOR trees: the extractive path on a real document, persistence, incremental builds, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.methods.raptor import ClusterConfig, ExtractiveSummarizer, RaptorIndex, TreeConfig, build_tree
from swrag_integrations.methods.raptor.build import TreeBuilder
from swrag_integrations.methods.raptor.leaves import leaves_from_index, leaves_from_text
from swrag_integrations.methods.raptor.tree import Leaf, RaptorTree
from swrag_integrations.methods.raptor.tree import RaptorNode, interval_union

PCA = TreeConfig(cluster=ClusterConfig(reduction="pca"))


@pytest.fixture(scope="module")
def qasper_text(shared_dir):
    row = json.loads((shared_dir / "data" / "eval" / "qasper.jsonl").open(encoding="utf-8").readline())
    return row["context"]


@pytest.fixture(scope="module")
def qasper_tree(qasper_text):
    leaves = leaves_from_text("qasper0", qasper_text, size=100)
    return build_tree(leaves, DeterministicFakeEmbedding(size=32), sources={"qasper0": qasper_text}, config=PCA,
                      show_progress=False)


def test_extractive_tree_on_a_real_document_keeps_exact_offsets(qasper_text, qasper_tree):
    tree = qasper_tree
    leaves = [tree.nodes[i] for i in tree.layer(0)]
    # leaves tile the text (blank pieces aside) and are exact
    assert all(qasper_text[a:b] == n.text for n in leaves for (_, a, b) in n.spans)
    assert "".join(n.text for n in leaves).split() == qasper_text.split()
    assert tree.n_layers >= 2 and len(tree.layer(1)) >= 2
    for i, node in enumerate(tree.nodes):
        if node.layer == 0:
            continue
        assert node.kind == "extractive" and node.spans and node.children
        assert all(tree.nodes[c].layer == node.layer - 1 for c in node.children)
        # an extractive summary is made of exact sentences of its source ...
        assert all(qasper_text[a:b] == t for (_, a, b), t in zip(node.spans, node.span_texts))
        # ... that lie in the leaves it summarises, which are its children's leaves
        assert set(node.leaves) == {j for c in node.children for j in tree.nodes[c].leaves}
        covered = tree.leaf_spans(i)
        assert all(any(a0 <= (a + b) / 2 <= b0 for _, a0, b0 in covered) for _, a, b in node.spans)
    assert tree.meta["report"]["summaries"]["llm_calls"] == 0
    assert tree.embeddings.shape == (len(tree), 32)


def test_persistence_round_trip_is_equal(tmp_path, qasper_tree):
    blob = qasper_tree.to_bytes()
    assert RaptorTree.from_bytes(blob) == qasper_tree
    assert b"\x80\x04" not in blob[:2]  # not a pickle
    assert RaptorTree.load(qasper_tree.save(tmp_path / "t")) == qasper_tree
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["embeddings.npy", "tree.json"]
    with pytest.raises(ValueError, match="magic"):
        RaptorTree.from_bytes(b"nonsense")
    with pytest.raises(FileNotFoundError):
        RaptorTree.load(tmp_path / "missing")


def test_a_document_too_small_to_cluster_gives_a_leaves_only_tree():
    text = "A short note. It has two sentences."
    tree = build_tree(leaves_from_text("tiny", text, size=5), DeterministicFakeEmbedding(size=8), config=PCA,
                      show_progress=False)
    assert tree.n_layers == 1 and len(tree) >= 1
    assert any("too small" in note for note in tree.meta["notes"])
    empty = build_tree(leaves_from_text("blank", "   \n  "), DeterministicFakeEmbedding(size=8), show_progress=False)
    assert len(empty) == 0 and empty.n_layers == 0 and "no leaves" in empty.meta["notes"][0]
    assert RaptorTree.from_bytes(empty.to_bytes()) == empty


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="characters"):
        Leaf("s", 0, 5, "abc")
    with pytest.raises(ValueError, match="max_layers"):
        TreeConfig(max_layers=0)
    with pytest.raises(TypeError, match="Embeddings"):
        TreeBuilder(object())
    with pytest.raises(TypeError, match="Leaf"):
        TreeBuilder(DeterministicFakeEmbedding(size=4)).build([("s", 0, 1, "x")])
    with pytest.raises(ValueError, match="strategy"):
        leaves_from_text("s", "text", strategy="RCS")
    with pytest.raises(ValueError, match="kind"):
        RaptorNode("x", 0, "abstract", "t")
    with pytest.raises(ValueError, match="missing nodes"):
        RaptorTree([RaptorNode("x", 1, "llm", "t", (3,), (3,))], np.zeros((1, 2)))


def test_window_leaves_overlap_and_stay_exact():
    text = "One sentence here. " * 40
    leaves = leaves_from_text("w", text, strategy="DDS", size=20, step=2)
    assert len(leaves) > 2 and all(text[lf.start:lf.end] == lf.text for lf in leaves)
    assert any(b.start < a.end for a, b in zip(leaves, leaves[1:]))  # overlapping windows
    assert interval_union([("w", lf.start, lf.end) for lf in leaves]) == [("w", leaves[0].start, leaves[-1].end)]


def _texts(n_docs: int, sentences: int = 80) -> dict[str, str]:
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta"]
    out = {}
    for d in range(n_docs):
        out[f"doc{d}"] = " ".join(f"{words[(i + d) % 8].title()} {words[(3 * i) % 8]} number {i} of {d}."
                                  for i in range(sentences))
    return out


def test_document_scope_is_incremental_and_persists_in_a_store(tmp_path):
    from swrag_integrations.stores.sources import SqliteSourceStore

    store = SqliteSourceStore(tmp_path / "store.sqlite3")
    emb = DeterministicFakeEmbedding(size=16)
    texts = _texts(3)
    raptor = RaptorIndex(store=store, embeddings=emb, config=PCA, leaves={"size": 30}, show_progress=False)
    first = raptor.build(texts)
    assert (first.trees, first.reused, first.removed) == (3, 0, 0)
    again = RaptorIndex(store=store, embeddings=emb, config=PCA, leaves={"size": 30}, show_progress=False)
    assert again.keys() == ["doc0", "doc1", "doc2"] and again.stale(texts) == []
    assert again.get("doc1") == raptor.get("doc1")  # read back from the store, equal
    assert again.build(texts).trees == 0
    changed = dict(texts, doc1=texts["doc1"] + " A new closing sentence.")
    changed.pop("doc2")
    report = again.build(changed)
    assert (report.trees, report.reused, report.removed) == (1, 1, 1)
    assert again.keys() == ["doc0", "doc1"]
    assert again.get("doc0") == raptor.get("doc0")
    assert "A new closing sentence." in "".join(n.text for n in again.get("doc1").nodes if n.layer == 0)
    assert store.get_blob(raptor._blob("doc2")) is None  # the removed tree's blob is gone
    # other settings are not reused
    other = RaptorIndex(store=store, embeddings=emb, config=PCA, leaves={"size": 30},
                        summarizer=ExtractiveSummarizer(64), show_progress=False)
    assert other.stale(changed) == ["doc0", "doc1"]
    store.close()


def test_corpus_scope_and_folders(tmp_path):
    emb = DeterministicFakeEmbedding(size=16)
    texts = _texts(2, 60)
    raptor = RaptorIndex(embeddings=emb, config=PCA, scope="corpus", leaves={"size": 30}, show_progress=False)
    assert raptor.build(texts).trees == 1 and raptor.keys() == ["corpus"]
    assert raptor.tree.source_ids == ["doc0", "doc1"]
    assert raptor.build(texts).reused == 1
    raptor.save(tmp_path / "trees")
    loaded = RaptorIndex(embeddings=emb, config=PCA, scope="corpus", leaves={"size": 30}).load(tmp_path / "trees")
    assert loaded.tree == raptor.tree
    with pytest.raises(ValueError, match="scope"):
        RaptorIndex(embeddings=emb, scope="document").load(tmp_path / "trees")
    with pytest.raises(ValueError, match="texts"):
        RaptorIndex(embeddings=emb).build()


def test_trees_over_a_sliding_window_index(tmp_path):
    from swrag_integrations.langchain.index import SlidingWindowIndex

    emb = DeterministicFakeEmbedding(size=16)
    index = SlidingWindowIndex(tmp_path / "idx", embedding=emb, show_progress=False)
    texts = _texts(2, 70)
    index.engine.index_documents([Document(page_content=t, id=k, metadata={"source": k}) for k, t in texts.items()])
    small = leaves_from_index(index)
    assert len(small) == index.engine.count("small")
    for leaf in small:
        assert index.engine.source_text(leaf.source_id)[leaf.start:leaf.end] == leaf.text
    windows = leaves_from_index(index, level="window")
    assert windows and all(index.engine.source_text(w.source_id)[w.start:w.end] == w.text for w in windows)
    raptor = RaptorIndex(index, config=PCA, show_progress=False)
    report = raptor.build()
    assert report.trees == 2 and report.leaves == len(small)
    reopened = RaptorIndex(index, config=PCA, show_progress=False)  # trees live in the index's source store
    assert reopened.keys() == sorted(index.engine.source_ids()) and reopened.build().trees == 0
    index.engine.store.close()
