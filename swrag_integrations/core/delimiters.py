"""Delimiter matching for the DFS and DDS strategies (framework-free, like `windows`).

The delimiters of a text are the matches of one left-to-right scan with the alternatives
tried longest first (``re.finditer`` semantics): with the defaults, ``"\\n\\n"`` is one
delimiter, not two ``"\\n"``, and a delimiter matches only where all of it is in the text.
What the strategies use are the match *ends*.

* Literal delimiters are matched with numpy over the text's code points (no UTF-8 round
  trip), in blocks of `_BLOCK_CHARS` characters; a text of up to
  `_SMALL_CHARS` characters goes through the escaped alternation instead (the
  fixed cost of numpy calls is larger than the work there).
* Regular-expression delimiters (``is_delimiter_regex=True``) are tried in the given
  order, each with its own groups (a backreference keeps its meaning when several are
  given), and each must consume at least one character: one that can match the empty
  string (a lookaround, ``\\b``, ``x*``) would find no delimiter, so it is rejected.
* DFS asks only for the first end at or after each window's threshold: with literal
  delimiters and windows at least `_LOCAL_SEARCH_CHARS` characters apart it
  searches near each threshold instead of scanning the whole text
  (`_Delimiters.end_finder`; the same ends, tested against the scan).

`_SMALL_CHARS` is also where `windows` switches from its plain-Python walk
to the numpy one: one threshold for both, so a test can force every numpy path at once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence as _SequenceABC
from functools import lru_cache
from re import _parser as _re_parser  # the parser behind re.compile (width, group references)
from typing import Any, Callable, Sequence

import numpy as np

DEFAULT_DELIMITERS: tuple[str, ...] = (
    "\n\n",
    "\n",
    ". ",
    ",",
    "?",
    "!",
    "。",
    "！",
    "？",
    "；",
    "，",
    "．",
)

_BLOCK_CHARS = 1 << 18  # characters per block of the numpy scan (its scratch stays in cache)
# Texts up to this many characters are handled in plain Python (delimiters with the
# regular expression, windows with a loop in .windows): for a short text the fixed cost
# of numpy calls is larger than the work. Both ways give the same results (tested).
_SMALL_CHARS = 4096
# DFS with literal delimiters: when windows start at least this many characters apart
# on average, each window's end is found by a regular-expression search near its
# threshold instead of a scan of the whole text (about 0.5 us per window against
# 2.5-5 us per 1000 characters scanned, measured on en.txt and zh.txt).
_LOCAL_SEARCH_CHARS = 192
_LOCAL_BACKOFF = 64  # characters walked back to a sync point before using the last one
_LOCAL_SEARCHES = 4  # searches per window on average before the rest is done with one scan


def _code_points(text: str) -> tuple[np.ndarray, bytes | None]:
    """The code points of ``text``, one array element per character, and for ASCII text
    the bytes they view (so a scan can use them as they are, without a copy).

    ASCII text is its own encoding (uint8); any other text becomes numpy's UCS-4 copy
    of it (uint32), the fastest conversion CPython offers (lone surrogates are kept as
    they are). Offsets into the array are character offsets: no byte-to-character map.
    """
    if text.isascii():
        raw = text.encode("ascii")
        return np.frombuffer(raw, dtype=np.uint8), raw
    return np.frombuffer(np.array(text), dtype=np.uint32), None


def _delimiter_items(delimiters: object) -> list[str]:
    """``delimiters`` (a str or a sequence of str) as a list; TypeError for anything else."""
    if isinstance(delimiters, str):
        return [delimiters]
    if isinstance(delimiters, (bytes, bytearray, memoryview)) or not isinstance(delimiters, _SequenceABC):
        raise TypeError(
            "delimiters must be a str, a list or tuple of str, or a compiled re.Pattern, "
            f"got {type(delimiters).__name__}"
        )
    for index, item in enumerate(delimiters):
        if not isinstance(item, str):
            raise TypeError(f"delimiters must be strings, got {type(item).__name__} at index {index}: {item!r}")
    return list(delimiters)


@lru_cache(maxsize=256)
def _regex_shape(pattern: re.Pattern) -> tuple[int, bool]:
    """``(minimum match width, whether it refers to a group)`` of a compiled str pattern.

    A reference is a backreference or a group conditional, numbered or named; both
    facts come from the parse tree ``re.compile`` itself builds.
    """
    tree = _re_parser.parse(pattern.pattern, pattern.flags)
    refers, stack = False, [tree]
    while stack and not refers:
        node = stack.pop()
        if isinstance(node, _re_parser.SubPattern):
            for op, av in node.data:
                refers = refers or op in (_re_parser.GROUPREF, _re_parser.GROUPREF_EXISTS)
                stack.append(av)
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
    return tree.getwidth()[0], refers


def _check_delimiter_pattern(pattern: re.Pattern) -> re.Pattern:
    """A regex delimiter must match text (str) and consume at least one character."""
    if not isinstance(pattern.pattern, str):
        raise TypeError(f"delimiters must be a str pattern, got a {type(pattern.pattern).__name__} pattern: {pattern!r}")
    if _regex_shape(pattern)[0] == 0:
        raise ValueError(
            f"delimiters: {pattern.pattern!r} can match the empty string (a lookaround, \\b, ^, x*, ...), "
            "and empty matches are no delimiter; a delimiter must consume at least one character, "
            "e.g. r'\\.' instead of r'(?=\\.)'"
        )
    return pattern


class _Delimiters:
    """Finds delimiter ends: the ends of the left-to-right, longest-first matches.

    Literal strings are scanned with numpy over the text's code points (a short text,
    up to `_SMALL_CHARS` characters, with the escaped alternation, longest first:
    same matches, less fixed cost); regular expressions with one alternation
    ``(?:r1)|(?:r2)|...`` tried in order. When
    joining would change their meaning (a backreference or group conditional would be
    renumbered, a group name repeated, an inline global flag moved) the regular
    expressions are compiled separately and scanned as that same alternation
    (`_alternation_ends`), so each keeps its own groups.
    """

    def __init__(self, delimiters: Sequence[str] | re.Pattern | str, is_regex: bool):
        self.literals: tuple[tuple[int, ...], ...] | None = None
        self.alternatives: tuple[re.Pattern, ...] | None = None
        self.pattern: re.Pattern | None
        if isinstance(delimiters, re.Pattern):
            self.pattern = _check_delimiter_pattern(delimiters)
            return
        items = _delimiter_items(delimiters)
        if not items:
            raise ValueError("delimiters must not be empty for DFS/DDS")
        if "" in items:
            raise ValueError("delimiters must not contain the empty string")
        if is_regex:
            compiled = []
            for item in items:
                try:
                    compiled.append(_check_delimiter_pattern(re.compile(item)))
                except re.error as exc:
                    raise ValueError(f"delimiters: {item!r} is not a valid regular expression: {exc}") from exc
            try:
                joined: re.Pattern | None = re.compile("|".join(f"(?:{item})" for item in items))
            except re.error:  # e.g. a group name used twice, or a global flag such as (?i)
                joined = None
            if joined is not None and (len(items) == 1 or not any(_regex_shape(p)[1] for p in compiled)):
                self.pattern = joined
            elif len(items) == 1:
                self.pattern = compiled[0]
            else:
                self.pattern = None
                self.alternatives = tuple(compiled)
            return
        # Longest first, so "\n\n" wins over "\n" and ". " is one delimiter.
        ordered = sorted(set(items), key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(item) for item in ordered))
        self.literals = tuple(tuple(map(ord, item)) for item in ordered)  # code points, longest first
        firsts = sorted({d[0] for d in self.literals})
        self._firsts = _CodePointSet(firsts)
        self._singles = _CodePointSet([d[0] for d in self.literals if len(d) == 1])
        self._multis = tuple(sorted((d for d in self.literals if len(d) > 1), key=len))
        self._chars = frozenset(chr(c) for item in self.literals for c in item)  # in any delimiter

    def end_finder(self, text: str, windows: int) -> Callable[[np.ndarray], np.ndarray]:
        """A function mapping non-decreasing thresholds (character offsets) to the first
        delimiter end at or after each (``len(text)`` where there is none), called on
        successive batches of thresholds (what DFS asks).

        Literal delimiters with ``windows`` sparse in the text (at least
        `_LOCAL_SEARCH_CHARS` characters apart on average) are searched near each
        threshold (`_local_ends`); otherwise the whole text is scanned once.
        """
        length = len(text)
        if self.literals is not None and length >= _LOCAL_SEARCH_CHARS * max(windows, 1):
            return self._local_ends(text)
        ends = self.ends(text)
        return lambda thresholds: _first_end_at_or_after(ends, thresholds, length)

    def _local_ends(self, text: str) -> Callable[[np.ndarray], np.ndarray]:
        """`end_finder` by searching from a *sync point* before each threshold.

        A match of the left-to-right scan ends at or after ``x`` only if it starts at or
        after ``x - longest``. From a position ``q`` that no match can straddle (``q = 0``,
        the end of a match of the scan, or a position after a character that is in no
        delimiter) ``pattern.search`` finds exactly the scan's next match, so searching
        from such a ``q`` at or before ``x - longest`` and skipping matches that end before
        ``x`` gives the scan's answer. The last match found is kept across thresholds (and
        batches), so every part of the text is searched at most once, and the walk back to
        a sync point is bounded by `_LOCAL_BACKOFF`: linear in the text. Where the
        delimiters are so dense that more than `_LOCAL_SEARCHES` searches per window
        are needed (text made of delimiter characters), the rest is done with one scan.
        """
        assert self.pattern is not None and self.literals is not None
        search, chars, longest, length = self.pattern.search, self._chars, len(self.literals[0]), len(text)
        # a sync point, the end of the scan's first match after it (-1: not searched yet),
        # no match left, searches so far, windows so far, the scanned ends (after a switch)
        state: dict[str, Any] = {"pos": 0, "end": -1, "exhausted": False, "searches": 0, "windows": 0, "ends": None}

        per_window, backoff = _LOCAL_SEARCHES, _LOCAL_BACKOFF

        def first_ends(thresholds: np.ndarray) -> np.ndarray:
            if state["ends"] is not None:
                return _first_end_at_or_after(state["ends"], thresholds, length)
            pos, end, exhausted, searches = state["pos"], state["end"], state["exhausted"], state["searches"]
            budget = per_window * state["windows"] + 64
            values = thresholds.tolist()
            out: list[int] = []
            append = out.append
            for i, x in enumerate(values):
                if end >= x:  # the match found for an earlier threshold
                    append(end)
                    continue
                if x >= length or exhausted:  # so are all later thresholds
                    out += [length] * (len(values) - i)
                    break
                if end >= 0:
                    pos = end
                if searches > budget + per_window * i:  # dense delimiters: one scan instead
                    state["ends"] = self.ends(text)
                    rest = _first_end_at_or_after(state["ends"], thresholds[i:], length)
                    return np.concatenate((np.array(out, dtype=np.int64), rest))
                q = x - longest
                if q - pos > backoff:
                    stop = q - backoff
                    while q > stop and text[q - 1] in chars:
                        q -= 1
                    if q == stop:
                        q = pos
                else:
                    q = pos
                match = search(text, q)
                searches += 1
                while match is not None:
                    end = match.end()
                    if end >= x:
                        break
                    match = search(text, end)
                    searches += 1
                if match is None:
                    exhausted = True
                    append(length)
                else:
                    append(end)
            state.update(pos=pos, end=end, exhausted=exhausted, searches=searches, windows=state["windows"] + len(out))
            return np.array(out, dtype=np.int64)

        return first_ends

    def ends(self, text: str) -> np.ndarray:
        """Sorted end offsets of the delimiter matches (left-to-right, non-overlapping)."""
        if self.literals is not None and len(text) > _SMALL_CHARS:
            return self._scan_literals(text)
        return np.array(self.ends_list(text), dtype=np.int64)

    def ends_list(self, text: str) -> list[int]:
        """`ends` as a list (a short text never goes through numpy)."""
        if self.literals is not None and len(text) > _SMALL_CHARS:
            return self._scan_literals(text).tolist()
        if self.alternatives is not None:
            return self._alternation_ends(text)
        assert self.pattern is not None
        return [m.end() for m in self.pattern.finditer(text) if m.end() > m.start()]

    def _alternation_ends(self, text: str) -> list[int]:
        """Ends of ``re.finditer`` over the alternation of ``self.alternatives``, each with its own groups.

        At each position the first alternative that matches wins, as in one alternation:
        the next match is the leftmost of every alternative's next match, ties going to
        the earlier alternative. An alternative is searched again only when the scan has
        passed the start of its pending match (no alternative matches the empty string).
        """
        assert self.alternatives is not None
        pending = [p.search(text) for p in self.alternatives]
        out: list[int] = []
        pos = 0
        while True:
            best = None
            for i, match in enumerate(pending):
                if match is not None and match.start() < pos:
                    match = pending[i] = self.alternatives[i].search(text, pos)
                if match is not None and (best is None or match.start() < best.start()):
                    best = match
            if best is None:
                return out
            pos = best.end()
            out.append(pos)

    def _scan_literals(self, text: str) -> np.ndarray:
        """`ends` for literal delimiters, vectorised over the text's code points."""
        assert self.literals is not None
        longest = len(self.literals[0])
        all_starts, all_ends = [], []
        for pos in range(0, len(text), _BLOCK_CHARS):
            block = text[pos : pos + _BLOCK_CHARS + longest]  # overlap: matches crossing the cut
            starts, lengths = self._longest_at_each_start(*_code_points(block))
            inside = np.searchsorted(starts, _BLOCK_CHARS)  # a match starting in the overlap is the next block's
            all_starts.append(starts[:inside] + pos)
            all_ends.append(starts[:inside] + lengths[:inside] + pos)
        if not all_starts:
            return np.zeros(0, dtype=np.int64)
        return _leftmost_longest(np.concatenate(all_starts), np.concatenate(all_ends))

    def _longest_at_each_start(self, points: np.ndarray, raw: bytes | None) -> tuple[np.ndarray, np.ndarray]:
        """Every position where a delimiter starts in ``points`` (``raw``: the same
        code points as bytes, for ASCII text), and the length of the longest there."""
        # Candidates: characters whose low byte is the low byte of a first code point,
        # found with bytes.translate (the fastest pass numpy offers here); for wider
        # characters the few candidates are then checked in full.
        if raw is None:
            raw = points.astype(np.uint8).tobytes()  # the low bytes of wider code points
        cand = np.flatnonzero(np.frombuffer(raw.translate(self._firsts.low_bytes), dtype=np.bool_))
        if points.dtype != np.uint8:
            cand = cand[self._firsts.members(points[cand])]
        first = points[cand]
        # Single-character delimiters first; longer ones, shortest first, overwrite them
        # where they match, so each position ends up with its longest delimiter.
        lengths = self._singles.members(first).astype(np.int32)
        size, top = points.size, np.iinfo(points.dtype).max
        second = None  # the character after each candidate (0 past the end), for two-character delimiters
        for delim in self._multis:
            if max(delim) > top:  # a code point this block cannot hold
                continue
            if len(delim) == 2 and delim[1]:  # the common case (". ", "\n\n"): one comparison per candidate
                if second is None:
                    second = points[np.minimum(cand + 1, size - 1)]
                    second[cand + 1 >= size] = 0
                lengths[(first == delim[0]) & (second == delim[1])] = 2
                continue
            hit = np.flatnonzero(first == delim[0])
            hit = hit[cand[hit] <= size - len(delim)]
            for k, point in enumerate(delim[1:], start=1):
                hit = hit[points[cand[hit] + k] == point]
            lengths[hit] = len(delim)
        found = np.flatnonzero(lengths)
        return cand[found], lengths[found]


