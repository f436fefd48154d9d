"""LongBench-format JSONL datasets, passage splitting and corpus building.

A row has ``input`` (the question), ``context`` (its document), ``answers`` (gold
answers), ``language`` and ``_id``; optional ``supporting_facts`` (HotpotQA:
``[[title, sentence_index], ...]``) and ``answer_char_starts`` (exact offsets of the
answers in ``context``, SQuAD-derived rows).

*Document mode*: every question is asked against its own document.
*Corpus mode*: the de-duplicated documents of a dataset form one store
(`build_corpus`), every question retrieves from all of them.

*Tuning and test halves*: every row belongs to one fixed half, ``"tune"`` or
``"test"`` (`half_of`), so levers and defaults can be chosen on one half and
reported on the other (``load_examples(..., half="test")``, ``swrag eval --half test``).
The half of a row is decided by the row alone: the first 64 bits of
``sha256(HALF_SALT + "\\0" + key)`` are even -> ``"tune"``, odd -> ``"test"``, where
``key`` is the row's ``_id`` (or, for a row without a unique ``_id``, a hash of its
question and context). So the split does not depend on row order, and appending rows
never moves an old row to the other half. The price is that the halves are not exactly
equal: their sizes follow a fair coin per row (tune/test: qasper 12/18, minilongbench
28/17, hotpotqa 58/42).
For the small sets (qasper 30 rows, minilongbench 45) k-fold cross-validation would
use every question for both tuning and testing, but each fold then needs its own tuning
run and the reported figure is an average over differently tuned configurations; a
single fixed split keeps one chosen configuration per set and one test figure with an
honest (wide) bootstrap interval, which is what the README reports. In corpus mode the
split is over *questions* only: the index still holds every document of the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from swrag_integrations.core.lang import contains_cjk

__all__ = [
    "Example",
    "Source",
    "Passage",
    "load_examples",
    "HALVES",
    "DEV_SETS",
    "ADDED_DEV_SETS",
    "ALL_DEV_SETS",
    "dev_set_modes",
    "HALF_SALT",
    "half_of",
    "check_half",
    "half_label",
    "select_half",
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
    split_key: str = field(default="", compare=False, repr=False)

    @property
    def half(self) -> str:
        """The fixed half this question belongs to: ``"tune"`` or ``"test"`` (`half_of`)."""
        return half_of(self.split_key or self.qid)


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


HALVES: tuple[str, str] = ("tune", "test")
# Fixed salt of the split: changing it re-deals every row, so it is versioned, never tuned.
HALF_SALT = "swrag-eval-halves/v1"


def half_of(key: str) -> str:
    """The half of a row with split key ``key``: ``"tune"`` or ``"test"``.

    Depends on ``key`` and `HALF_SALT` only (not on row order or other rows).
    """
    digest = hashlib.sha256(f"{HALF_SALT}\0{key}".encode("utf-8", "surrogatepass")).digest()
    return HALVES[int.from_bytes(digest[:8], "big") % 2]


def check_half(half: str | None) -> str | None:
    """Return ``half`` if it is ``None``, ``"tune"`` or ``"test"``; raise ``ValueError`` otherwise."""
    if half is not None and half not in HALVES:
        raise ValueError(f"half must be one of {', '.join(HALVES)} or None (whole set), got {half!r}")
    return half


def half_label(half: str | None) -> str:
    """How reports name a half: ``"tuning half"``, ``"test half"`` or the whole set (``None``/``"all"``)."""
    if half in (None, "all"):
        return "whole set (tuning and test halves mixed)"
    return {"tune": "tuning half", "test": "test half"}[check_half(half)]


def select_half(examples: Iterable[Example], half: str | None) -> list[Example]:
    """The examples of ``half`` (``"tune"`` / ``"test"``) in their order; all of them for ``None``."""
    check_half(half)
    return [e for e in examples if half is None or e.half == half]


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


def load_examples(path: str | Path, limit: int | None = None, *, half: str | None = None) -> list[Example]:
    """Read a LongBench-format JSONL file, optionally one fixed half of it.

    Question ids are the rows' ``_id``; a missing or repeated ``_id`` becomes
    ``row<N>`` (N = 0-based line number among rows), so ids are unique within a file.
    A row's split key (its half, see the module docstring) is its ``_id`` when that is
    present and unique so far, else ``"text:"`` + a hash of its question and context, so
    it never depends on the line number.

    Args:
        path: the JSONL file.
        limit: keep only the first ``limit`` rows (of ``half`` when given).
        half: ``"tune"`` or ``"test"`` for that half only; ``None`` for every row.

    Raises:
        ValueError: a line is not JSON, a row lacks ``input``/``context``/``answers``,
            or ``half`` is not ``"tune"``, ``"test"`` or ``None``.
    """
    check_half(half)
    path = Path(path)
    examples: list[Example] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            if half is None and limit is not None and len(examples) >= limit:
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
            split_key = qid
            if not qid or qid in seen:
                qid = f"row{len(examples)}"
                split_key = "text:" + source_id(f"{row['input']}\0{row['context']}")
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
                    split_key=split_key,
                )
            )
    if half is not None:
        examples = select_half(examples, half)
        if limit is not None:
            examples = examples[:limit]
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


# The six dev sets of the peer runner and the tuning: (dataset, mode label, extra swrag eval flags)
DEV_SETS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("multifieldqa_zh", "document", ()),
    ("qasper", "document", ()),
    ("minilongbench", "document", ()),
    ("squad_v2_articles", "corpus", ("--corpus",)),
    ("hotpotqa", "corpus, split passages", ("--corpus", "--split-passages")),
    ("cmrc2018_corpus", "corpus", ("--corpus",)),
)

# The larger dev sets of issue 44 (same format, same fixed halves by ``_id``): DRCD (1,000
# Traditional-Chinese paragraphs, one question each, corpus mode like cmrc2018_corpus) and five
# LEval tasks over long English documents with free-form gold answers (document mode). They
# are not in `DEV_SETS` so the runs and reports of the six keep their rows; commands
# that take ``--datasets`` accept every name of `ALL_DEV_SETS`.
ADDED_DEV_SETS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("drcd_corpus", "corpus", ("--corpus",)),
    ("leval_scientific_qa", "document", ()),
    ("leval_natural_question", "document", ()),
    ("leval_multidoc_qa", "document", ()),
    ("leval_financial_qa", "document", ()),
    ("leval_legal_contract_qa", "document", ()),
)

ALL_DEV_SETS: tuple[tuple[str, str, tuple[str, ...]], ...] = DEV_SETS + ADDED_DEV_SETS


def dev_set_modes(names: Iterable[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``name -> (mode label, swrag eval flags)`` for dev-set ``names`` (of `ALL_DEV_SETS`), in order.

    Raises:
        ValueError: a name that is not a dev set, naming the known ones.
    """
    known = {name: (mode, flags) for name, mode, flags in ALL_DEV_SETS}
    names = list(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return {n: known[n] for n in names}
