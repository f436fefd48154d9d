"""Follow-ups of split-then-add keeping source offsets: merged windows' ``doc_ids``,
views/traces of joined records that start past the source's first character."""

from __future__ import annotations

from swrag_integrations.engine.assemble import ContextSpan, assemble_context


def test_merged_windows_carry_the_union_of_their_doc_ids():
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    first = ContextSpan("s", 0, 30, text[0:30], 0.9, 1, {"doc_ids": ["s@0-20", "s@20-40"]})
    second = ContextSpan("s", 20, 56, text[20:56], 0.5, 2, {"doc_ids": ["s@20-40", "s@40-56"]})
    ctx = assemble_context([first, second], None)
    assert len(ctx.spans) == 1
    assert ctx.spans[0].metadata["doc_ids"] == ["s@0-20", "s@20-40", "s@40-56"]


# ---------------------------------------------------------------- a record that starts past 0
import os  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings  # noqa: E402

from swrag_integrations import FixedWindowTextSplitter  # noqa: E402
from swrag_integrations.cli import sample_path  # noqa: E402
from swrag_integrations.langchain.index import SlidingWindowIndex  # noqa: E402
from swrag_integrations.engine.trace import trace  # noqa: E402

QUESTION = "Who keeps the light today?"


@pytest.fixture()
def second_half(tmp_path):
    """An index holding offset chunks of only the second half of a file (its record's base > 0)."""
    text = sample_path().read_text(encoding="utf-8")
    path = str(tmp_path / "sample.md")
    chunks = FixedWindowTextSplitter(window_size=300, step=120, unit="char").create_documents(
        [text], metadatas=[{"source": path}])
    half = [c for c in chunks if c.metadata["start_index"] >= len(text) // 2]
    assert half and half[0].metadata["start_index"] > 0
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    idx.add_documents(half)
    sid = idx.engine.source_ids()[0]
    assert idx.engine.record(sid).base > 0
    yield idx, text, sid
    idx.close()


def test_trace_of_a_record_starting_past_zero_gives_exact_text(second_half):
    idx, text, sid = second_half
    t = trace(idx, QUESTION)
    assert t.hits
    for hit in t.hits:
        assert t.source_span(hit.source_id, hit.start, hit.end) == text[hit.start:hit.end]
        assert t.source_span(hit.source_id, hit.window_start, hit.window_end) == text[hit.window_start:hit.window_end]


def test_retrieval_view_of_a_record_starting_past_zero(second_half, tmp_path):
    from swrag_integrations.view.retrieval import RetrievalView

    idx, text, sid = second_half
    view = RetrievalView.from_trace(trace(idx, QUESTION))  # raised: spans "not the source's characters"
    html = view.to_html()
    for span in view.spans:
        assert span.text == text[span.start:span.end]
    assert html


def test_answer_page_reads_a_record_starting_past_zero_from_the_index(second_half, tmp_path):
    from swrag_integrations.cli.view import write_answer_page

    idx, text, sid = second_half
    docs = idx.as_retriever(budget_tokens=None).invoke(QUESTION)
    sources = [{"source": d.metadata["source"], "source_id": d.metadata["source_id"], "text": d.page_content,
                "start_index": d.metadata["start_index"], "end_index": d.metadata["end_index"]} for d in docs]
    assert sources and all(s["text"] == text[s["start_index"]:s["end_index"]] for s in sources)
    out = write_answer_page({"question": QUESTION, "answer": "The keeper.", "sources": sources},
                            tmp_path / "answer.html", index=idx)  # raised: "lies outside the text"
    assert out.read_text(encoding="utf-8").count("<") > 0


def test_raptor_summaries_of_a_record_starting_past_zero_are_exact_spans(shared_dir, tmp_path):
    import json

    from swrag_integrations.methods.raptor import ClusterConfig, RaptorIndex, TreeConfig

    row = json.loads((shared_dir / "data" / "eval" / "qasper.jsonl").open(encoding="utf-8").readline())
    text = row["context"]
    chunks = FixedWindowTextSplitter(window_size=600, step=300, unit="char").create_documents(
        [text], metadatas=[{"source": "qasper0"}])
    half = [c for c in chunks if c.metadata["start_index"] >= len(text) // 2]
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    try:
        idx.add_documents(half)
        sid = idx.engine.source_ids()[0]
        assert idx.engine.record(sid).base > 0
        raptor = RaptorIndex(idx, config=TreeConfig(cluster=ClusterConfig(reduction="pca")), show_progress=False)
        raptor.build()
        tree = raptor.tree
        assert [n for n in tree.nodes if n.layer > 0]  # summaries were built
        for node in tree.nodes:
            assert node.spans and len(node.span_texts) == len(node.spans)
            for (source, a, b), piece in zip(node.spans, node.span_texts):
                assert source == sid and piece == text[a:b]
    finally:
        idx.close()


class _FailingEmbedding(Embeddings):
    """Embeds like ``DeterministicFakeEmbedding``, except that its ``fail_at``-th
    ``embed_documents`` call raises (a transient failure)."""

    def __init__(self, fail_at: int) -> None:
        self.inner, self.fail_at, self.calls = DeterministicFakeEmbedding(size=16), fail_at, 0

    def embed_documents(self, texts):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("embedding service down")
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_from_vectorstore_failing_mid_way_leaves_the_store_as_it_was(tmp_path):
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(_FailingEmbedding(fail_at=2))  # the store embeds; its 2nd call: the index's write
    text = sample_path().read_text(encoding="utf-8")
    parts = [text[i:i + 700] for i in range(0, len(text), 700)]
    ids = store.add_documents([Document(page_content=p, metadata={"n": i}) for i, p in enumerate(parts)],
                              ids=[f"doc{i}" for i in range(len(parts))])
    before = {k: (r["text"], list(r["vector"]), dict(r["metadata"])) for k, r in store.store.items()}
    assert len(parts) >= 2 and sorted(before) == sorted(ids)
    with pytest.raises(RuntimeError, match="embedding service down"):
        SlidingWindowIndex.from_vectorstore(store, show_progress=False,
                                            source_store=str(tmp_path / "sources.sqlite"))
    after = {k: (r["text"], list(r["vector"]), dict(r["metadata"])) for k, r in store.store.items()}
    assert after == before


def test_llama_index_retriever_takes_the_relevance_floor(second_half):
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    idx, text, sid = second_half
    everything = WindowedLlamaIndexRetriever(idx.engine).trace(QUESTION).hits
    relevances = sorted(h.metadata["relevance"] for h in everything)
    assert len(set(relevances)) > 1
    floor = relevances[len(relevances) // 2]
    retriever = WindowedLlamaIndexRetriever(idx.engine, min_relevance=floor)
    kept = retriever.trace(QUESTION).hits
    assert [h.chunk_index for h in kept] == [h.chunk_index for h in everything if h.metadata["relevance"] >= floor]
    assert len(kept) < len(everything)
    nodes = retriever.retrieve(QUESTION)
    assert nodes and all(n.node.get_content() == text[n.node.metadata["start_index"]:n.node.metadata["end_index"]]
                         for n in nodes)
    with pytest.raises(ValueError, match="min_relevance"):
        WindowedLlamaIndexRetriever(idx.engine, min_relevance=2)


def test_inserted_nodes_show_and_delete_by_their_ref_doc_id(tmp_path):
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    from swrag_integrations.llama_index.index import SlidingWindowLlamaIndex

    text = sample_path().read_text(encoding="utf-8")
    nodes = []
    for i, a in enumerate(range(0, len(text), 400)):
        node = TextNode(text=text[a:a + 500], start_char_idx=a, end_char_idx=min(len(text), a + 500), id_=f"n{i}")
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="docA")
        nodes.append(node)
    index = SlidingWindowLlamaIndex(tmp_path / "i", embed_model=MockEmbedding(embed_dim=16), show_progress=False)
    index.insert_nodes(nodes)
    assert len(index.engine.source_ids()) == 1
    assert index.ref_doc_ids == ["docA"]  # the document's id, not the internal source id
    index.delete_ref_doc("docA")
    assert index.engine.source_ids() == []


def test_retrieved_llama_index_nodes_name_the_document_they_come_from(tmp_path, monkeypatch):
    """A retrieved node's ``ref_doc_id`` is the id the document was inserted as (a
    Document's ``doc_id``; the ``ref_doc_id`` of inserted nodes), not an internal source
    id, and its metadata lists the added documents it overlaps (``doc_ids``)."""
    from llama_index.core import Document

    from fake_embeddings import TrigramEmbedder
    from swrag_integrations.llama_index import DynamicStepNodeParser, SlidingWindowLlamaIndex

    text = "The lighthouse was first lit in 1874. Its keeper counted ships. " * 6
    index = SlidingWindowLlamaIndex.from_documents(
        [Document(text=text, doc_id="lighthouse")], tmp_path / "idx", embed_model=TrigramEmbedder(),
        transformations=[DynamicStepNodeParser(window_size=16, step=1)], show_progress=False)
    index.insert_documents([Document(text="Bread dough rises when yeast ferments. " * 4, doc_id="bread")])
    hits = index.as_retriever(similarity_top_k=4).retrieve("lighthouse keeper bread yeast")
    assert {h.node.ref_doc_id for h in hits} == {"lighthouse", "bread"}
    for hit in hits:
        assert hit.node.metadata["doc_ids"], hit.node.metadata
    bread = next(h for h in hits if h.node.ref_doc_id == "bread")
    assert bread.node.metadata["doc_ids"] == ["bread"]


def test_a_llama_index_without_a_location_lives_only_as_long_as_the_object(tmp_path, monkeypatch):
    """``SlidingWindowLlamaIndex()`` without ``persist_dir`` does not write into the CLI's
    shared index (as ``VectorStoreIndex`` keeps its data in memory): a private temporary
    folder, gone when the object is."""
    import gc

    from llama_index.core import Document

    from fake_embeddings import TrigramEmbedder
    from swrag_integrations.llama_index import SlidingWindowLlamaIndex

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("SWRAG_HOME", str(tmp_path / "home"))
    first = SlidingWindowLlamaIndex(embed_model=TrigramEmbedder(), show_progress=False)
    second = SlidingWindowLlamaIndex(embed_model=TrigramEmbedder(), show_progress=False)
    first.insert_documents([Document(text="Only in the first index. " * 3, doc_id="one")])
    assert first.ref_doc_ids == ["one"] and second.ref_doc_ids == []
    folder = first.engine.persist_directory
    assert folder is not None and (os.stat(folder).st_mode & 0o777) == 0o700
    assert not (tmp_path / "data").exists() and not (tmp_path / "home").exists()
    del first
    gc.collect()
    assert not os.path.exists(folder)
