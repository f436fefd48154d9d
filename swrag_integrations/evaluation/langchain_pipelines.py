"""The LangChain-built strategies of ``swrag eval`` (a framework face of the evaluation).

* ``rcs``: LangChain's ``RecursiveCharacterTextSplitter`` (tiktoken length function in
  token unit, no overlap) as chunker, then the BM25 ranking and offset assembly of the
  window strategies (`SpanBM25Pipeline`).
* ``parent``: `swrag_integrations.langchain.retriever.WindowedParentRetriever`: small
  chunks (50 tokens) found by hybrid search (BM25 + MiniLM in Chroma), widened to their
  DDS windows (``window`` units, ``step`` delimiters), merged by offset in the budget.
  ``window``/``step`` only shape the parents (how far a hit is widened); how much of
  them is kept is decided by the budget planner, and the number of parents is not
  capped unless ``k`` is given (the retriever's default fills the budget).
* ``default`` / ``default-milvus`` / ``default-v1``: the package's index and retriever
  with their defaults (`DefaultPipeline` and its variants).
* ``langchain-stock``: LangChain parts as shipped: ``RecursiveCharacterTextSplitter``
  (same settings as ``rcs``), ``BM25Retriever`` (``str.split`` tokens), Chroma with the
  MiniLM embedder, ``EnsembleRetriever`` (equal weights); chunk texts are concatenated
  in rank order (`assemble_by_text`). Multi-query uses LangChain's
  ``MultiQueryRetriever``.

Each is registered in `PIPELINES` when this module is imported
(`strategies` does).
"""

from __future__ import annotations

import pickle
import uuid
from typing import Any, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext, assemble_by_text
from swrag_integrations.evaluation.pipelines import (
    STOCK_DEFAULT_K,
    Pipeline,
    PipelineSpec,
    SpanBM25Pipeline,
    _bm25_bytes,
    register_pipeline,
)

__all__ = [
    "CJK_SEPARATORS",
    "PARENT_CHILD_SIZE",
    "RCSPipeline",
    "ParentPipeline",
    "DefaultPipeline",
    "DefaultMilvusPipeline",
    "DefaultV1Pipeline",
    "LangChainStockPipeline",
    "rcs_spans",
    "rcs_splitter",
]

PARENT_CHILD_SIZE = {"token": 50, "char": 200}  # small-chunk size of ``parent``


# RecursiveCharacterTextSplitter separators a careful user gives it for Chinese text: paragraphs, lines,
# then sentence ends (kept at the end of their sentence), clauses, then the library's last resorts (space, character)
CJK_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", "。", "！", "？", "；", "…", "，", " ", "")


