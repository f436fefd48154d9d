"""Weighted reciprocal-rank fusion that de-duplicates by id, never by text.

LangChain's ``EnsembleRetriever`` keys documents on ``page_content`` (two different
chunks with the same text collapse, and the metadata of the first list wins). Here a
document's identity is `doc_key`: ``Document.id``, else ``metadata["id"]`` /
``metadata["chunk_id"]``, else its span (``source_id``/``source`` + ``start_index`` +
``end_index``); documents without any of these are never merged. Metadata of all
copies is kept (first one wins per key, later lists fill missing keys) and the fusion
adds ``rrf_score``, ``fused_rank`` and per-list ranks (`fuse_documents`; the
LangChain face's ``reciprocal_rank_fusion`` returns them as LangChain ``Document`` s).
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

__all__ = ["rrf", "doc_key", "fuse_documents"]


def rrf(
    ranked_lists: Sequence[Sequence[Hashable]],
    weights: Sequence[float] | None = None,
    *,
    c: float = 60.0,
) -> list[tuple[Hashable, float, list[int | None]]]:
    """Weighted reciprocal-rank fusion of ranked keys -- the one RRF of the package.

    ``score(x) = sum_i w_i / (c + rank_i(x))`` with ranks from 1; a list that repeats a
    key counts its best rank only. Returns ``(key, score, ranks)`` best first (ties keep
    first-seen order), ``ranks[i]`` being the key's rank in list ``i`` or ``None``.
    """
    n = len(ranked_lists)
    if weights is None:
        weights = [1.0] * n
    if len(weights) != n:
        raise ValueError(f"got {len(weights)} weights for {n} result lists")
    if any(w < 0 for w in weights):
        raise ValueError("weights must be >= 0")
    if c < 0:
        raise ValueError("c must be >= 0")
    scores: dict[Hashable, float] = {}
    ranks: dict[Hashable, list[int | None]] = {}
    for li, (keys, weight) in enumerate(zip(ranked_lists, weights)):
        for rank, key in enumerate(keys, start=1):
            slot = ranks.setdefault(key, [None] * n)
            if slot[li] is not None:
                continue
            slot[li] = rank
            scores[key] = scores.get(key, 0.0) + weight / (c + rank)
    order = {key: i for i, key in enumerate(ranks)}
    ranked = sorted(scores, key=lambda key: (-scores[key], order[key]))
    return [(key, scores[key], ranks[key]) for key in ranked]


def doc_key(doc: Any, position: int | None = None) -> Hashable:
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


def fuse_documents(
    result_lists: Sequence[Sequence[Any]],
    weights: Sequence[float] | None = None,
    *,
    c: float = 60.0,
    k: int | None = None,
    list_names: Sequence[str] | None = None,
) -> list[tuple[Any, dict[str, Any]]]:
    """Fuse ranked lists of documents (anything with ``id``, ``metadata`` and
    ``page_content``): ``score(d) = sum_i w_i / (c + rank_i(d))`` (ranks from 1).

    Returns ``(document, metadata)`` pairs, best first, at most ``k``: the first copy of
    each document (inputs are not mutated) and its fused metadata, which carries
    ``rrf_score``, ``fused_rank`` (1-based) and ``<name>_rank`` for every list it
    appeared in (names default to ``list0``, ``list1``...). The faces build their own
    documents from them (`swrag_integrations.langchain.fusion.reciprocal_rank_fusion`).
    """
    if k is not None and k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    names = list(list_names) if list_names is not None else [f"list{i}" for i in range(len(result_lists))]
    keyed: list[list[Hashable]] = []
    docs: dict[Hashable, Any] = {}
    metas: dict[Hashable, dict[str, Any]] = {}
    for li, results in enumerate(result_lists):
        keys = []
        for rank, doc in enumerate(results, start=1):
            key = doc_key(doc)
            if key[0] == "object":
                key = ("object", li, rank)
            keys.append(key)
            if key not in docs:
                docs[key] = doc
                metas[key] = dict(doc.metadata or {})
            else:
                for mk, mv in (doc.metadata or {}).items():
                    metas[key].setdefault(mk, mv)
        keyed.append(keys)
    fused = rrf(keyed, weights, c=c)
    if k is not None:
        fused = fused[:k]
    out = []
    for pos, (key, score, ranks) in enumerate(fused, start=1):
        meta = metas[key]
        for name, rank in zip(names, ranks):
            if rank is not None:
                meta[f"{name}_rank"] = rank
        meta["rrf_score"] = score
        meta["fused_rank"] = pos
        out.append((docs[key], meta))
    return out
