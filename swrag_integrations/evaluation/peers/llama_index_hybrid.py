"""``llamaindex-hybrid``: the LlamaIndex hybrid a careful LlamaIndex user builds, as a peer anchor
(a framework face; registered in `PIPELINES`
when imported).

Everything is LlamaIndex's own (``llama-index-core`` and ``llama-index-retrievers-bm25``),
assembled as `LlamaIndexSentenceWindowPipeline` assembles the sentence
window, of which this is a subclass (same nodes, windows, spans, context):

* ``SentenceWindowNodeParser`` sentence nodes (``sentence_splitter`` ``"punkt"`` or
  ``"cjk"``, `cjk_sentence_splitter`; ``window_size`` sentences each side);
* a ``VectorStoreIndex`` retriever over them (the runner's MiniLM, as the window anchor)
  and a ``BM25Retriever.from_defaults(nodes=..., similarity_top_k=fetch)`` over the same
  nodes (bm25s with PyStemmer's English stemmer and English stopwords, as shipped);
* ``QueryFusionRetriever([bm25, vector], mode=fusion, retriever_weights=weights,
  similarity_top_k=fetch, num_queries=1, llm=MockLLM(), use_async=False)``: no query
  generation (``num_queries=1``; ``MockLLM`` only keeps LlamaIndex from resolving its
  default OpenAI LLM, it is never called); multi-query runs the same retrievers with
  the given variants, as the window anchor does;
* ``MetadataReplacementPostProcessor(target_metadata_key="window")``.

**Chinese.** ``BM25Retriever`` 0.8.0 tokenizes documents and queries with
``bm25s.tokenize(token_pattern=...)``, default ``(?u)\\b\\w\\w+\\b``: a run of Chinese
characters between punctuation is one token, so a Chinese query rarely shares a token
with a Chinese sentence. Its ``from_defaults(tokenizer=...)`` (where a jieba tokenizer
would go) is deprecated in 0.8.0 and ignored: it only logs a warning. What 0.8.0 offers
is the ``token_pattern`` (and ``stemmer``, ``skip_stemming``, ``language``) of the
retriever, used for documents and queries alike; ``bm25_tokens="cjk"`` passes
`CJK_TOKEN_PATTERN`, every CJK ideograph a token of its own (character unigrams,
what Lucene's standard analyzer does for Chinese), other words as before. A jieba
tokenizer would need a hand-built bm25s index (``existing_bm25``) plus queries segmented
before they reach the retriever: not the retriever as shipped, so it is not offered.

Levers (keyword arguments; the registry's defaults are LlamaIndex's: punkt, window 3,
``k`` `STOCK_DEFAULT_K`, reciprocal-rank fusion, the shipped
tokenizer): ``window_size``, ``sentence_splitter``, ``fusion`` (one of
`FUSION_MODES`), ``weights`` (BM25, dense; for the score-based modes only:
``reciprocal_rerank`` ignores ``retriever_weights``), ``bm25_tokens`` (``"default"`` or
``"cjk"``) and ``k``.

Needs ``llama-index-retrievers-bm25`` (in the ``[eval]`` extra); without it ``swrag eval``
skips the strategy with a message (`missing_requirement`) and building
it directly raises ``ImportError`` naming the package.

``index_bytes`` = the sentence window's (texts, windows, vectors) + BM25's score matrix
(its sparse arrays), its vocabulary (pickled) and its corpus (the node dicts it keeps,
JSON, UTF-8). ``chunks`` = the sentence nodes.
"""

from __future__ import annotations

import json
import pickle
from typing import Any, Sequence

from swrag_integrations.evaluation.peers.anchors import SENTENCE_WINDOW_SIZE, _weights
from swrag_integrations.evaluation.peers.llama_index_peers import LlamaIndexSentenceWindowPipeline
from swrag_integrations.evaluation.pipelines import PipelineSpec, missing_requirement, register_pipeline

__all__ = ["LlamaIndexHybridPipeline", "CJK_TOKEN_PATTERN", "FUSION_MODES", "BM25_TOKENS"]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK unified ideographs (extension A, basic, compatibility)
CJK_TOKEN_PATTERN = rf"(?u)[{_CJK}]|[^\W{_CJK}]{{2,}}"
"""``BM25Retriever``'s ``token_pattern`` for Chinese: each ideograph one token; any other run of
two or more word characters one token (the shipped pattern's tokens on text without ideographs)."""

FUSION_MODES = ("reciprocal_rerank", "relative_score", "dist_based_score")
"""``QueryFusionRetriever`` modes offered (its ``simple`` mode takes the larger raw score, which
compares a BM25 score with a cosine similarity, so it is left out)."""

