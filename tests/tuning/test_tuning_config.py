"""The tuned configuration: tune() end to end, the JSON round trip into the index, the
retriever and the eval, resuming, and clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings.fake import DeterministicFakeEmbedding

from swrag_integrations.evaluation import run_eval
from swrag_integrations.evaluation.datasets import build_corpus, load_examples
from swrag_integrations.evaluation.pipelines import PIPELINES, EvalConfig
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.langchain.retriever import WindowedParentRetriever
from swrag_integrations.tuning import TunedConfig, tune
from swrag_integrations.tuning.synthetic import TooLittleTextError
from swrag_integrations.cli.tune import index_options, main, retriever_options
from swrag_integrations.tuning.evaluation import register_config
from swrag_integrations.tuning.space import DEFAULT_CANDIDATE, Candidate, SearchSpace


@pytest.fixture(scope="module")
def corpus(shared_dir):
    """Three SQuAD articles (about 80k characters)."""
    return build_corpus(load_examples(shared_dir / "data" / "eval" / "squad_v2_articles.jsonl"))[:3]


@pytest.fixture()
def fake_embeddings(monkeypatch):
    emb = DeterministicFakeEmbedding(size=16)
    import swrag_integrations.embeddings.minilm as module

    monkeypatch.setattr(module, "default_embeddings", lambda *a, **k: emb)
    return emb


def _small_tune(corpus, tmp_path, **kwargs):
    args = dict(out=tmp_path / "cfg.json", space=SearchSpace.small(), max_candidates=6, n_questions=40,
                min_questions=10, budget_minutes=None, embeddings=DeterministicFakeEmbedding(size=16), progress=False)
    args.update(kwargs)
    return tune(corpus, **args)


def test_tune_end_to_end_and_resume(corpus, tmp_path):
    config = _small_tune(corpus, tmp_path)
    path = tmp_path / "cfg.json"
    data = json.loads(path.read_text())
    assert data["swrag_tuned_config"] == 1 and data["chosen"] in ("tuned", "default")
    ev = data["evidence"]
    assert ev["search"]["candidates"] == 6 and ev["search"]["stopped"] == "done"
    assert ev["rungs"][-1]["questions"] == 30  # the search sees the 30 questions not held out
    assert ev["best"]["n"] == ev["default"]["n"] == ev["holdout"]["questions"] == 10  # the final test: the other 10
    assert ev["best"]["ci_low"] <= ev["best"]["mean"] <= ev["best"]["ci_high"]
    assert {"diff", "ci_low", "ci_high", "p", "significant"} <= set(ev["versus_default"])
    assert ev["synthetic"]["report"]["questions"] == 40 and ev["synthetic"]["report"]["leak_rate"] <= 0.2
    labels = [r["label"] for r in ev["candidates"]]
    assert len(labels) == 6 and DEFAULT_CANDIDATE.label in labels
    # the choice follows the evidence: the winner is kept only when it beats the default
    if config.chosen == "tuned" and config.candidate != DEFAULT_CANDIDATE:
        assert ev["versus_default"]["diff"] > 0
    else:
        assert config.candidate == DEFAULT_CANDIDATE
    assert (tmp_path / "cfg.json.state" / "scores.jsonl").is_file()
    assert (tmp_path / "cfg.json.state" / "questions.jsonl").is_file()
    again = _small_tune(corpus, tmp_path)  # everything comes from the state folder
    assert again.evidence["search"]["evaluations"] == 0
    assert again.evidence["search"]["resumed_evaluations"] > 0
    assert again.candidate == config.candidate and again.evidence["best"] == ev["best"]


def test_round_trip_into_index_and_retriever(tmp_path):
    cand = Candidate.make({"child": "sentence", "strategy": "DDS", "window_size": 256, "step": 2},
                          {"k_child": 10, "search_type": "similarity", "weights": (0.75, 0.25), "expand": "medium"})
    config = TunedConfig.from_candidate(cand, budget_tokens=800, evidence={"note": "x"})
    path = config.save(tmp_path / "deep" / "config.json")
    loaded = TunedConfig.load(path)
    assert loaded == config and loaded.candidate == cand
    assert index_options(path) == cand.index_kwargs
    assert retriever_options(path)["budget_tokens"] == 800
    emb = DeterministicFakeEmbedding(size=16)
    index = SlidingWindowIndex(tmp_path / "store", embedding=emb, show_progress=False, **loaded.index_kwargs)
    index.add_documents([Document(page_content="The lighthouse was first lit in 1871. " * 40, metadata={"source": "a"})])
    for key, value in loaded.index_kwargs.items():
        assert getattr(index.engine.config, key) == value
    retriever = index.as_retriever(**loaded.retriever_kwargs)
    assert isinstance(retriever, WindowedParentRetriever)
    for key, value in loaded.retriever_kwargs.items():
        assert getattr(retriever, key) == value
    assert retriever.invoke("When was the lighthouse lit?")
    index.engine.store.close()
    # reopening the index with the same configuration is accepted, another one is refused
    again = SlidingWindowIndex(tmp_path / "store", config=loaded, embedding=emb, show_progress=False)
    assert again.engine.config == index.engine.config
    again.engine.store.close()
    with pytest.raises(ValueError, match="other chunking parameters"):
        SlidingWindowIndex(tmp_path / "store", config=TunedConfig.from_candidate(Candidate.make({"child": "fixed"})), embedding=emb)
    with pytest.raises(ValueError, match="chunk_size=20 contradicts the tuned configuration"):
        SlidingWindowIndex(tmp_path / "other", config=loaded, embedding=emb, chunk_size=20)


def test_config_as_an_eval_strategy(tmp_path):
    cand = Candidate.make({"child": "fixed"}, {"k_child": 10})
    path = TunedConfig.from_candidate(cand, budget_tokens=999).save(tmp_path / "My Tuned.json")
    name = register_config(path)
    assert name == "config-my-tuned" and name in PIPELINES
    doc = " ".join(f"Paragraph {i} talks about roads and weather in the valley." for i in range(60))
    doc += " The bridge was opened by Mayor Alvarez in 1932. " + doc
    rows = [{"input": "Who opened the bridge?", "context": doc, "answers": ["Mayor Alvarez"], "_id": "q1",
             "language": "en"}]
    data = tmp_path / "tiny.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = run_eval([data], [EvalConfig(name, 512), EvalConfig("default", 512)], tmp_path / "eval",
                   retrieval_only=True, embeddings=DeterministicFakeEmbedding(size=16), progress=False, reports=False,
                   budget=300)
    by = {r["strategy"]: r for r in out}
    assert set(by) == {name, "default"}
    assert by[name]["budget"] == 300  # the eval's budget wins over the file's
    records = [json.loads(line) for line in (tmp_path / "eval" / "records.jsonl").read_text().splitlines()]
    mine = next(r for r in records if r["strategy"] == name)
    assert mine["context_tokens"] <= 300
    assert by[name]["chunks"] != by["default"]["chunks"]  # 50-token pieces, not the default sentence children


def test_bad_input_gets_a_clear_message(tmp_path, corpus):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="cannot be written"):
        _small_tune(corpus, tmp_path, out=tmp_path / "file" / "cfg.json")
    with pytest.raises(ValueError, match="is a directory"):
        _small_tune(corpus, tmp_path, out=tmp_path)
    with pytest.raises(TooLittleTextError, match="too little text to tune"):
        _small_tune([Document(page_content="Just one short sentence here.")], tmp_path)
    with pytest.raises(ValueError, match="corpus is empty"):
        _small_tune([], tmp_path)
    with pytest.raises(FileNotFoundError):
        TunedConfig.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON configuration"):
        TunedConfig.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"index": {}}))
    with pytest.raises(ValueError, match="not a tuned configuration"):
        TunedConfig.load(tmp_path / "other.json")
    with pytest.raises(ValueError, match="child"):
        TunedConfig({"child": "paragraph"}, {})


def test_cli(tmp_path, corpus, fake_embeddings, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    for s in corpus:
        (folder / f"{s.source_id}.txt").write_text(s.text, encoding="utf-8")
    out = tmp_path / "cfg.json"
    code = main([str(folder), "--out", str(out), "--space", "small", "--max-configs", "4", "--questions", "30",
                 "--budget-minutes", "none", "--no-progress", "--seed", "3"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "chosen:" in printed and "top configurations" in printed and str(out) in printed
    config = TunedConfig.load(out)
    assert config.evidence["search"]["seed"] == 3 and config.evidence["corpus"]["documents"] == 3

    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "a.txt").write_text("Only a line.")
    assert main([str(tiny), "--out", str(tmp_path / "x.json"), "--no-progress"]) == 2
    assert "too little text" in capsys.readouterr().err
    assert main([str(folder), "--out", str(tiny / "a.txt" / "x.json"), "--no-progress"]) == 2
    assert "cannot be written" in capsys.readouterr().err
    assert main([str(tmp_path / "nope"), "--out", str(tmp_path / "y.json"), "--no-progress"]) == 3
    assert "no such file" in capsys.readouterr().err


def test_the_final_test_is_on_questions_the_search_never_scored(corpus, tmp_path, monkeypatch):
    from swrag_integrations.tuning import engine

    seen: list[tuple[str, list[str]]] = []
    real_score = engine.Evaluator.score

    def score(self, candidate, qids):
        seen.append((candidate.key, list(qids)))
        return real_score(self, candidate, qids)

    monkeypatch.setattr(engine.Evaluator, "score", score)
    config = _small_tune(corpus, tmp_path, holdout=0.3)
    ev = config.evidence
    held = set(ev["holdout"]["question_ids"])
    assert len(held) == ev["holdout"]["questions"] == 12 and ev["holdout"]["selection_questions"] == 28
    winner = next(c for c in ev["candidates"] if c["label"] == ev["best"]["label"])
    final_keys = {Candidate.from_dict(winner).key, DEFAULT_CANDIDATE.key}
    # during the search no candidate was scored on a held-out question; afterwards only the
    # winner and the default, on exactly those
    for key, qids in seen:
        if held & set(qids):
            assert key in final_keys and set(qids) <= held
    assert {k for k, q in seen if held & set(q)} == final_keys
    assert ev["best"]["n"] == ev["default"]["n"] == 12
    assert set(ev["selection"]["versus_default"]) >= {"diff", "significant"}


def test_split_holdout():
    from swrag_integrations.tuning.tune import split_holdout

    ids = [f"q{i}" for i in range(40)]
    select, held = split_holdout(ids, 0.25, seed=1)
    assert len(held) == 10 and len(select) == 30 and set(select) | set(held) == set(ids) and not set(select) & set(held)
    assert split_holdout(list(reversed(ids)), 0.25, seed=1) == (select, held)  # order-free: resumes keep the split
    assert split_holdout(ids, 0.25, seed=2)[1] != held
    assert [len(side) for side in split_holdout(["a", "b"], 0.01)] == [1, 1]  # one question on each side at least
    for bad in (0, 1, 1.5, -0.1, True):
        with pytest.raises(ValueError, match="holdout must be a share"):
            split_holdout(ids, bad)
    with pytest.raises(ValueError, match="at least 2 questions"):
        split_holdout(["only"], 0.5)


def test_load_sources_takes_documents_by_their_shape_with_the_same_source_ids():
    """load_sources converts anything shaped like a LangChain Document (``page_content`` and
    ``metadata``) without importing LangChain, with the source ids the index gives them."""
    from dataclasses import dataclass, field

    from swrag_integrations.engine.ids import source_id_for
    from swrag_integrations.tuning.tune import load_sources

    @dataclass
    class Shaped:
        page_content: str
        metadata: dict = field(default_factory=dict)
        id: str | None = None

    real = Document(page_content="The bridge was opened in 1932.", metadata={"source": "a.txt"})
    shaped = Shaped("The lighthouse was first lit in 1874.", {"source": "b.txt"})
    sources = load_sources([real, shaped])
    assert [(s.source_id, s.text) for s in sources] == [(source_id_for(real), real.page_content),
                                                        (source_id_for(shaped), shaped.page_content)]
    with pytest.raises(ValueError, match="cannot tune on a int"):
        load_sources([3])
