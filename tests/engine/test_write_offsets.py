"""Split, then add, then retrieve: chunks that carry their source offsets keep source
coordinates everywhere (issue 39): stored, widened, merged, returned; the ids they were
added under come back in the retriever's output."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_text_splitters import RecursiveCharacterTextSplitter

from swrag_integrations import DynamicStepTextSplitter, FixedWindowTextSplitter
from swrag_integrations.cli import sample_path
from swrag_integrations.langchain.index import SlidingWindowIndex

QUESTIONS = ["When was the lighthouse first lit?", "What replaced the oil lamp?", "Who keeps the light today?"]


@pytest.fixture()
def index(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    yield idx
    idx.close()


def _check_exact_and_disjoint(docs, texts):
    """Every returned document is its source's text at its offsets; no two of one source overlap."""
    assert docs
    by_source = {}
    for d in docs:
        text = texts[d.metadata["source"]]
        start, end = d.metadata["start_index"], d.metadata["end_index"]
        assert d.page_content == text[start:end]
        by_source.setdefault(d.metadata["source"], []).append((start, end))
    for spans in by_source.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


@pytest.mark.parametrize("splitter", [
    DynamicStepTextSplitter(window_size=128, step=2),
    FixedWindowTextSplitter(window_size=400, step=150, unit="char"),
    RecursiveCharacterTextSplitter(chunk_size=300, chunk_overlap=100, add_start_index=True),
], ids=["DDS", "FFS", "langchain-recursive"])
def test_split_chunks_come_back_in_source_coordinates(index, tmp_path, splitter):
    text = sample_path().read_text(encoding="utf-8")
    path = str(tmp_path / "sample.md")
    chunks = splitter.create_documents([text], metadatas=[{"source": path}])
    assert len(chunks) > 3 and sum(len(c.page_content) for c in chunks) > len(text)  # they overlap
    index.add_documents(chunks)
    retriever = index.as_retriever(budget_tokens=None)
    for question in QUESTIONS:
        docs = retriever.invoke(question)
        _check_exact_and_disjoint(docs, {path: text})
        assert sum(len(d.page_content) for d in docs) <= len(text)
        assert all(d.metadata["source"] == path for d in docs)
    # every chunk is still retrievable as added, under the id add_documents gave it
    ids = index.add_documents(chunks)
    assert [(d.page_content, d.metadata) for d in index.get_by_ids(ids)] == [(c.page_content, c.metadata)
                                                                              for c in chunks]
    assert index.engine.index_documents(chunks)["chunks"] == 0  # re-adding writes nothing


def test_gaps_between_chunks_are_not_filled(index):
    text = "Alpha beta gamma. " * 20
    chunks = [Document(page_content=text[0:100], metadata={"source": "a.txt", "start_index": 0}),
              Document(page_content=text[50:150], metadata={"source": "a.txt", "start_index": 50}),
              Document(page_content=text[200:300], metadata={"source": "a.txt", "start_index": 200})]
    index.add_documents(chunks)
    assert sorted(index.engine.source_text(s) for s in index.engine.source_ids()) == sorted([text[0:150], text[200:300]])
    docs = index.as_retriever(budget_tokens=None).invoke("gamma")
    _check_exact_and_disjoint(docs, {"a.txt": text})
    assert {(d.metadata["start_index"], d.metadata["end_index"]) for d in docs} <= {(0, 150), (200, 300)}


def test_chunks_that_disagree_are_refused_before_anything_is_written(index):
    chunks = [Document(page_content="The tower is 31 metres tall.", metadata={"source": "t.md", "start_index": 0}),
              Document(page_content="metres wide.", metadata={"source": "t.md", "start_index": 16})]
    with pytest.raises(ValueError, match=r"'t.md'.*16:28"):
        index.add_documents(chunks)
    with pytest.raises(ValueError, match="end_index"):
        index.add_documents([Document(page_content="abc", metadata={"source": "t.md", "start_index": 0,
                                                                    "end_index": 5})])
    assert index.engine.source_ids() == []


