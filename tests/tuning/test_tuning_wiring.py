"""A tuned configuration wired into the package: ``SlidingWindowIndex(config=...)`` records
it (and reports it after reopening), ``swrag tune``/``index``/``ask``/``eval`` take it, and
bad input gets a one-line message and a non-zero exit."""

from __future__ import annotations

import json

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings.fake import DeterministicFakeEmbedding

from swrag_integrations.cli import main as swrag
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.tuning import TunedConfig
from swrag_integrations.tuning.space import Candidate

TEXT = (" ".join(f"Paragraph {i} talks about roads and weather in the valley." for i in range(40))
        + " The bridge was opened by Mayor Alvarez in 1932. "
        + " ".join(f"Section {i} lists the rainfall of the year." for i in range(40)))


@pytest.fixture()
def fake_embeddings(monkeypatch):
    """The package's default embeddings (index and eval) replaced by a small fake."""
    emb = DeterministicFakeEmbedding(size=16)
    import swrag_integrations.evaluation.embeddings as eval_module
    import swrag_integrations.embeddings.minilm as module

    monkeypatch.setattr(module, "default_embeddings", lambda *a, **k: emb)
    monkeypatch.setattr(eval_module, "default_embeddings", lambda *a, **k: emb)
    return emb


@pytest.fixture()
def tuned(tmp_path) -> TunedConfig:
    """A configuration far from the defaults in every part, saved as cfg.json."""
    cand = Candidate.make({"child": "fixed", "strategy": "DDS", "window_size": 256, "step": 2},
                          {"k_child": 10, "search_type": "mmr", "weights": (0.75, 0.25), "expand": "medium"})
    config = TunedConfig.from_candidate(cand, budget_tokens=400,
                                        evidence={"best": {"mean": 0.9, "n": 3}, "candidates": [{"big": 1}]})
    config.save(tmp_path / "cfg.json")
    return config


def test_index_records_the_configuration_and_reports_it_after_reopening(tmp_path, tuned):
    emb = DeterministicFakeEmbedding(size=16)
    index = SlidingWindowIndex(tmp_path / "store", embedding=emb, show_progress=False, config=tmp_path / "cfg.json")
    index.add_documents([Document(page_content=TEXT, metadata={"source": "a"})])
    assert index.engine.config == tuned.index_config
    assert index.engine.config.child == "fixed" and index.engine.config.strategy == "DDS" and index.engine.config.window_size == 256
    index.engine.store.close()

    reopened = SlidingWindowIndex(tmp_path / "store", embedding=emb, show_progress=False)  # no config given
    recorded = reopened.engine.tuned_config
    assert recorded is not None
    assert recorded.index_kwargs == tuned.index_kwargs and recorded.retriever_kwargs == tuned.retriever_kwargs
    assert recorded.evidence == {"best": {"mean": 0.9, "n": 3}}  # the summary, not every candidate
    retriever = reopened.as_retriever()  # starts from the recorded retriever settings
    assert (retriever.k_child, retriever.search_type, retriever.expand, retriever.budget_tokens) == (
        10, "mmr", "medium", 400)
    assert tuple(retriever.weights) == (0.75, 0.25)
    assert reopened.as_retriever(k_child=5, budget_tokens=300).k_child == 5  # explicit keywords win
    docs = retriever.invoke("Who opened the bridge?")
    assert docs and sum(len(d.page_content) for d in docs) > 0
    reopened.engine.store.close()

    # another retriever part on the same chunking is recorded in place of the first
    other = TunedConfig(tuned.index_kwargs, {**tuned.retriever_kwargs, "k_child": 15})
    again = SlidingWindowIndex(tmp_path / "store", embedding=emb, show_progress=False, config=other.to_dict())
    assert again.engine.tuned_config.retriever_kwargs["k_child"] == 15
    again.engine.store.close()
    assert SlidingWindowIndex(tmp_path / "store", embedding=emb).engine.tuned_config.retriever_kwargs["k_child"] == 15


