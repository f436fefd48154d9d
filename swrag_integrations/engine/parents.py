"""Windowed parent retrieval, framework-free: hits -> parents -> budgeted spans.

Stage 2 (`rank_parents`): within each source the hits whose windows overlap or
touch are grouped into one candidate *parent* whose score is the sum of its hits'
fused scores. Stage 3 (`expand_parents`): each parent's chunk range is read from
the index (`chunk_rows`) and, under a token budget, its
small chunks are chosen by `Planner`: each query first gets its share of the
budget (budget / queries), then the allowance left unused goes to the parents in rank
order; within each pass the hit chunks of all parents come first (a hit chunk is only
dropped when the budget is spent), then the chunks between a parent's hits, then its
neighbours. The chosen chunks are merged by character offset (no duplicated text) by
`assemble_context`, whose budget covers the separators too. Spans
start and end on small-chunk boundaries. Both frameworks' retrievers are thin
adapters over these functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from swrag_integrations.core.windows import count_units
from swrag_integrations.engine.assemble import ContextSpan, assemble_context
from swrag_integrations.engine.protocols import ChildHit, ChunkIndex, ChunkRow
from swrag_integrations.engine.settings import EXPAND_MODES

__all__ = ["Candidate", "Planner", "rank_parents", "expand_parents", "hit_records", "EXPAND_MODES", "CHUNK_KEYS"]

# chunk-level metadata keys that do not describe a merged span
CHUNK_KEYS = frozenset({
    "level", "chunk_index", "medium_index", "n_tokens", "window_lower_bound", "window_upper_bound",
    "window_start_index", "window_end_index", "first_chunk", "last_chunk", "content_hash", "chunk_id",
    "rrf_score", "fused_rank", "bm25_rank", "dense_rank", "bm25_score", "n_chunks", "swrag_index",
})


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
    record: Any = field(default=None, repr=False, compare=False)  # the source's record, as its hits carried it

    @property
    def score(self) -> float:
        return sum(h[1] for h in self.hits)

    @property
    def best(self) -> tuple[int, float, int, dict]:
        return max(self.hits, key=lambda h: (h[1], -h[2]))


def _hit_range(hit: ChildHit, expand: str, index: ChunkIndex) -> tuple[int, int, int, int]:
    if expand == "chunk":
        return hit.chunk_index, hit.chunk_index, hit.start, hit.end
    if expand == "medium":
        got = index.medium_range(hit.source_id, hit.chunk_index, record=hit.record)
        if got is not None:
            return got
    return hit.lower, hit.upper, hit.window_start, hit.window_end


def rank_parents(hits: Sequence[ChildHit], index: ChunkIndex, *, query_index: int = 0,
                 expand: str = "window") -> list[Candidate]:
    """Stage 2: group hits per source into parents, ranked by their best hit (ties: summed hit score)."""
    if expand not in EXPAND_MODES:
        raise ValueError(f"expand must be one of {EXPAND_MODES}, got {expand!r}")
    per_source: dict[str, list[Candidate]] = {}
    for hit in hits:
        lower, upper, start, end = _hit_range(hit, expand, index)
        cand = Candidate(hit.source_id, lower, upper, start, end,
                         [(hit.chunk_index, hit.score, hit.rank, hit.metadata)], query_index, hit.record)
        per_source.setdefault(hit.source_id, []).append(cand)
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
    # by the best hit, then by the summed hit score: RRF scores are nearly flat across
    # ranks, so a sum alone counts hits and let a run of weak hits (adjacent windows
    # merge) outrank the one exact match (tests/langchain/test_retrieval_index.py); on the dev sets
    # the two orders are level (docs/eval/ranking.md)
    ranked.sort(key=lambda c: (-c.best[1], -c.score, min(h[2] for h in c.hits)))
    return ranked


def _accept(order: Sequence[Candidate], k: int | None) -> list[Candidate]:
    """In rank order, a candidate whose chunk range overlaps or touches an accepted one
    joins its parent, any other opens a new parent while fewer than ``k`` are open."""
    ranges: dict[str, list[list[int]]] = {}
    n_parents = 0
    accepted = []
    for cand in order:
        group = ranges.setdefault(cand.source_id, [])
        touching = [r for r in group if cand.lower <= r[1] + 1 and r[0] <= cand.upper + 1]
        if not touching and k is not None and n_parents >= k:
            continue
        lo = min([cand.lower, *(r[0] for r in touching)])
        hi = max([cand.upper, *(r[1] for r in touching)])
        group[:] = [r for r in group if r not in touching] + [[lo, hi]]
        n_parents += 1 - len(touching)
        accepted.append(cand)
    return accepted


def _runs(rows: Sequence[ChunkRow], positions: Sequence[int]) -> list[tuple[int, int]]:
    """Maximal runs ``(lo, hi)`` of positions in ``rows`` holding consecutive chunks."""
    out: list[tuple[int, int]] = []
    for pos in sorted(positions):
        if out and pos == out[-1][1] + 1 and rows[pos].index == rows[pos - 1].index + 1:
            out[-1] = (out[-1][0], pos)
        else:
            out.append((pos, pos))
    return out


def _span(cand: Candidate, rows: list[ChunkRow], lo: int, hi: int, rank: int, expand: str) -> ContextSpan:
    """The chunks ``rows[lo..hi]`` of a parent as one span (cut only at chunk boundaries)."""
    for a, b in zip(rows[lo:hi], rows[lo + 1:hi + 1]):
        if a.end != b.start:
            raise LookupError(f"chunks of source {cand.source_id!r} are not contiguous at {a.end} "
                              "(damaged index? run `swrag status`)")
    start, end = rows[lo].start, rows[hi].end
    text = "".join(r.text for r in rows[lo:hi + 1])
    inside = {r.index for r in rows[lo:hi + 1]}
    hits_inside = [h for h in cand.hits if h[0] in inside]
    best_chunk, _, _, best_meta = cand.best
    if hits_inside:
        best_chunk = max(hits_inside, key=lambda h: (h[1], -h[2]))[0]
    meta = {k: v for k, v in best_meta.items() if k not in CHUNK_KEYS}
    relevances = [h[3]["relevance"] for h in (hits_inside or cand.hits) if h[3].get("relevance") is not None]
    if relevances:  # the window's relevance: its best hit's (engine.IndexEngine.search_children)
        meta["relevance"] = max(relevances)
    meta.update(hit_chunk_indices=sorted({h[0] for h in hits_inside}), chunk_lower_bound=rows[lo].index,
                chunk_upper_bound=rows[hi].index, expand=expand, query_index=cand.query_index)
    hit_row = next((r for r in rows[lo:hi + 1] if r.index == best_chunk), None)
    focus = (hit_row.start, hit_row.end) if hit_row is not None else None
    if focus is not None:
        meta["hit_start_index"], meta["hit_end_index"] = focus
    return ContextSpan(cand.source_id, start, end, text, score=cand.score, rank=rank, metadata=meta, focus=focus,
                       boundaries=tuple(r.start for r in rows[lo + 1:hi + 1]))


def expand_parents(per_query: Sequence[Sequence[Candidate]], index: ChunkIndex, *, budget_tokens: int | None,
                   k: int | None = None, expand: str = "window") -> list[ContextSpan]:
    """Stage 3: fetch, select chunks within the budget, merge by offset.

    ``k`` caps the parents given any budget and the spans returned. Returns the merged
    spans, best first, with ``chunk_lower_bound``/``chunk_upper_bound`` and
    ``hit_chunk_indices`` consistent with their offsets.
    """
    encoding_name = index.encoding_name
    order: list[Candidate] = []
    depth = max((len(c) for c in per_query), default=0)
    for depth_i in range(depth):  # interleave the queries' parents by rank (original question first)
        for cands in per_query:
            if depth_i < len(cands):
                order.append(cands[depth_i])
    order = _accept(order, k)
    fetched = index.chunk_rows([(c.source_id, c.lower, c.upper) for c in order], records=hit_records(order))
    by_index = {sid: {r.index: r for r in rows} for sid, rows in fetched.items()}
    rows_of = {id(c): [by_index[c.source_id][i] for i in range(c.lower, c.upper + 1) if i in by_index.get(c.source_id, {})]
               for c in order}
    order = [c for c in order if rows_of[id(c)]]
    if budget_tokens is None:
        spans = [_span(c, rows_of[id(c)], 0, len(rows_of[id(c)]) - 1, rank, expand)
                 for rank, c in enumerate(order, start=1)]
        assembled = assemble_context(spans, None, encoding_name=encoding_name)
    else:
        budget = budget_tokens
        sep = count_units("\n\n", "token", encoding_name)
        for _ in range(4):  # re-plan with less if joins/separators made the exact text longer
            plan = Planner(order, rows_of, budget, sep_tokens=sep).run()
            spans = []
            for rank, cand in enumerate(order, start=1):
                rows = rows_of[id(cand)]
                mine = [pos for pos, row in enumerate(rows) if plan.get((cand.source_id, row.index)) == id(cand)]
                pieces = [_span(cand, rows, lo, hi, rank, expand) for lo, hi in _runs(rows, mine)]
                # a parent cut into pieces (tight budget): the piece with the best hit first
                pieces.sort(key=lambda sp: -max((h[1] for h in cand.hits if h[0] in sp.metadata["hit_chunk_indices"]),
                                                default=float("-inf")))
                spans.extend(pieces)
            # assembled once when the plan fits (not truncated: every span whole, as merged
            # without a budget); merged without one only to measure how much too long it is
            assembled = assemble_context(spans, budget_tokens, encoding_name=encoding_name)
            if not assembled.truncated or budget <= 1:
                break
            excess = assemble_context(spans, None, encoding_name=encoding_name).text_tokens - budget_tokens
            if excess <= 0:
                break
            budget = max(1, budget - excess)
    out = assembled.spans if k is None else assembled.spans[:k]
    for span in out:
        _fix_metadata(span, by_index.get(span.source_id, {}))
    return out


def hit_records(items: Sequence[Any]) -> dict[str, Any]:
    """The sources' records the search read, by source id, from hits or candidates
    (`ChildHit.record`): what the later stages and the faces use instead of reading
    them again."""
    return {item.record.source_id: item.record for item in items if getattr(item, "record", None) is not None}


def _fix_metadata(span: ContextSpan, rows: dict[int, ChunkRow]) -> None:
    """Chunk bounds and hit chunks of a (merged, maybe trimmed) span from its offsets."""
    inside = [i for i, row in rows.items() if row.start < span.end and span.start < row.end]
    if not inside:
        return
    lower, upper = min(inside), max(inside)
    span.metadata["chunk_lower_bound"], span.metadata["chunk_upper_bound"] = lower, upper
    if "hit_chunk_indices" in span.metadata:
        span.metadata["hit_chunk_indices"] = sorted(h for h in set(span.metadata["hit_chunk_indices"])
                                                    if lower <= h <= upper)


class Planner:
    """Chooses the small chunks of the parents that fill a token budget.

    Costs are the chunks' own token counts plus one separator per extra disjoint run;
    a chunk chosen for one parent is free for every other parent holding it. Pass 1
    gives each query its share of the budget; pass 2 hands what is left to the parents
    in rank order. Each pass goes layer by layer: the hit chunks of all parents (best
    hit first), then the chunks between a parent's hits (nearest to its best hit
    first), then its neighbours (growing both ways from the hits).
    """

    def __init__(self, order: Sequence[Candidate], rows_of: dict[int, list[ChunkRow]], budget: int, *,
                 sep_tokens: int = 1) -> None:
        self.order = list(order)
        self.rows_of = rows_of
        self.budget = budget
        self.sep_tokens = sep_tokens
        self.owner: dict[tuple[str, int], int] = {}
        self.content = 0
        self.runs = 0
        self.used: dict[int, int] = {}
        queries = {cand.query_index for cand in self.order}
        # one share per query, not per (query, source): an equal share per source gave
        # sources with one weak hit as much as the best one (measured: corpus squad
        # context recall 93.5 vs 99.3, hotpotqa 73.2 vs 77.2, see docs/eval/README.md)
        self.share = {q: max(1, budget // max(1, len(queries))) for q in queries}

    def _take(self, cand: Candidate, row: ChunkRow, shared: bool) -> bool:
        key = (cand.source_id, row.index)
        if key in self.owner:
            return True
        n = int(row.n_tokens)
        delta = 1 - ((cand.source_id, row.index - 1) in self.owner) - ((cand.source_id, row.index + 1) in self.owner)
        if self.content + n + self.sep_tokens * max(0, self.runs + delta - 1) > self.budget:
            return False
        group = cand.query_index
        if shared and self.used.get(group, 0) + n > self.share.get(group, 0):
            return False
        self.owner[key] = id(cand)
        self.content += n
        self.runs += delta
        self.used[group] = self.used.get(group, 0) + n
        return True

    def _hit_positions(self, cand: Candidate) -> list[int]:
        rows = self.rows_of[id(cand)]
        pos_of = {row.index: pos for pos, row in enumerate(rows)}
        ranked = sorted(cand.hits, key=lambda h: (-h[1], h[2]))
        return list(dict.fromkeys(pos_of[h[0]] for h in ranked if h[0] in pos_of))

    def _selected(self, cand: Candidate, pos: int) -> bool:
        return (cand.source_id, self.rows_of[id(cand)][pos].index) in self.owner

    def _gaps(self, cand: Candidate, shared: bool) -> bool:
        """Fill between the hits; True when the hit range is complete."""
        rows = self.rows_of[id(cand)]
        hits = self._hit_positions(cand)
        if not hits:
            return False
        best, lo, hi = hits[0], min(hits), max(hits)
        for pos in sorted(range(lo, hi + 1), key=lambda p: (abs(p - best), p)):
            self._take(cand, rows[pos], shared)
        return all(self._selected(cand, p) for p in range(lo, hi + 1))

    def _neighbours(self, cand: Candidate, shared: bool) -> None:
        rows = self.rows_of[id(cand)]
        hits = self._hit_positions(cand)
        if not hits:
            return
        left, right = min(hits) - 1, max(hits) + 1
        open_left, open_right = left >= 0, right < len(rows)
        while open_left or open_right:
            if open_left:
                if self._take(cand, rows[left], shared):
                    left -= 1
                    open_left = left >= 0
                else:
                    open_left = False
            if open_right:
                if self._take(cand, rows[right], shared):
                    right += 1
                    open_right = right < len(rows)
                else:
                    open_right = False

    def _pass(self, shared: bool) -> None:
        for cand in self.order:
            for pos in self._hit_positions(cand):
                self._take(cand, self.rows_of[id(cand)][pos], shared)
        complete = {id(cand): self._gaps(cand, shared) for cand in self.order}
        for cand in self.order:
            if complete[id(cand)]:
                self._neighbours(cand, shared)

    def run(self) -> dict[tuple[str, int], int]:
        """``{(source_id, chunk_index): id(candidate that took it)}``."""
        self._pass(shared=True)
        self._pass(shared=False)
        if not self.owner and self.order:  # budget below one chunk: keep the best hit, cut later
            cand = self.order[0]
            hits = self._hit_positions(cand)
            if hits:
                row = self.rows_of[id(cand)][hits[0]]
                self.owner[(cand.source_id, row.index)] = id(cand)
        return self.owner


def spans_for(queries_hits: Sequence[Sequence[ChildHit]], index: ChunkIndex, *, budget_tokens: int | None,
              k: int | None = None, expand: str = "window") -> list[ContextSpan]:
    """Stages 2 and 3 for several phrasings of one question (budget shared among them)."""
    per_query = [rank_parents(hits, index, query_index=qi, expand=expand) for qi, hits in enumerate(queries_hits)]
    return expand_parents(per_query, index, budget_tokens=budget_tokens, k=k, expand=expand)


def check_query(query: Any) -> str:
    """The one query check of the retrievers."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    return query
