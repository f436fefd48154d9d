"""A write checks for sources an interrupted writer left (``store.unfinished()``) without
listing every source of the index: that scan grew with the index (16 ms of a 250 ms add at
4.5k sources / 1M chunks, benchmarks/bench_growth.py)."""

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.stores import InMemoryByteStore

import pytest

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.records import plan_source
from swrag_integrations.engine.config import IndexConfig
from swrag_integrations.stores.sources import KVSourceStore, SqliteSourceStore


def _records(states: dict[str, str]):
    cfg = IndexConfig.resolve()
    out = []
    for name, state in states.items():
        rec = plan_source(Document(page_content=f"{name} text. " * 20, metadata={"source": name}), cfg)
        out.append((rec, state))
    return out


@pytest.mark.parametrize("kind", ["sqlite", "kv"])
def test_unfinished_lists_exactly_the_pending_and_deleting_sources(tmp_path, kind):
    store = SqliteSourceStore(tmp_path / "s.sqlite3") if kind == "sqlite" else KVSourceStore(InMemoryByteStore())
    recs = _records({"a.txt": "complete", "b.txt": "pending", "c.txt": "deleting", "d.txt": "complete"})
    store.put([rec for rec, _ in recs])
    for rec, state in recs:
        if state != "pending":
            store.set_state([rec.source_id], state, id_span=rec.n_chunks)
    expected = {rec.source_id: state for rec, state in recs if state != "complete"}
    assert {sid: h.state for sid, h in store.unfinished().items()} == expected
    assert store.unfinished() == {sid: h for sid, h in store.heads().items() if sid in expected}


def test_a_write_does_not_list_every_source(tmp_path, monkeypatch):
    idx = SlidingWindowIndex(tmp_path, embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    first = idx.add_documents([Document(page_content=f"Document {i} about harbours. " * 10,
                                        metadata={"source": f"{i}.txt"}) for i in range(5)])
    listed = []
    real = idx.engine.store.heads
    monkeypatch.setattr(idx.engine.store, "heads", lambda sids=None: listed.append(sids) or real(sids))
    new = idx.add_documents([Document(page_content="A new one about lighthouses. " * 10, metadata={"source": "new.txt"})])
    idx.delete(first[:1])
    assert None not in listed, "a write listed every source of the index"
    assert sorted(idx.engine.source_ids()) == sorted(first[1:] + new)
