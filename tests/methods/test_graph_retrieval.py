"""Graph retrieval end to end on real HotpotQA passages (rule extractor, no LLM):
incremental builds over an index, the multi-hop step, retrievers for LangChain and
LlamaIndex (budget, exact offsets, call-time options), GraphRAG local and global search
with scripted fake LLMs, and ``swrag index --graph``."""

from __future__ import annotations

import argparse
import json

import pytest
from ci_switch import importorskip
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM

importorskip("igraph")
importorskip("leidenalg")

from swrag_integrations.evaluation.datasets import build_corpus, load_examples  # noqa: E402
from swrag_integrations.methods.graph import (  # noqa: E402
    GraphRAG,
    GraphRAGLocalLlamaIndexRetriever,
    GraphRAGLocalRetriever,
    HippoRAG,
    HippoRAGLlamaIndexRetriever,
    HippoRAGRetriever,
    LLMExtractor,
    build_graph,
    load_graph,
)
from swrag_integrations.methods.graph.graph import PassageGraph  # noqa: E402
from swrag_integrations.cli.graph import add_graph_arguments, update_graph  # noqa: E402
from swrag_integrations.methods.graph.communities import CommunityReport  # noqa: E402
from swrag_integrations.methods.graph.graphrag import GlobalSearch, parse_points  # noqa: E402
from swrag_integrations.langchain.index import SlidingWindowIndex  # noqa: E402
from swrag_integrations.engine.assemble import count_tokens  # noqa: E402

QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


@pytest.fixture(scope="module")
def corpus(shared_dir):
    examples = load_examples(shared_dir / "data" / "eval" / "hotpotqa.jsonl", limit=3)
    return examples, build_corpus(examples, split=True)


def make_index(path, sources):
    index = SlidingWindowIndex(path, embedding=DeterministicFakeEmbedding(size=16), show_progress=False,
                               strategy="DDS", window_size=128, step=2)
    index.engine.index_documents([Document(page_content=s.text, id=s.source_id, metadata={"title": s.title})
                           for s in sources])
    return index


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):
    examples, sources = corpus
    index = make_index(tmp_path_factory.mktemp("graph") / "index", sources)
    graph, report = build_graph(index)
    return index, graph, report, {s.title: s for s in sources}


def sid_of(index, title_map, title):
    return index.engine.resolve_ids([title_map[title].source_id])[0]


def test_build_over_index_exact_passages(built):
    index, graph, report, _ = built
    assert len(report.added) == 30 and report.removed == [] and report.unchanged == 0
    assert report.stats["phrases"] > 100 and report.stats["passages"] == report.passages
    assert report.extraction["passages"] == report.passages
    for p in graph.passages.values():  # passages keep exact offsets into their sources
        text = index.engine.source_text(p.source_id)
        rows = index.engine.chunk_rows([(p.source_id, p.lower, p.upper)])[p.source_id]
        assert (rows[0].start, rows[-1].end) == (p.start, p.end) and text[p.start:p.end] == "".join(r.text for r in rows)
    assert "shirley temple" in graph.live_phrases() and "corliss archer" in graph.live_phrases()


