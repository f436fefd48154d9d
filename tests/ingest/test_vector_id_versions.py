"""Issue 42 item 3: a vector id carries the version (content hash) of its source's text,
so a writer that resumes after another one wrote a newer version lands its vectors under
ids no record references (never in the newer version's place); `status()` reports them
and plain `repair()` deletes them. Indexes written with the legacy ids keep working."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import threading

import pytest
from langchain_core.documents import Document

from stores import MILVUS, referenced_vector_ids, vector_ids
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.records import plan_source
from swrag_integrations.engine.ids import chunk_id, vector_id, vector_id_scheme
from swrag_integrations.engine.ids import vector_ids as ids_of
from swrag_integrations.engine.protocols import as_engine
from swrag_integrations.stores.sources import LeaseLostError
from swrag_integrations.ingest.writer import chunk_documents
from test_retrieval_leases import SID, V1, V2, doc, kv_index
from test_retrieval_reliability import fake, forget_clients, mk

OTHER = "An unrelated note about the tides."


def _texts(docs):
    return " ".join(d.page_content for d in docs)


def test_a_stalled_writers_late_vectors_do_not_take_the_current_versions_place(tmp_path):
    """Writer A stalls between its lease check and its vector write; B takes the lease and
    writes v2 of the same source; A resumes and lands v1's vectors. v2 stays served whole,
    v1's text is never served, status reports the unreferenced vectors and plain repair
    deletes them: the index equals a clean build."""
    root = tmp_path / "idx"
    kv_index(root, lease=0.5).add_texts([OTHER], [{"source": "other.txt"}])
    a = kv_index(root, lease=0.5)
    stalled, resume = threading.Event(), threading.Event()
    real_add = a.engine.vectors.add

    def stalling_add(docs, ids):
        if not stalled.is_set():  # after the lease check, before the write: a suspended process
            lease = a.engine.store._lease
            lease.stop.set()  # its renewal stops with it
            lease.thread.join()
            stalled.set()
            assert resume.wait(120)
        return real_add(docs, ids)

    a.engine.vectors.add = stalling_add
    errors = []

    def write_v1():
        try:
            a.engine.index_documents([doc(V1)])
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    thread = threading.Thread(target=write_v1)
    thread.start()
    try:
        assert stalled.wait(120), "writer A never reached its vector write"
        b = kv_index(root, lease=0.5)
        b.engine.index_documents([doc(V2)])  # waits for A's lease to expire, completes A's v1, writes v2
    finally:
        resume.set()
        thread.join(120)
    assert [type(e) for e in errors] == [LeaseLostError]  # A landed its vectors, then was stopped

    forget_clients()
    idx = kv_index(root, lease=0.5)
    head = idx.engine.store.heads()[SID]
    assert idx.engine.source_text(SID) == V2 and head.state == "complete"
    mine = ids_of(idx.engine.manifest, SID, head.content_hash, 0, head.n_chunks)
    found = idx.engine.vectors.present(mine)
    assert len(found) == head.n_chunks and {m["content_hash"] for m in found.values()} == {head.content_hash}
    v2_chunk, v1_chunk = idx.engine.get_chunks([chunk_id(SID, 0)])[0].page_content, V1[:60]
    assert chunk_id(SID, 0) in as_engine(idx).dense_ids(v2_chunk, 3, search_type="similarity")
    assert "Version one" not in _texts(idx.similarity_search(v1_chunk, k=4))
    # the late vectors nearest a query do not crowd the served ones out of the top k
    late_text = plan_source(doc(V1), idx.engine.config).chunk_text(0)  # the nearest vector is A's late one
    assert len(as_engine(idx).dense_ids(late_text, 2, search_type="similarity")) == 2
    assert len(vector_ids(idx)) > len(referenced_vector_ids(idx))  # A's late vectors are held ...

    status = idx.engine.status()
    assert not status.healthy and any("no source references" in p for p in status.vector_problems)
    idx.engine.repair()  # ... and plain repair deletes them
    assert idx.engine.status().healthy and idx.engine.status(deep=True).healthy
    assert vector_ids(idx) == referenced_vector_ids(idx)

    clean = kv_index(tmp_path / "clean", lease=0.5)
    clean.add_texts([OTHER], [{"source": "other.txt"}])
    clean.engine.index_documents([doc(V2)])
    assert vector_ids(idx) == vector_ids(clean)
    assert idx.similarity_search(V2[:80], k=3) == clean.similarity_search(V2[:80], k=3)


def _to_legacy(path):
    """Rewrite an index as one written before versioned vector ids: no ``vector_ids`` in
    its manifest, every vector under the id of its chunk id alone."""
    idx = SlidingWindowIndex(path, embedding=fake(), show_progress=False)
    engine = as_engine(idx)
    with engine.writing():
        manifest = dict(engine.store.get_meta())
        del manifest["vector_ids"]
        engine.store.set_meta(manifest)
        heads = engine.store.heads()
        records = engine.store.get_many(list(heads))
        engine.vectors.delete(vector_ids(idx))
        for sid, rec in records.items():
            engine.vectors.add(chunk_documents(rec, idx.engine.index_id),
                               [vector_id(chunk_id(sid, i)) for i in range(rec.n_chunks)])
    idx.close()


def test_an_index_with_legacy_vector_ids_opens_searches_and_updates(tmp_path):
    path = tmp_path / "idx"
    first = SlidingWindowIndex(path, embedding=fake(), show_progress=False)
    assert vector_id_scheme(first.engine.manifest) == "v2"
    first.add_documents([doc(V1), Document(page_content=OTHER, metadata={"source": "other.txt"})])
    first.close()
    _to_legacy(path)

    forget_clients()
    idx = SlidingWindowIndex(path, embedding=fake(), show_progress=False)
    assert vector_id_scheme(idx.engine.manifest) == "legacy"
    assert idx.engine.status().healthy and idx.engine.status(deep=True).healthy
    assert "Version one" in _texts(idx.similarity_search(V1[:60], k=2))

    idx.add_documents([doc(V2)])  # replaces v1: its legacy-id vectors go, v2's come under legacy ids
    head = idx.engine.store.heads()[SID]
    legacy = sorted(vector_id(chunk_id(sid, i)) for sid, h in idx.engine.store.heads().items() for i in range(h.n_chunks))
    assert vector_ids(idx) == legacy == referenced_vector_ids(idx)
    assert {m["content_hash"] for m in idx.engine.vectors.present(legacy).values() if m["source_id"] == SID} == \
        {head.content_hash}
    assert "Version one" not in _texts(idx.similarity_search(V1[:60], k=4))
    assert idx.engine.status(deep=True).healthy and vector_id_scheme(idx.engine.manifest) == "legacy"
    idx.close()


def _memory_index():
    from langchain_core.stores import InMemoryByteStore
    from langchain_core.vectorstores import InMemoryVectorStore

    from swrag_integrations.stores.sources import KVSourceStore
    from swrag_integrations.langchain.vectorstore import PrecomputedEmbeddings

    return SlidingWindowIndex(vectorstore=InMemoryVectorStore(PrecomputedEmbeddings(fake())),
                              source_store=KVSourceStore(InMemoryByteStore()), show_progress=False)


@pytest.mark.parametrize("store", ["chroma", "memory", MILVUS])
def test_unreferenced_vectors_are_reported_and_deleted_by_a_plain_repair(tmp_path, store):
    """Vectors under ids of a version no record holds (what a late write leaves), in each
    kind of vector storage (Chroma, a LangChain VectorStore, Milvus): never served,
    reported by status(), deleted by repair()."""
    idx = _memory_index() if store == "memory" else mk(tmp_path / "idx", store)
    idx.add_documents([doc(V2)])
    engine = as_engine(idx)
    head = engine.store.heads()[SID]
    before = sorted(engine.vectors.present(ids_of(engine.manifest, SID, head.content_hash, 0, head.n_chunks)))
    old = plan_source(doc(V1), idx.engine.config)
    engine.vectors.add(chunk_documents(old, idx.engine.index_id), ids_of(engine.manifest, SID, old.content_hash, 0, old.n_chunks))
    assert engine.vectors.count() == head.n_chunks + old.n_chunks  # nothing of v2 was overwritten
    assert "Version one" not in _texts(idx.similarity_search(old.chunk_text(0), k=3))
    status = idx.engine.status()
    assert not status.healthy and any("no source references" in p for p in status.vector_problems)
    idx.engine.repair()
    assert idx.engine.status().healthy and engine.vectors.count() == head.n_chunks
    assert sorted(engine.vectors.present(before)) == before


def test_an_unknown_vector_id_scheme_is_refused(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=fake(), show_progress=False)
    engine = as_engine(idx)
    with engine.writing():
        engine.store.set_meta(dict(engine.store.get_meta(), vector_ids="v9"))
    idx.close()
    forget_clients()
    with pytest.raises(ValueError, match="vector_ids='v9'"):
        SlidingWindowIndex(tmp_path / "idx", embedding=fake(), show_progress=False)
