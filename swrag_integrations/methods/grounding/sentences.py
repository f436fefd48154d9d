"""Sentence splitting for answers and contexts, Chinese and English, with exact offsets.

`split_sentences` returns `Sentence` pieces whose ``text`` is always
``text[start:end]`` (no normalisation, no ``str.find``). Rules, in order:

* a line break always ends a sentence (LLM answers are often lists); a list marker at
  the start of a line (``1.``, ``2)``, ``-``, ``*``, ``•``) is not part of the sentence;
* ``。！？`` (and ``!?``, ``…``) end a sentence, closing quotes/brackets included;
* ``.`` ends a sentence when it is followed by whitespace (or the end, or a Han
  character) and the next word does not start in lower case, and the word before it is
  not a known abbreviation (``e.g.``, ``Dr.``, ``et al.``, ...), a single-letter initial
  or a dotted acronym (``U.S.``);
* leading/trailing whitespace is not part of a sentence; pieces without a letter or
  digit (``"..."``, ``"-"``) are dropped.

Written by hand rather than taken from a library: NLTK's Punkt needs model data that
is not available offline here, and neither it nor the splitters shipped with the
frameworks (LangChain's ``NLTKTextSplitter``, LlamaIndex's ``SentenceSplitter``) return
exact offsets for Chinese. `split_units` cuts long sentences further at clause
punctuation, for aligning against context passages.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from swrag_integrations.core.lang import HAN

__all__ = ["Sentence", "split_sentences", "split_units", "ABBREVIATIONS"]


class Sentence(NamedTuple):
    """A sentence: ``text == original[start:end]``."""

    text: str
    start: int
    end: int


ABBREVIATIONS = frozenset(
    """e.g i.e etc vs cf al approx ca mr mrs ms dr prof st sr jr inc ltd co corp fig figs no nos vol
    eq eqs sec ch pp p dept univ jan feb mar apr jun jul aug sep sept oct nov dec est min max""".split()
)

_LINE = re.compile(r"[^\n\r]+")
_LIST_MARKER = re.compile(r"\s*(?:(?:\d{1,3}|[a-zA-Z])[.)]|[-*•·▪‣●]|\(\d{1,3}\))\s+")
_CLOSERS = "\"'”’)）」』】\\]》〉"
_TERMINATOR = re.compile(f"(?:[。！？!?]+|…+|\\.{{2,}}|\\.)[{re.escape(_CLOSERS)}]*")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_HAS_WORD = re.compile(r"[^\W_]")
_HAN_CHAR = re.compile(f"[{HAN}]")
_CLAUSE = re.compile(f"[，,；;：:、][{re.escape(_CLOSERS)}]*\\s*")


def _period_ends_sentence(line: str, dot: int, end: int) -> bool:
    """Is the ``.`` at ``line[dot]`` (match ending at ``end``) a sentence end?"""
    rest = line[end:]
    if rest:
        nxt = rest[0]
        if not (nxt.isspace() or _HAN_CHAR.match(nxt)):
            return False  # 3.5, v1.2, example.com, "e.g.," ...
        following = rest.lstrip()
        if following and following[0].islower():
            return False  # "approx. five", "et al. found"
    word = _WORD_BEFORE.search(line, 0, dot)
    if word:
        w = word.group(1)
        if len(w) == 1 and w.isupper():
            return False  # an initial: "J. Smith"
        if "." in w and all(len(p) <= 2 for p in w.split(".") if p):
            return False  # e.g, i.e, U.S
        if w.lower().rstrip(".") in ABBREVIATIONS:
            return False
    return True


def _line_sentences(line: str, offset: int, out: list[Sentence]) -> None:
    marker = _LIST_MARKER.match(line)
    begin = marker.end() if marker else 0
    start = begin
    for match in _TERMINATOR.finditer(line, begin):
        token = match.group(0).rstrip(_CLOSERS)
        if token == "." and not _period_ends_sentence(line, match.start(), match.end()):
            continue
        _emit(line, start, match.end(), offset, out)
        start = match.end()
    _emit(line, start, len(line), offset, out)


def _emit(line: str, start: int, end: int, offset: int, out: list[Sentence]) -> None:
    while start < end and line[start].isspace():
        start += 1
    while end > start and line[end - 1].isspace():
        end -= 1
    if end > start and _HAS_WORD.search(line, start, end):
        out.append(Sentence(line[start:end], offset + start, offset + end))


def split_sentences(text: str) -> list[Sentence]:
    """Split ``text`` into sentences with exact offsets (see the module docstring).

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    out: list[Sentence] = []
    for line in _LINE.finditer(text):
        _line_sentences(line.group(0), line.start(), out)
    return out


def split_units(text: str, max_chars: int = 300) -> list[Sentence]:
    """Sentences of ``text``; those longer than ``max_chars`` are cut at clause
    punctuation (``，,；;：:、``) into pieces of at most about ``max_chars``, and a piece
    still longer (no punctuation at all) at whitespace or, failing that, every
    ``max_chars`` characters. Offsets stay exact.

    Raises:
        ValueError: ``max_chars`` is not a positive int.
    """
    if not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars <= 0:
        raise ValueError(f"max_chars must be a positive int, got {max_chars!r}")
    out: list[Sentence] = []
    for sent in split_sentences(text):
        if sent.end - sent.start <= max_chars:
            out.append(sent)
            continue
        cuts = [m.end() for m in _CLAUSE.finditer(sent.text)]
        pieces = _pack(sent.text, cuts, max_chars)
        for a, b in pieces:
            for a2, b2 in _hard_cut(sent.text, a, b, max_chars):
                _emit(sent.text, a2, b2, sent.start, out)
    return out


def _pack(text: str, cuts: list[int], max_chars: int) -> list[tuple[int, int]]:
    """Greedy runs of clauses up to ``max_chars``."""
    pieces, start, last = [], 0, 0
    for cut in cuts + [len(text)]:
        if cut - start > max_chars and last > start:
            pieces.append((start, last))
            start = last
        last = cut
    if start < len(text):
        pieces.append((start, len(text)))
    return pieces


def _hard_cut(text: str, a: int, b: int, max_chars: int) -> list[tuple[int, int]]:
    out = []
    while b - a > max_chars:
        cut = text.rfind(" ", a + max_chars // 2, a + max_chars)
        cut = cut + 1 if cut > a else a + max_chars
        out.append((a, cut))
        a = cut
    out.append((a, b))
    return out