def test_incremental_build_and_store(corpus, tmp_path):
    examples, sources = corpus
    index = make_index(tmp_path / "index", sources[:10])
    graph, first = build_graph(index)
    again, second = build_graph(index, graph=graph)
    assert second.added == [] and second.unchanged == 10 and again == graph
    # a new source and a removed one: only they are touched
    index.engine.index_documents([Document(page_content=s.text, id=s.source_id) for s in sources[10:12]])
    index.delete([sources[0].source_id])
    graph, third = build_graph(index, graph=graph)
    assert len(third.added) == 2 and len(third.removed) == 1 and third.unchanged == 9
    fresh, _ = build_graph(index)
    assert graph.to_state()["mentions"] == fresh.to_state()["mentions"]
    assert graph.live_phrases() == fresh.live_phrases()
    with pytest.raises(ValueError, match="unit"):
        build_graph(index, graph=graph, unit="chunks")
    # swrag index --graph: stored in the source store, updated in place, rebuild on request
    parser = add_graph_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--graph"])
    update_graph(index, args)
    stored = load_graph(index)
    assert stored is not None and stored.to_state()["mentions"] == fresh.to_state()["mentions"]
    report = update_graph(index, args)
    assert report.added == [] and report.unchanged == 11
    with pytest.raises(ValueError, match="--graph-rebuild"):
        update_graph(index, parser.parse_args(["--graph", "--graph-unit", "chunks"]))
    report = update_graph(index, parser.parse_args(["--graph", "--graph-unit", "chunks", "--graph-rebuild"]))
    assert len(report.added) == 11 and load_graph(index).meta["unit"] == "chunks"
    # the LLM path of the command with a scripted LLM
    llm = FakeListLLM(responses=["garbage without any structure"])
    report = update_graph(index, parser.parse_args(["--graph", "--graph-llm", "--graph-rebuild"]), llm=llm)
    assert report.extraction["calls"] == report.passages and report.extraction["fallback"] == report.passages


def test_hipporag_reaches_the_second_hop(built):
    index, graph, _, titles = built
    temple = sid_of(index, titles, "Shirley Temple")
    assert "corliss" not in index.engine.source_text(temple).lower()  # the hop passage shares no query phrase
    hippo = HippoRAG(index, graph, graph_weight=1.0, passage_seed_weight=0.0)
    ranking = hippo.rank(QUESTION)
    assert {s.name for s in ranking.seeds} >= {"Corliss Archer", "Kiss and Tell"}
    top = [graph.passages[pid].source_id for pid, _ in ranking.passages[:5]]
    assert temple in top
    assert ranking.top_phrases[0][0] in ("Corliss Archer", "Kiss and Tell")
    # nothing linked and no hybrid search: nothing returned
    assert HippoRAG(index, graph, graph_weight=1.0, passage_seed_weight=0.0).rank("zzzz qqqq").passages == []


@pytest.mark.parametrize("kind", ["hippo", "local"])
def test_langchain_retrievers_budget_offsets_options(built, kind):
    index, graph, _, titles = built
    if kind == "hippo":
        retriever = HippoRAGRetriever(searcher=HippoRAG(index, graph), budget_tokens=300)
    else:
        searcher = GraphRAG(index, graph)
        searcher.build_communities()
        retriever = GraphRAGLocalRetriever(searcher=searcher, budget_tokens=300)
    docs = retriever.invoke(QUESTION)
    assert docs
    assert count_tokens("\n\n".join(d.page_content for d in docs)) <= 300
    for d in docs:
        m = d.metadata
        assert index.engine.source_text(m["source_id"])[m["start_index"]:m["end_index"]] == d.page_content
        assert d.id == f"{m['source_id']}:{m['start_index']}-{m['end_index']}"
        assert "graph_passage" in m and "Corliss Archer" in m["linked_phrases"]
    assert len(retriever.invoke(QUESTION, k=1)) == 1
    bigger = retriever.invoke(QUESTION, budget_tokens=1500)
    assert count_tokens("\n\n".join(d.page_content for d in bigger)) <= 1500
    assert sum(len(d.page_content) for d in bigger) > sum(len(d.page_content) for d in docs)
    with pytest.raises(TypeError, match="unexpected keyword"):
        retriever.invoke(QUESTION, top_k=3)
    with pytest.raises(ValueError):
        retriever.invoke(QUESTION, k=0)
    with pytest.raises(TypeError):
        (HippoRAGRetriever if kind == "local" else GraphRAGLocalRetriever)(searcher=retriever.searcher)


