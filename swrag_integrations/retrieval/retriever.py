"""Windowed parent retrieval: find small chunks precisely, return merged windows.

Stage 1: the hybrid retriever (BM25 + Chroma, weighted RRF) finds ``k_child`` small
chunks per query. Stage 2: within each source the hits whose windows overlap or touch
are grouped into one candidate *parent* whose score is the sum of its hits' fused
scores (so parents, not children, are counted and ranked; ``k`` parents are kept).
Stage 3: each parent's chunk range ``lower..upper`` is read from the source store
(offset arrays + the source text stored once), trimmed around its hits to its share
of the token budget (budget / queries / sources), and all parents are merged by
character offset (no duplicated text) by :func:`assemble_context` until the budget is
full. Unused budget goes to the untrimmed windows in rank order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr, field_validator

from .assemble import ContextSpan, assemble_context

__all__ = ["WindowedParentRetriever", "Candidate"]

_CHUNK_KEYS = {
    "level", "chunk_index", "medium_index", "n_tokens", "window_lower_bound", "window_upper_bound",
    "window_start_index", "window_end_index", "first_chunk", "last_chunk", "content_hash", "chunk_id",
    "rrf_score", "fused_rank", "bm25_rank", "dense_rank", "bm25_score",
}


@dataclass
class Candidate:
    """A parent: a chunk range of one source holding one or more hits."""

    source_id: str
    lower: int
    upper: int
    start: int  # char range of the (untrimmed) parent text
    end: int
    hits: list[tuple[int, float, int, dict]] = field(default_factory=list)  # (chunk, score, hit rank, metadata)
    query_index: int = 0

    @property
    def score(self) -> float:
        return sum(h[1] for h in self.hits)

    @property
    def best(self) -> tuple[int, float, int, dict]:
        return max(self.hits, key=lambda h: (h[1], -h[2]))


def _check_query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    return query


class WindowedParentRetriever(BaseRetriever):
    """LangChain retriever over a :class:`~swrag_integrations.retrieval.SlidingWindowIndex`.

    Args:
        index: the index.
        k: number of parents (merged windows) returned, at most.
        k_child: small chunks fetched by the hybrid stage per query.
        budget_tokens: token budget of the whole returned context (``None``: no limit).
        search_type: ``"mmr"`` (default) or ``"similarity"`` for the dense part.
        weights: RRF weights of (BM25, dense).
        rrf_c: the RRF constant.
        expand: ``"window"`` (the exact window(s) around each hit, default),
            ``"medium"`` (the medium chunks whose window bounds cover the hit) or
            ``"chunk"`` (no widening: plain small chunks, for comparison).
        fetch_mode: how stage 3 reads a parent's chunk range: ``"store"`` (default;
            a slice of the source record's offset arrays and text, no Chroma call),
            ``"ids"`` (also checks the range's vectors in Chroma by primary key) or
            ``"where"`` (checks them with a Chroma metadata-range query
            ``source_id $eq`` + ``chunk_index $gte/$lte``). The text is the same.
            Per 9-chunk range on a 31k-chunk local index: store 0.01 ms, ids 0.5 ms,
            where 40-70 ms (Chroma's local metadata filter costs 35-45 ms even
            without the ``source_id`` clause), hence not the default.

    Returned documents: ``page_content == source_text[start_index:end_index]`` with
    metadata ``source_id``, ``start_index``, ``end_index``, ``score``, ``rank``,
    ``n_tokens``, ``hit_chunk_indices``, ``chunk_lower_bound``/``chunk_upper_bound``
    and the source document's own metadata.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    k: int = 4
    k_child: int = 20
    budget_tokens: int | None = 1500
    search_type: Literal["mmr", "similarity"] = "mmr"
    weights: tuple[float, float] = (0.5, 0.5)
    rrf_c: float = 60.0
    expand: Literal["window", "medium", "chunk"] = "window"
    fetch_mode: Literal["store", "ids", "where"] = "store"

    _hybrid: Any = PrivateAttr(default=None)

    @field_validator("k", "k_child")
    @classmethod
    def _positive(cls, value: int, info) -> int:
        if value <= 0:
            raise ValueError(f"{info.field_name} must be > 0, got {value}")
        return value

    @field_validator("budget_tokens")
    @classmethod
    def _budget(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError(f"budget_tokens must be > 0 or None, got {value}")
        return value

    # ------------------------------------------------------------- stage 1
    def _hybrid_retriever(self):
        if self._hybrid is None:
            self._hybrid = self.index.hybrid_retriever(
                self.k_child, search_type=self.search_type, weights=self.weights, c=self.rrf_c
            )
        return self._hybrid

    def find_chunks(self, query: str, config: dict | None = None) -> list[Document]:
        """Stage 1: fused small-chunk hits for one query."""
        return self._hybrid_retriever().invoke(_check_query(query), config=config)

    async def afind_chunks(self, query: str, config: dict | None = None) -> list[Document]:
        return await self._hybrid_retriever().ainvoke(_check_query(query), config=config)

    # ------------------------------------------------------------- stage 2
    def _range_for_hit(self, meta: dict) -> tuple[int, int, int, int]:
        i = int(meta["chunk_index"])
        if self.expand == "chunk":
            return i, i, int(meta["start_index"]), int(meta["end_index"])
        if self.expand == "medium":
            mediums = self.index.mediums_covering(meta["source_id"], i)
            if mediums:
                return (
                    min(m["first_chunk"] for m in mediums), max(m["last_chunk"] for m in mediums),
                    min(m["start_index"] for m in mediums), max(m["end_index"] for m in mediums),
                )
        return (
            int(meta["window_lower_bound"]), int(meta["window_upper_bound"]),
            int(meta["window_start_index"]), int(meta["window_end_index"]),
        )

    def rank_parents(self, hits: Sequence[Document], query_index: int = 0) -> list[Candidate]:
        """Stage 2: group hits per source into parents, ranked by summed hit score."""
        per_source: dict[str, list[Candidate]] = {}
        for rank, doc in enumerate(hits, start=1):
            meta = doc.metadata
            if meta.get("level") != "small" or "chunk_index" not in meta:
                continue
            score = float(meta.get("rrf_score", 1.0 / (self.rrf_c + rank)))
            lower, upper, start, end = self._range_for_hit(meta)
            cand = Candidate(meta["source_id"], lower, upper, start, end,
                             [(int(meta["chunk_index"]), score, rank, meta)], query_index)
            group = per_source.setdefault(meta["source_id"], [])
            group.append(cand)
        ranked: list[Candidate] = []
        for group in per_source.values():
            group.sort(key=lambda c: c.lower)
            merged: list[Candidate] = []
            for cand in group:  # overlapping or adjacent windows -> one parent
                if merged and cand.lower <= merged[-1].upper + 1:
                    last = merged[-1]
                    last.upper = max(last.upper, cand.upper)
                    last.start = min(last.start, cand.start)
                    last.end = max(last.end, cand.end)
                    last.hits.extend(cand.hits)
                else:
                    merged.append(cand)
            ranked.extend(merged)
        ranked.sort(key=lambda c: (-c.score, min(h[2] for h in c.hits)))
        return ranked[: self.k]

    # ------------------------------------------------------------- stage 3
    def _prefetch(self, cache: dict[str, dict[int, tuple]], cands: Sequence[Candidate]) -> None:
        """Read the chunk ranges of all parents at once (see ``index.fetch_ranges``)."""
        got = self.index.fetch_ranges([(c.source_id, c.lower, c.upper) for c in cands], mode=self.fetch_mode)
        for sid, rows in got.items():
            slot = cache.setdefault(sid, {})
            for i, start, end, n_tokens, text in rows:
                slot[i] = (start, end, n_tokens, text)

    def _rows(self, cache: dict[str, dict[int, tuple]], cand: Candidate) -> list[tuple]:
        rows = cache.setdefault(cand.source_id, {})
        if any(i not in rows for i in range(cand.lower, cand.upper + 1)):
            self._prefetch(cache, [cand])
        return [(i, *rows[i]) for i in range(cand.lower, cand.upper + 1) if i in rows]

    @staticmethod
    def _trim(rows: list[tuple], hits: list[int], best: int, allowance: int | None) -> tuple[int, int]:
        """Sub-range (positions in rows) around the hits that fits ``allowance`` tokens."""
        index_of = {row[0]: pos for pos, row in enumerate(rows)}
        if allowance is None:
            return 0, len(rows) - 1
        positions = sorted(index_of[h] for h in hits if h in index_of)
        if not positions:
            return 0, len(rows) - 1
        tokens = [row[3] for row in rows]
        lo, hi = positions[0], positions[-1]
        if sum(tokens[lo:hi + 1]) > allowance:
            lo = hi = index_of.get(best, positions[0])
        used = sum(tokens[lo:hi + 1])
        grow_left = True
        while True:
            moved = False
            for side in ((0, 1) if grow_left else (1, 0)):
                if side == 0 and lo > 0 and used + tokens[lo - 1] <= allowance:
                    lo -= 1
                    used += tokens[lo]
                    moved = True
                elif side == 1 and hi < len(rows) - 1 and used + tokens[hi + 1] <= allowance:
                    hi += 1
                    used += tokens[hi]
                    moved = True
            grow_left = not grow_left
            if not moved:
                return lo, hi

    def _span(self, cand: Candidate, rows: list[tuple], lo: int, hi: int, rank: int) -> ContextSpan | None:
        if not rows:
            return None
        # rows must be contiguous text
        for a, b in zip(rows[lo:hi], rows[lo + 1:hi + 1]):
            if a[2] != b[1]:
                raise LookupError(
                    f"chunks of source {cand.source_id!r} are not contiguous at {a[2]} (partially written index? re-add it)"
                )
        start = max(cand.start, rows[lo][1])
        end = min(cand.end, rows[hi][2])
        if end <= start:
            start, end = rows[lo][1], rows[hi][2]
        text = "".join(r[4] for r in rows[lo:hi + 1])[start - rows[lo][1]: end - rows[lo][1]]
        best_chunk, _, _, best_meta = cand.best
        meta = {k: v for k, v in best_meta.items() if k not in _CHUNK_KEYS}
        hit_chunks = sorted({h[0] for h in cand.hits})
        meta.update(
            hit_chunk_indices=hit_chunks,
            chunk_lower_bound=rows[lo][0],
            chunk_upper_bound=rows[hi][0],
            expand=self.expand,
            query_index=cand.query_index,
        )
        hit_row = next((r for r in rows if r[0] == best_chunk), None)
        focus = (hit_row[1], hit_row[2]) if hit_row is not None else None
        if focus is not None:
            meta["hit_start_index"], meta["hit_end_index"] = focus
        return ContextSpan(cand.source_id, start, end, text, score=cand.score, rank=rank, metadata=meta, focus=focus)

    def expand_parents(self, per_query: Sequence[Sequence[Candidate]]) -> list[Document]:
        """Stage 3: fetch, trim to the budget shares, merge by offset, assemble."""
        n_queries = max(1, sum(1 for c in per_query if c))
        cache: dict[str, dict[int, tuple]] = {}
        # Interleave the queries' parents by rank (original question first).
        order: list[tuple[Candidate, int | None]] = []
        depth = max((len(c) for c in per_query), default=0)
        shares: dict[int, int | None] = {}
        for qi, cands in enumerate(per_query):
            sources = {c.source_id for c in cands}
            if self.budget_tokens is None or not sources:
                shares[qi] = None
            else:
                shares[qi] = max(1, self.budget_tokens // (n_queries * len(sources)))
        for depth_i in range(depth):
            for qi, cands in enumerate(per_query):
                if depth_i < len(cands):
                    order.append((cands[depth_i], shares[qi]))
        self._prefetch(cache, [c for c, _ in order])
        primary: list[ContextSpan] = []
        fill: list[ContextSpan] = []
        used_by: dict[tuple[int, str], int] = {}
        for rank, (cand, share) in enumerate(order, start=1):
            rows = self._rows(cache, cand)
            if not rows:
                continue
            hits = [h[0] for h in cand.hits]
            if share is None:
                lo, hi = 0, len(rows) - 1
            else:
                key = (cand.query_index, cand.source_id)
                left = share - used_by.get(key, 0)
                lo, hi = self._trim(rows, hits, cand.best[0], max(left, 1))
                used_by[key] = used_by.get(key, 0) + sum(r[3] for r in rows[lo:hi + 1])
            span = self._span(cand, rows, lo, hi, rank)
            if span is not None:
                primary.append(span)
            if share is not None:
                full = self._span(cand, rows, 0, len(rows) - 1, rank)
                if full is not None:
                    fill.append(full)
        assembled = assemble_context(
            primary + fill, self.budget_tokens, encoding_name=self.index.config.encoding_name, max_spans=self.k
        )
        docs = []
        for span in assembled.spans:
            doc = span.to_document()
            doc.id = f"{span.source_id}:{span.start}-{span.end}"
            docs.append(doc)
        return docs

    # ------------------------------------------------------------- entry points
    def retrieve_many(self, queries: Sequence[str], config: dict | None = None) -> list[Document]:
        """Retrieve for several phrasings of one question (budget shared among them)."""
        queries = [_check_query(q) for q in queries]
        if not queries:
            raise ValueError("queries must not be empty")
        per_query = [self.rank_parents(self.find_chunks(q, config), qi) for qi, q in enumerate(queries)]
        return self.expand_parents(per_query)

    async def aretrieve_many(self, queries: Sequence[str], config: dict | None = None) -> list[Document]:
        queries = [_check_query(q) for q in queries]
        if not queries:
            raise ValueError("queries must not be empty")
        hits = await asyncio.gather(*(self.afind_chunks(q, config) for q in queries))

        def rest() -> list[Document]:
            return self.expand_parents([self.rank_parents(h, qi) for qi, h in enumerate(hits)])

        return await asyncio.to_thread(rest)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.retrieve_many([query], config={"callbacks": run_manager.get_child()})

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await self.aretrieve_many([query], config={"callbacks": run_manager.get_child()})
