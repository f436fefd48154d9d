"""RAPTOR retrievers: budgets, exact offsets, summaries citing their leaves (LangChain and LlamaIndex)."""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.language_models.fake import FakeListLLM

from swrag_integrations.methods.raptor import (
    ClusterConfig,
    LLMSummarizer,
    RaptorIndex,
    RaptorRetriever,
    TreeConfig,
    build_tree,
)
from swrag_integrations.methods.raptor.leaves import leaves_from_text
from swrag_integrations.methods.raptor.search import RaptorSearcher
from swrag_integrations.engine.assemble import count_tokens

PCA = TreeConfig(cluster=ClusterConfig(reduction="pca"))


class WordEmbeddings(Embeddings):
    """Hashed bag of words (deterministic, shared words => similar)."""

    def _vec(self, text):
        v = [0.0] * 64
        for w in re.findall(r"\w+", text.lower()):
            v[sum(map(ord, w)) % 64] += 1.0
        v[0] += 0.01
        return v

    def embed_documents(self, texts):
        return [self._vec(t) for t in texts]

    def embed_query(self, text):
        return self._vec(text)


@pytest.fixture(scope="module")
def doc(shared_dir):
    row = json.loads((shared_dir / "data" / "eval" / "qasper.jsonl").open(encoding="utf-8").readline())
    return row["context"], row["input"]


@pytest.fixture(scope="module")
def extractive_tree(doc):
    text, _ = doc
    return build_tree(leaves_from_text("q0", text, size=100), WordEmbeddings(), sources={"q0": text}, config=PCA,
                      show_progress=False)


@pytest.fixture(scope="module")
def llm_tree(doc):
    text, _ = doc
    answers = [f"Summary number {i} about fake news, tweets and accounts." for i in range(200)]
    summ = LLMSummarizer(FakeListLLM(responses=answers), model_name="fake")
    return build_tree(leaves_from_text("q0", text, size=100), WordEmbeddings(), summ, sources={"q0": text},
                      config=PCA, show_progress=False)


def _joined(docs):
    return "\n\n".join(d.page_content for d in docs)


@pytest.mark.parametrize("budget", [40, 300, 2000])
@pytest.mark.parametrize("mode", ["collapsed", "traverse"])
def test_budget_is_respected_and_offsets_are_exact(doc, extractive_tree, llm_tree, budget, mode):
    text, question = doc
    for tree in (extractive_tree, llm_tree):
        docs = RaptorRetriever(raptor=tree, embeddings=WordEmbeddings(), mode=mode, budget_tokens=budget).invoke(question)
        assert docs and count_tokens(_joined(docs)) <= budget
        for d in docs:
            m = d.metadata
            if "start_index" in m:  # leaves and extractive sentences, merged by offset
                assert text[m["start_index"]:m["end_index"]] == d.page_content and m["source_id"] == "q0"
                assert m["raptor_nodes"] and set(m["raptor_kinds"]) <= {"leaf", "extractive", "fallback"}
            else:  # an LLM summary: no offsets of its own, but its leaves'
                assert m["raptor_kind"] == "llm" and m["raptor_layer"] >= 1 and m["raptor_leaves"]
        spans = sorted((d.metadata["start_index"], d.metadata["end_index"]) for d in docs if "start_index" in d.metadata)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # merged: no overlap or touching pieces


def test_collapsed_fills_a_2000_token_budget(doc, extractive_tree):
    text, question = doc
    ctx = RaptorSearcher(extractive_tree, WordEmbeddings()).search(question)
    assert ctx.budget_tokens == 2000 and 1900 <= ctx.text_tokens <= 2000
    assert count_tokens(ctx.text) == ctx.text_tokens


