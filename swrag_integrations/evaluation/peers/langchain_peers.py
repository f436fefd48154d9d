"""The LangChain peer anchors of ``swrag eval`` (a framework face): ``langchain-ensemble``
(`LangChainEnsemblePipeline`) and ``langchain-parent``
(`LangChainParentDocumentPipeline`), built from LangChain's shipped classes only
(see `anchors` for what every anchor shares and how they are measured). Both are
registered in `PIPELINES` when this module
is imported.
"""

from __future__ import annotations

import uuid
from typing import Any, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext, assemble_by_text
from swrag_integrations.evaluation.langchain_pipelines import rcs_splitter
from swrag_integrations.evaluation.peers.anchors import (
    PARENT_CHILD_FRACTION,
    _check_question,
    _check_sources,
    _check_span,
    _dimension,
    _embeddings,
    _fetch,
    _positive,
    _utf8,
    _weights,
    jieba_preprocess,
)
from swrag_integrations.evaluation.pipelines import Pipeline, PipelineSpec, register_pipeline

__all__ = ["LangChainEnsemblePipeline", "LangChainParentDocumentPipeline"]


class _ChromaCollection:
    """A fresh collection in an in-process Chroma client, deleted by `close`."""

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
    `rcs_splitter`) and ``weights`` (BM25, dense).

    ``fetch`` = ``k`` or `STOCK_DEFAULT_K`; the ensemble returns the
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

        splitter = rcs_splitter(self.chunk_size, config.unit, self.encoding_name, separators)
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
            child_splitter=rcs_splitter(self.child_size, config.unit, self.encoding_name, separators),
            parent_splitter=rcs_splitter(self.parent_size, config.unit, self.encoding_name, separators),
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


register_pipeline("langchain-ensemble", PipelineSpec(
    LangChainEnsemblePipeline, None, needs_embeddings=True,
    description="LangChain EnsembleRetriever: jieba-aware BM25Retriever + Chroma over RCS"))
register_pipeline("langchain-parent", PipelineSpec(
    LangChainParentDocumentPipeline, None, needs_embeddings=True,
    description="LangChain ParentDocumentRetriever (small chunks, parent chunks)"))
