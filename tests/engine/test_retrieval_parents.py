"""WindowedParentRetriever stage 3: budget planning over queries/sources, chunk-aligned
spans and metadata of merged spans."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.engine.protocols import ChildHit
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.langchain.retriever import WindowedParentRetriever
from swrag_integrations.langchain.convert import spans_to_documents
from swrag_integrations.engine.assemble import count_tokens
from swrag_integrations.engine.ids import source_id_for
from swrag_integrations.engine.parents import expand_parents, rank_parents

EN = "".join(
    f"Linden & Rowe ledger {i}: the schooner Gull{i} carried {['wool', 'tea', 'salt', 'copper'][i % 4]} "
    f"to Port{i}; its captain was Name{i}. " for i in range(60)
)
ZH = "".join(f"第{i}段：城市{i}号以出产{['丝绸', '茶叶', '瓷器'][i % 3]}闻名，市长名叫张{i}。" for i in range(120))
NOTE = "Short note: Linden & Rowe closed their office in 1901."
DOCS = [Document(page_content=EN, metadata={"source": "en"}), Document(page_content=ZH, metadata={"source": "zh"}),
        Document(page_content=NOTE, metadata={"source": "note"})]
TEXTS = {source_id_for(d): d.page_content for d in DOCS}
SID_EN, SID_ZH, SID_NOTE = (source_id_for(d) for d in DOCS)


def _index(path, **kwargs):
    # fixed 50-token children: the budgets below are counted in them
    kwargs.setdefault("child", "fixed")
    idx = SlidingWindowIndex(path, embedding=DeterministicFakeEmbedding(size=8), show_progress=False, **kwargs)
    idx.add_documents(DOCS)
    return idx


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return _index(tmp_path_factory.mktemp("parents"))


def _hits(index, sid, chunks_scores):
    """Stage-1 style hits (small chunks with fused scores, ranked as given)."""
    metas = index.engine.chunk_metadata(sid)
    out = []
    for rank, (c, score) in enumerate(chunks_scores, start=1):
        m = {**metas[c], "rrf_score": score}
        out.append(ChildHit(sid, c, score, rank, m["window_lower_bound"], m["window_upper_bound"],
                            m["window_start_index"], m["window_end_index"], m["start_index"], m["end_index"], m))
    return out


def rank(retriever, hits, query_index=0):
    return rank_parents(hits, retriever.index, query_index=query_index, expand=retriever.expand)


def expand(retriever, per_query):
    spans = expand_parents(per_query, retriever.index, budget_tokens=retriever.budget_tokens, k=retriever.k,
                           expand=retriever.expand)
    return spans_to_documents(spans)


def _boundaries(index, sid):
    metas = index.engine.chunk_metadata(sid)
    return {m["start_index"] for m in metas} | {m["end_index"] for m in metas}


def _check_exact(docs, budget=None):
    for d in docs:
        m = d.metadata
        assert d.page_content == TEXTS[m["source_id"]][m["start_index"]:m["end_index"]]
    if budget is not None:
        assert count_tokens("\n\n".join(d.page_content for d in docs)) <= budget


def test_tight_multi_query_budget_keeps_every_hit_chunk(index):
    retriever = WindowedParentRetriever(index=index, k=4, budget_tokens=200)
    metas = index.engine.chunk_metadata(SID_EN)
    # query 0: one parent with two hits (chunk 6 holds the answer, scored lower);
    # query 1: another part of the same source. Hits: 3 x 50 tokens, budget 200.
    per_query = [
        rank(retriever, _hits(index, SID_EN, [(4, 0.05), (6, 0.03)]), 0),
        rank(retriever, _hits(index, SID_EN, [(20, 0.04)]), 1),
    ]
    docs = expand(retriever, per_query)
    _check_exact(docs, 200)
    text = "\n\n".join(d.page_content for d in docs)
    for chunk in (4, 6, 20):
        m = metas[chunk]
        assert EN[m["start_index"]:m["end_index"]] in text, f"hit chunk {chunk} was dropped"


def test_unused_share_goes_to_other_groups(index):
    retriever = WindowedParentRetriever(index=index, k=4, budget_tokens=400)
    per_query = [
        rank(retriever, _hits(index, SID_EN, [(10, 0.05)]), 0),  # a 9-chunk parent (~450 tokens)
        rank(retriever, _hits(index, SID_NOTE, [(0, 0.04)]), 1),  # a one-chunk note: uses little of its half
    ]
    docs = expand(retriever, per_query)
    _check_exact(docs, 400)
    assert [d.metadata["source_id"] for d in docs] == [SID_EN, SID_NOTE]
    en_tokens = count_tokens(docs[0].page_content)
    assert en_tokens > 300  # more than its share of 200: the note's unused share went to it
    assert en_tokens + count_tokens(NOTE) >= 400 - 60  # less than one chunk left unused
    bounds = _boundaries(index, SID_EN)
    assert docs[0].metadata["start_index"] in bounds and docs[0].metadata["end_index"] in bounds


def test_merged_span_metadata_matches_its_offsets(index):
    retriever = WindowedParentRetriever(index=index, k=4, budget_tokens=None)
    metas = index.engine.chunk_metadata(SID_EN)
    per_query = [
        rank(retriever, _hits(index, SID_EN, [(7, 0.05)]), 0),  # window 3..11
        rank(retriever, _hits(index, SID_EN, [(1, 0.02)]), 1),  # window 0..5
    ]
    docs = expand(retriever, per_query)
    assert len(docs) == 1
    m = docs[0].metadata
    assert m["start_index"] == 0
    lower = next(x["chunk_index"] for x in metas if x["start_index"] <= m["start_index"] < x["end_index"])
    upper = next(x["chunk_index"] for x in metas if x["start_index"] < m["end_index"] <= x["end_index"])
    assert (m["chunk_lower_bound"], m["chunk_upper_bound"]) == (lower, upper) == (0, 11)
    assert m["hit_chunk_indices"] == [1, 7]
    assert m["score"] == pytest.approx(0.05)
    assert m["start_index"] <= m["hit_start_index"] < m["hit_end_index"] <= m["end_index"]
    assert sorted(m["query_indices"]) == [0, 1]


@pytest.mark.parametrize("budget", [60, 90, 130, 170, 200, 260, 333, 500, 777])
def test_spans_start_and_end_on_chunk_boundaries(index, budget):
    retriever = WindowedParentRetriever(index=index, k=3, budget_tokens=budget)
    bounds = {SID_EN: _boundaries(index, SID_EN), SID_ZH: _boundaries(index, SID_ZH)}
    per_query = [
        rank(retriever, _hits(index, SID_EN, [(5, 0.05), (2, 0.01)]), 0),
        rank(retriever, _hits(index, SID_EN, [(1, 0.04), (13, 0.02)]) + _hits(index, SID_ZH, [(9, 0.03)]), 1),
        rank(retriever, _hits(index, SID_ZH, [(30, 0.03)]), 2),
    ]
    docs = expand(retriever, per_query)
    assert docs
    _check_exact(docs, budget)
    for d in docs:
        m = d.metadata
        assert m["start_index"] in bounds[m["source_id"]], f"span starts mid-chunk: {d.page_content[:20]!r}"
        assert m["end_index"] in bounds[m["source_id"]]
        chunk_metas = index.engine.chunk_metadata(m["source_id"])
        assert chunk_metas[m["chunk_lower_bound"]]["start_index"] == m["start_index"]
        assert chunk_metas[m["chunk_upper_bound"]]["end_index"] == m["end_index"]


def test_budget_below_one_chunk_still_returns_the_hit(index):
    retriever = WindowedParentRetriever(index=index, k=2, budget_tokens=20)
    docs = expand(retriever, [rank(retriever, _hits(index, SID_EN, [(6, 0.05)]), 0)])
    assert len(docs) == 1 and 0 < count_tokens(docs[0].page_content) <= 20
    m = index.engine.chunk_metadata(SID_EN)[6]
    assert m["start_index"] <= docs[0].metadata["start_index"] < docs[0].metadata["end_index"] <= m["end_index"]


@pytest.mark.parametrize("strategy", ["DDS", "DFS"])
def test_strategy_windows_are_widened_to_chunk_boundaries(tmp_path, strategy):
    idx = _index(tmp_path / strategy, strategy=strategy, window_size=120, step=2 if strategy == "DDS" else 60)
    bounds = _boundaries(idx, SID_EN)
    for budget in (None, 150):
        retriever = WindowedParentRetriever(index=idx, k=3, budget_tokens=budget)
        docs = expand(retriever, [rank(retriever, _hits(idx, SID_EN, [(9, 0.05), (20, 0.02)]), 0)])
        assert docs
        _check_exact(docs, budget)
        for d in docs:
            assert d.metadata["start_index"] in bounds and d.metadata["end_index"] in bounds


def test_end_to_end_invoke_respects_budget_and_boundaries(index):
    bounds = {SID_EN: _boundaries(index, SID_EN), SID_ZH: _boundaries(index, SID_ZH)}
    for budget in (75, 180, 450):
        retriever = index.as_retriever(k=3, k_child=8, budget_tokens=budget, weights=(1.0, 0.0))
        docs = retriever.retrieve_many(["captain Name17 schooner", "which ledger carried copper to Port23", "市长名叫张42"])
        assert docs
        _check_exact(docs, budget)
        assert all(d.metadata["start_index"] in bounds[d.metadata["source_id"]] for d in docs)


def test_defaults_fill_the_budget_instead_of_a_fixed_k(index):
    retriever = WindowedParentRetriever(index=index)
    assert retriever.k is None and retriever.k_child == 30
    assert retriever.search_type == "similarity" and tuple(retriever.weights) == (0.5, 0.5)
    with pytest.raises(ValueError):
        WindowedParentRetriever(index=index, k=0)
    with pytest.raises(ValueError):
        WindowedParentRetriever(index=index, k_child=None)


def test_k_none_keeps_every_parent_that_fits(index):
    # seven far-apart hits in two sources: seven parents; k=4 keeps four, k=None all
    en, zh = [(2, 0.05), (14, 0.049), (27, 0.048)], [(5, 0.047), (25, 0.046), (45, 0.045), (60, 0.044)]

    def hit_chunks(retriever):
        docs = expand(retriever, [rank(retriever, _hits(index, SID_EN, en) + _hits(index, SID_ZH, zh), 0)])
        _check_exact(docs, 1500)
        return docs, {(d.metadata["source_id"], h) for d in docs for h in d.metadata["hit_chunk_indices"]}

    docs, covered = hit_chunks(WindowedParentRetriever(index=index, k=4, budget_tokens=1500))
    assert covered == {(SID_EN, 2), (SID_EN, 14), (SID_EN, 27), (SID_ZH, 5)}
    docs, covered = hit_chunks(WindowedParentRetriever(index=index, budget_tokens=1500))
    assert covered == {(SID_EN, c) for c, _ in en} | {(SID_ZH, c) for c, _ in zh}
    assert count_tokens("\n\n".join(d.page_content for d in docs)) > 1500 - 60  # the budget is full


def test_weak_sources_do_not_starve_the_best_one(index):
    # one strong EN parent, two other sources with one weak hit each: with one query the
    # budget is not split per source, the weak ones keep only their hit chunk
    retriever = WindowedParentRetriever(index=index, budget_tokens=400)
    hits = _hits(index, SID_EN, [(10, 0.05), (11, 0.04)]) + _hits(index, SID_ZH, [(40, 0.001)]) \
        + _hits(index, SID_NOTE, [(0, 0.001)])
    docs = expand(retriever, [rank(retriever, hits, 0)])
    _check_exact(docs, 400)
    by_source = {d.metadata["source_id"]: d for d in docs}
    assert set(by_source) == {SID_EN, SID_ZH, SID_NOTE}
    zh_chunk = index.engine.chunk_metadata(SID_ZH)[40]
    assert (by_source[SID_ZH].metadata["start_index"], by_source[SID_ZH].metadata["end_index"]) == (
        zh_chunk["start_index"], zh_chunk["end_index"])
    assert count_tokens(by_source[SID_EN].page_content) > 250
