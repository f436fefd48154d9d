"""Integration tests of SlidingWindowIndex + WindowedParentRetriever on a tmp PersistentClient."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import asyncio
import csv

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM

from stores import STORES, referenced_vector_ids, store_kwargs, vector_ids
from swrag_integrations.langchain.multi_query import MultiQueryFusionRetriever
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.assemble import count_tokens
from swrag_integrations.ingest.files import load_files
from swrag_integrations.engine.ids import source_id_for
from swrag_integrations.engine.ids import vector_ids as ids_of
from swrag_integrations.langchain.search import CJKBM25Retriever
from swrag_integrations.langchain.search import chunk_documents

EN = " ".join(
    f"Paragraph {i}: the harbour town of Port{i} exports {['wool', 'tea', 'salt', 'copper'][i % 4]} "
    f"and its mayor is called Name{i}." for i in range(160)
)
ZH = "".join(f"第{i}段：城市{i}号以出产{['丝绸', '茶叶', '瓷器'][i % 3]}闻名，市长名叫张{i}。" for i in range(150))
DOCS = [
    Document(page_content=EN, metadata={"source": "en.txt", "title": "Ports"}),
    Document(page_content=ZH, metadata={"source": "zh.txt"}),
]


def fake():
    return DeterministicFakeEmbedding(size=16)


@pytest.fixture
def index(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "store", embedding=fake(), show_progress=False, batch_size=64)
    idx.add_documents(DOCS)
    return idx


@pytest.fixture(params=STORES)
def any_index(tmp_path, request):
    """The index of :func:`index` in each vector store (:data:`stores.STORES`)."""
    idx = SlidingWindowIndex(tmp_path / "store", embedding=fake(), show_progress=False, batch_size=64,
                             **store_kwargs(request.param))
    idx.add_documents(DOCS)
    return idx


def _texts():
    return {source_id_for(d): d.page_content for d in DOCS}


def _all_chunks(idx):
    ids = [f"{sid}:s:{i}" for sid in idx.engine.source_ids() for i in range(len(idx.engine.chunk_metadata(sid)))]
    docs = chunk_documents(idx, ids)
    return {"ids": [d.id for d in docs], "documents": [d.page_content for d in docs], "metadatas": [d.metadata for d in docs]}


def test_chunks_and_window_metadata(index):
    got = _all_chunks(index)
    assert len(got["ids"]) == index.engine.count("small") == index.engine.count(None) == index.engine.vectors.collection.count()
    # the vector store is a normal LangChain store: each small chunk's exact text + offsets, under a UUID id
    raw = index.engine.vectors.collection.get(include=["documents", "metadatas"])
    assert sorted(raw["ids"]) == referenced_vector_ids(index)
    by_chunk = {m["chunk_id"]: (d, m) for d, m in zip(raw["documents"], raw["metadatas"])}
    for cid, text in zip(got["ids"], got["documents"]):
        doc, meta = by_chunk[cid]
        assert doc == text and meta["swrag_index"] == index.engine.index_id
        assert {"source_id", "chunk_index", "start_index", "end_index", "content_hash"} <= set(meta)
    assert raw["documents"] and all(raw["documents"])  # texts are there
    texts = _texts()
    for rid, text, meta in zip(got["ids"], got["documents"], got["metadatas"]):
        source = texts[meta["source_id"]]
        assert rid == f"{meta['source_id']}:s:{meta['chunk_index']}"
        assert text == source[meta["start_index"]:meta["end_index"]]
        assert 0 < meta["n_tokens"] <= 53
        i = meta["chunk_index"]
        assert meta["window_lower_bound"] <= i <= meta["window_upper_bound"]
        assert meta["window_upper_bound"] - meta["window_lower_bound"] + 1 <= 9  # union of <= 2 windows of 6 by 3
        assert meta["medium_index"] == i // 3
    assert got["metadatas"][0].get("title") in ("Ports", None)
    sid0 = source_id_for(DOCS[0])
    n_med = -(-len(index.engine.chunk_metadata(sid0)) // 3)
    mediums = chunk_documents(index, [f"{sid0}:m:{j}" for j in range(n_med)])
    assert len(mediums) == n_med and index.engine.count("medium") == n_med + -(-len(index.engine.chunk_metadata(source_id_for(DOCS[1]))) // 3)
    for doc in mediums:  # derived, not stored: text = the span of its small chunks
        meta = doc.metadata
        assert meta["last_chunk"] - meta["first_chunk"] <= 2
        assert doc.page_content == EN[meta["start_index"]:meta["end_index"]]
    lower, upper, start, end = index.engine.medium_range(sid0, 4)
    assert lower <= 4 <= upper and EN[start:end]
    # the chunk windows match the W=6, S=3 definition
    meta = {m["chunk_index"]: m for m in got["metadatas"] if m["source_id"] == source_id_for(DOCS[0])}
    assert (meta[4]["window_lower_bound"], meta[4]["window_upper_bound"]) == (0, 8)
    assert (meta[0]["window_lower_bound"], meta[0]["window_upper_bound"]) == (0, 5)


def test_idempotent_re_add_and_changed_document(any_index):
    index = any_index
    ids_before = vector_ids(index)
    stats = index.engine.index_documents(DOCS)
    assert stats["unchanged"] == 2 and stats["chunks"] == 0
    assert vector_ids(index) == ids_before
    n_before = len(index.engine.chunk_metadata(source_id_for(DOCS[0])))
    shorter = Document(page_content=EN[: len(EN) // 3] + " NEWWORD appears here.", metadata={"source": "en.txt", "title": "Ports"})
    stats = index.engine.index_documents([shorter])
    assert stats["replaced"] == 1
    sid = source_id_for(shorter)
    n = len(index.engine.chunk_metadata(sid))
    assert n < n_before
    assert vector_ids(index) == referenced_vector_ids(index)  # no stale vectors left
    assert index.engine.source_text(sid) == shorter.page_content
    assert len(index.engine.keyword) == index.engine.count("small")
    hits = CJKBM25Retriever.from_index(index, 3).invoke("NEWWORD")
    assert hits and hits[0].metadata["source_id"] == sid
    assert CJKBM25Retriever.from_index(index, 3).invoke("Port150") == []  # old text gone from BM25


def test_window_expansion_returns_exact_spans(any_index):
    index = any_index
    retriever = index.as_retriever(k=3, k_child=8)
    texts = _texts()
    docs = retriever.invoke("Which town exports copper and has mayor Name87?")
    assert docs
    total = 0
    for doc in docs:
        m = doc.metadata
        assert doc.page_content == texts[m["source_id"]][m["start_index"]:m["end_index"]]
        total += count_tokens(doc.page_content)
    assert total <= 1500
    assert "Name87" in docs[0].page_content
    assert docs[0].metadata["source"] == "en.txt" and docs[0].metadata["rank"] == 1
    # windows are wider than the small chunk that was hit
    assert count_tokens(docs[0].page_content) > 50
    zh = retriever.invoke("市长名叫张42的城市出产什么？")
    assert any("张42" in d.page_content for d in zh)
    # spans of one source never overlap (merged by offset)
    by_source = {}
    for d in docs + zh:
        by_source.setdefault((id(docs) if d in docs else 1, d.metadata["source_id"]), []).append((d.metadata["start_index"], d.metadata["end_index"]))
    for spans in by_source.values():
        spans.sort()
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def test_budget_and_expand_modes(any_index):
    index = any_index
    texts = _texts()
    small = index.as_retriever(k=2, k_child=8, budget_tokens=120, weights=(1.0, 0.0))  # fake dense = noise
    docs = small.invoke("mayor Name87")
    assert sum(count_tokens(d.page_content) for d in docs) <= 120
    assert any("Name87" in d.page_content for d in docs)
    for mode in ("medium", "chunk"):
        docs = index.as_retriever(k=3, k_child=8, expand=mode, budget_tokens=None).invoke("mayor Name87")
        for d in docs:
            m = d.metadata
            assert d.page_content == texts[m["source_id"]][m["start_index"]:m["end_index"]]
        assert any("Name87" in d.page_content for d in docs)
    plain = index.as_retriever(k=1, k_child=1, expand="chunk", search_type="similarity", weights=(1.0, 0.0))
    assert count_tokens(plain.invoke("Name87")[0].page_content) <= 52


@pytest.mark.parametrize("store", STORES)
def test_reopen_gives_same_results(tmp_path, store):
    path = tmp_path / "store"
    idx = SlidingWindowIndex(path, embedding=fake(), show_progress=False, **store_kwargs(store))
    idx.add_documents(DOCS)
    query = "Port33 exports what?"
    first = [(d.page_content, d.metadata["start_index"]) for d in idx.as_retriever(k=3).invoke(query)]
    idx.close()
    again = SlidingWindowIndex(path, embedding=fake(), show_progress=False, **store_kwargs(store))
    assert again.engine.config.chunk_size == 50
    assert [(d.page_content, d.metadata["start_index"]) for d in again.as_retriever(k=3).invoke(query)] == first
    assert again.engine.index_documents(DOCS)["unchanged"] == 2
    if store != "chroma":
        return  # the rest is about the in-process keyword index
    # a damaged keyword index (a file of it lost) is detected and rebuilt from the source store
    assert again.engine.keyword.incremental and again.engine.store.get_blob("bm25") is None
    ids = sorted(again.engine.keyword.bm25.ids)
    lost = sorted((again.engine.keyword.bm25.path / "segments").glob("*.idx"))
    assert lost
    lost[0].unlink()
    rebuilt = SlidingWindowIndex(path, embedding=fake(), show_progress=False)
    assert sorted(rebuilt.engine.keyword.bm25.ids) == ids
    assert rebuilt.engine.keyword.rebuilt and not rebuilt.engine.status().healthy
    with pytest.raises(ValueError, match="chunking parameters"):
        SlidingWindowIndex(path, embedding=fake(), chunk_size=80)


class FlakyEmbedding(DeterministicFakeEmbedding):
    calls: int = 0
    fail_at: int = 2

    def embed_documents(self, texts):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("embedding server went away")
        return super().embed_documents(texts)


def test_failed_add_is_resumable(tmp_path):
    path = tmp_path / "store"
    flaky = FlakyEmbedding(size=16)
    idx = SlidingWindowIndex(path, embedding=flaky, show_progress=False, batch_size=32)
    with pytest.raises(RuntimeError, match="went away"):
        idx.add_documents(DOCS)
    assert len(idx.engine.keyword) == idx.engine.count("small")  # BM25 holds exactly the complete sources
    stats = idx.engine.index_documents(DOCS)  # resume
    assert stats["added"] + stats["replaced"] + stats["repaired"] >= 1
    clean = SlidingWindowIndex(tmp_path / "clean", embedding=fake(), show_progress=False)
    clean.add_documents(DOCS)
    assert sorted(idx.engine.vectors.collection.get(include=[])["ids"]) == sorted(
        clean.engine.vectors.collection.get(include=[])["ids"])
    reopened = SlidingWindowIndex(path, embedding=fake(), show_progress=False)
    assert len(reopened.engine.keyword) == reopened.engine.count("small")


@pytest.mark.parametrize("strategy", ["FFS", "DFS", "DDS"])
def test_strategy_windows(tmp_path, strategy):
    idx = SlidingWindowIndex(tmp_path / strategy, embedding=fake(), show_progress=False, strategy=strategy,
                             window_size=120, step=60 if strategy != "DDS" else 2)
    idx.add_documents(DOCS[:1])
    got = _all_chunks(idx)
    for meta in got["metadatas"]:
        assert meta["window_start_index"] <= meta["start_index"] < meta["end_index"] <= meta["window_end_index"]
    docs = idx.as_retriever(k=2, budget_tokens=None).invoke("Name87 mayor")
    for d in docs:
        assert d.page_content == EN[d.metadata["start_index"]:d.metadata["end_index"]]
    text = idx.engine.span_text(got["metadatas"][5]["source_id"], 100, 900)
    assert text == EN[100:900]


def test_bad_input_errors(tmp_path, index):
    with pytest.raises(ValueError, match="strategy"):
        SlidingWindowIndex(tmp_path / "x", embedding=fake(), strategy="XYZ")
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(ValueError, match="cannot be created"):
        SlidingWindowIndex(blocker / "sub", embedding=fake())
    with pytest.raises(ValueError, match="collection_name"):
        SlidingWindowIndex(tmp_path / "y", embedding=fake(), collection_name="ab")
    with pytest.raises(ValueError, match="collection_name"):
        SlidingWindowIndex(tmp_path / "y", embedding=fake(), collection_name="a" * 513)
    with pytest.raises(ValueError, match="no documents"):
        index.add_documents([])
    with pytest.warns(UserWarning, match="empty"):
        assert index.engine.index_documents([Document(page_content="  \n")]).skipped_empty == 1
    with pytest.warns(UserWarning, match="empty"):
        index.add_documents([Document(page_content=""), DOCS[0]])
    retriever = index.as_retriever()
    with pytest.raises(ValueError, match="non-empty"):
        retriever.invoke("")
    with pytest.raises(ValueError):
        index.as_retriever(k=0)
    with pytest.raises(ValueError):
        index.as_retriever(k_child=-1)
    with pytest.raises(ValueError):
        index.as_retriever(budget_tokens=0)
    with pytest.raises(ConnectionError, match="chroma run"):
        SlidingWindowIndex(host="127.0.0.1", port=1, embedding=fake())


def test_async_multi_query_and_llama_index(index):
    retriever = index.as_retriever(k=3, k_child=8)
    sync = retriever.invoke("mayor Name87")
    assert [d.page_content for d in asyncio.run(retriever.ainvoke("mayor Name87"))] == [d.page_content for d in sync]
    llm = FakeListLLM(responses=["Here are two versions:\n1. Who is Name87?\n2. Which port has mayor Name87?"])
    mq = MultiQueryFusionRetriever(retriever=retriever, llm=llm, n_variants=2)
    docs = mq.invoke("mayor Name87")
    assert docs and docs[0].metadata["queries"][0] == "mayor Name87" and len(docs[0].metadata["queries"]) == 3
    assert sum(count_tokens(d.page_content) for d in docs) <= 1500
    texts = _texts()
    for d in docs:
        assert d.page_content == texts[d.metadata["source_id"]][d.metadata["start_index"]:d.metadata["end_index"]]
    assert asyncio.run(mq.ainvoke("mayor Name87"))

    from llama_index.core.schema import QueryBundle

    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    li = WindowedLlamaIndexRetriever(index=index, k=3, k_child=8)
    nodes = li.retrieve("mayor Name87")
    assert [n.node.get_content() for n in nodes] == [d.page_content for d in sync]
    assert nodes[0].score is not None and nodes[0].node.metadata["start_index"] == sync[0].metadata["start_index"]
    anodes = asyncio.run(li.aretrieve(QueryBundle("mayor Name87")))
    assert [n.node.node_id for n in anodes] == [n.node.node_id for n in nodes]
    with pytest.raises(ValueError):
        li.retrieve("")


def test_files(tmp_path):
    (tmp_path / "a.txt").write_text(EN[:2000], encoding="utf-8")
    (tmp_path / "b.md").write_text("# Title\n\n" + ZH[:500], encoding="utf-8")
    with open(tmp_path / "c.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["city", "export"])
        writer.writerow(["Lyon", "silk"])
        writer.writerow(["Kyoto", "tea"])
    docs = load_files(tmp_path).documents
    assert len(docs) == 4 and {d.metadata.get("row") for d in docs} == {None, 0, 1}
    idx = SlidingWindowIndex(tmp_path / "store", embedding=fake(), show_progress=False)
    stats = idx.add_files([tmp_path / "a.txt", tmp_path / "b.md", tmp_path / "c.csv"])
    assert stats["added"] == 4
    assert "Kyoto" in idx.as_retriever(k=1, weights=(1.0, 0.0)).invoke("Kyoto")[0].page_content
    (tmp_path / "d.docx").write_text("x")
    with pytest.raises(ValueError, match="unsupported"):
        load_files(tmp_path / "d.docx")
    with pytest.raises(FileNotFoundError):
        load_files(tmp_path / "missing.txt")
    assert idx.engine.delete_source(source_id_for(docs[0])) > 0


def _minimal_pdf(pages: list[str]) -> bytes:
    """A valid PDF (Helvetica, one text line per page) written by hand, with an exact xref."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode('latin-1')}\nendstream")
        content_no = len(objects)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {content_no} 0 R >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for no, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{no} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_pdf_file_is_loaded_and_indexed(tmp_path):
    pages = [f"Page {p}: the lighthouse keeper of Isle{p} logs {['fog', 'storms', 'ships'][p % 3]} every night."
             for p in range(6)]
    pdf = tmp_path / "keepers.pdf"
    pdf.write_bytes(_minimal_pdf(pages))
    from pypdf import PdfReader

    assert "Isle3" in PdfReader(str(pdf)).pages[3].extract_text()
    docs = load_files(tmp_path).documents
    assert len(docs) == 1 and docs[0].metadata["n_pages"] == 6
    text = docs[0].page_content
    assert all(f"Isle{p}" in text for p in range(6)) and "\n\n" in text  # pages joined by a blank line
    assert docs[0].metadata["source"] == str(pdf.resolve())
    idx = SlidingWindowIndex(tmp_path / "store", embedding=fake(), show_progress=False, chunk_size=10,
                             window_size=3, step=1)
    assert idx.add_files(pdf)["added"] == 1
    hit = idx.as_retriever(k=1, weights=(1.0, 0.0), budget_tokens=None).invoke("Isle4 lighthouse keeper")[0]
    assert "Isle4" in hit.page_content
    assert hit.page_content == text[hit.metadata["start_index"]:hit.metadata["end_index"]]
    assert hit.metadata["source"] == str(pdf.resolve()) and hit.metadata["n_pages"] == 6