def rcs_splitter(window: int, unit: str, encoding_name: str, separators: str = "default"):
    """LangChain's ``RecursiveCharacterTextSplitter`` (no overlap, ``add_start_index``).

    ``separators="default"`` is the splitter as shipped (``["\\n\\n", "\\n", " ", ""]``,
    separators kept at the start of the next piece); ``"cjk"`` uses
    `CJK_SEPARATORS` with ``keep_separator="end"`` (a ``。`` stays with its sentence).
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if separators == "default":
        extra: dict = {}
    elif separators == "cjk":
        extra = {"separators": list(CJK_SEPARATORS), "keep_separator": "end"}
    else:
        raise ValueError(f"separators must be 'default' or 'cjk', got {separators!r}")
    if unit == "token":
        return RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name=encoding_name, chunk_size=window, chunk_overlap=0, add_start_index=True, **extra
        )
    return RecursiveCharacterTextSplitter(chunk_size=window, chunk_overlap=0, add_start_index=True, **extra)


def rcs_spans(text: str, window: int, unit: str, encoding_name: str) -> list[tuple[int, int]]:
    """Character spans of the shipped ``RecursiveCharacterTextSplitter``'s chunks of ``text``
    (``start_index`` metadata: the chunks are exact substrings)."""
    spans = []
    for doc in rcs_splitter(window, unit, encoding_name).create_documents([text]):
        start = doc.metadata["start_index"]
        if start < 0:  # the splitter could not locate the chunk; should not happen
            start = text.find(doc.page_content)
        spans.append((start, start + len(doc.page_content)))
    return spans


class RCSPipeline(SpanBM25Pipeline):
    """rcs: ``RecursiveCharacterTextSplitter`` chunks, BM25 ranking, offset assembly."""

    def chunk(self, text: str) -> list[tuple[int, int]]:
        return rcs_spans(text, self.config.window, self.config.unit, self.encoding_name)


class ParentPipeline(Pipeline):
    """Windowed parent-child retrieval with `WindowedParentRetriever`.

    The sources go into an in-memory `SlidingWindowIndex`
    (small chunks of `PARENT_CHILD_SIZE` units, embedded with the MiniLM model,
    plus BM25; parent windows are DDS windows of ``window`` units and ``step``
    delimiters); the retriever finds small chunks by hybrid search, widens them to
    their windows and assembles them by offset within the budget. ``k`` (if set) caps
    the number of parents; otherwise the retriever's default (``k=None``: as many
    parents as the budget holds; a fixed 4 left it a third empty on HotpotQA passages).
    """

    RETRIEVER_OPTIONS: dict = {}
    ranking_uses_budget = True  # the retriever's planner chooses parents for its budget

    def __init__(self, sources, config, *, embeddings=None, budget: int = DEFAULT_BUDGET, **kwargs) -> None:
        super().__init__(sources, config, embeddings=embeddings, budget=budget, **kwargs)
        import tempfile

        import chromadb
        from chromadb.config import Settings
        from langchain_core.documents import Document

        from swrag_integrations.langchain.index import SlidingWindowIndex
        from swrag_integrations.engine.ids import source_id_for

        if embeddings is None:
            from swrag_integrations.embeddings.minilm import default_embeddings

            embeddings = default_embeddings()
        self._client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        self._name = f"swrag-eval-parent-{uuid.uuid4().hex[:12]}"
        self._dir = tempfile.TemporaryDirectory(prefix="swrag-eval-")
        self.index = SlidingWindowIndex(
            self._dir.name,
            **self._store_options(),
            collection_name=self._name,
            embedding=embeddings,
            encoding_name=self.encoding_name,
            show_progress=False,
            **self._index_options(config),
        )
        docs = [Document(page_content=s.text, id=s.source_id, metadata={"eval_source": s.source_id}) for s in self.sources]
        self._ids = {source_id_for(d): d.id for d in docs}
        if docs:
            self.index.engine.index_documents(docs)
        self.chunks = self.index.engine.count("small")
        self.budget = budget
        self.make_retrievers()
        dim = len(embeddings.embed_query("dimension probe"))
        self.index_bytes = (
            # the source texts (source store) and the small-chunk texts beside their vectors (they tile the sources)
            2 * sum(len(s.text.encode("utf-8")) for s in self.sources)
            + self.index.engine.count(None) * dim * 4
            + (_bm25_bytes(self.index.engine.keyword.bm25) if hasattr(self.index.engine.keyword, "bm25") else 0)
        )

    def _store_options(self) -> dict:
        """Where the index keeps its vectors: an in-memory Chroma collection."""
        return dict(client=self._client)

    def _index_options(self, config) -> dict:
        return dict(chunk_size=PARENT_CHILD_SIZE[config.unit], strategy="DDS", window_size=config.window,
                    step=config.step_units, unit=config.unit)

    def make_retriever(self, **overrides: Any):
        """A retriever over this pipeline's index: ``RETRIEVER_OPTIONS``, the budget and
        ``k``, then ``overrides``."""
        options = {**self.RETRIEVER_OPTIONS, "budget_tokens": self.budget}
        if self.k is not None:
            options["k"] = self.k
        return self.index.as_retriever(**{**options, **overrides})

    def make_retrievers(self) -> None:
        """(Re)build every retriever that depends on the budget (subclasses with more extend it)."""
        self.retriever = self.make_retriever()

    def set_budget(self, budget: int) -> None:
        """Answer later questions under ``budget`` tokens: the same index, retrievers rebuilt."""
        self.budget = budget
        self.make_retrievers()

    def retriever_for(self, question: str):
        """The retriever that answers ``question`` (one for all; a lever may choose per question)."""
        return self.retriever

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        if not self.sources:
            return []
        return self._spans(self.retriever_for(question).retrieve_many([question, *queries]))

    def _spans(self, docs) -> list[tuple[str, int, int]]:
        """The retriever's documents as ``(source_id, start, end)`` under the sources' own ids."""
        return [
            (self._ids.get(d.metadata["source_id"], d.metadata["source_id"]), int(d.metadata["start_index"]),
             int(d.metadata["end_index"]))
            for d in docs
        ]

    def close(self) -> None:
        try:
            self._client.delete_collection(self._name)
        except Exception:  # already gone
            pass
        self.index.close()
        self._dir.cleanup()


class DefaultPipeline(ParentPipeline):
    """The package as a user gets it: ``SlidingWindowIndex`` and ``as_retriever()`` with
    their defaults (the grid's window and step are not used)."""

    INDEX_OPTIONS: dict = {}

    def _index_options(self, config) -> dict:
        return dict(self.INDEX_OPTIONS)


class DefaultMilvusPipeline(DefaultPipeline):
    """`DefaultPipeline` with the vectors in Milvus Lite (a file in the pipeline's
    temporary folder), so keyword search runs in Milvus (its BM25 over the jieba
    analyser) instead of the in-process BM25; everything else is the same."""

    def _store_options(self) -> dict:
        return dict(storage="milvus")


class DefaultV1Pipeline(DefaultPipeline):
    """The children and search of the defaults before issue 19 -- fixed 50-token FFS
    children, ``k_child=30``, dense MMR -- kept to measure the new defaults against. Not
    the old default itself: parents are ranked by their best hit here as in ``default``
    (the old default summed hits per parent, and that order is gone)."""

    INDEX_OPTIONS = {"child": "fixed"}
    RETRIEVER_OPTIONS = {"k_child": 30, "search_type": "mmr"}


class LangChainStockPipeline(Pipeline):
    """Stock LangChain: RCS chunks, BM25Retriever + Chroma, EnsembleRetriever."""

    assembly = "text"

    def __init__(self, sources, config, *, embeddings=None, **kwargs) -> None:
        super().__init__(sources, config, embeddings=embeddings, **kwargs)
        import chromadb
        from chromadb.config import Settings
        from langchain_chroma import Chroma
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.documents import Document

        if embeddings is None:
            from swrag_integrations.evaluation.embeddings import default_embeddings

            embeddings = default_embeddings()
        fetch = self.k if self.k is not None else STOCK_DEFAULT_K
        splitter = rcs_splitter(config.window, config.unit, self.encoding_name)
        docs = splitter.create_documents(
            [s.text for s in self.sources], metadatas=[{"source_id": s.source_id} for s in self.sources]
        )
        docs = [Document(page_content=d.page_content, metadata=d.metadata) for d in docs if d.page_content]
        self.chunks = len(docs)
        self._client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        self._name = f"swrag-eval-{uuid.uuid4().hex[:12]}"
        self.store = Chroma(collection_name=self._name, embedding_function=embeddings, client=self._client)
        if docs:
            self.store.add_documents(docs)
            bm25 = BM25Retriever.from_documents(docs, k=fetch)
            dense = self.store.as_retriever(search_kwargs={"k": fetch})
            self.retriever = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])
            text_bytes = sum(len(d.page_content.encode("utf-8")) for d in docs)
            dim = len(embeddings.embed_query("dimension probe"))
            self.index_bytes = text_bytes + len(pickle.dumps(bm25.vectorizer)) + self.chunks * dim * 4
        else:
            self.retriever = None

    def _docs(self, question: str, queries: Sequence[str]):
        if self.retriever is None:
            return []
        if not queries:
            return self.retriever.invoke(question)
        from langchain_classic.retrievers import MultiQueryRetriever
        from langchain_core.runnables import RunnableLambda

        fixed = list(queries)
        mq = MultiQueryRetriever(
            retriever=self.retriever, llm_chain=RunnableLambda(lambda _: list(fixed)), include_original=True, verbose=False
        )
        return mq.invoke(question)

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        out = []
        for doc in self._docs(question, queries):
            start = int(doc.metadata.get("start_index", -1))
            out.append((doc.metadata.get("source_id", ""), start, start + len(doc.page_content)))
        return out

    def context(self, question: str, budget: int = DEFAULT_BUDGET, queries: Sequence[str] = ()) -> AssembledContext:
        docs = self._docs(question, queries)
        spans = []
        for doc in docs:
            start = int(doc.metadata.get("start_index", -1))
            spans.append((doc.metadata.get("source_id", ""), start, start + len(doc.page_content)))
        return assemble_by_text([d.page_content for d in docs], budget, spans=spans, encoding_name=self.encoding_name)

    def close(self) -> None:
        try:
            self._client.delete_collection(self._name)
        except Exception:  # already gone
            pass


