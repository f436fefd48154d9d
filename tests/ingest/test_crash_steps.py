"""Crashes (kill -9) at each named step of a write: the next write finishes what the killed
writer left, and the index then equals a clean build. (Split from
test_retrieval_reliability.py, so that pytest-xdist's --dist loadfile can run these
writer-process tests and the rest of the reliability tests on different workers.)"""

import signal

import pytest
from langchain_core.documents import Document

from kill_child import POINTS as KILL_POINTS
from kill_child import corpus as versioned_corpus
from kill_child import differences, index_contents, open_index
from stores import MILVUS
from test_kill_loop import clean_build, forget_clients, run_child


@pytest.fixture(scope="module")
def clean_contents(tmp_path_factory):
    """``clean_build`` of version 1 per store, built once for the module: every kill point's
    test compares against the same clean build (the dicts are only read)."""
    built: dict[str, dict] = {}

    def contents(store: str) -> dict:
        if store not in built:
            built[store] = clean_build(tmp_path_factory.mktemp(f"clean-{store}"), store, 1)
            forget_clients()
        return built[store]

    return contents


# The named steps of a write (tests/kill_child.py): Milvus has no tantivy keyword index
MILVUS_POINTS = [p for p in KILL_POINTS if not p.startswith("keyword.")]


@pytest.mark.integration
@pytest.mark.parametrize("store, point", [("chroma", p) for p in KILL_POINTS]
                         + [pytest.param("milvus", p, marks=MILVUS.marks) for p in MILVUS_POINTS])
def test_a_writer_killed_at_each_write_step_is_completed_by_the_next_write(tmp_path, store, point, clean_contents):
    """kill -9 at every step of a write (in the embedding, inside and after the record's
    put, during the stale-vector delete, during and after the vector add, between the add
    and 'complete', inside 'complete', during a removal, during the tantivy commit and
    before its state is recorded): the kill must happen (exit -9); nothing half-written
    is served; the next write (of other documents) finishes it; and after rewriting the
    same documents the index holds what a clean build holds (records, chunk texts and
    offsets, vectors, keyword ids)."""
    want = clean_contents(store)
    path = tmp_path / "crashed"
    first = run_child(path, store, "write", 0)  # an earlier, finished write (version 0)
    assert first.returncode == 0, first.stderr[-3000:]
    killed = run_child(path, store, "write", 1, kill=f"{point}:1")  # replaces, removes and adds sources
    assert killed.returncode == -signal.SIGKILL, f"not killed at {point} (exit {killed.returncode}): " + \
        killed.stderr[-3000:]
    forget_clients()
    survivor = open_index(path, store)
    try:
        complete = {sid for sid, h in survivor.store.heads().items() if h.state == "complete"}
        assert set(survivor.source_ids()) == complete
        served = {cid.split(":")[0] for cid, _ in survivor.bm25_search("doc1 doc5 edition w1 w2 w3 w4 w5", k=500)}
        served |= {cid.split(":")[0] for cid in survivor.dense_ids("doc5 edition w7 w9", k=500,
                                                                  search_type="similarity")}
        assert served <= complete
        # a write of another document finishes what the dead one left
        survivor.index_documents([Document(page_content="An unrelated note. " * 30, metadata={"source": "other.txt"})])
        assert not survivor.status().incomplete
        survivor.index_documents(versioned_corpus(1), prune="all")
        problems = differences(index_contents(survivor), want)
        assert not problems, "\n".join(problems[:40])
    finally:
        survivor.close()
    assert not any(p.name.startswith((".swrag.tmp", ".swrag.old")) for p in path.rglob("*"))
