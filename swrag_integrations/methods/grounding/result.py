"""The structured result of grounding an answer, its JSON form and its text rendering.

* `Support`: an exact sub-span of a retrieved source span that supports (part of)
  an answer sentence: ``source``, ``source_id``, ``start_index``, ``end_index`` (source
  offsets; ``None`` when the retrieved passage came without offsets), ``score``,
  ``text``.
* `SentenceGrounding`: one answer sentence with its offsets in the answer,
  ``supported`` (``None``: nothing to check, e.g. "Yes."), ``score``, ``supports``,
  ``unsupported_claims``, ``citations`` (numbers into `GroundedAnswer.citations`)
  and ``reasons`` (why it is not supported).
* `GroundedAnswer`: all sentences, the de-duplicated `Citation` list (one
  entry per distinct span, numbered 1, 2, ... in order of first use), the share of
  supported sentences, warnings (e.g. passages without offsets), the optional LLM
  judge's counts, `to_dict`/`to_json` and
  `render` (inline ``[1]`` markers, visible marks for
  unsupported sentences and claims).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from swrag_integrations.methods.grounding.claims import Claim

__all__ = ["Support", "Citation", "SentenceGrounding", "GroundedAnswer", "UNSUPPORTED_MARK"]

UNSUPPORTED_MARK = "[not supported]"
_CJK_END = re.compile("[\u3000-\u303f\uff00-\uffef\u3400-\u9fff]$")


@dataclass(frozen=True)
class Support:
    """A supporting span; ``text == source_text[start_index:end_index]`` when offsets are known."""

    source: str
    source_id: str | None
    start_index: int | None
    end_index: int | None
    score: float
    text: str

    @property
    def key(self) -> tuple:
        """Identity of the span (what citations are de-duplicated by)."""
        if self.start_index is None:
            return (self.source_id or self.source, None, None, self.text)
        return (self.source_id or self.source, self.start_index, self.end_index)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "source_id": self.source_id,
            "start_index": self.start_index,
            "end_index": self.end_index,
            "score": round(self.score, 4),
            "text": self.text,
        }


@dataclass(frozen=True)
class Citation:
    """One distinct cited span, numbered from 1 in order of first use."""

    number: int
    source: str
    source_id: str | None
    start_index: int | None
    end_index: int | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "source": self.source,
            "source_id": self.source_id,
            "start_index": self.start_index,
            "end_index": self.end_index,
            "text": self.text,
        }

    def label(self) -> str:
        """``name start-end`` (the file name of a path-like source)."""
        name = PurePath(str(self.source)).name or str(self.source)
        if self.start_index is None:
            return f"{name} (no offsets)"
        return f"{name} {self.start_index}-{self.end_index}"


@dataclass
class SentenceGrounding:
    """One answer sentence: ``text == answer[start:end]``."""

    text: str
    start: int
    end: int
    supported: bool | None
    score: float | None
    supports: list[Support] = field(default_factory=list)
    unsupported_claims: list[Claim] = field(default_factory=list)
    citations: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    judge: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "supported": self.supported,
            "score": None if self.score is None else round(self.score, 4),
            "supports": [s.to_dict() for s in self.supports],
            "citations": list(self.citations),
            "unsupported_claims": [c.to_dict() for c in self.unsupported_claims],
            "reasons": list(self.reasons),
            "judge": self.judge,
        }


@dataclass
class GroundedAnswer:
    """An answer tied to its sources (see the module docstring).

    Attributes:
        answer: The answer text.
        sentences: Each answer sentence with its supports, score and claims.
        citations: The distinct numbered citations the sentences point to.
        threshold: The lowest score of a supported sentence.
        method: How sentences were scored: ``"lexical"``, with ``"+embeddings"`` and/or
            ``"+llm-judge"`` when those were used.
        warnings: What limited the check (an empty answer, no context, sources without
            offsets).
        judge_calls: Calls made to the LLM judge.
        judge_failures: Judge calls that failed or gave no readable verdict.
        seconds: Time the check took.
    """

    answer: str
    sentences: list[SentenceGrounding]
    citations: list[Citation]
    threshold: float
    method: str = "lexical"
    warnings: list[str] = field(default_factory=list)
    judge_calls: int = 0
    judge_failures: int = 0
    seconds: float = 0.0

    @property
    def checked(self) -> list[SentenceGrounding]:
        """Sentences with something to check (``supported`` is not ``None``)."""
        return [s for s in self.sentences if s.supported is not None]

    @property
    def supported_share(self) -> float | None:
        """Share of checked sentences that are supported; ``None`` when none was checked."""
        checked = self.checked
        return sum(1 for s in checked if s.supported) / len(checked) if checked else None

    @property
    def unsupported_claims(self) -> list[Claim]:
        """All unsupported claims, in answer order (offsets into the answer)."""
        return [c for s in self.sentences for c in s.unsupported_claims]

    @property
    def flagged(self) -> list[SentenceGrounding]:
        """Sentences that are not supported."""
        return [s for s in self.sentences if s.supported is False]

    def _repr_html_(self) -> str | None:
        """Jupyter: each sentence linked to its supporting spans, once
        `swrag_integrations.view` is imported (it registers the view), else ``None``."""
        from swrag_integrations.core.display import html_of

        return html_of("answer", self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (offsets in the answer are Python string indices)."""
        checked = self.checked
        return {
            "answer": self.answer,
            "method": self.method,
            "threshold": self.threshold,
            "sentences": [s.to_dict() for s in self.sentences],
            "citations": [c.to_dict() for c in self.citations],
            "n_sentences": len(self.sentences),
            "n_checked": len(checked),
            "n_supported": sum(1 for s in checked if s.supported),
            "supported_share": self.supported_share,
            "unsupported_claims": [c.to_dict() for c in self.unsupported_claims],
            "warnings": list(self.warnings),
            "judge_calls": self.judge_calls,
            "judge_failures": self.judge_failures,
            "seconds": round(self.seconds, 6),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GroundedAnswer":
        """The inverse of `to_dict` (e.g. for a chain output's ``"grounding"``).

        Raises:
            ValueError: ``data`` lacks ``answer``/``sentences``/``citations``.
        """
        if not isinstance(data, dict) or not all(k in data for k in ("answer", "sentences", "citations")):
            raise ValueError("data must be a dict from GroundedAnswer.to_dict() (answer, sentences, citations)")

        def claim(c: dict) -> Claim:
            return Claim(c["text"], c["kind"], c["start"], c["end"])

        sentences = [
            SentenceGrounding(
                text=s["text"], start=s["start"], end=s["end"], supported=s["supported"], score=s["score"],
                supports=[Support(**{k: v[k] for k in ("source", "source_id", "start_index", "end_index", "score",
                                                       "text")}) for v in s.get("supports", [])],
                unsupported_claims=[claim(c) for c in s.get("unsupported_claims", [])],
                citations=list(s.get("citations", [])), reasons=list(s.get("reasons", [])), judge=s.get("judge"),
            )
            for s in data["sentences"]
        ]
        citations = [Citation(**{k: c[k] for k in ("number", "source", "source_id", "start_index", "end_index",
                                                  "text")}) for c in data["citations"]]
        return cls(answer=data["answer"], sentences=sentences, citations=citations,
                   threshold=data.get("threshold", 0.0), method=data.get("method", "lexical"),
                   warnings=list(data.get("warnings", [])), judge_calls=data.get("judge_calls", 0),
                   judge_failures=data.get("judge_failures", 0), seconds=data.get("seconds", 0.0))

    def to_json(self, **kwargs: Any) -> str:
        """`to_dict` as JSON (``ensure_ascii=False`` unless given)."""
        kwargs.setdefault("ensure_ascii", False)
        return json.dumps(self.to_dict(), **kwargs)

    def render(self, *, sources: bool = True, width: int = 100, mark: str = UNSUPPORTED_MARK) -> str:
        """The answer with ``[n]`` after each supported sentence, ``mark`` after each
        unsupported one, unsupported claims listed after their sentence, then (with
        ``sources``) the numbered citations and a one-line summary."""
        parts: list[str] = []
        pos = 0
        for s in self.sentences:
            parts.append(self.answer[pos:s.end])
            pos = s.end
            tags = "".join(f"[{n}]" for n in s.citations)
            if s.supported is False:
                tags += (" " if tags else "") + mark
                if s.unsupported_claims:
                    tags += " (unsupported: " + ", ".join(c.text for c in s.unsupported_claims) + ")"
            if tags:
                parts.append(tags if _CJK_END.search(s.text) else " " + tags)
        parts.append(self.answer[pos:])
        lines = ["".join(parts).strip() or "(empty answer)"]
        if sources:
            for c in self.citations:
                text = " ".join(c.text.split())
                if len(text) > width:
                    text = text[: width - 3] + "..."
                lines.append(f"  [{c.number}] {c.label()}: {text}")
            lines.append("  " + self.summary())
            lines.extend(f"  warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    def summary(self) -> str:
        """``grounding: 2/3 sentences supported; unsupported claims: 60, 1989``."""
        checked = self.checked
        n_ok = sum(1 for s in checked if s.supported)
        text = f"grounding: {n_ok}/{len(checked)} sentences supported"
        claims = self.unsupported_claims
        if claims:
            text += "; unsupported claims: " + ", ".join(dict.fromkeys(c.text for c in claims))
        if self.judge_calls:
            text += f"; LLM judge {self.judge_calls} calls, {self.judge_failures} unparsed"
        return text
