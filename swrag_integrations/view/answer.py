"""An answer with its sources, as one HTML page.

With a grounding result each answer sentence is marked (supported: green line;
unsupported: red; nothing to check: dotted), its unsupported claims are highlighted,
and its citations ``[n]`` link to the supporting spans, drawn inside the retrieved
source spans: clicking one scrolls to its span and highlights it. Without one the page
shows the answer and the retrieved spans (sources only).

**Accepted grounding shape** (the ``to_dict()`` of the grounding module's result, or any
mapping of this shape; an object with ``to_dict()`` is converted)::

    {
      "answer": str,                    # optional; must equal the answer when given
      "sentences": [{
          "text": str,                  # answer[start:end]
          "start": int, "end": int,     # optional: found in the answer in order when missing
          "supported": bool | None,     # None: nothing to check (e.g. "Yes.")
          "score": float | None,
          "supports": [{"source": str, "source_id": str | None,
                        "start_index": int | None, "end_index": int | None,   # source offsets
                        "score": float, "text": str}],                        # text optional
          "unsupported_claims": [{"text": str, "kind": str, "start": int, "end": int}],  # answer offsets
          "reasons": [str],             # optional
      }],
      "unsupported_claims": [...],      # optional: claims not listed per sentence
      "citations": [{"number": int, "source": str, "source_id": str | None,
                     "start_index": int | None, "end_index": int | None}],    # optional numbering
    }

Sources are the retrieved spans: dicts ``{source, source_id, start_index, end_index,
text}`` (the ``"sources"`` of the RAG chain's output), LangChain Documents with that
metadata, or `ContextSpan` s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Mapping, Sequence

import numpy as np

from swrag_integrations.engine.trace import piece_span
from swrag_integrations.view.html import (View, check_range, coverage, fmt_int, label, merge_ranges, page, pieces_from_texts, render_doc,
                   text_at, text_html)

__all__ = ["AnswerView", "SourceSpan", "SupportSpan", "Sentence", "Claim"]


@dataclass(frozen=True)
class SourceSpan:
    """A retrieved span as the answer view draws it: ``text == source_text[start:end]``, or
    offsets ``None`` when unknown. Not `ContextSpan`
    (the package's one retrieved-span type, built from it where offsets exist) because the
    answer view also draws documents from any LangChain retriever, whose offsets may be
    unknown, and a ContextSpan always has exact offsets."""

    source: str
    source_id: str | None
    start: int | None
    end: int | None
    text: str

    @property
    def key(self) -> str:
        return str(self.source_id if self.source_id is not None else self.source)


@dataclass(frozen=True)
class SupportSpan:
    """A supporting span of a sentence (source offsets; ``None`` when unknown)."""

    source: str
    source_id: str | None
    start: int | None
    end: int | None
    score: float | None
    text: str | None

    @property
    def key(self) -> str:
        return str(self.source_id if self.source_id is not None else self.source)

    @property
    def ident(self) -> tuple:
        return (self.key, self.start, self.end) if self.start is not None else (self.key, None, None, self.text)


@dataclass(frozen=True)
class Claim:
    """An unsupported claim: ``text == answer[start:end]``."""

    text: str
    kind: str
    start: int
    end: int


@dataclass
class Sentence:
    """An answer sentence: ``text == answer[start:end]``."""

    text: str
    start: int
    end: int
    supported: bool | None
    score: float | None
    supports: list[SupportSpan] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _name(source: Any) -> str:
    return PurePath(str(source)).name or str(source)


def _int_or_none(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{what} must be an int or None, got {value!r}")
    return int(value)


def _source_span(item: Any, i: int) -> SourceSpan:
    what = f"source {i}"
    if hasattr(item, "page_content") and hasattr(item, "metadata"):  # a LangChain Document
        meta = item.metadata or {}
        source = meta.get("source", meta.get("source_id"))
        return SourceSpan(str(source), meta.get("source_id"), _int_or_none(meta.get("start_index"), what),
                          _int_or_none(meta.get("end_index"), what), item.page_content)
    if hasattr(item, "source_id") and hasattr(item, "start") and hasattr(item, "text"):  # ContextSpan
        source = (item.metadata or {}).get("source", item.source_id)
        return SourceSpan(str(source), item.source_id, int(item.start), int(item.end), item.text)
    if not isinstance(item, Mapping):
        raise TypeError(f"{what}: expected a dict, a Document or a ContextSpan, got {type(item).__name__}")
    text = item.get("text")
    if not isinstance(text, str):
        raise ValueError(f"{what}: 'text' must be a str")
    source = item.get("source", item.get("source_id"))
    if source is None:
        raise ValueError(f"{what}: needs 'source' or 'source_id'")
    start = _int_or_none(item.get("start_index"), f"{what} start_index")
    end = _int_or_none(item.get("end_index"), f"{what} end_index")
    if (start is None) != (end is None):
        raise ValueError(f"{what}: give both start_index and end_index or neither")
    if start is not None and end - start != len(text):
        raise ValueError(f"{what}: span {start}:{end} is {end - start} characters but its text has {len(text)}")
    return SourceSpan(str(source), None if item.get("source_id") is None else str(item.get("source_id")),
                      start, end, text)


def _support(item: Any, what: str) -> SupportSpan:
    source = _get(item, "source", _get(item, "source_id"))
    if source is None:
        raise ValueError(f"{what}: needs 'source' or 'source_id'")
    sid = _get(item, "source_id")
    start = _int_or_none(_get(item, "start_index"), f"{what} start_index")
    end = _int_or_none(_get(item, "end_index"), f"{what} end_index")
    if (start is None) != (end is None) or (start is not None and end < start):
        raise ValueError(f"{what}: bad offsets {start}:{end}")
    score = _get(item, "score")
    text = _get(item, "text")
    if text is not None and start is not None and len(text) != end - start:
        raise ValueError(f"{what}: span {start}:{end} is {end - start} characters but its text has {len(text)}")
    return SupportSpan(str(source), None if sid is None else str(sid), start, end,
                       None if score is None else float(score), text)


def _claim(item: Any, answer: str, within: tuple[int, int], what: str) -> Claim:
    text = _get(item, "text")
    if not isinstance(text, str) or not text:
        raise ValueError(f"{what}: 'text' must be a non-empty str")
    start = _int_or_none(_get(item, "start"), f"{what} start")
    if start is None:
        found = answer.find(text, within[0], within[1])
        if found < 0:
            raise ValueError(f"{what}: {text!r} does not occur in its sentence")
        start = found
    end = start + len(text)
    if answer[start:end] != text:
        raise ValueError(f"{what}: answer[{start}:{end}] is not {text!r}")
    if not within[0] <= start <= end <= within[1]:
        raise ValueError(f"{what}: {start}:{end} lies outside its sentence {within[0]}:{within[1]}")
    return Claim(text, str(_get(item, "kind", "claim")), start, end)


def normalise_grounding(grounding: Any, answer: str) -> list[Sentence]:
    """The sentences of a grounding result (see the module docstring for the shape)."""
    if hasattr(grounding, "to_dict") and not isinstance(grounding, Mapping):
        grounding = grounding.to_dict()
    if not isinstance(grounding, Mapping) or not isinstance(grounding.get("sentences"), Sequence):
        raise ValueError("grounding must be a mapping with a 'sentences' list (see swrag_integrations.view.answer)")
    if grounding.get("answer") is not None and grounding["answer"] != answer:
        raise ValueError("grounding['answer'] is not the answer being shown")
    sentences: list[Sentence] = []
    cursor = 0
    for i, s in enumerate(grounding["sentences"], 1):
        what = f"sentence {i}"
        text = _get(s, "text")
        if not isinstance(text, str):
            raise ValueError(f"{what}: 'text' must be a str")
        start = _int_or_none(_get(s, "start"), f"{what} start")
        if start is None:
            start = answer.find(text, cursor)
            if start < 0:
                raise ValueError(f"{what}: {text!r} does not occur in the answer after offset {cursor}")
        end = start + len(text)
        given_end = _int_or_none(_get(s, "end"), f"{what} end")
        if given_end is not None and given_end != end:
            raise ValueError(f"{what}: end {given_end} does not match its text ({start}+{len(text)})")
        check_range(start, end, len(answer), what)
        if answer[start:end] != text:
            raise ValueError(f"{what}: answer[{start}:{end}] is not its text {text!r}")
        if start < cursor:
            raise ValueError(f"{what}: sentences overlap or are out of order at offset {start}")
        cursor = end
        supports = [_support(x, f"{what} support {j}") for j, x in enumerate(_get(s, "supports") or [], 1)]
        claims = [_claim(c, answer, (start, end), f"{what} claim {j}")
                  for j, c in enumerate(_get(s, "unsupported_claims") or [], 1)]
        score = _get(s, "score")
        sentences.append(Sentence(text, start, end, _get(s, "supported"), None if score is None else float(score),
                                  supports, claims, [str(r) for r in _get(s, "reasons") or []]))
    listed = {(c.start, c.end) for s in sentences for c in s.claims}
    for j, c in enumerate(grounding.get("unsupported_claims") or [], 1):
        start = _int_or_none(_get(c, "start"), f"claim {j} start")
        text = _get(c, "text")
        home = None
        for s in sentences:
            if start is not None and s.start <= start < s.end:
                home = s
            elif start is None and isinstance(text, str) and text in s.text:
                home = s
            if home is not None:
                break
        if home is None:
            raise ValueError(f"unsupported claim {j} ({text!r}) lies in no sentence of the answer")
        claim = _claim(c, answer, (home.start, home.end), f"unsupported claim {j}")
        if (claim.start, claim.end) not in listed:
            home.claims.append(claim)
            listed.add((claim.start, claim.end))
    for s in sentences:
        s.claims.sort(key=lambda c: (c.start, -c.end))
        kept: list[Claim] = []
        for c in s.claims:  # nested or overlapping claims: keep the outer one
            if kept and c.start < kept[-1].end:
                continue
            kept.append(c)
        s.claims = kept
    return sentences


class AnswerView(View):
    """An answer with its sources; with a grounding result, each sentence linked to the
    spans that support it.

    Args:
        answer: the answer text, the RAG chain's output dict (``question``, ``answer``,
            ``sources`` and optionally ``grounding``), or a grounding result (an object
            with ``to_dict()`` or a mapping with ``sentences``).
        sources: the retrieved spans (see the module docstring); taken from ``answer``
            when it is a chain output.
        grounding: a grounding result of the shape in the module docstring.
        question: the question (header).
        source_texts: ``source_id -> full text``; needed only for supports that lie
            outside the retrieved spans and carry no text.
        source_bases: ``source_id -> source offset`` where a text of ``source_texts``
            starts (0 when absent; an index's joined record:
            `source_piece`).

    Raises:
        TypeError: the answer text is not a ``str``.
        ValueError: a span lies outside its source text, texts disagree at the same
            offsets, a sentence or claim is not where it says in the answer.
    """

    notebook_height = 680

    def __init__(self, answer: Any, sources: Sequence[Any] | None = None, *, grounding: Any = None,
                 question: str | None = None, source_texts: Mapping[str, str] | None = None,
                 source_bases: Mapping[str, int] | None = None):
        if isinstance(answer, Mapping) and "sentences" not in answer:  # a chain output
            question = question if question is not None else answer.get("question")
            sources = sources if sources is not None else answer.get("sources")
            grounding = grounding if grounding is not None else answer.get("grounding")
            answer = answer.get("answer")
        elif isinstance(answer, Mapping) or (hasattr(answer, "to_dict") and hasattr(answer, "sentences")):
            grounding = answer
            answer = (answer.to_dict() if not isinstance(answer, Mapping) else answer).get("answer")
        if answer is None:
            answer = ""
        if not isinstance(answer, str):
            raise TypeError(f"answer must be a str, got {type(answer).__name__}")
        self.answer = answer
        self.question = question
        self.source_texts = dict(source_texts or {})
        self.source_bases = {str(k): int(v) for k, v in (source_bases or {}).items()}
        self.sources = [_source_span(x, i) for i, x in enumerate(sources or [], 1)]
        self.sentences = normalise_grounding(grounding, answer) if grounding is not None else None
        self.citation_numbers = self._numbers(grounding)
        self._pieces = self._build_pieces()

    # ------------------------------------------------------------------ structure
    def _numbers(self, grounding: Any) -> dict[tuple, int]:
        numbers: dict[tuple, int] = {}
        if self.sentences is None:
            return numbers
        if hasattr(grounding, "to_dict") and not isinstance(grounding, Mapping):
            grounding = grounding.to_dict()
        for c in grounding.get("citations") or []:
            sup = _support({**c, "score": None, "text": None}, f"citation {c.get('number')}")
            if isinstance(c.get("number"), int):
                numbers.setdefault(sup.ident if sup.start is not None else (sup.key, None, None, c.get("text")),
                                   int(c["number"]))
        for s in self.sentences:
            for sup in s.supports:
                if sup.ident not in numbers:
                    numbers[sup.ident] = max(numbers.values(), default=0) + 1
        return numbers

    def _keys(self) -> list[str]:
        keys = [s.key for s in self.sources if s.start is not None]
        for sent in self.sentences or []:
            keys.extend(sup.key for sup in sent.supports if sup.start is not None)
        return list(dict.fromkeys(keys))

    def _build_pieces(self) -> dict[str, list[tuple[int, str]]]:
        """Per source: the excerpts drawn (retrieved spans, plus supports outside them)."""
        out: dict[str, list[tuple[int, str]]] = {}
        for key in self._keys():
            spans = [s for s in self.sources if s.key == key and s.start is not None]
            supports = [sup for sent in self.sentences or [] for sup in sent.supports
                        if sup.key == key and sup.start is not None]
            full, base = self.source_texts.get(key), self.source_bases.get(key, 0)
            if full is not None:
                for s in spans:
                    a, b = check_range(s.start, s.end, len(full), f"source span {s.start}:{s.end} of {key!r}", base)
                    if piece_span(base, full, a, b) != s.text:
                        raise ValueError(f"source span {a}:{b} of {key!r}: its text is not the source's characters")
                for sup in supports:
                    a, b = check_range(sup.start, sup.end, len(full), f"support {sup.start}:{sup.end} of {key!r}", base)
                    if sup.text is not None and piece_span(base, full, a, b) != sup.text:
                        raise ValueError(f"support {a}:{b} of {key!r}: its text is not the source's characters")
                ranges = merge_ranges([(s.start, s.end) for s in spans] + [(p.start, p.end) for p in supports])
                out[key] = [(a, piece_span(base, full, a, b)) for a, b in ranges]
                continue
            # only the retrieved texts are known: build the excerpts from them, checking they agree
            known = [(s.start, s.text) for s in spans]
            pieces = pieces_from_texts(known, f"source {key!r}")
            for sup in supports:
                held = text_at(pieces, sup.start, sup.end)
                if held is not None:
                    if sup.text is not None and held != sup.text:
                        raise ValueError(f"support {sup.start}:{sup.end} of {key!r}: its text is not the retrieved "
                                         "text at those offsets")
                elif sup.text is not None:
                    known.append((sup.start, sup.text))
                else:
                    raise ValueError(f"support {sup.start}:{sup.end} of {key!r} lies outside the retrieved spans and "
                                     "has no text: pass source_texts")
            out[key] = pieces_from_texts(known, f"source {key!r}")
        return out

    # ------------------------------------------------------------------ rendering
    def _names(self) -> dict[str, str]:
        names = {s.key: _name(s.source) for s in self.sources}
        for sent in self.sentences or []:
            for sup in sent.supports:
                names.setdefault(sup.key, _name(sup.source))
        return names

    def _answer_html(self, doc_of: Mapping[str, str]) -> str:
        answer = self.answer
        names = self._names()
        if not answer:
            return '<div class="answer" data-doc="answer"><span class="meta">(no answer: retrieval only)</span></div>'
        if self.sentences is None:
            return (f'<div class="answer" data-doc="answer"><span class="sent" data-start="0" '
                    f'data-end="{len(answer)}">{text_html(answer)}</span></div>')
        out = ['<div class="answer" data-doc="answer">']
        pos = 0
        for i, s in enumerate(self.sentences, 1):
            out.append(text_html(answer[pos:s.start]))
            state = {True: "ok", False: "bad", None: "na"}.get(s.supported, "na")
            tip = {"ok": "supported", "bad": "not supported", "na": "nothing to check"}[state]
            if s.score is not None:
                tip += f", score {s.score:.2f}"
            if s.reasons:
                tip += " (" + ", ".join(s.reasons) + ")"
            out.append(f'<span class="sent {state}" data-i="{i}" data-start="{s.start}" data-end="{s.end}" '
                       f'title="{label(tip)}">')
            cur = s.start
            for c in s.claims:
                out.append(text_html(answer[cur:c.start]))
                out.append(f'<span class="claim" data-start="{c.start}" data-end="{c.end}" '
                           f'title="unsupported {label(c.kind)}">{text_html(c.text)}</span>')
                cur = c.end
            out.append(text_html(answer[cur:s.end]) + "</span>")
            cites = []
            for sup in s.supports:
                n = self.citation_numbers[sup.ident]
                if sup.start is None:
                    cites.append(f'<span class="cite" title="{label(sup.key)} (no offsets)">[{n}]</span>')
                    continue
                cites.append(f'<a class="cite" tabindex="0" data-doc="{doc_of[sup.key]}" data-goto="{sup.start}:{sup.end}" '
                             f'data-n="{n}" data-what="[{n}] {label(names[sup.key])}">[{n}]</a>')
            if cites:
                out.append('<sup class="cites">' + "".join(dict.fromkeys(cites)) + "</sup>")
            if state == "bad":
                out.append(' <span class="flag">\u26a0 not supported</span>')
            pos = s.end
        out.append(text_html(answer[pos:]) + "</div>")
        return "".join(out)

    def _summary(self) -> str:
        if self.sentences is None:
            return "sources only (no grounding result)"
        checked = [s for s in self.sentences if s.supported is not None]
        ok = sum(1 for s in checked if s.supported)
        claims = list(dict.fromkeys(c.text for s in self.sentences for c in s.claims))
        text = f"<b>{ok}/{len(checked)}</b> sentences supported"
        if claims:
            text += ' \u00b7 <span class="flag">unsupported claims: ' + label(", ".join(claims)) + "</span>"
        return text

    def _details(self) -> str:
        if not self.sentences:
            return ""
        items = []
        for i, s in enumerate(self.sentences, 1):
            if s.supported is not False:
                continue
            why = ", ".join(s.reasons) or "not supported"
            claims = ", ".join(c.text for c in s.claims)
            items.append(f"<li>sentence {i}: {label(why)}" + (f" \u2014 claims: {label(claims)}" if claims else "")
                         + (f" (score {s.score:.2f})" if s.score is not None else "") + "</li>")
        loose = [sup for s in self.sentences for sup in s.supports if sup.start is None]
        quotes = "".join(f'<div class="quote">[{self.citation_numbers[sup.ident]}] {label(_name(sup.source))} '
                         f'(no offsets): {text_html(sup.text or "")}</div>' for sup in dict.fromkeys(loose))
        out = ""
        if items:
            out += '<h3>Flagged</h3><ul class="plain">' + "".join(items) + "</ul>"
        if quotes:
            out += "<h3>Supports without offsets</h3>" + quotes
        return out

    def _sources_html(self, doc_of: Mapping[str, str]) -> str:
        names = self._names()
        blocks = []
        for key, doc in doc_of.items():
            pieces = self._pieces[key]
            spans = [s for s in self.sources if s.key == key and s.start is not None]
            supports = list(dict.fromkeys(sup for sent in self.sentences or [] for sup in sent.supports
                                          if sup.key == key and sup.start is not None))
            cuts = [x for s in spans for x in (s.start, s.end)] + [x for p in supports for x in (p.start, p.end)]

            def classes(seg_a: np.ndarray, seg_b: np.ndarray, supports=supports) -> list[str]:
                sup = coverage(seg_a, seg_b, [p.start for p in supports], [p.end for p in supports]) > 0
                return ["sup" if x else "" for x in sup.tolist()]

            length = self.source_bases.get(key, 0) + len(self.source_texts[key]) if key in self.source_texts else None
            links = []
            for i, s in enumerate(spans, 1):
                links.append(f'<a class="go" tabindex="0" data-doc="{doc}" data-goto="{s.start}:{s.end}" '
                             f'data-what="retrieved span {i}">{s.start}\u2013{s.end}</a>')
            cites = sorted({self.citation_numbers[p.ident]: p for p in supports}.items())
            cite_links = [f'<a class="cite" tabindex="0" data-doc="{doc}" data-goto="{p.start}:{p.end}" '
                          f'data-what="[{n}] {label(names[key])}">[{n}]</a>' for n, p in cites]
            blocks.append(
                f'<div class="src-title"><h3>{label(names[key])}</h3><span class="meta">'
                + (f"source id {label(key)} \u00b7 " if key != names[key] else "")
                + "retrieved " + (" ".join(links) or "\u2013")
                + (f" \u00b7 cited {' '.join(cite_links)}" if cite_links else "") + "</span></div>"
                + render_doc(doc, pieces, cuts, classes, length=length, css_class="short"))
        loose = [s for s in self.sources if s.start is None]
        for s in loose:
            blocks.append(f'<div class="src-title"><h3>{label(_name(s.source))}</h3><span class="meta">no offsets'
                          f'</span></div><div class="quote">{text_html(s.text)}</div>')
        return "".join(blocks) or '<p class="meta">No sources.</p>'

    def to_html(self) -> str:
        """The view as one self-contained HTML page (styles and script inline)."""
        keys = list(self._pieces)
        doc_of = {key: str(i) for i, key in enumerate(keys)}
        names = self._names()
        source_list = ""
        if self.sentences is None and self.sources:
            items = []
            for i, s in enumerate(self.sources, 1):
                where = (f'<a class="go" tabindex="0" data-doc="{doc_of[s.key]}" data-goto="{s.start}:{s.end}" '
                         f'data-what="source [{i}]">{label(names[s.key])} {s.start}\u2013{s.end}</a>'
                         if s.start is not None else f"{label(_name(s.source))} (no offsets)")
                items.append(f"<li>[{i}] {where}</li>")
            source_list = '<h3>Sources</h3><ul class="plain">' + "".join(items) + "</ul>"
        question = f"<h1>{label(self.question)}</h1>" if self.question else "<h1>Answer</h1>"
        header = (f'<header>{question}<div class="meta">{self._summary()} \u00b7 {len(self.sources)} retrieved span'
                  f'{"s" if len(self.sources) != 1 else ""}</div></header>')
        legend = ("" if self.sentences is None else
                  '<div class="toolbar"><span class="legend"><span class="sw ok-sw"></span> supported</span>'
                  '<span class="legend"><span class="sw bad-sw"></span> not supported</span>'
                  '<span class="legend"><span class="sw na-sw"></span> nothing to check</span>'
                  '<span class="legend"><span class="sw claim-sw"></span> unsupported claim</span>'
                  '<span class="legend"><span class="sw sup-sw"></span> supporting span</span></div>')
        body = (
            f'{header}<main class="cols n2"><section class="panel"><h2>Answer</h2>{legend}'
            '<div class="status">Click a citation to show its supporting span.</div>'
            f"{self._answer_html(doc_of)}{self._details()}{source_list}</section>"
            f'<section class="panel"><h2>Sources</h2>{self._sources_html(doc_of)}</section></main>'
        )
        css = (".ok-sw{height:3px;background:var(--ok)}.bad-sw{height:3px;background:var(--bad)}"
               ".na-sw{height:0;border-top:2px dotted #adb5bd}.claim-sw{background:#ffc9c9}.sup-sw{background:var(--sup)}"
               ".cols>.panel:first-child{align-self:start;position:sticky;top:8px}")
        return page(f"swrag view: {self.question or 'answer'}", body, css=css)
