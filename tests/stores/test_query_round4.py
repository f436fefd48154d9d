"""The query path, round 4 (issues 39 and 42): k checked and clipped once in the engine,
MMR work that grows linearly, call-time options of the windowed retriever, window
relevances in [0, 1], and one filter meaning on every store."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryByteStore
from langchain_core.vectorstores import InMemoryVectorStore

from fake_embeddings import TrigramEmbedder
from stores import POSTGRES, STORES, store_kwargs
from swrag_integrations.engine.assemble import ContextSpan, assemble_context, count_tokens
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.stores import chroma as chroma_module
from swrag_integrations.langchain.search import CJKBM25Retriever
from swrag_integrations.langchain.search import chunk_documents

STORY = " ".join(f"Sentence {i} tells how keeper {i % 7} of the lighthouse logged fog at dawn." for i in range(300))


def _open(kind: str, folder, **kw) -> SlidingWindowIndex:
    if kind == "qdrant-local":  # LangChain's QdrantVectorStore over a local Qdrant folder
        from test_retrieval_backends import Backend

        return Backend(kind, folder).open(**kw)
    if kind == "in-memory":
        return SlidingWindowIndex(vectorstore=InMemoryVectorStore(TrigramEmbedder()), source_store=InMemoryByteStore(),
                                  show_progress=False, **kw)
    return SlidingWindowIndex(folder / "idx", embedding=TrigramEmbedder(), show_progress=False,
                              **store_kwargs(kind), **kw)


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """One long document in an embedded Chroma index (hundreds of small chunks)."""
    idx = _open("chroma", tmp_path_factory.mktemp("story"))
    idx.add_documents([Document(page_content=STORY, metadata={"source": "story.txt"})])
    return idx


# ----------------------------------------------------------------- item 5: k checked and clipped


@pytest.mark.parametrize("k", [10**12, sys.maxsize])
def test_huge_k_is_clipped_to_the_index_size_before_any_backend(story, k):
    size = story.engine.count("small")
    assert 100 < size < 10**6
    hits = story.engine.bm25_search("keeper fog", k)
    assert 0 < len(hits) <= size
    assert len(story.engine.dense_ids("keeper fog", k, search_type="similarity")) == size
    assert len(story.engine.search_children("keeper fog", k)) <= size
    assert [d.metadata["source"] for d in story.similarity_search("keeper fog", k)] == ["story.txt"]
    assert len(CJKBM25Retriever.from_index(story, k).invoke("keeper fog")) == len(hits)
    assert len(story.as_retriever(k_child=k, budget_tokens=200).invoke("keeper fog")) >= 1


@pytest.mark.parametrize("k", [0, -3, True, 2.5, "3", None])
def test_bad_k_is_refused_with_a_one_line_value_error(story, k):
    for call in (lambda: story.engine.bm25_search("fog", k), lambda: story.engine.dense_ids("fog", k),
                 lambda: story.engine.search_children("fog", k), lambda: story.similarity_search("fog", k),
                 lambda: story.max_marginal_relevance_search("fog", k)):
        with pytest.raises(ValueError, match=r"^k must be a positive int, got "):
            call()
    with pytest.raises(ValueError, match="^fetch_k must be a positive int"):
        story.max_marginal_relevance_search("fog", 2, fetch_k=0)


def test_huge_k_reaches_the_keyword_backend_clipped(story, monkeypatch):
    asked = []
    search = type(story.engine.keyword).search

    def spy(self, query, k, **kw):
        asked.append(k)
        return search(self, query, k, **kw)

    monkeypatch.setattr(type(story.engine.keyword), "search", spy)
    story.engine.search_children("keeper fog", 10**12)
    assert asked == [story.engine.count("small")]


# ----------------------------------------------------------------- item 4: MMR work


def test_mmr_select_costs_one_similarity_column_per_pick(monkeypatch):
    rng = np.random.default_rng(0)
    cands = rng.normal(size=(300, 16)).astype(np.float32)
    query = rng.normal(size=16)
    expected = _mmr_reference(query, cands, 300, 0.5)
    work = []
    cosine = chroma_module._cosine
    monkeypatch.setattr(chroma_module, "_cosine", lambda a, b: work.append(a.shape[0] * b.shape[0]) or cosine(a, b))
    assert chroma_module.mmr_select(query, cands, 300, 0.5) == expected
    assert sum(work) <= 2 * 300 * 300  # was sum over picks of 300 * picks (~13.5 M)


def _mmr_reference(query, cands, k, lam):
    """The textbook MMR, recomputing the redundancy against every chosen candidate."""
    def cos(a, b):
        return (a @ b.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    rel = cos(np.asarray(query, dtype=np.float32)[None, :], cands)[0]
    chosen = [int(np.argmax(rel))]
    while len(chosen) < k:
        score = lam * rel - (1 - lam) * cos(cands, cands[chosen]).max(axis=1)
        score[chosen] = -np.inf
        chosen.append(int(np.argmax(score)))
    return chosen


@pytest.mark.parametrize("filtered", [False, True])
def test_mmr_on_a_one_document_index_searches_once(story, monkeypatch, filtered):
    calls = []
    search = type(story.engine.vectors).search

    def spy(self, vector, k, **kw):
        calls.append((k, kw.get("fetch_k")))
        return search(self, vector, k, **kw)

    monkeypatch.setattr(type(story.engine.vectors), "search", spy)
    extra = {"filter": {"source": "story.txt"}} if filtered else {}
    docs = story.max_marginal_relevance_search("keeper fog dawn", k=3, **extra)
    assert [d.metadata["source"] for d in docs] == ["story.txt"]
    assert len(calls) == 1 and calls[0][0] <= 20, calls  # was: fetch x4 until every chunk, MMR over all


# ----------------------------------------------------------------- item 2: call-time options


def test_invoke_takes_a_filter_per_call(tmp_path):
    idx = _open("chroma", tmp_path)
    idx.add_documents([Document(page_content=f"The keeper of harbour {t} logged fog and boats. " * 20,
                                metadata={"source": f"{t}.txt", "topic": t}) for t in ("sea", "town", "farm")])
    retriever = idx.as_retriever(budget_tokens=None)
    assert {d.metadata["topic"] for d in retriever.invoke("keeper fog boats")} == {"sea", "town", "farm"}
    assert {d.metadata["topic"] for d in retriever.invoke("keeper fog boats", filter={"topic": "town"})} == {"town"}
    narrowed = idx.as_retriever(budget_tokens=None, filter={"topic": {"$ne": "farm"}})
    assert {d.metadata["topic"] for d in narrowed.invoke("keeper fog boats", filter={"topic": "farm"})} == {"farm"}
    assert {d.metadata["topic"] for d in narrowed.invoke("keeper fog boats")} == {"sea", "town"}
    with pytest.raises(ValueError, match="unknown operator"):
        retriever.invoke("keeper", filter={"topic": {"$like": "s%"}})
    with pytest.raises(TypeError, match="unexpected keyword argument.*search_type.*accepts"):
        retriever.invoke("keeper", search_type="mmr")


# ----------------------------------------------------------------- assemble_context (shared README)

ZH = "".join(f"第{i}段：城市{i}号以出产丝绸闻名，市长名叫张{i}。" for i in range(40))
EN = "".join(f"Linden & Rowe shipped {i} crates of tea to Port{i}. " for i in range(40))


@pytest.mark.parametrize("first", ["zh", "en"])
@pytest.mark.parametrize("scores", [(0.0, 0.0), (0.9, 0.1), (0.1, 0.9)])
def test_two_spans_budget_333_cut_only_at_allowed_points(first, scores):
    """The shared README's property-test failure: (zh, 187-504, no inner boundaries) and a
    one-character en span without boundaries, budget 333, separator '': the zh span was
    cut at 503 (neither 187 nor 504) while the en span was kept too."""
    for e0 in range(0, len(EN) - 1, 37):
        zh = ContextSpan("zh", 187, 504, ZH[187:504], score=scores[0], boundaries=())
        en = ContextSpan("en", e0, e0 + 1, EN[e0:e0 + 1], score=scores[1], boundaries=None)
        ctx = assemble_context([zh, en] if first == "zh" else [en, zh], 333, separator="")
        assert count_tokens(ctx.text) <= 333
        if len(ctx.spans) > 1:
            assert all((s.start, s.end) == (187, 504) for s in ctx.spans if s.source_id == "zh"), ctx.spans


# ----------------------------------------------------------------- item 3: one filter meaning

FILTER_STORES = ["in-memory", "qdrant-local", *STORES, POSTGRES]
TYPED = [("bool-true", True), ("int-one", 1), ("float-one", 1.0), ("bool-false", False), ("int-zero", 0),
         ("text-one", "1"), ("big", 2**62)]


@pytest.fixture(scope="module", params=FILTER_STORES)
def typed(request, tmp_path_factory):
    """An index per store whose sources differ only in the type of ``n``."""
    idx = _open(request.param, tmp_path_factory.mktemp(request.param))
    idx.add_documents([Document(page_content=f"Logbook {name}: the keeper noted fog, boats and the tide. " * 6,
                                metadata={"source": f"{name}.txt", "n": value}) for name, value in TYPED])
    idx.add_documents([Document(page_content="Logbook untagged: the keeper noted fog, boats and the tide. " * 6,
                                metadata={"source": "untagged.txt"})])
    yield idx
    idx.close()


def _everywhere(idx, spec):
    """The sources each search face returns under ``spec``."""
    q = "keeper fog boats tide logbook"
    plain = {d.metadata["source"] for d in idx.similarity_search(q, k=20, filter=spec)}
    mmr = {d.metadata["source"] for d in idx.max_marginal_relevance_search(q, k=20, filter=spec)}
    bm25 = {chunk_documents(idx, [cid])[0].metadata["source"] for cid, _ in idx.engine.bm25_search(q, 200, filter=spec)}
    dense = {chunk_documents(idx, [cid])[0].metadata["source"] for cid in idx.engine.dense_ids(q, 200, filter=spec)}
    windows = {d.metadata["source"] for d in idx.as_retriever(budget_tokens=None, k_child=200, filter=spec).invoke(q)}
    return {"plain": plain, "mmr": mmr, "bm25": bm25, "dense": dense, "windows": windows}


@pytest.mark.parametrize("spec, wanted", [
    ({"n": 1}, {"int-one", "float-one"}),
    ({"n": True}, {"bool-true"}),
    ({"n": 0}, {"int-zero"}),
    ({"n": False}, {"bool-false"}),
    ({"n": {"$in": [1, False]}}, {"int-one", "float-one", "bool-false"}),
    ({"n": {"$ne": 1}}, {"bool-true", "bool-false", "int-zero", "text-one", "big", "untagged"}),
    ({"n": {"$nin": [True, 0]}}, {"int-one", "float-one", "bool-false", "text-one", "big", "untagged"}),
    ({"n": {"$gte": 1}}, {"int-one", "float-one", "big"}),
    ({"n": 2**62}, {"big"}),
    ({"n": "1"}, {"text-one"}),
])
def test_one_filter_meaning_on_every_store_and_face(typed, spec, wanted):
    got = _everywhere(typed, spec)
    assert all(found == {f"{w}.txt" for w in wanted} for found in got.values()), got


def test_a_long_in_list_is_answered_on_every_store(typed):
    spec = {"n": {"$in": [*range(2, 40_003), 1]}}
    got = _everywhere(typed, spec)
    assert all(found == {"int-one.txt", "float-one.txt"} for found in got.values()), got


@pytest.mark.parametrize("kind", FILTER_STORES)
def test_control_characters_and_quotes_in_values_and_keys(tmp_path, kind):
    idx = _open(kind, tmp_path)
    odd = "tab\tline\nbell\x07 quote\" back\\slash"
    idx.add_documents([Document(page_content="The keeper noted fog and boats. " * 6,
                                metadata={"source": "odd.txt", "label": odd, "k\x01y": "v"}),
                       Document(page_content="The keeper noted fog and tide. " * 6,
                                metadata={"source": "plain.txt", "label": "plain"})])
    for spec, wanted in [({"label": odd}, {"odd.txt"}), ({"label": {"$in": [odd, "x"]}}, {"odd.txt"}),
                         ({"k\x01y": "v"}, {"odd.txt"}), ({"label": "plain"}, {"plain.txt"})]:
        got = _everywhere(idx, spec)
        assert all(found == wanted for found in got.values()), (kind, spec, got)
    idx.close()


@pytest.mark.parametrize("spec, message", [
    ({"n": float("nan")}, "not a comparable number"),
    ({"n": {"$gt": float("inf")}}, "not a comparable number"),
    ({"n": {"$in": [1, float("-inf")]}}, "not a comparable number"),
    ({"n": 2**63}, "outside the 64-bit range"),
    ({"n": {"$nin": [-2**63 - 1]}}, "outside the 64-bit range"),
])
def test_values_no_store_compares_exactly_are_refused(typed, spec, message):
    from swrag_integrations.engine.filters import parse_filter

    with pytest.raises(ValueError, match=message):
        parse_filter(spec)
    with pytest.raises(ValueError, match=message):
        typed.similarity_search("keeper", k=2, filter=spec)
    with pytest.raises(ValueError, match=message):
        typed.as_retriever().invoke("keeper", filter=spec)


def test_deep_filters_are_refused_beyond_the_documented_depth():
    from swrag_integrations.engine.filters import MAX_DEPTH, parse_filter

    def nested(levels):
        spec = {"topic": "sea"}
        for _ in range(levels - 1):
            spec = {"$or": [spec]}
        return spec

    assert parse_filter(nested(MAX_DEPTH)).matches({"topic": "sea"})
    for levels in (MAX_DEPTH + 1, 400):
        with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
            parse_filter(nested(levels))


# ----------------------------------------------------------------- item 1: window relevance

TOPIC_DOCS = [
    Document(page_content=" ".join(f"The lighthouse keeper on Marrow Point lit the lamp at dusk on day {i}."
                                   for i in range(30)), metadata={"source": "lighthouse.txt"}),
    *(Document(page_content=" ".join(f"Recipe {j}.{i}: whisk {w} flour with sugar, bake for {i} minutes."
                                     for i in range(30)), metadata={"source": f"recipe{j}.txt"})
      for j, w in enumerate(["rye", "oat", "spelt"])),
]


def _cos(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def topics(tmp_path_factory):
    idx = _open("chroma", tmp_path_factory.mktemp("topics"))
    idx.add_documents(TOPIC_DOCS)
    return idx


def test_windows_carry_the_best_cosine_of_their_hits_as_relevance(topics):
    emb = TrigramEmbedder()
    question = "When did the keeper light the lighthouse lamp?"
    docs = topics.as_retriever(budget_tokens=None).invoke(question)
    assert docs
    qvec = emb.embed_query(question)
    for doc in docs:
        rel = doc.metadata["relevance"]
        assert 0.0 <= rel <= 1.0
        src = topics.engine.source_text(doc.metadata["source_id"])
        hit_cos = [max(0.0, _cos(qvec, emb.embed_query(row.text)))
                   for row in topics.engine.chunk_rows([(doc.metadata["source_id"], i, i)
                                                 for i in doc.metadata["hit_chunk_indices"]])[doc.metadata["source_id"]]]
        assert rel == pytest.approx(max(hit_cos), abs=1e-5), (doc.metadata, src[:40])
    best = max(docs, key=lambda d: d.metadata["relevance"])
    assert best.metadata["source"] == "lighthouse.txt"


def test_min_relevance_keeps_unrelated_sources_out_of_the_budget(topics):
    question = "When did the keeper light the lighthouse lamp?"
    everything = topics.as_retriever(budget_tokens=1500).invoke(question)
    assert {d.metadata["source"] for d in everything} > {"lighthouse.txt"}  # the budget fills with recipes
    lighthouse = max(d.metadata["relevance"] for d in everything if d.metadata["source"] == "lighthouse.txt")
    recipes = max(d.metadata["relevance"] for d in everything if d.metadata["source"] != "lighthouse.txt")
    assert recipes < lighthouse
    floor = (lighthouse + recipes) / 2
    kept = topics.as_retriever(budget_tokens=1500, min_relevance=floor).invoke(question)
    assert {d.metadata["source"] for d in kept} == {"lighthouse.txt"}
    assert all(d.metadata["relevance"] >= floor for d in kept)
    per_call = topics.as_retriever(budget_tokens=1500).invoke(question, min_relevance=floor)
    assert [d.id for d in per_call] == [d.id for d in kept]
    # the default keeps the ranking: the same documents in the same order, relevance or not
    assert [d.id for d in topics.as_retriever(budget_tokens=1500, min_relevance=0.0).invoke(question)] == \
        [d.id for d in everything]


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.3", float("nan")])
def test_min_relevance_is_checked(topics, bad):
    with pytest.raises(ValueError, match=r"min_relevance must be a number in \[0, 1\]"):
        topics.as_retriever(min_relevance=bad)
    with pytest.raises(ValueError, match=r"min_relevance must be a number in \[0, 1\]"):
        topics.as_retriever().invoke("keeper", min_relevance=bad)


def test_llama_index_similarity_cutoff_keeps_relevant_windows(topics):
    from llama_index.core.postprocessor import SimilarityPostprocessor
    from llama_index.core.schema import QueryBundle

    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    question = "When did the keeper light the lighthouse lamp?"
    nodes = WindowedLlamaIndexRetriever(index=topics, budget_tokens=None).retrieve(question)
    assert nodes and all(0.0 <= n.score <= 1.0 for n in nodes)
    kept = SimilarityPostprocessor(similarity_cutoff=0.3).postprocess_nodes(nodes, QueryBundle(question))
    assert any(n.node.metadata.get("source") == "lighthouse.txt" for n in kept)


def test_trace_leaves_out_the_hits_below_the_floor(topics):
    question = "When did the keeper light the lighthouse lamp?"
    full = topics.as_retriever(budget_tokens=1500).trace(question)
    rels = sorted({h.metadata["relevance"] for h in full.hits})
    assert len(rels) > 2 and all(0.0 <= r <= 1.0 for r in rels)
    floor = rels[len(rels) // 2]
    floored = topics.as_retriever(budget_tokens=1500, min_relevance=floor).trace(question)
    assert floored.hits and all(h.metadata["relevance"] >= floor for h in floored.hits)
    assert len(floored.hits) < len(full.hits)
    docs = topics.as_retriever(budget_tokens=1500, min_relevance=floor).invoke(question)
    assert [(d.metadata["source_id"], d.metadata["start_index"], d.metadata["end_index"]) for d in docs] == \
        [(s.source_id, s.start, s.end) for s in floored.spans]


def test_in_lists_check_types_like_equality():
    from swrag_integrations.engine.filters import parse_filter

    flt = parse_filter({"n": {"$in": [1, "a", False]}})
    assert [flt.matches({"n": v}) for v in (1, 1.0, True, False, 0, "a", "b", [1])] == \
        [True, True, False, True, False, True, False, False]
    nin = parse_filter({"n": {"$nin": [1]}})
    assert [nin.matches({"n": v}) for v in (1, 1.0, True, 2)] == [False, False, True, True]
