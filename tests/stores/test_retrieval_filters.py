"""Metadata filters: one definition (retrieval/filters.py), pushed down to each store, applied to
BM25 hits and windows alike, on every face (plain search, MMR, retrievers, LlamaIndex, CLI)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from langchain_core.documents import Document
from test_retrieval_backends import KINDS, Backend

from swrag_integrations.langchain.retriever import WindowedParentRetriever
from swrag_integrations.engine.filters import filter_from_pairs, parse_filter
from swrag_integrations.langchain.search import chunk_documents
from swrag_integrations.langchain.search import dense_documents

# three sources per topic; every text shares the query's words, so unfiltered results mix topics
TOPICS = ["sea", "town", "farm"]
DOCS = [Document(page_content=" ".join(f"Report {i}.{j}: the lighthouse keeper of harbour {i} counted {TOPICS[i % 3]} "
                                       f"boats and fog banks on day {j}." for j in range(40)),
                 metadata={"source": f"r{i}.txt", "topic": TOPICS[i % 3], "year": 2000 + i}) for i in range(9)]
QUERY = "lighthouse keeper harbour fog boats"
FILTERS = [
    ({"topic": "sea"}, lambda m: m["topic"] == "sea"),
    ({"topic": {"$ne": "sea"}}, lambda m: m["topic"] != "sea"),
    ({"topic": {"$in": ["town", "farm"]}}, lambda m: m["topic"] in ("town", "farm")),
    ({"topic": {"$nin": ["town", "farm"]}}, lambda m: m["topic"] not in ("town", "farm")),
    ({"$and": [{"topic": "sea"}, {"year": {"$gte": 2003}}]}, lambda m: m["topic"] == "sea" and m["year"] >= 2003),
    ({"$or": [{"topic": "farm"}, {"year": {"$eq": 2000}}]}, lambda m: m["topic"] == "farm" or m["year"] == 2000),
    ({"topic": "town", "year": {"$lt": 2005}}, lambda m: m["topic"] == "town" and m["year"] < 2005),
]
BY_SOURCE = {d.metadata["source"]: d.metadata for d in DOCS}


def _built(kind, folder):
    backend = Backend(kind, folder)
    idx = backend.open()
    idx.add_documents(DOCS)
    return backend, idx


@pytest.fixture(params=KINDS, scope="module")
def index(request, tmp_path_factory):
    """One index per store for the module's read-only tests (building it is most of their cost)."""
    backend, idx = _built(request.param, tmp_path_factory.mktemp(request.param))
    yield idx
    if backend.kind == "qdrant-local":
        backend.memory_store[0].close()


@pytest.fixture(params=KINDS)
def fresh_index(request, tmp_path):
    """An index of its own, for a test that writes to it."""
    backend, idx = _built(request.param, tmp_path)
    yield idx
    if backend.kind == "qdrant-local":
        backend.memory_store[0].close()


def expected_sources(passes):
    return {d.metadata["source"] for d in DOCS if passes(d.metadata)}


def test_unfiltered_results_mix_topics(index):
    """The premise of the filtered tests: without a filter the topics mix."""
    found = {d.metadata["topic"] for d in index.similarity_search(QUERY, k=9)}
    assert len(found) == 3


@pytest.mark.parametrize("spec,passes", FILTERS)
def test_every_face_honours_the_filter(index, spec, passes):
    want = expected_sources(passes)
    plain = index.similarity_search(QUERY, k=9, filter=spec)
    assert {d.metadata["source"] for d in plain} == want  # all that pass, only those
    scored = index.similarity_search_with_score(QUERY, k=2, filter=spec)
    assert len(scored) == min(2, len(want)) and all(passes(d.metadata) for d, _ in scored)
    mmr = index.max_marginal_relevance_search(QUERY, k=3, fetch_k=20, filter=spec)
    assert mmr and all(passes(d.metadata) for d in mmr)
    windows = index.as_retriever(search_kwargs={"filter": spec}).invoke(QUERY)
    assert windows and all(BY_SOURCE[d.metadata["source"]] == {k: d.metadata[k] for k in ("source", "topic", "year")}
                           and passes(d.metadata) for d in windows)
    for doc in windows:  # the window is the exact text of a passing source
        assert doc.page_content == index.engine.source_text(doc.metadata["source_id"])[
            doc.metadata["start_index"]:doc.metadata["end_index"]]
    bm25 = index.engine.bm25_search(QUERY, k=10, filter=spec)
    assert len(bm25) == 10 and {chunk_documents(index, [c])[0].metadata["source"] for c, _ in bm25} <= want
    dense = dense_documents(index, QUERY, k=10, search_type="similarity", filter=spec)
    assert len(dense) == 10 and all(passes(d.metadata) for d in dense)


def test_threshold_retriever_and_windowed_retriever_take_filters(index):
    plain = index.as_retriever(search_type="similarity_score_threshold",
                               search_kwargs={"score_threshold": 0.0, "k": 9, "filter": {"topic": "farm"}})
    assert {d.metadata["source"] for d in plain.invoke(QUERY)} == expected_sources(lambda m: m["topic"] == "farm")
    retriever = WindowedParentRetriever(index=index, filter={"year": {"$in": [2001, 2007]}}, budget_tokens=4000)
    assert {d.metadata["source"] for d in retriever.invoke(QUERY)} == {"r1.txt", "r7.txt"}


def test_a_filter_nothing_passes_gives_nothing(index):
    assert index.similarity_search(QUERY, k=3, filter={"topic": "space"}) == []
    assert index.as_retriever(search_kwargs={"filter": {"topic": "space"}}).invoke(QUERY) == []


