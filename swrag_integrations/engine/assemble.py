"""Offline context assembly: merge retrieved spans by character offset, then budget.

Overlapping windows only pay off once they are merged: two windows that share half
their text must not spend the budget twice. `assemble_context` takes spans in
rank order, adds to each source only the characters not yet covered, merges
overlapping *and* adjacent spans of a source into one, and stops when the token budget
(default 1500 cl100k tokens) is full, trimming the last piece at a token boundary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from swrag_integrations.core.windows import DEFAULT_ENCODING, count_units, token_boundaries

__all__ = ["ContextSpan", "AssembledContext", "assemble_context", "merge_spans", "merge_ranges", "count_tokens",
           "trim_to_tokens"]


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Tokens of ``text``: `count_units` in token unit
    (the package's one counter; special tokens count as text)."""
    return count_units(text, "token", encoding_name) if text else 0


@dataclass
class ContextSpan:
    """A piece of a source: ``text == source_text[start:end]``.

    ``focus`` (optional, character offsets) marks what must survive trimming (the
    retrieved hit inside a wider window); trimming keeps the part nearest to it.

    ``boundaries`` (optional, absolute character offsets) are the only places where
    `assemble_context` may cut the span when it trims it to the budget (e.g. the
    offsets of the small chunks it is made of), besides its own ``start``/``end``.
    ``None``: it may be cut at any token boundary.
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
    boundaries: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"bad span offsets ({self.start}, {self.end})")
        if self.boundaries is not None:
            self.boundaries = tuple(sorted({int(p) for p in self.boundaries if self.start < int(p) < self.end}))
        if len(self.text) != self.end - self.start:
            raise ValueError(
                f"span text has {len(self.text)} characters but end - start = {self.end - self.start} "
                f"(source {self.source_id!r}, {self.start}:{self.end})"
            )

    @classmethod
    def from_document(cls, doc: Any, rank: int | None = None) -> "ContextSpan":
        """A span from a document (anything with ``page_content`` and ``metadata``, such as a
        LangChain ``Document``) with ``source_id`` (or ``source``),
        ``start_index`` and ``end_index`` metadata."""
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

    @property
    def span_id(self) -> str:
        """The span's id, ``"<source_id>:<start>-<end>"`` (the id of its document or node in each face)."""
        return f"{self.source_id}:{self.start}-{self.end}"

    def document_metadata(self) -> dict[str, Any]:
        """The metadata of this span as a document: its own, with ``source_id``,
        ``start_index``/``end_index`` and, where set, ``score``, ``rank`` and ``n_tokens``
        (what `from_document` reads back). The faces build their documents from it
        (`swrag_integrations.langchain.convert.span_to_document`)."""
        meta = dict(self.metadata)
        meta.update(source_id=self.source_id, start_index=self.start, end_index=self.end)
        if self.score is not None:
            meta["score"] = self.score
        if self.rank is not None:
            meta["rank"] = self.rank
        if self.n_tokens is not None:
            meta["n_tokens"] = self.n_tokens
        return meta


@dataclass
class AssembledContext:
    """The result of `assemble_context`: the chosen spans and the context text they make.

    ``n_tokens`` is the sum of the spans' own token counts; ``text_tokens`` counts
    `text` (spans *and* separators), which never exceeds ``budget_tokens``.

    Attributes:
        spans: The merged context spans, in context order.
        n_tokens: The sum of the spans' own token counts (separators not included).
        budget_tokens: The token budget the context was assembled under (``None``: none).
        truncated: Whether something was cut or left out to fit the budget or the span limit.
        separator: The string that joins the spans in `text`.
        text_tokens: The token count of the whole `text`, separators included
            (``None``: not counted by the producer).
    """

    spans: list[ContextSpan]
    n_tokens: int
    budget_tokens: int | None
    truncated: bool
    separator: str = "\n\n"
    text_tokens: int | None = None

    @property
    def text(self) -> str:
        """The context text: the spans' texts joined by `separator`."""
        return self.separator.join(s.text for s in self.spans)

    @property
    def offsets(self) -> list[tuple[str, int, int]]:
        """``(source_id, start, end)`` of the spans, in context order."""
        return [(s.source_id, s.start, s.end) for s in self.spans]

    @property
    def sources(self) -> list[str]:
        """Source ids in context order (each once)."""
        return list(dict.fromkeys(s.source_id for s in self.spans))

    def _repr_html_(self) -> str | None:
        """Jupyter: the spans over their sources, once `swrag_integrations.view` is
        imported (it registers the view), else ``None`` (the plain repr)."""
        from swrag_integrations.core.display import html_of

        return html_of("spans", self)


