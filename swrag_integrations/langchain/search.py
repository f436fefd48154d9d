"""LangChain retrievers over the first stage: BM25, dense and their fusion (small chunks).

Every retriever here honours LangChain's call-time ``k`` (``retriever.invoke(q, k=2)``)
and raises ``TypeError`` for any other unknown keyword (and for unknown constructor
fields), as LangChain's standard retriever tests expect.

* `CJKBM25Retriever` -- BM25 with jieba segmentation for Chinese and ``bm25s``
  scoring, over documents in memory or over an index's keyword side.
* `DenseChunkRetriever` -- nearest small chunks of an index (hydrated from its
  source store).

Over an index (a `SlidingWindowIndex` or its engine) each is built by its
``from_index``: ``HybridRetriever.from_index(index, k=20)``.
* `HybridRetriever` -- several retrievers fused by weighted reciprocal rank
  (`reciprocal_rank_fusion`). LangChain's ``EnsembleRetriever`` can keep
  distinct documents apart with its ``id_key`` option, but it still merges metadata by
  taking the first list's copy and gives no per-list ranks; here all copies' metadata
  is kept and ``<name>_rank``/``rrf_score``/``fused_rank`` are recorded, which the
  parent retriever and the evaluation read.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, Iterable, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator, model_validator

from swrag_integrations.keyword.bm25 import BM25Index
from swrag_integrations.langchain.fusion import reciprocal_rank_fusion
from swrag_integrations.engine.parents import check_query
from swrag_integrations.engine.protocols import as_engine
from swrag_integrations.engine.settings import positive_int

__all__ = ["CJKBM25Retriever", "DenseChunkRetriever", "HybridRetriever", "call_options", "chunk_documents",
           "dense_documents"]

_PASSED_BY_LANGCHAIN = {"verbose"}  # invoke() forwards these itself


def call_options(kwargs: dict[str, Any], allowed: dict[str, Any], where: str, *,
                 checks: dict[str, Callable[[Any], Any]] | None = None) -> dict[str, Any]:
    """Call-time options: ``allowed`` maps name -> default (the field value); any other
    keyword raises ``TypeError``. A given value goes through its ``checks[name]`` (which
    returns the value to use or raises); without one it must be a positive int or
    ``None`` (``k`` and friends)."""
    unknown = sorted(set(kwargs) - set(allowed) - _PASSED_BY_LANGCHAIN)
    if unknown:
        raise TypeError(f"{where} got unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"it accepts {', '.join(sorted(allowed))}")
    out = dict(allowed)
    for name in allowed:
        if name in kwargs:
            value = kwargs[name]
            check = (checks or {}).get(name)
            if check is not None:
                out[name] = check(value)
            else:
                out[name] = value if value is None else positive_int(name, value)
    return out


def chunk_documents(engine: Any, ids: Sequence[str]) -> list[Document]:
    """Small/medium chunks of an index by chunk id (``<sid>:s:<i>`` / ``<sid>:m:<j>``) as
    LangChain Documents (order of ``ids``; unknown ids and incomplete sources are left out):
    `get_chunks` (``engine``: an engine or a face over one)."""
    return [Document(page_content=c.page_content, metadata=c.metadata, id=c.id)
            for c in as_engine(engine).get_chunks(ids)]


def dense_documents(engine: Any, query: str, k: int = 20, *, search_type: str = "mmr", fetch_k: int | None = None,
                    lambda_mult: float = 0.5, filter: Any = None) -> list[Document]:
    """The ``k`` nearest small chunks of an index as Documents, ``metadata["dense_rank"]``
    set (`dense_ids`; ``engine``: an engine or a face over one)."""
    engine = as_engine(engine)
    docs = chunk_documents(engine, engine.dense_ids(query, k, search_type=search_type, fetch_k=fetch_k,
                                                    lambda_mult=lambda_mult, filter=filter))
    for rank, doc in enumerate(docs, start=1):
        doc.metadata["dense_rank"] = rank
    return docs


class _EngineKeywords:
    """An index's keyword search as ``search(query, k)`` for `CJKBM25Retriever`:
    through `bm25_search`, so ``k`` is checked and clipped there."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        return self.engine.bm25_search(query, k)


