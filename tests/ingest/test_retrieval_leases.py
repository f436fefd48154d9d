"""Reliability, round 3: fenced writer leases, change-log-checked record caches, linear
writes of large documents (issue: reliability). Helpers come from test_retrieval_reliability."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest
from langchain_core.documents import Document

from swrag_integrations.stores.sources import KVSourceStore
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.records import plan_source
from swrag_integrations.engine.ids import source_id_for
from swrag_integrations.stores.sources import LeaseLostError, LockTimeout
from test_retrieval_reliability import _run, fake, forget_clients, mk
from swrag_integrations.langchain.search import CJKBM25Retriever

HERE = Path(__file__).parent  # this room; its parent (tests/) holds the shared helpers
V1 = "Version one says the lighthouse keeper feeds ravens. " * 12
V2 = "Version two says the harbour master counts pelicans. " * 12
SID = source_id_for(Document(page_content="", metadata={"source": "doc.txt"}))


def doc(text):
    return Document(page_content=text, metadata={"source": "doc.txt"})


def file_store(path):
    from langchain_classic.storage import LocalFileStore

    return LocalFileStore(str(path))


def kv_index(root, lease, **kw):
    """An index whose sources live in a LocalFileStore (a lease, not a file lock) and
    whose vectors live in a local Chroma folder: usable from several processes."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(Path(root) / "chroma"), settings=Settings(anonymized_telemetry=False))
    store = KVSourceStore(file_store(Path(root) / "sources"), lease_seconds=lease)
    return SlidingWindowIndex(client=client, source_store=store, embedding=fake(), show_progress=False,
                              batch_size=8, **kw)


def vector_hashes(idx, sid):
    got = idx.engine.vectors.collection.get(where={"source_id": sid}, include=["metadatas"])
    return {m["content_hash"] for m in got["metadatas"]}


# ----------------------------------------------------------------- leases (unit)


def test_the_lease_renews_itself_while_held(tmp_path):
    """Held (e.g. while a large document is cut) for 3 leases: nobody else gets it."""
    # a lease of 3 s renewed by a thread: generous on a loaded machine (a renewal late by a
    # whole lease would let the other writer in)
    holder = KVSourceStore(file_store(tmp_path), lease_seconds=3.0)
    other = KVSourceStore(file_store(tmp_path), lease_seconds=3.0)
    with holder.writer_lock(10):
        with pytest.raises(LockTimeout, match="holds the index's lease"):
            with other.writer_lock(9.5):
                pass
        holder.check_writer()  # still ours
    with other.writer_lock(9.5):  # released: the next writer gets it at once, one epoch later
        assert other._read_lease()["epoch"] == holder._read_lease()["epoch"] == 2


def test_a_writer_whose_lease_was_taken_writes_nothing_more(tmp_path):
    a = KVSourceStore(file_store(tmp_path), lease_seconds=0.5)
    b = KVSourceStore(file_store(tmp_path), lease_seconds=0.5)
    cfg = mk(tmp_path / "cfg").engine.config
    rec_a, rec_b = plan_source(doc(V1), cfg), plan_source(doc(V2), cfg)
    with a.writer_lock(10):
        a._lease.stop.set()  # a stall: the renewal thread stops, as in a suspended process
        a._lease.thread.join()
        with b.writer_lock(10):  # waits for the lease to expire, then takes it
            b.put([rec_b])
        with pytest.raises(LeaseLostError, match="another writer took it"):
            a.put([rec_a])
        for write in (lambda: a.set_state([SID], "complete"), lambda: a.remove([SID]), a.check_writer,
                      lambda: a.put_blob("x", b"1"), lambda: a.set_meta({})):
            with pytest.raises(LeaseLostError):
                write()
    assert b.get_many([SID])[SID].text == V2 and b.heads()[SID].state == "pending"
    with b.writer_lock(1):  # the lost lease was not released by its old holder: b's epoch stands
        pass


def test_two_threads_of_one_handle_do_not_share_the_lease(tmp_path):
    store = KVSourceStore(file_store(tmp_path), lease_seconds=5.0)
    held, done = threading.Event(), threading.Event()

    def hold():
        with store.writer_lock(10):
            held.set()
            done.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(LockTimeout):
            with store.writer_lock(0.5):
                pass
    finally:
        done.set()
        thread.join()
    with store.writer_lock(1):  # free again
        store.check_writer()


