"""A self-supervised question set from the user's own documents (no labels needed).

Inverse-cloze style, as in ICT (Lee, Chang and Toutanova, 2019: a sentence of a passage
is the pseudo-question, the passage it came from the pseudo-evidence): a sentence is
drawn at random (seeded) from the corpus, a salient term of it becomes the **gold
answer** (a number, a capitalised name, or the sentence's rarest content word occurring
at most ``max_answer_count`` times in the whole corpus), and the query is built from the
rest of the sentence. A candidate configuration is scored like ``swrag eval`` scores it:
the context recall of the gold answer in the context it retrieves under the budget.

**Leakage guard.** ICT removes the pseudo-question from its evidence in 90% of the
examples (it is kept in 10%, so that word matching, which real questions use, is still
learned). Our evidence is the user's indexed text, which cannot lose the sentence, so the
guard acts on the query instead: in ``1 - verbatim_rate`` of the questions (default 90%,
ICT's share) the query keeps only the sentence's content words that are *not* unique to
it -- every word and every run of adjacent query words that a plain substring search
(``grep``) would find only inside the gold sentence is dropped -- and the kept words are
shuffled (seeded) so no multi-word phrase of the sentence survives in order. The other
``verbatim_rate`` of the questions keep the sentence's exact wording (answer removed), as
ICT does. `exact_match_leak` is the measurement: a query *leaks* when some run of
1-4 of its words occurs in the corpus only inside the gold sentence (so string matching
alone finds the answer). `SyntheticSet.report` gives the leak rate of the raw ICT
query (the sentence itself), of the unguarded cloze query (sentence minus answer) and
of the queries actually used.

**LLM-written questions** (optional, ``llm=`` any LangChain chat model or LLM): the model
is asked for a question whose answer is the chosen term, in its own words; a reply that
names the answer, leaks by `exact_match_leak` or is empty is replaced by the
guarded query (counted in the report).

Chinese and English: sentences come from
`swrag_integrations.methods.grounding.sentences.split_sentences` (exact offsets), words from
jieba for text with Han characters and a Unicode word pattern otherwise; stopwords are
the BM25 ones (`swrag_integrations.keyword.bm25`).
"""

from __future__ import annotations

import json
import logging
import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

from swrag_integrations.core.lang import HAN, contains_cjk

__all__ = [
    "SyntheticQuestion",
    "SyntheticSet",
    "build_synthetic_set",
    "exact_match_leak",
    "TooLittleTextError",
    "MIN_QUESTIONS",
]

logger = logging.getLogger(__name__)

MIN_QUESTIONS = 20
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_HAN_CHAR = re.compile(f"[{HAN}]")
_NUMBER = re.compile(r"^\d[\d.,:/-]*$")
_EXTRA_EN_STOPWORDS = frozenset(
    """also about after all any because before being between both each few further here just more most no nor
    not now only other over own same should some such through too under until up very while yet one two
    however thus may might must shall upon via per""".split()
)


class TooLittleTextError(ValueError):
    """The corpus does not yield enough usable sentences to tune on."""


@dataclass(frozen=True)
class SyntheticQuestion:
    """One self-supervised question.

    Attributes:
        qid: stable id within its set.
        query: what the retriever is asked.
        answers: gold answers (context recall is measured on them).
        source_id: the source the sentence came from.
        language: ``"zh"`` or ``"en"`` (the metric's tokenisation).
        kind: ``"cloze"`` (guarded), ``"verbatim"`` (the sentence's own words) or ``"llm"``.
        sentence_start, sentence_end: the sentence in the source text.
        answer_start, answer_end: the answer term in the source text.
        leak: `exact_match_leak` of the query.
    """

    qid: str
    query: str
    answers: tuple[str, ...]
    source_id: str
    language: str
    kind: str
    sentence_start: int
    sentence_end: int
    answer_start: int
    answer_end: int
    leak: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["answers"] = list(self.answers)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SyntheticQuestion":
        data = dict(data)
        data["answers"] = tuple(data["answers"])
        return cls(**data)