class CJKBM25Retriever(BaseRetriever):
    """BM25 retriever with jieba segmentation for Chinese and fast ``bm25s`` scoring.

    Unlike ``langchain_community.retrievers.BM25Retriever`` (``str.split`` tokens,
    pure-Python scoring) it handles Chinese and scales to 100k+ chunks. Documents are
    either kept in memory (`from_documents` / `from_texts`) or fetched by id
    through ``fetch`` (how `SlidingWindowIndex`
    uses it: texts live in its source store). ``index`` is anything with
    ``search(query, k) -> [(id, score)]`` (a `BM25Index`, an index's
    keyword side).

    Each returned document carries ``metadata["bm25_score"]`` and its ``id``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    index: Any
    docs: dict[str, Document] | None = None
    fetch: Callable[[list[str]], list[Document]] | None = None
    k: int = 4

    @field_validator("k")
    @classmethod
    def _check_k(cls, value: int) -> int:
        return positive_int("k", value)

    @classmethod
    def from_documents(cls, documents: Iterable[Document], *, k: int = 4, **bm25_kwargs: Any) -> "CJKBM25Retriever":
        docs = list(documents)
        ids = [d.id or str(d.metadata.get("id", "")) or f"doc-{i}" for i, d in enumerate(docs)]
        if len(set(ids)) != len(ids):
            raise ValueError("documents must have distinct ids (Document.id)")
        index = BM25Index(**bm25_kwargs)
        index.upsert(ids, [d.page_content for d in docs])
        stored = {i: Document(page_content=d.page_content, metadata=dict(d.metadata), id=i) for i, d in zip(ids, docs)}
        return cls(index=index, docs=stored, k=k)

    @classmethod
    def from_texts(cls, texts: Iterable[str], metadatas: Iterable[dict] | None = None,
                   ids: Iterable[str] | None = None, *, k: int = 4, **bm25_kwargs: Any) -> "CJKBM25Retriever":
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        id_list = list(ids) if ids is not None else [f"doc-{i}" for i in range(len(texts))]
        docs = [Document(page_content=t, metadata=m, id=i) for t, m, i in zip(texts, metas, id_list)]
        return cls.from_documents(docs, k=k, **bm25_kwargs)

    @classmethod
    def from_index(cls, index: Any, k: int = 20) -> "CJKBM25Retriever":
        """BM25 over an index's small chunks (``index``: a `SlidingWindowIndex`
        or an `IndexEngine`), hydrated from its source store."""
        engine = as_engine(index)
        return cls(index=_EngineKeywords(engine), fetch=functools.partial(chunk_documents, engine), k=k)

    def search(self, query: str, k: int | None = None) -> list[Document]:
        check_query(query)
        hits = self.index.search(query, k or self.k)
        if not hits:
            return []
        ids = [h[0] for h in hits]
        if self.docs is not None:
            found = {i: self.docs[i] for i in ids if i in self.docs}
        elif self.fetch is not None:
            found = {d.id: d for d in self.fetch(ids)}
        else:
            raise ValueError("CJKBM25Retriever needs docs or fetch to return documents")
        out = []
        for doc_id, score in hits:
            doc = found.get(doc_id)
            if doc is None:
                continue
            meta = dict(doc.metadata)
            meta["bm25_score"] = score
            out.append(Document(page_content=doc.page_content, metadata=meta, id=doc_id))
        return out

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return self.search(query, call_options(kwargs, {"k": self.k}, "CJKBM25Retriever.invoke()")["k"])


class DenseChunkRetriever(BaseRetriever):
    """Nearest small chunks of an index (``dense_rank`` set; `dense_documents`).

    ``index``: an `IndexEngine` or a face over one (a
    `SlidingWindowIndex`: its engine is kept).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    index: Any
    k: int = 20
    search_type: str = "mmr"
    fetch_k: int | None = None
    lambda_mult: float = 0.5

    @field_validator("k")
    @classmethod
    def _check_k(cls, value: int) -> int:
        return positive_int("k", value)

    @field_validator("index")
    @classmethod
    def _engine(cls, value: Any) -> Any:
        return as_engine(value)

    @field_validator("search_type")
    @classmethod
    def _search_type(cls, value: Any) -> str:
        if value not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {value!r}")
        return value

    @classmethod
    def from_index(cls, index: Any, k: int = 20, search_type: str = "mmr", *, fetch_k: int | None = None,
                   lambda_mult: float = 0.5) -> "DenseChunkRetriever":
        """Dense small-chunk retriever over ``index`` (a face or an engine)."""
        return cls(index=index, k=k, search_type=search_type, fetch_k=fetch_k, lambda_mult=lambda_mult)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        k = call_options(kwargs, {"k": self.k}, "DenseChunkRetriever.invoke()")["k"]
        check_query(query)
        return dense_documents(self.index, query, k, search_type=self.search_type, fetch_k=self.fetch_k,
                               lambda_mult=self.lambda_mult)


