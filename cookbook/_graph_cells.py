"""Cells of ``07_graph.ipynb``: a multi-hop question walked through the passage-phrase graph.

``cookbook/_build.py`` includes them with ``cells(md, code, SETUP)`` (its own cell
helpers and shared first cell), so the notebook is written and executed like the others.
"""

from __future__ import annotations


def cells(md, code, setup: str) -> list:
    """The notebook's cells, made with ``_build.py``'s ``md``/``code`` helpers."""
    return [
        md("""
        # 7 · Graph retrieval: a multi-hop question through HippoRAG and GraphRAG

        *"Which university did the director of Harbor Lights attend?"* needs two passages: the
        one about the film names its director, the one about the director names the
        university -- and the second never mentions the film. Chunk retrieval finds the first
        and misses the second unless one chunk happens to name both.

        `swrag_integrations.methods.graph` builds one **passage-phrase graph** over an index's chunks
        (phrases from a rule extractor here, no LLM; any LangChain LLM can give triples
        instead), then

        * **HippoRAG**: links the question to phrases, runs personalized PageRank from them and
          ranks passages by their probability; the passages are widened to windows and merged by
          offset under the token budget, like the windowed parent retriever;
        * **GraphRAG**: partitions the phrases into a Leiden community hierarchy with a report per
          community; *local search* answers from the question's entities and their communities,
          *global search* maps the question over the reports and reduces the points.
        """),
        code(setup),
        md("""
        ## A small corpus with a two-hop question

        Eight short made-up passages (a film, its director, her university, and distractors).
        They go into a `SlidingWindowIndex` (bundled MiniLM embeddings, BM25, exact offsets).
        """),
        code('''
import tempfile
from langchain_core.documents import Document
from swrag_integrations.langchain.index import SlidingWindowIndex

PASSAGES = {
    "Harbor Lights (1952 film)": "Harbor Lights is a 1952 drama film directed by Mara Quill and starring Tom Ashby. "
        "It follows a lighthouse keeper on the coast of Kessel Bay during a long winter storm.",
    "Mara Quill": "Mara Quill (1915-1990) was a film director and screenwriter. She studied painting at "
        "Corran University before moving to the film industry in 1946, and she directed nine features.",
    "Corran University": "Corran University is a private university in Lisford, founded in 1821. "
        "Its school of fine arts is the oldest in the region.",
    "Tom Ashby": "Tom Ashby was an actor known for westerns. He attended Hallow College and served in the navy.",
    "Kessel Bay": "Kessel Bay is a fishing town with a granite lighthouse first lit in 1874.",
    "Winter Storm (1950 film)": "Winter Storm is a 1950 thriller directed by Edwin Marr about a ship lost at sea.",
    "Edwin Marr": "Edwin Marr was a director who trained at Lisford Polytechnic and worked in London.",
    "Lisford": "Lisford is a river city known for its university, its markets and its bridges.",
}
QUESTION = "Which university did the director of Harbor Lights attend?"

workdir = tempfile.TemporaryDirectory(prefix="swrag-graph-")
index = SlidingWindowIndex(workdir.name, show_progress=False, strategy="DDS", window_size=128, step=2)
index.engine.index_documents([Document(page_content=f"{title}\\n{text}", id=title, metadata={"title": title})
                       for title, text in PASSAGES.items()])
title_of = {sid: index.engine.get_chunks([f"{sid}:s:0"])[0].metadata["title"] for sid in index.engine.source_ids()}
print(f"{len(title_of)} sources, {index.engine.count()} small chunks")
'''),
        md("""
        ## The graph

        `build_graph` cuts every source into passages (the index's medium chunks by default,
        exact offsets), extracts phrases, and adds synonym edges between phrases whose MiniLM
        vectors are close. Re-running it later only extracts new or changed sources.
        """),
        code('''
from swrag_integrations.methods.graph import build_graph

graph, report = build_graph(index)
print(report.summary())
for pid, passage in list(graph.passages.items())[:3]:
    names = [graph.names[k] for k in graph.mentions[pid]]
    print(f"{title_of[passage.source_id]:<26} chars {passage.start}-{passage.end}: {names}")
'''),
        md("""
        ## Step by step: link, spread, rank

        The question's phrases are linked to graph nodes (verbatim matches, and its entities by
        embedding), each weighted by its specificity (1 / passages that mention it). Personalized
        PageRank spreads from them: *Harbor Lights* reaches the film passage, the film passage
        reaches *Mara Quill*, and *Mara Quill* reaches her own passage -- which names the university.
        """),
        code('''
from swrag_integrations.methods.graph import HippoRAG

hippo = HippoRAG(index, graph, graph_weight=1.0, passage_seed_weight=0.0)   # the graph alone, for the walk
ranking = hippo.rank(QUESTION, k_passages=5)
print("seeds:", [(s.name, round(s.weight, 3), s.how) for s in ranking.seeds])
print("phrases with most probability:", [(n, round(p, 3)) for n, p in ranking.top_phrases[:6]])
for rank, (pid, score) in enumerate(ranking.ppr[:5], start=1):
    print(f"{rank}. {title_of[graph.passages[pid].source_id]:<26} ppr={score:.4f}")
'''),
        md("""
        The windowed parent retriever (hybrid BM25 + dense small chunks) for comparison: it finds
        the film passage; whether the director's passage comes along depends on word overlap with
        the question.
        """),
        code('''
parent = index.as_retriever(budget_tokens=120)
print([title_of[d.metadata["source_id"]] for d in parent.invoke(QUESTION)])
'''),
        md("""
        ## HippoRAG as a LangChain and a LlamaIndex retriever

        The default fuses the graph's ranking with the hybrid one (`graph_weight=0.5`, weighted
        RRF); the passages are widened to their windows and merged by offset under the budget.
        Every document is exact source text (`text[start_index:end_index]`); `k`, `k_passages`
        and `budget_tokens` also work per call.
        """),
        code('''
from swrag_integrations.methods.graph import HippoRAGLlamaIndexRetriever, HippoRAGRetriever
from swrag_integrations.engine.assemble import count_tokens

retriever = HippoRAGRetriever(searcher=HippoRAG(index, graph), budget_tokens=150)
docs = retriever.invoke(QUESTION)
print(f"{count_tokens(chr(10).join(d.page_content for d in docs))} tokens (budget 150)")
for d in docs:
    m = d.metadata
    assert index.engine.source_text(m["source_id"])[m["start_index"]:m["end_index"]] == d.page_content
    print(f"{title_of[m['source_id']]:<26} chars {m['start_index']}-{m['end_index']}  linked: {m['linked_phrases']}")

nodes = HippoRAGLlamaIndexRetriever(HippoRAG(index, graph), budget_tokens=150).retrieve(QUESTION)
print([(title_of[n.node.metadata["source_id"]], n.node.start_char_idx, n.node.end_char_idx) for n in nodes])
'''),
        md("""
        ## GraphRAG: communities and local search

        The phrase graph (co-mentions, synonyms, triples) is partitioned with Leiden; communities
        larger than `max_cluster_size` are partitioned again, level by level. Each community gets
        a report: extractive here (its top entities and the passages that mention them, with
        offsets), or written by an LLM (`build_reports(llm)`).
        """),
        code('''
from swrag_integrations.methods.graph import GraphRAG, GraphRAGLocalRetriever

graphrag = GraphRAG(index, graph)
communities = graphrag.build_communities(max_cluster_size=6)
graphrag.build_reports(max_tokens=120)
print(f"{len(communities)} communities on levels {graphrag.levels()}")
for c in communities[:4]:
    print(f"  {c.id:<6} level {c.level}: {[graph.names[k] for k in c.phrases][:6]}")
print()
print(graphrag.reports[communities[0].id].text)
'''),
        md("""
        Local search scores passages by the question's entities, their graph neighbours and their
        community; `community_share` gives part of the budget to the community reports (documents
        without offsets, listing the exact passages they draw on).
        """),
        code('''
local = GraphRAGLocalRetriever(searcher=graphrag, budget_tokens=250, community_share=0.4)
for d in local.invoke(QUESTION):
    if d.metadata.get("kind") == "community_report":
        print(f"[report {d.metadata['community']}] {d.page_content[:90]!r}...")
    else:
        print(f"{title_of[d.metadata['source_id']]:<26} chars {d.metadata['start_index']}-{d.metadata['end_index']}")
'''),
        md("""
        ## Global search: map over reports, reduce

        For questions about the whole corpus. Each batch of reports (at most `map_tokens`) is one
        LLM call listing key points with an importance; the best points (at most `reduce_tokens`)
        go to one last call. Here with the bundled 135M stand-in model (weak: expect rough
        answers); the cost grows with the number of reports searched.
        """),
        code('''
import logging
from swrag_integrations.llm import load_llama3

logging.getLogger("ipex_llm").setLevel(logging.ERROR)
llm = load_llama3(max_new_tokens=60).as_langchain()
for n in (1, 2, 4):
    search = graphrag.global_search(llm, max_reports=n, map_tokens=200, reduce_tokens=200)
    result = search.invoke("What are these documents about?")
    s = result.stats
    print(f"{n} reports: {s['calls']} LLM calls, {s['prompt_tokens']} prompt + {s['answer_tokens']} answer tokens, "
          f"{s['seconds']:.1f} s")
print("answer:", result.answer[:200])
'''),
        md("""
        ## Stored with the index

        The graph is saved without pickle (a checksummed blob of JSON + `.npy` arrays) in the
        index's source store, or as `graph.json` + `phrase_vectors.npy` in a folder.
        `swrag index --graph` builds and updates it from the command line.
        """),
        code('''
from swrag_integrations.methods.graph import load_graph, save_graph

save_graph(graph, index)
print("reloaded equal:", load_graph(index) == graph)
index.engine.store.close()
workdir.cleanup()
'''),
    ]
