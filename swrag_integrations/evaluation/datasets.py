"""LongBench-format JSONL datasets, passage splitting and corpus building.

A row has ``input`` (the question), ``context`` (its document), ``answers`` (gold
answers), ``language`` and ``_id``; optional ``supporting_facts`` (HotpotQA:
``[[title, sentence_index], ...]``) and ``answer_char_starts`` (exact offsets of the
answers in ``context``, SQuAD-derived rows).

*Document mode*: every question is asked against its own document.
*Corpus mode*: the de-duplicated documents of a dataset form one store
(:func:`build_corpus`), every question retrieves from all of them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from .._lang import contains_cjk

__all__ = [
    "Example",
    "Source",
    "Passage",
    "load_examples",
    "dataset_name",
    "split_passages",
    "example_sources",
    "gold_sources",
    "gold_spans",
    "build_corpus",
    "source_id",
]


@dataclass(frozen=True)
class Example:
    """One question with its document and gold answers."""

    qid: str
    question: str
    context: str
    answers: tuple[str, ...]
    language: str = "en"
    dataset: str = ""
    supporting_facts: tuple[tuple[str, int], ...] = ()
    answer_char_starts: tuple[int, ...] = ()
    extra: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Source:
    """A retrievable document: ``text`` under a stable ``source_id``."""

    source_id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class Passage:
    """A ``Passage i:`` block of a HotpotQA-style context (offsets into the context)."""

    index: int
    title: str
    start: int  # start of the passage body (after the "Passage i:" line)
    end: int

    def text(self, context: str) -> str:
        return context[self.start : self.end]


def source_id(text: str) -> str:
    """Stable id of a document: the first 16 hex digits of its SHA-1."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def dataset_name(path: str | Path) -> str:
    """Name of a dataset file: its stem (``multifieldqa_zh.jsonl`` -> ``multifieldqa_zh``)."""
    name = Path(path).name
    for suffix in (".jsonl", ".json", ".gz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def _language(row: dict) -> str:
    lang = row.get("language")
    if lang:
        return str(lang).lower()
    text = str(row.get("input", "")) + str(row.get("context", ""))[:200]
    return "zh" if contains_cjk(text) else "en"


def load_examples(path: str | Path, limit: int | None = None) -> list[Example]:
    """Read a LongBench-format JSONL file.

    Question ids are the rows' ``_id``; a missing or repeated ``_id`` becomes
    ``row<N>`` (N = 0-based line number among rows), so ids are unique within a file.

    Args:
        path: the JSONL file.
        limit: keep only the first ``limit`` rows.

    Raises:
        ValueError: a line is not JSON, or a row lacks ``input``/``context``/``answers``.
    """
    path = Path(path)
    examples: list[Example] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            if limit is not None and len(examples) >= limit:
                break
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from exc
            missing = [key for key in ("input", "context", "answers") if key not in row]
            if missing:
                raise ValueError(f"{path}:{lineno}: missing field(s) {missing}")
            answers = row["answers"]
            if isinstance(answers, str):
                answers = [answers]
            qid = row.get("_id")
            qid = str(qid) if qid not in (None, "") else ""
            if not qid or qid in seen:
                qid = f"row{len(examples)}"
            seen.add(qid)
            known = {"input", "context", "answers", "language", "_id", "supporting_facts", "answer_char_starts", "dataset"}
            examples.append(
                Example(
                    qid=qid,
                    question=str(row["input"]),
                    context=str(row["context"]),
                    answers=tuple(str(a) for a in answers),
                    language=_language(row),
                    dataset=str(row.get("dataset") or dataset_name(path)),
                    supporting_facts=tuple((str(t), int(i)) for t, i in (row.get("supporting_facts") or [])),
                    answer_char_starts=tuple(int(s) for s in (row.get("answer_char_starts") or [])),
                    extra={k: v for k, v in row.items() if k not in known},
                )
            )
    return examples


_PASSAGE = re.compile(r"^Passage (\d+):[ \t]*\n", re.MULTILINE)


def split_passages(context: str) -> list[Passage]:
    """Split a HotpotQA/LongBench context into its ``Passage i:`` blocks.

    Each passage's body starts after its ``Passage i:`` line and ends where the next
    block starts (trailing whitespace excluded); its title is the body's first line.
    A context without such blocks gives ``[]``.
    """
    matches = list(_PASSAGE.finditer(context))
    passages = []
    for pos, match in enumerate(matches):
        start = match.end()
        end = matches[pos + 1].start() if pos + 1 < len(matches) else len(context)
        while end > start and context[end - 1].isspace():
            end -= 1
        body = context[start:end]
        title = body.split("\n", 1)[0].strip()
        passages.append(Passage(int(match.group(1)), title, start, end))
    return passages


def example_sources(example: Example, *, split: bool = False) -> list[Source]:
    """The retrievable sources of one example's document.

    Args:
        example: the question.
        split: cut ``Passage i:`` blocks into separate sources (their bodies, so the
            same passage seen in two questions gets the same id). Without blocks the
            whole context is one source.
    """
    if split:
        passages = split_passages(example.context)
        if passages:
            return [Source(source_id(p.text(example.context)), p.text(example.context), p.title) for p in passages]
    return [Source(source_id(example.context), example.context, str(example.extra.get("title", "")))]


def gold_sources(example: Example, *, split: bool = False) -> list[str]:
    """Source ids that hold the answer.

    With ``split`` and ``supporting_facts``: the passages whose titles are named there
    (all of them are needed). Otherwise: the question's own document.
    """
    sources = example_sources(example, split=split)
    if split and example.supporting_facts and len(sources) > 1:
        titles = {title for title, _ in example.supporting_facts}
        ids = sorted({s.source_id for s in sources if s.title in titles})
        if ids:
            return ids
    if len(sources) == 1:
        return [sources[0].source_id]
    return sorted({s.source_id for s in sources})


def gold_spans(example: Example) -> list[tuple[int, int]]:
    """Exact ``(start, end)`` spans of the answers in ``context`` (from ``answer_char_starts``).

    ``answer_char_starts[i]`` belongs to ``answers[i]``; spans that do not reproduce
    the answer text are dropped.
    """
    spans = []
    for answer, start in zip(example.answers, example.answer_char_starts):
        end = start + len(answer)
        if 0 <= start and example.context[start:end] == answer:
            spans.append((start, end))
    return spans


def build_corpus(examples: Iterable[Example], *, split: bool = False) -> list[Source]:
    """All sources of ``examples``, de-duplicated by id, in first-seen order."""
    seen: dict[str, Source] = {}
    for example in examples:
        for source in example_sources(example, split=split):
            seen.setdefault(source.source_id, source)
    return list(seen.values())


def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """Rows of a JSONL file (blank and truncated last lines are skipped)."""
    path = Path(path)
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut off by an interrupted run