def test_summaries_cite_their_leaves(doc, llm_tree):
    text, question = doc
    docs = RaptorRetriever(raptor=llm_tree, embeddings=WordEmbeddings(), budget_tokens=2000).invoke(
        "Summary about fake news tweets and accounts")
    summaries = [d for d in docs if "raptor_leaves" in d.metadata]
    assert summaries, "an LLM summary should rank first for its own words"
    leaf_spans = {n.spans[0] for n in llm_tree.nodes if n.layer == 0}
    for d in summaries:
        node = next(n for n in llm_tree.nodes if n.node_id == d.metadata["raptor_node_id"])
        cited = [(c["source_id"], c["start_index"], c["end_index"]) for c in d.metadata["raptor_leaves"]]
        covered = {llm_tree.nodes[j].spans[0] for j in node.leaves}
        # every leaf it summarises lies inside a cited span, and every cited span is made of its leaves
        assert all(any(s == c[0] and c[1] <= a and b <= c[2] for c in cited) for s, a, b in covered)
        assert all(any(s == c[0] and a == c[1] for s, a, _ in covered) for c in cited)
        assert covered <= leaf_spans and d.metadata["source_ids"] == ["q0"]
        assert all(text[a:b].strip() for _, a, b in cited)


def test_traversal_goes_top_down_with_top_k_per_layer(doc, extractive_tree):
    _, question = doc
    from swrag_integrations.methods.raptor.search import traversal_hits

    tree = extractive_tree
    hits = traversal_hits(tree, WordEmbeddings().embed_query(question), top_k=2)
    layers = [tree.nodes[h.index].layer for h in hits]
    assert layers == sorted(layers, reverse=True) and layers[0] == tree.n_layers - 1 and layers[-1] == 0
    chosen = {}
    for h in hits:
        chosen.setdefault(tree.nodes[h.index].layer, []).append(h)
    for k, got in chosen.items():
        assert len(got) <= 2 and [h.score for h in got] == sorted((h.score for h in got), reverse=True)
        if k < tree.n_layers - 1:  # chosen among the children of the layer above (or parentless nodes)
            allowed = {c for h in chosen[k + 1] for c in tree.nodes[h.index].children}
            allowed |= {i for i in tree.layer(k) if not tree.parents(i)}
            assert {h.index for h in got} <= allowed
    assert tree.n_layers >= 2


def test_call_time_options_and_errors(doc, extractive_tree):
    _, question = doc
    r = RaptorRetriever(raptor=extractive_tree, embeddings=WordEmbeddings())
    assert len(r.invoke(question, k=1)) == 1
    assert count_tokens(_joined(r.invoke(question, budget_tokens=100))) <= 100
    with pytest.raises(TypeError, match="unexpected"):
        r.invoke(question, budget=3)
    with pytest.raises(ValueError):
        RaptorRetriever(raptor=extractive_tree, embeddings=WordEmbeddings(), budget_tokens=0)
    with pytest.raises(TypeError, match="embeddings"):
        RaptorRetriever(raptor=extractive_tree)
    with pytest.raises(ValueError, match="dimensions"):
        RaptorRetriever(raptor=extractive_tree, embeddings=DeterministicFakeEmbedding(size=8)).invoke(question)
    with pytest.raises(ValueError):
        r.invoke("   ")


def test_empty_tree_returns_nothing():
    tree = build_tree([], WordEmbeddings(), show_progress=False)
    assert RaptorRetriever(raptor=tree, embeddings=WordEmbeddings()).invoke("anything") == []


