"""The plain LangChain ``VectorStore`` face of an index: the documents as they were added.

`SlidingWindowIndex` keeps each added document as one *source* and its
small chunks' vectors in a vector store. Its ``similarity_search`` family follows the
``VectorStore`` contract with these functions: the result is the added documents
themselves (whole text, the user's own metadata and id), ranked by their best small
chunk, with relevance scores in [0, 1] in rank order. Widening hits into windows is
the retrievers' job (`WindowedParentRetriever`), not this face's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from langchain_core.documents import Document

if TYPE_CHECKING:
    from swrag_integrations.engine.protocols import EngineState

__all__ = ["search_documents", "source_document"]


def source_document(rec: Any) -> Document:
    """A complete source record as the document that was added (its id: the one it was
    added under, else the source id `add_documents` returned)."""
    return Document(page_content=rec.text, metadata=rec.doc_metadata, id=rec.doc_id or rec.source_id)


def search_documents(index: "EngineState", vector: Sequence[float], k: int, *, mmr: bool = False,
                     fetch_k: int = 20, lambda_mult: float = 0.5,
                     filter: Any = None) -> list[tuple[Document, float | None]]:
    """The ``k`` best added documents for a query vector, best first.

    Small chunks are fetched from the vector store (plain similarity with relevance
    scores, or MMR) and each source is ranked by its first chunk in that list; more
    chunks are fetched while fewer than ``k`` sources were found and the store had
    more (at most every chunk the index holds, and not once every source was found).
    ``k`` and ``fetch_k`` are checked and clipped to the index size
    (`search_k`). Chunks of sources that are not complete,
    or of an older version of a source's text, are dropped (as for every search of the index). The score is the
    best chunk's relevance in [0, 1] (``None`` for MMR, which has none).

    ``filter``: a metadata filter (`parse_filter`), pushed down to the
    store where it can filter and checked against every source's record.
    """
    from swrag_integrations.engine.filters import SourceMatcher, parse_filter

    generation = index.read_generation()  # one snapshot for every step of this search
    k = index.search_k(k, generation=generation)
    fetch_k = index.search_k(fetch_k, "fetch_k", generation=generation)
    flt = parse_filter(filter)
    matcher = SourceMatcher(flt, index.store) if flt is not None else None
    native = index.vectors.native_filter(flt) if flt is not None else None
    index.before_search()
    size, sources = index.sizes(generation)
    n = max(1, min(max(4 * k, fetch_k if mmr else 0, 20), size))
    while True:
        if mmr:
            pairs = [(d, None) for d in index.wrap(
                lambda: index.vectors.search(vector, n, mmr=True, fetch_k=max(fetch_k, n), lambda_mult=lambda_mult,
                                             native=native),
                "search the vectors")]
        else:
            pairs = index.wrap(lambda: index.vectors.search_scored(vector, n, native=native), "search the vectors")
        best = _best_per_source(index, pairs, matcher)
        # enough sources, or none left to find: the store had no more chunks, every chunk
        # was fetched, or every source was found (a one-document index: one round)
        if len(best) >= min(k, sources) or len(pairs) < n or n >= size:
            break
        n = min(4 * n, size)
    chosen = list(best.items())[:k]
    records = index.records_of([sid for sid, _ in chosen], matcher.records if matcher is not None else None)
    return [(source_document(records[sid]), score) for sid, score in chosen
            if sid in records and records[sid].complete]


def _best_per_source(index: "EngineState", pairs: list[tuple[Any, float | None]],
                     matcher: Any = None) -> dict[str, float | None]:
    """Source id -> score of its first (best) chunk, in rank order; stale chunks and
    sources the filter (``matcher``: a `SourceMatcher`) excludes dropped."""
    heads = index.store.heads(sorted({str((d.metadata or {}).get("source_id")) for d, _ in pairs}))
    best: dict[str, float | None] = {}
    for doc, score in pairs:
        meta = doc.metadata or {}
        sid = str(meta.get("source_id"))
        head = heads.get(sid)
        if head is None or head.state != "complete" or meta.get("content_hash") != head.content_hash:
            continue
        best.setdefault(sid, score)
    if matcher is not None:  # every source checked in one read of their records
        best = {sid: score for (sid, score), ok in zip(best.items(), matcher.passes(list(best))) if ok}
    return best
