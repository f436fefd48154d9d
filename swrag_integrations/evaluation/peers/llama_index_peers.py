"""The LlamaIndex sentence-window peer anchor of ``swrag eval`` (a framework face):
``llamaindex-window`` (`LlamaIndexSentenceWindowPipeline`), built from LlamaIndex's
shipped classes only (see `anchors` for what every anchor shares), and the
CJK-aware sentence splitter it can use. Registered in
`PIPELINES` when this module is imported;
the hybrid variant is `llama_index_hybrid`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext, assemble_by_text
from swrag_integrations.evaluation.peers.anchors import (
    _CJK_SENTENCE,
    SENTENCE_WINDOW_SIZE,
    _check_question,
    _check_sources,
    _dimension,
    _embeddings,
    _fetch,
    _positive,
    _utf8,
)
from swrag_integrations.evaluation.pipelines import Pipeline, PipelineSpec, register_pipeline

__all__ = ["LlamaIndexSentenceWindowPipeline", "cjk_sentence_splitter"]


def cjk_sentence_splitter() -> Callable[[str], list[str]]:
    """A ``sentence_splitter`` for LlamaIndex's ``SentenceWindowNodeParser`` that also cuts Chinese.

    LlamaIndex's default (NLTK punkt, ``split_by_sentence_tokenizer``) runs first, so
    English sentences are punkt's; each punkt sentence is then cut after every run of
    `CJK_SENTENCE_ENDS` (``。！？；…`` and newlines; closing quotes and brackets
    right after them stay with the sentence) with LlamaIndex's own ``split_by_regex``.
    The pieces tile their text exactly (every character is in one piece, in order), so
    the sentences still tile the document and their offsets stay exact.
    """
    from llama_index.core.node_parser.text.utils import split_by_regex, split_by_sentence_tokenizer

    punkt = split_by_sentence_tokenizer()
    cut = split_by_regex(_CJK_SENTENCE.pattern)
    return lambda text: [piece for sentence in punkt(text) for piece in cut(sentence)]


_SENTENCE_SPLITTERS = {"punkt": None, "cjk": cjk_sentence_splitter}


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
    (``"punkt"``, the default above, or ``"cjk"``: `cjk_sentence_splitter`, which
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


register_pipeline("llamaindex-window", PipelineSpec(
    LlamaIndexSentenceWindowPipeline, None, needs_embeddings=True,
    description="LlamaIndex sentence-window retrieval + metadata replacement"))