register_pipeline("rcs", PipelineSpec(RCSPipeline, None,
                                      description="RecursiveCharacterTextSplitter chunks ranked by CJK BM25, merged by offset"))
register_pipeline("parent", PipelineSpec(ParentPipeline, "count", ("3",), needs_embeddings=True,
                                         description="the windowed parent retriever (SlidingWindowIndex defaults)"))
register_pipeline("default", PipelineSpec(DefaultPipeline, None, needs_embeddings=True,
                                          description="the package's defaults: SlidingWindowIndex() + as_retriever() "
                                                      "(--windows ignored)"))
register_pipeline("default-milvus", PipelineSpec(DefaultMilvusPipeline, None, needs_embeddings=True,
                                                 description="the defaults with the vectors and BM25 in Milvus Lite (the "
                                                             "[milvus] extra): keyword search in the store instead of "
                                                             "in process"))
register_pipeline("default-v1", PipelineSpec(DefaultV1Pipeline, None, needs_embeddings=True,
                                             description="fixed 50-token children, k_child 30, MMR (the pre-issue-19 "
                                                         "children and search) with parents by best hit: not the old "
                                                         "summed-hit default"))
register_pipeline("langchain-stock", PipelineSpec(LangChainStockPipeline, None, needs_embeddings=True,
                                                  description="LangChain as shipped: RCS, str.split BM25 + Chroma, "
                                                              "EnsembleRetriever"))
