"""Reading a run's misses (swrag_integrations/evaluation/peers/misses.py) on a tiny synthetic run."""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from fake_embeddings import TrigramEmbedder

from swrag_integrations.evaluation.datasets import half_of, source_id
from swrag_integrations.evaluation.peers.misses import TRACE_CAUSES, find_misses, main, trace_misses
from swrag_integrations.evaluation.questions import multi_hop_cue, question_type

FILLER = " ".join(f"Line {i} of the ledger lists barrels and crates." for i in range(12))
DOCS = {
    "harbour": "The harbour town traded wool. " + FILLER + " Its chief export was copper from the hills.",
    "mill": "The mill ground barley for the town. " + FILLER,
    "governor": "The governor was Nelson Rockefeller's cousin. " + FILLER,
    "bridge": "The stone bridge was built in 1831 by the guild. " + FILLER,
}


def _ids(half: str, n: int) -> list[str]:
    """``n`` question ids of ``half`` (the split is a hash of the id)."""
    out, i = [], 0
    while len(out) < n:
        if half_of(f"q{i}") == half:
            out.append(f"q{i}")
        i += 1
    return out


def _run(tmp_path, *, stray_test_record: bool = False):
    """A corpus-mode dataset of four documents and a run folder with one record per question."""
    q_ceiling, q_cut, q_missed, q_verbatim, q_full = _ids("tune", 5)
    rows = [  # (qid, question, answer, context document)
        (q_ceiling, "Was the harbour town rich?", "yes", "harbour"),
        (q_cut, "What was the chief export of the harbour town?", "copper", "harbour"),
        (q_missed, "When was the stone bridge built?", "1831", "bridge"),
        (q_verbatim, "Whose cousin was the governor?", "Nelson Rockefeller", "governor"),
        (q_full, "What did the mill grind?", "barley", "mill"),
    ]
    data = tmp_path / "data"
    data.mkdir(parents=True)
    with (data / "toy.jsonl").open("w", encoding="utf-8") as handle:
        for qid, question, answer, doc in rows:
            handle.write(json.dumps({"_id": qid, "input": question, "answers": [answer], "context": DOCS[doc],
                                     "language": "en"}) + "\n")
    sid = {name: source_id(text) for name, text in DOCS.items()}
    head = len("The harbour town traded wool. ")
    spans = {  # what the run's context held (the first line of a document, or all of it)
        q_ceiling: [[sid["harbour"], 0, len(DOCS["harbour"])]],
        q_cut: [[sid["harbour"], 0, head], [sid["mill"], 0, 40]],
        q_missed: [[sid["mill"], 0, 40]],
        q_verbatim: [[sid["governor"], 0, 45]],
        q_full: [[sid["mill"], 0, 40]],
    }
    recall = {q_ceiling: 0.0, q_cut: 0.0, q_missed: 0.0, q_verbatim: 0.5, q_full: 1.0}
    folder = tmp_path / "run" / "toy"
    folder.mkdir(parents=True)
    records = [{"dataset": "toy", "mode": "corpus", "split_passages": False, "budget": 100, "strategy": "default",
                "window": 512, "qid": qid, "context_recall": recall[qid], "spans": spans[qid],
                "context_tokens": 80, "half": "tune"} for qid, *_ in rows]
    if stray_test_record:
        records.append({**records[0], "qid": _ids("test", 1)[0], "half": "test"})
    with (folder / "records.jsonl").open("w", encoding="utf-8") as handle:
        for rec in records:
            handle.write(json.dumps(rec) + "\n")
    return tmp_path / "run", data, {"ceiling": q_ceiling, "cut": q_cut, "missed": q_missed, "verbatim": q_verbatim,
                                    "full": q_full}


def test_each_miss_gets_its_cause_evidence_and_budget_use(tmp_path):
    run, data, q = _run(tmp_path)
    by_set = find_misses(run, data, "default", "tune", ["toy"])
    misses = {m.qid: m for m in by_set["toy"]}
    assert q["full"] not in misses and len(misses) == 4
    assert misses[q["ceiling"]].cause == "ceiling" and misses[q["ceiling"]].ceiling == 0.0
    cut = misses[q["cut"]]
    assert cut.cause == "evidence cut" and cut.gold_sources_in_context == 1 and cut.evidence_in_context == 0.0
    assert cut.gold_position == pytest.approx(DOCS["harbour"].index("copper") / len(DOCS["harbour"]))
    assert cut.gold_tokens == 1 and cut.budget_use == pytest.approx(0.8) and cut.pieces == 2
    assert misses[q["missed"]].cause == "source missed" and misses[q["missed"]].gold_sources_in_context == 0
    assert misses[q["verbatim"]].cause == "verbatim"  # "Rockefeller's" is a token of its own