def test_deleting_one_chunk_keeps_the_others(index):
    text = sample_path().read_text(encoding="utf-8")
    chunks = FixedWindowTextSplitter(window_size=400, step=200, unit="char").create_documents(
        [text], metadatas=[{"source": "s.md"}])
    ids = index.add_documents(chunks)
    index.delete([ids[-1]])
    assert index.get_by_ids([ids[-1]]) == []
    assert [d.page_content for d in index.get_by_ids(ids[:2])] == [c.page_content for c in chunks[:2]]
    records = [index.engine.record(s) for s in index.engine.source_ids()]
    assert max(r.base + len(r.text) for r in records) == max(c.metadata["end_index"] for c in chunks[:-1])


def test_retrieved_windows_name_the_ids_of_the_added_documents(index):
    """Issue 39 item 2: the ids the user added documents under are in the retriever's output."""
    index.add_documents([
        Document(id="keeper-log", page_content="The keeper logged fog, storms and passing ships every night."),
        Document(id="bread", page_content="Bread dough rises when yeast ferments the flour in a warm room."),
    ])
    docs = index.as_retriever(budget_tokens=None).invoke("keeper fog ships")
    assert {d.page_content: d.metadata["doc_ids"] for d in docs}[
        "The keeper logged fog, storms and passing ships every night."] == ["keeper-log"]
    text = sample_path().read_text(encoding="utf-8")
    chunks = FixedWindowTextSplitter(window_size=400, step=200, unit="char").create_documents(
        [text], metadatas=[{"source": "s.md"}])
    ids = index.add_documents(chunks)
    for d in index.as_retriever(budget_tokens=None).invoke("When was the lighthouse first lit?"):
        if d.metadata.get("source") == "s.md":
            assert d.metadata["doc_ids"] and set(d.metadata["doc_ids"]) <= set(ids)


def test_llama_index_nodes_come_back_in_document_coordinates(tmp_path):
    from llama_index.core import Document as LlamaDocument

    from swrag_integrations.llama_index import DynamicStepNodeParser, SlidingWindowLlamaIndex

    text = sample_path().read_text(encoding="utf-8")
    nodes = DynamicStepNodeParser(window_size=128, step=2).get_nodes_from_documents(
        [LlamaDocument(text=text, doc_id="sample")])
    assert sum(len(n.text) for n in nodes) > len(text)
    index = SlidingWindowLlamaIndex(tmp_path / "li", embed_model=DeterministicFakeEmbedding(size=16),
                                    show_progress=False)
    try:
        index.insert_documents(nodes)
        for question in QUESTIONS:
            hits = index.as_retriever(budget_tokens=None).retrieve(question)
            spans = sorted((h.node.start_char_idx, h.node.end_char_idx) for h in hits)
            assert all(text[s:e] == h.node.get_content() for h in hits
                       for s, e in [(h.node.start_char_idx, h.node.end_char_idx)])
            assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    finally:
        index.engine.close()


def test_chunks_of_one_source_added_in_several_calls_never_overlap(index):
    text = sample_path().read_text(encoding="utf-8")
    chunks = FixedWindowTextSplitter(window_size=400, step=150, unit="char").create_documents(
        [text], metadatas=[{"source": "s.md"}])
    ids = [i for lo in range(0, len(chunks), 4) for i in index.add_documents(chunks[lo:lo + 4])]
    assert len(index.engine.source_ids()) == 1 and index.engine.source_text(index.engine.source_ids()[0]) == text
    for question in QUESTIONS:
        _check_exact_and_disjoint(index.as_retriever(budget_tokens=None).invoke(question), {"s.md": text})
    assert [d.page_content for d in index.get_by_ids(ids)] == [c.page_content for c in chunks]
    # a new version of the file, split again: replaces the old text where it meets it
    new = text.replace("lighthouse", "beacon")
    again = FixedWindowTextSplitter(window_size=400, step=150, unit="char").create_documents(
        [new], metadatas=[{"source": "s.md"}])
    index.add_documents(again)
    assert [index.engine.source_text(s) for s in index.engine.source_ids()] == [new]
