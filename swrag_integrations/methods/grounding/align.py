"""Align answer sentences to the retrieved context: the grounding checker.

`GroundingChecker` (and the shortcut `ground_answer`) takes an answer and
the retrieved passages and returns a `GroundedAnswer`:

1. The answer is split into sentences (`split_sentences`), each
   passage into units (sentences, long ones cut at clause punctuation:
   `split_units`) whose offsets are exact sub-spans of the passage,
   hence of its source (``passage start + unit offset``).
2. A sentence's *items* are its content tokens (`tokenize`:
   lower case, stopwords dropped, jieba for Chinese; English inflections ``-s/-es/-ed/-ing/-ly``
   folded) plus, for Chinese, its Han character bigrams (jieba may cut the answer and
   the context differently). A unit covers an item when it has the same token / bigram.
3. Supports are chosen greedily: the unit covering most items, then units adding at
   least ``min_gain`` of the items still uncovered, up to ``max_supports``. The
   sentence's lexical score is the share of items the supports cover together; a
   sentence that occurs verbatim in a passage is supported by exactly that occurrence
   (score 1). With ``embeddings`` (any LangChain ``Embeddings``, e.g. the bundled
   MiniLM) the score is ``(1 - w) * lexical + w * cosine`` of the best unit.
4. Claims (`claims`): numbers, dates and names of the sentence that occur nowhere
   in the context (nor in the ``question``, when given) are unsupported claims.
5. A sentence is supported when its score reaches ``threshold`` and it has no
   unsupported claim; ``supported`` is ``None`` for a sentence without content words
   or claims ("Yes."). An optional `LLMJudge` then decides for each
   checked sentence; when its output cannot be parsed (or it raises), the lexical
   verdict stays and the failure is counted.

Passages may be LangChain ``Document`` s (``source_id``/``source``, ``start_index``,
``end_index`` metadata), `ContextSpan` s,
dicts such as the chain's ``sources`` entries (``source``, ``source_id``, ``start_index``,
``end_index``, ``text``), ``(source_id, start, end, text)`` tuples or plain strings. A
passage without usable offsets is still used, its supports carry ``start_index=None``
and the result says so in ``warnings``. Duplicate passages and repeated units (the same
source offsets from overlapping windows) are aligned once, and citations are one per
distinct span.

Cost: one tokenisation of the context and of the answer, then set look-ups (a few ms
per answer; jieba's POS model loads once per process, about 1-4 s, when a Chinese answer
is first checked for names).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from swrag_integrations.core.lang import HAN
from swrag_integrations.methods.grounding.claims import Claim, ContextFacts, extract_claims
from swrag_integrations.methods.grounding.result import Citation, GroundedAnswer, SentenceGrounding, Support
from swrag_integrations.methods.grounding.sentences import Sentence, split_sentences, split_units

__all__ = ["GroundingChecker", "ground_answer", "groundedness", "Passage", "to_passages", "META_WORDS"]

_HAN_RUN = re.compile(f"[{HAN}]+")
_INFLECTION = re.compile(r"(?<=[a-z]{3})(?:ies|es|s|ed|ing|ly)$")
_TRAILING = re.compile(r"[\s.。!！?？…;；,，:：\"'”’)）」』】\]]+$")


def _fold(token: str) -> str:
    """English inflection folding (``masons`` -> ``mason``, ``powered`` -> ``power``)."""
    if token.isascii() and token.isalpha() and len(token) > 4:
        return _INFLECTION.sub("", token)
    return token


# Words about the answering itself ("Based on the context, ...", "根据上下文") and bare
# yes/no: never evidence of anything, so not items to align.
META_WORDS = frozenset(
    """yes no not sure answer answers question questions context text passage passages document documents
    based according mentioned mention mentions provided given following information states stated say says
    根据 上下文 文中 文章 提到 提供 回答 问题 答案 信息 以下 所述 可以 没有 不是""".split()
)


def _tokens(text: str) -> list[str]:
    from swrag_integrations.keyword.bm25 import tokenize

    return list(dict.fromkeys(_fold(t) for t in tokenize(text) if t not in META_WORDS))


def _bigrams(text: str) -> list[str]:
    out: dict[str, None] = {}
    for run in _HAN_RUN.findall(text):
        for i in range(len(run) - 1):
            out.setdefault(run[i : i + 2], None)
    return list(out)


@dataclass(frozen=True)
class Passage:
    """A retrieved passage: ``text == source_text[start:end]`` when ``start`` is not ``None``."""

    source: str
    source_id: str | None
    start: int | None
    end: int | None
    text: str

    @property
    def key(self) -> tuple:
        return (self.source_id or self.source, self.start, self.end) if self.start is not None else (
            self.source_id or self.source, None, None, self.text)


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number == value or isinstance(value, str) else None


def _passage(item: Any, position: int, warnings: list[str]) -> Passage | None:
    label = f"passage {position + 1}"
    if isinstance(item, str):
        text, meta = item, {}
    elif hasattr(item, "page_content") and hasattr(item, "metadata"):  # LangChain Document
        text, meta = item.page_content, dict(item.metadata or {})
    elif all(hasattr(item, a) for a in ("source_id", "start", "end", "text")):  # ContextSpan
        text = item.text
        meta = {"source_id": item.source_id, "start_index": item.start, "end_index": item.end,
                **{k: v for k, v in (getattr(item, "metadata", None) or {}).items() if k == "source"}}
    elif isinstance(item, dict):
        text = item.get("text", item.get("page_content"))
        meta = dict(item.get("metadata") or {})
        meta.update({k: v for k, v in item.items() if k not in ("text", "page_content", "metadata")})
        if "start_index" not in meta and "start" in meta:
            meta["start_index"], meta["end_index"] = meta.get("start"), meta.get("end")
    elif isinstance(item, (tuple, list)) and len(item) == 4:
        sid, start, end, text = item
        meta = {"source_id": sid, "start_index": start, "end_index": end}
    else:
        raise TypeError(
            "sources must be Documents, ContextSpans, dicts with 'text', (source_id, start, end, text) tuples or "
            f"strings; {label} is a {type(item).__name__}"
        )
    if not isinstance(text, str):
        raise TypeError(f"{label}: its text must be a str, got {type(text).__name__}")
    if not text.strip():
        return None
    source_id = meta.get("source_id")
    source = meta.get("source", source_id)
    source_id = None if source_id is None else str(source_id)
    source = str(source) if source is not None else f"passage {position + 1}"
    start = _int_or_none(meta.get("start_index"))
    end = _int_or_none(meta.get("end_index")) if meta.get("end_index") is not None else None
    if start is not None and end is None:
        end = start + len(text)
    if start is None or end is None:
        warnings.append(f"{label} ({source}) has no start_index/end_index: its supports carry no source offsets")
        start = end = None
    elif start < 0 or end - start != len(text):
        warnings.append(
            f"{label} ({source}): offsets {meta.get('start_index')}-{meta.get('end_index')} do not match its "
            f"text ({len(text)} characters): its supports carry no source offsets"
        )
        start = end = None
    return Passage(source, source_id, start, end, text)


def to_passages(sources: Any) -> tuple[list[Passage], list[str]]:
    """Normalise retrieved sources to `Passage` s (duplicates dropped) and warnings.

    Raises:
        TypeError: ``sources`` is not an iterable of supported items.
    """
    if sources is None:
        return [], []
    if isinstance(sources, (str, dict)) or hasattr(sources, "page_content"):
        sources = [sources]
    if not isinstance(sources, Iterable):
        raise TypeError(f"sources must be a list of passages, got {type(sources).__name__}")
    warnings: list[str] = []
    out: dict[tuple, Passage] = {}
    for i, item in enumerate(sources):
        passage = _passage(item, i, warnings)
        if passage is not None:
            out.setdefault(passage.key, passage)
    return list(out.values()), warnings


@dataclass
class _Unit:
    passage: Passage
    start: int  # in the passage
    end: int
    text: str
    tokens: frozenset[str]
    bigrams: frozenset[str]

    def support(self, score: float) -> Support:
        p = self.passage
        if p.start is None:
            return Support(p.source, p.source_id, None, None, score, self.text)
        return Support(p.source, p.source_id, p.start + self.start, p.start + self.end, score, self.text)


class GroundingChecker:
    """Ties answer sentences to exact source spans and flags what the context lacks.

    Args:
        threshold: lowest score (0-1) of a supported sentence (default 0.6).
        max_supports: most units cited for one sentence (default 3).
        min_gain: share of a sentence's items a further support must add (default 0.15).
        check_claims: flag numbers, dates and names missing from the context (default True).
        embeddings: optional LangChain ``Embeddings`` mixed into the score.
        embedding_weight: ``w`` of ``(1 - w) * lexical + w * cosine`` (default 0.5).
        judge: optional `LLMJudge` (or any ``(sentence, context) ->
            bool | None``) that decides each checked sentence.
        unit_chars: longest context unit in characters (default 300).

    Raises:
        ValueError: a parameter is out of range (the message names it).
        TypeError: ``embeddings`` is not a LangChain ``Embeddings``, or ``judge`` is not callable.
    """

    def __init__(
        self,
        *,
        threshold: float = 0.6,
        max_supports: int = 3,
        min_gain: float = 0.15,
        check_claims: bool = True,
        embeddings: Any = None,
        embedding_weight: float = 0.5,
        judge: Callable[[str, str], bool | None] | None = None,
        unit_chars: int = 300,
    ) -> None:
        if not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
        if not isinstance(max_supports, int) or isinstance(max_supports, bool) or max_supports < 1:
            raise ValueError(f"max_supports must be an int >= 1, got {max_supports!r}")
        if not isinstance(min_gain, (int, float)) or not 0.0 <= min_gain <= 1.0:
            raise ValueError(f"min_gain must be a number in [0, 1], got {min_gain!r}")
        if not isinstance(embedding_weight, (int, float)) or not 0.0 <= embedding_weight <= 1.0:
            raise ValueError(f"embedding_weight must be a number in [0, 1], got {embedding_weight!r}")
        if embeddings is not None and not hasattr(embeddings, "embed_documents"):
            raise TypeError(f"embeddings must be a LangChain Embeddings, got {type(embeddings).__name__}")
        if judge is not None and not callable(judge):
            raise TypeError(f"judge must be callable (sentence, context) -> bool | None, got {type(judge).__name__}")
        if not isinstance(unit_chars, int) or isinstance(unit_chars, bool) or unit_chars < 20:
            raise ValueError(f"unit_chars must be an int >= 20, got {unit_chars!r}")
        self.threshold = float(threshold)
        self.max_supports = max_supports
        self.min_gain = float(min_gain)
        self.check_claims = bool(check_claims)
        self.embeddings = embeddings
        self.embedding_weight = float(embedding_weight) if embeddings is not None else 0.0
        self.judge = judge
        self.unit_chars = unit_chars

    @property
    def method(self) -> str:
        parts = ["lexical"]
        if self.embeddings is not None:
            parts.append("embeddings")
        if self.judge is not None:
            parts.append("llm-judge")
        return "+".join(parts)

    # ------------------------------------------------------------------ units

    def _units(self, passages: Sequence[Passage]) -> list[_Unit]:
        units: list[_Unit] = []
        seen: set[tuple] = set()
        for p in passages:
            for piece in split_units(p.text, self.unit_chars):
                if p.start is not None:
                    key: tuple = (p.source_id or p.source, p.start + piece.start, p.start + piece.end)
                else:
                    key = (p.source_id or p.source, piece.text)
                if key in seen:
                    continue  # the same source text from an overlapping window
                seen.add(key)
                units.append(_Unit(p, piece.start, piece.end, piece.text,
                                   frozenset(_tokens(piece.text)), frozenset(_bigrams(piece.text))))
        return units

    # ------------------------------------------------------------------ check

    def check(self, answer: Any, sources: Any, *, question: str | None = None) -> GroundedAnswer:
        """Ground ``answer`` (a ``str``; ``None`` counts as empty) in ``sources``.

        Never raises for empty answers or contexts: the result then has no sentences, or
        every sentence unsupported with the reason ``"no context"``, and a warning.

        Raises:
            TypeError: ``answer`` is not a ``str``/``None``, or ``sources`` holds an
                unsupported item.
        """
        t0 = time.perf_counter()
        if answer is None:
            answer = ""
        if not isinstance(answer, str):
            raise TypeError(f"answer must be a str, got {type(answer).__name__}")
        if question is not None and not isinstance(question, str):
            raise TypeError(f"question must be a str or None, got {type(question).__name__}")
        passages, warnings = to_passages(sources)
        sentences = split_sentences(answer)
        if not sentences:
            warnings.append("the answer is empty: nothing to ground")
        if not passages:
            warnings.append("no context: no sentence can be supported")
        units = self._units(passages)
        facts = ContextFacts([p.text for p in passages] + ([question] if question else [])) if (
            self.check_claims and sentences) else None
        vectors = self._unit_vectors(units) if (self.embeddings is not None and units and sentences) else None
        sentence_vectors = (self.embeddings.embed_documents([s.text for s in sentences])
                            if vectors is not None else None)
        results = []
        for i, sent in enumerate(sentences):
            svec = sentence_vectors[i] if sentence_vectors is not None else None
            results.append(self._sentence(sent, passages, units, facts, vectors, svec))
        judge_calls = judge_failures = 0
        if self.judge is not None:
            for sent, result in zip(sentences, results):
                if result.supported is None or not units:
                    continue
                judge_calls += 1
                verdict = self._judge(sent.text, self._judge_context(sent, units))
                if verdict is None:
                    judge_failures += 1
                    continue
                result.judge = "yes" if verdict else "no"
                result.supported = verdict
                if not verdict and "llm_judge" not in result.reasons:
                    result.reasons.append("llm_judge")
        citations = _number_citations(results, self.threshold)
        return GroundedAnswer(
            answer=answer, sentences=results, citations=citations, threshold=self.threshold, method=self.method,
            warnings=warnings, judge_calls=judge_calls, judge_failures=judge_failures,
            seconds=time.perf_counter() - t0,
        )

    __call__ = check

    def _judge(self, sentence: str, context: str) -> bool | None:
        try:
            verdict = self.judge(sentence, context)  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - a failing judge is counted, never fatal
            return None
        return verdict if isinstance(verdict, bool) else None

    def _judge_context(self, sent: Sentence, units: Sequence[_Unit], limit: int = 2000) -> str:
        items = self._items(sent.text)
        ranked = sorted(range(len(units)), key=lambda j: -len(self._covered(items, units[j])))
        picked: list[int] = []
        size = 0
        for j in ranked[:8]:
            if size + len(units[j].text) > limit and picked:
                break
            picked.append(j)
            size += len(units[j].text)
        return "\n".join(units[j].text for j in sorted(picked))

    def _unit_vectors(self, units: Sequence[_Unit]) -> list[list[float]]:
        return self.embeddings.embed_documents([u.text for u in units])

    @staticmethod
    def _items(text: str) -> tuple[list[str], list[str]]:
        return _tokens(text), _bigrams(text)

    @staticmethod
    def _covered(items: tuple[list[str], list[str]], unit: _Unit) -> set[int]:
        tokens, bigrams = items
        covered = {i for i, t in enumerate(tokens) if t in unit.tokens}
        offset = len(tokens)
        covered.update(offset + i for i, b in enumerate(bigrams) if b in unit.bigrams)
        return covered

    def _sentence(self, sent: Sentence, passages, units, facts, vectors, svec) -> SentenceGrounding:
        items = self._items(sent.text)
        total = len(items[0]) + len(items[1])
        claims: list[Claim] = extract_claims(sent.text) if facts is not None else []
        unsupported = [Claim(c.text, c.kind, sent.start + c.start, sent.start + c.end)
                       for c in claims if not facts.supports(c)]
        reasons: list[str] = []
        if total == 0 and not claims:
            return SentenceGrounding(sent.text, sent.start, sent.end, None, None, reasons=["nothing to check"])
        if not units:
            return SentenceGrounding(sent.text, sent.start, sent.end, False, 0.0, [], unsupported,
                                     reasons=["no context"] + (["unsupported_claims"] if unsupported else []))
        quote = self._quote(sent, passages)
        if quote is not None:
            supports, score = [quote], 1.0
        else:
            supports, score = self._supports(items, total, units, vectors, svec)
        if score < self.threshold:
            reasons.append("low_support")
        if unsupported:
            reasons.append("unsupported_claims")
        return SentenceGrounding(sent.text, sent.start, sent.end, not reasons, score, supports, unsupported,
                                 reasons=reasons)

    @staticmethod
    def _quote(sent: Sentence, passages: Sequence[Passage]) -> Support | None:
        core = _TRAILING.sub("", sent.text)
        if len(core) < 8:
            return None
        for quote in dict.fromkeys((sent.text, core)):  # with its final punctuation if the context has it
            for p in passages:
                at = p.text.find(quote)
                if at >= 0:
                    start = None if p.start is None else p.start + at
                    end = None if p.start is None else p.start + at + len(quote)
                    return Support(p.source, p.source_id, start, end, 1.0, quote)
        return None

    def _supports(self, items, total, units, vectors, svec) -> tuple[list[Support], float]:
        w = self.embedding_weight
        covers = [self._covered(items, u) for u in units] if total else [set() for _ in units]
        cosines = [_cosine(svec, v) for v in vectors] if vectors is not None else [0.0] * len(units)
        unit_scores = [((1 - w) * len(c) / total if total else 0.0) + w * max(cos, 0.0)
                       for c, cos in zip(covers, cosines)]
        first = max(range(len(units)), key=lambda j: (unit_scores[j], -j))
        chosen = [first]
        covered = set(covers[first])
        need = max(1, math.ceil(self.min_gain * total)) if total else 1
        while total and len(chosen) < self.max_supports and len(covered) < total:
            gains = [(len(covers[j] - covered), unit_scores[j], -j) for j in range(len(units)) if j not in chosen]
            if not gains:
                break
            gain, _, neg_j = max(gains)
            if gain < need:
                break
            chosen.append(-neg_j)
            covered |= covers[-neg_j]
        lexical = len(covered) / total if total else 0.0
        score = (1 - w) * lexical + w * max(cosines[first], 0.0) if vectors is not None else lexical
        supports = [units[j].support(unit_scores[j]) for j in chosen if unit_scores[j] > 0]
        supports.sort(key=lambda s: (str(s.source_id or s.source), s.start_index or 0))
        return supports, score


def _cosine(a: Sequence[float] | None, b: Sequence[float]) -> float:
    if a is None:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def _number_citations(results: Sequence[SentenceGrounding], threshold: float) -> list[Citation]:
    """Number the distinct spans cited by sentences that reach ``threshold`` (first use first)."""
    numbers: dict[tuple, int] = {}
    citations: list[Citation] = []
    for result in results:
        if result.score is None or result.score < threshold:
            continue
        for s in result.supports:
            if s.key not in numbers:
                numbers[s.key] = len(numbers) + 1
                citations.append(Citation(numbers[s.key], s.source, s.source_id, s.start_index, s.end_index, s.text))
            if numbers[s.key] not in result.citations:
                result.citations.append(numbers[s.key])
    return citations


def ground_answer(answer: Any, sources: Any, *, question: str | None = None, **options: Any) -> GroundedAnswer:
    """Ground ``answer`` in ``sources``: ``GroundingChecker(**options).check(answer, sources, question=question)``.

    Args:
        answer: The answer text (or an object with one, as `GroundingChecker.check` takes).
        sources: The retrieved passages (documents, nodes, spans or dicts with offsets).
        question: The question; its words count as given, not invented.
        **options: `GroundingChecker` settings (``threshold``, ``embeddings``, ``judge``...).

    Returns:
        The `GroundedAnswer`: each sentence's supports, score and flagged claims.
    """
    return GroundingChecker(**options).check(answer, sources, question=question)


def groundedness(answer: Any, context_spans: Any, *, question: str | None = None,
                 checker: GroundingChecker | None = None) -> dict[str, Any]:
    """Groundedness figures of one answer, for ``swrag eval`` records.

    Returns ``{"sentences", "checked", "supported", "supported_share", "flagged",
    "unsupported_numbers", "unsupported_dates", "unsupported_names",
    "unsupported_claims" (their texts), "seconds"}``; ``supported_share`` is ``None``
    when no sentence could be checked (e.g. an empty answer).
    """
    result = (checker or GroundingChecker()).check(answer, context_spans, question=question)
    claims = result.unsupported_claims
    checked = result.checked
    return {
        "sentences": len(result.sentences),
        "checked": len(checked),
        "supported": sum(1 for s in checked if s.supported),
        "supported_share": result.supported_share,
        "flagged": len(result.flagged),
        "unsupported_numbers": sum(1 for c in claims if c.kind == "number"),
        "unsupported_dates": sum(1 for c in claims if c.kind == "date"),
        "unsupported_names": sum(1 for c in claims if c.kind == "name"),
        "unsupported_claims": [c.text for c in claims],
        "seconds": result.seconds,
    }