def test_the_half_is_checked_and_the_command_writes_the_table(tmp_path, capsys):
    run, data, q = _run(tmp_path, stray_test_record=True)
    with pytest.raises(ValueError, match="not from the tune half"):
        find_misses(run, data, "default", "tune", ["toy"])
    assert main(["--run", str(run), "--data-dir", str(data), "--datasets", "toy"]) == 2
    assert "not from the tune half" in capsys.readouterr().err
    run, data, q = _run(tmp_path / "clean")
    out = tmp_path / "misses.md"
    assert main(["--run", str(run), "--data-dir", str(data), "--datasets", "toy", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "## toy: 4 misses of 5" in text
    assert "causes: verbatim 1, ceiling 1, source missed 1, evidence cut 1" in text
    assert main(["--run", str(run), "--data-dir", str(tmp_path), "--datasets", "toy"]) == 2
    assert "toy.jsonl" in capsys.readouterr().err


def test_trace_tells_a_cut_hit_from_a_never_retrieved_answer(tmp_path):
    run, data, q = _run(tmp_path)
    misses = find_misses(run, data, "default", "tune", ["toy"])["toy"]
    trace_misses(misses, run, data, "default", deep_k=50, embeddings=TrigramEmbedder())
    by = {m.qid: m for m in misses}
    assert by[q["ceiling"]].trace_cause is None  # nothing to trace: no retrieval can do better
    # the recorded context lacked the copper sentence, but the retriever's own hits hold it
    assert by[q["cut"]].trace_cause == "hit, cut by budget/merge" and by[q["cut"]].hit_rank >= 1
    assert by[q["verbatim"]].trace_cause is None  # the answer is in the context: the metric's tokens differ
    assert by[q["missed"]].trace_cause in TRACE_CAUSES


def test_question_features():
    assert question_type("Were Scott Derrickson and Ed Wood of the same nationality?") == "yes/no"
    assert question_type("清崇陵在什么地方？") == "where"
    assert question_type("本报告从几个方面总结了工作？") == "number"
    assert question_type("Tell me about it") == "other"
    assert multi_hop_cue("In which year was the King who made the 1925 Birthday Honours born?")
    assert multi_hop_cue("Who is older, Annie Morton or Terry Richardson?")
    assert not multi_hop_cue("Who is responsible for axiomatic complexity theory?")  # a leading "who" asks
    assert not multi_hop_cue("哪一个地层发现了海熊兽？")


def test_trace_names_an_answer_inside_a_hits_window_but_outside_the_hits(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from swrag_integrations.langchain.retriever import WindowedParentRetriever

    run, data, q = _run(tmp_path)
    misses = [m for m in find_misses(run, data, "default", "tune", ["toy"])["toy"] if m.qid == q["cut"]]
    harbour = source_id(DOCS["harbour"])
    first = SimpleNamespace(source_id=harbour, start=0, end=20, window_start=0, window_end=30)
    near = SimpleNamespace(source_id=harbour, start=0, end=20, window_start=0, window_end=len(DOCS["harbour"]))
    whole = SimpleNamespace(source_id=harbour, start=0, end=len(DOCS["harbour"]))  # a parent merged from both
    sources = {harbour: DOCS["harbour"]}
    fake = SimpleNamespace(hits=[first, near], parents=[whole], sources=sources,
                           source_span=lambda sid, a, b: sources[sid][a:b])  # as RetrievalTrace.source_span
    monkeypatch.setattr(WindowedParentRetriever, "trace", lambda self, question, **kw: fake)
    trace_misses(misses, run, data, "default", embeddings=TrigramEmbedder())
    assert (misses[0].trace_cause, misses[0].hit_rank) == ("in a hit's window, cut by budget", 2)
