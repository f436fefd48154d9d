"""swrag eval records a groundedness figure per generated answer (fake LLM, tiny data)."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models.fake import FakeListLLM

from swrag_integrations.evaluation import EvalConfig, run_eval

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