BM25_TOKENS: dict[str, dict[str, Any]] = {"default": {}, "cjk": {"token_pattern": CJK_TOKEN_PATTERN}}
"""``bm25_tokens`` lever -> keyword arguments of ``BM25Retriever.from_defaults``."""

_STRATEGY = "llamaindex-hybrid"


class LlamaIndexHybridPipeline(LlamaIndexSentenceWindowPipeline):
    """``llamaindex-hybrid``: sentence windows found by BM25 and MiniLM, fused by LlamaIndex (module doc).

    Args:
        sources, config, embeddings, window_size, sentence_splitter, k: as
            `LlamaIndexSentenceWindowPipeline`.
        fusion: ``QueryFusionRetriever``'s ``mode``, one of `FUSION_MODES`.
        weights: ``(BM25, dense)`` ``retriever_weights`` for ``relative_score`` /
            ``dist_based_score``; ``None`` = equal.
        bm25_tokens: ``"default"`` (bm25s as shipped) or ``"cjk"`` (`CJK_TOKEN_PATTERN`).

    Raises:
        ValueError: an unknown ``fusion`` or ``bm25_tokens``, bad ``weights``, or
            ``weights`` with ``reciprocal_rerank`` (which ignores them).
        ImportError: ``llama-index-retrievers-bm25`` is not installed (names the package).
    """

    def __init__(self, sources, config, *, embeddings=None, window_size: int = SENTENCE_WINDOW_SIZE,
                 sentence_splitter: str = "punkt", fusion: str = "reciprocal_rerank",
                 weights: Sequence[float] | None = None, bm25_tokens: str = "default", **kwargs) -> None:
        if fusion not in FUSION_MODES:
            raise ValueError(f"fusion must be one of {', '.join(FUSION_MODES)}, got {fusion!r}")
        if bm25_tokens not in BM25_TOKENS:
            raise ValueError(f"bm25_tokens must be one of {', '.join(BM25_TOKENS)}, got {bm25_tokens!r}")
        if weights is not None and fusion == "reciprocal_rerank":
            raise ValueError("weights apply to the score-based fusion modes (relative_score, dist_based_score): "
                             "QueryFusionRetriever's reciprocal_rerank ignores retriever_weights")
        self.fusion = fusion
        self.weights = _weights(weights) if weights is not None else None
        self.bm25_tokens = bm25_tokens
        reason = missing_requirement(_STRATEGY)
        if reason:
            raise ImportError(reason)
        super().__init__(sources, config, embeddings=embeddings, window_size=window_size,
                         sentence_splitter=sentence_splitter, **kwargs)
        self.vector_retriever = self.retriever
        self.bm25_retriever = None
        if self.retriever is None:  # nothing indexed (BM25Retriever refuses an empty corpus)
            return
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.retrievers.bm25 import BM25Retriever

        # (bm25s cannot return more nodes than it holds: BM25Retriever would lower its top k to that itself,
        # with a logged warning per index)
        self.bm25_retriever = BM25Retriever.from_defaults(nodes=self.nodes,
                                                          similarity_top_k=min(self.fetch, len(self.nodes)),
                                                          **BM25_TOKENS[bm25_tokens])
        self.retriever = QueryFusionRetriever(self._fusion_retrievers(), llm=MockLLM(), similarity_top_k=self.fetch,
                                              num_queries=1, use_async=False, verbose=False,
                                              **self._fusion_options())
        bm25 = self.bm25_retriever.bm25
        self.index_bytes += (sum(a.nbytes for key, a in bm25.scores.items() if key != "num_docs")
                             + len(pickle.dumps(bm25.vocab_dict))
                             + len(json.dumps(self.bm25_retriever.corpus, ensure_ascii=False).encode("utf-8")))

    def _fusion_retrievers(self) -> list:
        """``[bm25, vector]``: the order of ``weights``."""
        return [self.bm25_retriever, self.vector_retriever]

    def _fusion_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"mode": self.fusion}
        if self.weights is not None:
            options["retriever_weights"] = list(self.weights)
        return options


register_pipeline(_STRATEGY, PipelineSpec(
    LlamaIndexHybridPipeline, None, needs_embeddings=True,
    description="LlamaIndex sentence windows: BM25Retriever + vector retriever fused by QueryFusionRetriever, "
                "metadata replacement",
    requires=(("llama_index.retrievers.bm25", "llama-index-retrievers-bm25>=0.8"),)))
