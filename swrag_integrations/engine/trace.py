"""What one retrieval did, step by step: `RetrievalTrace` (framework-free).

`trace` runs the windowed parent retrieval the way the retrievers do (stage 1
`first_stage`, RRF or the learned fusion as the settings choose, stage 2 `rank_parents`, stage 3
`expand_parents` under the budget) and keeps every step: the hits, the
parents they formed, the spans kept, what each hit lost to the budget (`HitStatus`)
and the settings used. Views render a trace (``swrag_integrations.view``); nothing here
draws anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from swrag_integrations.engine.assemble import ContextSpan, merge_ranges
from swrag_integrations.engine.parents import check_query, expand_parents, rank_parents
from swrag_integrations.engine.protocols import ChildHit
from swrag_integrations.engine.settings import DEFAULT_SETTINGS, RetrieverSettings

__all__ = ["RetrievalTrace", "HitStatus", "hit_status", "trace", "source_piece", "piece_span"]


def source_piece(index: Any, source_id: str) -> tuple[int, str]:
    """``(base, text)``: the text ``index`` holds of a source and the source offset of its
    first character (``text[i]`` is the source's character ``base + i``; ``base > 0`` for a
    record joined from offset chunks that start past the source's start). Offsets the
    index returns are source coordinates: slice the text with `piece_span`."""
    engine = getattr(index, "engine", index)
    record = engine.record(source_id) if hasattr(engine, "record") else None
    return (int(record.base) if record is not None else 0), engine.source_text(source_id)


def piece_span(base: int, text: str, start: int, end: int) -> str:
    """The source's characters ``[start, end)`` (source coordinates) of a piece ``text``
    that starts at source offset ``base`` (see `source_piece`)."""
    return text[max(0, start - base):max(0, end - base)]


@dataclass(frozen=True)
class HitStatus:
    """How much of a hit chunk the final context kept: ``kept`` characters of ``size``;
    ``status`` is ``"in"`` (all), ``"part"`` (some) or ``"cut"`` (none)."""

    kept: int
    size: int

    @property
    def status(self) -> str:
        if self.kept >= self.size:
            return "in"
        return "part" if self.kept else "cut"


def hit_status(hit: ChildHit, spans: Sequence[ContextSpan]) -> HitStatus:
    """The characters of ``hit``'s chunk that lie in the spans of its source."""
    ranges = merge_ranges((s.start, s.end) for s in spans if s.source_id == hit.source_id)
    kept = sum(max(0, min(b, hit.end) - max(a, hit.start)) for a, b in ranges)
    return HitStatus(kept, hit.end - hit.start)


@dataclass(frozen=True)
class RetrievalTrace:
    """One question's retrieval, every step kept.

    Attributes:
        question: the question.
        settings: the `RetrieverSettings` used.
        hits: stage 1, the small chunks found (rank order; under the learned fusion their
            ``rank``/``score`` are the model's and ``metadata["fused_rank"]`` the RRF rank).
        parents: stage 2, the parents the hits formed (`Candidate`, rank order).
        spans: stage 3, the spans kept under the budget, merged by offset.
        sources: ``source_id -> text`` the index holds of every source a hit or span
            touches; it starts at source offset ``bases[source_id]`` (0 unless given):
            slice it with `source_span`.
        encoding_name: the tiktoken encoding of the token counts.
        filter: the metadata filter applied (parsed), or ``None``.
    """

    question: str
    settings: RetrieverSettings
    hits: list[ChildHit]
    parents: list[Any]
    spans: list[ContextSpan]
    sources: dict[str, str] = field(default_factory=dict)
    encoding_name: str = "cl100k_base"
    filter: Any = None
    bases: dict[str, int] = field(default_factory=dict)

    def source_span(self, source_id: str, start: int, end: int) -> str:
        """The characters ``[start, end)`` (source coordinates) of a source in `sources`."""
        return piece_span(self.bases.get(source_id, 0), self.sources[source_id], start, end)

    @property
    def cuts(self) -> list[tuple[ChildHit, HitStatus]]:
        """Each hit with what the budget left of it (``status``: in / part / cut)."""
        return [(hit, hit_status(hit, self.spans)) for hit in self.hits]


def check_relevance(value: Any) -> float | None:
    """A relevance floor: ``None`` or a number in [0, 1] (``ValueError`` naming ``min_relevance``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"min_relevance must be a number in [0, 1] or None, got {value!r}")
    return float(value)


def above_floor(hits: Sequence[ChildHit], min_relevance: float | None) -> list[ChildHit]:
    """The hits whose ``relevance`` (`search_children`) reaches
    ``min_relevance`` (all of them for ``None``): the retrievers' relevance floor."""
    if min_relevance is None:
        return list(hits)
    return [h for h in hits if h.metadata.get("relevance", 0.0) >= min_relevance]


def trace(index: Any, question: str, settings: RetrieverSettings = DEFAULT_SETTINGS, *,
          filter: Any = None, min_relevance: float | None = None) -> RetrievalTrace:
    """Retrieve for ``question`` from ``index`` (a `ChunkIndex`: the
    engine or either face) with ``settings`` and keep every step (``min_relevance``: the
    hits below it are left out, as `above_floor` leaves them out of retrieval).

    Raises:
        ValueError: an empty question, or a filter `parse_filter` refuses.
    """
    from swrag_integrations.engine.filters import parse_filter

    check_query(question)
    index = getattr(index, "engine", index)  # a face stands for its engine
    from swrag_integrations.engine.learned_fusion import first_stage

    flt = parse_filter(filter)
    s = settings
    hits = above_floor(first_stage(index, question, s, filter=flt), min_relevance)
    parents = rank_parents(hits, index, expand=s.expand)
    spans = expand_parents([parents], index, budget_tokens=s.budget_tokens, k=s.k, expand=s.expand)
    sids = list(dict.fromkeys([h.source_id for h in hits] + [sp.source_id for sp in spans]))
    pieces = {sid: source_piece(index, sid) for sid in sids}
    return RetrievalTrace(question, s, hits, parents, list(spans), {sid: t for sid, (_, t) in pieces.items()},
                          index.encoding_name, flt, {sid: b for sid, (b, _) in pieces.items()})
