"""RAPTOR summaries: extractive (exact spans), LLM with cache, failing and empty LLMs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.runnables import RunnableLambda

from swrag_integrations.methods.raptor.build import TreeBuilder, TreeConfig
from swrag_integrations.methods.raptor.clustering import ClusterConfig
from swrag_integrations.methods.raptor.summarise import (Cluster, ExtractiveSummarizer, LLMSummarizer, SummaryCache,
                                                 SummaryContext, sentence_spans)
from swrag_integrations.methods.raptor.tree import RaptorNode
from swrag_integrations.engine.assemble import count_tokens


class TopicEmbeddings(Embeddings):
    """Counts of topic words: texts about the same topic point the same way."""

    TOPICS = (("cat", "cats", "kitten", "purr", "whiskers"), ("stock", "market", "shares", "investors", "prices"),
              ("rain", "storm", "weather", "clouds", "wind"))

    def _vec(self, text: str) -> list[float]:
        words = re.findall(r"\w+", text.lower())
        v = [float(sum(w in topic for w in words)) for topic in self.TOPICS]
        return [*v, 0.05]  # never the zero vector

    def embed_documents(self, texts):
        return [self._vec(t) for t in texts]

    def embed_query(self, text):
        return self._vec(text)


CATS = "Cats purr when content. A kitten has whiskers. The stock market fell today. Cats and kittens purr a lot."


def _ctx(text: str, sid: str = "d") -> SummaryContext:
    emb = TopicEmbeddings()
    return SummaryContext(lambda ts: np.asarray(emb.embed_documents(list(ts))), {sid: text}.__getitem__)


def _cluster(text: str, sid: str = "d") -> Cluster:
    node = RaptorNode(f"{sid}:0-{len(text)}", 0, "leaf", text, (), (0,), ((sid, 0, len(text)),), (text,))
    return Cluster([node], np.asarray([[3.0, 0.0, 0.0, 0.05]]), [(sid, 0, len(text))], 1)


def test_sentence_spans_are_exact_and_cut_long_sentences():
    text = "  First sentence. Second one?\nThird line!  中文句子。第二句！ tail without end"
    spans = sentence_spans(text, max_tokens=50)
    pieces = [text[a:b] for a, b in spans]
    assert pieces == ["First sentence.", "Second one?", "Third line!", "中文句子。", "第二句！", "tail without end"]
    long = "word " * 300
    cut = sentence_spans(long, max_tokens=40)
    assert len(cut) > 1 and all(count_tokens(long[a:b]) <= 40 for a, b in cut)
    assert "".join(long[a:b] for a, b in cut).split() == long.split()
    with pytest.raises(ValueError, match="max_tokens"):
        sentence_spans("x", max_tokens=0)


def test_extractive_keeps_central_sentences_as_exact_spans():
    summary = ExtractiveSummarizer(max_tokens=12).summarize(_cluster(CATS), _ctx(CATS))
    assert summary.kind == "extractive" and not summary.llm_called
    assert summary.spans and all(CATS[a:b] == t for (_, a, b), t in zip(summary.spans, summary.span_texts))
    assert "stock" not in summary.text  # the off-topic sentence is not central
    assert "purr" in summary.text
    assert count_tokens(" ".join(summary.span_texts)) <= 12 + len(summary.spans)
    assert [s[1] for s in summary.spans] == sorted(s[1] for s in summary.spans)  # document order


def test_extractive_skips_duplicate_sentences():
    text = "Cats purr. Cats purr. Cats purr. A kitten has whiskers."
    summary = ExtractiveSummarizer(max_tokens=100).summarize(_cluster(text), _ctx(text))
    assert summary.text.count("Cats purr.") == 1


class CountingLLM:
    """A scripted LLM that counts its calls."""

    def __init__(self, answers):
        self.fake = FakeListLLM(responses=list(answers))
        self.calls = 0
        self.model_name = "counting-fake"

    def invoke(self, prompt, **kwargs):
        self.calls += 1
        return self.fake.invoke(prompt)


def test_llm_summary_is_cached_by_its_inputs(tmp_path):
    llm = CountingLLM(["Summary: cats purr and have whiskers.", "another"])
    summ = LLMSummarizer(llm, cache=tmp_path / "cache.sqlite3", max_tokens=40)
    first = summ.summarize(_cluster(CATS), _ctx(CATS))
    assert (first.kind, first.text, first.llm_called, first.cached) == ("llm", "cats purr and have whiskers.", True, False)
    again = LLMSummarizer(llm, cache=tmp_path / "cache.sqlite3", max_tokens=40).summarize(_cluster(CATS), _ctx(CATS))
    assert (again.text, again.cached, llm.calls) == (first.text, True, 1)
    other = summ.summarize(_cluster(CATS + " More."), _ctx(CATS + " More."))  # other input: a new call
    assert other.text == "another" and llm.calls == 2


def test_llm_that_fails_or_answers_nothing_falls_back_to_extractive():
    def boom(prompt):
        raise RuntimeError("model exploded")

    failing = LLMSummarizer(RunnableLambda(boom), model_name="boom")
    got = failing.summarize(_cluster(CATS), _ctx(CATS))
    assert got.kind == "fallback" and "model exploded" in got.error and got.spans
    assert all(CATS[a:b] == t for (_, a, b), t in zip(got.spans, got.span_texts))
    empty = LLMSummarizer(FakeListLLM(responses=["   \n "]), model_name="empty")
    got = empty.summarize(_cluster(CATS), _ctx(CATS))
    assert got.kind == "fallback" and got.empty and got.error is None
    assert empty.cache.get(SummaryCache.key("empty", empty.prompt, empty.max_tokens, empty.input_text(_cluster(CATS)))) is None


def test_prompt_and_limits_are_checked():
    with pytest.raises(ValueError, match="context"):
        LLMSummarizer(FakeListLLM(responses=["x"]), prompt="no placeholder")
    with pytest.raises(ValueError, match="max_tokens"):
        LLMSummarizer(FakeListLLM(responses=["x"]), max_tokens=0)
    with pytest.raises(TypeError, match="cache"):
        SummaryCache(object())


def test_cache_in_an_index_source_store(tmp_path):
    from swrag_integrations.stores.sources import SqliteSourceStore

    store = SqliteSourceStore(tmp_path / "s.sqlite3")
    cache = SummaryCache(store)
    cache.put("k1", "text one")
    assert SummaryCache(store).get("k1") == "text one" and cache.get("k2") is None
    store.close()


def _text(n: int) -> str:
    topics = ["Cats purr and a kitten has whiskers.", "The stock market fell and investors sold shares.",
              "Rain and wind came with the storm clouds."]
    return " ".join(f"{topics[i % 3]} Note {i}." for i in range(n))


def test_build_with_scripted_llm_counts_calls_and_fallbacks():
    from swrag_integrations.methods.raptor.tree import Leaf

    text = _text(45)
    leaves = [Leaf("doc", a, b, text[a:b]) for a, b in sentence_spans(text) if "Note" not in text[a:b]]
    script_answers = iter([TimeoutError("slow server"), "  ", "Summary: the weather.", "Top."])
    calls = {"n": 0}

    def script(prompt):
        calls["n"] += 1
        answer = next(script_answers, "More.")
        if isinstance(answer, Exception):
            raise answer
        return answer

    summ = LLMSummarizer(RunnableLambda(script), model_name="script")
    builder = TreeBuilder(TopicEmbeddings(), summ, TreeConfig(cluster=ClusterConfig(reduction="none"), min_nodes=3),
                          show_progress=False)
    tree = builder.build(leaves, {"doc": text})
    stats = tree.meta["report"]["summaries"]
    assert tree.layer_sizes() == [45, 3]  # three topics, then too few nodes to cluster
    assert stats["llm_calls"] == calls["n"] == stats["summaries"] == 3
    assert (stats["failed"], stats["empty"], stats["fallback"], stats["llm"]) == (1, 1, 2, 1)
    assert "TimeoutError: slow server" in stats["errors"][0]
    kinds = sorted(n.kind for n in tree.nodes if n.layer == 1)
    assert kinds == ["fallback", "fallback", "llm"]
    assert "the weather." in [n.text for n in tree.nodes if n.kind == "llm"]
    for node in tree.nodes:
        if node.kind == "fallback":  # extractive: exact spans of the source, of its own topic
            assert all(text[a:b] == t for (_, a, b), t in zip(node.spans, node.span_texts))
            topic = {tuple(TopicEmbeddings()._vec(t)) for t in node.span_texts}
            assert len(topic) == 1