def test_the_cli_stops_with_exit_3_when_its_lease_is_taken(tmp_path, capsys, monkeypatch):
    """`swrag index` over a lease-based source store: its lease is lost while it embeds
    (its renewal stops, as in a stalled process, and another writer takes the index), so
    the fence before the vector write raises LeaseLostError: one line on stderr, exit 3,
    no traceback, the source never marked complete, and the next write finishes what it left pending."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    import swrag_integrations.embeddings.minilm as embeddings
    import swrag_integrations.engine.engine as engine
    from swrag_integrations.cli import main as cli_main

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "doc.txt").write_text(V1, encoding="utf-8")
    stores: list[KVSourceStore] = []

    def source_store(source_store, root, client, own_storage, collection_name, server):
        stores.append(KVSourceStore(file_store(root / "kv-sources"), lease_seconds=0.5))
        return stores[-1]

    class Stalling(DeterministicFakeEmbedding):
        def embed_documents(self, texts):
            lease = stores[0]._lease
            if lease is not None and not lease.stop.is_set():  # once, while the CLI's writer holds the lease
                lease.stop.set()  # its renewal stops, as in a suspended process
                lease.thread.join()
                other = KVSourceStore(file_store(tmp_path / "store" / "kv-sources"), lease_seconds=0.5)
                with other.writer_lock(30):  # waits for the lease to expire, then takes it
                    pass
            return super().embed_documents(texts)

    monkeypatch.setattr(engine, "_open_source_store", source_store)
    monkeypatch.setattr(embeddings, "default_embeddings", lambda backend=None: Stalling(size=16))
    code = cli_main(["index", str(folder), "--persist-dir", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 3, err
    lines = [line for line in err.splitlines() if line.startswith("swrag:")]
    assert len(lines) == 1 and "another writer took it" in lines[0], err
    assert "Traceback" not in err and "unexpected" not in err
    after = stores[0]
    assert [h.state for h in after.heads().values()] == ["pending"]  # never marked complete ...
    monkeypatch.setattr(embeddings, "default_embeddings", lambda backend=None: DeterministicFakeEmbedding(size=16))
    assert cli_main(["index", str(folder), "--persist-dir", str(tmp_path / "store")]) == 0
    assert [h.state for h in stores[-1].heads().values()] == ["complete"]  # ... until the next write


# -------------------------------------------------- leases (separate processes)


KV_WRITER = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from langchain_core.embeddings import DeterministicFakeEmbedding
    sys.path[:0] = [sys.argv[3], os.path.dirname(sys.argv[3])]
    import test_retrieval_leases as t
    import swrag_integrations.ingest.writer as writer

    root, mode = Path(sys.argv[1]), sys.argv[2]
    marker = root / "marker"

    class Stalling(DeterministicFakeEmbedding):
        def embed_documents(self, texts):
            if mode == "stall" and not marker.exists():
                marker.write_text("embedding")
                os.kill(os.getpid(), signal.SIGSTOP)  # frozen until the test sends SIGCONT
            return super().embed_documents(texts)

    if mode == "slowcut":
        cut = writer.plan_checked
        def slow_cut(doc, *args, **kwargs):
            marker.write_text("cutting")
            time.sleep(7.0)  # more than twice the lease
            return cut(doc, *args, **kwargs)
        writer.plan_checked = slow_cut
    t.fake = lambda size=16: Stalling(size=size)
    idx = t.kv_index(root, lease=float(sys.argv[4]))
    idx.index_documents([t.doc(t.V1)])
    print("done")
""")


