"""One door per query (issue 40, item 3): one search checks its query once, reads the
store's generation once (one snapshot for every step), fetches the sources' records
once and, on a store that keeps its vectors (Chroma), embeds no chunk again to
measure the relevance of keyword-only hits (it reads the stored vectors back).

Each face is counted by wrapping the functions it runs, after one warm-up search (the
first search of a handle also runs the self-retrieval probe, which reads the store).
"""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.engine import parents as parents
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.llama_index import index as llama_module
from swrag_integrations.langchain import retriever as retriever_module
from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

WORDS = ("harbour ship crane tide anchor bread flour yeast oven crust river bridge stone mill wheel "
         "lamp wick glass window frame").split()


def _docs() -> list[Document]:
    docs = []
    for d in range(12):
        words = [WORDS[(d * 7 + i * 3) % len(WORDS)] for i in range(160)]
        docs.append(Document(page_content=" ".join(words) + ".", metadata={"source": f"d{d}.txt", "n": d}))
    return docs


@pytest.fixture
def index(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    idx.add_documents(_docs())
    idx.as_retriever().invoke("harbour bread")  # warm-up: the probe of the first search
    return idx


class Counts(dict):
    def wrap(self, monkeypatch, owner, name, key=None):
        original = getattr(owner, name)
        key = key or name

        def counted(*args, **kwargs):
            self[key] = self.get(key, 0) + 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


def _count(monkeypatch, idx) -> Counts:
    counts = Counts()
    for module in (parents, retriever_module, llama_module):  # the faces imported it by name
        if hasattr(module, "check_query"):
            counts.wrap(monkeypatch, module, "check_query")
    counts.wrap(monkeypatch, idx.engine.store, "generation")
    counts.wrap(monkeypatch, idx.engine.store, "get_many")
    counts.wrap(monkeypatch, idx.engine.vectors, "embed_documents")
    counts.wrap(monkeypatch, idx.engine.vectors, "embed_query")
    return counts


def _search_figures(counts: Counts) -> dict[str, int]:
    """The figures of one search; the store's generation as the search reads it: each
    ``get_many`` of the SQLite store reads it once more itself, to check its record cache."""
    figures = {key: counts.get(key, 0) for key in ("check_query", "generation", "embed_query", "embed_documents")}
    figures["generation"] -= counts.get("get_many", 0)
    return figures


ONE_SEARCH = {"check_query": 1, "generation": 1, "embed_query": 1, "embed_documents": 0}


def test_retriever_invoke_is_one_door(index, monkeypatch):
    retriever = index.as_retriever(k_child=12)
    hits = retriever.find_chunks("harbour crane bread")
    assert any(h.metadata.get("dense_rank") is None for h in hits)  # keyword-only hits: measured, not embedded
    counts = _count(monkeypatch, index)
    docs = retriever.invoke("harbour crane bread")
    assert docs
    assert _search_figures(counts) == ONE_SEARCH
    # records: once, by the search; the windows' rows (chunk_rows) and the relevance use them
    assert counts["get_many"] == 1


def test_llama_index_retrieve_is_one_door(index, monkeypatch):
    retriever = WindowedLlamaIndexRetriever(index, k_child=12)
    counts = _count(monkeypatch, index)
    assert retriever.retrieve("harbour crane bread")
    assert _search_figures(counts) == ONE_SEARCH


SEARCHES = {"hybrid": {}, "bm25": {"weights": (1.0, 0.0)}, "dense": {"weights": (0.0, 1.0)},
            "medium": {"expand": "medium"}, "budget": {"budget_tokens": 120}, "filter": {"filter": {"n": {"$lt": 6}}}}


@pytest.mark.parametrize("face", ["langchain", "llama_index"])
@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_each_search_reads_records_and_generation_once(index, monkeypatch, face, search):
    """Every path (dense, BM25, hybrid; windows, medium chunks, a budget, a filter; both
    faces' retrievers) reads the sources' records once (one ``get_many``: the filter's
    check, the hits, the windows' rows, the medium ranges and the LlamaIndex node ids
    share it) and the store's generation once besides that read."""
    options = SEARCHES[search]
    if face == "langchain":
        retriever = index.as_retriever(k_child=12, **options)
        run = retriever.invoke
    else:  # LlamaIndex's name of the filter: filters
        retriever = WindowedLlamaIndexRetriever(index, k_child=12,
                                                **{("filters" if k == "filter" else k): v for k, v in options.items()})
        run = retriever.retrieve
    counts = _count(monkeypatch, index)
    assert run("harbour crane bread")
    figures = _search_figures(counts)
    assert (figures["check_query"], figures["generation"]) == (1, 1)
    assert counts["get_many"] == 1


def test_windows_are_cut_from_the_records_the_hits_carry(index, monkeypatch):
    """The rows of a window come from the record the search read (the version its hits
    point into), not from a second read of the store."""
    from swrag_integrations.engine.parents import hit_records

    hits = index.engine.search_children("harbour crane bread", 6)
    records = hit_records(hits)
    assert records and all(h.record is records[h.source_id] for h in hits)

    def refuse(sids):
        raise AssertionError(f"records read again: {list(sids)}")

    monkeypatch.setattr(index.engine.store, "get_many", refuse)
    ranges = [(h.source_id, h.lower, h.upper) for h in hits]
    rows = index.engine.chunk_rows(ranges, records=records)
    for h in hits:
        text = records[h.source_id].text
        got = {r.index: r for r in rows[h.source_id]}
        assert h.chunk_index in got and got[h.chunk_index].start == h.start and got[h.chunk_index].end == h.end
        assert all(r.text == text[r.start - records[h.source_id].base:r.end - records[h.source_id].base]
                   for r in got.values())
        assert index.engine.medium_range(h.source_id, h.chunk_index, record=h.record) is not None


def test_similarity_search_is_one_door(index, monkeypatch):
    counts = _count(monkeypatch, index)
    assert index.similarity_search("harbour crane bread", k=3)
    assert _search_figures(counts) == ONE_SEARCH
    assert counts["get_many"] == 1


def test_filtered_similarity_search_reads_records_once(index, monkeypatch):
    """The filter checks the sources found in one read of their records, and the
    documents returned are built from that read."""
    counts = _count(monkeypatch, index)
    docs = index.similarity_search("harbour crane bread", k=3, filter={"n": {"$lt": 6}})
    assert docs and all(d.metadata["n"] < 6 for d in docs)
    assert _search_figures(counts) == ONE_SEARCH
    assert counts["get_many"] == 1


def test_keyword_only_relevance_is_the_stored_vectors_cosine(index):
    """Reading the stored vectors back measures what embedding the chunk again measured."""
    hits = index.as_retriever(k_child=12).find_chunks("harbour crane bread")
    unscored = [h.metadata["chunk_id"] for h in hits if h.metadata.get("dense_rank") is None]
    assert unscored
    qvec = index.engine.vectors.embed_query("harbour crane bread")
    stored = index.engine.relevances(qvec, unscored)
    reembedded = {}
    for doc in index.engine.get_chunks(unscored):
        import numpy as np

        v = np.asarray(index.engine.vectors.embed_documents([doc.page_content])[0])
        q = np.asarray(qvec)
        reembedded[doc.id] = min(1.0, max(0.0, float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))))
    assert stored.keys() == reembedded.keys()
    for cid in stored:
        assert stored[cid] == pytest.approx(reembedded[cid], abs=1e-6)


