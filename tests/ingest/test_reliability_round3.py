"""Reliability, round 3: emptied CSVs, symlinked files, non-UTF-8 names, torn byte-store
values, a handle opened on an empty index, rejected configurations, a full disk."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from test_retrieval_reliability import mk  # noqa: E402
from swrag_integrations.langchain.search import CJKBM25Retriever

ROOT = Path(__file__).resolve().parents[2]


def sources(idx) -> set[str]:
    """The origins (files) the index serves."""
    return {h.origin for h in idx.engine.store.heads().values()}


# ------------------------------------------------------------ 4: emptied CSV


def _csv_folder(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "keep.txt").write_text("Kestrels nest on the north tower. " * 10)
    (folder / "rows.csv").write_text("city,export\n" + "".join(f"City{i},good{i}\n" for i in range(5)))
    return folder


@pytest.mark.parametrize("emptied", ["city,export\n", ""])
def test_a_csv_emptied_to_its_header_or_to_nothing_loses_its_rows(tmp_path, emptied):
    folder = _csv_folder(tmp_path)
    idx = mk(tmp_path / "store")
    assert idx.add_files(folder)["added"] == 6
    (folder / "rows.csv").write_text(emptied)
    report = idx.add_files(folder)
    assert report["removed"] == 5 and report["unchanged"] == 1
    assert CJKBM25Retriever.from_index(idx, 3).invoke("City3") == []
    assert sources(idx) == {str(folder / "keep.txt")}


def test_keep_missing_keeps_the_rows_of_an_emptied_csv(tmp_path):
    folder = _csv_folder(tmp_path)
    idx = mk(tmp_path / "store")
    idx.add_files(folder)
    (folder / "rows.csv").write_text("city,export\n")
    assert idx.add_files(folder, prune=False)["removed"] == 0
    assert len(idx.engine.source_ids()) == 6


@pytest.mark.integration
def test_a_csv_emptied_to_its_header_loses_its_rows_with_workers(tmp_path):
    folder = _csv_folder(tmp_path)
    idx = mk(tmp_path / "store")
    idx.add_files(folder)
    (folder / "rows.csv").write_text("city,export\n")
    report = idx.add_files(folder, workers=2)
    assert report["removed"] == 5 and report["unchanged"] == 1
    assert sources(idx) == {str(folder / "keep.txt")}


# ------------------------------------------------- 9: a rejected configuration


@pytest.mark.parametrize("retriever", [{"k": 0}, {"budget_tokens": -5}, {"k_child": 0}, {"weights": [1, 2, 3]}])
def test_a_rejected_config_is_not_recorded(tmp_path, capsys, fake_default_embeddings, retriever):
    import json

    from swrag_integrations.cli import main as cli_main
    from swrag_integrations.langchain.index import SlidingWindowIndex

    folder = _csv_folder(tmp_path)
    store = str(tmp_path / "store")
    assert cli_main(["index", str(folder), "--persist-dir", store]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"swrag_tuned_config": 1, "index": {}, "retriever": retriever}))
    ask = ["ask", "Which city exports good3?", "--persist-dir", store, "--retrieval-only"]
    capsys.readouterr()
    assert cli_main([*ask, "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("swrag: error:") and next(iter(retriever)) in err
    assert SlidingWindowIndex(store, show_progress=False).tuned_config is None  # nothing recorded
    assert cli_main(ask) == 0, capsys.readouterr().err
    assert "rows.csv" in capsys.readouterr().out


# ------------------------------------------------------------ 11: a full disk


def _full_disk_cases():
    import errno
    import sqlite3

    from chromadb.errors import InternalError

    return {
        "sqlite": sqlite3.OperationalError("database or disk is full"),
        "enospc": OSError(errno.ENOSPC, "No space left on device"),
        # what Chroma really raised on a full 3 MiB tmpfs: nothing says "disk" in it
        "chroma": InternalError("Error in compaction: Failed to apply logs to the metadata segment"),
    }


@pytest.mark.parametrize("case", ["sqlite", "enospc", "chroma"])
def test_a_full_disk_is_reported_as_such_with_exit_3(tmp_path, capsys, monkeypatch, fake_default_embeddings, case):
    import shutil

    from swrag_integrations.cli import main as cli_main
    from swrag_integrations.stores.sources import SqliteSourceStore

    folder = _csv_folder(tmp_path)
    error = _full_disk_cases()[case]

    def put(self, records):
        raise error

    monkeypatch.setattr(SqliteSourceStore, "put", put)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=300 * 1024))
    assert cli_main(["index", str(folder), "--persist-dir", str(tmp_path / "store")]) == 3
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("swrag:")]
    assert len(errors) == 1 and errors[0].startswith("swrag: error: no space left"), errors
    err = errors[0]
    assert str(tmp_path / "store") in err and "300 KiB free" in err and "unexpected" not in err


def test_a_chroma_internal_error_with_space_left_stays_unexpected(tmp_path, capsys, monkeypatch,
                                                                  fake_default_embeddings):
    import shutil

    from swrag_integrations.cli import main as cli_main
    from swrag_integrations.stores.sources import SqliteSourceStore

    def put(self, records):
        raise _full_disk_cases()["chroma"]

    monkeypatch.setattr(SqliteSourceStore, "put", put)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=50 << 30))
    assert cli_main(["index", str(_csv_folder(tmp_path)), "--persist-dir", str(tmp_path / "store")]) == 1
    assert "unexpected InternalError" in capsys.readouterr().err


def test_a_full_disk_while_opening_chroma_is_not_a_usage_error(tmp_path, capsys, monkeypatch):
    import chromadb

    from swrag_integrations.cli import main as cli_main

    def refuse(*args, **kwargs):
        raise chromadb.errors.InternalError("error returned from database: (code: 13) database or disk is full")

    monkeypatch.setattr(chromadb, "PersistentClient", refuse)
    assert cli_main(["status", "--persist-dir", str(tmp_path / "store")]) != 0
    assert cli_main(["index", str(_csv_folder(tmp_path)), "--persist-dir", str(tmp_path / "store")]) == 3
    assert "no space left" in capsys.readouterr().err


# --------------------------------------------- 6: non-UTF-8 names, lone surrogates


def test_a_file_with_a_non_utf8_name_is_skipped_and_named(tmp_path, capsys, fake_default_embeddings):
    from swrag_integrations.cli import main as cli_main
    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.ingest.files import list_files

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("Gannets dive for mackerel off the cliffs. " * 8)
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "w") as handle:  # a Latin-1 file name
        handle.write("Cafes serve coffee. " * 8)
    store = str(tmp_path / "store")
    assert cli_main(["index", str(folder), "--persist-dir", store]) == 0
    out, err = capsys.readouterr()
    assert "added: 1" in out and "skipped files: 1" in out
    assert "caf\\xe9.txt" in err and "not valid UTF-8" in err and "\udce9" not in err
    assert sources(SlidingWindowIndex(store, show_progress=False)) == {str(folder / "good.txt")}
    listing = list_files(folder)  # the parallel paths list with the same rules
    assert [s.reason for s in listing.skipped] == ["file name is not valid UTF-8"]


@pytest.mark.parametrize("kind", ["sqlite", "localfilestore"])
def test_text_with_a_lone_surrogate_is_refused_by_every_source_store(tmp_path, kind):
    from langchain_classic.storage import LocalFileStore
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    if kind == "sqlite":
        idx = mk(tmp_path)
    else:
        from langchain_core.embeddings import DeterministicFakeEmbedding

        from swrag_integrations.langchain.index import SlidingWindowIndex

        idx = SlidingWindowIndex(vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=16)),
                                 source_store=LocalFileStore(tmp_path / "sources"), show_progress=False)
    good = Document(page_content="Puffins nest in burrows. " * 6, metadata={"source": "good.txt"})
    bad = Document(page_content="Caf\udce9 au lait. " * 6, metadata={"source": "bad.txt"})
    with pytest.raises(ValueError, match=r"bad\.txt.*lone surrogate U\+DCE9 at offset 3"):
        idx.engine.index_documents([good, bad])
    assert idx.engine.source_ids() == []  # refused before anything was written
    bad_meta = Document(page_content="Fine text. " * 6, metadata={"source": "caf\udce9.txt"})
    with pytest.raises(ValueError, match=r"metadata.*lone surrogate"):
        idx.engine.index_documents([bad_meta])
    idx.engine.index_documents([good])
    assert len(idx.engine.source_ids()) == 1


# ------------------------------------------- 7: LocalFileStore values never torn


BYTE_STORE_WRITER = """
import sys
from pathlib import Path
from langchain_classic.storage import LocalFileStore
from swrag_integrations.stores.sources import KVSourceStore
store = KVSourceStore(LocalFileStore(sys.argv[1]))
Path(sys.argv[2]).write_text("started")
try:
    with store.writer_lock(timeout=60):  # writes are fenced: only the lease holder may write
        for i in range(int(sys.argv[3])):
            store.set_meta({"round": i, "padding": "x" * 300_000})  # the manifest, rewritten whole
            store.renew_lock()
