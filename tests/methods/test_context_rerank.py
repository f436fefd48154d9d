"""Reranker interface, embedding reranker (real MiniLM), LLM judge fallback, adapters."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM

from swrag_integrations.methods.context import (
    CompressorReranker,
    EmbeddingReranker,
    LLMJudgeReranker,
    LostInTheMiddleReorder,
)
from swrag_integrations.methods.context.rerank import BaseReranker, Reranker
from swrag_integrations.methods.context._common import sentence_pieces

QUERY = "Where is the Eiffel Tower?"
FILLER = " ".join(
    f"Gardeners water tomato plant number {i} every morning and pull the weeds between the rows." for i in range(30)
)
DOCS = [
    Document(page_content="Bananas are rich in potassium and grow in tropical countries.", metadata={"id": "banana"}),
    Document(page_content=FILLER + " The Eiffel Tower stands in Paris, France.", metadata={"id": "long"}),
    Document(page_content="Chess is a board game for two players.", metadata={"id": "chess"}),
]


@pytest.fixture(scope="module")
def minilm():
    from swrag_integrations.embeddings.minilm import default_embeddings

    return default_embeddings()


def test_sentence_pieces_respect_the_token_cap():
    pieces = sentence_pieces(FILLER + " The end.", 40)
    from swrag_integrations.engine.assemble import count_tokens

    assert all(count_tokens(p) <= 40 for p in pieces)
    assert "The end." in pieces[-1]
    assert sentence_pieces("", 10) == []
    long_sentence = "word " * 100
    assert all(count_tokens(p) <= 10 for p in sentence_pieces(long_sentence, 10))


@pytest.mark.slow
def test_embedding_reranker_finds_the_answer_past_minilm_truncation(minilm):
    out = EmbeddingReranker(embeddings=minilm).rerank(QUERY, DOCS)
    assert out[0].metadata["id"] == "long"
    assert [d.metadata["rerank_rank"] for d in out] == [1, 2, 3]
    assert out[0].metadata["relevance_score"] >= out[1].metadata["relevance_score"]
    # embedded whole, the window is truncated at 256 word pieces before the answer
    whole = EmbeddingReranker(embeddings=minilm, piece_tokens=10_000).score(QUERY, DOCS)
    pieces = EmbeddingReranker(embeddings=minilm).score(QUERY, DOCS)
    assert pieces[1] > whole[1] + 0.2
    assert EmbeddingReranker(embeddings=minilm, top_n=1).compress_documents(DOCS, QUERY)[0].metadata["id"] == "long"


def test_rerank_interface_and_bad_input():
    emb = DeterministicFakeEmbedding(size=8)
    reranker = EmbeddingReranker(embeddings=emb)
    assert isinstance(reranker, Reranker) and isinstance(reranker, BaseDocumentCompressor)
    assert reranker.rerank(QUERY, []) == []
    assert len(reranker.rerank(QUERY, DOCS, top_n=2)) == 2
    with pytest.raises(ValueError):
        reranker.rerank("  ", DOCS)
    with pytest.raises(ValueError):
        reranker.rerank(QUERY, DOCS, top_n=0)
    with pytest.raises(ValueError):
        EmbeddingReranker(embeddings=emb, piece_tokens=0)


def test_llm_judge_generic_fallback_parses_yes_no():
    llm = FakeListLLM(responses=["No.", "Yes, it says where the tower is.", "maybe"])
    judge = LLMJudgeReranker(llm=llm)
    out = judge.rerank(QUERY, DOCS)
    assert [d.metadata["id"] for d in out] == ["long", "chess", "banana"]
    assert [d.metadata["relevance_score"] for d in out] == [1.0, 0.5, 0.0]
    assert judge.unparsed == 1

    class Broken(FakeListLLM):
        def _call(self, *args, **kwargs):
            raise RuntimeError("down")

    broken = LLMJudgeReranker(llm=Broken(responses=["x"]))
    assert [d.metadata["relevance_score"] for d in broken.rerank(QUERY, DOCS)] == [0.5] * 3
    assert broken.failed == 3


class KeepShort(BaseDocumentCompressor):
    """A third-party style compressor: drops long documents, writes relevance_score."""

    def compress_documents(self, documents, query, callbacks: Callbacks | None = None):
        kept = [d for d in documents if len(d.page_content) < 100]
        return [Document(page_content=d.page_content, metadata={**d.metadata, "relevance_score": 1.0 / (i + 2)})
                for i, d in enumerate(kept)]


def test_compressor_adapter():
    adapter = CompressorReranker(KeepShort())
    assert isinstance(adapter, Reranker)
    out = adapter.rerank(QUERY, DOCS)
    assert [d.metadata["id"] for d in out] == ["banana", "chess"]
    assert [d.metadata["relevance_score"] for d in out] == [0.5, 1 / 3]
    ordered = CompressorReranker(LostInTheMiddleReorder()).rerank(QUERY, DOCS, top_n=2)
    assert [d.metadata["rerank_rank"] for d in ordered] == [1, 2]
    assert ordered[0].metadata["relevance_score"] == 1.0
    assert adapter.rerank(QUERY, []) == []
    with pytest.raises(TypeError):
        CompressorReranker(object())


def test_base_reranker_subclass_in_a_compression_retriever():
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.retrievers import BaseRetriever

    class LengthReranker(BaseReranker):
        def score(self, query, documents):
            return [-len(d.page_content) for d in documents]

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return list(DOCS)

    retriever = ContextualCompressionRetriever(base_compressor=LengthReranker(top_n=2), base_retriever=Fixed())
    got = retriever.invoke(QUERY)
    assert [d.metadata["id"] for d in got] == ["chess", "banana"]