def test_llamaindex_retrievers_are_native(built):
    from llama_index.core.schema import NodeWithScore

    index, graph, _, _ = built
    searcher = GraphRAG(index, graph)
    for retriever in (HippoRAGLlamaIndexRetriever(HippoRAG(index, graph), budget_tokens=400),
                      GraphRAGLocalLlamaIndexRetriever(searcher, budget_tokens=400, k=2)):
        nodes = retriever.retrieve(QUESTION)
        assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
        for n in nodes:
            sid = n.node.metadata["source_id"]
            assert index.engine.source_text(sid)[n.node.start_char_idx:n.node.end_char_idx] == n.node.get_content()
        assert count_tokens("\n\n".join(n.node.get_content() for n in nodes)) <= 400
    assert len(nodes) <= 2
    with pytest.raises(TypeError):
        HippoRAGLlamaIndexRetriever(searcher)


def test_local_search_with_community_reports(built):
    index, graph, _, _ = built
    searcher = GraphRAG(index, graph)
    communities = searcher.build_communities()
    assert communities and all(len(c.phrases) <= 10 or c.children == [] or c.children for c in communities)
    ranking = searcher.rank(QUESTION)
    assert ranking.communities and ranking.passages
    retriever = GraphRAGLocalRetriever(searcher=searcher, budget_tokens=800, community_share=0.3)
    docs = retriever.invoke(QUESTION)
    reports = [d for d in docs if d.metadata.get("kind") == "community_report"]
    windows = [d for d in docs if d.metadata.get("kind") != "community_report"]
    assert reports and windows
    assert count_tokens("\n\n".join(d.page_content for d in docs)) <= 800 + 2 * len(reports)
    assert sum(count_tokens(d.page_content) for d in reports) <= 0.3 * 800
    for sid, start, end in json.loads(reports[0].metadata["report_passages"]):
        assert 0 <= start < end <= len(index.engine.source_text(sid))


def test_llm_reports_and_global_search_with_scripted_llms(built):
    index, graph, _, _ = built
    searcher = GraphRAG(index, graph)
    searcher.build_communities()
    leaves = searcher.level_communities(None)[:4]
    answers = ["TITLE: Films\nSUMMARY: These entities are films of the 1940s and the actors in them.",
               "nonsense", "TITLE: only a title", "SUMMARY: A group of American writers and their books."]
    stats = searcher.build_reports(FakeListLLM(responses=answers), communities=leaves)
    assert stats["llm_calls"] == 4 and stats["llm_failed"] == 2
    kinds = [searcher.reports[c.id].kind for c in leaves]
    assert kinds == ["llm", "extractive", "extractive", "llm"]
    assert searcher.reports[leaves[0].id].title == "Films"
    assert searcher.reports[leaves[0].id].passages  # offsets kept from the extractive material
    # global search: map answers in several shapes (and garbage), then the reduce
    maps = ["- [90] Shirley Temple played Corliss Archer.\n- [10] Films were made.", "NONE",
            "!!! ??? {[", "Score: 70 - She became Chief of Protocol."]
    packed = searcher.global_search(FakeListLLM(responses=["x"]), map_tokens=300)
    assert all(count_tokens(b) <= 300 + 2 * b.count("\n\n") for b in packed.batches())
    reports = [CommunityReport(f"c{i}", 0, f"t{i}", f"report {i} " + "word " * 100, ["e"], [("s", 0, 1)],
                               count_tokens(f"report {i} " + "word " * 100), rank=float(10 - i)) for i in range(4)]
    gs = GlobalSearch(reports, FakeListLLM(responses=maps + ["She was Chief of Protocol."]), map_tokens=150,
                      reduce_tokens=60)
    assert [b.split()[:2] for b in gs.batches()] == [["report", str(i)] for i in range(4)]
    result = gs.invoke(QUESTION)
    assert result.answer == "She was Chief of Protocol."
    assert [p[:2] for p in result.points] == [(90, "Shirley Temple played Corliss Archer."),
                                             (70, "She became Chief of Protocol."), (10, "Films were made.")]
    s = result.stats
    assert (s["calls"], s["map_calls"], s["reduce_calls"], s["failed_maps"], s["reports"]) == (5, 4, 1, 1, 4)
    assert s["prompt_tokens"] > 4 * 100 and s["answer_tokens"] > 0
    from swrag_integrations.methods.graph.langchain import global_search_runnable

    runnable = global_search_runnable(gs)  # the LangChain face of the framework-free search
    assert runnable.name == "GraphRAGGlobalSearch"
    assert runnable.invoke(QUESTION).answer == "She was Chief of Protocol."
    assert not hasattr(gs, "as_runnable")  # the core imports no LangChain
    # no point at all: no reduce call, the no-answer text
    silent = searcher.global_search(FakeListLLM(responses=["NONE"]), max_reports=2)
    got = silent.invoke(QUESTION)
    assert got.stats["reduce_calls"] == 0 and got.answer.startswith("I do not know")


