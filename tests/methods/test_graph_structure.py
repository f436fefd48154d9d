"""The passage-phrase graph on hand-made data: building, synonyms, personalized
PageRank and Leiden communities with known answers, persistence round trips."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from ci_switch import importorskip
from langchain_core.embeddings import Embeddings

importorskip("igraph")
importorskip("leidenalg")

from swrag_integrations.methods.graph.communities import detect_communities, extractive_report  # noqa: E402
from swrag_integrations.methods.graph.extraction import Extraction  # noqa: E402
from swrag_integrations.methods.graph.graph import Passage, PassageGraph  # noqa: E402


class TableEmbeddings(Embeddings):
    """Fixed vectors per text (unknown texts: a vector of their own)."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls: list[str] = []

    def embed_documents(self, texts):
        self.calls.extend(texts)
        out = []
        for t in texts:
            if t in self.table:
                out.append(self.table[t])
            else:
                rng = np.random.default_rng(abs(hash(t)) % 2**32)
                out.append(rng.normal(size=4).tolist())
        return out

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def P(sid: str, lo: int = 0, hi: int = 0) -> Passage:
    return Passage(sid, lo, hi, lo * 10, hi * 10 + 10)


def small_graph() -> PassageGraph:
    g = PassageGraph()
    g.add(P("a"), Extraction(entities=["Kiss and Tell", "Shirley Temple"],
                             triples=[("Kiss and Tell", "stars", "Shirley Temple")]))
    g.add(P("b"), Extraction(entities=["Shirley Temple", "Chief of Protocol"]))
    g.add(P("c"), Extraction(entities=["Ed Wood", "Tim Burton"]))
    return g


def test_build_tables_and_igraph():
    g = small_graph()
    assert g.stats() == {"phrases": 5, "passages": 3, "sources": 3, "mention_edges": 6, "triples": 1,
                         "relation_edges": 1, "synonym_edges": 0}
    assert sorted(g.phrase_passages()["shirley temple"]) == ["a:0-0", "b:0-0"]
    ig = g.igraph()
    assert ig.vcount() == 8 and ig.ecount() == 7  # 6 mentions + 1 triple
    index = g.node_index()
    eid = ig.get_eid(index[("phrase", "kiss and tell")], index[("phrase", "shirley temple")])
    assert ig.es[eid]["weight"] == 1.0
    # replacing a passage replaces its phrases; removing a source prunes its phrases
    g.add(P("c"), Extraction(entities=["Ed Wood"]))
    assert "tim burton" not in g.live_phrases()
    assert g.remove_sources(["c"]) == 1
    assert "ed wood" not in g.live_phrases() and "ed wood" not in g.names
    assert g.igraph().vcount() == 5  # 3 phrases + 2 passages
    with pytest.raises(TypeError):
        g.add(("a", 0, 0, 0, 1), Extraction())


def test_personalized_pagerank_known_answers():
    # two nodes, one edge, restart on A: p_A = 1/(1+d), p_B = d/(1+d)
    g = PassageGraph()
    g.add(P("a"), Extraction(entities=["Alpha"]))
    for d in (0.5, 0.85):
        scores = g.personalized_pagerank({("phrase", "alpha"): 1.0}, damping=d)
        phrases, pids = g.nodes()
        assert scores[0] == pytest.approx(1 / (1 + d)) and scores[1] == pytest.approx(d / (1 + d))
    # a larger graph: equal to networkx's pagerank with the same personalization
    g = small_graph()
    reset = {("phrase", "kiss and tell"): 2.0, ("passage", "c:0-0"): 1.0}
    scores = g.personalized_pagerank(reset, damping=0.5)
    ig = g.igraph()
    nxg = nx.Graph()
    nxg.add_nodes_from(range(ig.vcount()))
    for e in ig.es:
        nxg.add_edge(*e.tuple, weight=e["weight"])
    index = g.node_index()
    pers = {i: 0.0 for i in range(ig.vcount())}
    pers[index[("phrase", "kiss and tell")]] = 2.0
    pers[index[("passage", "c:0-0")]] = 1.0
    expected = nx.pagerank(nxg, alpha=0.5, personalization=pers, weight="weight", tol=1e-12, max_iter=1000)
    assert np.allclose(scores, [expected[i] for i in range(ig.vcount())], atol=1e-8)
    assert scores.sum() == pytest.approx(1.0)
    # the second hop: from "Kiss and Tell", passage b (no query phrase in it) beats the unrelated c
    only = g.personalized_pagerank({("phrase", "kiss and tell"): 1.0}, damping=0.5)
    assert only[index[("passage", "b:0-0")]] > 0 == only[index[("passage", "c:0-0")]]
    with pytest.raises(ValueError, match="reset"):
        g.personalized_pagerank({("phrase", "not there"): 1.0})
    with pytest.raises(ValueError, match="damping"):
        g.personalized_pagerank(reset, damping=1.0)


