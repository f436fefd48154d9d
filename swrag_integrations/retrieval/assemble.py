"""Offline context assembly: merge retrieved spans by character offset, then budget.

Overlapping windows only pay off once they are merged: two windows that share half
their text must not spend the budget twice. :func:`assemble_context` takes spans in
rank order, adds to each source only the characters not yet covered, merges
overlapping *and* adjacent spans of a source into one, and stops when the token budget
(default 1500 cl100k tokens) is full, trimming the last piece at a token boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from langchain_core.documents import Document

from ..windows import DEFAULT_ENCODING, get_encoding, token_boundaries

__all__ = ["ContextSpan", "AssembledContext", "assemble_context", "merge_spans", "count_tokens"]


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Number of tiktoken tokens in ``text`` (special tokens treated as text)."""
    if not text:
        return 0
    return len(get_encoding(encoding_name).encode_ordinary(text))


@dataclass
class ContextSpan:
    """A piece of a source: ``text == source_text[start:end]``.

    ``focus`` (optional, character offsets) marks what must survive trimming (the
    retrieved hit inside a wider window); trimming keeps the part nearest to it.
    """

    source_id: str
    start: int
    end: int
    text: str
    score: float | None = None
    rank: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    focus: tuple[int, int] | None = None
    n_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"bad span offsets ({self.start}, {self.end})")
        if len(self.text) != self.end - self.start:
            raise ValueError(
                f"span text has {len(self.text)} characters but end - start = {self.end - self.start} "
                f"(source {self.source_id!r}, {self.start}:{self.end})"
            )

    @classmethod
    def from_document(cls, doc: Document, rank: int | None = None) -> "ContextSpan":
        meta = doc.metadata or {}
        source = meta.get("source_id", meta.get("source"))
        if source is None or "start_index" not in meta:
            raise ValueError("document needs metadata source_id (or source) and start_index to be merged by offset")
        start = int(meta["start_index"])
        end = int(meta.get("end_index", start + len(doc.page_content)))
        focus = None
        if "hit_start_index" in meta and "hit_end_index" in meta:
            focus = (int(meta["hit_start_index"]), int(meta["hit_end_index"]))
        score = meta.get("score", meta.get("rrf_score"))
        return cls(
            source_id=str(source),
            start=start,
            end=end,
            text=doc.page_content,
            score=float(score) if score is not None else None,
            rank=rank if rank is not None else meta.get("rank"),
            metadata=dict(meta),
            focus=focus,
        )

    def to_document(self) -> Document:
        meta = dict(self.metadata)
        meta.update(source_id=self.source_id, start_index=self.start, end_index=self.end)
        if self.score is not None:
            meta["score"] = self.score
        if self.rank is not None:
            meta["rank"] = self.rank
        if self.n_tokens is not None:
            meta["n_tokens"] = self.n_tokens
        return Document(page_content=self.text, metadata=meta)


@dataclass
class AssembledContext:
    """The result of :func:`assemble_context`."""

    spans: list[ContextSpan]
    n_tokens: int
    budget_tokens: int | None
    truncated: bool
    separator: str = "\n\n"

    @property
    def text(self) -> str:
        return self.separator.join(s.text for s in self.spans)

    def to_documents(self) -> list[Document]:
        return [s.to_document() for s in self.spans]


def _as_span(item: Any, position: int) -> ContextSpan:
    if isinstance(item, ContextSpan):
        if item.rank is None:
            item = ContextSpan(**{**item.__dict__, "rank": position + 1})
        return item
    if isinstance(item, Document):
        span = ContextSpan.from_document(item, rank=None)
        if span.rank is None:
            span.rank = position + 1
        return span
    if isinstance(item, (tuple, list)) and len(item) == 4:
        source, start, end, text = item
        return ContextSpan(str(source), int(start), int(end), text, rank=position + 1)
    raise TypeError(
        "items must be ContextSpan, Document (with source_id/start_index metadata) or "
        f"(source_id, start, end, text) tuples, got {type(item).__name__}"
    )


