"""LangChain's standard retriever suites for every retriever class the package ships."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tempfile
from functools import lru_cache

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM
from langchain_tests.integration_tests import RetrieversIntegrationTests

from swrag_integrations.langchain.search import CJKBM25Retriever, DenseChunkRetriever, HybridRetriever
from swrag_integrations.langchain.multi_query import MultiQueryFusionRetriever
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.langchain.retriever import WindowedParentRetriever

# ten short sources that all mention the query's words: every retriever finds >= 3 separate results
DOCS = [Document(page_content=f"Harbour report {i}: the lighthouse keeper of Isle{i} logged fog and "
                              f"{['storms', 'ships', 'seals'][i % 3]} near the harbour lighthouse.",
                 metadata={"source": f"report{i}.txt"}) for i in range(10)]
QUERY = "harbour lighthouse keeper fog"


@lru_cache(maxsize=1)
def index() -> SlidingWindowIndex:
    idx = SlidingWindowIndex(tempfile.mkdtemp(prefix="swrag-std-"), embedding=DeterministicFakeEmbedding(size=16),
                             show_progress=False)
    idx.add_documents(DOCS)
    return idx


class TestWindowedParentRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return WindowedParentRetriever

    @property
    def retriever_constructor_params(self):
        return {"index": index(), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestCJKBM25Retriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return CJKBM25Retriever.from_documents

    @property
    def retriever_constructor_params(self):
        return {"documents": DOCS, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestCJKBM25RetrieverOverAnIndex(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return CJKBM25Retriever

    @property
    def retriever_constructor_params(self):
        return {"index": index().keyword, "fetch": index().get_chunks, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestDenseChunkRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return DenseChunkRetriever

    @property
    def retriever_constructor_params(self):
        return {"index": index(), "k": 4, "search_type": "similarity"}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def _hybrid(k: int = 4, **kwargs):
    return HybridRetriever(retrievers=[index().bm25_retriever(10), index().dense_retriever(10)], k=k, **kwargs)


class TestHybridRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return _hybrid

    @property
    def retriever_constructor_params(self):
        return {"k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def _multi_query(k: int = 4):
    llm = FakeListLLM(responses=["1. Who kept the lighthouse?\n2. Fog near the harbour"] * 20)
    return MultiQueryFusionRetriever(retriever=WindowedParentRetriever(index=index()), llm=llm, k=k)


class TestMultiQueryFusionRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return _multi_query

    @property
    def retriever_constructor_params(self):
        return {"k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY
