"""Checkable claims in an answer: numbers, dates and names, and whether a context has them.

`extract_claims` finds, with exact offsets into the text it is given:

* **numbers**: Arabic digits (``1,200``, ``3.5``, ``60%``, full-width digits), English
  number words (``sixty``, ``forty-two``, ``three hundred``; values of at least 2),
  Chinese numerals as jieba numeral words (``四十名`` -> 40, ``一九八九年`` -> 1989,
  ``百分之六十`` -> 60; idioms such as 十分/一些/万一 are not numbers);
* **dates**: English month dates (``March 5, 1889``, ``5 March``, ``March 1889``), ISO
  dates, Chinese ``1889年3月5日`` / ``三月五日`` / ``1889年``, and bare years
  (1000-2100);
* **names**: English capitalised word runs (``Marrow Point Lighthouse``; a leading
  function word such as "The" is dropped, and a single capitalised word that starts
  the sentence is not taken, since it is capitalised anyway) and all-caps acronyms;
  Chinese person/place/organisation names tagged ``nr``/``ns``/``nt`` by jieba's POS
  tagger.

`ContextFacts` indexes a context once (its numbers as values, its text
case-folded, its words) and `ContextFacts.supports` says whether a claim occurs
in it: a number when the same value occurs in any notation (``40`` = ``forty`` =
``四十``), a date when the date text occurs or all its numbers (and its month) do, a
name when it occurs as text (case-insensitive) or, for an English multi-word name, when
each of its words does.

Limits (heuristics, no NER model): a capitalised word that starts a sentence is never a
name claim; jieba's tagger misses some names and tags some ordinary words as names;
number words such as "one" (value 1) are ignored; units and scale are not compared
(``3.5 million`` is supported by any ``3.5``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Literal

from swrag_integrations.core.lang import HAN

__all__ = ["Claim", "ClaimKind", "ContextFacts", "extract_claims", "chinese_numeral_value", "number_values"]

ClaimKind = Literal["number", "date", "name"]


@dataclass(frozen=True)
class Claim:
    """A checkable piece of an answer: ``text == answer[start:end]``."""

    text: str
    kind: ClaimKind
    start: int
    end: int

    def to_dict(self) -> dict:
        return {"text": self.text, "kind": self.kind, "start": self.start, "end": self.end}


# ------------------------------------------------------------------------ numbers

_ARABIC = re.compile(r"(?<![A-Za-z0-9.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)")
_UNIT_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS_WORDS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALE_WORDS = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORD = "|".join(sorted([*_UNIT_WORDS, *_TENS_WORDS, *_SCALE_WORDS], key=len, reverse=True))
_WORD_NUMBER = re.compile(
    f"\\b(?:{_NUMBER_WORD})(?:(?:[\\s-]+and[\\s-]+|[\\s-]+)(?:{_NUMBER_WORD}))*\\b", re.IGNORECASE
)
_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 10_000, "亿": 100_000_000}
_CN_NUMERAL_CHARS = "".join([*_CN_DIGITS, *_CN_UNITS, *_CN_BIG])
_CN_RUN = re.compile(f"[{_CN_NUMERAL_CHARS}]+")
# jieba numeral words that are not numbers in use
_CN_NOT_NUMBERS = frozenset(
    "十分 万分 一些 一点 一下 万一 千万 一切 一起 一直 一定 一般 一样 一致 一边 一方面 一再 一旦 一向 一律 一同 一共 "
    "一度 一时 一番 一概 一味 一带 一路 一体 统一 唯一 之一 一一 三三两两 千千万万 万万 一心 一面 一道 一阵 一口气 "
    "百般 千方百计 十足 一无所知 一目了然 一般来说 一些人 十全十美 五花八门 四面八方 乱七八糟 七嘴八舌 一手".split()
)


def chinese_numeral_value(text: str) -> int | None:
    """The value of a Chinese numeral (``四十`` 40, ``三万五千`` 35000, ``一九八九`` 1989,
    ``两`` 2); ``None`` if ``text`` holds anything else."""
    if not text or any(ch not in _CN_NUMERAL_CHARS for ch in text):
        return None
    if not any(ch in _CN_UNITS or ch in _CN_BIG for ch in text):
        return int("".join(str(_CN_DIGITS[ch]) for ch in text))  # read digit by digit
    total = section = number = 0
    for ch in text:
        if ch in _CN_DIGITS:
            number = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            section += (number or (1 if ch == "十" else 0)) * _CN_UNITS[ch]
            number = 0
        else:
            big = _CN_BIG[ch]
            if big > 10_000:
                total = ((total + section + number) or 1) * big
            else:
                total += ((section + number) or 1) * big
            section = number = 0
    return total + section + number


def _word_number_value(text: str) -> int | None:
    total = current = 0
    seen = False
    for word in re.split(r"[\s-]+", text.lower()):
        if word == "and":
            continue
        if word in _UNIT_WORDS:
            current += _UNIT_WORDS[word]
        elif word in _TENS_WORDS:
            current += _TENS_WORDS[word]
        elif word == "hundred":
            current = (current or 1) * 100
        elif word in _SCALE_WORDS:
            total += (current or 1) * _SCALE_WORDS[word]
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


def _arabic_value(text: str) -> float:
    return float(text.replace(",", ""))


def number_values(text: str) -> set[float]:
    """Every number in ``text`` as a value, in any notation (generous: every run of
    Chinese numeral characters counts, idioms included)."""
    text = unicodedata.normalize("NFKC", text)
    values = {_arabic_value(m.group(0)) for m in _ARABIC.finditer(text)}
    for m in _WORD_NUMBER.finditer(text):
        v = _word_number_value(m.group(0))
        if v is not None:
            values.add(float(v))
    for m in _CN_RUN.finditer(text):
        v = chinese_numeral_value(m.group(0))
        if v is not None:
            values.add(float(v))
    return values


# -------------------------------------------------------------------------- dates

_MONTHS = {
    name: i
    for i, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")],
        1,
    )
    for name in names
}
_MONTH = "(?:" + "|".join(n.capitalize() + ("\\.?" if len(n) <= 4 and n != "may" else "") for n in
                           sorted(_MONTHS, key=len, reverse=True)) + ")"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_CN_SMALL = "[0-9０-９]{1,2}|[一二三四五六七八九十]{1,3}"
_CN_YEAR = "[0-9０-９]{2,4}|[零〇一二三四五六七八九]{2,4}"
_DATE = re.compile(
    "|".join(
        [
            f"\\b{_MONTH}\\s+{_DAY}(?:,?\\s+\\d{{4}})?\\b",
            f"\\b{_DAY}\\s+(?:of\\s+)?{_MONTH}(?:,?\\s+\\d{{4}})?\\b",
            f"\\b{_MONTH},?\\s+\\d{{4}}\\b",
            r"\b\d{4}-\d{1,2}-\d{1,2}\b",
            f"(?:{_CN_YEAR})年(?:(?:{_CN_SMALL})月(?:(?:{_CN_SMALL})[日号])?)?",
            f"(?:{_CN_SMALL})月(?:{_CN_SMALL})[日号]",
        ]
    )
)
_CN_MONTH = re.compile(f"({_CN_SMALL})月")
_MONTH_WORD = re.compile(_MONTH)


def _date_parts(text: str) -> tuple[set[float], set[int]]:
    """(numbers, months) of a date claim."""
    months = {_MONTHS[m.group(0).lower().rstrip(".")] for m in _MONTH_WORD.finditer(text)}
    for m in _CN_MONTH.finditer(unicodedata.normalize("NFKC", text)):
        raw = m.group(1)
        months.add(int(raw) if raw.isdigit() else (chinese_numeral_value(raw) or 0))
    stripped = _MONTH_WORD.sub(" ", text)
    stripped = _CN_MONTH.sub(" ", unicodedata.normalize("NFKC", stripped))
    numbers = {v for v in number_values(re.sub(r"(?<=\d)(?:st|nd|rd|th)\b", "", stripped))}
    return numbers, months


# -------------------------------------------------------------------------- names

_CAP_WORD = r"(?:[A-Z][A-Za-z0-9'’]*(?:-[A-Za-z0-9]+)*)"
_NAME = re.compile(
    f"(?<![\\w-]){_CAP_WORD}(?:(?:\\s+(?:of|de|van|von|der|den|du|la|le|da|di|del|bin|al)\\s+|\\s+){_CAP_WORD})*(?![\\w-])"
)
_LEADING_WORDS = frozenset(
    """a an the this that these those in on at by for from with of to and or but as if when while
    it its he she they we i you his her their our my your there here after before during since until
    however although though also then thus so yes no not according based""".split()
)
_CN_NAME_FLAGS = frozenset({"nr", "nrfg", "nrt", "ns", "nt"})
_HAN_RE = re.compile(f"[{HAN}]")
_WORD = re.compile(r"[A-Za-z0-9]+")


def _english_names(text: str, taken: list[tuple[int, int]]) -> list[Claim]:
    out = []
    first_word = re.search(r"[^\W_]", text)
    sentence_start = first_word.start() if first_word else 0
    for m in _NAME.finditer(text):
        start, end = m.start(), m.end()
        words = list(re.finditer(r"\S+", m.group(0)))
        while words and words[0].group(0).lower() in _LEADING_WORDS:
            words.pop(0)
        while words and words[-1].group(0).lower() in _LEADING_WORDS:
            words.pop()
        if not words:
            continue
        start, end = m.start() + words[0].start(), m.start() + words[-1].end()
        name = text[start:end]
        if len(words) == 1:
            word = words[0].group(0)
            if start == sentence_start and not (word.isupper() and len(word) > 1):
                continue  # capitalised because it starts the sentence
            if len(word) == 1 or word.lower() in _MONTHS:
                continue
        if any(a < end and start < b for a, b in taken):
            continue
        out.append(Claim(name, "name", start, end))
    return out


def _chinese_claims(text: str, taken: list[tuple[int, int]]) -> list[Claim]:
    """Names (nr/ns/nt) and numeral words in the Han parts of ``text`` (jieba POS)."""
    from swrag_integrations.keyword.bm25 import _get_jieba

    _get_jieba()
    import jieba.posseg as pseg

    out = []
    pos = 0
    for pair in pseg.lcut(text, HMM=True):
        word, flag = pair.word, pair.flag
        start = text.find(word, pos)  # jieba's pieces tile the text in order
        if start < 0:
            continue
        end = start + len(word)
        pos = end
        if any(a < end and start < b for a, b in taken):
            continue
        if flag in _CN_NAME_FLAGS and len(word) >= 2 and _HAN_RE.search(word):
            out.append(Claim(word, "name", start, end))
        elif flag in ("m", "mq") and word not in _CN_NOT_NUMBERS:
            claim = _chinese_number(word, start)
            if claim is not None:
                out.append(claim)
    return out


def _chinese_number(word: str, start: int) -> Claim | None:
    offset = 0
    for prefix in ("百分之", "第"):
        if word.startswith(prefix):
            offset = len(prefix)
            break
    run = _CN_RUN.match(word, offset)
    if run is None:
        return None
    value = chinese_numeral_value(run.group(0))
    if value is None or (value < 2 and not offset):
        return None
    return Claim(run.group(0), "number", start + run.start(), start + run.end())


def extract_claims(text: str) -> list[Claim]:
    """Numbers, dates and names in ``text``, in text order, without overlaps (dates
    first, then numbers, then names). Offsets are into ``text``.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    claims: list[Claim] = []
    taken: list[tuple[int, int]] = []

    def add(claim: Claim) -> None:
        claims.append(claim)
        taken.append((claim.start, claim.end))

    norm = unicodedata.normalize("NFKC", text) if len(unicodedata.normalize("NFKC", text)) == len(text) else None
    scan = norm if norm is not None else text
    for m in _DATE.finditer(scan):
        add(Claim(text[m.start():m.end()], "date", m.start(), m.end()))
    for m in _ARABIC.finditer(scan):
        if any(a < m.end() and m.start() < b for a, b in taken):
            continue
        raw = m.group(0)
        kind: ClaimKind = "date" if re.fullmatch(r"1\d{3}|20\d{2}|2100", raw) else "number"
        add(Claim(text[m.start():m.end()], kind, m.start(), m.end()))
    for m in _WORD_NUMBER.finditer(text):
        value = _word_number_value(m.group(0))
        if value is None or value < 2 or any(a < m.end() and m.start() < b for a, b in taken):
            continue
        add(Claim(m.group(0), "number", m.start(), m.end()))
    for claim in _english_names(text, taken):
        add(claim)
    if _HAN_RE.search(text):
        for claim in _chinese_claims(text, taken):
            add(claim)
    claims.sort(key=lambda c: c.start)
    return claims


# ------------------------------------------------------------------------ context


class ContextFacts:
    """A context indexed once for `supports`.

    Args:
        texts: the context passages (and, if wanted, the question: what the question
            says is given, not invented by the answer).
    """

    def __init__(self, texts: Iterable[str]) -> None:
        texts = [t for t in texts if t]
        joined = "\n".join(texts)
        self.numbers: set[float] = number_values(joined)
        self.folded = " ".join(unicodedata.normalize("NFKC", joined).casefold().split())
        self.words = {w.lower() for w in _WORD.findall(joined)}
        self.months = {_MONTHS[m.group(0).lower().rstrip(".")] for m in _MONTH_WORD.finditer(joined)}
        for m in _CN_MONTH.finditer(unicodedata.normalize("NFKC", joined)):
            raw = m.group(1)
            self.months.add(int(raw) if raw.isdigit() else (chinese_numeral_value(raw) or 0))

    def _has_text(self, text: str) -> bool:
        """``text`` occurs in the context (case-folded; a digit at either end must not
        continue a longer number there: "20" is not in "2003")."""
        folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
        if not folded:
            return False
        if not (folded[0].isdigit() or folded[-1].isdigit()):
            return folded in self.folded
        left = r"(?<![\d.,])" if folded[0].isdigit() else ""
        right = r"(?![\d])" if folded[-1].isdigit() else ""
        return re.search(left + re.escape(folded) + right, self.folded) is not None

    def supports(self, claim: Claim) -> bool:
        """Does the context hold ``claim`` (see the module docstring)?"""
        if claim.kind == "number":
            values = number_values(claim.text)
            return bool(values) and values <= self.numbers or self._has_text(claim.text)
        if claim.kind == "date":
            if self._has_text(claim.text):
                return True
            numbers, months = _date_parts(claim.text)
            return numbers <= self.numbers and months <= self.months and bool(numbers or months)
        if _HAN_RE.search(claim.text):
            return self._has_text(claim.text)
        words = [w.lower() for w in _WORD.findall(claim.text)]
        if len(words) == 1:
            return words[0] in self.words
        return self._has_text(claim.text) or all(
            w in self.words for w in words if w not in _LEADING_WORDS and len(w) > 1
        )
