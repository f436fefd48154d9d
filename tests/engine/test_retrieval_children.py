"""Sentence-aligned small chunks (the default child shape)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.engine.config import IndexConfig
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.records import END, START, plan_source
from swrag_integrations.core.windows import get_encoding

PIECES = ["The keeper lit the lamp. ", "Fog rolled in! ", "Was it late? ", "灯塔建于1874年。", "雾很大；",
          "船来了！", "\n", "\n\n", "a very long clause without any stop that goes on and on and on " * 3, "x"]


def children(text: str, cfg: IndexConfig) -> list[tuple[int, int]]:
    rec = plan_source(Document(page_content=text, metadata={"source": "t.txt"}), cfg)
    return list(zip(rec.arrays[START].tolist(), rec.arrays[END].tolist()))


def test_default_children_are_sentences():
    assert IndexConfig().child == "sentence"
    # an index written before the default changed keeps its fixed children on reopen
    old = json.loads(IndexConfig(child="fixed").to_json())
    del old["child"]
    assert IndexConfig.from_json(json.dumps(old)).child == "fixed"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=40), st.sampled_from([8, 20, 50]),
       st.sampled_from(["token", "char"]))
def test_sentence_children_tile_the_text_on_unit_bounds(parts, size, unit):
    text = "".join(parts)
    cfg = IndexConfig(chunk_size=size, unit=unit, child="sentence")
    spans = children(text, cfg)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a < b for a, b in spans)
    assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))  # no gap, no overlap
    bounds = cfg.child_config().unit_bounds(text).tolist()
    assert {a for a, _ in spans} <= set(bounds)  # children start on unit boundaries
    enc = get_encoding(cfg.encoding_name)
    measure = (lambda s: len(enc.encode_ordinary(s))) if unit == "token" else len
    for a, b in spans:
        units = [(x, y) for x, y in zip(bounds[:-1], bounds[1:]) if a <= x and y <= b]
        assert sum(measure(text[x:y]) for x, y in units) <= size or len(units) == 1


def test_sentence_children_keep_whole_sentences():
    text = "Alpha beta gamma delta. " * 3 + "The lighthouse was first lit in 1874. " + "Omega psi chi. " * 3
    spans = children(text, IndexConfig(chunk_size=12, child="sentence"))
    texts = [text[a:b] for a, b in spans]
    assert any("The lighthouse was first lit in 1874. " in t for t in texts)
    assert all(t.endswith(". ") or b == len(text) for t, (_, b) in zip(texts, spans))


def test_fixed_children_still_available():
    text = "word " * 200
    spans = children(text, IndexConfig(chunk_size=50, child="fixed"))
    assert len(spans) == pytest.approx(len(get_encoding(IndexConfig().encoding_name).encode_ordinary(text)) / 50, abs=1)


@pytest.fixture()
def index(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), show_progress=False,
                             chunk_size=20)
    filler = [f"Filler sentence number {i} talks about nothing much. " for i in range(40)]
    text = "".join(filler[:20]) + "The copper mine reopened in 1902 after the flood. " + "".join(filler[20:])
    other = "".join(f"Another harbour note {i} about tin prices. " for i in range(30)) + "Copper was cheap. "
    idx.add_texts([text, other], [{"source": "mine.txt"}, {"source": "harbour.txt"}])
    yield idx, text
    idx.engine.store.close()


def test_default_retriever_returns_the_whole_matching_sentence(index):
    idx, text = index
    # BM25 only: the fake embeddings would rank at random
    docs = idx.as_retriever(budget_tokens=120, weights=(1.0, 0.0)).invoke("copper mine reopened 1902")
    sentence = "The copper mine reopened in 1902 after the flood. "
    assert any(sentence in d.page_content for d in docs)
    for d in docs:  # exact offsets, spans on child (= sentence) boundaries
        src = idx.engine.source_text(d.metadata["source_id"])
        assert d.page_content == src[d.metadata["start_index"]:d.metadata["end_index"]]
    rec = idx.engine.store.get_many(idx.engine.source_ids())
    starts = {sid: set(r.arrays[START].tolist()) | {len(r.text)} for sid, r in rec.items()}
    for d in docs:
        assert d.metadata["start_index"] in starts[d.metadata["source_id"]]
