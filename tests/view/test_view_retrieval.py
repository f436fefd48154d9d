"""RetrievalView: hits, their windows and the final spans are drawn at their exact
offsets; what the budget cut is marked; the view runs the retriever's own planner."""

import dataclasses

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from test_view_html import ALLOWED_ATTRS, ALLOWED_TAGS, HOSTILE, structure
from test_view_split import CRLF, EMOJI, EN, ZH

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.langchain.retriever import WindowedParentRetriever
from swrag_integrations.engine.assemble import ContextSpan
from swrag_integrations.engine.parents import spans_for
from swrag_integrations.view import RetrievalView
from swrag_integrations.view.html import marked_regions, merge_ranges, region_text
from swrag_integrations.engine.trace import hit_status

# (the index cannot store a lone surrogate: add_documents raises UnicodeEncodeError)
SOURCES = {"en.txt": EN * 3, "zh.txt": ZH * 3, "emoji.txt": EMOJI * 2, "crlf.txt": CRLF * 3,
           "hostile.txt": HOSTILE.replace("\ud800", "")}
QUESTIONS = ["Did the ships see the beam of the lamp?", "灯塔什么时候首次点亮？", "family flags 🇳🇴", "Second line paragraph"]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    idx = SlidingWindowIndex(tmp_path_factory.mktemp("view-index"), embedding=DeterministicFakeEmbedding(size=16),
                             show_progress=False)
    idx.add_documents([Document(page_content=t, metadata={"source": name}) for name, t in SOURCES.items()])
    return idx


def doc_ids(view):
    return {sid: str(i) for i, sid in enumerate(view._source_order())}


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.parametrize("budget", [120, 2000])
def test_hits_windows_and_spans_are_drawn_exactly(index, question, budget):
    view = RetrievalView.from_index(index, question, k_child=12, budget_tokens=budget)
    assert view.hits, "the question must match something"
    regions = marked_regions(view.to_html())
    docs = doc_ids(view)
    for r in regions:  # every marked region, in every source
        sid = next(s for s, d in docs.items() if d == r.doc)
        assert r.text == view.sources[sid][r.start:r.end]
    for hit in view.hits:
        text = view.sources[hit.source_id]
        assert region_text(regions, docs[hit.source_id], hit.start, hit.end) == text[hit.start:hit.end]
        assert (region_text(regions, docs[hit.source_id], hit.window_start, hit.window_end)
                == text[hit.window_start:hit.window_end])
    for span in view.spans:
        assert region_text(regions, docs[span.source_id], span.start, span.end) == span.text


@pytest.mark.parametrize("budget", [60, 120, 400])
def test_context_and_cuts_are_marked_where_the_planner_put_them(index, budget):
    question = "Did the ships see the beam of the lamp?"
    view = RetrievalView.from_index(index, question, k_child=15, budget_tokens=budget)
    # the view runs the retriever's planner: same spans as the planner on the same hits
    again = spans_for([index.engine.search_children(question, 15)], index.engine, budget_tokens=budget)
    assert [(s.source_id, s.start, s.end) for s in view.spans] == [(s.source_id, s.start, s.end) for s in again]
    document = view.to_html()
    segs = [r for r in marked_regions(document) if "s" in r.classes]
    docs = doc_ids(view)
    for sid, doc in docs.items():
        mine = [r for r in segs if r.doc == doc]
        in_ctx = merge_ranges((s.start, s.end) for s in view.spans if s.source_id == sid)
        for r in mine:
            inside = any(a <= r.start and r.end <= b for a, b in in_ctx)
            assert ("ctx" in r.classes) == inside
            lost = [h for h in view.hits if h.source_id == sid and h.start <= r.start and r.end <= h.end
                    and hit_status(h, view.spans).status != "in"]
            assert ("cut" in r.classes) == (bool(lost) and not inside)
    statuses = [hit_status(h, view.spans).status for h in view.hits]
    assert f"{statuses.count('cut')} hits cut" in document
    for hit, status in zip(view.hits, statuses):
        row = f'data-goto="{hit.start}:{hit.end}" data-what="hit {hit.rank}, chunk {hit.chunk_index}"'
        assert row in document
        kept = hit_status(hit, view.spans).kept
        assert status == ("in" if kept == hit.end - hit.start else "part" if kept else "cut")
    if budget == 60:
        assert statuses.count("cut") > 0  # a tight budget cuts something, and the page says so


