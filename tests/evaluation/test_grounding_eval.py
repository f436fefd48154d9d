"""swrag eval records a groundedness figure per generated answer (fake LLM, tiny data)."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models.fake import FakeListLLM

from swrag_integrations.evaluation import run_eval
from swrag_integrations.evaluation.pipelines import EvalConfig

FILLER = " ".join(f"Paragraph {i} of the harbour report lists ordinary facts about weather and roads." for i in range(30))
DOC = FILLER + " The secret code of the harbour is 4711 and it never changes. " + FILLER


@pytest.fixture()
def data(tmp_path):
    path = tmp_path / "tiny.jsonl"
    rows = [{"input": "What is the secret code of the harbour?", "context": DOC, "answers": ["4711"],
             "language": "en", "_id": "q1"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_records_carry_groundedness_when_answers_are_generated(tmp_path, data):
    llm = FakeListLLM(responses=["The secret code of the harbour is 4711. It was set by Admiral Nelson in 1805."])
    run_eval([data], [EvalConfig("dds", 64, "2")], tmp_path / "gen", budget=120, llm=llm, progress=False,
             n_resamples=50, reports=False)
    record = json.loads((tmp_path / "gen" / "records.json").read_text())[0]
    g = record["groundedness"]
    assert (g["sentences"], g["checked"], g["supported"], g["supported_share"]) == (2, 2, 1, 0.5)
    assert g["unsupported_claims"] == ["Admiral Nelson", "1805"]
    assert (g["unsupported_names"], g["unsupported_dates"], g["unsupported_numbers"]) == (1, 1, 0)

    run_eval([data], [EvalConfig("dds", 64, "2")], tmp_path / "ret", budget=120, retrieval_only=True,
             progress=False, n_resamples=50, reports=False)
    record = json.loads((tmp_path / "ret" / "records.json").read_text())[0]
    assert record["groundedness"] is None  # nothing generated, nothing to ground


def test_measurement_helpers_on_eval_records(tmp_path, data):
    from swrag_integrations.evaluation.methods.grounding import gold_flags, ground_records, label_scores, load_answers, sample_sentences, summary

    llm = FakeListLLM(responses=["The secret code of the harbour is 4711. It was set by Admiral Nelson in 1805."])
    run_eval([data], [EvalConfig("dds", 64, "2")], tmp_path / "gen", budget=120, llm=llm, progress=False,
             n_resamples=50, reports=False)
    answers = load_answers(tmp_path / "gen" / "records.jsonl", [data])
    p = answers[0]["passages"][0]
    assert DOC[p["start_index"]:p["end_index"]] == p["text"]
    grounded = ground_records(answers)
    s = summary(grounded)
    assert (s["answers"], s["checked"], s["flagged"], s["flag_rate"]) == (1, 2, 1, 0.5)
    assert s["ms_per_answer_median"] > 0
    sample = sample_sentences(answers, 5)
    assert [x["sentence"] for x in sorted(sample, key=lambda x: x["sentence_start"])] == [
        "The secret code of the harbour is 4711.", "It was set by Admiral Nelson in 1805."]
    # hand labels: the first sentence supported, the second not; plus a wrong one
    labels = [dict(x, label="supported" if x["sentence_start"] == 0 else "unsupported")
              for x in sorted(sample, key=lambda x: x["sentence_start"])]
    scores = label_scores(grounded, labels)
    assert (scores["tp"], scores["fp"], scores["fn"], scores["tn"]) == (1, 0, 0, 1)
    assert scores["precision"] == 1.0 and scores["recall"] == 1.0
    assert scores["flag_everything"] == {"precision": 0.5, "recall": 1.0}  # 1 of 2 labelled sentences unsupported
    labels[0]["label"] = "unsupported"  # now the checker misses one unsupported sentence
    scores = label_scores(grounded, labels)
    assert (scores["tp"], scores["fn"], scores["precision"], scores["recall"]) == (1, 1, 1.0, 0.5)
    assert scores["flag_everything"] == {"precision": 1.0, "recall": 1.0}  # every label unsupported now
    gold = gold_flags(answers)  # the gold answer "4711" is in the context: not flagged
    assert (gold["answers"], gold["sentences"], gold["flagged"]) == (1, 1, 0)


def test_flag_everything_baseline():
    from swrag_integrations.evaluation.methods.grounding import flag_everything

    # the doc's labelled sets: 69 of 74 sentences unsupported, so flagging all scores 0.93 / 1.0
    assert flag_everything(69, 5) == {"precision": 69 / 74, "recall": 1.0}
    assert flag_everything(0, 3) == {"precision": 0.0, "recall": None}
    assert flag_everything(0, 0) == {"precision": None, "recall": None}