@pytest.mark.parametrize("text, expected", [
    ("- [80] A point here.\n- [20] Another point.", [(80, "A point here."), (20, "Another point.")]),
    ("1. (65) First point.\n2. 30: Second point.", [(65, "First point."), (30, "Second point.")]),
    ("* A point without score.", [(50, "A point without score.")]),
    ("A short claim (score: 40).", [(40, "A short claim")]),
    ("NONE", []), ("- [900] too big a score", []), (None, []),
])
def test_parse_points(text, expected):
    assert parse_points(text) == expected


def test_llm_extractor_graph_with_triples(corpus, tmp_path):
    """The LLM path end to end with a scripted LLM answering triples for every passage."""
    examples, sources = corpus
    index = make_index(tmp_path / "index", sources[:3])
    llm = FakeListLLM(responses=["Scott Derrickson | directed | Doctor Strange\n{garbage", "???",
                                 '{"triples": [["Ed Wood", "directed", "Plan 9 from Outer Space"]]}'])
    graph, report = build_graph(index, LLMExtractor(llm))
    assert report.extraction["calls"] == report.passages
    assert isinstance(graph, PassageGraph) and report.stats["passages"] == report.passages
    assert report.extraction["failed"] + sum(report.extraction["parsed"].get(k, 0) for k in ("json", "list", "prose")) \
        == report.passages


def test_passage_hits_focus_chunk(built):
    from swrag_integrations.methods.graph.common import passage_hits

    index, graph, _, _ = built
    multi = [pid for pid, p in graph.passages.items() if p.upper > p.lower]
    assert multi, "the test needs a passage of several chunks"
    pid = multi[0]
    p = graph.passages[pid]
    whole = passage_hits(index.engine, graph, [(pid, 0.6)], focus=False)
    assert [h.chunk_index for h in whole] == list(range(p.lower, p.upper + 1))
    assert sum(h.score for h in whole) == pytest.approx(0.6)  # the passage's score, divided among its chunks
    # focus: the hybrid search's chunk when there is one ...
    got = passage_hits(index.engine, graph, [(pid, 0.6)], best_chunks={pid: p.upper})
    assert [(h.chunk_index, h.score) for h in got] == [(p.upper, 0.6)]
    # ... else the chunk holding the most phrase weight (the first one without any)
    last_text = index.engine.chunk_rows([(p.source_id, p.upper, p.upper)])[p.source_id][0].text
    key = next(k for k in graph.mentions[pid] if k in last_text.lower() and k not in
               index.engine.chunk_rows([(p.source_id, p.lower, p.lower)])[p.source_id][0].text.lower())
    assert [h.chunk_index for h in passage_hits(index.engine, graph, [(pid, 1.0)], phrase_weights={key: 1.0})] == [p.upper]
    assert [h.chunk_index for h in passage_hits(index.engine, graph, [(pid, 1.0)])] == [p.lower]
    for h in got:  # the hit keeps its own window and exact offsets
        rows = index.engine.chunk_rows([(h.source_id, h.chunk_index, h.chunk_index)])[h.source_id]
        assert (rows[0].start, rows[0].end) == (h.start, h.end) and h.lower <= h.chunk_index <= h.upper