# ---------------------------------------------------------------- the add path

def test_add_checks_and_hashes_each_document_once(index, monkeypatch):
    """One add checks each document once (:func:`~.records.check_storable`, at the door
    of the write, :func:`~.writer.dedupe_documents`) and hashes its text once (the
    record's content hash; a document alone under its key needs no content hash to be
    told apart from the others of its call)."""
    from swrag_integrations.engine import ids as ids_module
    from swrag_integrations.engine import records as records_module
    from swrag_integrations.ingest import writer as writer_module

    counts = Counts()
    for module in (records_module, writer_module):
        if hasattr(module, "check_storable"):
            counts.wrap(monkeypatch, module, "check_storable")
    docs = [Document(page_content=f"new text {i}: " + " ".join(WORDS[i:] + WORDS[:i]) + ".",
                     metadata={"source": f"new{i}.txt"}) for i in range(3)]
    hashed: list[str] = []
    original = ids_module._sha1
    monkeypatch.setattr(ids_module, "_sha1", lambda value: hashed.append(value) or original(value))
    index.add_documents(docs)
    assert counts["check_storable"] == 3
    for doc in docs:
        assert sum(doc.page_content in value for value in hashed) == 1, doc.metadata["source"]
    assert index.engine.store.heads()  # written: the check did not stop the write
    assert {d.page_content for d in index.get_by_ids(index.add_documents(docs))} == {d.page_content for d in docs}


def test_add_still_refuses_a_lone_surrogate_before_writing(index):
    """The one check still runs before anything of the call is written."""
    before = set(index.engine.store.heads())
    docs = [Document(page_content="fine text here.", metadata={"source": "ok.txt"}),
            Document(page_content="bad \udcff text", metadata={"source": "bad.txt"})]
    with pytest.raises(ValueError, match="lone surrogate U\\+DCFF"):
        index.add_documents(docs)
    assert set(index.engine.store.heads()) == before


def test_a_context_that_fits_is_assembled_once(index, monkeypatch):
    """Under a budget the plan fits, the windows are merged by offset once
    (:func:`~.assemble.assemble_context`), and give what merging them without a budget gives."""
    retriever = index.as_retriever(k_child=12, budget_tokens=4000)
    calls: list[int | None] = []
    original = parents.assemble_context

    def counted(spans, budget, **kwargs):
        calls.append(budget)
        return original(spans, budget, **kwargs)

    monkeypatch.setattr(parents, "assemble_context", counted)
    docs = retriever.invoke("harbour crane bread")
    assert docs and calls == [4000]
    unlimited = index.as_retriever(k_child=12, budget_tokens=None).invoke("harbour crane bread")
    assert [(d.metadata["source_id"], d.metadata["start_index"], d.metadata["end_index"]) for d in docs] == \
        [(d.metadata["source_id"], d.metadata["start_index"], d.metadata["end_index"]) for d in unlimited]
