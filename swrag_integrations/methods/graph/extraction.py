"""Phrases and triples from passages: a rule extractor (no LLM) and an LLM extractor.

Both give an `Extraction` per passage: its entity phrases and open-information
triples ``(subject, relation, object)``; the graph (`graph`) turns phrases into
nodes. Phrases are compared by `normalize_phrase` (NFKC, lower case, punctuation
and a leading article dropped).

* `RuleExtractor` needs no model: English named-entity-like spans (runs of
  capitalised words on one line, with inner connectives such as "of"/"the"/"de"; a
  sentence's capitalised first word only if it is capitalised elsewhere too; short
  quoted spans; short title lines) and, for Chinese, jieba part-of-speech tags (person ``nr*``, place ``ns``,
  organisation ``nt``, other proper noun ``nz`` and, optionally, nouns ``n`` of two or
  more characters). Mixed text gets both. It gives no triples.
* `LLMExtractor` asks any LangChain LLM or chat model (anything with
  ``invoke(str)``) for entities and triples and reads the answer with
  `parse_extraction`, which accepts JSON (also inside prose or code fences, with
  single quotes or trailing commas), lists of triples in the usual notations
  (``(a, r, b)``, ``a | r | b``, ``a -> r -> b``, ``["a", "r", "b"]``) and, failing
  that, names found in prose. Small models' output is often none of these: such a
  passage counts as a failure (`ExtractionStats`) and gets the rule
  extractor's phrases instead (``fallback``), never an exception. With ``grounded``
  (default) a phrase the passage does not contain is dropped, so invented names never
  become nodes. Answers are cached in SQLite (``cache_path``) so a long build resumes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sqlite3
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from swrag_integrations.core.lang import HAN, contains_cjk
from swrag_integrations.core.paths import private_file

__all__ = [
    "Extraction",
    "ExtractionStats",
    "RuleExtractor",
    "LLMExtractor",
    "parse_extraction",
    "normalize_phrase",
    "EXTRACTION_PROMPT",
]

Triple = tuple[str, str, str]


@dataclass
class Extraction:
    """What one passage (or query) yielded.

    ``status``: ``"rule"`` (rule extractor), ``"json"``/``"list"``/``"prose"`` (how an
    LLM answer was read), ``"failed"`` (nothing usable; ``fallback`` phrases may still
    be in ``entities``) or ``"error"`` (the LLM call raised).
    """

    entities: list[str] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)
    status: str = "rule"

    def phrases(self) -> list[str]:
        """Entities and triple ends, de-duplicated by `normalize_phrase` (first spelling kept)."""
        seen: dict[str, str] = {}
        for name in [*self.entities, *(t[0] for t in self.triples), *(t[2] for t in self.triples)]:
            key = normalize_phrase(name)
            if key and key not in seen:
                seen[key] = name
        return list(seen.values())


@dataclass
class ExtractionStats:
    """Counts of an extractor's work (``calls`` = LLM calls actually made; cache hits apart)."""

    passages: int = 0
    calls: int = 0
    cached: int = 0
    parsed: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    errors: int = 0
    fallback: int = 0
    seconds: float = 0.0
    prompt_chars: int = 0
    output_chars: int = 0

    def count(self, status: str) -> None:
        self.parsed[status] = self.parsed.get(status, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"passages": self.passages, "calls": self.calls, "cached": self.cached, "parsed": dict(self.parsed),
                "failed": self.failed, "errors": self.errors, "fallback": self.fallback,
                "seconds": round(self.seconds, 3), "prompt_chars": self.prompt_chars,
                "output_chars": self.output_chars}


# ------------------------------------------------------------------ phrases