def _as_span(item: Any, position: int) -> ContextSpan:
    if isinstance(item, ContextSpan):
        if item.rank is None:
            item = ContextSpan(**{**item.__dict__, "rank": position + 1})
        return item
    if hasattr(item, "page_content") and hasattr(item, "metadata"):  # a LangChain Document
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
    """A merged run of one source: [start, end) with its text.

    ``cuts``: where the block may be cut when trimmed (absolute offsets; ``None``:
    at any token boundary).
    """

    __slots__ = ("start", "end", "text", "first", "members", "cuts")

    def __init__(self, start: int, end: int, text: str, first: int, member: ContextSpan, cuts: set[int] | None):
        self.start, self.end, self.text, self.first = start, end, text, first
        self.members = [member]
        self.cuts = cuts


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
            last.cuts = None if last.cuts is None or block.cuts is None else last.cuts | block.cuts | {block.start}
        else:
            merged.append(block)
    blocks[:] = merged


def _touching(blocks: list[_Block], a: int, b: int) -> int:
    """How many blocks ``[a, b)`` overlaps or touches (it merges with all of them)."""
    return sum(1 for blk in blocks if blk.start <= b and a <= blk.end)


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


def _fit(
    text: str,
    room: int,
    *,
    cuts: Sequence[int] | None,
    focus: tuple[int, int] | None,
    keep_tail: bool,
    encoding_name: str,
) -> tuple[int, int] | None:
    """The part ``text[c0:c1]`` to keep so that it counts at most ``room`` tokens.

    Offsets are relative to ``text``. ``cuts`` (relative, sorted, inside ``text``)
    restricts where it may be cut (besides both ends); ``None``: any token boundary.
    With ``focus`` (relative) the kept part is grown around it, else it is a head (or
    a tail with ``keep_tail``). ``None`` when nothing non-empty fits.
    """
    if room <= 0 or not text:
        return None

    def n_of(c0: int, c1: int) -> int:
        return count_tokens(text[c0:c1], encoding_name)

    if n_of(0, len(text)) <= room:
        return 0, len(text)
    if cuts is None:
        want = room
        while want > 0:  # token arithmetic, then checked by counting the cut text
            if focus is not None:
                c0, c1 = _cut_around(text, want, focus[0], focus[1], encoding_name)
            else:
                c0, c1 = _cut(text, want, keep_tail, encoding_name)
            if c1 <= c0:
                return None
            got = n_of(c0, c1)
            if got <= room:
                return c0, c1
            want -= max(1, got - room)
        return None
    points = [0, *sorted({int(c) for c in cuts if 0 < c < len(text)}), len(text)]  # callers may pass sets
    if focus is not None:
        f0, f1 = max(0, focus[0]), min(len(text), focus[1])
        i0 = max(i for i, p in enumerate(points) if p <= f0)
        i1 = min((i for i, p in enumerate(points) if p >= f1 and i > i0), default=len(points) - 1)
        if n_of(points[i0], points[i1]) > room:
            return None
        grow_left = True
        while True:  # alternate sides, as long as something fits
            moved = False
            for side in ((0, 1) if grow_left else (1, 0)):
                if side == 0 and i0 > 0 and n_of(points[i0 - 1], points[i1]) <= room:
                    i0 -= 1
                    moved = True
                elif side == 1 and i1 < len(points) - 1 and n_of(points[i0], points[i1 + 1]) <= room:
                    i1 += 1
                    moved = True
            grow_left = not grow_left
            if not moved:
                return points[i0], points[i1]
    if keep_tail:
        for i in range(1, len(points) - 1):
            if n_of(points[i], len(text)) <= room:
                return points[i], len(text)
        return None
    for j in range(len(points) - 2, 0, -1):
        if n_of(0, points[j]) <= room:
            return 0, points[j]
    return None