@pytest.mark.parametrize("spec,message", [
    ({"topic": {"$like": "s%"}}, "unknown operator"),
    ({"start_index": 3}, "set by the index"),
    ({"$or": []}, "non-empty list"),
    ({"topic": {"$in": "sea"}}, "non-empty list"),
    ({"year": {"$gt": "2001"}}, "take a number"),
    ({}, "empty dict"),
])
def test_bad_filters_are_refused_with_the_reason(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_filter(spec)


def test_bad_filter_type_is_refused():
    with pytest.raises(TypeError, match="filter must be a dict"):
        parse_filter("topic=sea")


def test_command_line_pairs():
    assert filter_from_pairs(["source=a.md"]) == {"source": "a.md"}
    both = parse_filter(filter_from_pairs(["topic=sea", "year=2003"]))
    assert both.matches({"topic": "sea", "year": 2003}) and both.matches({"topic": "sea", "year": "2003"})
    assert not both.matches({"topic": "sea", "year": 2004})
    with pytest.raises(ValueError, match="KEY=VALUE"):
        filter_from_pairs(["topic"])


def test_each_store_gets_the_filter_pushed_down(index):
    from swrag_integrations.engine.filters import native_filter

    for spec, _ in FILTERS:
        if not hasattr(index.engine.vectors, "store"):  # the engine's own storage: its own native filter
            assert index.engine.vectors.native_filter(parse_filter(spec)) is not None, spec
            continue
        assert native_filter(parse_filter(spec), index.engine.vectors.store) is not None, type(index.engine.vectors.store).__name__


def test_llama_index_retriever_over_the_index_takes_metadata_filters(index):
    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    filters = MetadataFilters(filters=[MetadataFilter(key="topic", value=["sea", "farm"], operator=FilterOperator.IN),
                                       MetadataFilter(key="year", value=2004, operator=FilterOperator.LTE)])
    got = WindowedLlamaIndexRetriever(index, filters=filters, budget_tokens=4000).retrieve(QUERY)
    assert {n.node.metadata["source"] for n in got} == {"r0.txt", "r2.txt", "r3.txt"}


def test_llama_index_native_windows_leave_out_nodes_the_filter_excludes():
    from llama_index.core import Document as LIDocument
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    from swrag_integrations.llama_index import DynamicStepNodeParser
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    text = DOCS[0].page_content
    nodes = DynamicStepNodeParser(window_size=40, step=2).get_nodes_from_documents([LIDocument(text=text, id_="r0")])
    assert len(nodes) > 6
    for i, node in enumerate(nodes):
        node.metadata["part"] = "private" if i % 3 == 1 else "public"
    private = [(n.start_char_idx, n.end_char_idx) for n in nodes if n.metadata["part"] == "private"]
    vindex = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    unfiltered = WindowedLlamaIndexRetriever(vindex, k_child=len(nodes), budget_tokens=None, neighbors=2).retrieve(QUERY)
    public = [(n.start_char_idx, n.end_char_idx) for n in nodes if n.metadata["part"] == "public"]

    def only_public(a, b):  # every character of [a, b) lies in some public node
        return all(any(s <= c < e for s, e in public) for c in range(a, b))

    assert not all(only_public(n.node.start_char_idx, n.node.end_char_idx) for n in unfiltered)
    for filters in ({"part": "public"}, {"part": {"$ne": "private"}}):
        got = WindowedLlamaIndexRetriever(vindex, k_child=len(nodes), budget_tokens=None, neighbors=2,
                                          filters=filters).retrieve(QUERY)
        assert got and private
        for item in got:
            assert only_public(item.node.start_char_idx, item.node.end_char_idx)


@pytest.mark.slow
def test_swrag_ask_filter(tmp_path, capsys, fake_default_embeddings):
    import json

    from swrag_integrations.cli import app as cli

    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.txt", "b.txt"):
        (docs / name).write_text(f"The lighthouse of {name} was first lit in 1874. " * 3, encoding="utf-8")
    store = str(tmp_path / "store")
    assert cli.main(["index", str(docs), "--persist-dir", store]) == 0
    capsys.readouterr()
    ask = ["ask", "When was the lighthouse first lit?", "--persist-dir", store, "--retrieval-only", "--json"]
    assert cli.main(ask) == 0
    both = {s["source"] for s in json.loads(capsys.readouterr().out)["sources"]}
    assert {os.path.basename(s) for s in both} == {"a.txt", "b.txt"}
    only_b = str((docs / "b.txt").resolve())
    assert cli.main(ask + ["--filter", f"source={only_b}"]) == 0
    assert {s["source"] for s in json.loads(capsys.readouterr().out)["sources"]} == {only_b}


def test_a_document_without_the_key_passes_ne_and_nin_only(fresh_index):
    index = fresh_index
    untagged = Document(page_content="The lighthouse keeper of the untagged harbour saw fog and boats.",
                        metadata={"source": "untagged.txt", "year": 1999})
    index.add_documents([untagged])
    for spec, passes in [({"topic": {"$ne": "sea"}}, True), ({"topic": {"$nin": ["sea", "farm"]}}, True),
                         ({"topic": "sea"}, False), ({"topic": {"$in": ["sea", "town", "farm"]}}, False)]:
        plain = {d.metadata["source"] for d in index.similarity_search(QUERY, k=10, filter=spec)}
        windows = {d.metadata["source"] for d in index.as_retriever(search_kwargs={"filter": spec},
                                                                     budget_tokens=None).invoke(QUERY)}
        assert ("untagged.txt" in plain) is passes and ("untagged.txt" in windows) is passes, spec