finally:
    Path(sys.argv[2]).write_text("done")  # the reader stops even if this writer failed
"""

BYTE_STORE_READER = """
import json, sys, time
from pathlib import Path
from langchain_classic.storage import LocalFileStore
from swrag_integrations.stores.sources import KVSourceStore
store = KVSourceStore(LocalFileStore(sys.argv[1]))
flag = Path(sys.argv[2])
deadline = time.monotonic() + 600  # each wait has its own (generous) limit
while not flag.exists():
    if time.monotonic() > deadline:
        sys.exit("the writer never started")
    time.sleep(0.01)
reads = torn = 0
while flag.read_text() != "done":
    if time.monotonic() > deadline:
        sys.exit("the writer never finished")
    for read in (store.get_meta, store.generation, lambda: store._json("lock")):
        try:
            read()
        except json.JSONDecodeError:
            torn += 1
        reads += 1
print(reads, torn)
"""


@pytest.mark.integration
def test_local_file_store_values_are_never_read_half_written(tmp_path):
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [str(tmp_path / "sources"), str(tmp_path / "flag")]
    reader = subprocess.Popen([sys.executable, "-c", BYTE_STORE_READER, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    writer = subprocess.run([sys.executable, "-c", BYTE_STORE_WRITER, *args, "400"], capture_output=True,
                            text=True, env=env, timeout=600)
    out, err = reader.communicate(timeout=600)
    assert writer.returncode == 0 and reader.returncode == 0, writer.stderr[-2000:] + err[-2000:]
    reads, torn = map(int, out.split())
    assert reads > 0 and torn == 0, f"{torn} of {reads} reads saw a half-written value"
    leftovers = [p.name for p in (tmp_path / "sources").rglob("*") if p.name.startswith(".swrag.tmp")]
    assert leftovers == []


# ------------------------------- 8: a handle opened on an empty index, another writer


@pytest.mark.integration
def test_a_handle_opened_on_an_empty_index_sees_what_another_process_wrote(tmp_path):
    import subprocess

    from test_retrieval_reliability import WRITER

    reader = mk(tmp_path)
    assert reader.as_retriever().invoke("zzb1") == [] and reader.engine.status().healthy  # searched while empty
    # something else in this process queries the empty collection itself: the stale state
    assert reader.engine.vectors.collection.query(query_embeddings=[[0.1] * 16], n_results=1)["ids"] == [[]]
    writer = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "b", "3"], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert writer.returncode == 0, writer.stderr[-2000:]
    hits = reader.as_retriever(weights=(0.0, 1.0)).invoke("writer b document 1 mentions zzb1")  # dense only
    assert {d.metadata["source"] for d in hits} >= {"b1.txt"}
    assert reader.engine.status().healthy
    assert reader.engine.repair().repaired == 0
    fresh = mk(tmp_path)  # a new handle in the same process
    assert fresh.engine.status().healthy and fresh.as_retriever(weights=(0.0, 1.0)).invoke("zzb2")


@pytest.mark.integration
def test_a_long_lived_handle_searches_the_vectors_another_process_wrote(tmp_path):
    """An embedded Chroma collection keeps its HNSW index in the process: a handle that had
    searched a non-empty index missed another process's new vectors in dense search."""
    import subprocess

    from test_retrieval_reliability import WRITER

    reader = mk(tmp_path)
    reader.add_texts(["alpha beta gamma, the first document " * 20], [{"source": "a.txt"}])
    assert reader.engine.dense_ids("alpha", 5, search_type="similarity")  # searched: its HNSW index is loaded
    writer = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "b", "3"], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert writer.returncode == 0, writer.stderr[-2000:]
    found = {cid.split(":")[0] for cid in reader.engine.dense_ids("zzb1", 20, search_type="similarity")}
    assert len(found) == 4  # a.txt and the three documents of the other process
    hits = reader.as_retriever(weights=(0.0, 1.0), k=10).invoke("writer b document 1 mentions zzb1")  # dense only
    assert {d.metadata["source"] for d in hits} >= {"b0.txt", "b1.txt", "b2.txt"}