def _merge_metadata(lead: ContextSpan, members: Sequence[ContextSpan], start: int, end: int) -> dict[str, Any]:
    """Metadata of a merged block: the best-ranked member's, made consistent with the
    block's offsets (hit chunks and ``doc_ids`` unioned, chunk bounds widened, best
    score and relevance kept)."""
    meta = dict(lead.metadata)
    meta["merged_ranks"] = sorted({m.rank for m in members if m.rank is not None})
    meta["n_merged"] = len(members)
    metas = [m.metadata for m in members]
    hits = [h for md in metas for h in (md.get("hit_chunk_indices") or [])]
    if any("hit_chunk_indices" in md for md in metas):
        meta["hit_chunk_indices"] = sorted(set(hits))
    for key, pick in (("chunk_lower_bound", min), ("chunk_upper_bound", max)):
        values = [md[key] for md in metas if md.get(key) is not None]
        if values:
            meta[key] = pick(values)
    if any("doc_ids" in md for md in metas):  # every merged window's documents, in source order, once
        ordered = sorted(members, key=lambda m: (m.start, m.end))
        meta["doc_ids"] = list(dict.fromkeys(d for m in ordered for d in (m.metadata.get("doc_ids") or [])))
    queries = sorted({md["query_index"] for md in metas if md.get("query_index") is not None})
    if queries:
        meta["query_indices"] = queries
    scores = [m.score for m in members if m.score is not None]
    if scores:
        meta["score"] = max(scores)
    relevances = [md["relevance"] for md in metas if md.get("relevance") is not None]
    if relevances:
        meta["relevance"] = max(relevances)
    # the hit offsets must lie inside the block: take the best-scored member's that does
    best = None
    for m in sorted(members, key=lambda m: (-(m.score if m.score is not None else float("-inf")), m.rank or 0)):
        if m.focus is not None and start <= m.focus[0] and m.focus[1] <= end:
            best = m.focus
            break
    meta.pop("hit_start_index", None)
    meta.pop("hit_end_index", None)
    if best is not None:
        meta["hit_start_index"], meta["hit_end_index"] = best
    return meta


def _block_focus(members: Sequence[ContextSpan], start: int, end: int) -> tuple[int, int] | None:
    for m in sorted(members, key=lambda m: m.rank if m.rank is not None else 0):
        if m.focus is not None and m.focus[0] < end and start < m.focus[1]:
            return max(start, m.focus[0]), min(end, m.focus[1])
    return None


