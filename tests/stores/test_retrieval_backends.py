"""The windowed index over the vector and source stores users already run (issue: any vector store)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.stores import InMemoryByteStore
from langchain_core.vectorstores import InMemoryVectorStore

from swrag_integrations.engine.engine import IndexMismatchError
from swrag_integrations.stores.sources import KVSourceStore
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.ids import source_id_for
from swrag_integrations.langchain.search import CJKBM25Retriever
from stores import POSTGRES, postgres_database

DIM = 16
EN = " ".join(f"Paragraph {i}: the harbour town of Port{i} exports {['wool', 'tea', 'salt', 'copper'][i % 4]} "
              f"and its mayor is called Name{i}." for i in range(80))
ZH = "".join(f"第{i}段：城市{i}号以出产{['丝绸', '茶叶', '瓷器'][i % 3]}闻名，市长名叫张{i}。" for i in range(80))
DOCS = [Document(page_content=EN, metadata={"source": "en.txt"}), Document(page_content=ZH, metadata={"source": "zh.txt"})]


def emb():
    return DeterministicFakeEmbedding(size=DIM)


def _faiss():
    import faiss
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS

    return FAISS(embedding_function=emb(), index=faiss.IndexFlatIP(DIM), docstore=InMemoryDocstore(),
                 index_to_docstore_id={})


class Backend:
    """Makes a vector store + source store pair, and reopens them as a new process would."""

    def __init__(self, kind, tmp_path):
        self.kind, self.tmp = kind, tmp_path
        self.memory_store = None

    def open(self, **kw):
        kind = self.kind
        if kind == "chroma-embedded":
            return SlidingWindowIndex(self.tmp / "idx", embedding=emb(), show_progress=False, **kw)
        if kind == "in-memory":
            if self.memory_store is None:
                self.memory_store = (InMemoryVectorStore(emb()), InMemoryByteStore())
            vs, bs = self.memory_store
            return SlidingWindowIndex(vectorstore=vs, source_store=bs, show_progress=False, **kw)
        if kind == "faiss+localfilestore":
            from langchain_classic.storage import LocalFileStore

            if self.memory_store is None:
                self.memory_store = (_faiss(),)
            return SlidingWindowIndex(vectorstore=self.memory_store[0], source_store=LocalFileStore(self.tmp / "src"),
                                      show_progress=False, **kw)
        if kind == "qdrant-local":
            from langchain_qdrant import QdrantVectorStore
            from qdrant_client import QdrantClient
            from qdrant_client.models import Distance, VectorParams

            if self.memory_store is not None:
                self.memory_store[0].close()  # local Qdrant locks its folder per client
            client = QdrantClient(path=str(self.tmp / "qdrant"))
            if not client.collection_exists("chunks"):
                client.create_collection("chunks", vectors_config=VectorParams(size=DIM, distance=Distance.COSINE))
            self.memory_store = (client,)
            store = QdrantVectorStore(client=client, collection_name="chunks", embedding=emb())
            return SlidingWindowIndex(self.tmp / "qd-sources", vectorstore=store, show_progress=False, **kw)
        if kind == "postgres":  # sources, vectors and keywords in one database
            if self.memory_store is None:
                self.memory_store = (postgres_database(),)
            return SlidingWindowIndex(storage=self.memory_store[0], embedding=emb(), show_progress=False, **kw)
        raise ValueError(kind)


KINDS = ["chroma-embedded", "in-memory", "faiss+localfilestore", "qdrant-local", POSTGRES]


@pytest.mark.parametrize("kind", KINDS)
def test_index_lifecycle_on_each_store(tmp_path, kind):
    backend = Backend(kind, tmp_path)
    idx = backend.open()
    ids = idx.add_documents(DOCS)
    n = idx.engine.count("small")
    held = idx.engine.count(None)
    assert held in (n, -1) and len(ids) == 2
    assert idx.engine.index_documents(DOCS)["unchanged"] == 2  # idempotent
    retriever = idx.as_retriever(k=2, weights=(1.0, 0.0))
    docs = retriever.invoke("mayor Name47")
    assert "Name47" in docs[0].page_content
    texts = {source_id_for(d): d.page_content for d in DOCS}
    for d in docs:
        assert d.page_content == texts[d.metadata["source_id"]][d.metadata["start_index"]:d.metadata["end_index"]]
    assert idx.as_retriever().invoke("mayor Name47")  # hybrid (dense half through the store)
    # the store is a normal LangChain store: its documents are the exact chunk texts
    if not hasattr(idx.engine.vectors, "store"):  # the engine's own storage (Chroma, PostgreSQL): its search
        found = idx.engine.vectors.search(idx.engine.vectors.embed_query("Port3"), 3)
    else:
        found = idx.engine.vectors.store.similarity_search("Port3", k=3)
    assert found and all(d.page_content in texts[d.metadata["source_id"]] for d in found)
    # replace: a shorter version leaves no stale vectors or keyword entries
    shorter = Document(page_content=EN[:len(EN) // 4] + " NEWWORD.", metadata={"source": "en.txt"})
    assert idx.engine.index_documents([shorter])["replaced"] == 1
    assert CJKBM25Retriever.from_index(idx, 2).invoke("Name70") == []
    if idx.engine.count(None) != -1:
        assert idx.engine.count(None) == idx.engine.count("small") < n
    assert idx.engine.status(deep=True).healthy
    # delete by the id add_documents returned
    idx.delete([ids[1]])
    assert CJKBM25Retriever.from_index(idx, 2).invoke("张42") == []
    assert idx.engine.status(deep=True).healthy
    # reopen (a new index object over the same stores)
    again = backend.open()
    assert again.engine.index_id == idx.engine.index_id and again.engine.count("small") == idx.engine.count("small")
    assert "NEWWORD" in again.as_retriever(k=1, weights=(1.0, 0.0)).invoke("NEWWORD")[0].page_content
    assert again.engine.status().healthy


def test_chroma_collection_as_source_store_over_a_client(tmp_path):
    import chromadb
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    idx = SlidingWindowIndex(client=client, collection_name="kv-test", embedding=emb(), show_progress=False)
    assert isinstance(idx.engine.store, KVSourceStore)
    idx.add_documents(DOCS)
    assert "Name12" in idx.as_retriever(k=1, weights=(1.0, 0.0)).invoke("Name12")[0].page_content
    again = SlidingWindowIndex(client=client, collection_name="kv-test", embedding=emb(), show_progress=False)
    assert again.engine.count("small") == idx.engine.count("small") and again.engine.status().healthy


def test_langchain_indexing_api(tmp_path):
    from langchain_core.indexing import InMemoryRecordManager, index

    idx = SlidingWindowIndex(tmp_path / "idx", embedding=emb(), show_progress=False)
    manager = InMemoryRecordManager("swrag")
    manager.create_schema()
    first = index(DOCS, manager, idx, cleanup="full", source_id_key="source")
    assert first["num_added"] == 2
    assert index(DOCS, manager, idx, cleanup="full", source_id_key="source")["num_skipped"] == 2
    changed = [Document(page_content=EN + " A new closing line.", metadata={"source": "en.txt"})]
    result = index(changed, manager, idx, cleanup="full", source_id_key="source")
    assert result["num_added"] == 1 and result["num_deleted"] == 2
    assert len(idx.engine.source_ids()) == 1 and "closing line" in idx.engine.source_text(idx.engine.source_ids()[0])


def test_as_retriever_search_kwargs_and_unknown_keywords(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=emb(), show_progress=False)
    idx.add_documents(DOCS)
    r = idx.as_retriever(search_kwargs={"k": 1, "budget_tokens": 300}, search_type="similarity")
    assert r.k == 1 and r.budget_tokens == 300 and r.search_type == "similarity"
    assert len(r.invoke("Port3 wool")) == 1
    assert len(r.invoke("Port3 wool", k=2)) == 2
    with pytest.raises(TypeError, match="unexpected"):
        r.invoke("Port3", top_k=2)
    with pytest.raises(Exception, match="extra|unexpected|not permitted"):
        idx.as_retriever(search_kwargs={"kk": 3})
    with pytest.raises(ValueError):
        r.invoke("Port3", k=0)
    with pytest.raises(TypeError):
        idx.add_documents(DOCS, foo=1)
    assert len(idx.similarity_search("Port3 wool", k=2)) == 2
    assert idx.get_by_ids([idx.engine.source_ids()[0]])[0].page_content in (EN, ZH)


def test_bad_stores_get_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="VectorStore"):
        SlidingWindowIndex(vectorstore=object(), source_store=InMemoryByteStore())
    with pytest.raises(ValueError, match="source_store"):
        SlidingWindowIndex(vectorstore=InMemoryVectorStore(emb()))
    with pytest.raises(TypeError, match="BaseStore"):
        SlidingWindowIndex(vectorstore=InMemoryVectorStore(emb()), source_store=42)
    # a store that already holds vectors (another application's, or a lost source store)
    foreign = InMemoryVectorStore(emb())
    foreign.add_texts(["somebody else's text"])
    with pytest.raises(IndexMismatchError, match="already holds 1 vectors"):
        SlidingWindowIndex(vectorstore=foreign, source_store=InMemoryByteStore())
    assert len(foreign.store) == 1  # nothing was touched
    # another embedding dimension than the one the index was built with
    vs, bs = InMemoryVectorStore(emb()), InMemoryByteStore()
    SlidingWindowIndex(vectorstore=vs, source_store=bs, show_progress=False).add_documents(DOCS)
    other = SlidingWindowIndex(vectorstore=vs, source_store=bs, embedding=DeterministicFakeEmbedding(size=8))
    with pytest.raises(IndexMismatchError, match="16-dimensional"):
        other.similarity_search("Port3")


def test_llama_index_native_vector_store_index():
    from llama_index.core import Document as LIDocument
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    from swrag_integrations.llama_index import DynamicStepNodeParser
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever
    from swrag_integrations.engine.assemble import count_tokens

    docs = [LIDocument(text=EN, id_="en"), LIDocument(text=ZH, id_="zh")]
    nodes = DynamicStepNodeParser(window_size=60, step=2).get_nodes_from_documents(docs)
    vindex = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    retriever = WindowedLlamaIndexRetriever(vindex, k_child=6, budget_tokens=300)
    got = retriever.retrieve("mayor Name47")
    assert got and all(type(n).__name__ == "NodeWithScore" for n in got)
    texts = {"en": EN, "zh": ZH}
    for item in got:
        node = item.node
        assert node.get_content() == texts[node.ref_doc_id][node.start_char_idx:node.end_char_idx]
    assert count_tokens("\n\n".join(n.node.get_content() for n in got)) <= 300
    spans = sorted((n.node.ref_doc_id, n.node.start_char_idx, n.node.end_char_idx) for n in got)
    for (s1, a1, b1), (s2, a2, b2) in zip(spans, spans[1:]):  # overlapping windows were merged by offset
        assert s1 != s2 or b1 < a2
    # more budget: neighbouring windows widen the hits
    wide = WindowedLlamaIndexRetriever(vindex, k_child=2, budget_tokens=None, neighbors=1).retrieve("Name47")
    narrow = WindowedLlamaIndexRetriever(vindex, k_child=2, budget_tokens=None).retrieve("Name47")
    assert sum(len(n.node.get_content()) for n in wide) > sum(len(n.node.get_content()) for n in narrow)
