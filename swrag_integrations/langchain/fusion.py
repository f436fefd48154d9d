"""Reciprocal-rank fusion of LangChain ``Document`` lists (the engine's `fuse_documents`)."""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.documents import Document

from swrag_integrations.engine.fusion import fuse_documents
from swrag_integrations.engine.fusion import doc_key, rrf  # noqa: F401 - the old path swrag_integrations.retrieval.fusion (this module now) keeps them

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(
    result_lists: Sequence[Sequence[Any]],
    weights: Sequence[float] | None = None,
    *,
    c: float = 60.0,
    k: int | None = None,
    list_names: Sequence[str] | None = None,
) -> list[Document]:
    """Fuse ranked lists of LangChain ``Document`` s: ``score(d) = sum_i w_i / (c + rank_i(d))`` (ranks from 1).

    Returns new ``Document`` objects (inputs are not mutated), best first, at most
    ``k``. Each carries ``metadata["rrf_score"]``, ``metadata["fused_rank"]`` (1-based)
    and ``metadata["<name>_rank"]`` for every list it appeared in (names default to
    ``list0``, ``list1``...); documents are told apart by
    `doc_key`, never by their text.
    """
    return [Document(page_content=doc.page_content, metadata=meta, id=doc.id)
            for doc, meta in fuse_documents(result_lists, weights, c=c, k=k, list_names=list_names)]
