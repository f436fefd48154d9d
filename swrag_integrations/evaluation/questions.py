"""Coarse question features the misses report and the adaptive lever reads (one definition each).

* `question_type`: a type guess from cue words (Chinese or English).
* `multi_hop_cue`: an English question that names one thing through another (a
  relative clause: "the King who made the 1925 Birthday Honours") or compares two
  ("both", "same", "older"): its answer needs more than one passage.
"""

from __future__ import annotations

import re

from swrag_integrations.core.lang import contains_cjk

__all__ = ["question_type", "multi_hop_cue", "QUESTION_TYPES"]

_EN_TYPES = (  # first match wins; on the question lower-cased
    ("yes/no", re.compile(r"^(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b")),
    ("number", re.compile(r"\bhow (many|much|long|old|far|big)\b|\bwhat (year|percentage|number)\b")),
    ("when", re.compile(r"\bwhen\b|\bwhat (date|time|century)\b|\bin which year\b|\bwhich year\b")),
    ("who", re.compile(r"\bwho(m|se)?\b")),
    ("where", re.compile(r"\bwhere\b")),
    ("why/how", re.compile(r"\bwhy\b|\bhow\b")),
    ("what/which", re.compile(r"\bwhat\b|\bwhich\b")),
)
_ZH_TYPES = (
    ("yes/no", re.compile(r"吗[？?]?$|是否|可以.{0,8}吗|有没有")),
    ("number", re.compile(r"多少|几[个年次位种条方]|多[大长久高远]|比例|百分")),
    ("when", re.compile(r"什么时候|何时|哪一?年|哪个时期|什么时期|日期|哪一代")),
    ("who", re.compile(r"谁|哪位|什么人|哪些人")),
    ("where", re.compile(r"哪里|哪儿|什么地方|在哪|哪个[市省国]")),
    ("why/how", re.compile(r"为什么|为何|如何|怎么|怎样|什么原因")),
    ("what/which", re.compile(r"什么|哪|何")),
)
# comparison words, or a relative clause to resolve first ("the king who made ..."): the pronoun
# after the question's first word (a leading "who"/"which" asks, it does not relate)
_COMPARISON = re.compile(r"\b(both|same|either|neither|older|younger|earlier|later|longer|larger|taller|more|fewer)\b")
_RELATIVE = re.compile(r"\S+\s.*\b(who|whom|whose|which|that)\b")


QUESTION_TYPES = tuple(label for label, _ in _EN_TYPES) + ("other",)


def question_type(question: str) -> str:
    """A coarse type guess: ``yes/no``, ``number``, ``when``, ``who``, ``where``, ``why/how``,
    ``what/which`` or ``other`` (Chinese or English cue words)."""
    text = question.strip()
    rules = _ZH_TYPES if contains_cjk(text) else _EN_TYPES
    probe = text if contains_cjk(text) else text.lower()
    for label, pattern in rules:
        if pattern.search(probe):
            return label
    return "other"


def multi_hop_cue(question: str) -> bool:
    """An English multi-hop cue: a comparison word (both, same, older, ...) or a relative
    clause after the first word (``"the King who made ..."``). Never for Chinese text."""
    if contains_cjk(question):
        return False
    text = question.lower().strip()
    return bool(_COMPARISON.search(text) or _RELATIVE.match(text))
