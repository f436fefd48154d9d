"""LangChain's standard ``VectorStoreIntegrationTests`` (sync and async) for ``SlidingWindowIndex``,
over embedded Chroma (the default) and over ``InMemoryVectorStore`` + an in-memory byte store;
plus the contract points the suite does not check (scores, relevance, MMR, retriever types)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryByteStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests.vectorstores import VectorStoreIntegrationTests

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.langchain.retriever import WindowedParentRetriever
from langchain_core.vectorstores import VectorStoreRetriever


class TestIndexOverChroma(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path):
        index = SlidingWindowIndex(tmp_path / "idx", embedding=self.get_embeddings(), show_progress=False)
        try:
            yield index
        finally:
            index.engine.store.close()


class TestIndexOverInMemory(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self):
        yield SlidingWindowIndex(vectorstore=InMemoryVectorStore(self.get_embeddings()),
                                 source_store=InMemoryByteStore(), show_progress=False)


@pytest.mark.integration
class TestIndexOverPostgres(VectorStoreIntegrationTests):
    """Sources, vectors and keywords in one PostgreSQL database (started by pgserver)."""

    @pytest.fixture()
    def vectorstore(self):
        from stores import HAVE_POSTGRES, postgres_database

        if not HAVE_POSTGRES:
            pytest.skip("needs the [postgres] extra and pgserver ([test])")
        index = SlidingWindowIndex(storage=postgres_database(), embedding=self.get_embeddings(), show_progress=False)
        try:
            yield index
        finally:
            index.engine.close()


NOTES = [Document(id=f"note-{i}", page_content=text, metadata={"topic": topic, "n": i})
         for i, (text, topic) in enumerate([("the lighthouse keeper logged fog", "sea"),
                                            ("the baker sold bread and rolls", "town"),
                                            ("seals rested near the harbour lighthouse", "sea"),
                                            ("the mayor opened the new library", "town"),
                                            ("ships waited outside the harbour in fog", "sea")])]


@pytest.fixture()
def notes_index(tmp_path):
    index = SlidingWindowIndex(tmp_path / "idx", embedding=TestIndexOverChroma.get_embeddings(), show_progress=False)
    index.add_documents(NOTES)
    yield index
    index.engine.store.close()


def test_scores_are_relevances_in_rank_order(notes_index):
    got = notes_index.similarity_search_with_score("the lighthouse keeper logged fog", k=5)
    scores = [s for _, s in got]
    assert len(got) == 5 and scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert got[0][0] == NOTES[0]  # the exact text ranks first, as added: user id and metadata
    rel = notes_index.similarity_search_with_relevance_scores("the lighthouse keeper logged fog", k=5)
    assert [s for _, s in rel] == scores


def test_user_ids_and_metadata_come_back(notes_index):
    found = notes_index.similarity_search("seals rested near the harbour lighthouse", k=1)
    assert found == [NOTES[2]]
    assert notes_index.get_by_ids(["note-3"]) == [NOTES[3]]


def test_mmr_returns_k_distinct_added_documents(notes_index):
    got = notes_index.max_marginal_relevance_search("harbour fog", k=3, fetch_k=10)
    assert len(got) == 3 and len({d.id for d in got}) == 3 and all(d in NOTES for d in got)


def test_score_threshold_retriever(notes_index):
    retriever = notes_index.as_retriever(search_type="similarity_score_threshold",
                                         search_kwargs={"score_threshold": 0.0, "k": 2})
    assert [d.id for d in retriever.invoke("the baker sold bread and rolls")][:1] == ["note-1"]
    scores = [s for _, s in notes_index.similarity_search_with_score("the baker sold bread and rolls", k=5)]
    above = notes_index.as_retriever(search_type="similarity_score_threshold",
                                     search_kwargs={"score_threshold": scores[1] + 1e-6, "k": 5})
    assert [d.id for d in above.invoke("the baker sold bread and rolls")] == ["note-1"]


def test_as_retriever_is_the_windowed_retriever_and_k_caps_it(notes_index):
    retriever = notes_index.as_retriever(search_kwargs={"k": 2})
    assert isinstance(retriever, WindowedParentRetriever) and retriever.budget_tokens == 1500
    assert len(retriever.invoke("harbour fog")) <= 2
    plain = VectorStoreRetriever(vectorstore=notes_index, search_kwargs={"k": 4}).invoke("harbour fog")
    assert len(plain) == 4 and all(d in NOTES for d in plain)