def test_searching_an_empty_chroma_collection_does_not_query_it(tmp_path, monkeypatch):
    """The trigger of the stale state: a nearest-neighbour query on an empty embedded
    Chroma collection (see SlidingWindowIndex._reopen_chroma)."""
    idx = mk(tmp_path)
    collection = type(idx.engine.vectors.collection)

    def refuse(self, *args, **kwargs):
        raise AssertionError("an empty collection was queried")

    monkeypatch.setattr(collection, "query", refuse)
    assert idx.as_retriever().invoke("anything") == [] and idx.engine.status().healthy


# ------------------------------------------------------ 5: files reached by symlinks


def _linked_folder(tmp_path):
    """docs/keep.txt, and docs/link.txt -> outside/target.txt (outside the folder)."""
    folder, outside = tmp_path / "docs", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "keep.txt").write_text("Kestrels nest on the north tower. " * 10)
    (outside / "target.txt").write_text("Terns return in April to the shingle spit. " * 10)
    (folder / "link.txt").symlink_to(outside / "target.txt")
    return folder, outside / "target.txt"


@pytest.mark.parametrize("delete_target", [True, False])
def test_a_deleted_symlink_forgets_its_file(tmp_path, delete_target):
    folder, target = _linked_folder(tmp_path)
    idx = mk(tmp_path / "store")
    idx.add_files(folder)
    assert sources(idx) == {str(folder / "keep.txt"), str(folder / "link.txt")}  # the path indexed, not the target
    (folder / "link.txt").unlink()
    if delete_target:
        target.unlink()
    report = idx.add_files(folder)
    assert report["removed"] == 1 and sources(idx) == {str(folder / "keep.txt")}
    assert CJKBM25Retriever.from_index(idx, 3).invoke("terns shingle") == []


