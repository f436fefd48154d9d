"""One adapter for the default Chroma (issue 40, item 2): the LangChain face opens its
collection through the engine's `ChromaStorage`, so it needs no ``langchain_chroma``."""

from __future__ import annotations

import sys
import warnings

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.stores.chroma import ChromaStorage

TEXT = ("The ferry leaves the harbour at noon. The lighthouse was first lit in 1874. "
        "Its lamp burned whale oil until the keepers switched to kerosene. ") * 4


def test_the_face_writes_and_searches_without_langchain_chroma(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_chroma", None)  # `import langchain_chroma` now fails
    index = SlidingWindowIndex(tmp_path / "ix", embedding=DeterministicFakeEmbedding(size=16), chunk_size=12,
                               show_progress=False)
    assert type(index.engine.vectors) is ChromaStorage
    index.add_documents([Document(page_content=TEXT, metadata={"source": "a.txt"})])
    assert [d.page_content for d in index.similarity_search("lighthouse first lit", k=1)] == [TEXT]
    windows = index.as_retriever().invoke("lighthouse first lit")
    assert windows and all(TEXT[d.metadata["start_index"]:d.metadata["end_index"]] == d.page_content
                           for d in windows)
    reopened = SlidingWindowIndex(tmp_path / "ix", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    assert reopened.engine.count("small") == index.engine.count("small") > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ImportError, match="pip install langchain-chroma"):
            reopened.vectorstore  # noqa: B018 - the deprecated view needs it, and says so


def test_the_deprecated_vectorstore_is_a_view_of_the_same_collection(tmp_path):
    pytest.importorskip("langchain_chroma")
    index = SlidingWindowIndex(tmp_path / "ix", embedding=DeterministicFakeEmbedding(size=16), chunk_size=12,
                               show_progress=False)
    index.add_documents([Document(page_content=TEXT, metadata={"source": "a.txt"})])
    with pytest.warns(DeprecationWarning, match="index.engine.vectors"):
        view = index.vectorstore
    held = index.engine.vectors.collection.get(include=["documents"])
    assert sorted(view.get(include=[])["ids"]) == sorted(held["ids"])
    found = view.similarity_search("lighthouse", k=1)
    assert found and found[0].page_content in held["documents"]