def test_rankers_ranks_are_shown(index):
    # k_child = every chunk: the dense list holds them all, so each BM25 hit is in both lists
    view = RetrievalView.from_index(index, "Did the ships see the beam of the lamp?", k_child=index.engine.count("small"))
    document = view.to_html()
    both = [h for h in view.hits if "bm25_rank" in h.metadata and "dense_rank" in h.metadata]
    assert both
    for hit in view.hits:
        assert f"{hit.metadata['rrf_score']:.4f}" in document


def test_from_retriever_uses_its_settings(index):
    retriever = WindowedParentRetriever(index=index, k_child=7, budget_tokens=300, expand="chunk")
    view = RetrievalView.from_retriever(retriever, "灯塔什么时候首次点亮？")
    assert len(view.hits) <= 7 and view.settings["expand"] == "chunk" and view.budget_tokens == 300
    docs = retriever.invoke("灯塔什么时候首次点亮？")
    assert [(d.metadata["source_id"], d.metadata["start_index"], d.metadata["end_index"]) for d in docs] == \
        [(s.source_id, s.start, s.end) for s in view.spans]
    with pytest.raises(TypeError, match="unexpected keyword"):
        RetrievalView.from_retriever(retriever, "x", budget=3)
    with pytest.raises(ValueError, match="non-empty"):
        RetrievalView.from_index(index, "   ")


def test_spans_outside_their_source_are_refused(index):
    view = RetrievalView.from_index(index, "Did the ships see the beam of the lamp?", k_child=5)
    hit, span = view.hits[0], view.spans[0]
    text = view.sources[span.source_id]
    far = ContextSpan(span.source_id, len(text) - 2, len(text) + 3, "x" * 5)
    with pytest.raises(ValueError, match="outside the text"):
        RetrievalView("q", view.hits, [far], view.sources)
    wrong = ContextSpan(span.source_id, span.start, span.end, "y" * (span.end - span.start))
    with pytest.raises(ValueError, match="not the source's characters"):
        RetrievalView("q", view.hits, [wrong], view.sources)
    moved = dataclasses.replace(hit, window_end=len(view.sources[hit.source_id]) + 1)
    with pytest.raises(ValueError, match="window: span"):
        RetrievalView("q", [moved], [], view.sources)
    with pytest.raises(ValueError, match="no text given"):
        RetrievalView("q", view.hits, [], {})
    tight = RetrievalView.from_index(index, "Did the ships see the beam of the lamp?", k_child=15, budget_tokens=60)
    lost = [h for h in tight.hits if hit_status(h, tight.spans).status == "cut"]
    assert lost
    with pytest.raises(ValueError, match="outside the spans given|no text given"):
        RetrievalView("q", lost, tight.spans, {})  # without the source text, a cut hit cannot be drawn


def test_spans_alone_assembled_context_and_retriever_documents(index):
    from swrag_integrations.engine.assemble import assemble_context

    retriever = WindowedParentRetriever(index=index, budget_tokens=250)
    docs = retriever.invoke("Did the ships see the beam of the lamp?")
    for spans in (docs, assemble_context(docs, 250)):
        view = RetrievalView.from_spans(spans, "Did the ships see the beam of the lamp?")
        document = view.to_html()
        regions = marked_regions(document)
        docs_ = doc_ids(view)
        for d in docs:
            sid = d.metadata["source_id"]
            a, b = d.metadata["start_index"], d.metadata["end_index"]
            assert region_text(regions, docs_[sid], a, b) == d.page_content
        assert "excerpts only" in document and "Spans only" in document
    assert RetrievalView.from_spans(assemble_context(docs, 250)).budget_tokens == 250
    a = ContextSpan("s", 0, 5, "abcde")
    b = ContextSpan("s", 3, 7, "dXfg")
    with pytest.raises(ValueError, match="disagree at offset 4"):
        RetrievalView.from_spans([a, b])


def test_hostile_source_and_question_are_inert(index):
    question = "<script>alert(1)</script> javascript: nul\x00"
    view = RetrievalView.from_index(index, question, k_child=30, budget_tokens=3000)
    assert any(SOURCES["hostile.txt"] == view.sources[s] for s in view.sources), "the hostile source must be shown"
    document = view.to_html()
    tags = structure(document)
    assert tags.tags <= ALLOWED_TAGS and tags.attrs <= ALLOWED_ATTRS and tags.scripts == ["text/javascript"]
    assert "<script>alert" not in document and "<img" not in document
    assert np.all([r.text == view.sources[next(s for s, d in doc_ids(view).items() if d == r.doc)][r.start:r.end]
                   for r in marked_regions(document)])
