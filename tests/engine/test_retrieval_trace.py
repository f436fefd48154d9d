"""RetrievalTrace: one retrieval's steps, framework-free, the same as what the retrievers
return; the views render it (the view tests draw it)."""

from __future__ import annotations

import pytest
from ci_switch import importorskip
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.settings import DEFAULT_SETTINGS, RetrieverSettings
from swrag_integrations.engine.trace import hit_status, trace

TEXTS = {
    "sea.md": "The lighthouse was lit in 1874. Ships passed the reef safely after that. " * 12,
    "land.md": "The mill ground wheat for the village. Carts came from the hills every week. " * 12,
}
QUESTION = "When was the lighthouse lit for the ships?"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    idx = SlidingWindowIndex(tmp_path_factory.mktemp("trace") / "idx", embedding=DeterministicFakeEmbedding(size=16),
                             show_progress=False)
    idx.add_documents([Document(page_content=t, metadata={"source": n, "topic": n[:-3]}) for n, t in TEXTS.items()])
    yield idx
    idx.engine.store.close()


@pytest.mark.parametrize("budget", [40, 150, None])
def test_the_trace_keeps_what_the_retriever_returns(index, budget):
    retriever = index.as_retriever(budget_tokens=budget, k_child=12)
    traced = retriever.trace(QUESTION)
    docs = retriever.invoke(QUESTION)
    assert [(s.source_id, s.start, s.end) for s in traced.spans] == \
           [(d.metadata["source_id"], d.metadata["start_index"], d.metadata["end_index"]) for d in docs]
    assert traced.settings == retriever.settings and traced.settings.budget_tokens == budget
    assert [h.rank for h in traced.hits] == sorted(h.rank for h in traced.hits)
    for span in traced.spans:  # exact offsets into the sources the trace carries
        assert traced.sources[span.source_id][span.start:span.end] == span.text
    for parent in traced.parents:
        assert parent.source_id in traced.sources


def test_cuts_say_what_the_budget_left_of_each_hit(index):
    tight = index.as_retriever(budget_tokens=30, k_child=12).trace(QUESTION)
    statuses = [status.status for _, status in tight.cuts]
    assert "cut" in statuses or "part" in statuses, "a 30-token budget cannot hold 12 hits"
    for hit, status in tight.cuts:
        assert status == hit_status(hit, tight.spans)
        kept_chars = sum(max(0, min(s.end, hit.end) - max(s.start, hit.start))
                         for s in tight.spans if s.source_id == hit.source_id)
        assert status.kept == min(kept_chars, hit.end - hit.start)
    loose = index.as_retriever(budget_tokens=None, k_child=12).trace(QUESTION)
    assert all(status.status == "in" for _, status in loose.cuts)


def test_the_filter_is_applied_and_recorded(index):
    traced = index.as_retriever(search_kwargs={"filter": {"topic": "land"}}).trace(QUESTION)
    assert traced.filter is not None
    assert {h.source_id for h in traced.hits} <= set(traced.sources)
    assert all("mill" in traced.sources[h.source_id] for h in traced.hits)


def test_overrides_and_bad_values(index):
    retriever = index.as_retriever()
    assert retriever.trace(QUESTION, budget_tokens=200).settings == DEFAULT_SETTINGS.with_(budget_tokens=200)
    with pytest.raises(TypeError, match="unexpected keyword"):
        retriever.trace(QUESTION, nonsense=1)
    with pytest.raises(ValueError, match="k_child must be a positive int"):
        retriever.trace(QUESTION, k_child=0)
    with pytest.raises(ValueError, match="query must be a non-empty string"):
        trace(index, "  ", RetrieverSettings())


def test_the_engine_alone_gives_the_same_trace(index):
    """Framework-free: the engine under the face traces the same retrieval."""
    a = trace(index, QUESTION, DEFAULT_SETTINGS)
    b = trace(index.engine, QUESTION, DEFAULT_SETTINGS)
    assert [(s.source_id, s.start, s.end) for s in a.spans] == [(s.source_id, s.start, s.end) for s in b.spans]
    assert [(h.source_id, h.chunk_index) for h in a.hits] == [(h.source_id, h.chunk_index) for h in b.hits]


def test_the_llama_index_retriever_traces_too(index):
    importorskip("llama_index.core")
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    retriever = WindowedLlamaIndexRetriever(index.engine, budget_tokens=120)
    traced = retriever.trace(QUESTION)
    nodes = retriever.retrieve(QUESTION)
    assert [(s.start, s.end) for s in traced.spans] == [(n.node.start_char_idx, n.node.end_char_idx) for n in nodes]


def test_the_face_keeps_no_engine_state(index):
    """The LangChain face keeps no copy of the engine's state: its only state is the
    engine, and the engine's attributes it used to show (deprecated) are the engine's own."""
    assert set(vars(index)) == {"engine"}
    for name in ("store", "keyword", "manifest", "config", "encoding_name", "persist_directory", "index_id"):
        with pytest.warns(DeprecationWarning, match=f"use index.engine.{name}"):
            assert getattr(index, name) is getattr(index.engine, name)
