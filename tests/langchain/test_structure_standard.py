"""LangChain standard retriever suites for the corpus-structure retrievers (HippoRAG, GraphRAG local, RAPTOR)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tempfile
from functools import lru_cache

import pytest
from ci_switch import importorskip
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests import RetrieversIntegrationTests

importorskip("igraph")
importorskip("leidenalg")

from swrag_integrations.methods.graph import GraphRAG, GraphRAGLocalRetriever, HippoRAG, HippoRAGRetriever, build_graph  # noqa: E402
from swrag_integrations.langchain.index import SlidingWindowIndex  # noqa: E402

# ten short sources linked by shared names, all mentioning the query's words
DOCS = [Document(page_content=f"Harbour Report {i}\nThe keeper of Isle {i} met Captain Marlow {i % 3} near the "
                              f"Harbour Lighthouse and logged fog and {['storms', 'ships', 'seals'][i % 3]}.",
                 metadata={"source": f"report{i}.txt"}) for i in range(10)]
QUERY = "Harbour Lighthouse keeper fog"


@lru_cache(maxsize=1)
def built():
    idx = SlidingWindowIndex(tempfile.mkdtemp(prefix="swrag-graph-std-"), embedding=DeterministicFakeEmbedding(size=16),
                             show_progress=False)
    idx.add_documents(DOCS)
    graph, _ = build_graph(idx)
    return idx, graph


class TestHippoRAGRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return HippoRAGRetriever

    @property
    def retriever_constructor_params(self):
        return {"searcher": HippoRAG(*built()), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestGraphRAGLocalRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return GraphRAGLocalRetriever

    @property
    def retriever_constructor_params(self):
        return {"searcher": GraphRAG(*built()), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


@lru_cache(maxsize=1)
def raptor_built():
    importorskip("sklearn")
    from swrag_integrations.methods.raptor import RaptorIndex

    idx, _ = built()
    raptor = RaptorIndex(idx, embeddings=DeterministicFakeEmbedding(size=16), scope="corpus", show_progress=False)
    raptor.build()
    return raptor


class TestRaptorRetriever(RetrieversIntegrationTests):
    """RAPTOR's collapsed tree under LangChain's standard retriever suite (call-time ``k``)."""

    @property
    def retriever_constructor(self):
        from swrag_integrations.methods.raptor import RaptorRetriever

        return RaptorRetriever

    @property
    def retriever_constructor_params(self):
        return {"raptor": raptor_built(), "embeddings": DeterministicFakeEmbedding(size=16), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY
