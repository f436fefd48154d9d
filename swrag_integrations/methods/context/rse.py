"""Relevant segment extraction (RSE, after spRAG/dsRAG): best contiguous runs of chunks.

Retrieval returns isolated chunks; the answer usually sits in a *run* of neighbouring
chunks, some of which were not retrieved. RSE gives every chunk of a source a value,

* a retrieved chunk at 0-based rank ``r`` with normalised relevance ``rel`` in [0, 1]:
  ``exp(-r / decay_rate) * rel - irrelevant_chunk_penalty``;
* a chunk that was not retrieved: ``-irrelevant_chunk_penalty``;

and picks, one at a time, the contiguous segment with the highest value sum (a
maximum-sum subarray with a length cap, solved in linear time with prefix sums and a
monotonic deque), over all sources, not overlapping the segments already chosen,
until no segment reaches ``minimum_value``, the chunk caps (``max_length`` per segment,
``overall_max_length`` in total) are used up, or the token budget is full. A segment
that would overflow the budget is shrunk to its best sub-segment that fits.

The core is `SegmentExtractor` (framework-free: document-like chunks or
`ContextSpan` s in, `Segment` s out); the
LangChain compressor `RelevantSegmentExtractor` and the LlamaIndex
``RelevantSegmentPostprocessor`` are its faces.

Each segment is returned with exact offsets: ``start_index`` of its first chunk,
``end_index`` of its last, and the concatenated chunk text (the chunks of a
`SlidingWindowIndex` tile their source, so this is
``source[start_index:end_index]``; gaps raise ``LookupError``). Chunks inside a segment
that were not retrieved are fetched from ``chunks`` (the index, via ``chunk_range``,
or a callable).

Presets (``preset=``; any value can be overridden by keyword):

============  ==========  ==================  =============  =======  ==========
preset        max_length  overall_max_length  minimum_value  penalty  decay_rate
============  ==========  ==================  =============  =======  ==========
balanced      15          30                  0.5            0.18     30
precise       6           12                  0.6            0.25     15
expansive     30          60                  0.4            0.10     60
============  ==========  ==================  =============  =======  ==========

``balanced`` is dsRAG's "balanced" preset (max_length 15, overall_max_length 30,
minimum_value 0.5, irrelevant_chunk_penalty 0.18, decay_rate 30). ``precise``
(short segments, a higher bar and a steeper penalty for filler) and ``expansive``
(long segments bridging larger gaps) are this project's choices. Lengths count
chunks (50 tokens each with the index defaults: balanced = up to 750 tokens per
segment, 1500 in total, the default budget).

Relevance: ``score_normalization="auto"`` divides the candidates' scores by the best
one (min-max when some are negative), so RRF scores (~0.03) and cosines behave alike;
``"none"`` uses scores as given (clipped to [0, 1]); ``"rank"`` ignores scores
(``rel = 1``, rank decay only). Without scores ``rel = 1``. dsRAG's chunk-length
adjustment is not applied (the index's chunks all have about the same length).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Sequence

import numpy as np

from swrag_integrations._moved import moved_names_getattr
from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.engine.assemble import ContextSpan
from swrag_integrations.methods.context._common import as_items, count_tokens, doc_score
from swrag_integrations.stores.storage import PlainDocument

__all__ = [
    "RSE_PRESETS",
    "RSEParams",
    "Segment",
    "best_segment",
    "chunk_values",
    "SegmentExtractor",
]

RSE_PRESETS: dict[str, dict[str, float]] = {
    "balanced": dict(max_length=15, overall_max_length=30, minimum_value=0.5, irrelevant_chunk_penalty=0.18, decay_rate=30),
    "precise": dict(max_length=6, overall_max_length=12, minimum_value=0.6, irrelevant_chunk_penalty=0.25, decay_rate=15),
    "expansive": dict(max_length=30, overall_max_length=60, minimum_value=0.4, irrelevant_chunk_penalty=0.10, decay_rate=60),
}

ChunkRow = tuple[int, int, int, str]  # (chunk_index, start_index, end_index, text)
ChunkFetcher = Callable[[str, int, int], Iterable[Any]]


@dataclass(frozen=True)
class RSEParams:
    max_length: int = 15
    overall_max_length: int = 30
    minimum_value: float = 0.5
    irrelevant_chunk_penalty: float = 0.18
    decay_rate: float = 30.0

    def __post_init__(self) -> None:
        if self.max_length < 1 or self.overall_max_length < 1:
            raise ValueError("max_length and overall_max_length must be >= 1")
        if self.irrelevant_chunk_penalty < 0:
            raise ValueError("irrelevant_chunk_penalty must be >= 0")
        if self.decay_rate <= 0:
            raise ValueError("decay_rate must be > 0")

    @classmethod
    def from_preset(cls, preset: str = "balanced", **overrides: Any) -> "RSEParams":
        if preset not in RSE_PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(RSE_PRESETS)}")
        values = dict(RSE_PRESETS[preset])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass
class Segment:
    """A contiguous run of chunks ``first_chunk..last_chunk`` of one source."""

    source_id: str
    first_chunk: int
    last_chunk: int
    start: int
    end: int
    text: str
    value: float
    rank: int = 0
    n_tokens: int = 0
    hit_ranks: list[int] = field(default_factory=list)  # 1-based input ranks inside
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def n_chunks(self) -> int:
        return self.last_chunk - self.first_chunk + 1

    def to_item(self) -> PlainDocument:
        """The segment as a ``PlainDocument`` (offsets, value, rank... in its metadata; the
        faces turn it into a LangChain ``Document`` or a LlamaIndex node)."""
        meta = dict(self.metadata)
        meta.update(
            source_id=self.source_id, start_index=self.start, end_index=self.end,
            first_chunk=self.first_chunk, last_chunk=self.last_chunk, n_chunks=self.n_chunks,
            segment_value=self.value, score=self.value, rank=self.rank, n_tokens=self.n_tokens,
            hit_ranks=list(self.hit_ranks),
        )
        return PlainDocument(page_content=self.text, metadata=meta,
                             id=f"{self.source_id}:seg:{self.first_chunk}-{self.last_chunk}")

    def to_span(self) -> ContextSpan:
        """The segment as a `ContextSpan` (exact offsets, value as score)."""
        return ContextSpan(self.source_id, self.start, self.end, self.text, score=self.value, rank=self.rank,
                           metadata=dict(self.metadata), n_tokens=self.n_tokens)


# ------------------------------------------------------------------- core algorithm
def best_segment(values: Sequence[float], max_length: int) -> tuple[int, int, float] | None:
    """Maximum-sum contiguous run of at most ``max_length`` items, in O(n).

    Returns ``(start, end_exclusive, sum)`` (ties: the shortest, then the leftmost), or
    ``None`` for an empty input. With prefix sums ``P``, the best run ending before
    ``j`` starts at the ``i`` in ``[j - max_length, j)`` minimising ``P[i]``: a sliding
    window minimum, kept in a deque.
    """
    n = len(values)
    if n == 0 or max_length < 1:
        return None
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(values, dtype=np.float64))])
    window: deque[int] = deque()
    best: tuple[int, int, float] | None = None
    for j in range(1, n + 1):
        i_new = j - 1
        while window and prefix[window[-1]] >= prefix[i_new]:
            window.pop()
        window.append(i_new)
        while window[0] < j - max_length:
            window.popleft()
        i = window[0]
        total = float(prefix[j] - prefix[i])
        if best is None or total > best[2] + 1e-12 or (abs(total - best[2]) <= 1e-12 and j - i < best[1] - best[0]):
            best = (i, j, total)
    return best


def _relevances(scores: list[float | None], mode: str) -> list[float]:
    if mode == "rank" or all(s is None for s in scores):
        return [1.0] * len(scores)
    known = [s for s in scores if s is not None and math.isfinite(s)]
    if not known:
        return [1.0] * len(scores)
    fill = min(known)
    vals = [s if s is not None and math.isfinite(s) else fill for s in scores]
    if mode == "none":
        return [min(1.0, max(0.0, v)) for v in vals]
    lo, hi = min(vals), max(vals)
    if lo >= 0:
        return [v / hi if hi > 0 else 1.0 for v in vals]
    span = hi - lo
    return [(v - lo) / span if span > 0 else 1.0 for v in vals]


def chunk_values(
    ranks: Sequence[int], relevances: Sequence[float], params: RSEParams
) -> list[float]:
    """Values of retrieved chunks: ``exp(-rank / decay_rate) * rel - penalty`` (rank 0-based)."""
    return [math.exp(-r / params.decay_rate) * rel - params.irrelevant_chunk_penalty for r, rel in zip(ranks, relevances)]


@dataclass
class _Hit:
    source_id: str
    index: int
    rank: int  # 0-based
    value: float
    doc: Any


@dataclass
class _Group:
    """A run of a source's chunk indices [lo, hi] that one segment could span."""

    source_id: str
    lo: int
    values: np.ndarray
    blocked: np.ndarray


def _join(rows: Sequence[ChunkRow]) -> str:
    """The exact text of consecutive chunks: tiling chunks concatenated, overlapping
    windows (e.g. nodes of the package's node parsers) merged by offset."""
    parts, end = [], None
    for _i, start, stop, text in rows:
        parts.append(text if end is None else text[max(0, end - start):])
        end = stop if end is None else max(end, stop)
    return "".join(parts)


def _normalise_rows(rows: Iterable[Any]) -> list[ChunkRow]:
    out: list[ChunkRow] = []
    for row in rows:
        if hasattr(row, "page_content"):
            m = row.metadata or {}
            out.append((int(m["chunk_index"]), int(m["start_index"]), int(m["end_index"]), row.page_content))
        else:
            i, a, b, t = row
            out.append((int(i), int(a), int(b), t or ""))
    return sorted(out)


# ----------------------------------------------------------------------- the core
@dataclass(kw_only=True)
class SegmentExtractor:
    """Ranked small chunks in, best contiguous segments out (framework-free).

    Args:
        preset: ``"balanced"`` (dsRAG's values), ``"precise"`` or ``"expansive"``.
        chunks: where chunks that were not retrieved are read from: a
            `SlidingWindowIndex` (its
            ``chunk_rows``) or a callable ``(source_id, lo, hi)`` returning
            ``(chunk_index, start_index, end_index, text)`` rows or chunk documents.
            Without it, segments may only contain retrieved chunks (a segment needing
            another chunk raises ``LookupError``).
        budget_tokens: total cl100k tokens of the returned segments (``None``: only the
            chunk caps apply).
        max_length, overall_max_length, minimum_value, irrelevant_chunk_penalty, decay_rate: override the preset.
        score_key: metadata key of the candidates' scores (default: the first of
            ``relevance_score``, ``score``, ``rrf_score`` present).
        score_normalization: ``"auto"``, ``"none"`` or ``"rank"`` (see module doc).
        order: output order: ``"value"`` (best segment first, dsRAG's) or
            ``"document"`` (by source, then position).

    Input: small chunks in rank order (best first), document-like (metadata
    ``source_id`` and ``chunk_index``, plus ``start_index``/``end_index`` unless
    ``chunks`` is given) or `ContextSpan` s with ``chunk_index`` metadata;
    anything else raises ``ValueError``. `apply` returns the segments as
    documents with ``source_id``, ``start_index``, ``end_index``, ``first_chunk``,
    ``last_chunk``, ``segment_value`` (= ``score``), ``rank``, ``n_tokens`` and ``hit_ranks``.
    """

    preset: Literal["balanced", "precise", "expansive"] = "balanced"
    chunks: Any = field(default=None, repr=False)
    budget_tokens: int | None = 1500
    max_length: int | None = None
    overall_max_length: int | None = None
    minimum_value: float | None = None
    irrelevant_chunk_penalty: float | None = None
    decay_rate: float | None = None
    score_key: str | None = None
    score_normalization: Literal["auto", "none", "rank"] = "auto"
    order: Literal["value", "document"] = "value"
    encoding_name: str = DEFAULT_ENCODING

    def __post_init__(self) -> None:
        if self.budget_tokens is not None and self.budget_tokens <= 0:
            raise ValueError(f"budget_tokens must be > 0 or None, got {self.budget_tokens}")
        if self.score_normalization not in ("auto", "none", "rank"):
            raise ValueError(f"score_normalization must be 'auto', 'none' or 'rank', got {self.score_normalization!r}")
        if self.order not in ("value", "document"):
            raise ValueError(f"order must be 'value' or 'document', got {self.order!r}")
        self.params  # validates the preset and the overrides
        chunks = getattr(self.chunks, "engine", self.chunks)  # a face (SlidingWindowIndex) stands for its engine
        if chunks is not None and not (hasattr(chunks, "chunk_rows") or callable(chunks)):
            raise TypeError("chunks must be an index with chunk_rows (a SlidingWindowIndex) or a "
                            "callable(source_id, lo, hi)")

    @property
    def params(self) -> RSEParams:
        return RSEParams.from_preset(
            self.preset, max_length=self.max_length, overall_max_length=self.overall_max_length,
            minimum_value=self.minimum_value, irrelevant_chunk_penalty=self.irrelevant_chunk_penalty,
            decay_rate=self.decay_rate,
        )

    # ----------------------------------------------------------- input handling
    def _hits(self, documents: Sequence[Any], params: RSEParams) -> list[_Hit]:
        seen: set[tuple[str, int]] = set()
        kept: list[tuple[str, int, int, Any]] = []
        for position, doc in enumerate(as_items(documents)):
            meta = doc.metadata or {}
            if meta.get("source_id") is None or meta.get("chunk_index") is None:
                raise ValueError(
                    f"RSE needs small chunks with metadata 'source_id' and 'chunk_index'; candidate {position} "
                    f"has keys {sorted(meta)}. Use the index's chunk retrievers (dense/bm25/hybrid), "
                    "not merged windows."
                )
            try:
                key = (str(meta["source_id"]), int(meta["chunk_index"]))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"candidate {position}: chunk_index {meta['chunk_index']!r} is not an int") from exc
            if key in seen:  # the same chunk twice (several queries): keep its best rank
                continue
            seen.add(key)
            kept.append((key[0], key[1], position, doc))
        scores = [doc_score(d, self.score_key) for *_, d in kept]
        rels = _relevances(scores, self.score_normalization)
        values = chunk_values([p for _, _, p, _ in kept], rels, params)
        return [_Hit(s, i, p, v, d) for (s, i, p, d), v in zip(kept, values)]

    def _groups(self, hits: list[_Hit], params: RSEParams) -> list[_Group]:
        by_source: dict[str, list[_Hit]] = {}
        for hit in hits:
            by_source.setdefault(hit.source_id, []).append(hit)
        groups: list[_Group] = []
        for sid, items in by_source.items():
            items.sort(key=lambda h: h.index)
            runs: list[list[_Hit]] = [[items[0]]]
            for hit in items[1:]:
                # two hits further apart than a segment can reach never share one
                if hit.index - runs[-1][-1].index + 1 > params.max_length:
                    runs.append([hit])
                else:
                    runs[-1].append(hit)
            for run in runs:
                lo, hi = run[0].index, run[-1].index
                values = np.full(hi - lo + 1, -params.irrelevant_chunk_penalty)
                for hit in run:
                    values[hit.index - lo] = hit.value
                groups.append(_Group(sid, lo, values, np.zeros(hi - lo + 1, dtype=bool)))
        return groups

    def _fetch(self, source_id: str, lo: int, hi: int, known: dict[tuple[str, int], Any]) -> list[ChunkRow]:
        rows: dict[int, ChunkRow] = {}
        missing = False
        for i in range(lo, hi + 1):
            doc = known.get((source_id, i))
            meta = (doc.metadata or {}) if doc is not None else {}
            if doc is None or "start_index" not in meta or "end_index" not in meta:
                missing = True
                continue
            rows[i] = (i, int(meta["start_index"]), int(meta["end_index"]), doc.page_content)
        if missing:
            if self.chunks is None:
                raise LookupError(
                    f"segment {lo}..{hi} of source {source_id!r} needs chunks that were not retrieved "
                    "(or lack start_index/end_index); pass chunks=<SlidingWindowIndex or callable>"
                )
            chunks = getattr(self.chunks, "engine", self.chunks)  # a face (SlidingWindowIndex) stands for its engine
            if hasattr(chunks, "chunk_rows"):
                got = [(r.index, r.start, r.end, r.text) for r in chunks.chunk_rows([(source_id, lo, hi)])[source_id]]
            else:
                got = chunks(source_id, lo, hi)
            for row in _normalise_rows(got):
                if lo <= row[0] <= hi:
                    rows.setdefault(row[0], row)
        ordered = [rows.get(i) for i in range(lo, hi + 1)]
        if any(r is None for r in ordered):
            absent = [lo + k for k, r in enumerate(ordered) if r is None]
            raise LookupError(f"chunks {absent} of source {source_id!r} could not be fetched")
        for prev, cur in zip(ordered, ordered[1:]):
            if not prev[1] <= cur[1] <= prev[2]:  # tiling chunks touch; overlapping windows overlap
                raise LookupError(
                    f"chunks {prev[0]} and {cur[0]} of source {source_id!r} leave a gap or go backwards "
                    f"({prev[2]} -> {cur[1]}): cannot build an exact segment"
                )
        for row in ordered:
            if len(row[3]) != row[2] - row[1]:
                raise LookupError(f"chunk {row[0]} of source {source_id!r}: text length does not match its offsets")
        return ordered  # type: ignore[return-value]

    # --------------------------------------------------------------- extraction
    def extract(self, documents: Sequence[Any]) -> list[Segment]:
        """Segments for ranked chunks (documents or spans, best first); empty input → ``[]``."""
        documents = list(documents)
        if not documents:
            return []
        params = self.params
        hits = self._hits(documents, params)
        known = {(h.source_id, h.index): h.doc for h in hits}
        rank_of = {(h.source_id, h.index): h.rank for h in hits}
        groups = self._groups(hits, params)
        chunks_left = params.overall_max_length
        tokens_left = self.budget_tokens
        segments: list[Segment] = []
        while chunks_left > 0 and (tokens_left is None or tokens_left > 0):
            cap = min(params.max_length, chunks_left)
            best: tuple[float, int, int, _Group] | None = None  # value, start, end (in the group), group
            for g in groups:
                n = len(g.values)
                k = 0
                while k < n:  # each unblocked run of the group
                    if g.blocked[k]:
                        k += 1
                        continue
                    e = k
                    while e < n and not g.blocked[e]:
                        e += 1
                    found = best_segment(g.values[k:e], cap)
                    if found is not None:
                        a, b, total = found
                        if best is None or total > best[0] + 1e-12:
                            best = (total, k + a, k + b, g)
                    k = e
            if best is None or best[0] < params.minimum_value - 1e-12:
                break
            total, a, b, g = best
            g.blocked[a:b] = True  # chosen or rejected: never offered again
            lo, hi = g.lo + a, g.lo + b - 1
            rows = self._fetch(g.source_id, lo, hi, known)
            token_counts = [count_tokens(r[3], self.encoding_name) for r in rows]
            values = g.values[a:b]
            text = _join(rows)
            n_tokens = count_tokens(text, self.encoding_name)
            if tokens_left is not None and n_tokens > tokens_left:
                sub = _best_within(values, token_counts, tokens_left)
                if sub is None or sub[2] < params.minimum_value - 1e-12:
                    continue
                lo_k, hi_k = sub[0], sub[1]  # rows[lo_k:hi_k]
                text = _join(rows[lo_k:hi_k])
                n_tokens = count_tokens(text, self.encoding_name)
                while n_tokens > tokens_left and hi_k - lo_k > 1:  # joins can add a token
                    if values[hi_k - 1] <= values[lo_k]:
                        hi_k -= 1
                    else:
                        lo_k += 1
                    text = _join(rows[lo_k:hi_k])
                    n_tokens = count_tokens(text, self.encoding_name)
                if n_tokens > tokens_left:
                    continue
                rows = rows[lo_k:hi_k]
            first, last = rows[0][0], rows[-1][0]
            value = float(sum(g.values[first - g.lo : last - g.lo + 1]))
            hit_ranks = sorted(rank_of[(g.source_id, i)] + 1 for i in range(first, last + 1) if (g.source_id, i) in rank_of)
            inside = [known[(g.source_id, i)] for i in range(first, last + 1) if (g.source_id, i) in known]
            best_hit = min(inside, key=lambda d: rank_of[(g.source_id, int(d.metadata["chunk_index"]))], default=None)
            segments.append(Segment(
                source_id=g.source_id, first_chunk=first, last_chunk=last, start=rows[0][1], end=rows[-1][2],
                text=text, value=value, n_tokens=n_tokens, hit_ranks=hit_ranks,
                metadata=_source_metadata(best_hit.metadata) if best_hit is not None else {},
            ))
            chunks_left -= last - first + 1
            if tokens_left is not None:
                tokens_left -= n_tokens
        if self.order == "document":
            segments.sort(key=lambda s: (s.source_id, s.start))
        for rank, seg in enumerate(segments, start=1):
            seg.rank = rank
        return segments

    def apply(self, documents: Sequence[Any], query: str | None = None) -> list[PlainDocument]:
        """The context-step interface: the segments as documents (``query`` is not needed)."""
        return [s.to_item() for s in self.extract(documents)]


# The LangChain compressor moved to the face module; the old name still resolves, with a warning.
__getattr__ = moved_names_getattr(__name__)


_CHUNK_ONLY = {
    "chunk_index", "level", "medium_index", "n_tokens", "window_lower_bound", "window_upper_bound",
    "window_start_index", "window_end_index", "chunk_id", "start_index", "end_index", "score", "rank",
    "rrf_score", "fused_rank", "bm25_rank", "dense_rank", "bm25_score", "relevance_score", "rerank_rank",
    "content_hash", "hit_start_index", "hit_end_index", "n_chunks",
}


def _source_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (meta or {}).items() if k not in _CHUNK_ONLY}


def _best_within(values: np.ndarray, tokens: list[int], budget: int) -> tuple[int, int, float] | None:
    """Best-sum sub-run whose token total fits ``budget`` (O(n²); n <= max_length)."""
    best = None
    n = len(values)
    for a in range(n):
        used = 0
        total = 0.0
        for b in range(a, n):
            used += tokens[b]
            if used > budget:
                break
            total += float(values[b])
            if best is None or total > best[2] + 1e-12:
                best = (a, b + 1, total)
    return best
