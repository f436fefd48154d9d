"""Trimming windows to the sentences around their hits when the budget is short (issue 44).

The windowed retriever widens each small-chunk hit to its parent window and fills the
token budget with whole windows, so under a tight budget (300-500 tokens) a few windows
take all of it and the hits of the next windows are left out. `trim_windows` cuts
each window down to the sentences that hold its hits, plus ``sentences`` sentences on
either side, when the windows do not fit the budget whole: the freed tokens go to the
hits of lower-ranked windows (the idea of relevant segment extraction, at sentence
grain). Every piece keeps exact offsets (``text == source_text[start:end]``), so the
pieces are assembled by offset like the windows themselves
(`assemble_context`).

The default's planner already keeps only the hit chunks when the budget is tight, and a
hit chunk (a run of sentences up to 50 tokens) is made of whole sentences, so trimming to
the sentences of a whole hit frees nothing: `narrow_hits` first narrows each hit
to its best sentence by a caller's ``score`` (e.g. the question's terms it holds).

Sentences end at `SENTENCE_DELIMITERS`: the package's delimiters
(`DEFAULT_DELIMITERS`, CJK-aware) without the
commas, which end clauses, not sentences. Framework-free.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from swrag_integrations.core.delimiters import DEFAULT_DELIMITERS, _Delimiters
from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.engine.assemble import ContextSpan, count_tokens, merge_ranges

__all__ = ["SENTENCE_DELIMITERS", "HitLike", "Hit", "sentence_bounds", "narrow_hits", "trim_window",
           "trim_windows"]

SENTENCE_DELIMITERS: tuple[str, ...] = tuple(d for d in DEFAULT_DELIMITERS if d not in (",", "，"))
"""Where a sentence ends: the package's delimiters without the commas (``","``, ``"，"``)."""

_SENTENCES = _Delimiters(SENTENCE_DELIMITERS, False)


class HitLike(Protocol):
    """A retrieved small chunk: its source and character offsets (e.g. a
    `ChildHit`)."""

    source_id: str
    start: int
    end: int


def sentence_bounds(text: str, start: int, end: int) -> list[int]:
    """The sentence boundaries of ``text[start:end]`` as absolute offsets, ``start`` and
    ``end`` included, sorted (a sentence ends after one of `SENTENCE_DELIMITERS`).

    Raises:
        ValueError: ``start``/``end`` are not offsets of ``text`` with ``start <= end``.
    """
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"sentence_bounds start/end must satisfy 0 <= start <= end <= len(text) = {len(text)}, "
                         f"got ({start}, {end})")
    inner = [start + e for e in _SENTENCES.ends_list(text[start:end]) if 0 < e < end - start]
    return [start, *inner, end]


@dataclass(frozen=True)
class Hit:
    """A hit as offsets: ``text[start:end]`` of source ``source_id``."""

    source_id: str
    start: int
    end: int


def narrow_hits(hits: Sequence[HitLike], texts: Mapping[str, str], score: Callable[[str], float]) -> list[Hit]:
    """Each hit narrowed to its sentence with the highest ``score(sentence_text)`` (the first
    of equal ones), in the hits' order; a hit of one sentence stays as it is.

    Raises:
        ValueError: a hit whose source is not in ``texts``.
    """
    out = []
    for hit in hits:
        if hit.source_id not in texts:
            raise ValueError(f"narrow_hits texts has no source {hit.source_id!r}: pass the text of every hit's source")
        text = texts[hit.source_id]
        bounds = sentence_bounds(text, int(hit.start), int(hit.end))
        pairs = list(zip(bounds, bounds[1:]))
        a, b = max(pairs, key=lambda ab: score(text[ab[0]:ab[1]])) if pairs else (hit.start, hit.end)
        out.append(Hit(hit.source_id, a, b))
    return out


def trim_window(window: ContextSpan, source_text: str, hits: Iterable[tuple[int, int]], *,
                sentences: int = 1) -> list[ContextSpan]:
    """``window`` cut to the sentences that overlap its ``hits`` (character ranges in the
    source), widened by ``sentences`` sentences on either side and merged where they
    touch; pieces in order of their first hit (``hits`` in rank order). Each piece keeps
    the window's score and rank, its ``focus`` is the first hit inside it (clipped), and
    ``text == source_text[start:end]``. A window with no hit inside it is returned whole.

    Raises:
        ValueError: ``sentences`` is negative, or the window's text is not ``source_text[start:end]``.
    """
    if sentences < 0:
        raise ValueError(f"sentences must be >= 0 (sentences kept on either side of a hit), got {sentences}")
    if source_text[window.start:window.end] != window.text:
        raise ValueError(f"window {window.source_id}:{window.start}-{window.end} is not the source text at its "
                         "offsets: pass the source the window was cut from")
    clipped = [(max(a, window.start), min(b, window.end)) for a, b in hits]
    clipped = [(a, b) for a, b in clipped if b > a]
    if not clipped:
        return [window]
    bounds = sentence_bounds(source_text, window.start, window.end)
    last = len(bounds) - 1
    ranges = []
    for a, b in clipped:
        first_sentence = max(0, bisect_right(bounds, a) - 1)  # the sentence holding offset a
        last_sentence = min(last, bisect_left(bounds, b))  # the bound at or after b
        ranges.append((bounds[max(0, first_sentence - sentences)], bounds[min(last, last_sentence + sentences)]))
    pieces = []
    for a, b in merge_ranges(ranges):
        first = next(i for i, h in enumerate(clipped) if a <= h[0] and h[1] <= b)  # each hit lies in one piece
        pieces.append((first, ContextSpan(window.source_id, a, b, source_text[a:b], score=window.score,
                                          rank=window.rank, metadata=dict(window.metadata), focus=clipped[first])))
    return [span for _, span in sorted(pieces, key=lambda item: item[0])]


def trim_windows(windows: Sequence[ContextSpan], texts: Mapping[str, str], hits: Sequence[HitLike], budget: int, *,
                 sentences: int = 1, encoding_name: str = DEFAULT_ENCODING) -> list[ContextSpan]:
    """The ranked ``windows``, each cut to the sentences around its ``hits``
    (`trim_window`) when the windows' distinct text does not fit ``budget`` tokens
    whole; otherwise the windows unchanged. ``texts`` maps a source id to its text;
    ``hits`` (in rank order) count for the windows of their source that they overlap.
    The pieces come in the windows' rank order; assemble them by offset under the
    budget (`assemble_context`).

    Raises:
        ValueError: a negative ``budget`` or ``sentences``, or a window whose source is not in ``texts``.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0 tokens, got {budget}")
    missing = sorted({w.source_id for w in windows} - set(texts))
    if missing:
        raise ValueError(f"trim_windows texts has no source {missing[0]!r}: pass the text of every window's source")
    by_source: dict[str, list[tuple[int, int]]] = {}
    for w in windows:
        by_source.setdefault(w.source_id, []).append((w.start, w.end))
    whole = sum(count_tokens(texts[src][a:b], encoding_name)
                for src, ranges in by_source.items() for a, b in merge_ranges(ranges))
    if whole <= budget:
        return list(windows)
    hit_ranges: dict[str, list[tuple[int, int]]] = {}
    for hit in hits:
        hit_ranges.setdefault(hit.source_id, []).append((int(hit.start), int(hit.end)))
    out: list[ContextSpan] = []
    for w in windows:
        out.extend(trim_window(w, texts[w.source_id], hit_ranges.get(w.source_id, ()), sentences=sentences))
    return out
