"""Weighted reciprocal-rank fusion that de-duplicates by id, never by text.

LangChain's ``EnsembleRetriever`` keys documents on ``page_content`` (two different
chunks with the same text collapse, and the metadata of the first list wins). Here a
document's identity is :func:`doc_key`: ``Document.id``, else ``metadata["id"]`` /
``metadata["chunk_id"]``, else its span (``source_id``/``source`` + ``start_index`` +
``end_index``); documents without any of these are never merged. Metadata of all
copies is kept (first one wins per key, later lists fill missing keys) and the fusion
adds ``rrf_score``, ``fused_rank`` and per-list ranks.
"""

from __future__ import annotations

import asyncio
from typing import Any, Hashable, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator, model_validator

__all__ = ["doc_key", "reciprocal_rank_fusion", "HybridRetriever"]


def doc_key(doc: Document, position: int | None = None) -> Hashable:
    """Identity of a document for de-duplication (never its text)."""
    if doc.id:
        return ("id", doc.id)
    meta = doc.metadata or {}
    for key in ("id", "chunk_id", "doc_id"):
        value = meta.get(key)
        if value not in (None, ""):
            return ("id", str(value))
    source = meta.get("source_id", meta.get("source"))
    if source is not None and "start_index" in meta:
        return ("span", str(source), meta.get("start_index"), meta.get("end_index"))
    return ("object", id(doc), position)


def reciprocal_rank_fusion(
    result_lists: Sequence[Sequence[Document]],
    weights: Sequence[float] | None = None,
    *,
    c: float = 60.0,
    k: int | None = None,
    list_names: Sequence[str] | None = None,
) -> list[Document]:
    """Fuse ranked lists: ``score(d) = sum_i w_i / (c + rank_i(d))`` (ranks from 1).

    Returns new ``Document`` objects (inputs are not mutated), best first, at most
    ``k``. Each carries ``metadata["rrf_score"]``, ``metadata["fused_rank"]`` (1-based)
    and ``metadata["<name>_rank"]`` for every list it appeared in (names default to
    ``list0``, ``list1``...).
    """
    n = len(result_lists)
    if weights is None:
        weights = [1.0] * n
    if len(weights) != n:
        raise ValueError(f"got {len(weights)} weights for {n} result lists")
    if any(w < 0 for w in weights):
        raise ValueError("weights must be >= 0")
    if c < 0:
        raise ValueError("c must be >= 0")
    if k is not None and k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    names = list(list_names) if list_names is not None else [f"list{i}" for i in range(n)]
    scores: dict[Hashable, float] = {}
    docs: dict[Hashable, Document] = {}
    metas: dict[Hashable, dict[str, Any]] = {}
    order: dict[Hashable, int] = {}
    for li, (results, weight) in enumerate(zip(result_lists, weights)):
        seen_here: set[Hashable] = set()
        for rank, doc in enumerate(results, start=1):
            key = doc_key(doc, position=None)
            if key[0] == "object":
                key = ("object", li, rank)
            if key in seen_here:  # a list repeating a document counts once, best rank
                continue
            seen_here.add(key)
            scores[key] = scores.get(key, 0.0) + weight / (c + rank)
            if key not in docs:
                docs[key] = doc
                metas[key] = dict(doc.metadata or {})
                order[key] = len(order)
            else:
                meta = metas[key]
                for mk, mv in (doc.metadata or {}).items():
                    meta.setdefault(mk, mv)
            metas[key][f"{names[li]}_rank"] = rank
    ranked = sorted(scores, key=lambda key: (-scores[key], order[key]))
    if k is not None:
        ranked = ranked[:k]
    out = []
    for pos, key in enumerate(ranked, start=1):
        doc = docs[key]
        meta = metas[key]
        meta["rrf_score"] = scores[key]
        meta["fused_rank"] = pos
        out.append(Document(page_content=doc.page_content, metadata=meta, id=doc.id))
    return out


class HybridRetriever(BaseRetriever):
    """Runs several retrievers (e.g. BM25 + Chroma) and fuses them by weighted RRF.

    Args:
        retrievers: the LangChain retrievers to combine.
        weights: one weight per retriever (default equal).
        c: the RRF constant (60 as in the original RRF paper).
        k: how many fused documents to return.
        names: labels used for the ``<name>_rank`` metadata keys.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retrievers: list[BaseRetriever]
    weights: list[float] | None = None
    c: float = 60.0
    k: int = 10
    names: list[str] | None = None

    @field_validator("k")
    @classmethod
    def _check_k(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"k must be > 0, got {value}")
        return value

    @model_validator(mode="after")
    def _check(self) -> "HybridRetriever":
        if not self.retrievers:
            raise ValueError("retrievers must not be empty")
        if self.weights is not None and len(self.weights) != len(self.retrievers):
            raise ValueError(f"got {len(self.weights)} weights for {len(self.retrievers)} retrievers")
        if self.names is not None and len(self.names) != len(self.retrievers):
            raise ValueError("names must match retrievers")
        return self

    def _names(self) -> list[str]:
        return self.names or [f"retriever{i}" for i in range(len(self.retrievers))]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        lists = [
            r.invoke(query, config={"callbacks": run_manager.get_child(tag=f"retriever_{i}")})
            for i, r in enumerate(self.retrievers)
        ]
        return reciprocal_rank_fusion(lists, self.weights, c=self.c, k=self.k, list_names=self._names())

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        lists = await asyncio.gather(
            *(
                r.ainvoke(query, config={"callbacks": run_manager.get_child(tag=f"retriever_{i}")})
                for i, r in enumerate(self.retrievers)
            )
        )
        return reciprocal_rank_fusion(lists, self.weights, c=self.c, k=self.k, list_names=self._names())