def test_synonym_edges_threshold_topk_cjk_and_incremental():
    emb = TableEmbeddings({"NYC": [1, 0, 0, 0], "New York City": [0.95, 0.31, 0, 0], "Paris": [0, 0, 1, 0],
                           "纽约": [0.99, 0.1, 0, 0], "纽约市": [0.99, 0.1, 0, 0]})
    g = PassageGraph(synonym_threshold=0.9, synonym_top_k=5)
    g.add(P("a"), Extraction(entities=["NYC", "Paris", "纽约"]))
    g.add(P("b"), Extraction(entities=["New York City", "纽约市"]))
    assert g.link_synonyms(emb) == 1
    assert set(g.synonyms) == {("new york city", "nyc")}  # Han phrases get no vector with an English model
    assert g.synonyms[("new york city", "nyc")] == pytest.approx(0.95 / np.linalg.norm([0.95, 0.31]), abs=1e-5)
    emb.calls.clear()
    g.add(P("c"), Extraction(entities=["NYC", "Big Apple"]))
    emb.table["Big Apple"] = [0.99, 0.14, 0, 0]
    assert g.link_synonyms(emb) == 2  # only the new phrase is embedded and linked
    assert emb.calls == ["Big Apple"]
    # a phrase removed and added again is embedded again
    g.remove_sources(["c"])
    assert all("big apple" not in pair for pair in g.synonyms)
    g.add(P("c"), Extraction(entities=["Big Apple"]))
    assert g.link_synonyms(emb) == 2
    cjk = PassageGraph(synonym_threshold=0.9, cjk_synonyms=True)
    cjk.add(P("a"), Extraction(entities=["纽约", "纽约市"]))
    assert cjk.link_synonyms(emb) == 1
    with pytest.raises(ValueError, match="synonym_threshold"):
        PassageGraph(synonym_threshold=0)


def two_cliques(n: int = 5, bridge: bool = True) -> PassageGraph:
    """Two groups of ``n`` phrases, each group co-mentioned in its own passages; one bridge triple."""
    g = PassageGraph()
    left = [f"Left{i}" for i in range(n)]
    right = [f"Right{i}" for i in range(n)]
    for i in range(3):
        g.add(P(f"l{i}"), Extraction(entities=left))
        g.add(P(f"r{i}"), Extraction(entities=right))
    if bridge:
        g.add(P("x"), Extraction(triples=[("Left0", "knows", "Right0")]))
    return g


def test_leiden_finds_the_two_cliques_and_is_reproducible():
    g = two_cliques()
    found = detect_communities(g, max_cluster_size=10, seed=3)
    assert [c.level for c in found] == [0, 0]
    assert sorted(sorted(c.phrases) for c in found) == [[f"left{i}" for i in range(5)], [f"right{i}" for i in range(5)]]
    assert [c.phrases for c in detect_communities(g, seed=3)] == [c.phrases for c in found]


def ring_of_cliques(n: int, m: int = 5) -> PassageGraph:
    """``n`` cliques of ``m`` phrases (co-mentioned), clique ``c`` tied to clique ``c+1`` by one triple."""
    g = PassageGraph()
    for c in range(n):
        g.add(P(f"c{c}"), Extraction(entities=[f"C{c}x{i}" for i in range(m)]))
        g.add(P(f"e{c}"), Extraction(triples=[(f"C{c}x0", "next", f"C{(c + 1) % n}x1")]))
    return g