def test_progress_bars_know_their_totals(tmp_path, monkeypatch):
    """Every writing bar has a total (so tqdm shows an ETA), and it counts only the chunks
    written: unchanged sources are not part of it, and a rebuild counts its sources' chunks."""
    import tqdm.auto

    bars = []

    class Recording(tqdm.auto.tqdm):
        def close(self):
            if not getattr(self, "_recorded", True):
                self._recorded = True
                bars.append((self.desc, self.total, self.n))
            super().close()

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._recorded = False

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    idx = SlidingWindowIndex(tmp_path / "store", embedding=fake(), show_progress=True, batch_size=16)
    idx.add_documents(DOCS)
    first = idx.engine.count("small")
    assert bars == [("Embedding chunks", first, first)]
    changed = Document(page_content=EN + " One more sentence.", metadata=DOCS[0].metadata)
    bars.clear()
    idx.add_documents([changed, DOCS[1]])  # zh.txt unchanged: not written, not in the total
    n_en = len(idx.engine.chunk_metadata(source_id_for(changed)))
    assert bars == [("Embedding chunks", n_en, n_en)]
    zh = source_id_for(DOCS[1])
    n_zh = len(idx.engine.chunk_metadata(zh))
    lost = ids_of(idx.engine.manifest, zh, idx.engine.store.heads()[zh].content_hash, n_zh - 1, n_zh)
    idx.engine.vectors.delete(lost)  # one of zh.txt's vectors lost
    bars.clear()
    idx.engine.repair(deep=True)  # writes zh.txt's vectors again
    assert bars == [("Writing missing vectors", n_zh, n_zh)]