def test_llama_index_retriever_over_a_raptor_index(doc):
    from llama_index.core.schema import QueryBundle

    from swrag_integrations.methods.raptor import RaptorLlamaIndexRetriever

    text, question = doc
    answers = [f"Summary {i}: tweets, fake news and their accounts." for i in range(100)]
    raptor = RaptorIndex(embeddings=WordEmbeddings(), config=PCA, leaves={"size": 100}, show_progress=False,
                         summarizer=LLMSummarizer(FakeListLLM(responses=answers), model_name="fake"))
    raptor.build({"q0": text})
    retriever = RaptorLlamaIndexRetriever(raptor, budget_tokens=800)
    nodes = retriever.retrieve(QueryBundle(query_str=question))
    assert nodes and count_tokens("\n\n".join(n.node.get_content() for n in nodes)) <= 800
    for n in nodes:
        meta = n.node.metadata
        if n.node.start_char_idx is not None:
            assert text[n.node.start_char_idx:n.node.end_char_idx] == n.node.get_content()
            assert isinstance(meta["raptor_nodes"], str)
        else:
            for cite in meta["raptor_leaves"].split(";"):
                sid, rng = cite.rsplit(":", 1)
                a, b = map(int, rng.split("-"))
                assert sid == "q0" and 0 <= a < b <= len(text)
    traverse = raptor.as_llama_index_retriever(mode="traverse", top_k=2)
    assert traverse.retrieve(question)
    lc = raptor.as_retriever(budget_tokens=500)
    assert count_tokens(_joined(lc.invoke(question))) <= 500


def test_eval_pipeline_builds_and_assembles(doc):
    from swrag_integrations.evaluation.datasets import Source
    from swrag_integrations.evaluation.pipelines import EvalConfig
    from swrag_integrations.evaluation.methods.raptor import RaptorPipeline, RaptorTraversePipeline

    text, question = doc
    sources = [Source("a", text), Source("b", "A tiny second source. It is short.")]
    config = EvalConfig("raptor", 100)
    for cls in (RaptorPipeline, RaptorTraversePipeline):
        pipe = cls(sources, config, embeddings=WordEmbeddings(), budget=1500)
        ctx = pipe.context(question, 1500)
        assert 0 < ctx.text_tokens <= 1500 and count_tokens(ctx.text) == ctx.text_tokens
        assert all(pipe.texts[s][a:b] == sp.text for (s, a, b), sp in zip(ctx.offsets, ctx.spans))
        assert pipe.chunks > 0 and pipe.index_bytes > 0 and pipe.retrieve(question)
        pipe.close()


def test_eval_llm_pipeline_uses_the_configured_llm_and_cache(doc, tmp_path, monkeypatch):
    from swrag_integrations.evaluation.datasets import Source
    from swrag_integrations.evaluation.pipelines import EvalConfig
    from swrag_integrations.evaluation.methods.raptor import RaptorLLMPipeline

    text, question = doc
    monkeypatch.setenv("SWRAG_RAPTOR_LLM", "fake:How the ground truth for fake news is established by the authors.")
    monkeypatch.setenv("SWRAG_RAPTOR_CACHE", str(tmp_path / "summaries.sqlite3"))
    monkeypatch.setenv("SWRAG_RAPTOR_TREES", str(tmp_path / "trees.sqlite3"))
    monkeypatch.setenv("SWRAG_RAPTOR_REDUCTION", "pca")
    log = tmp_path / "builds.jsonl"
    monkeypatch.setenv("SWRAG_RAPTOR_LOG", str(log))
    pipe = RaptorLLMPipeline([Source("a", text)], EvalConfig("raptor", 100), embeddings=WordEmbeddings(), budget=2000)
    ctx = pipe.context(question, 2000)
    pipe.close()
    summaries = [s for s in ctx.spans if s.source_id.startswith("raptor-summary:")]
    assert summaries and all(s.metadata["raptor_kind"] == "llm" and s.metadata["raptor_leaves"] for s in summaries)
    assert ctx.text_tokens <= 2000
    built = json.loads(log.read_text().splitlines()[0])["report"]
    assert built["trees"] == 1 and built["summaries"]["llm_calls"] == built["summaries"]["llm"] > 0
    # a second pipeline reuses the stored tree: no build, no LLM call
    again = RaptorLLMPipeline([Source("a", text)], EvalConfig("raptor", 100), embeddings=WordEmbeddings(), budget=2000)
    again.close()
    second = json.loads(log.read_text().splitlines()[1])["report"]
    assert second["trees"] == 0 and second["reused"] == 1 and second["summaries"]["llm_calls"] == 0