class HybridRetriever(BaseRetriever):
    """Runs several retrievers (e.g. BM25 + dense) and fuses them by weighted RRF.

    Args:
        retrievers: the LangChain retrievers to combine.
        weights: one weight per retriever (default equal).
        c: the RRF constant (60 as in the original RRF paper).
        k: how many fused documents to return (also a call-time keyword).
        names: labels used for the ``<name>_rank`` metadata keys.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retrievers: list[BaseRetriever]
    weights: list[float] | None = None
    c: float = 60.0
    k: int = 10
    names: list[str] | None = None

    @field_validator("k")
    @classmethod
    def _check_k(cls, value: int) -> int:
        return positive_int("k", value)

    @model_validator(mode="after")
    def _check(self) -> "HybridRetriever":
        if not self.retrievers:
            raise ValueError("retrievers must not be empty")
        if self.weights is not None and len(self.weights) != len(self.retrievers):
            raise ValueError(f"got {len(self.weights)} weights for {len(self.retrievers)} retrievers")
        if self.names is not None and len(self.names) != len(self.retrievers):
            raise ValueError("names must match retrievers")
        return self

    @classmethod
    def from_index(cls, index: Any, k: int = 20, *, search_type: str = "mmr",
                   weights: Sequence[float] = (0.5, 0.5), c: float = 60.0) -> "HybridRetriever":
        """BM25 + dense small-chunk retriever over ``index`` (a face or an engine), fused by
        weighted RRF (``<name>_rank`` metadata: ``bm25_rank``, ``dense_rank``)."""
        return cls(retrievers=[CJKBM25Retriever.from_index(index, k), DenseChunkRetriever.from_index(index, k, search_type)],
                   weights=list(weights), c=c, k=k, names=["bm25", "dense"])

    def _names(self) -> list[str]:
        return self.names or [f"retriever{i}" for i in range(len(self.retrievers))]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        k = call_options(kwargs, {"k": self.k}, "HybridRetriever.invoke()")["k"]
        check_query(query)
        lists = [r.invoke(query, config={"callbacks": run_manager.get_child(tag=f"retriever_{i}")})
                 for i, r in enumerate(self.retrievers)]
        return reciprocal_rank_fusion(lists, self.weights, c=self.c, k=k, list_names=self._names())

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        k = call_options(kwargs, {"k": self.k}, "HybridRetriever.ainvoke()")["k"]
        check_query(query)
        lists = await asyncio.gather(*(r.ainvoke(query, config={"callbacks": run_manager.get_child(tag=f"retriever_{i}")})
                                       for i, r in enumerate(self.retrievers)))
        return reciprocal_rank_fusion(lists, self.weights, c=self.c, k=k, list_names=self._names())