def _wait_for(path, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the child never reached its stall point"
        time.sleep(0.05)


def _assert_v2_served(tmp_path, lease: float) -> None:
    """A fresh handle serves v2 whole: complete, its vectors all of v2's text, healthy."""
    forget_clients()
    after = kv_index(tmp_path, lease=lease)
    head = after.engine.store.heads()[SID]
    assert after.engine.source_text(SID) == V2 and head.state == "complete"
    assert vector_hashes(after, SID) == {head.content_hash}
    assert after.engine.status(deep=True).healthy


@pytest.mark.integration
def test_a_stalled_writer_does_not_overwrite_the_next_writers_vectors(tmp_path):
    """Writer A freezes (SIGSTOP) while embedding, its lease expires, B writes v2; A resumes
    and must stop with an error instead of writing v1's vectors over v2's ids."""
    kv_index(tmp_path, lease=2.0).add_texts(["An unrelated note."], [{"source": "other.txt"}])
    proc = _run(KV_WRITER, tmp_path, "stall", HERE, 2.0)
    try:
        _wait_for(tmp_path / "marker", proc)
        b = kv_index(tmp_path, lease=2.0)  # waits for A's lease to expire
        b.engine.index_documents([doc(V2)])  # completes A's pending v1 first, then writes v2
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "LeaseLostError" in err and "another writer took it" in err, err[-3000:]
    _assert_v2_served(tmp_path, lease=2.0)


@pytest.mark.integration
def test_a_slow_cut_keeps_the_lease(tmp_path):
    """Cutting a document for longer than the lease: the lease renews itself, so a second
    writer waits for the first one instead of writing under it (the last writer wins)."""
    kv_index(tmp_path, lease=3.0).add_texts(["An unrelated note."], [{"source": "other.txt"}])
    proc = _run(KV_WRITER, tmp_path, "slowcut", HERE, 3.0)
    _wait_for(tmp_path / "marker", proc)
    b = kv_index(tmp_path, lease=3.0)  # waits until A is done (before: took the lock after one lease)
    b.engine.index_documents([doc(V2)])  # so B's version is the last one written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    _assert_v2_served(tmp_path, lease=3.0)


# ------------------------------------------------ long-lived handles (processes)


REPLACER = textwrap.dedent("""
    import os, sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    sys.path[:0] = [sys.argv[3], os.path.dirname(sys.argv[3])]
    import test_retrieval_leases as t
    from swrag_integrations.langchain.index import SlidingWindowIndex

    class Dying(DeterministicFakeEmbedding):
        def embed_documents(self, texts):
            if sys.argv[2] == "die":
                os.kill(os.getpid(), 9)  # killed with the new version pending
            return super().embed_documents(texts)

    idx = SlidingWindowIndex(sys.argv[1], embedding=Dying(size=16), show_progress=False)
    idx.index_documents([t.doc(t.V2)])
""")


@pytest.mark.integration
def test_a_long_lived_handle_does_not_revert_a_dead_writers_pending_update(tmp_path):
    a = mk(tmp_path)
    a.engine.index_documents([doc(V1)])
    assert a.engine.source_text(SID) == V1  # A has read doc.txt (its record is cached)
    proc = _run(REPLACER, tmp_path, "die", HERE)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert a.engine.store.heads()[SID].state == "pending"
    a.add_texts(["An unrelated note about copper."], [{"source": "other.txt"}])  # recovers the pending source
    head = a.engine.store.heads()[SID]
    assert head.state == "complete" and a.engine.source_text(SID) == V2
    assert vector_hashes(a, SID) == {head.content_hash}
    assert mk(tmp_path).engine.source_text(SID) == V2 and a.engine.status(deep=True).healthy


@pytest.mark.integration
def test_a_long_lived_reader_sees_the_replaced_text(tmp_path):
    a = mk(tmp_path)
    a.engine.index_documents([doc(V1)])
    retriever = a.as_retriever(k=2)
    assert "ravens" in retriever.invoke("lighthouse keeper ravens")[0].page_content
    assert a.engine.source_text(SID) == V1 and CJKBM25Retriever.from_index(a, 1).invoke("ravens")
    proc = _run(REPLACER, tmp_path, "replace", HERE)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert a.engine.source_text(SID) == V2
    assert a.get_by_ids([SID])[0].page_content == V2
    assert CJKBM25Retriever.from_index(a, 1).invoke("ravens") == []  # BM25 caught up with the store's text, not the cache's
    assert [d.page_content for d in CJKBM25Retriever.from_index(a, 1).invoke("pelicans")] and \
        "pelicans" in CJKBM25Retriever.from_index(a, 1).invoke("pelicans")[0].page_content
    hits = retriever.invoke("harbour master pelicans")
    assert hits and all("ravens" not in h.page_content for h in hits) and "pelicans" in hits[0].page_content


# ------------------------------------------------------------- large documents


def test_writing_one_document_computes_each_vector_id_once(tmp_path, monkeypatch):
    """Vector ids of a batch are computed for that batch only (they were recomputed from
    chunk 0 for every batch: quadratic in the chunks of one document)."""
    import swrag_integrations.engine.ids as ids

    calls = [0]
    real = ids.vector_id

    def counting(chunk, version=None):
        calls[0] += 1
        return real(chunk, version)

    monkeypatch.setattr(ids, "vector_id", counting)
    idx = mk(tmp_path, batch_size=16)
    text = " ".join(f"word{i % 97}" for i in range(6000))
    n = idx.engine.index_documents([doc(text)])["chunks"]
    assert n > 100
    assert calls[0] == n  # one id per chunk; quadratic would be about n * n / 32


def test_cutting_encodes_a_large_document_in_bounded_batches(monkeypatch):
    """Token counts of a document's pieces are computed a block at a time (all pieces'
    token lists at once took about 2 KB per chunk: 1.9 GB for a 50 MB file)."""
    from swrag_integrations.engine.config import IndexConfig
    from swrag_integrations.core.windows import get_encoding

    cfg = IndexConfig.resolve()
    encoding = type(get_encoding(cfg.encoding_name))
    real = encoding.encode_ordinary_batch
    sizes = []

    def recording(self, texts, *args, **kwargs):
        sizes.append(len(texts))
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(encoding, "encode_ordinary_batch", recording)
    rec = plan_source(doc(" ".join(f"Sentence {i} is short." for i in range(12000))), cfg)
    assert rec.n_chunks > 1000 and sum(sizes) >= 12000
    assert max(sizes) <= 4096


def test_lazy_rows_look_only_at_the_parts_a_slice_needs():
    """Reading a record's vectors slice by slice is linear in its parts (each slice used to
    scan every part: quadratic for a document of many batches)."""
    import numpy as np

    from swrag_integrations.ingest.workers import LazyRows

    looked = [0]

    class Part:
        def __init__(self, lo, hi):
            self.lo, self._hi, self.done = lo, hi, False

        @property
        def hi(self):
            looked[0] += 1
            return self._hi

    class Queue:
        def result(self, part):
            return np.zeros((part._hi - part.lo, 2), dtype=np.float32)

        def release(self, part):
            pass

    parts = [Part(lo, lo + 4) for lo in range(0, 4000, 4)]
    rows = LazyRows(Queue(), parts)
    for lo in range(0, 4000, 4):
        assert rows[lo:lo + 4].shape == (4, 2)
    assert looked[0] < 10 * len(parts)  # scanning every part for every slice: about len(parts) ** 2


def test_status_finds_vectors_of_another_version_under_current_ids(tmp_path):
    """What an unfenced stale writer left (v1's vectors under v2's chunk ids) was reported
    healthy by `swrag status` (only --deep looked); now a sample is checked."""
    from swrag_integrations.engine.ids import vector_ids
    from swrag_integrations.ingest.writer import chunk_documents

    idx = mk(tmp_path)
    idx.engine.index_documents([doc(V2)])
    assert idx.engine.status().healthy
    old = plan_source(doc(V1), idx.engine.config)
    n = min(old.n_chunks, idx.engine.store.heads()[SID].n_chunks)
    current = vector_ids(idx.engine.manifest, SID, idx.engine.store.heads()[SID].content_hash, 0, n)  # v1's vectors under v2's ids
    idx.engine.vectors.add(chunk_documents(old, idx.engine.index_id, 0, n), current)
    status = idx.engine.status()
    assert not status.healthy and any("another version" in p for p in status.vector_problems)
    idx.engine.repair(deep=True)
    assert idx.engine.status().healthy and vector_hashes(idx, SID) == {idx.engine.store.heads()[SID].content_hash}


def test_recovery_reads_the_store_not_the_cache_after_a_crash_before_the_log(tmp_path):
    """A key-value writer that died after writing v2's record and head but before its
    change-log entry leaves no trace for a cache to see: recovery must still complete v2."""
    from langchain_core.stores import InMemoryByteStore
    from langchain_core.vectorstores import InMemoryVectorStore

    from swrag_integrations.langchain.vectorstore import PrecomputedEmbeddings
    from swrag_integrations.stores.sources import RecordHead

    store = KVSourceStore(InMemoryByteStore())
    a = SlidingWindowIndex(vectorstore=InMemoryVectorStore(PrecomputedEmbeddings(fake())), source_store=store,
                           show_progress=False)
    a.engine.index_documents([doc(V1)])
    assert a.engine.source_text(SID) == V1  # cached
    new = plan_source(doc(V2), a.engine.config)
    store.store.mset([(f"src/{SID}", new.to_bytes())])  # the dead writer's record and head, no log entry
    store.store.mset([(f"head/{SID}", store._head_bytes(RecordHead(new.content_hash, "pending", new.id_span,
                                                                    new.n_chunks, new.origin)))])
    a.add_texts(["An unrelated note about copper."], [{"source": "other.txt"}])
    assert a.engine.store.heads()[SID] == RecordHead(new.content_hash, "complete", new.n_chunks, new.n_chunks, "doc.txt")
    assert a.engine.source_text(SID) == V2