class _Block:
    """A merged run of one source: [start, end) with its text."""

    __slots__ = ("start", "end", "text", "first", "members")

    def __init__(self, start: int, end: int, text: str, first: int, member: ContextSpan):
        self.start, self.end, self.text, self.first = start, end, text, first
        self.members = [member]


def _uncovered(start: int, end: int, blocks: list[_Block]) -> list[tuple[int, int]]:
    pieces, pos = [], start
    for block in blocks:  # sorted by start
        if block.end <= pos:
            continue
        if block.start >= end:
            break
        if block.start > pos:
            pieces.append((pos, block.start))
        pos = max(pos, block.end)
        if pos >= end:
            break
    if pos < end:
        pieces.append((pos, end))
    return pieces


def _insert(blocks: list[_Block], new: _Block) -> None:
    """Insert and merge overlapping or adjacent blocks (same source)."""
    blocks.append(new)
    blocks.sort(key=lambda b: b.start)
    merged: list[_Block] = []
    for block in blocks:
        if merged and block.start <= merged[-1].end:
            last = merged[-1]
            if block.end > last.end:
                last.text += block.text[last.end - block.start :]
                last.end = block.end
            last.first = min(last.first, block.first)
            last.members.extend(block.members)
        else:
            merged.append(block)
    blocks[:] = merged


def _cut(text: str, n_tokens: int, keep_tail: bool, encoding_name: str) -> tuple[int, int]:
    """Character range of ``text`` holding ``n_tokens`` tokens from its head (or tail)."""
    bounds = token_boundaries(text, encoding_name)
    total = len(bounds) - 1
    n_tokens = max(0, min(n_tokens, total))
    if keep_tail:
        return int(bounds[total - n_tokens]), len(text)
    return 0, int(bounds[n_tokens])


def _cut_around(text: str, n_tokens: int, f0: int, f1: int, encoding_name: str) -> tuple[int, int]:
    """Character range of ``n_tokens`` tokens of ``text`` centred on ``[f0, f1)``."""
    import numpy as np

    bounds = token_boundaries(text, encoding_name)
    total = len(bounds) - 1
    n_tokens = max(0, min(n_tokens, total))
    t0 = int(np.searchsorted(bounds, max(f0, 0), side="right")) - 1
    t1 = int(np.searchsorted(bounds, min(f1, len(text)), side="left"))
    first = t0 - max(0, n_tokens - (t1 - t0)) // 2
    first = max(0, min(first, total - n_tokens))
    return int(bounds[first]), int(bounds[first + n_tokens])


