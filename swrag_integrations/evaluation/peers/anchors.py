"""The strongest peer pipelines as anchors of ``swrag eval``, built from shipped parts only:
what they share, free of any framework (argument checks, offsets, jieba tokens). The
pipelines themselves are framework faces: the LangChain anchors in
`langchain_peers`, the LlamaIndex ones in `llama_index_peers` and
`llama_index_hybrid`; each registers its strategy when imported.

Each anchor is what a LangChain or LlamaIndex user would build from the frameworks'
own classes (as ``langchain-stock`` is); nothing of the package's ranking code
(the package's own BM25, fusion, planner) is used. The only
package parts they touch are the evaluation plumbing (`Pipeline`,
`assemble_by_text`) and, for LlamaIndex, the wrapper that hands the
runner's (cached) MiniLM embeddings to LlamaIndex
(`MiniLMLlamaIndexEmbedding`, which
embeds and does nothing else).

* ``langchain-ensemble`` (`LangChainEnsemblePipeline`): LangChain's
  ``RecursiveCharacterTextSplitter.from_tiktoken_encoder`` (``window`` tokens, no
  overlap, ``add_start_index=True``), ``langchain_community`` ``BM25Retriever`` with a
  jieba-aware ``preprocess_func`` (`jieba_preprocess`, the fix a LangChain user
  writes for Chinese) and a Chroma/MiniLM retriever, fused by ``langchain_classic``'s
  ``EnsembleRetriever`` (weights 0.5/0.5, its weighted RRF).
* ``llamaindex-window`` (`LlamaIndexSentenceWindowPipeline`): LlamaIndex's
  ``SentenceWindowNodeParser`` (3 sentences each side), a ``VectorStoreIndex`` (its
  default in-memory vector store) over the sentence nodes with the MiniLM embeddings,
  ``similarity_top_k`` sentences, then ``MetadataReplacementPostProcessor`` swaps each
  sentence for its window.
* ``langchain-parent`` (`LangChainParentDocumentPipeline`): ``langchain_classic``'s
  ``ParentDocumentRetriever``: children of ``window // 4`` tokens in Chroma (MiniLM),
  parents of ``window`` tokens in an ``InMemoryStore``.
* ``llamaindex-hybrid`` (`LlamaIndexHybridPipeline`, in
  `llama_index_hybrid`): the sentence window above with LlamaIndex's ``BM25Retriever``
  beside the vector retriever, fused by ``QueryFusionRetriever`` (needs
  ``llama-index-retrievers-bm25``).

All of them fetch ``k`` candidates (`STOCK_DEFAULT_K` when ``k`` is
``None``) and assemble their context the way the frameworks hand it over: the returned
texts concatenated in rank order under the token budget
(`assemble_by_text`; overlapping windows pay twice). The spans
reported with them are exact source offsets, checked against the source text when the
index is built (an offset that does not spell its text raises ``RuntimeError``
instead of being guessed).

**Configurations.** Each anchor takes its framework's levers as keyword arguments (the
registry's defaults reproduce the anchors above; `peer_tuning` sweeps them on the
tuning halves): the ensemble's ``chunk_size``, ``separators`` (``"cjk"``:
`CJK_SEPARATORS`, sentence ends kept with their sentence) and
``weights``; the sentence window's ``window_size`` and ``sentence_splitter``
(``"cjk"``: `cjk_sentence_splitter`); the parent retriever's ``child_size``,
``parent_size`` and ``separators``; and every anchor's ``k``.

Multi-query (``queries``) uses the frameworks' own fusion too: LangChain's
``MultiQueryRetriever`` (the variants given, original query included) and LlamaIndex's
``QueryFusionRetriever`` (reciprocal-rank mode, the variants given). As shipped,
``MultiQueryRetriever`` de-duplicates by ``Document`` equality, so the ensemble can
return one chunk twice (Chroma's copy carries an id, BM25's does not) and its context
then pays for it twice.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from swrag_integrations.evaluation.datasets import Source
from swrag_integrations.evaluation.pipelines import STOCK_DEFAULT_K

__all__ = [
    "jieba_preprocess",
    "CJK_SENTENCE_ENDS",
    "SENTENCE_WINDOW_SIZE",
    "PARENT_CHILD_FRACTION",
]

SENTENCE_WINDOW_SIZE = 3  # sentences on each side (LlamaIndex's default and its documented example)
PARENT_CHILD_FRACTION = 4  # langchain-parent: children are window // 4 units, parents window units


# Sentence ends of the CJK-aware sentence splitter (full-width marks, the ellipsis, newlines); closing
# quotes and brackets right after one stay with its sentence
CJK_SENTENCE_ENDS = "。！？；…\n"
_CJK_SENTENCE = re.compile(f"[^{CJK_SENTENCE_ENDS}]*[{CJK_SENTENCE_ENDS}]+[”’」』）)]*|[^{CJK_SENTENCE_ENDS}]+")

# ------------------------------------------------------------------------- helpers


# The peers' own argument checks, not retrieval.settings.positive_int / check_weights: no code of
# the package's retrieval rooms may run inside a peer (tests/evaluation/test_evaluation_anchors.py traces it).
def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _weights(weights: Any) -> list[float]:
    try:
        out = [float(w) for w in weights]
    except (TypeError, ValueError):
        raise ValueError(f"weights must be two numbers (BM25, dense), got {weights!r}") from None
    if len(out) != 2 or any(w < 0 for w in out) or sum(out) <= 0:
        raise ValueError(f"weights must be two non-negative numbers (BM25, dense) with a positive sum, got {weights!r}")
    return out


def jieba_preprocess(text: str) -> list[str]:
    """BM25 tokens as a LangChain user would write them for mixed Chinese/English text.

    Lower-cases ``text``, cuts it with ``jieba.lcut_for_search`` (search-engine mode:
    long words are also cut into their shorter dictionary words) and keeps the
    word-like tokens (those with at least one letter or digit; whitespace and
    punctuation tokens are dropped). It is the ``preprocess_func`` handed to
    LangChain's ``BM25Retriever``, whose default (``str.split``) makes a whole Chinese
    sentence or line one token, so Chinese queries score 0 against Chinese chunks.
    """
    import jieba

    jieba.setLogLevel(60)  # no "Building prefix dict" chatter on stderr
    return [tok for tok in jieba.lcut_for_search(text.lower()) if any(ch.isalnum() for ch in tok)]


def _check_sources(sources: Sequence[Source]) -> list[Source]:
    """The sources with repeats of one source dropped; a TypeError/ValueError names bad ones."""
    seen: dict[str, str] = {}
    unique = []
    for source in sources:
        if not isinstance(source, Source):
            raise TypeError(f"sources must be evaluation.datasets.Source objects, got {type(source).__name__}")
        if not isinstance(source.text, str):
            raise TypeError(f"source {source.source_id!r}: text must be str, got {type(source.text).__name__}")
        if source.source_id in seen and seen[source.source_id] != source.text:
            raise ValueError(f"sources: two different texts share the source_id {source.source_id!r}")
        if source.source_id not in seen:
            unique.append(source)
        seen[source.source_id] = source.text
    return unique


def _check_question(question: Any, queries: Sequence[str]) -> None:
    for q in [question, *queries]:
        if not isinstance(q, str):
            raise TypeError(f"question must be str, got {type(q).__name__}")
        if not q.strip():
            raise ValueError("question must not be empty")


def _fetch(k: int | None) -> int:
    if k is None:
        return STOCK_DEFAULT_K
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    return k


def _embeddings(embeddings):
    if embeddings is None:
        from swrag_integrations.evaluation.embeddings import default_embeddings

        return default_embeddings()
    if not (hasattr(embeddings, "embed_documents") and hasattr(embeddings, "embed_query")):
        raise TypeError(f"embeddings must be LangChain Embeddings, got {type(embeddings).__name__}")
    return embeddings


def _dimension(embeddings) -> int:
    return len(embeddings.embed_query("dimension probe"))


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _check_span(texts: dict[str, str], source_id: str, start: int, content: str, what: str) -> None:
    text = texts.get(source_id)
    if text is None or start < 0 or text[start : start + len(content)] != content:
        raise RuntimeError(f"{what}: the offset {start} in source {source_id!r} does not spell the chunk text")
