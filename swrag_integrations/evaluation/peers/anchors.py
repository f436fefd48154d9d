"""The strongest peer pipelines as anchors of ``swrag eval``, built from shipped parts only.

Each anchor is what a LangChain or LlamaIndex user would build from the frameworks'
own classes (as ``langchain-stock`` is); nothing of the package's ranking code
(the package's own BM25, fusion, planner) is used. The only
package parts they touch are the evaluation plumbing (:class:`~.pipelines.Pipeline`,
:func:`~.context.assemble_by_text`) and, for LlamaIndex, the wrapper that hands the
runner's (cached) MiniLM embeddings to LlamaIndex
(:class:`~swrag_integrations.llama_index.index.MiniLMLlamaIndexEmbedding`, which
embeds and does nothing else).

* ``langchain-ensemble`` (:class:`LangChainEnsemblePipeline`): LangChain's
  ``RecursiveCharacterTextSplitter.from_tiktoken_encoder`` (``window`` tokens, no
  overlap, ``add_start_index=True``), ``langchain_community`` ``BM25Retriever`` with a
  jieba-aware ``preprocess_func`` (:func:`jieba_preprocess`, the fix a LangChain user
  writes for Chinese) and a Chroma/MiniLM retriever, fused by ``langchain_classic``'s
  ``EnsembleRetriever`` (weights 0.5/0.5, its weighted RRF).
* ``llamaindex-window`` (:class:`LlamaIndexSentenceWindowPipeline`): LlamaIndex's
  ``SentenceWindowNodeParser`` (3 sentences each side), a ``VectorStoreIndex`` (its
  default in-memory vector store) over the sentence nodes with the MiniLM embeddings,
  ``similarity_top_k`` sentences, then ``MetadataReplacementPostProcessor`` swaps each
  sentence for its window.
* ``langchain-parent`` (:class:`LangChainParentDocumentPipeline`): ``langchain_classic``'s
  ``ParentDocumentRetriever``: children of ``window // 4`` tokens in Chroma (MiniLM),
  parents of ``window`` tokens in an ``InMemoryStore``.
* ``llamaindex-hybrid`` (:class:`~.hybrid_anchor.LlamaIndexHybridPipeline`, in
  :mod:`~.hybrid_anchor`): the sentence window above with LlamaIndex's ``BM25Retriever``
  beside the vector retriever, fused by ``QueryFusionRetriever`` (needs
  ``llama-index-retrievers-bm25``).

All of them fetch ``k`` candidates (:data:`~.pipelines.STOCK_DEFAULT_K` when ``k`` is
``None``) and assemble their context the way the frameworks hand it over: the returned
texts concatenated in rank order under the token budget
(:func:`~.context.assemble_by_text`; overlapping windows pay twice). The spans
reported with them are exact source offsets, checked against the source text when the
index is built (an offset that does not spell its text raises ``RuntimeError``
instead of being guessed).

**Configurations.** Each anchor takes its framework's levers as keyword arguments (the
registry's defaults reproduce the anchors above; :mod:`~.peer_tuning` sweeps them on the
tuning halves): the ensemble's ``chunk_size``, ``separators`` (``"cjk"``:
:data:`~.pipelines.CJK_SEPARATORS`, sentence ends kept with their sentence) and
``weights``; the sentence window's ``window_size`` and ``sentence_splitter``
(``"cjk"``: :func:`cjk_sentence_splitter`); the parent retriever's ``child_size``,
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
import uuid
from functools import lru_cache
from typing import Any, Callable, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext, assemble_by_text
from swrag_integrations.evaluation.datasets import Source
from swrag_integrations.evaluation.pipelines import STOCK_DEFAULT_K, Pipeline, _rcs_splitter

__all__ = [
    "jieba_preprocess",
    "cjk_sentence_splitter",
    "CJK_SENTENCE_ENDS",
    "LangChainEnsemblePipeline",
    "LlamaIndexSentenceWindowPipeline",
    "LangChainParentDocumentPipeline",
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


def cjk_sentence_splitter() -> Callable[[str], list[str]]:
    """A ``sentence_splitter`` for LlamaIndex's ``SentenceWindowNodeParser`` that also cuts Chinese.

    LlamaIndex's default (NLTK punkt, ``split_by_sentence_tokenizer``) runs first, so
    English sentences are punkt's; each punkt sentence is then cut after every run of
    :data:`CJK_SENTENCE_ENDS` (``。！？；…`` and newlines; closing quotes and brackets
    right after them stay with the sentence) with LlamaIndex's own ``split_by_regex``.
    The pieces tile their text exactly (every character is in one piece, in order), so
    the sentences still tile the document and their offsets stay exact.
    """
    from llama_index.core.node_parser.text.utils import split_by_regex, split_by_sentence_tokenizer

    punkt = split_by_sentence_tokenizer()
    cut = split_by_regex(_CJK_SENTENCE.pattern)
    return lambda text: [piece for sentence in punkt(text) for piece in cut(sentence)]


_SENTENCE_SPLITTERS = {"punkt": None, "cjk": cjk_sentence_splitter}


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


class _ChromaCollection:
    """A fresh collection in an in-process Chroma client, deleted by :meth:`close`."""

    def __init__(self, prefix: str) -> None:
        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        self.name = f"{prefix}-{uuid.uuid4().hex[:12]}"

    def vectorstore(self, embeddings):
        from langchain_chroma import Chroma

        return Chroma(collection_name=self.name, embedding_function=embeddings, client=self.client)

    def close(self) -> None:
        try:
            self.client.delete_collection(self.name)
        except Exception:  # already gone
            pass


# --------------------------------------------------------------- LangChain anchors


class _LangChainAnchor(Pipeline):
    """A LangChain retriever whose documents carry ``source_id`` and exact ``start_index``."""

    assembly = "text"
    retriever: Any = None
    _collection: _ChromaCollection | None = None

    def _documents(self) -> list:
        from langchain_core.documents import Document

        return [Document(page_content=s.text, metadata={"source_id": s.source_id}) for s in self.sources if s.text]

    def _docs(self, question: str, queries: Sequence[str]) -> list:
        _check_question(question, queries)
        if self.retriever is None:
            return []
        if not queries:
            return self.retriever.invoke(question)
        from langchain_classic.retrievers import MultiQueryRetriever
        from langchain_core.runnables import RunnableLambda

        fixed = list(queries)
        mq = MultiQueryRetriever(retriever=self.retriever, llm_chain=RunnableLambda(lambda _: list(fixed)),
                                 include_original=True, verbose=False)
        return mq.invoke(question)

    @staticmethod
    def _span(doc) -> tuple[str, int, int]:
        start = int(doc.metadata["start_index"])
        return doc.metadata["source_id"], start, start + len(doc.page_content)

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        return [self._span(d) for d in self._docs(question, queries)]

    def context(self, question: str, budget: int = DEFAULT_BUDGET, queries: Sequence[str] = ()) -> AssembledContext:
        docs = self._docs(question, queries)
        return assemble_by_text([d.page_content for d in docs], budget, spans=[self._span(d) for d in docs],
                                encoding_name=self.encoding_name)

    def close(self) -> None:
        if self._collection is not None:
            self._collection.close()


class LangChainEnsemblePipeline(_LangChainAnchor):
    """``langchain-ensemble``: jieba-aware ``BM25Retriever`` + Chroma, ``EnsembleRetriever``.

    Construction (all LangChain classes as shipped):

    * chunks: ``RecursiveCharacterTextSplitter.from_tiktoken_encoder(encoding_name=
      encoding_name, chunk_size=window, chunk_overlap=0, add_start_index=True)``
      (``RecursiveCharacterTextSplitter(chunk_size=window, ...)`` for ``unit="char"``);
      the same chunks as ``langchain-stock`` and ``rcs``;
    * ``BM25Retriever.from_documents(chunks, preprocess_func=jieba_preprocess, k=fetch)``;
    * ``Chroma`` (fresh in-process collection, the runner's embeddings)
      ``.as_retriever(search_kwargs={"k": fetch})``;
    * ``EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])``.

    Levers (defaults as above): ``chunk_size`` (the splitter's size in ``unit``; default
    the grid's ``window``), ``separators`` (``"default"`` or ``"cjk"``, see
    :func:`~.pipelines._rcs_splitter`) and ``weights`` (BM25, dense).

    ``fetch`` = ``k`` or :data:`~.pipelines.STOCK_DEFAULT_K`; the ensemble returns the
    union of both lists (up to ``2 * fetch`` chunks, de-duplicated by text).

    ``index_bytes`` = chunk texts (UTF-8, stored once in Chroma; BM25 keeps the same
    documents in memory, not counted twice) + the pickled ``BM25Okapi`` statistics +
    one float32 vector per chunk. ``chunks`` = the chunks indexed.
    """

    def __init__(self, sources, config, *, embeddings=None, chunk_size: int | None = None,
                 separators: str = "default", weights: Sequence[float] = (0.5, 0.5), **kwargs) -> None:
        super().__init__(_check_sources(sources), config, embeddings=embeddings, **kwargs)
        fetch = _fetch(self.k)
        self.chunk_size = _positive("chunk_size", config.window if chunk_size is None else chunk_size)
        self.weights = _weights(weights)
        embeddings = _embeddings(embeddings)
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever

        splitter = _rcs_splitter(self.chunk_size, config.unit, self.encoding_name, separators)
        docs = [d for d in splitter.split_documents(self._documents()) if d.page_content]
        for d in docs:
            _check_span(self.texts, d.metadata["source_id"], d.metadata["start_index"], d.page_content,
                        "RecursiveCharacterTextSplitter")
        self.chunks = len(docs)
        self._collection = _ChromaCollection("swrag-eval-ensemble")
        if not docs:
            return
        store = self._collection.vectorstore(embeddings)
        store.add_documents(docs)
        bm25 = BM25Retriever.from_documents(docs, preprocess_func=jieba_preprocess, k=fetch)
        dense = store.as_retriever(search_kwargs={"k": fetch})
        self.retriever = EnsembleRetriever(retrievers=[bm25, dense], weights=list(self.weights))
        import pickle

        self.index_bytes = (sum(_utf8(d.page_content) for d in docs) + len(pickle.dumps(bm25.vectorizer))
                            + self.chunks * _dimension(embeddings) * 4)


class LangChainParentDocumentPipeline(_LangChainAnchor):
    """``langchain-parent``: LangChain's ``ParentDocumentRetriever``.

    Construction (LangChain classes as shipped), sizes relative to the grid's window
    (``window`` = 512 tokens gives children of 128 and parents of 512, the 1:4 ratio of
    the retriever's documented example, 400/2000 characters):

    * ``child_splitter`` = ``RecursiveCharacterTextSplitter.from_tiktoken_encoder(
      encoding_name=encoding_name, chunk_size=window // 4, chunk_overlap=0,
      add_start_index=True)``;
    * ``parent_splitter`` = the same with ``chunk_size=window`` (the ``rcs`` chunks);
    * ``vectorstore`` = ``Chroma`` (fresh in-process collection, the runner's
      embeddings), ``docstore`` = ``InMemoryStore()``, ``search_kwargs={"k": fetch}``
      (``fetch`` children by similarity; their distinct parents in the order of their
      best child).

    ``unit="char"`` uses ``RecursiveCharacterTextSplitter(chunk_size=...)`` with the same
    sizes. Levers: ``child_size`` and ``parent_size`` (defaults ``window // 4`` and
    ``window``) and ``separators`` of both splitters (``"default"`` or ``"cjk"``). A parent's span is its ``start_index`` in its source (given by the parent
    splitter, checked when indexing).

    ``index_bytes`` = child texts (stored in Chroma) + parent texts (the docstore) +
    one float32 vector per child. ``chunks`` = the children (the embedded units).
    """

    def __init__(self, sources, config, *, embeddings=None, child_size: int | None = None,
                 parent_size: int | None = None, separators: str = "default", **kwargs) -> None:
        super().__init__(_check_sources(sources), config, embeddings=embeddings, **kwargs)
        fetch = _fetch(self.k)
        if child_size is None:
            child_size = config.window // PARENT_CHILD_FRACTION
            if child_size < 1:
                raise ValueError(f"langchain-parent needs window >= {PARENT_CHILD_FRACTION} (children are window // "
                                 f"{PARENT_CHILD_FRACTION} {config.unit}s), got {config.window}")
        self.child_size = _positive("child_size", child_size)
        self.parent_size = _positive("parent_size", config.window if parent_size is None else parent_size)
        if self.child_size > self.parent_size:
            raise ValueError(f"child_size ({self.child_size}) must not exceed parent_size ({self.parent_size})")
        embeddings = _embeddings(embeddings)
        from langchain_classic.retrievers import ParentDocumentRetriever
        from langchain_core.stores import InMemoryStore

        self._collection = _ChromaCollection("swrag-eval-parentdoc")
        store = self._collection.vectorstore(embeddings)
        docstore = InMemoryStore()
        retriever = ParentDocumentRetriever(
            vectorstore=store,
            docstore=docstore,
            child_splitter=_rcs_splitter(self.child_size, config.unit, self.encoding_name, separators),
            parent_splitter=_rcs_splitter(self.parent_size, config.unit, self.encoding_name, separators),
            search_kwargs={"k": fetch},
        )
        # one call per source: ParentDocumentRetriever upserts all children of a call in one Chroma batch,
        # and Chroma refuses a batch above its max_batch_size (5461 here), which the children of a whole
        # corpus exceed (cmrc2018_corpus at 64-token children: 6143)
        for document in self._documents():
            retriever.add_documents([document])
        parents = [d for d in docstore.mget(list(docstore.yield_keys())) if d is not None]
        for d in parents:
            _check_span(self.texts, d.metadata["source_id"], d.metadata["start_index"], d.page_content,
                        "ParentDocumentRetriever parent")
        children = store.get(include=["documents"])["documents"] if parents else []
        self.chunks = len(children)
        if parents:
            self.retriever = retriever
            self.index_bytes = (sum(_utf8(t) for t in children) + sum(_utf8(d.page_content) for d in parents)
                                + self.chunks * _dimension(embeddings) * 4)


# --------------------------------------------------------------- LlamaIndex anchor


class LlamaIndexSentenceWindowPipeline(Pipeline):
    """``llamaindex-window``: LlamaIndex sentence-window retrieval.

    Construction (LlamaIndex classes as shipped):

    * ``SentenceWindowNodeParser.from_defaults(window_size=3, window_metadata_key="window",
      original_text_metadata_key="original_text")`` over ``llama_index`` ``Document`` s
      (``id_`` = the source id, no metadata, so only the sentence is embedded);
    * ``VectorStoreIndex(nodes, embed_model=MiniLMLlamaIndexEmbedding(embeddings=...))``
      (LlamaIndex's default in-memory vector store and docstore);
    * ``index.as_retriever(similarity_top_k=fetch)`` then
      ``MetadataReplacementPostProcessor(target_metadata_key="window")``.

    The parser's default sentence splitter is NLTK punkt (``punkt_tab`` ships in
    llama-index-core's own NLTK cache, so it works offline). Punkt splits on a full
    stop followed by whitespace; Chinese text has no space after ``。``, so a Chinese
    paragraph, often a whole Chinese document, is one "sentence": its node is embedded
    whole (MiniLM reads its first 256 word pieces) and its window is the whole text.
    That is the peer's real behaviour and is kept.

    **Offsets.** Punkt's sentences tile the document: each runs from its start to the
    next one's start (trailing whitespace included), so sentence ``i + 1`` starts where
    sentence ``i`` ends; the first starts where the parser's ``start_char_idx`` puts it
    (only whitespace can precede it). The exact span of every sentence is computed that
    way and checked against the source text (LlamaIndex's own ``start_char_idx`` of
    later sentences comes from ``str.find`` after the previous start and could land on
    an earlier repeat of a short sentence; it is not used). A window is
    ``" ".join`` of sentences ``i - 3 .. i + 3``; its span is
    ``[start(i - 3), end(i + 3))``, and the window text is checked to equal that join.
    The context holds the source text of that span, which differs from the window text
    LlamaIndex hands on only by the one space its join adds between two sentences
    (the sentences already end with their own whitespace); the peer is charged a
    little less budget for it, never more.

    Levers: ``window_size`` (sentences on each side, default 3) and ``sentence_splitter``
    (``"punkt"``, the default above, or ``"cjk"``: :func:`cjk_sentence_splitter`, which
    also cuts after ``。！？；…`` and newlines; its sentences tile the text the same way).

    ``index_bytes`` = per sentence node its text, its ``window`` and ``original_text``
    metadata (LlamaIndex's docstore keeps all three; UTF-8) + one float32 vector.
    ``chunks`` = the sentence nodes.
    """

    assembly = "text"

    def __init__(self, sources, config, *, embeddings=None, window_size: int = SENTENCE_WINDOW_SIZE,
                 sentence_splitter: str = "punkt", **kwargs) -> None:
        super().__init__(_check_sources(sources), config, embeddings=embeddings, **kwargs)
        self.fetch = _fetch(self.k)
        self.window_size = _positive("window_size", window_size)
        if sentence_splitter not in _SENTENCE_SPLITTERS:
            raise ValueError(f"sentence_splitter must be one of {', '.join(_SENTENCE_SPLITTERS)}, "
                             f"got {sentence_splitter!r}")
        make_splitter = _SENTENCE_SPLITTERS[sentence_splitter]
        embeddings = _embeddings(embeddings)
        from llama_index.core import Document, VectorStoreIndex
        from llama_index.core.node_parser import SentenceWindowNodeParser
        from llama_index.core.postprocessor import MetadataReplacementPostProcessor

        from swrag_integrations.llama_index.index import MiniLMLlamaIndexEmbedding

        self.parser = SentenceWindowNodeParser.from_defaults(
            sentence_splitter=make_splitter() if make_splitter else None, window_size=self.window_size,
            window_metadata_key="window", original_text_metadata_key="original_text"
        )
        documents = [Document(text=s.text, id_=s.source_id) for s in self.sources if s.text]
        nodes = self.parser.get_nodes_from_documents(documents)
        self.nodes = nodes
        self.windows: dict[str, tuple[str, int, int]] = self._window_spans(nodes)
        self.chunks = len(nodes)
        self.embed_model = MiniLMLlamaIndexEmbedding(embeddings=embeddings)
        self.retriever = None
        self.postprocessor = MetadataReplacementPostProcessor(target_metadata_key="window")
        if not nodes:
            return
        self.index = VectorStoreIndex(nodes, embed_model=self.embed_model, show_progress=False)
        self.retriever = self.index.as_retriever(similarity_top_k=self.fetch)
        self.index_bytes = sum(
            _utf8(n.text) + _utf8(n.metadata["window"]) + _utf8(n.metadata["original_text"]) for n in nodes
        ) + self.chunks * _dimension(embeddings) * 4

    def _window_spans(self, nodes) -> dict[str, tuple[str, int, int]]:
        """``node_id -> (source_id, start, end)`` of each sentence's window (see the class doc)."""
        by_source: dict[str, list] = {}
        for node in nodes:
            by_source.setdefault(node.ref_doc_id, []).append(node)
        out = {}
        for sid, group in by_source.items():
            text = self.texts[sid]
            first = group[0].start_char_idx
            if first is None or text[:first].strip():
                raise RuntimeError(f"SentenceWindowNodeParser: cannot place the first sentence of source {sid!r}")
            bounds = []
            pos = first
            for node in group:
                if text[pos : pos + len(node.text)] != node.text:
                    raise RuntimeError(f"SentenceWindowNodeParser: sentences of source {sid!r} do not tile its text "
                                       f"at offset {pos}")
                bounds.append((pos, pos + len(node.text)))
                pos += len(node.text)
            w = self.window_size
            for i, node in enumerate(group):
                lo, hi = max(0, i - w), min(len(group) - 1, i + w)
                window = " ".join(n.text for n in group[lo : hi + 1])
                if node.metadata.get("window") != window:
                    raise RuntimeError(f"SentenceWindowNodeParser: the window of sentence {i} of source {sid!r} is "
                                       "not the join of its neighbours")
                out[node.node_id] = (sid, bounds[lo][0], bounds[hi][1])
        return out

    def _nodes(self, question: str, queries: Sequence[str]) -> list:
        _check_question(question, queries)
        if self.retriever is None:
            return []
        if not queries:
            nodes = self.retriever.retrieve(question)
        else:
            from llama_index.core.retrievers import QueryFusionRetriever

            fusion = QueryFusionRetriever(
                self._fusion_retrievers(), llm=_fixed_queries_llm(queries), similarity_top_k=self.fetch,
                num_queries=len(queries) + 1, use_async=False, verbose=False, **self._fusion_options(),
            )
            nodes = fusion.retrieve(question)
        return self.postprocessor.postprocess_nodes(nodes, query_str=question)

    def _fusion_retrievers(self) -> list:
        """The retrievers ``QueryFusionRetriever`` runs every query variant through (multi-query)."""
        return [self.retriever]

    def _fusion_options(self) -> dict[str, Any]:
        """``QueryFusionRetriever``'s fusion arguments for multi-query (reciprocal rank here)."""
        return {"mode": "reciprocal_rerank"}

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        return [self.windows[n.node.node_id] for n in self._nodes(question, queries)]

    def context(self, question: str, budget: int = DEFAULT_BUDGET, queries: Sequence[str] = ()) -> AssembledContext:
        spans = self.retrieve(question, queries)
        return assemble_by_text([self.texts[s][a:b] for s, a, b in spans], budget, spans=spans,
                                encoding_name=self.encoding_name)


@lru_cache(maxsize=1)
def _fixed_queries_llm_class():
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback

    class FixedQueriesLLM(CustomLLM):
        """A LlamaIndex LLM that answers every prompt with the given query variants, one
        per line: how the runner's (cached) variants reach ``QueryFusionRetriever``."""

        queries: list[str]

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="fixed-queries")

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return CompletionResponse(text="\n".join(q.replace("\n", " ") for q in self.queries))

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
            yield self.complete(prompt, formatted=formatted, **kwargs)

    return FixedQueriesLLM


def _fixed_queries_llm(queries: Sequence[str]):
    return _fixed_queries_llm_class()(queries=list(queries))