def assemble_context(
    items: Iterable[ContextSpan | Document | tuple],
    budget_tokens: int | None = 1500,
    *,
    encoding_name: str = DEFAULT_ENCODING,
    separator: str = "\n\n",
    max_spans: int | None = None,
) -> AssembledContext:
    """Merge spans by offset per source, in rank order, until the token budget is full.

    Args:
        items: spans in rank order (best first): :class:`ContextSpan`, ``Document`` s
            with ``source_id`` (or ``source``), ``start_index`` and ``end_index``
            metadata, or ``(source_id, start, end, text)`` tuples.
        budget_tokens: total tokens of context (``None``: no limit).
        encoding_name: tiktoken encoding for counting.
        separator: joins the merged spans in :attr:`AssembledContext.text`.
        max_spans: stop before a span that would open more than this many merged
            blocks (a span that only extends an existing block is still added).

    Returns:
        :class:`AssembledContext` whose spans are ordered by the best rank among the
        items merged into them; each is exact source text ``[start, end)``.
    """
    if budget_tokens is not None and budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be > 0, got {budget_tokens}")
    if max_spans is not None and max_spans <= 0:
        raise ValueError(f"max_spans must be > 0, got {max_spans}")
    blocks: dict[str, list[_Block]] = {}
    used = 0
    truncated = False
    n_blocks = 0
    for position, item in enumerate(items):
        span = _as_span(item, position)
        if budget_tokens is not None and used >= budget_tokens:
            truncated = True
            break
        source_blocks = blocks.setdefault(span.source_id, [])
        pieces = _uncovered(span.start, span.end, source_blocks)
        if not pieces:
            for block in source_blocks:  # fully covered: record as a member
                if block.start <= span.start and span.end <= block.end:
                    block.members.append(span)
                    block.first = min(block.first, position)
                    break
            continue
        if max_spans is not None:
            opens = not any(b.start <= span.end and span.start <= b.end for b in source_blocks)
            if opens and n_blocks >= max_spans:
                truncated = True
                continue
        if span.focus is not None:  # pieces nearest the hit first
            f0, f1 = span.focus
            pieces.sort(key=lambda p: 0 if (p[0] < f1 and f0 < p[1]) else min(abs(p[0] - f1), abs(f0 - p[1])))
        for a, b in pieces:
            piece = span.text[a - span.start : b - span.start]
            n = count_tokens(piece, encoding_name)
            if budget_tokens is not None and used + n > budget_tokens:
                remaining = budget_tokens - used
                truncated = True
                if remaining <= 0:
                    break
                if span.focus is not None and a < span.focus[1] and span.focus[0] < b:
                    c0, c1 = _cut_around(piece, remaining, span.focus[0] - a, span.focus[1] - a, encoding_name)
                    if c1 <= c0:
                        break
                    a, b, piece = a + c0, a + c1, piece[c0:c1]
                    n = count_tokens(piece, encoding_name)
                    used += n
                    before = len(source_blocks)
                    _insert(source_blocks, _Block(a, b, piece, position, span))
                    n_blocks += len(source_blocks) - before
                    break
                if span.focus is not None:
                    keep_tail = b <= span.focus[0]
                else:
                    keep_tail = any(blk.start == b for blk in source_blocks) and not any(
                        blk.end == a for blk in source_blocks
                    )
                c0, c1 = _cut(piece, remaining, keep_tail, encoding_name)
                if c1 <= c0:
                    break
                a, b, piece = a + c0, a + c1, piece[c0:c1]
                n = count_tokens(piece, encoding_name)
            used += n
            before = len(source_blocks)
            _insert(source_blocks, _Block(a, b, piece, position, span))
            n_blocks += len(source_blocks) - before
            if budget_tokens is not None and used >= budget_tokens:
                break
    # Build the output spans, best-ranked first.
    out_blocks = sorted((blk for bl in blocks.values() for blk in bl), key=lambda blk: blk.first)
    spans: list[ContextSpan] = []
    for rank, blk in enumerate(out_blocks, start=1):
        lead = blk.members[0]
        for m in blk.members:
            if m.rank is not None and (lead.rank is None or m.rank < lead.rank):
                lead = m
        meta = dict(lead.metadata)
        meta["merged_ranks"] = sorted({m.rank for m in blk.members if m.rank is not None})
        meta["n_merged"] = len(blk.members)
        scores = [m.score for m in blk.members if m.score is not None]
        source_id = lead.source_id
        spans.append(
            ContextSpan(
                source_id=source_id,
                start=blk.start,
                end=blk.end,
                text=blk.text,
                score=max(scores) if scores else None,
                rank=rank,
                metadata=meta,
                n_tokens=count_tokens(blk.text, encoding_name),
            )
        )
    total = sum(s.n_tokens or 0 for s in spans)
    # Token counts of merged text can exceed the sum of pieces by a token or two at
    # the joins; trim the lowest-ranked span to stay within the budget.
    while budget_tokens is not None and total > budget_tokens and spans:
        last = spans[-1]
        keep = (last.n_tokens or 0) - (total - budget_tokens)
        if keep <= 0:
            spans.pop()
        else:
            c0, c1 = _cut(last.text, keep, False, encoding_name)
            spans[-1] = ContextSpan(
                last.source_id, last.start, last.start + c1, last.text[:c1], last.score, last.rank,
                last.metadata, n_tokens=count_tokens(last.text[:c1], encoding_name),
            )
        truncated = True
        total = sum(s.n_tokens or 0 for s in spans)
    return AssembledContext(spans=spans, n_tokens=total, budget_tokens=budget_tokens, truncated=truncated, separator=separator)


def merge_spans(items: Sequence[ContextSpan | Document | tuple], **kwargs: Any) -> list[ContextSpan]:
    """Union of overlapping/adjacent spans per source, no budget (see :func:`assemble_context`)."""
    return assemble_context(items, None, **kwargs).spans
