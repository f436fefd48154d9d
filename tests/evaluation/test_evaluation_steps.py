"""Context steps of the evaluation (diversity, LITM, RSE, rerank, chunk headers) end to end.

Retrieval only, fake embeddings and ``FakeListLLM``: no model is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.embeddings.fake import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM

from swrag_integrations.methods.context.ordering import litm_order
from swrag_integrations.evaluation import main, run_eval
from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.evaluation.datasets import Source
from swrag_integrations.evaluation.pipelines import build_pipeline
from swrag_integrations.evaluation.steps import (
    ContextSteps,
    StepNotSupported,
    StepTools,
    apply_rse,
    piece_diversity,
    steps_context,
)

GRID = [EvalConfig("dds", 64, "2"), EvalConfig("rcs", 64)]
BUDGET = 150


def _filler(topic: str, n: int) -> str:
    return " ".join(f"The {topic} report paragraph {i} lists ordinary facts about {topic} weather and roads." for i in range(n))


def _rows():
    doc = (_filler("harbour", 25) + " The secret code of the harbour is 4711 and it never changes. "
           + _filler("market", 25) + " The market opens at dawn and the harbour master rings a bell. " + _filler("bridge", 20))
    doc2 = _filler("castle", 20) + " The castle was built by Queen Matilda in 1120. " + _filler("garden", 20)
    return [
        {"input": "What is the secret code of the harbour?", "context": doc, "answers": ["4711"], "language": "en", "_id": "q1"},
        {"input": "When does the market open?", "context": doc, "answers": ["at dawn"], "language": "en", "_id": "q2"},
        {"input": "Who built the castle?", "context": doc2, "answers": ["Queen Matilda"], "language": "en", "_id": "q3"},
    ]


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rows()) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def emb():
    return DeterministicFakeEmbedding(size=16)


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]


def _run(data, out, emb, **kw):
    return run_eval([data], GRID, out, budget=BUDGET, retrieval_only=True, embeddings=emb, progress=False,
                    n_resamples=50, reports=False, **kw)


OPTIONS = [
    ({"diversity": True}, "diversity"),
    ({"diversity": "mmr"}, "diversity-mmr"),
    ({"litm": True}, "litm"),
    ({"rse": True}, "rse"),
    ({"rerank": "embedding"}, "rerank-embedding"),
    ({"rerank": "llm", "llm": FakeListLLM(responses=["yes", "no", "maybe"])}, "rerank-llm"),
    ({"autocontext": True, "header_llm": FakeListLLM(responses=["Title: Harbour report\nSummary: Facts."])}, "autocontext"),
    ({"contextual": True, "header_llm": FakeListLLM(responses=["About the harbour report."])}, "contextual"),
    ({"rerank": "embedding", "diversity": True, "litm": True}, "rerank-embedding+diversity+litm"),
]


@pytest.mark.parametrize("options,label", OPTIONS, ids=[o[1] for o in OPTIONS])
def test_each_option_end_to_end(tmp_path, data, emb, options, label):
    out = tmp_path / "out"
    rows = _run(data, out, emb, **options)
    assert {r["steps"] for r in rows} == {label}
    assert len(rows) == len(GRID) and all(r["n"] == 3 for r in rows)
    records = _records(out)
    assert len(records) == 3 * len(GRID)
    for rec in records:
        assert rec["steps"] == label and rec["key"].endswith("|" + label + "#" + rec["qid"])
        assert 0.0 <= rec["context_recall"] <= 1.0
        assert 0 < rec["context_tokens"] <= BUDGET
    assert json.loads((out / "results.json").read_text())[0]["steps"] == label
    if "autocontext" in label or "contextual" in label:
        reports = [r["header_report"] for r in records if r.get("header_report")]
        assert reports and all(r["with_header"] == r["chunks"] > 0 for r in reports)


def test_labels_resume_and_side_by_side_rows(tmp_path, data, emb):
    out = tmp_path / "out"
    base = _run(data, out, emb)
    assert {r["steps"] for r in base} == {""}
    assert all(not r["key"].endswith("|") and "|ret#" in r["key"] for r in _records(out))  # baseline keys unchanged
    rows = _run(data, out, emb, diversity=True)
    assert sorted(r["steps"] for r in rows) == ["", "", "diversity", "diversity"]
    n = len(_records(out))
    assert n == 2 * 3 * len(GRID)
    again = _run(data, out, emb, diversity=True)  # resume: nothing new is computed
    assert len(_records(out)) == n
    assert sorted(json.dumps(r, sort_keys=True, default=str) for r in again if r["steps"]) == sorted(
        json.dumps(r, sort_keys=True, default=str) for r in rows if r["steps"])
    # tables and significance show the step rows, compared with the same configuration without steps
    run_eval([data], GRID, out, budget=BUDGET, retrieval_only=True, embeddings=emb, progress=False, n_resamples=50,
             diversity=True)
    table = (out / "table.md").read_text()
    assert "DDS +diversity" in table and "RCS +diversity" in table
    sig = (out / "significance.md").read_text()
    assert "| tiny | DDS +diversity | 64 | 2 | 3 |" in sig and "| tiny | RCS +diversity | 64 | - | 3 |" in sig


def test_context_diversity_recorded(tmp_path, data, emb):
    out = tmp_path / "out"
    rows = _run(data, out, emb)
    assert all(r["context_diversity"] is None for r in _records(out))  # off by default for the baseline
    rows = _run(data, out, emb, diversity=True)
    recs = [r for r in _records(out) if r["steps"] == "diversity"]
    values = [r["context_diversity"] for r in recs if r["context_pieces"] >= 2]
    assert values and all(0.0 <= v <= 2.0 for v in values)
    row = next(r for r in rows if r["steps"] == "diversity" and r["strategy"] == "rcs")
    assert row["context_diversity"] is not None and row["context_diversity_n"] >= 1
    # the baseline can measure it too, without changing its key
    out2 = tmp_path / "out2"
    _run(data, out2, emb, measure_diversity=True)
    assert all(r["steps"] == "" for r in _records(out2))
    assert any(r["context_diversity"] is not None for r in _records(out2))


def test_piece_diversity_basics(emb):
    assert piece_diversity(["only one"], emb) is None
    assert piece_diversity(["same text", "same text"], emb) == pytest.approx(0.0, abs=1e-6)
    assert piece_diversity(["alpha beta", "gamma delta", "epsilon"], emb) > 0.0


def _pipeline(strategy="dds", window=64, step="2"):
    text = _rows()[0]["context"]
    return build_pipeline(EvalConfig(strategy, window, step), [Source("doc", text)])


def test_litm_keeps_the_text_and_reorders_the_pieces(emb):
    pipe = _pipeline("rcs", 32, None)
    question = "harbour market bridge code"
    base = steps_context(pipe, question, ContextSteps(), StepTools(embeddings=emb), budget=200)
    litm = steps_context(pipe, question, ContextSteps(litm=True), StepTools(embeddings=emb), budget=200)
    assert len(base.spans) >= 3
    assert sorted(base.offsets) == sorted(litm.offsets)
    assert litm.offsets == [base.offsets[i] for i in litm_order(len(base.offsets))]
    assert sorted(litm.text.split("\n\n")) == sorted(base.text.split("\n\n"))


@pytest.mark.parametrize("strategy,window,step", [("dds", 64, "2"), ("rcs", 64, None), ("ffs", 64, "1/2")])
def test_rse_segments_are_unions_of_chunks(strategy, window, step):
    pipe = _pipeline(strategy, window, step)
    ranked = pipe.retrieve("What is the secret code of the harbour?")
    spans = apply_rse("What is the secret code of the harbour?", ranked, pipe, pool=10, budget=300)
    assert spans
    starts = {a for _, a, _ in pipe.spans}
    ends = {b for _, _, b in pipe.spans}
    for sid, a, b in spans:
        assert sid == "doc" and a in starts and b in ends and b > a
    best = ranked[0]
    assert any(a <= best[1] and best[2] <= b for _, a, b in spans)  # the best hit is in a segment
    assert len(spans) == len(set(spans))


def test_rse_error_for_unsupported_pipelines(tmp_path, data, emb):
    for config in (EvalConfig("parent", 64, "3"), EvalConfig("langchain-stock", 64)):
        with pytest.raises(StepNotSupported, match="--rse needs a pipeline with a chunk list"):
            run_eval([data], [config], tmp_path / "x", retrieval_only=True, embeddings=emb, progress=False, rse=True)
        with pytest.raises(StepNotSupported, match="--autocontext"):
            run_eval([data], [config], tmp_path / "x", retrieval_only=True, embeddings=emb, progress=False,
                     autocontext=True, header_llm=FakeListLLM(responses=["x"]))

    class NoChunks:
        texts = {"doc": "text"}

    with pytest.raises(StepNotSupported, match="chunk list"):
        apply_rse("q", [("doc", 0, 4)], NoChunks(), pool=5, budget=100)
    assert not (tmp_path / "x" / "records.jsonl").exists()  # refused before any work


def test_option_errors(tmp_path, data, emb):
    with pytest.raises(ValueError, match="one of contextual and autocontext"):
        _run(data, tmp_path / "o", emb, contextual=True, autocontext=True, header_llm=FakeListLLM(responses=["x"]))
    with pytest.raises(ValueError):
        _run(data, tmp_path / "o", emb, rerank="cross-encoder")
    with pytest.raises(ValueError):
        _run(data, tmp_path / "o", emb, steps=ContextSteps(litm=True), litm=True)
    assert ContextSteps(diversity="greedy", pool=5).label == "diversity@5"
    assert ContextSteps(litm=True, pool=5).label == "litm"


def test_autocontext_headers_are_indexed_and_cached(tmp_path, data, emb):
    llm = FakeListLLM(responses=["Title: Harbour report\nSummary: Codes, markets and bridges."])
    out = tmp_path / "out"
    _run(data, out, emb, autocontext=True, header_llm=llm)
    reports = [r["header_report"] for r in _records(out) if r.get("header_report")]
    # two documents x two configurations; the per-document header is generated once and
    # reused by the second configuration (sqlite cache in <out>/cache/headers.sqlite)
    assert sum(r["llm_calls"] for r in reports) == 2
    assert sum(r["cached"] for r in reports) > 0
    assert (out / "cache" / "headers.sqlite").is_file()

    from swrag_integrations.methods.context import ContextualChunkHeaders
    from swrag_integrations.evaluation.steps import add_headers

    pipe = _pipeline("rcs", 64, None)
    headerer = ContextualChunkHeaders(FakeListLLM(responses=["Title: Zebra\nSummary: Quokka."]), mode="auto",
                                      show_progress=False)
    add_headers(pipe, headerer)
    assert all(h and "Zebra" in h for h in pipe.headers)
    assert pipe.retrieve("quokka zebra")  # the header words are searchable now
    hits = pipe.index.search("quokka", k=3)
    assert hits and hits[0][1] > 0


def test_cli_flags(tmp_path, data, capsys):
    out = tmp_path / "cli"
    code = main(["--data", str(data), "--strategies", "dds,rcs", "--windows", "64", "--steps", "2", "--retrieval-only",
                 "--budget", str(BUDGET), "--limit", "2", "--no-progress", "--no-plots", "--litm", "--rse",
                 "--out", str(out)])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    assert {r["steps"] for r in rows} == {"rse+litm"} and all(r["rse"] and r["litm"] for r in rows)
    assert "+rse+litm" in capsys.readouterr().out
    code = main(["--data", str(data), "--strategies", "parent", "--windows", "64", "--steps", "3", "--retrieval-only",
                 "--no-progress", "--rse", "--out", str(tmp_path / "bad")])
    assert code == 2
    assert "--rse needs a pipeline with a chunk list" in capsys.readouterr().err


class _NoLangChainDocument:
    def __init__(self, *args, **kwargs):
        raise AssertionError("an evaluation context step built a LangChain Document")


class _PlainLLM:
    """No framework: ``invoke`` answers the AutoContext prompt."""

    def invoke(self, prompt):
        return "Title: Zebra\nSummary: Quokka."


def test_steps_run_the_cores_on_spans_without_langchain_documents(monkeypatch, emb):
    import langchain_core.documents

    from swrag_integrations.evaluation.steps import add_headers, make_tools
    from swrag_integrations.methods.context.headers import ChunkHeaderWriter
    from swrag_integrations.methods.context.rerank import EmbeddingRescorer

    monkeypatch.setattr(langchain_core.documents, "Document", _NoLangChainDocument)
    steps = ContextSteps(rerank="embedding", diversity="greedy", rse=True, litm=True, pool=8)
    tools = make_tools(steps, embeddings=emb)
    assert type(tools.reranker) is EmbeddingRescorer  # the framework-free core, not a LangChain compressor
    pipe = _pipeline("dds", 64, "2")
    question = "What is the secret code of the harbour?"
    ctx = steps_context(pipe, question, steps, tools, budget=300)
    assert ctx.spans and all(pipe.texts[s.source_id][s.start:s.end] == s.text for s in ctx.spans)
    add_headers(pipe, ChunkHeaderWriter(_PlainLLM(), mode="auto", show_progress=False))
    assert pipe.headers and all(h and "Zebra" in h for h in pipe.headers)
