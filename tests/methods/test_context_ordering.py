"""Diversity order, lost-in-the-middle order, budgets and the context-diversity measure."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from swrag_integrations.methods.context import DiversityReranker, LostInTheMiddleReorder
from swrag_integrations.methods.context.ordering import (
    apply_budget,
    context_diversity,
    greedy_diversity_order,
    litm_order,
    mean_pairwise_cosine_distance,
    mmr_order,
)

QUERY = [1.0, 0.0, 0.0]
VECTORS = {
    "d0": [0.9, 0.1, 0.0],
    "d1": [0.95, 0.05, 0.0],  # closest to the query, near-duplicate of d0
    "d2": [0.0, 1.0, 0.0],
    "d3": [0.0, 0.0, 1.0],
    "d4": [0.7, 0.7, 0.0],
}


class MappingEmbeddings(Embeddings):
    """Hand-made vectors by text."""

    def __init__(self, vectors: dict[str, list[float]], query: list[float]):
        self.vectors, self.query = vectors, query

    def embed_documents(self, texts):
        return [self.vectors[t] for t in texts]

    def embed_query(self, text):
        return self.query


def docs(names):
    return [Document(page_content=n, metadata={"rank": i + 1}) for i, n in enumerate(names)]


def test_greedy_diversity_order_hand_made():
    names = list(VECTORS)
    order = greedy_diversity_order(QUERY, [VECTORS[n] for n in names])
    # d1 (closest to q); d3 (sim 0 to d1); d2 (mean sim 0.026); d0 (0.37) before d4 (0.48)
    assert [names[i] for i in order] == ["d1", "d3", "d2", "d0", "d4"]
    assert greedy_diversity_order(QUERY, [VECTORS[n] for n in names], top_n=2) == [1, 3]
    assert greedy_diversity_order(QUERY, []) == []


def test_mmr_order_hand_made():
    names = list(VECTORS)
    vecs = [VECTORS[n] for n in names]
    assert [names[i] for i in mmr_order(QUERY, vecs, lambda_mult=1.0)][:3] == ["d1", "d0", "d4"]
    order = [names[i] for i in mmr_order(QUERY, vecs, lambda_mult=0.5)]
    assert order[:3] == ["d1", "d3", "d0"]
    with pytest.raises(ValueError):
        mmr_order(QUERY, vecs, lambda_mult=1.5)


def test_diversity_reranker_greedy_and_mmr():
    emb = MappingEmbeddings(VECTORS, QUERY)
    reranker = DiversityReranker(embeddings=emb)
    out = reranker.compress_documents(docs(list(VECTORS)), "q")
    assert [d.page_content for d in out] == ["d1", "d3", "d2", "d0", "d4"]
    assert [d.metadata["diversity_rank"] for d in out] == [1, 2, 3, 4, 5]
    assert out[0].metadata["relevance_score"] == pytest.approx(0.95 / np.linalg.norm([0.95, 0.05]))
    top = DiversityReranker(embeddings=emb, strategy="mmr", lambda_mult=0.5).rerank("q", docs(list(VECTORS)), top_n=3)
    assert [d.page_content for d in top] == ["d1", "d3", "d0"]
    assert reranker.rerank("q", []) == []
    with pytest.raises(ValueError):
        DiversityReranker(embeddings=emb, lambda_mult=-0.1)


def test_diversity_reranker_with_fake_embedding_is_a_permutation():
    texts = [f"text {i}" for i in range(7)]
    out = DiversityReranker(embeddings=DeterministicFakeEmbedding(size=16)).rerank("query", docs(texts))
    assert sorted(d.page_content for d in out) == sorted(texts)


@pytest.mark.parametrize(
    "n, expected",
    [
        (10, [1, 3, 5, 7, 9, 10, 8, 6, 4, 2]),
        (9, [1, 3, 5, 7, 9, 8, 6, 4, 2]),
        (4, [1, 3, 4, 2]),
        (3, [1, 3, 2]),
        (2, [1, 2]),
        (1, [1]),
        (0, []),
    ],
)
def test_litm_pattern(n, expected):
    assert [i + 1 for i in litm_order(n)] == expected
    out = LostInTheMiddleReorder().transform_documents(docs([str(i) for i in range(1, n + 1)]))
    assert [int(d.page_content) for d in out] == expected


@pytest.mark.parametrize("n", [2, 3, 4, 7, 9, 10, 11])
def test_langchain_long_context_reorder_matches_only_for_odd_lengths(n):
    """LangChain's LongContextReorder puts rank 1 first for odd n but last for even n
    (the mirror image of the pattern), which is why it is not reused."""
    from langchain_community.document_transformers import LongContextReorder

    ranks = [str(i) for i in range(1, n + 1)]
    theirs = [int(d.page_content) for d in LongContextReorder().transform_documents(docs(ranks))]
    ours = [int(d.page_content) for d in LostInTheMiddleReorder().transform_documents(docs(ranks))]
    if n % 2:
        assert theirs == ours
    else:
        assert theirs == ours[::-1]
        assert theirs[-1] == 1 and ours[0] == 1
    if n == 10:
        assert theirs == [2, 4, 6, 8, 10, 9, 7, 5, 3, 1]


def test_litm_budget_and_sort():
    documents = [Document(page_content=" ".join(["w"] * 4), metadata={"score": s}) for s in (0.1, 0.9, 0.5, 0.7)]
    reorder = LostInTheMiddleReorder(budget=10, sort_by_score=True)  # 2 docs of 4 words fit, the 3rd not
    out = reorder.compress_documents(documents, "q")
    assert [d.metadata["score"] for d in out] == [0.9, 0.7]
    assert len(apply_budget(documents, 3)) == 1  # the best is kept even if over budget
    assert len(apply_budget(documents, 100, unit="token")) == 4
    out = LostInTheMiddleReorder(top_n=3).compress_documents(docs([str(i) for i in range(1, 6)]), "q")
    assert [d.page_content for d in out] == ["1", "3", "2"]
    with pytest.raises(ValueError):
        LostInTheMiddleReorder(budget=0)


def test_mean_pairwise_cosine_distance():
    assert mean_pairwise_cosine_distance(np.eye(3)) == pytest.approx(1.0)
    assert mean_pairwise_cosine_distance([[1, 1], [2, 2], [3, 3]]) == pytest.approx(0.0)
    # pairs: (x, y) -> 1, (x, x+y) -> 1 - 1/sqrt2, (y, x+y) -> 1 - 1/sqrt2
    expected = (1 + 2 * (1 - 1 / np.sqrt(2))) / 3
    assert mean_pairwise_cosine_distance([[1, 0], [0, 1], [1, 1]]) == pytest.approx(expected)
    assert mean_pairwise_cosine_distance([[1, 0]]) == 0.0
    assert mean_pairwise_cosine_distance([]) == 0.0
    emb = MappingEmbeddings({"a": [1, 0], "b": [0, 1]}, [1, 0])
    assert context_diversity(docs(["a", "b"]), emb) == pytest.approx(1.0)
    assert context_diversity(["a"], emb) == 0.0