class _CodePointSet:
    """Membership of code points in a small set: a table up to U+FFFF, ``np.isin`` beyond."""

    def __init__(self, points: Sequence[int]):
        self.points = np.array(sorted(set(points)), dtype=np.uint32)
        self.table = np.zeros((1 << 16) + 1, dtype=bool)  # the last entry (U+10000 and up) stays False
        self.table[self.points[self.points < (1 << 16)]] = True
        self.astral = self.points[self.points >= (1 << 16)]
        low_bytes = np.zeros(256, dtype=bool)
        low_bytes[self.points & 0xFF] = True
        self.low_bytes = low_bytes.tobytes()  # bytes.translate table: 1 for a member's low byte

    def members(self, values: np.ndarray) -> np.ndarray:
        if values.dtype.itemsize <= 2:
            return self.table.take(values)
        found = self.table.take(np.minimum(values, 1 << 16))
        if self.astral.size:
            found |= np.isin(values, self.astral)
        return found


def _leftmost_longest(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Ends of the matches a left-to-right scan keeps (skipping every match that starts
    inside a kept one); ``starts`` is increasing, ``ends[i]`` the end of the longest match
    at ``starts[i]``.

    A match that no earlier match reaches (it starts at or after all their ends) is kept.
    The matches after it that an earlier one does reach form its *run*; in a run the scan
    keeps the first match, then the first one starting at or after the end of the last
    kept one, and so on. All runs are walked at once, one kept match per run and round,
    so a long run (a thousand blank lines) costs rounds of numpy calls, not a Python step
    per match. (Comparing each match with its predecessor only is not enough: in
    ``"abb"`` with delimiters ``"abb"`` and ``"b"`` the last ``"b"`` starts inside
    ``"abb"`` but not inside the first ``"b"``.)
    """
    if starts.size < 2:
        return ends
    keep = np.empty(starts.size, dtype=bool)
    keep[0] = True
    np.greater_equal(starts[1:], np.maximum.accumulate(ends)[:-1], out=keep[1:])  # no earlier match reaches it
    reached = np.flatnonzero(~keep)
    if not reached.size:
        return ends
    # A run with one reached match (the second "\n" of "\n\n") keeps only its head; runs
    # with two or more (consecutive indices in ``reached``) are walked.
    block_starts = np.flatnonzero(np.diff(reached, prepend=-2) != 1)
    block_ends = np.append(block_starts[1:], reached.size) - 1
    walked = block_ends > block_starts
    current, stop = reached[block_starts[walked]] - 1, reached[block_ends[walked]] + 1  # head, index after the run
    while current.size:
        following = np.searchsorted(starts, ends[current], side="left")  # where the scan looks next
        inside = following < stop
        current, stop = following[inside], stop[inside]
        keep[current] = True
    return ends[keep]


def _first_end_at_or_after(ends: np.ndarray, thresholds: np.ndarray, length: int) -> np.ndarray:
    idx = np.searchsorted(ends, thresholds, side="left")
    padded = np.append(ends, length)
    return np.where(thresholds >= length, length, padded[idx])