def test_hierarchy_splits_only_large_communities():
    # Modularity's resolution limit: on a ring of 20 five-cliques the best level-0
    # partition pairs neighbouring cliques; re-partitioning a pair alone separates them.
    tree = detect_communities(ring_of_cliques(20), max_cluster_size=6, seed=1)
    top = [c for c in tree if c.level == 0]
    kids = [c for c in tree if c.level == 1]
    assert sum(len(c.phrases) for c in top) == 100 and max(c.level for c in tree) == 1

    def clique(key: str) -> str:
        return key.split("x")[0]

    for c in top:
        if len(c.phrases) > 6:
            assert len(c.children) == 2
            parts = [k for k in kids if k.id in c.children]
            assert all(k.parent == c.id and len({clique(p) for p in k.phrases}) == 1 for k in parts)
            assert sorted(p for k in parts for p in k.phrases) == sorted(c.phrases)
        else:
            assert c.children == [] and len({clique(p) for p in c.phrases}) == 1
    assert kids and all(len(k.phrases) == 5 for k in kids)
    flat = detect_communities(ring_of_cliques(20), max_cluster_size=6, seed=1, max_levels=1)
    assert [c.phrases for c in flat] == [c.phrases for c in top]
    with pytest.raises(ValueError, match="max_cluster_size"):
        detect_communities(ring_of_cliques(3), max_cluster_size=1)


def test_extractive_report_has_offsets_and_fits_budget():
    g = two_cliques()
    texts = {sid: f"{sid} text about Left0 and Left1. " * 20 for sid in ["l0", "l1", "l2", "r0", "r1", "r2", "x"]}
    community = [c for c in detect_communities(g, seed=0) if "left0" in c.phrases][0]
    report = extractive_report(g, community, texts, max_tokens=120)
    assert report.n_tokens <= 120 and report.kind == "extractive"
    assert report.entities[0] == "Left0"  # the most connected (the bridge)
    # the passages mentioning most of its entities first; "x" names only Left0
    assert [sid for sid, _, _ in report.passages] == ["l0", "l1", "l2", "x"]
    for sid, start, end in report.passages:
        assert f"[{sid} {start}-{end}]" in report.text


def test_persistence_round_trips(tmp_path):
    emb = TableEmbeddings({})
    g = small_graph()
    g.add(P("d", 1, 3), Extraction(entities=["纽约", "Shirley  Temple"]))
    g.link_synonyms(emb)
    g.meta.update(unit="medium", extractor="rule")
    g.source_hashes["a"] = "h1"
    again = PassageGraph.from_bytes(g.to_bytes())
    assert again == g and again.passages["d:1-3"] == P("d", 1, 3)
    g.save(tmp_path / "graph")
    assert sorted(p.name for p in (tmp_path / "graph").iterdir()) == ["graph.json", "phrase_vectors.npy"]
    loaded = PassageGraph.load(tmp_path / "graph")
    assert loaded == g
    assert np.array_equal(loaded.personalized_pagerank({("phrase", "ed wood"): 1.0}),
                          g.personalized_pagerank({("phrase", "ed wood"): 1.0}))
    raw = bytearray(g.to_bytes())
    raw[-10] ^= 0xFF
    with pytest.raises(ValueError, match="damaged"):
        PassageGraph.from_bytes(bytes(raw))
    with pytest.raises(ValueError, match="magic"):
        PassageGraph.from_bytes(b"pickle" + bytes(raw))
    g.add(P("e"), Extraction(entities=["Other"]))
    assert PassageGraph.from_bytes(g.to_bytes()) != loaded


def test_query_linking_respects_case_of_names():
    from swrag_integrations.methods.graph.common import QueryLinker

    g = PassageGraph()
    g.add(P("a"), Extraction(entities=["Government", "Kiss and Tell", "Corliss Archer", "Arthur's Magazine", "北京大学"]))
    g.add(P("b"), Extraction(entities=["Corliss Archer", "Meet Corliss Archer"]))
    linker = QueryLinker(g)
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    assert linker.lexical(question) == ["corliss archer", "kiss and tell"]  # "government" is not the heading's name
    assert linker.lexical("Which came first, Arthur’s Magazine or 北京大学?") == ["arthur's magazine", "北京大学"]
    assert linker.lexical("Meet Corliss Archer aired when?") == ["meet corliss archer"]  # the longest match only
    seeds = linker.link(question)
    # specificity: "Corliss Archer" is in two passages, "Kiss and Tell" in one
    assert [(s.key, s.weight, s.how) for s in seeds] == [("kiss and tell", 1.0, "lexical"),
                                                          ("corliss archer", 0.5, "lexical")]
