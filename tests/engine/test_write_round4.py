"""The index's write path, round 4 (issues 39 and 42): updates through returned ids,
an in-memory default, adopting a vector store that holds documents, batched writes."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex


@pytest.fixture()
def index(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    yield idx
    idx.close()


def test_adding_under_the_id_add_texts_returned_replaces_the_source(index):
    """Issue 42 item 4: the id add_texts returned is the source's id for updates too."""
    [sid] = index.add_texts(["The old keeper logged the fog."])
    report = index.engine.index_documents([Document(id=sid, page_content="The new keeper logged the storm.")])
    assert report["replaced"] == 1 and report["added"] == 0
    assert index.engine.source_ids() == [sid]
    assert [d.page_content for d in index.get_by_ids([sid])] == ["The new keeper logged the storm."]
    found = index.similarity_search("keeper", k=4)
    assert [d.page_content for d in found] == ["The new keeper logged the storm."]
    # an id that names no source is still a new source of its own
    index.add_documents([Document(id="mine", page_content="Another text entirely.")])
    assert len(index.engine.source_ids()) == 2 and index.get_by_ids(["mine"])[0].page_content == "Another text entirely."


def test_an_index_without_a_location_is_in_memory(tmp_path, monkeypatch):
    """Issue 39 item 3: SlidingWindowIndex() writes nowhere (as Chroma() does), not into the CLI's index."""
    monkeypatch.setenv("SWRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    first = SlidingWindowIndex(embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    first.add_texts(["The keeper logged the fog."])
    second = SlidingWindowIndex(embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    assert first.engine.persist_directory is None and second.engine.source_ids() == []  # nothing shared
    assert [d.page_content for d in first.similarity_search("keeper", k=1)] == ["The keeper logged the fog."]
    assert first.as_retriever().invoke("keeper fog")[0].page_content == "The keeper logged the fog."
    assert not (tmp_path / "home").exists() and not (tmp_path / "xdg").exists()
    with pytest.raises(ValueError, match="persist_directory"):
        SlidingWindowIndex(embedding=DeterministicFakeEmbedding(size=16), index_text=str.lower)


class CountingEmbedding(DeterministicFakeEmbedding):
    """A fake embedding that counts its embed_documents calls."""

    calls: int = 0

    def embed_documents(self, texts):
        self.calls += 1
        return super().embed_documents(texts)


@pytest.mark.parametrize("where,calls", [("chroma", 400), ("memory", 4)])
def test_many_small_sources_are_written_in_batches(tmp_path, where, calls):
    """Issue 42 item 12: 400 one-line sources in one call are not 400 store writes. The
    default store's embedding runs once per source (a source's vectors must not depend on
    what else the call holds, see writer._rows); a store that embeds itself embeds each write."""
    embedding = CountingEmbedding(size=16)
    index = (SlidingWindowIndex(tmp_path / "idx", embedding=embedding, show_progress=False, batch_size=128)
             if where == "chroma" else SlidingWindowIndex(embedding=embedding, show_progress=False, batch_size=128))
    writes = []
    add = index.engine.vectors.add
    index.engine.vectors.add = lambda docs, ids: (writes.append(len(docs)), add(docs, ids))[1]
    lines = [f"Line {i}: the keeper logged the weather and the ships." for i in range(400)]
    ids = index.add_texts(lines)
    assert writes == [128, 128, 128, 16] and embedding.calls == calls  # ceil(400 / batch_size) writes
    assert len(set(ids)) == 400 and index.engine.count("small") == 400
    assert [d.page_content for d in index.get_by_ids(ids[::97])] == lines[::97]
    assert index.similarity_search(lines[123], k=1)[0].page_content == lines[123]  # each vector under its chunk
    index.close()


def test_a_vector_store_holding_documents_can_be_taken_over():
    """Issue 39 item 4: a store with vectors raises with the way forward, and from_vectorstore takes it."""
    from langchain_core.stores import InMemoryByteStore
    from langchain_core.vectorstores import InMemoryVectorStore

    from swrag_integrations.engine.engine import IndexMismatchError

    embedding = DeterministicFakeEmbedding(size=16)
    store = InMemoryVectorStore(embedding)
    texts = ["The keeper logged the fog over the bay.", "Bread dough rises when yeast ferments the flour."]
    store.add_documents([Document(page_content=t, metadata={"n": i}, id=f"doc{i}") for i, t in enumerate(texts)])
    with pytest.raises(IndexMismatchError, match=r"SlidingWindowIndex\.from_vectorstore\(vectorstore"):
        SlidingWindowIndex(vectorstore=store, source_store=InMemoryByteStore(), embedding=embedding)
    index = SlidingWindowIndex.from_vectorstore(store, source_store=InMemoryByteStore(), embedding=embedding,
                                                show_progress=False)
    assert [(d.page_content, d.metadata, d.id) for d in index.get_by_ids(["doc0", "doc1"])] == \
        [(t, {"n": i}, f"doc{i}") for i, t in enumerate(texts)]
    assert "doc0" not in store.store and len(store.store) == index.engine.count("small")  # only the index's chunks
    assert index.as_retriever().invoke("keeper fog")[0].page_content == texts[0]
    with pytest.raises(TypeError, match="documents="):
        SlidingWindowIndex.from_vectorstore(object(), source_store=InMemoryByteStore())


def test_plain_repair_fixes_the_stale_vectors_status_reports(tmp_path):
    """Issue 42 item 3: vectors of an old version under the current ids (what a stalled writer
    leaves) were reported by status() but left by repair(); only repair(deep=True) fixed them."""
    from swrag_integrations.engine.records import plan_source
    from swrag_integrations.engine.ids import vector_ids
    from swrag_integrations.ingest.writer import chunk_documents

    idx = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    v1 = Document(page_content="Version one says the keeper feeds ravens. " * 12, metadata={"source": "d.txt"})
    v2 = Document(page_content="Version two says the master counts pelicans. " * 12, metadata={"source": "d.txt"})
    [sid] = idx.add_documents([v2])
    old = plan_source(v1, idx.engine.config, sid)
    n = min(old.n_chunks, idx.engine.store.heads()[sid].n_chunks)
    current = vector_ids(idx.engine.manifest, sid, idx.engine.store.heads()[sid].content_hash, 0, n)  # v1's vectors under v2's ids
    idx.engine.vectors.add(chunk_documents(old, idx.engine.index_id, 0, n), current)
    assert not idx.engine.status().healthy
    report = idx.engine.repair()
    assert report.repaired == 1 and idx.engine.status().healthy
    got = idx.engine.vectors.collection.get(where={"source_id": sid}, include=["metadatas"])
    assert {m["content_hash"] for m in got["metadatas"]} == {idx.engine.store.heads()[sid].content_hash}
    idx.close()