def _legacy_add(idx, path: Path):
    """What add_files of earlier versions stored: the file under its resolved path."""
    from langchain_core.documents import Document

    real = os.path.realpath(path)
    idx.engine.index_documents([Document(page_content=Path(real).read_text(), metadata={"source": real})])


def test_a_legacy_source_stored_under_the_link_target_is_replaced_by_the_links_path(tmp_path):
    folder, target = _linked_folder(tmp_path)
    idx = mk(tmp_path / "store")
    for name in ("keep.txt", "link.txt"):
        _legacy_add(idx, folder / name)
    assert sources(idx) == {str(folder / "keep.txt"), str(target)}
    report = idx.add_files(folder)
    assert report["removed"] == 1 and report["added"] == 1
    assert sources(idx) == {str(folder / "keep.txt"), str(folder / "link.txt")}


def test_a_legacy_link_target_deleted_with_its_link_is_removed(tmp_path):
    folder, target = _linked_folder(tmp_path)
    idx = mk(tmp_path / "store")
    for name in ("keep.txt", "link.txt"):
        _legacy_add(idx, folder / name)
    (folder / "link.txt").unlink()
    target.unlink()
    report = idx.add_files(folder)
    assert report["removed"] == 1 and sources(idx) == {str(folder / "keep.txt")}


def test_a_legacy_index_of_a_folder_given_through_a_symlink_is_pruned(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    for name in ("keep.txt", "gone.txt"):
        (real / name).write_text(f"{name} holds puffin counts. " * 10)
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)
    idx = mk(tmp_path / "store")
    for name in ("keep.txt", "gone.txt"):
        _legacy_add(idx, alias / name)  # stored as real/...
    (real / "gone.txt").unlink()
    report = idx.add_files(alias)
    assert sources(idx) == {str(alias / "keep.txt")}
    assert report["removed"] == 2 and report["added"] == 1


def test_other_sources_outside_the_folder_are_kept_unless_their_file_is_gone(tmp_path):
    from langchain_core.documents import Document

    folder, _ = _linked_folder(tmp_path)
    idx = mk(tmp_path / "store")
    idx.add_files(folder)
    other = tmp_path / "other.txt"
    other.write_text("Gulls. " * 20)
    idx.add_files(other)
    idx.add_texts(["Named, not a file. " * 10], [{"source": "notes.txt"}])
    idx.engine.index_documents([Document(page_content="From a machine we cannot see. " * 10,
                                  metadata={"source": str(tmp_path / "no-such-folder" / "x.txt")})])
    assert idx.add_files(folder)["removed"] == 0  # other.txt exists; the others are not files of this machine
    other.unlink()
    assert idx.add_files(folder, prune=False)["removed"] == 0  # --keep-missing
    assert idx.add_files(folder)["removed"] == 1
    assert str(other) not in sources(idx) and len(sources(idx)) == 4


@pytest.mark.integration
def test_a_deleted_symlink_forgets_its_file_with_workers(tmp_path):
    folder, target = _linked_folder(tmp_path)
    idx = mk(tmp_path / "store")
    _legacy_add(idx, folder / "link.txt")  # an older index stored the target
    idx.add_files(folder, workers=2)
    assert sources(idx) == {str(folder / "keep.txt"), str(folder / "link.txt")}
    (folder / "link.txt").unlink()
    target.unlink()
    assert idx.add_files(folder, workers=2)["removed"] == 1
    assert sources(idx) == {str(folder / "keep.txt")}
