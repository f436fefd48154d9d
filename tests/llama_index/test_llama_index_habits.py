"""Issue 39, item 2: what a LlamaIndex user writes on the LlamaIndex face works as in
LlamaIndex: similarity_top_k, insert_nodes, refresh_ref_docs, as_chat_engine,
from_documents(transformations=...), a LlamaIndex retriever as the hit source, and a
folder read twice by SimpleDirectoryReader indexed once."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_index.core")

from fake_embeddings import TrigramEmbedder  # noqa: E402
from llama_index.core import Document, SimpleDirectoryReader, VectorStoreIndex  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.postprocessor import SimilarityPostprocessor  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.vector_stores import MetadataFilter, MetadataFilters  # noqa: E402

from swrag_integrations.llama_index import (  # noqa: E402
    DynamicStepNodeParser,
    SlidingWindowLlamaIndex,
    WindowedLlamaIndexRetriever,
)
from swrag_integrations.llama_index.index import MiniLMLlamaIndexEmbedding  # noqa: E402

SEA = "The lighthouse keeper walked the rocky shore. He counted the ships in the harbour. " * 6
BREAD = "Bread dough rises when yeast ferments the flour. Bake the loaf in a hot oven. " * 6
COMET = "A bright comet crossed the night sky near the sun. Astronomers tracked its tail. " * 6


def docs() -> list[Document]:
    return [Document(text=SEA, metadata={"topic": "sea"}, doc_id="sea"),
            Document(text=BREAD, metadata={"topic": "kitchen"}, doc_id="bread"),
            Document(text=COMET, metadata={"topic": "sky"}, doc_id="comet")]


@pytest.fixture
def index(tmp_path: Path) -> SlidingWindowLlamaIndex:
    return SlidingWindowLlamaIndex.from_documents(docs(), tmp_path / "idx", embed_model=TrigramEmbedder(),
                                                  show_progress=False, chunk_size=16)


# ------------------------------------------------------------------ similarity_top_k
def test_similarity_top_k_limits_the_retriever_and_the_query_engine(index: SlidingWindowLlamaIndex) -> None:
    assert len(index.as_retriever().retrieve("How does bread rise?")) > 1  # the budget decides by default
    nodes = index.as_retriever(similarity_top_k=1).retrieve("How does bread rise?")
    assert len(nodes) == 1 and nodes[0].node.metadata["topic"] == "kitchen"

    engine = index.as_query_engine(llm=MockLLM(max_tokens=4), similarity_top_k=1,
                                   node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.0)])
    answer = engine.query("How does bread rise?")
    assert len(answer.source_nodes) == 1 and answer.source_nodes[0].node.metadata["topic"] == "kitchen"


def test_similarity_top_k_and_k_disagreeing_is_an_error(index: SlidingWindowLlamaIndex) -> None:
    with pytest.raises(TypeError, match="pass k or similarity_top_k"):
        index.as_retriever(k=2, similarity_top_k=3)
    with pytest.raises(ValueError, match="similarity_top_k must be a positive int"):
        index.as_retriever(similarity_top_k=0)
    assert index.as_retriever(k=2, similarity_top_k=2).settings.k == 2


# ------------------------------------------------------------------ as_chat_engine
@pytest.mark.parametrize("chat_mode", ["condense_plus_context", "context", "condense_question"])
def test_as_chat_engine_answers_from_the_windows(index: SlidingWindowLlamaIndex, chat_mode: str) -> None:
    sea_only = MetadataFilters(filters=[MetadataFilter(key="topic", value="sea")])
    chat = index.as_chat_engine(chat_mode=chat_mode, llm=MockLLM(max_tokens=4), similarity_top_k=2)
    reply = chat.chat("How does bread rise?")
    assert reply.source_nodes and reply.source_nodes[0].node.metadata["topic"] == "kitchen"
    assert len(reply.source_nodes) <= 2
    filtered = index.as_chat_engine(chat_mode=chat_mode, llm=MockLLM(max_tokens=4), filters=sea_only)
    assert {n.node.metadata["topic"] for n in filtered.chat("How does bread rise?").source_nodes} == {"sea"}


def test_as_chat_engine_names_the_chat_modes_it_has(index: SlidingWindowLlamaIndex) -> None:
    with pytest.raises(ValueError, match="chat_mode must be one of 'condense_plus_context'"):
        index.as_chat_engine(chat_mode="react", llm=MockLLM())


# ------------------------------------------------------------------ refresh_ref_docs
def test_refresh_ref_docs_returns_which_documents_were_refreshed(index: SlidingWindowLlamaIndex) -> None:
    sea, bread, comet = docs()
    new = Document(text="Tides rise and fall twice a day along the coast. " * 4, doc_id="tides")
    changed_text = Document(text=BREAD + "Rye bread rises slower.", metadata={"topic": "kitchen"}, doc_id="bread")
    changed_meta = Document(text=COMET, metadata={"topic": "space"}, doc_id="comet")
    assert index.refresh_ref_docs([sea, changed_text, changed_meta, new]) == [False, True, True, True]
    assert index.ref_doc_ids == ["bread", "comet", "sea", "tides"]
    assert index.engine.source_text(index.engine.resolve_ids(["bread"])[0]).endswith("Rye bread rises slower.")
    assert index.as_retriever(similarity_top_k=1).retrieve("comet near the sun")[0].node.metadata["topic"] == "space"
    assert index.refresh_ref_docs([sea, changed_text, changed_meta, new]) == [False, False, False, False]


# ------------------------------------------------------------------ insert_nodes / transformations
def test_insert_nodes_passes_the_nodes_to_the_insert_path(index: SlidingWindowLlamaIndex, monkeypatch) -> None:
    nodes = DynamicStepNodeParser(window_size=12, step=2).get_nodes_from_documents(docs()[:1])
    got: list = []
    monkeypatch.setattr(index, "insert_documents", lambda items: got.extend(items) or "report")
    assert index.insert_nodes(nodes) == "report"
    assert got == nodes
    with pytest.raises(TypeError, match="insert_nodes takes LlamaIndex nodes, got str"):
        index.insert_nodes(["text"])


def test_from_documents_with_transformations_inserts_the_parsers_nodes(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "sea.txt").write_text(SEA)
    read = SimpleDirectoryReader(str(folder)).load_data()
    parser = DynamicStepNodeParser(window_size=12, step=2)
    got: list = []
    monkeypatch.setattr(SlidingWindowLlamaIndex, "insert_documents", lambda self, items: got.extend(items))
    SlidingWindowLlamaIndex.from_documents(read, tmp_path / "idx", embed_model=TrigramEmbedder(),
                                           show_progress=False, transformations=[parser])
    expected = parser.get_nodes_from_documents(read)
    assert len(got) == len(expected) > 1
    assert [(n.start_char_idx, n.end_char_idx, n.get_content()) for n in got] == \
        [(n.start_char_idx, n.end_char_idx, n.get_content()) for n in expected]
    assert all(SEA[n.start_char_idx:n.end_char_idx] == n.get_content() for n in got)
    # the nodes' source is the file (a stable identity), not the reader's random doc_id
    assert {n.ref_doc_id for n in got} == {str(folder / "sea.txt")}


# ------------------------------------------------------------------ a LlamaIndex retriever as the hit source
def test_a_llama_index_retriever_is_the_hit_source(tmp_path: Path) -> None:
    embed = MiniLMLlamaIndexEmbedding(TrigramEmbedder())
    nodes = DynamicStepNodeParser(window_size=12, step=2).get_nodes_from_documents(docs())
    vector_index = VectorStoreIndex(nodes, embed_model=embed)
    source = vector_index.as_retriever(similarity_top_k=3)
    assert isinstance(source, BaseRetriever)
    retriever = WindowedLlamaIndexRetriever(retriever=source, k=2)
    found = retriever.retrieve("How does bread rise in the oven?")
    assert found and len(found) <= 2 and found[0].node.metadata["topic"] == "kitchen"
    texts = {d.doc_id: d.text for d in docs()}
    for hit in found:
        meta = hit.node.metadata
        assert texts[hit.node.ref_doc_id][meta["start_index"]:meta["end_index"]] == hit.node.get_content()
    sea_only = MetadataFilters(filters=[MetadataFilter(key="topic", value="sea")])
    filtered = WindowedLlamaIndexRetriever(retriever=vector_index.as_retriever(similarity_top_k=10),
                                           filters=sea_only).retrieve("bread")
    assert filtered and {n.node.metadata["topic"] for n in filtered} == {"sea"}


# ------------------------------------------------------------------ a folder read twice
def test_a_folder_read_twice_is_indexed_once(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "sea.txt").write_text(SEA)
    (folder / "bread.txt").write_text(BREAD)
    index = SlidingWindowLlamaIndex(tmp_path / "idx", embed_model=TrigramEmbedder(), show_progress=False)
    first = SimpleDirectoryReader(str(folder)).load_data()
    assert index.insert_documents(first).added == 2
    again = SimpleDirectoryReader(str(folder)).load_data()
    assert {d.doc_id for d in again}.isdisjoint({d.doc_id for d in first})  # the reader's ids are random
    assert index.insert_documents(again).unchanged == 2
    assert index.ref_doc_ids == sorted([str(folder / "bread.txt"), str(folder / "sea.txt")])
    assert len(index.engine.source_ids()) == 2

    (folder / "bread.txt").write_text(COMET)
    assert index.refresh_ref_docs(SimpleDirectoryReader(str(folder)).load_data()) == [True, False]
    assert len(index.engine.source_ids()) == 2
    hits = index.as_retriever(similarity_top_k=1).retrieve("comet near the sun")
    assert "comet" in hits[0].node.get_content()
    # documents with an id of their own keep it; the caller's documents are not changed
    own = Document(text=SEA, metadata={"file_path": str(folder / "sea.txt")}, doc_id="my-id")
    index.insert_documents([own])
    assert own.doc_id == "my-id" and "my-id" in index.ref_doc_ids
