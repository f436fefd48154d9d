"""The LangChain face is thin: the VectorStore contract over the engine, no forwards.

``SlidingWindowIndex`` keeps LangChain's contract; everything else is ``index.engine``'s
(or a retriever's ``from_index``). The names it used to forward still answer until 0.4,
each with a ``DeprecationWarning`` naming its new spelling, and give what the new
spelling gives.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import warnings

import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStoreRetriever

from fake_embeddings import TrigramEmbedder
from swrag_integrations.engine.engine import IndexEngine
from swrag_integrations.langchain import index as face_module
from swrag_integrations.langchain.index import DEPRECATED, SlidingWindowIndex
from swrag_integrations.langchain.retriever import WindowedParentRetriever
from swrag_integrations.langchain.search import (CJKBM25Retriever, DenseChunkRetriever, HybridRetriever,
                                                 chunk_documents, dense_documents)

TEXTS = [" ".join(f"The lighthouse keeper {i} counts gulls and writes about fog number {i}." for i in range(40)),
         " ".join(f"Copper kettles {i} boil on the harbour stove while sailors sing {i}." for i in range(40))]
QUERY = "lighthouse keeper fog"


class _Embeddings(TrigramEmbedder):
    """The trigram embedding as a LangChain ``Embeddings`` (only the two methods it needs)."""


def _own_methods(cls: type) -> list[str]:
    """The functions defined in the body of ``cls`` (methods, properties, class methods)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    return [node.name for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_face_has_at_most_twenty_methods_of_its_own():
    names = _own_methods(SlidingWindowIndex)
    assert len(names) <= 20, names


def test_face_has_no_forwarding_descriptors():
    """No attribute of the class reads the engine: no custom descriptors (only functions,
    properties of its own contract and plain values)."""
    for name, value in vars(SlidingWindowIndex).items():
        if isinstance(value, (staticmethod, classmethod, property)) or inspect.isfunction(value):
            continue
        assert not hasattr(type(value), "__get__"), f"{name} is a descriptor ({type(value).__name__})"
    assert not hasattr(face_module, "_FromEngine")


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    idx = SlidingWindowIndex(tmp_path_factory.mktemp("face") / "index", embedding=_Embeddings(), batch_size=64)
    idx.add_texts(TEXTS, [{"source": "a.txt"}, {"source": "b.txt"}])
    yield idx
    idx.close()


def _error_on_shim():
    """Inside ``warnings.catch_warnings()``: the face's deprecation warnings become errors."""
    warnings.filterwarnings("error", message=r"SlidingWindowIndex\.", category=DeprecationWarning)


def _doc(i):
    """The ``i``-th text as the document ``add_texts`` indexed (re-adding it writes nothing)."""
    from langchain_core.documents import Document

    return Document(page_content=TEXTS[i], metadata={"source": "ab"[i] + ".txt"})


def _sid(index):
    return index.engine.source_ids()[0]


# name -> how to use it: a function of (the value it gives, the index) -> a comparable result,
# and the same through the new spelling
def _call(*args, **kwargs):
    return lambda value, index: value(*[a(index) if callable(a) else a for a in args], **kwargs)


def _docs(result):
    return [(d.id, d.page_content, sorted(d.metadata)) for d in result]


NEW_SPELLING = {
    "status": (_call(probe=False), lambda ix: ix.engine.status(probe=False)),
    "count": (_call("small"), lambda ix: ix.engine.count("small")),
    "source_ids": (_call(), lambda ix: ix.engine.source_ids()),
    "source_text": (_call(_sid), lambda ix: ix.engine.source_text(_sid(ix))),
    "chunk_metadata": (_call(_sid), lambda ix: ix.engine.chunk_metadata(_sid(ix))),
    "chunk_rows": (lambda v, ix: v([(_sid(ix), 0, 2)]), lambda ix: ix.engine.chunk_rows([(_sid(ix), 0, 2)])),
    "medium_range": (_call(_sid, 1), lambda ix: ix.engine.medium_range(_sid(ix), 1)),
    "span_text": (_call(_sid, 3, 40), lambda ix: ix.engine.span_text(_sid(ix), 3, 40)),
    "bm25_search": (_call(QUERY, 5), lambda ix: ix.engine.bm25_search(QUERY, 5)),
    "dense_ids": (_call(QUERY, 5), lambda ix: ix.engine.dense_ids(QUERY, 5)),
    "search_children": (lambda v, ix: [(h.source_id, h.chunk_index, h.rank) for h in v(QUERY, 5)],
                        lambda ix: [(h.source_id, h.chunk_index, h.rank) for h in ix.engine.search_children(QUERY, 5)]),
    "disk_size": (_call(), lambda ix: ix.engine.disk_size()),
    "delete_source": (_call("no-such-source"), lambda ix: ix.engine.delete_source("no-such-source")),
    "check_embedding": (_call(), lambda ix: ix.engine.check_embedding()),
    "index_documents": (lambda v, ix: v([_doc(0)]).ids, lambda ix: ix.engine.index_documents([_doc(0)]).ids),
    "get_chunks": (lambda v, ix: _docs(v([f"{_sid(ix)}:s:0", f"{_sid(ix)}:s:1"])),
                   lambda ix: _docs(chunk_documents(ix.engine, [f"{_sid(ix)}:s:0", f"{_sid(ix)}:s:1"]))),
    "dense_search": (lambda v, ix: _docs(v(QUERY, 4, search_type="similarity")),
                     lambda ix: _docs(DenseChunkRetriever.from_index(ix, 4, "similarity").invoke(QUERY))),
    "bm25_retriever": (lambda v, ix: _docs(v(3).invoke(QUERY)),
                       lambda ix: _docs(CJKBM25Retriever.from_index(ix, k=3).invoke(QUERY))),
    "dense_retriever": (lambda v, ix: _docs(v(3, "similarity").invoke(QUERY)),
                        lambda ix: _docs(DenseChunkRetriever.from_index(ix, k=3, search_type="similarity")
                                         .invoke(QUERY))),
    "hybrid_retriever": (lambda v, ix: _docs(v(4, search_type="similarity").invoke(QUERY)),
                         lambda ix: _docs(HybridRetriever.from_index(ix, k=4, search_type="similarity")
                                          .invoke(QUERY))),
    "as_document_retriever": (lambda v, ix: _docs(v(search_kwargs={"k": 2}).invoke(QUERY)),
                              lambda ix: _docs(VectorStoreRetriever(vectorstore=ix, search_kwargs={"k": 2})
                                               .invoke(QUERY))),
    "vectorstore": (lambda v, ix: sorted(v.get(include=[])["ids"]),  # a langchain_chroma view of the collection
                    lambda ix: sorted(ix.engine.vectors.collection.get(include=[])["ids"])),
}
"""Names whose use needs arguments (or whose new home is not the engine attribute of the same name)."""

ACTIONS = {"repair", "reset", "explain"}
"""Names that change the index or need the view package: compared as the bound callables."""


@pytest.mark.parametrize("name", sorted(DEPRECATED))
def test_deprecated_name_warns_and_matches_new_spelling(index, name):
    with pytest.warns(DeprecationWarning, match=rf"SlidingWindowIndex\.{name} .*removed in 0\.4.*use "):
        value = getattr(index, name)
    replacement = DEPRECATED[name][0]
    with warnings.catch_warnings():
        _error_on_shim()  # the new spelling does not warn
        if name in NEW_SPELLING:
            use, new = NEW_SPELLING[name]
            assert use(value, index) == new(index), replacement
        elif name in ACTIONS:
            assert value == getattr(index.engine, name), replacement
        else:
            assert replacement == f"index.engine.{name}"
            assert value == getattr(index.engine, name)
            if inspect.ismethod(value):
                assert value.__self__ is index.engine


def test_every_deprecated_name_is_covered():
    plain = {n for n, (spelling, _) in DEPRECATED.items() if spelling == f"index.engine.{n}"}
    assert set(DEPRECATED) == plain | set(NEW_SPELLING) | ACTIONS


def test_unknown_attribute_raises_attribute_error(index):
    with warnings.catch_warnings():
        _error_on_shim()
        with pytest.raises(AttributeError, match="no_such_name"):
            index.no_such_name  # noqa: B018
        assert not hasattr(index, "_client")


def test_shim_not_reached_for_internals(index):
    """Dunder and private lookups (copy, pickle, pydantic, ABC machinery) never reach the
    table: no warning, plain ``AttributeError``."""
    with warnings.catch_warnings():
        _error_on_shim()
        for name in ("__fields__", "__pydantic_fields__", "__getstate_x__", "model_config", "_resolve_ids",
                     "_collection_name", "engine_"):
            assert not hasattr(index, name), name
    assert not any(name.startswith("_") for name in DEPRECATED)


def test_windowed_retriever_runs_on_the_engine(index):
    """``as_retriever`` and ``WindowedParentRetriever(index=face)`` hold the engine and warn nothing."""
    with warnings.catch_warnings():
        _error_on_shim()
        retriever = index.as_retriever(budget_tokens=200)
        given = WindowedParentRetriever(index=index, budget_tokens=200)
        assert retriever.index is index.engine and given.index is index.engine
        assert isinstance(retriever.index, IndexEngine)
        docs = retriever.invoke(QUERY)
        assert docs and _docs(docs) == _docs(given.invoke(QUERY))
        assert all(isinstance(r, BaseRetriever) for r in (CJKBM25Retriever.from_index(index.engine),
                                                          DenseChunkRetriever.from_index(index.engine),
                                                          HybridRetriever.from_index(index.engine)))


def test_dense_documents_rank(index):
    docs = dense_documents(index, QUERY, 3, search_type="similarity")
    assert [d.metadata["dense_rank"] for d in docs] == [1, 2, 3]
    assert [d.id for d in docs] == index.engine.dense_ids(QUERY, 3, search_type="similarity")


def test_dense_retriever_bad_search_type_is_one_line(index):
    with pytest.raises(ValueError, match="search_type must be 'mmr' or 'similarity', got 'bm25'"):
        DenseChunkRetriever.from_index(index, 3, "bm25")


def test_contract_still_served(index):
    """The LangChain contract that stays on the face."""
    with warnings.catch_warnings():
        _error_on_shim()
        hits = index.similarity_search(QUERY, k=1)
        assert hits and "lighthouse" in hits[0].page_content
        assert index.get_by_ids([hits[0].id])[0].page_content == hits[0].page_content
        assert index.embeddings is index.engine.vectors.embedding
        assert "SlidingWindowIndex(" in repr(index)
