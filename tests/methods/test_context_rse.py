"""Relevant segment extraction: hand-computed segments, penalties, caps, budget, offsets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from langchain_core.documents import Document

from swrag_integrations.methods.context import RelevantSegmentExtractor
from swrag_integrations.methods.context.rse import RSE_PRESETS, RSEParams, best_segment, chunk_values
from swrag_integrations.engine.assemble import count_tokens
from swrag_integrations.langchain.search import HybridRetriever
from swrag_integrations.langchain.search import chunk_documents

# A source of 10 chunks of different lengths that tile it exactly.
CHUNKS = [f"chunk {i} says {'x' * (i + 3)}. " for i in range(10)]
SOURCE = "".join(CHUNKS)
OFFSETS = []
_pos = 0
for _c in CHUNKS:
    OFFSETS.append((_pos, _pos + len(_c)))
    _pos += len(_c)


class Fetcher:
    def __init__(self):
        self.calls = []

    def __call__(self, source_id, lo, hi):
        self.calls.append((source_id, lo, hi))
        return [(i, *OFFSETS[i], CHUNKS[i]) for i in range(lo, hi + 1) if 0 <= i < len(CHUNKS)]


def hit(i, score=None, source="S", **extra):
    meta = {"source_id": source, "chunk_index": i, "start_index": OFFSETS[i][0], "end_index": OFFSETS[i][1],
            "source": "doc.txt", **extra}
    if score is not None:
        meta["score"] = score
    return Document(page_content=CHUNKS[i], metadata=meta)


def flat(**kw):
    """No rank decay, rel = 1: every retrieved chunk is worth 1 - penalty."""
    base = dict(decay_rate=1e12, score_normalization="rank", chunks=Fetcher(), budget_tokens=None)
    base.update(kw)
    return RelevantSegmentExtractor(**base)


def test_best_segment_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 25))
        values = rng.normal(size=n).round(2)
        cap = int(rng.integers(1, n + 2))
        got = best_segment(values, cap)
        brute = max(sum(values[i:j]) for i in range(n) for j in range(i + 1, min(n, i + cap) + 1))
        assert got[2] == pytest.approx(brute)
        assert 1 <= got[1] - got[0] <= cap
        assert sum(values[got[0]:got[1]]) == pytest.approx(got[2])
    assert best_segment([], 3) is None
    assert best_segment([0.5, -1, 0.5], 3) == (0, 1, 0.5)  # ties: leftmost


def test_chunk_values_and_presets():
    balanced = RSEParams.from_preset("balanced")
    assert RSE_PRESETS["balanced"] == dict(max_length=15, overall_max_length=30, minimum_value=0.5,
                                           irrelevant_chunk_penalty=0.18, decay_rate=30)
    v = chunk_values([0, 30], [1.0, 0.5], balanced)
    assert v[0] == pytest.approx(0.82)
    assert v[1] == pytest.approx(math.exp(-1) * 0.5 - 0.18)
    assert RSEParams.from_preset("precise").max_length < balanced.max_length < RSEParams.from_preset("expansive").max_length
    assert RSEParams.from_preset("balanced", max_length=4).max_length == 4
    with pytest.raises(ValueError):
        RSEParams.from_preset("greedy")


def test_segment_bridges_an_unretrieved_chunk_with_exact_offsets():
    fetch = Fetcher()
    rse = flat(irrelevant_chunk_penalty=0.2, chunks=fetch)
    segs = rse.extract([hit(3), hit(5)])  # 0.8 + (-0.2) + 0.8 = 1.4 > 0.8
    assert len(segs) == 1
    s = segs[0]
    assert (s.first_chunk, s.last_chunk) == (3, 5)
    assert s.value == pytest.approx(1.4)
    assert (s.start, s.end) == (OFFSETS[3][0], OFFSETS[5][1])
    assert s.text == SOURCE[s.start:s.end] == CHUNKS[3] + CHUNKS[4] + CHUNKS[5]
    assert s.hit_ranks == [1, 2]
    assert fetch.calls == [("S", 3, 5)]
    doc = rse.compress_documents([hit(3), hit(5)], "q")[0]
    assert doc.metadata["start_index"] == s.start and doc.metadata["end_index"] == s.end
    assert doc.metadata["first_chunk"] == 3 and doc.metadata["segment_value"] == pytest.approx(1.4)
    assert doc.metadata["source"] == "doc.txt" and "chunk_index" not in doc.metadata


def test_penalty_decides_bridging():
    # gap of 5 chunks: 1.6 - 5 * 0.2 = 0.6 < 0.8 -> two separate segments
    segs = flat(irrelevant_chunk_penalty=0.2).extract([hit(1), hit(7)])
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(1, 1), (7, 7)]
    assert [s.value for s in segs] == pytest.approx([0.8, 0.8])
    # small penalty: 1.9 - 5 * 0.05 = 1.65 > 0.95 -> one segment 1..7
    segs = flat(irrelevant_chunk_penalty=0.05).extract([hit(1), hit(7)])
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(1, 7)]
    assert segs[0].value == pytest.approx(1.65)
    assert segs[0].text == SOURCE[OFFSETS[1][0]:OFFSETS[7][1]]


def test_length_caps():
    hits = [hit(3), hit(4), hit(5)]
    segs = flat(irrelevant_chunk_penalty=0.2, max_length=2).extract(hits)
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(3, 4), (5, 5)]
    segs = flat(irrelevant_chunk_penalty=0.2, max_length=2, overall_max_length=2).extract(hits)
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(3, 4)]
    segs = flat(irrelevant_chunk_penalty=0.2, max_length=15, overall_max_length=30).extract(hits)
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(3, 5)]
    # hits further apart than max_length can never share a segment
    segs = flat(irrelevant_chunk_penalty=0.01, max_length=3).extract([hit(0), hit(9)])
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(0, 0), (9, 9)]


def test_minimum_value_and_rank_decay():
    # decay_rate 1: rank 0 -> 1 - 0.2 = 0.8, rank 1 -> e^-1 - 0.2 = 0.168, rank 2 -> e^-2 - 0.2 < 0
    rse = flat(irrelevant_chunk_penalty=0.2, decay_rate=1.0, minimum_value=0.5)
    segs = rse.extract([hit(2), hit(8), hit(5)])
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(2, 2)]
    segs = flat(irrelevant_chunk_penalty=0.2, decay_rate=1.0, minimum_value=0.1).extract([hit(2), hit(8), hit(5)])
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(2, 2), (8, 8)]


def test_scores_are_normalised_by_the_best():
    # RRF-sized scores: 0.03 -> rel 1, 0.015 -> rel 0.5
    rse = flat(irrelevant_chunk_penalty=0.2, score_normalization="auto", minimum_value=0.25)
    segs = rse.extract([hit(1, score=0.03), hit(6, score=0.015)])
    assert [s.value for s in segs] == pytest.approx([0.8, 0.3])
    segs = flat(irrelevant_chunk_penalty=0.2, score_normalization="auto", minimum_value=0.5).extract(
        [hit(1, score=0.03), hit(6, score=0.015)])
    assert len(segs) == 1


def test_token_budget_shrinks_or_skips_segments():
    hits = [hit(3), hit(4), hit(5)]
    tokens = [count_tokens(CHUNKS[i]) for i in (3, 4, 5)]
    whole = count_tokens(CHUNKS[3] + CHUNKS[4] + CHUNKS[5])
    segs = flat(irrelevant_chunk_penalty=0.2, budget_tokens=whole).extract(hits)
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(3, 5)]
    budget = tokens[0] + tokens[1]  # room for two chunks only
    segs = flat(irrelevant_chunk_penalty=0.2, budget_tokens=budget).extract(hits)
    assert [(s.first_chunk, s.last_chunk) for s in segs] == [(3, 4)]
    assert sum(s.n_tokens for s in segs) <= budget
    assert segs[0].text == SOURCE[segs[0].start:segs[0].end]
    assert flat(irrelevant_chunk_penalty=0.2, budget_tokens=1).extract(hits) == []


def test_several_sources_and_document_order():
    hits = [hit(5, source="B"), hit(2, source="A"), hit(3, source="A")]
    segs = flat(irrelevant_chunk_penalty=0.2).extract(hits)
    assert [(s.source_id, s.first_chunk, s.last_chunk) for s in segs] == [("A", 2, 3), ("B", 5, 5)]
    assert [s.rank for s in segs] == [1, 2]
    segs = flat(irrelevant_chunk_penalty=0.2, order="document").extract([hit(5, source="B"), hit(1, source="A")])
    assert [s.source_id for s in segs] == ["A", "B"]


def test_bad_input():
    rse = flat()
    assert rse.extract([]) == []
    assert rse.compress_documents([], "q") == []
    with pytest.raises(ValueError, match="source_id.*chunk_index"):
        rse.extract([Document(page_content="window", metadata={"source_id": "S", "start_index": 0})])
    with pytest.raises(ValueError, match="chunk_index"):
        rse.extract([Document(page_content="x", metadata={"chunk_index": 1})])
    no_fetch = RelevantSegmentExtractor(decay_rate=1e12, score_normalization="rank", irrelevant_chunk_penalty=0.2,
                                        budget_tokens=None)
    with pytest.raises(LookupError, match="chunks="):
        no_fetch.extract([hit(3), hit(5)])
    assert [(s.first_chunk, s.last_chunk) for s in no_fetch.extract([hit(3), hit(4)])] == [(3, 4)]

    def gappy(source_id, lo, hi):
        return [(i, OFFSETS[i][0] + (1 if i == 4 else 0), OFFSETS[i][1], CHUNKS[i][1:] if i == 4 else CHUNKS[i])
                for i in range(lo, hi + 1)]

    with pytest.raises(LookupError, match="gap"):
        flat(irrelevant_chunk_penalty=0.2, chunks=gappy).extract([hit(3), hit(5)])
    with pytest.raises(TypeError):
        RelevantSegmentExtractor(chunks=42)
    with pytest.raises(ValueError):
        RelevantSegmentExtractor(budget_tokens=0)


def test_with_a_sliding_window_index(tmp_path):
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from swrag_integrations.langchain.index import SlidingWindowIndex

    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(60))
    index = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), chunk_size=20,
                               show_progress=False)
    index.add_texts([text], [{"source": "t.txt"}])
    sid = index.engine.source_ids()[0]
    ranked = chunk_documents(index, [f"{sid}:s:4", f"{sid}:s:6", f"{sid}:s:20"])
    rse = RelevantSegmentExtractor(chunks=index, budget_tokens=400)
    segs = rse.extract(ranked)
    assert (segs[0].first_chunk, segs[0].last_chunk) == (4, 6)
    for s in segs:
        assert s.text == text[s.start:s.end]


def test_compression_retriever_over_the_hybrid_chunk_retriever(tmp_path):
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.engine.assemble import assemble_context

    text = " ".join(f"Line {i}: the {'falcon' if 10 <= i <= 13 else 'pigeon'} sat on roof {i}." for i in range(50))
    index = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), chunk_size=12,
                               show_progress=False)
    index.add_texts([text])
    retriever = ContextualCompressionRetriever(
        base_compressor=RelevantSegmentExtractor(chunks=index, budget_tokens=200),
        base_retriever=HybridRetriever.from_index(index, k=6, search_type="similarity"),
    )
    docs = retriever.invoke("falcon")
    assert docs and sum(d.metadata["n_tokens"] for d in docs) <= 200
    for d in docs:
        assert d.page_content == text[d.metadata["start_index"]:d.metadata["end_index"]]
    assert "falcon" in docs[0].page_content
    segs = RelevantSegmentExtractor(chunks=index).extract(HybridRetriever.from_index(index, k=6).invoke("falcon"))
    assembled = assemble_context([s.to_span() for s in segs], budget_tokens=None)
    assert abs(assembled.n_tokens - sum(s.n_tokens for s in segs)) <= len(segs)  # joins may merge tokens