def assemble_context(
    items: Iterable[Any],
    budget_tokens: int | None = 1500,
    *,
    encoding_name: str = DEFAULT_ENCODING,
    separator: str = "\n\n",
    max_spans: int | None = None,
) -> AssembledContext:
    """Merge spans by offset per source, in rank order, until the token budget is full.

    The budget covers the whole `AssembledContext.text`, separators included:
    ``count_tokens(result.text) <= budget_tokens`` always holds.

    Args:
        items: spans in rank order (best first): `ContextSpan`, ``Document`` s
            with ``source_id`` (or ``source``), ``start_index`` and ``end_index``
            metadata, or ``(source_id, start, end, text)`` tuples.
        budget_tokens: total tokens of context (``None``: no limit).
        encoding_name: tiktoken encoding for counting.
        separator: joins the merged spans in `AssembledContext.text`.
        max_spans: stop before a span that would open more than this many merged
            blocks (a span that only extends an existing block is still added).

    A span that does not fit whole is cut: around its ``focus`` if it has one, and
    only at its ``boundaries`` if it has them (then, if not even the smallest piece
    around the focus fits and the context is still empty, at token boundaries, so
    that a budget smaller than one chunk still returns the best hit's middle).

    Returns:
        `AssembledContext` whose spans are ordered by the best rank among the
        items merged into them; each is exact source text ``[start, end)``. A merged
        span's metadata is its best-ranked item's, with ``hit_chunk_indices`` unioned,
        ``chunk_lower_bound``/``chunk_upper_bound`` widened over the items, the best
        ``score`` and hit offsets that lie inside it.
    """
    if budget_tokens is not None and budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be > 0, got {budget_tokens}")
    if max_spans is not None and max_spans <= 0:
        raise ValueError(f"max_spans must be > 0, got {max_spans}")
    sep_tokens = count_tokens(separator, encoding_name) if separator else 0
    blocks: dict[str, list[_Block]] = {}
    content = 0  # tokens of the pieces added
    n_blocks = 0  # merged blocks over all sources (n_blocks - 1 separators)
    truncated = False

    def cost(tokens: int, n: int) -> int:
        return tokens + sep_tokens * max(0, n - 1)

    full = False
    for position, item in enumerate(items):
        span = _as_span(item, position)
        if full or (budget_tokens is not None and cost(content, n_blocks) >= budget_tokens):
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
        span_cuts = set(span.boundaries) if span.boundaries is not None else None
        for a, b in pieces:
            piece = span.text[a - span.start : b - span.start]
            n = count_tokens(piece, encoding_name)
            delta = 1 - _touching(source_blocks, a, b)
            cut = False
            if budget_tokens is not None and cost(content + n, n_blocks + delta) > budget_tokens:
                truncated = cut = True
                focus = None
                if span.focus is not None and a < span.focus[1] and span.focus[0] < b:
                    focus = (span.focus[0] - a, span.focus[1] - a)
                if span.focus is not None:
                    keep_tail = b <= span.focus[0]
                else:
                    keep_tail = any(blk.start == b for blk in source_blocks) and not any(
                        blk.end == a for blk in source_blocks
                    )
                rel_cuts = None if span_cuts is None else sorted(c - a for c in span_cuts if a < c < b)
                tries = [rel_cuts]
                if rel_cuts is not None and n_blocks == 0:
                    tries.append(None)  # nothing else in the context: a token cut beats nothing
                fitted = None
                for cuts in tries:
                    room = budget_tokens - cost(content, n_blocks + delta)
                    while fitted is None and room > 0:
                        got = _fit(piece, room, cuts=cuts, focus=focus, keep_tail=keep_tail, encoding_name=encoding_name)
                        if got is None:
                            break
                        c0, c1 = got
                        n2 = count_tokens(piece[c0:c1], encoding_name)
                        excess = cost(content + n2, n_blocks + 1 - _touching(source_blocks, a + c0, a + c1)) - budget_tokens
                        if excess <= 0:
                            fitted = (a + c0, a + c1, n2)
                        else:
                            room -= excess
                    if fitted is not None:
                        break
                if fitted is None:
                    break
                a, b, n = fitted
                piece = span.text[a - span.start : b - span.start]
            content += n
            before = len(source_blocks)
            block_cuts = None if span_cuts is None else {c for c in span_cuts if a < c < b}
            _insert(source_blocks, _Block(a, b, piece, position, span, block_cuts))
            n_blocks += len(source_blocks) - before
            if cut or (budget_tokens is not None and cost(content, n_blocks) >= budget_tokens):
                full = cut  # a piece had to be cut: the context is full, later (smaller) spans stay out
                break
    # Build the output spans, best-ranked first.
    out_blocks = sorted((blk for bl in blocks.values() for blk in bl), key=lambda blk: blk.first)
    spans: list[ContextSpan] = []
    cuts_of: list[set[int] | None] = []
    for rank, blk in enumerate(out_blocks, start=1):
        lead = blk.members[0]
        for m in blk.members:
            if m.rank is not None and (lead.rank is None or m.rank < lead.rank):
                lead = m
        scores = [m.score for m in blk.members if m.score is not None]
        spans.append(
            ContextSpan(
                source_id=lead.source_id,
                start=blk.start,
                end=blk.end,
                text=blk.text,
                score=max(scores) if scores else None,
                rank=rank,
                metadata=_merge_metadata(lead, blk.members, blk.start, blk.end),
                focus=_block_focus(blk.members, blk.start, blk.end),
                n_tokens=count_tokens(blk.text, encoding_name),
                boundaries=tuple(blk.cuts) if blk.cuts is not None else None,
            )
        )
        cuts_of.append(blk.cuts)
    # Token counts of the joined text can differ from the sum of the pieces (tokens
    # merge at joins and separators): trim the lowest-ranked span (at its allowed cut
    # points, keeping its hit) until the whole text fits.
    text_tokens = count_tokens(separator.join(s.text for s in spans), encoding_name)
    while budget_tokens is not None and text_tokens > budget_tokens and spans:
        last = spans[-1]
        room = (last.n_tokens or 0) - (text_tokens - budget_tokens)
        got = None
        if room > 0:
            rel = None if last.boundaries is None else [c - last.start for c in last.boundaries]
            focus = None if last.focus is None else (last.focus[0] - last.start, last.focus[1] - last.start)
            got = _fit(last.text, room, cuts=rel, focus=focus, keep_tail=False, encoding_name=encoding_name)
            if got is None and rel is not None and len(spans) == 1:
                got = _fit(last.text, room, cuts=None, focus=focus, keep_tail=False, encoding_name=encoding_name)
        if got is None:
            spans.pop()
        else:
            c0, c1 = got
            a, b = last.start + c0, last.start + c1
            meta = dict(last.metadata)
            if not (a <= meta.get("hit_start_index", a) and meta.get("hit_end_index", b) <= b):
                meta.pop("hit_start_index", None)
                meta.pop("hit_end_index", None)
            spans[-1] = ContextSpan(
                last.source_id, a, b, last.text[c0:c1], last.score, last.rank, meta,
                focus=None if last.focus is None or max(a, last.focus[0]) >= min(b, last.focus[1])
                else (max(a, last.focus[0]), min(b, last.focus[1])),
                n_tokens=count_tokens(last.text[c0:c1], encoding_name),
                boundaries=last.boundaries,
            )
        truncated = True
        text_tokens = count_tokens(separator.join(s.text for s in spans), encoding_name)
    total = sum(s.n_tokens or 0 for s in spans)
    return AssembledContext(spans=spans, n_tokens=total, budget_tokens=budget_tokens, truncated=truncated,
                            separator=separator, text_tokens=text_tokens)