_ARTICLES = re.compile(r"^(the|a|an)\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
_SPACES = re.compile(r"\s+")
_MAX_PHRASE_CHARS = 80
_MAX_PHRASE_WORDS = 10


def normalize_phrase(text: Any) -> str:
    """The identity of a phrase: NFKC, lower case, inner whitespace collapsed, punctuation
    at both ends and a leading English article removed (``""`` if nothing is left or the
    phrase is implausibly long)."""
    if not isinstance(text, str):
        return ""
    key = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    key = _SPACES.sub(" ", key).strip()
    key = _EDGE_PUNCT.sub("", key)
    key = _ARTICLES.sub("", key)
    if not key or len(key) > _MAX_PHRASE_CHARS or len(key.split()) > _MAX_PHRASE_WORDS:
        return ""
    if not re.search(r"[^\W\d_]", key):  # numbers and symbols alone are not phrases
        return ""
    return key


# ------------------------------------------------------------ rule extractor

# Capitalised words that start sentences or questions far more often than they name things.
_SENTENCE_WORDS = frozenset(
    """a an and are as at but by for from he her his how i if in into is it its my of on or our she so that the
    their them then there these they this those to was we were what when where which who whom whose why will with
    you your after before during while although though also however both either neither not no yes one two
    many most some such each every all other another because since until unlike like as well did does do has have
    had can could would should may might must shall than be been being""".split()
)
_CONNECTIVES = frozenset("of the de del della der des di du da von van la le y".split())
_CALENDAR = frozenset("""january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split())
_CAP_WORD = r"(?:[A-Z][\w'’\-.]*[\w]|[A-Z])"
_CONNECT = r"(?:of|the|de|del|della|der|des|di|du|da|von|van|la|le|y|&)"
# words of a name are separated by spaces or tabs, never by a line break
_CAP_RUN = re.compile(rf"{_CAP_WORD}(?:[ \t]+(?:{_CONNECT}[ \t]+)*{_CAP_WORD})*")
_QUOTED = re.compile(r"[\"“«]([^\"”»\n,]{2,80})[\"”»]")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)$")
_HEADING = re.compile(r"^\s{0,3}#{0,6}\s*([^\n]{2,80}?)\s*$", re.MULTILINE)
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
_CJK_TAGS = ("nr", "ns", "nt", "nz")


def _strip_run(words: list[str]) -> list[str]:
    while words and (words[0].lower() in _SENTENCE_WORDS or words[0].lower() in _CONNECTIVES):
        words = words[1:]
    while words and words[-1].lower() in _CONNECTIVES:
        words = words[:-1]
    return words


class RuleExtractor:
    """Named-entity-like phrases without any model (see the module docstring).

    Args:
        nouns: also take Chinese common nouns (jieba tag ``n``) of at least
            ``min_cjk_chars`` characters (more nodes, more links between passages).
        quoted: take short quoted spans (titles of works, nicknames).
        headings: take short lines without a full stop (titles, headings; a trailing
            parenthesis such as "(1945 film)" dropped).
        min_cjk_chars: shortest Chinese phrase kept.
        max_phrases: at most this many phrases per passage (first occurrences).
    """

    name = "rule"

    def __init__(self, *, nouns: bool = True, quoted: bool = True, headings: bool = True, min_cjk_chars: int = 2,
                 max_phrases: int = 64) -> None:
        if isinstance(min_cjk_chars, bool) or not isinstance(min_cjk_chars, int) or min_cjk_chars < 1:
            raise ValueError(f"min_cjk_chars must be a positive int, got {min_cjk_chars!r}")
        if isinstance(max_phrases, bool) or not isinstance(max_phrases, int) or max_phrases < 1:
            raise ValueError(f"max_phrases must be a positive int, got {max_phrases!r}")
        self.nouns = bool(nouns)
        self.quoted = bool(quoted)
        self.headings = bool(headings)
        self.min_cjk_chars = min_cjk_chars
        self.max_phrases = max_phrases
        self.stats = ExtractionStats()

    def _latin(self, text: str) -> list[str]:
        out = []
        if self.headings:  # a short line without a full stop is a title: "Kiss and Tell (1945 film)"
            for match in _HEADING.finditer(text):
                line = _PAREN.sub("", match.group(1)).strip()
                if (line and line[-1] not in ".!?:;," and len(line.split()) <= 8 and line[:1].isupper()
                        and not contains_cjk(line)):
                    out.append(line)
        runs = []
        for match in _CAP_RUN.finditer(text):
            words = _strip_run(match.group(0).split())
            if not words or (len(words) == 1 and len(words[0]) < 2):
                continue
            name = " ".join(words).rstrip(".").rstrip("'’")
            first_word = match.start() == text.find(words[0], match.start())
            at_start = first_word and _SENTENCE_START.search(text[max(0, match.start() - 3):match.start()]) is not None
            runs.append((name, len(words) == 1 and at_start))
        mid_sentence = {name for name, starts in runs if not starts}
        for name, starts in runs:
            if name.lower() in _CALENDAR:
                continue
            if starts and name not in mid_sentence:  # "Born in ...", "Much of ...": a sentence's first word
                continue
            out.append(name)
        if self.quoted:
            out.extend(m.group(1).strip() for m in _QUOTED.finditer(text)
                       if 0 < len(m.group(1).split()) <= 8)
        return out

    def _chinese(self, text: str) -> list[str]:
        from swrag_integrations.keyword.bm25 import _get_jieba

        _get_jieba()
        import jieba.posseg as pseg

        out = []
        for word, flag in pseg.lcut(text):
            if not re.fullmatch(f"[{HAN}]+", word) or len(word) < self.min_cjk_chars:
                continue
            if flag.startswith(_CJK_TAGS) or (self.nouns and flag == "n"):
                out.append(word)
        return out

    def extract(self, text: str) -> Extraction:
        """Phrases of one text (first spelling of each normalised phrase, in text order)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        t0 = time.perf_counter()
        found = self._latin(text)
        if contains_cjk(text):
            found.extend(self._chinese(text))
        seen: dict[str, str] = {}
        for name in found:
            key = normalize_phrase(name)
            if key and key not in seen and key not in _SENTENCE_WORDS:
                seen[key] = name
            if len(seen) >= self.max_phrases:
                break
        self.stats.passages += 1
        self.stats.count("rule")
        self.stats.seconds += time.perf_counter() - t0
        return Extraction(entities=list(seen.values()), status="rule")

    def extract_many(self, texts: Sequence[str], *, show_progress: bool = False) -> list[Extraction]:
        from tqdm.auto import tqdm

        return [self.extract(t) for t in tqdm(texts, disable=not show_progress, desc="phrases", unit="passage")]

    def query_entities(self, query: str) -> list[str]:
        """Phrases of a question (the same rules)."""
        return self.extract(query).entities

    def fingerprint(self) -> str:
        return (f"rule:nouns={self.nouns}:quoted={self.quoted}:headings={self.headings}:min={self.min_cjk_chars}:"
                f"max={self.max_phrases}")


# ------------------------------------------------------------------ parsing

_FENCE = re.compile(r"```[a-zA-Z]*\s*|```")
_TRAILING_COMMA = re.compile(r",\s*([\]}])")
_BULLET = re.compile(r"^\s*(?:[-*•·]+|\d+[.)]|\(\d+\)|[a-z][.)])\s*")
_LABEL = re.compile(r"^\s*(entities|entity|named entities|names|nodes)\s*[:：]\s*(.+)$", re.IGNORECASE)
_TRIPLE_LABEL = re.compile(r"^\s*(triples?|facts?|relations?|relationships?)\s*[:：]\s*", re.IGNORECASE)
_TRIPLE_SEPARATORS = (re.compile(r"\s*\|\s*"), re.compile(r"\s*(?:->|→|=>)\s*"), re.compile(r"\s*;\s*"),
                      re.compile(r"\s+[-–—]\s+"), re.compile(r"\s*\t\s*"))
_TRIPLE_PAREN = re.compile(r"^[(\[<{]\s*(.+?)\s*[)\]>}]\s*[.,;]?$")
_BLOCK_ROLES = {"subject": "s", "head": "s", "source": "s", "relation": "r", "predicate": "r", "relationship": "r",
                "verb": "r", "object": "o", "tail": "o", "target": "o", "entity": "entity", "name": "entity",
                "person": "entity", "place": "entity", "location": "entity", "organization": "entity",
                "organisation": "entity", "title": "entity", "author": "entity", "director": "entity"}
_BLOCK = re.compile(rf"^({'|'.join(_BLOCK_ROLES)})\s*[:：]\s*(.+)$", re.IGNORECASE)
_KEY_VALUE = re.compile(r"^[A-Za-z][A-Za-z ]{0,30}\s*[:：]\s*\S")
_ENTITY_KEYS = ("entities", "named_entities", "entity", "ents", "names", "nodes", "named entities")
_TRIPLE_KEYS = ("triples", "triple", "facts", "relations", "relationships", "edges", "fact")


def _strip_quotes(text: Any) -> str:
    if not isinstance(text, (str, int, float)) or isinstance(text, bool):
        return ""
    return str(text).strip().strip("\"'“”‘’`").strip()


def _triple(items: Any) -> Triple | None:
    if isinstance(items, dict):
        lowered = {str(k).lower(): v for k, v in items.items()}
        s = next((lowered[k] for k in ("subject", "source", "head", "s", "from") if k in lowered), None)
        r = next((lowered[k] for k in ("relation", "predicate", "relationship", "description", "r", "p", "type")
                  if k in lowered), "related to")
        o = next((lowered[k] for k in ("object", "target", "tail", "o", "to") if k in lowered), None)
        items = [s, r, o]
    if isinstance(items, str):
        return _triple_from_line(items)
    if not isinstance(items, (list, tuple)) or len(items) != 3:
        return None
    s, r, o = (_strip_quotes(x) for x in items)
    return (s, r, o) if s and o else None


def _triple_from_line(line: str) -> Triple | None:
    line = line.strip()
    match = _TRIPLE_PAREN.match(line)
    inner = match.group(1) if match else line
    for sep in _TRIPLE_SEPARATORS:
        parts = [p for p in sep.split(inner) if p.strip()]
        if len(parts) == 3:
            s, r, o = (_strip_quotes(p) for p in parts)
            if s and o:
                return s, r, o
    if match:  # "(a, r, b)": commas only inside brackets
        parts = [p for p in re.split(r"\s*,\s*", inner) if p.strip()]
        if len(parts) == 3:
            s, r, o = (_strip_quotes(p) for p in parts)
            if s and o:
                return s, r, o
    return None


def _json_candidates(text: str) -> Iterable[Any]:
    """Every JSON/Python literal (dict or list) that decodes at a ``{``/``[`` of ``text``."""
    decoder = json.JSONDecoder()
    cleaned = _TRAILING_COMMA.sub(r"\1", text)
    for source in (text, cleaned):
        for pos, char in enumerate(source):
            if char not in "{[":
                continue
            try:
                value, _ = decoder.raw_decode(source, pos)
            except ValueError:
                value = _literal(source, pos)
            if isinstance(value, (dict, list)):
                yield value


def _literal(text: str, pos: int) -> Any:
    """A Python literal (single-quoted JSON) from ``pos`` to its matching bracket."""
    pairs = {"{": "}", "[": "]"}
    stack = []
    quote = None
    for end in range(pos, min(len(text), pos + 20000)):
        char = text[end]
        if quote:
            if char == quote and text[end - 1] != "\\":
                quote = None
            continue
        if char in "\"'":
            quote = char
        elif char in pairs:
            stack.append(pairs[char])
        elif stack and char == stack[-1]:
            stack.pop()
            if not stack:
                try:
                    return ast.literal_eval(text[pos:end + 1])
                except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                    return None
    return None


def _from_value(value: Any) -> Extraction | None:
    entities: list[str] = []
    triples: list[Triple] = []

    def take_list(items: Any, as_triples: bool | None) -> None:
        if not isinstance(items, (list, tuple)):
            if isinstance(items, str) and items.strip():
                entities.extend(p for p in (_strip_quotes(x) for x in re.split(r"[,;，；]", items)) if p)
            return
        for item in items:
            t = _triple(item) if as_triples is not False else None
            if t is not None and (as_triples or isinstance(item, (list, tuple, dict))):
                triples.append(t)
            elif isinstance(item, dict):
                name = next((item[k] for k in ("name", "entity", "entity_name", "title", "text") if k in item), None)
                if _strip_quotes(name):
                    entities.append(_strip_quotes(name))
            elif _strip_quotes(item):
                entities.append(_strip_quotes(item))

    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        for key in _ENTITY_KEYS:
            if key in lowered:
                take_list(lowered[key], False)
        for key in _TRIPLE_KEYS:
            if key in lowered:
                take_list(lowered[key], True)
        if not entities and not triples:
            t = _triple(value)
            if t is not None:
                triples.append(t)
    else:
        take_list(value, None)
    if not entities and not triples:
        return None
    return Extraction(entities=entities, triples=triples, status="json")


def parse_extraction(output: Any) -> Extraction:
    """Read entities and triples from an LLM answer, whatever its shape.

    Tries, in order: JSON (or a Python literal) anywhere in the text; triple lines in
    the usual notations and ``Entities: a, b`` lines; bullet lists of names; names in
    prose (capitalised runs, as `RuleExtractor` finds them). ``status`` tells
    which one worked (``"json"``, ``"list"``, ``"prose"``) or ``"failed"``.
    """
    if hasattr(output, "content"):  # a chat message
        output = output.content
    if not isinstance(output, str):
        return Extraction(status="failed")
    text = _FENCE.sub("\n", output).strip()
    if not text:
        return Extraction(status="failed")
    best: Extraction | None = None
    for value in _json_candidates(text):
        got = _from_value(value)
        if got is not None and (best is None or len(got.triples) + len(got.entities)
                                > len(best.triples) + len(best.entities)):
            best = got
        if best is not None and best.triples:
            break
    if best is not None:
        return best
    entities: list[str] = []
    triples: list[Triple] = []
    loose: list[str] = []
    block: dict[str, str] = {}  # "Subject: a / Relation: r / Object: b" lines
    for raw in text.splitlines():
        line = _BULLET.sub("", raw).strip()
        if not line:
            continue
        label = _LABEL.match(line)
        if label:
            entities.extend(p for p in (_strip_quotes(x) for x in re.split(r"[,;，；、]", label.group(2))) if p)
            continue
        part = _BLOCK.match(line)
        if part:
            role = _BLOCK_ROLES[part.group(1).lower()]
            value = _strip_quotes(part.group(2).rstrip(",.;"))
            if role == "entity":
                if value:
                    entities.append(value)
                continue
            block[role] = value
            if role == "o":
                if block.get("s") and block.get("o"):
                    triples.append((block["s"], block.get("r") or "related to", block["o"]))
                block = {}
            continue
        if _KEY_VALUE.match(line):  # "Personality: ..." and other labels: not names
            continue
        line = _TRIPLE_LABEL.sub("", line)
        t = _triple_from_line(line)
        if t is not None:
            triples.append(t)
        elif raw.lstrip()[:1] in "-*•·" or _BULLET.match(raw) and raw.strip() != line:
            name = _strip_quotes(line.rstrip("."))
            if name and len(name.split()) <= 6:
                loose.append(name)
    if triples or entities or loose:
        return Extraction(entities=entities + loose, triples=triples, status="list")
    prose = RuleExtractor(nouns=False, headings=False)._latin(text)
    if contains_cjk(text):
        prose.extend(RuleExtractor()._chinese(text))
    if prose:
        return Extraction(entities=prose, status="prose")
    return Extraction(status="failed")


def _grounded(extraction: Extraction, passage: str) -> Extraction:
    """Only phrases the passage contains (compared normalised, on word boundaries for Latin text)."""
    flat = " " + re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", passage).lower().replace("’", "'")) + " "

    def inside(name: str) -> bool:
        key = normalize_phrase(name)
        if not key:
            return False
        probe = re.sub(r"[\W_]+", " ", key).strip()
        if not probe:
            return False
        return (probe in flat) if contains_cjk(probe) else (f" {probe} " in flat)

    entities = [e for e in extraction.entities if inside(e)]
    triples = [t for t in extraction.triples if inside(t[0]) and inside(t[2])]
    return Extraction(entities=entities, triples=triples, status=extraction.status)


# ------------------------------------------------------------- LLM extractor

EXTRACTION_PROMPT = """Extract the named entities (people, places, organisations, works, dates) and the facts of the passage.
Write one fact per line as: subject | relation | object
Then one line: Entities: name1, name2, ...

Passage:
Marie Curie was a physicist born in Warsaw. She won the Nobel Prize in Physics in 1903.
Facts:
Marie Curie | was born in | Warsaw
Marie Curie | won | Nobel Prize in Physics
Entities: Marie Curie, Warsaw, Nobel Prize in Physics

Passage:
{passage}
Facts:
"""


class _Cache:
    """``key -> LLM answer`` in SQLite (thread-safe, resumable)."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path).expanduser()
        private_file(path)
        self._con = sqlite3.connect(str(path), check_same_thread=False)
        self._con.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)")
        self._con.commit()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._con.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: str, answer: str) -> None:
        with self._lock:
            self._con.execute("INSERT OR REPLACE INTO answers VALUES (?, ?)", (key, answer))
            self._con.commit()

    def close(self) -> None:
        with self._lock:
            self._con.close()


def _llm_name(llm: Any) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    info = getattr(llm, "info", None) or getattr(getattr(llm, "core", None), "info", None)
    source = getattr(info, "source", None)
    return str(source) if source else type(llm).__name__


class LLMExtractor:
    """Entities and triples from any LangChain LLM or chat model (see the module docstring).

    Args:
        llm: a LangChain LLM, chat model or Runnable (``invoke(str)`` -> ``str`` or a
            message), or a `LocalLLM` (its
            ``as_langchain()`` is used).
        prompt: template with ``{passage}``.
        fallback: extractor used for a passage whose answer gives nothing usable (or
            whose call raised); ``None``: such a passage gets no phrases.
        grounded: drop phrases the passage does not contain.
        max_passage_chars: longer passages are cut before prompting (the phrases of the
            rest are still found by the fallback when the answer fails).
        cache_path: SQLite file of answers (keyed by model, prompt and passage); ``None``
            keeps nothing.
        query_llm: use the LLM for questions too (`query_entities`); default the
            rule extractor (an LLM call per question is slow with a local model).

    Raises:
        TypeError: ``llm`` has no ``invoke`` (and no ``as_langchain``).
        ValueError: ``prompt`` lacks ``{passage}``, or ``max_passage_chars`` is not a positive int.
    """

    name = "llm"

    def __init__(self, llm: Any, *, prompt: str = EXTRACTION_PROMPT, fallback: Any = "rule", grounded: bool = True,
                 max_passage_chars: int = 3000, cache_path: str | Path | None = None,
                 query_llm: bool = False) -> None:
        if hasattr(llm, "as_langchain") and not hasattr(llm, "invoke"):
            llm = llm.as_langchain()
        if not callable(getattr(llm, "invoke", None)):
            raise TypeError(f"llm must be a LangChain LLM, chat model or Runnable, got {type(llm).__name__}")
        if "{passage}" not in prompt:
            raise ValueError("prompt must contain {passage}")
        if isinstance(max_passage_chars, bool) or not isinstance(max_passage_chars, int) or max_passage_chars <= 0:
            raise ValueError(f"max_passage_chars must be a positive int, got {max_passage_chars!r}")
        self.llm = llm
        self.prompt = prompt
        self.fallback = RuleExtractor() if fallback == "rule" else fallback
        self.grounded = bool(grounded)
        self.max_passage_chars = max_passage_chars
        self.query_llm = bool(query_llm)
        self.stats = ExtractionStats()
        self._cache = _Cache(cache_path) if cache_path is not None else None
        self._model = _llm_name(llm)

    def _key(self, prompt: str) -> str:
        return hashlib.sha1(f"{self._model}\x00{prompt}".encode("utf-8", "surrogatepass")).hexdigest()

    def _ask(self, prompt: str) -> str:
        key = self._key(prompt)
        if self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                self.stats.cached += 1
                return hit
        self.stats.calls += 1
        self.stats.prompt_chars += len(prompt)
        answer = self.llm.invoke(prompt)
        answer = getattr(answer, "content", answer)
        answer = answer if isinstance(answer, str) else str(answer)
        self.stats.output_chars += len(answer)
        if self._cache is not None:
            self._cache.put(key, answer)
        return answer

    def extract(self, text: str) -> Extraction:
        """Entities and triples of one passage (never raises for a bad answer)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        t0 = time.perf_counter()
        self.stats.passages += 1
        prompt = self.prompt.format(passage=text[: self.max_passage_chars])
        try:
            got = parse_extraction(self._ask(prompt))
        except Exception:  # noqa: BLE001 - a failing LLM must not stop a build; counted
            self.stats.errors += 1
            got = Extraction(status="error")
        if got.status not in ("failed", "error") and self.grounded:
            got = _grounded(got, text)
            if not got.phrases():
                got = Extraction(status="failed")
        if got.status in ("failed", "error"):
            self.stats.failed += got.status == "failed"
            if self.fallback is not None:
                self.stats.fallback += 1
                got = Extraction(entities=self.fallback.extract(text).entities, status=got.status)
        self.stats.count(got.status)
        self.stats.seconds += time.perf_counter() - t0
        return got

    def extract_many(self, texts: Sequence[str], *, show_progress: bool = False) -> list[Extraction]:
        """`extract` for each of ``texts``, in order (``show_progress``: a progress bar)."""
        from tqdm.auto import tqdm

        return [self.extract(t) for t in tqdm(texts, disable=not show_progress, desc="LLM extraction", unit="passage")]

    def query_entities(self, query: str) -> list[str]:
        """Phrases of a question: the LLM's entities when ``query_llm``, else the rule extractor's."""
        if self.query_llm:
            got = self.extract(query)
            if got.phrases():
                return got.phrases()
        return RuleExtractor().extract(query).entities

    def fingerprint(self) -> str:
        """What the extractions depend on (model, prompt digest, grounding): part of the graph's cache keys."""
        digest = hashlib.sha1(self.prompt.encode()).hexdigest()[:8]
        return f"llm:{self._model}:{digest}:grounded={self.grounded}"

    def close(self) -> None:
        """Close the extraction cache (if any)."""
        if self._cache is not None:
            self._cache.close()