@dataclass
class SyntheticSet:
    """The questions with the parameters that made them and what was measured."""

    questions: list[SyntheticQuestion]
    params: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self):
        return iter(self.questions)

    def to_jsonl(self) -> str:
        head = json.dumps({"params": self.params, "report": self.report}, ensure_ascii=False, sort_keys=True)
        return "\n".join([head] + [json.dumps(q.to_dict(), ensure_ascii=False) for q in self.questions]) + "\n"

    @classmethod
    def from_jsonl(cls, text: str) -> "SyntheticSet":
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            raise ValueError("empty synthetic set file")
        head = json.loads(lines[0])
        return cls([SyntheticQuestion.from_dict(json.loads(ln)) for ln in lines[1:]], head.get("params", {}),
                   head.get("report", {}))


# ----------------------------------------------------------------------- words


def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


def _stopwords() -> frozenset[str]:
    from swrag_integrations.keyword.bm25 import CHINESE_STOPWORDS, ENGLISH_STOPWORDS

    return ENGLISH_STOPWORDS | CHINESE_STOPWORDS | _EXTRA_EN_STOPWORDS


def _words(text: str) -> list[tuple[str, int, int]]:
    """Word tokens ``(word, start, end)`` of ``text`` (jieba when it holds Han characters)."""
    if contains_cjk(text):
        out = []
        for word, a, b in _jieba().tokenize(text, HMM=False):
            if _WORD.fullmatch(word) or (_HAN_CHAR.search(word) and not word.isspace()):
                if any(ch.isalnum() for ch in word):
                    out.append((word, a, b))
        return out
    return [(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]


def _is_content(word: str, stop: frozenset[str]) -> bool:
    low = word.lower()
    if low in stop:
        return False
    if _HAN_CHAR.search(word):
        return len(word) >= 2
    return len(word) >= 3 or any(ch.isdigit() for ch in word)


class _Grep:
    """Substring counts over the whole corpus (lower-cased), memoised: what ``grep -c``
    would see, which is the leakage this module guards against."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.corpus = "\x00".join(t.lower() for t in texts)
        self._memo: dict[str, int] = {}

    def count(self, piece: str) -> int:
        piece = piece.lower()
        if piece not in self._memo:
            self._memo[piece] = self.corpus.count(piece) if piece else 0
        return self._memo[piece]


def _runs(words: Sequence[str], max_n: int = 4) -> Iterable[tuple[tuple[str, ...], str]]:
    """Runs of 1..``max_n`` adjacent words with the strings a substring search would use."""
    for n in range(1, max_n + 1):
        for i in range(len(words) - n + 1):
            run = tuple(words[i:i + n])
            yield run, " ".join(run)
            if n > 1 and all(_HAN_CHAR.search(w) for w in run):
                yield run, "".join(run)  # Chinese text has no spaces between words


def _leaks(words: Sequence[str], sentence: str, grep: _Grep, max_n: int = 4) -> list[tuple[str, ...]]:
    """The runs of ``words`` found by a substring search only inside ``sentence``."""
    low = sentence.lower()
    out = []
    for run, piece in _runs(words, max_n):
        inside = low.count(piece.lower())
        if inside and grep.count(piece) == inside:
            out.append(run)
    return out


def exact_match_leak(query: str, sentence: str, corpus: Iterable[str] | Any, *, max_n: int = 4) -> bool:
    """True when string matching alone finds ``sentence`` from ``query``: some run of 1 to
    ``max_n`` adjacent query words (joined by a space, or without one between Chinese
    words) occurs in ``corpus`` only inside ``sentence`` (case-insensitive), so a substring
    search for it returns the gold sentence and nothing else.

    Args:
        query: the synthetic query.
        sentence: the gold sentence (as it appears in the corpus).
        corpus: the texts (or a prepared counter from this module).
    """
    grep = corpus if isinstance(corpus, _Grep) else _Grep(corpus)
    words = [w for w, _, _ in _words(query)]
    return bool(_leaks(words, sentence, grep, max_n))


# -------------------------------------------------------------------- answers


@dataclass
class _Term:
    text: str
    start: int  # in the source text
    end: int
    count: int
    salient: bool  # a number or a capitalised name


def _answer_candidates(sentence: str, offset: int, words: list[tuple[str, int, int]], stop: frozenset[str],
                       grep: _Grep, max_count: int) -> list[_Term]:
    out: list[_Term] = []
    zh = contains_cjk(sentence)
    for i, (w, a, b) in enumerate(words):
        if not _is_content(w, stop):
            continue
        salient = bool(_NUMBER.match(w)) or (not zh and w[:1].isupper() and i > 0)
        out.append(_Term(w, offset + a, offset + b, grep.count(w), salient))
    if not zh:  # capitalised multi-word names ("Marrow Point"), not at the sentence start
        i = 1
        while i < len(words):
            j = i
            while j < len(words) and words[j][0][:1].isupper() and words[j][0].lower() not in stop:
                j += 1
            if j - i >= 2:
                run = words[i:min(j, i + 3)]
                text = sentence[run[0][1]:run[-1][2]]
                out.append(_Term(text, offset + run[0][1], offset + run[-1][2], grep.count(text), True))
            i = max(j, i + 1)
    return [t for t in out if 1 <= t.count <= max_count]


# ------------------------------------------------------------------- queries


def _query_terms(words: list[tuple[str, int, int]], answer: _Term, offset: int, stop: frozenset[str]) -> list[str]:
    ans = answer.text.lower()
    terms = []
    for w, a, b in words:
        if offset + a < answer.end and offset + b > answer.start:
            continue  # the answer itself
        low = w.lower()
        if not _is_content(w, stop) or low in ans or ans in low:
            continue
        if low not in (t.lower() for t in terms):
            terms.append(w)
    return terms


def _guarded(terms: list[str], sentence: str, grep: _Grep, rng: random.Random) -> list[str]:
    """Drop words a substring search finds only in ``sentence``; shuffle (seeded) until no
    run of adjacent words is found only there either, dropping a word of a leaking run
    when 20 shuffles do not get rid of it."""
    low = sentence.lower()
    kept = [t for t in terms if grep.count(t) != low.count(t.lower())]
    while kept:
        order = list(kept)
        for _attempt in range(20):
            rng.shuffle(order)
            bad = _leaks(order, sentence, grep)
            if not bad:
                return order
        kept = [t for t in kept if t != bad[0][-1]]
    return []


def _verbatim(sentence: str, offset: int, answer: _Term) -> str:
    a, b = answer.start - offset, answer.end - offset
    text = sentence[:a] + " " + sentence[b:]
    text = re.sub(re.escape(answer.text), " ", text, flags=re.IGNORECASE)
    return " ".join(text.split())


_LLM_PROMPT_EN = (
    "Write one question about the passage below whose answer is \"{answer}\". Use your own words: do not copy "
    "three or more consecutive words from the passage, and do not mention the answer. Reply with the question "
    "only.\n\nPassage:\n{passage}"
)
_LLM_PROMPT_ZH = (
    "根据下面的段落写一个问题，答案是“{answer}”。请用自己的话提问，不要照抄段落中的连续词语，也不要在问题中出现答案。"
    "只回复问题本身。\n\n段落：\n{passage}"
)


def _llm_text(result: Any) -> str:
    content = getattr(result, "content", result)
    if isinstance(content, list):
        content = "".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
    lines = [ln.strip().strip("\"'“”") for ln in str(content).strip().splitlines() if ln.strip()]
    for ln in lines:
        if ln.endswith(("?", "？")):
            return re.sub(r"^(?:question|问题)\s*[:：]\s*", "", ln, flags=re.IGNORECASE)
    return lines[0] if lines else ""


def _mentions(query: str, answer: str, language: str) -> bool:
    from swrag_integrations.evaluation.metrics import answer_tokens

    if answer.lower() in query.lower():
        return True
    ans = set(answer_tokens(answer, language))
    return bool(ans) and ans <= set(answer_tokens(query, language))


# ---------------------------------------------------------------------- build


def build_synthetic_set(
    sources: Sequence[Any],
    n: int = 240,
    *,
    seed: int = 0,
    verbatim_rate: float = 0.1,
    min_terms: int = 3,
    max_terms: int = 8,
    max_answer_count: int = 3,
    min_questions: int = MIN_QUESTIONS,
    llm: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> SyntheticSet:
    """Build ``n`` self-supervised questions from ``sources`` (deterministic for ``seed``
    unless an LLM writes them).

    Args:
        sources: objects with ``source_id`` and ``text``
            (`Source`).
        n: questions wanted.
        seed: sentence sampling, answer tie-breaks, the verbatim share and word order.
        verbatim_rate: share of questions that keep the sentence's wording (ICT keeps
            the sentence in its evidence 10% of the time); the rest are guarded.
        min_terms: a guarded query needs at least this many words, else the sentence
            is skipped.
        max_terms: a guarded query keeps at most this many of the sentence's words
            (drawn at random; real questions share a few words with their answer
            sentence, not all of them).
        max_answer_count: the answer term occurs at most this often in the corpus
            (rarer answers make recall depend on finding the right place).
        min_questions: fewer usable questions than this raises
            `TooLittleTextError`.
        llm: optional LangChain chat model / LLM that rewrites each question.
        progress: called as ``progress(done, n)``.

    Raises:
        TooLittleTextError: the corpus yields fewer than ``min_questions`` questions.
        ValueError: bad parameters.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not 0.0 <= float(verbatim_rate) <= 1.0:
        raise ValueError(f"verbatim_rate must be in [0, 1], got {verbatim_rate!r}")
    if isinstance(min_terms, bool) or not isinstance(min_terms, int) or min_terms < 1:
        raise ValueError(f"min_terms must be a positive int, got {min_terms!r}")
    if isinstance(max_terms, bool) or not isinstance(max_terms, int) or max_terms < min_terms:
        raise ValueError(f"max_terms must be an int >= min_terms ({min_terms}), got {max_terms!r}")
    from swrag_integrations.methods.grounding.sentences import split_sentences

    sources = [s for s in sources if s.text and s.text.strip()]
    grep = _Grep(s.text for s in sources)
    stop = _stopwords()
    spans = []
    for s in sources:
        for sent in split_sentences(s.text):
            size = len(sent.text) if contains_cjk(sent.text) else len(sent.text.split())
            lo, hi = ((12, 150) if contains_cjk(sent.text) else (8, 60))
            if lo <= size <= hi:
                spans.append((s.source_id, sent.start, sent.end))
    rng = random.Random(seed)
    rng.shuffle(spans)
    texts = {s.source_id: s.text for s in sources}
    counts = {"sentences": len(spans), "tried": 0, "no_answer": 0, "too_few_terms": 0, "llm_rejected": 0}
    raw_leaks = cloze_leaks = 0
    questions: list[SyntheticQuestion] = []
    seen: set[tuple[str, int]] = set()
    for sid, start, end in spans:
        if len(questions) >= n:
            break
        counts["tried"] += 1
        text = texts[sid]
        sentence = text[start:end]
        language = "zh" if contains_cjk(sentence) else "en"
        words = _words(sentence)
        cands = _answer_candidates(sentence, start, words, stop, grep, max_answer_count)
        if not cands:
            counts["no_answer"] += 1
            continue
        cands.sort(key=lambda t: (not t.salient, t.count, -len(t.text), t.start))
        answer = cands[0]
        if (sid, answer.start) in seen:
            continue
        terms = _query_terms(words, answer, start, stop)
        verbatim = rng.random() < verbatim_rate
        guarded = _guarded(terms, sentence, grep, rng)[:max_terms]
        if len(guarded) < min_terms:
            counts["too_few_terms"] += 1
            continue
        cloze = _verbatim(sentence, start, answer)
        raw_leaks += _leaks([w for w, _, _ in words], sentence, grep) != []
        cloze_leaks += exact_match_leak(cloze, sentence, grep)
        kind = "verbatim" if verbatim else "cloze"
        query = cloze if verbatim else " ".join(guarded)
        if llm is not None and not verbatim:
            written = _ask_llm(llm, text, start, end, answer.text, language)
            if written and not _mentions(written, answer.text, language) and not exact_match_leak(
                    written, sentence, grep):
                query, kind = written, "llm"
            else:
                counts["llm_rejected"] += 1
        seen.add((sid, answer.start))
        questions.append(SyntheticQuestion(
            qid=f"syn{seed}-{len(questions)}", query=query, answers=(answer.text,), source_id=sid,
            language=language, kind=kind, sentence_start=start, sentence_end=end, answer_start=answer.start,
            answer_end=answer.end, leak=exact_match_leak(query, sentence, grep)))
        if progress is not None:
            progress(len(questions), n)
    if len(questions) < min_questions:
        raise TooLittleTextError(
            f"too little text to tune: {sum(len(s.text) for s in sources)} characters in {len(sources)} document(s) "
            f"gave {len(questions)} usable question(s) from {counts['sentences']} sentence(s); at least "
            f"{min_questions} are needed. Add documents (a few pages of prose at least), or lower min_questions")
    made = len(questions)
    kinds = {k: sum(q.kind == k for q in questions) for k in ("cloze", "verbatim", "llm")}
    report = {
        **counts,
        "questions": made,
        "kinds": kinds,
        "languages": {lang: sum(q.language == lang for q in questions) for lang in ("en", "zh")},
        # share of questions a substring search answers alone (see exact_match_leak)
        "leak_rate_raw_sentence": raw_leaks / made,
        "leak_rate_unguarded_cloze": cloze_leaks / made,
        "leak_rate": sum(q.leak for q in questions) / made,
        "leak_rate_by_kind": {k: (sum(q.leak for q in questions if q.kind == k) / v if v else None)
                              for k, v in kinds.items()},
    }
    params = {"n": n, "seed": seed, "verbatim_rate": verbatim_rate, "min_terms": min_terms, "max_terms": max_terms,
              "max_answer_count": max_answer_count, "llm": type(llm).__name__ if llm is not None else None}
    return SyntheticSet(questions, params, report)


def _ask_llm(llm: Any, text: str, start: int, end: int, answer: str, language: str) -> str:
    from swrag_integrations.methods.grounding.sentences import split_sentences

    lo, hi = max(0, start - 400), min(len(text), end + 400)
    window = text[lo:hi]
    sents = [s for s in split_sentences(window)]
    inside = [s for s in sents if lo + s.end > start and lo + s.start < end]
    if inside:
        first = max(0, sents.index(inside[0]) - 1)
        last = min(len(sents), sents.index(inside[-1]) + 2)
        passage = window[sents[first].start:sents[last - 1].end]
    else:
        passage = text[start:end]
    prompt = (_LLM_PROMPT_ZH if language == "zh" else _LLM_PROMPT_EN).format(answer=answer, passage=passage)
    try:
        return _llm_text(llm.invoke(prompt))
    except Exception as exc:  # noqa: BLE001 - a failing call falls back to the guarded query
        logger.warning("the LLM failed to write a question (%s: %s); using the guarded query", type(exc).__name__, exc)
        return ""