def merge_spans(items: Sequence[Any], **kwargs: Any) -> list[ContextSpan]:
    """Union of overlapping/adjacent spans per source, no budget (see `assemble_context`)."""
    return assemble_context(items, None, **kwargs).spans


def trim_to_tokens(text: str, max_tokens: int, encoding_name: str = DEFAULT_ENCODING) -> tuple[str, bool]:
    """Cut ``text`` to its first ``max_tokens`` tokens (at a token boundary).

    Returns ``(text, trimmed)``. When a sentence end lies in the second half of what is
    kept, the cut moves back to it so the cut text does not stop mid-sentence.
    """
    if max_tokens <= 0:
        return "", bool(text)
    bounds = token_boundaries(text, encoding_name)
    n = len(bounds) - 1
    if n <= max_tokens:
        return text, False
    cut = text[: int(bounds[max_tokens])]
    ends = [m.end() for m in re.finditer(r"[.!?。！？](?=\s|$)|[。！？]", cut)]
    if ends and ends[-1] >= len(cut) // 2:
        cut = cut[: ends[-1]]
    return cut.rstrip(), True


def merge_ranges(ranges: Iterable[tuple[int, int]], *, touch: int = 0) -> list[tuple[int, int]]:
    """Sorted ranges with overlapping ones (and ones at most ``touch`` apart) merged."""
    out: list[list[int]] = []
    for a, b in sorted((int(a), int(b)) for a, b in ranges):
        if out and a <= out[-1][1] + touch:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]