def test_an_index_without_a_configuration_keeps_the_defaults(tmp_path):
    index = SlidingWindowIndex(tmp_path / "plain", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    assert index.engine.tuned_config is None
    retriever = index.as_retriever()
    assert retriever.k_child == 30 and retriever.budget_tokens == 1500


def test_index_config_errors(tmp_path, tuned):
    emb = DeterministicFakeEmbedding(size=16)
    with pytest.raises(ValueError, match="strategy='FFS' contradicts the tuned configuration"):
        SlidingWindowIndex(tmp_path / "a", embedding=emb, config=tuned, strategy="FFS")
    SlidingWindowIndex(tmp_path / "b", embedding=emb, config=tuned, strategy="dds").engine.store.close()  # same value
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(ValueError, match="not a JSON configuration"):
        SlidingWindowIndex(tmp_path / "c", embedding=emb, config=tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError):
        SlidingWindowIndex(tmp_path / "c", embedding=emb, config=tmp_path / "missing.json")
    with pytest.raises(TypeError, match="config must be"):
        SlidingWindowIndex(tmp_path / "c", embedding=emb, config=42)
    # an index built with other chunking refuses the configuration
    SlidingWindowIndex(tmp_path / "d", embedding=emb).engine.store.close()
    with pytest.raises(ValueError, match="other chunking parameters"):
        SlidingWindowIndex(tmp_path / "d", embedding=emb, config=tuned)


def test_swrag_index_ask_and_eval_take_the_configuration(tmp_path, tuned, fake_embeddings, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "valley.txt").write_text(TEXT, encoding="utf-8")
    store = tmp_path / "store"
    assert swrag(["index", str(docs), "--persist-dir", str(store), "--config", str(tmp_path / "cfg.json")]) == 0
    capsys.readouterr()
    index = SlidingWindowIndex(store, show_progress=False)
    assert index.config == tuned.index_config
    assert index.tuned_config.retriever_kwargs == tuned.retriever_kwargs
    index.store.close()

    assert swrag(["ask", "Who opened the bridge?", "--persist-dir", str(store), "--retrieval-only", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    from swrag_integrations.engine.assemble import count_tokens

    assert 0 < count_tokens(result["context"]) <= 400 + 50  # the tuned budget (plus the source labels)

    rows = [{"input": "Who opened the bridge?", "context": TEXT, "answers": ["Mayor Alvarez"], "_id": "q1",
             "language": "en"}]
    data = tmp_path / "tiny.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "eval"
    code = swrag(["eval", "--data", str(data), "--config", str(tmp_path / "cfg.json"), "--retrieval-only",
                  "--out", str(out), "--no-progress", "--no-plots", "--windows", "512,1024"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    rows = results if isinstance(results, list) else results.get("rows", results)
    strategies = [r["strategy"] for r in rows]
    assert strategies == ["config-cfg"]  # only the configuration, once whatever --windows says
    assert rows[0]["context_recall"] is not None


def test_bad_input_one_line_message_and_exit_code(tmp_path, tuned, fake_embeddings, capsys):
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "a.txt").write_text("Only a line.")
    assert swrag(["tune", str(tiny), "--out", str(tmp_path / "x.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "too little text" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1

    (tmp_path / "file").write_text("x")
    assert swrag(["tune", str(tiny), "--out", str(tmp_path / "file" / "x.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cannot be written" in err and len(err.strip().splitlines()) == 1

    (tmp_path / "bad.json").write_text('{"swrag_tuned_config": 1, "index": {"child": "paragraph"}, "retriever": {}}')
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"input": "q?", "context": TEXT, "answers": ["a"], "_id": "1"}) + "\n")
    for argv in (["index", str(tiny), "--persist-dir", str(tmp_path / "s")],
                 ["ask", "q?", "--persist-dir", str(tmp_path / "s"), "--retrieval-only"],
                 ["eval", "--data", str(data), "--retrieval-only", "--out", str(tmp_path / "e")]):
        assert swrag([*argv, "--config", str(tmp_path / "bad.json")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("swrag: error:") and "child must be" in err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    (tmp_path / "notjson.json").write_text("{oops")
    assert swrag(["index", str(tiny), "--persist-dir", str(tmp_path / "s2"), "--config",
                  str(tmp_path / "notjson.json")]) == 2
    assert "not a JSON configuration" in capsys.readouterr().err
    assert swrag(["index", str(tiny), "--persist-dir", str(tmp_path / "s3"), "--config",
                  str(tmp_path / "missing.json")]) == 3
    assert "no such configuration file" in capsys.readouterr().err
