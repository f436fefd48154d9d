"""Reliability of the index: many writers, crashes, damage, stale data (issue: reliability)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from stores import POSTGRES, STORES, store_args, store_kwargs, vector_ids
from swrag_integrations.cli import main as cli_main
from swrag_integrations.engine.engine import IndexDamagedError, IndexMismatchError
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.langchain.vectorstore import default_chroma
from swrag_integrations.stores.sources import SourceStoreError
from swrag_integrations.langchain.search import CJKBM25Retriever

ROOT = Path(__file__).resolve().parents[2]


def fake(size=16):
    return DeterministicFakeEmbedding(size=size)


def mk(path, store="chroma", **kw):
    return SlidingWindowIndex(path, embedding=fake(kw.pop("size", 16)), show_progress=False, **store_kwargs(store),
                              **kw)


def corpus(n=12, words=160):
    rng = random.Random(n)
    vocab = [f"w{i}" for i in range(400)]
    return [Document(page_content=f"Doc{d} " + " ".join(rng.choice(vocab) for _ in range(words)) + f". End of doc{d}.",
                     metadata={"source": f"doc{d}.txt"}) for d in range(n)]


def forget_clients():
    """Chroma keeps one client per path in the process: drop them, as a new process would."""
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()


def snapshot(idx):
    """Everything observable of an index: sources, states, vector ids and BM25 ids (a
    store's own keyword search covers its vectors)."""
    heads = idx.store.heads()
    vectors = vector_ids(idx)
    keyword = sorted(idx.keyword.bm25.ids) if hasattr(idx.keyword, "bm25") else vectors
    return ({sid: (h.content_hash, h.state, h.n_chunks) for sid, h in heads.items()}, vectors, keyword)


# ------------------------------------------------------------------ many writers


@pytest.mark.parametrize("store", [*STORES, POSTGRES])
def test_two_writers_keep_each_others_documents(tmp_path, store):
    a, b = mk(tmp_path, store), mk(tmp_path, store)
    a.add_texts(["red lighthouse"], [{"source": "a.txt"}])
    b.add_texts(["Zebras graze near the quarry."], [{"source": "b.txt"}])
    a.add_texts(["Copper exported"], [{"source": "c.txt"}])
    again = mk(tmp_path, store)
    assert len(again.engine.source_ids()) == 3 and len(again.engine.keyword) == again.engine.count("small") == 3
    assert [d.metadata["source"] for d in CJKBM25Retriever.from_index(again, 2).invoke("zebras quarry")] == ["b.txt"]
    # the reader that was open all along sees the other writer's document too (it catches up)
    assert [d.metadata["source"] for d in CJKBM25Retriever.from_index(a, 2).invoke("zebras quarry")] == ["b.txt"]
    assert again.engine.index_documents([Document(page_content="Zebras graze near the quarry.",
                                           metadata={"source": "b.txt"})])["unchanged"] == 1


WRITER = textwrap.dedent("""
    import sys
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from swrag_integrations.langchain.index import SlidingWindowIndex
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    idx = SlidingWindowIndex(path, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, batch_size=8)
    for i in range(n):
        idx.add_texts([f"writer {tag} document {i} mentions zz{tag}{i} " * 20], [{"source": f"{tag}{i}.txt"}])
    print("done")
""")


def _run(script, *args, env=None):
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


def test_concurrent_first_time_writers_in_separate_processes(tmp_path):
    path = tmp_path / "fresh"  # does not exist yet: both create it
    procs = [_run(WRITER, path, tag, 6) for tag in ("a", "b")]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    idx = mk(path)
    assert len(idx.engine.source_ids()) == 12
    assert len(idx.engine.keyword) == idx.engine.count("small") == idx.engine.count(None)
    for tag in ("a", "b"):
        hits = CJKBM25Retriever.from_index(idx, 1).invoke(f"zz{tag}5")
        assert hits and hits[0].metadata["source"] == f"{tag}5.txt"
    assert idx.engine.status().healthy


# ------------------------------------------------------------------ stale data


def test_emptied_and_deleted_files_and_shrunk_csv_are_forgotten(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "keep.txt").write_text("Kestrels nest on the north tower. " * 10)
    (folder / "empty.txt").write_text("Ospreys fish in the bay. " * 10)
    (folder / "gone.txt").write_text("Herons wade in the marsh. " * 10)
    (folder / "rows.csv").write_text("city,export\n" + "".join(f"City{i},good{i}\n" for i in range(5)))
    idx = mk(tmp_path / "store")
    assert idx.add_files(folder)["added"] == 8
    (folder / "empty.txt").write_text("")
    (folder / "gone.txt").unlink()
    (folder / "rows.csv").write_text("city,export\nCity0,good0\nCity1,good1\n")
    report = idx.add_files(folder)
    assert report["removed"] == 5 and report["unchanged"] == 3
    assert CJKBM25Retriever.from_index(idx, 3).invoke("ospreys") == [] and CJKBM25Retriever.from_index(idx, 3).invoke("herons") == []
    assert CJKBM25Retriever.from_index(idx, 3).invoke("City3") == []
    assert not any("Ospreys" in d.page_content for d in idx.as_retriever(weights=(1.0, 0.0)).invoke("ospreys bay"))
    assert len(idx.engine.source_ids()) == 3


def test_a_file_that_can_no_longer_be_read_loses_its_old_text(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Albatross glide over the southern ocean. " * 8)
    idx = mk(tmp_path / "store")
    idx.add_files(folder)
    (folder / "a.txt").write_bytes("café ça".encode("latin-1") * 20)  # not UTF-8 any more
    with pytest.warns(UserWarning, match="a.txt"):
        report = idx.add_files(folder)
    assert report["removed"] == 1 and report.skipped_files
    assert idx.engine.source_ids() == []


@pytest.mark.parametrize("store", [*STORES, POSTGRES])
def test_incomplete_sources_are_listed_never_served_and_completed(tmp_path, store):
    idx = mk(tmp_path, store)
    idx.engine.index_documents(corpus(2))
    # simulate a writer that died after writing a source's record (before its vectors)
    from swrag_integrations.engine.records import plan_source

    rec = plan_source(Document(page_content="Pelicans dive for sardines. " * 12, metadata={"source": "p.txt"}),
                      idx.engine.config)
    idx.engine.store.put([rec])
    # ... and after its vectors (the keyword search of a store holding them must not serve them either)
    from swrag_integrations.stores.storage import PlainDocument
    from swrag_integrations.engine.ids import vector_ids as ids_of

    m = idx.engine.config.medium_size
    idx.engine.vectors.add([PlainDocument(rec.chunk_text(i), dict(rec.chunk_metadata(i, m), swrag_index=idx.engine.index_id))
                     for i in range(rec.n_chunks)], ids_of(idx.engine.manifest, rec.source_id, rec.content_hash, 0, rec.n_chunks))
    reader = mk(tmp_path, store)
    assert [i["state"] for i in reader.engine.status().incomplete] == ["pending"]
    assert CJKBM25Retriever.from_index(reader, 3).invoke("pelicans sardines") == []
    assert not any("Pelicans" in d.page_content for d in reader.as_retriever().invoke("pelicans sardines"))
    assert rec.source_id not in reader.engine.source_ids()
    assert cli_main(["status", "--persist-dir", str(tmp_path), *store_args(store)]) == 4
    reader.repair()
    assert reader.status().healthy and rec.source_id in reader.source_ids()
    assert reader.bm25_retriever(1).invoke("pelicans sardines")[0].metadata["source"] == "p.txt"


# -------------------------------------------------------------------- damage


@pytest.mark.parametrize("store", STORES)
def test_lost_vector_collection_is_detected_and_rebuilt_by_re_adding(tmp_path, store):
    docs = corpus(4)
    idx = mk(tmp_path, store)
    idx.engine.index_documents(docs)
    n = idx.engine.count("small")
    if store == "chroma":
        del idx
        forget_clients()
        shutil.rmtree(tmp_path / "chroma")
    else:
        idx.engine.vectors.client.drop_collection(idx.engine.vectors.collection_name)
    broken = mk(tmp_path, store)
    with pytest.raises(IndexDamagedError, match="swrag repair"):
        broken.as_retriever().invoke("w1 w2")
    assert not broken.engine.status().healthy
    report = broken.engine.index_documents(docs)  # re-adding repairs instead of "unchanged"
    assert report["repaired"] == 4 and report["unchanged"] == 0
    assert broken.engine.count(None) == n and broken.engine.status().healthy
    assert mk(tmp_path, store).as_retriever().invoke("w1 w2")


def test_damaged_search_structure_is_found_by_the_probe_and_repaired(tmp_path):
    idx = mk(tmp_path, batch_size=512)
    idx.engine.index_documents(corpus(30, words=1500))  # > 1000 vectors: Chroma persists its HNSW files
    assert idx.engine.count("small") > 1000
    del idx
    forget_clients()
    for segment in (tmp_path / "chroma").iterdir():
        if segment.is_dir():  # Chroma's HNSW files: the vectors stay in its SQLite log
            shutil.rmtree(segment)
    damaged = mk(tmp_path)
    problem = " ".join(damaged.engine.status().vector_problems)
    assert "find themselves" in problem
    with pytest.raises(IndexDamagedError):
        damaged.as_retriever().invoke("w5 w7")
    report = damaged.engine.repair()
    assert any("rebuilt" in n for n in report.notes)
    forget_clients()
    fixed = mk(tmp_path)
    assert fixed.engine.status().healthy and fixed.as_retriever().invoke("w5 w7")


def test_lost_source_store_is_an_error_not_an_empty_index(tmp_path, capsys):
    idx = mk(tmp_path)
    idx.engine.index_documents(corpus(2))
    store = tmp_path / "sources" / "swrag.sqlite3"
    del idx
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    with pytest.raises(IndexMismatchError, match="source texts are lost"):
        mk(tmp_path)
    for suffix in ("-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    store.write_bytes(b"")  # zeroed
    with pytest.raises(IndexMismatchError, match="vectors"):
        mk(tmp_path)
    store.write_bytes(b"this is not a database" * 100)
    with pytest.raises(SourceStoreError, match="not a readable SQLite"):
        mk(tmp_path)
    assert cli_main(["ask", "anything", "--persist-dir", str(tmp_path), "--retrieval-only"]) == 3
    assert "Traceback" not in capsys.readouterr().err


def test_another_embedding_gets_a_clear_error(tmp_path, capsys):
    idx = mk(tmp_path, size=32)
    idx.engine.index_documents(corpus(2))
    other = mk(tmp_path, size=8)
    with pytest.raises(IndexMismatchError, match="32-dimensional"):
        other.as_retriever().invoke("w1")
    with pytest.raises(IndexMismatchError, match="32-dimensional"):
        other.engine.index_documents(corpus(3))
    assert mk(tmp_path, size=32).engine.count("small") == idx.engine.count("small")  # nothing was lost
    # the CLI (bundled 384-d MiniLM) on an index built with 32-d vectors: a message, exit 2
    assert cli_main(["ask", "w1 w2", "--persist-dir", str(tmp_path), "--retrieval-only"]) == 2
    assert "32-dimensional" in capsys.readouterr().err


def test_vectors_of_another_index_are_refused(tmp_path):
    a = mk(tmp_path / "a")
    a.engine.index_documents(corpus(2))
    b = mk(tmp_path / "b")
    b.engine.index_documents(corpus(2))
    with pytest.raises(IndexMismatchError, match="another index"):
        SlidingWindowIndex(vectorstore=default_chroma(a.engine.vectors.client, a.engine.vectors.collection_name,
                                                      a.engine.vectors.precomputed),
                           source_store=b.engine.store, show_progress=False)
