"""Summaries of clusters: any LangChain LLM, or extractive (central sentences, exact spans).

Both summarisers take a `Cluster` (the nodes to summarise, their embeddings,
the exact leaf spans under them) and a `SummaryContext` (embedding with a
cache, the source texts) and return a `Summary`.

* `ExtractiveSummarizer` needs no LLM: the sentences of the sources that lie in
  the cluster's leaves are embedded, and those closest to the cluster's centroid (the
  mean of its members' unit embeddings; for unit vectors this is the mean cosine
  similarity to the members, i.e. degree centrality) are kept until ``max_tokens``,
  near-duplicates skipped, in document order. Each kept sentence is an exact span of
  its source, so an extractive summary cites itself.
* `LLMSummarizer` prompts any LangChain LLM or chat model (default: the local
  model from `swrag_integrations.llm.load_llama3`) with the members' texts. The
  prompt is configurable (``{context}``). Answers are cached by their inputs (model,
  prompt, length limit and the exact input text) in sqlite, in an index's source store
  (``put_blob``) or in memory. An LLM that raises or answers nothing usable never stops
  a build: that cluster gets the extractive summary instead (``kind="fallback"``), and
  the failure is counted (`SummaryStats`); failures are not cached, so a later
  build retries them.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from swrag_integrations.engine.assemble import count_tokens
from swrag_integrations.engine.trace import piece_span
from swrag_integrations.core.windows import DEFAULT_ENCODING, token_boundaries
from swrag_integrations.methods.raptor.tree import RaptorNode

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "Cluster",
    "Summary",
    "SummaryContext",
    "SummaryStats",
    "SummaryCache",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "sentence_spans",
]

# Our own wording of the RAPTOR paper's instruction ("write a summary ... including as
# many key details as possible").
DEFAULT_SUMMARY_PROMPT = (
    "Summarise the following passages in a few sentences. Keep the key details: names, "
    "numbers, places, events and claims.\n\n{context}\n\nSummary:"
)

_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|[。！？；]+[”’」』）]*|\n+")


def sentence_spans(text: str, max_tokens: int = 80, encoding_name: str = DEFAULT_ENCODING) -> list[tuple[int, int]]:
    """Exact ``(start, end)`` of the sentences of ``text`` (surrounding whitespace excluded).

    A sentence ends after ``. ! ?`` (plus closing quotes/brackets) followed by white
    space, after the CJK ``。！？；``, or at a line break. Sentences longer than
    ``max_tokens`` tokens are cut at token boundaries into pieces of at most that size.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    out: list[tuple[int, int]] = []

    def add(a: int, b: int) -> None:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b <= a:
            return
        piece = text[a:b]
        if len(piece) <= max_tokens or count_tokens(piece, encoding_name) <= max_tokens:
            out.append((a, b))
            return
        bounds = token_boundaries(piece, encoding_name)
        total = len(bounds) - 1
        for t in range(0, total, max_tokens):
            c0, c1 = int(bounds[t]), int(bounds[min(t + max_tokens, total)])
            if text[a + c0:a + c1].strip():
                out.append((a + c0, a + c1))

    pos = 0
    for m in _SENTENCE_END.finditer(text):
        add(pos, m.end())
        pos = m.end()
    add(pos, len(text))
    return out


@dataclass
class Cluster:
    """What a summariser gets: the member nodes, their embeddings, the leaves under them."""

    members: list[RaptorNode]
    vectors: np.ndarray
    leaf_spans: list[tuple[str, int, int]]
    layer: int


@dataclass
class Summary:
    """A summariser's answer for one cluster."""

    text: str
    kind: str  # "extractive" | "llm" | "fallback"
    spans: tuple[tuple[str, int, int], ...] = ()
    span_texts: tuple[str, ...] = ()
    llm_called: bool = False
    cached: bool = False
    error: str | None = None
    empty: bool = False


@dataclass
class SummaryStats:
    """Counts of one build's summaries."""

    summaries: int = 0
    extractive: int = 0
    llm: int = 0
    llm_calls: int = 0
    cached: int = 0
    failed: int = 0
    empty: int = 0
    fallback: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, summary: Summary) -> None:
        self.summaries += 1
        if summary.kind == "llm":
            self.llm += 1
        elif summary.kind == "extractive":
            self.extractive += 1
        else:
            self.fallback += 1
        self.llm_calls += int(summary.llm_called)
        self.cached += int(summary.cached)
        self.empty += int(summary.empty)
        if summary.error is not None:
            self.failed += 1
            if len(self.errors) < 20:
                self.errors.append(summary.error)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SummaryContext:
    """Shared by the summaries of one build: cached embedding of texts, source texts and
    their sentence spans.

    Args:
        embed: ``texts -> (n, d) array`` (e.g. an ``Embeddings.embed_documents``).
        source_text: ``source_id -> text`` (the whole source), or ``source_id -> (base,
            text)`` (a piece starting at source offset ``base``, as
            `source_piece` gives it).
        max_sentence_tokens: longest sentence piece (longer ones are cut).
        encoding_name: tiktoken encoding for counting.
    """

    def __init__(self, embed: Callable[[list[str]], Any], source_text: Callable[[str], str | tuple[int, str]], *,
                 max_sentence_tokens: int = 80, encoding_name: str = DEFAULT_ENCODING) -> None:
        self._embed = embed
        self._source_text = source_text
        self.max_sentence_tokens = max_sentence_tokens
        self.encoding_name = encoding_name
        self._vectors: dict[str, np.ndarray] = {}
        self._sentences: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        self.embedded = 0

    def source_piece(self, source_id: str) -> tuple[int, str]:
        """``(base, text)`` of a source: ``text[i]`` is its character ``base + i``."""
        got = self._source_text(source_id)
        return (int(got[0]), got[1]) if isinstance(got, tuple) else (0, got)

    def source_text(self, source_id: str) -> str:
        """The text held of a source (starting at its base: slice it with `span`)."""
        return self.source_piece(source_id)[1]

    def span(self, source_id: str, start: int, end: int) -> str:
        """The source's characters ``[start, end)`` (source coordinates)."""
        base, text = self.source_piece(source_id)
        return piece_span(base, text, start, end)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (each distinct text embedded once per context)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if todo:
            vecs = np.asarray(self._embed(todo), dtype=np.float32)
            if vecs.shape[0] != len(todo):
                raise ValueError(f"the embedding returned {vecs.shape[0]} vectors for {len(todo)} texts")
            self.embedded += len(todo)
            for t, v in zip(todo, vecs):
                self._vectors[t] = v
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def sentences(self, source_id: str) -> tuple[list[int], list[tuple[int, int]]]:
        """``(starts, spans)`` of a source's sentences (cached)."""
        got = self._sentences.get(source_id)
        if got is None:
            base, text = self.source_piece(source_id)
            spans = [(base + a, base + b) for a, b in sentence_spans(text, self.max_sentence_tokens, self.encoding_name)]
            got = ([a for a, _ in spans], spans)
            self._sentences[source_id] = got
        return got

    def sentences_in(self, leaf_spans: Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        """The sentences whose midpoint lies inside one of ``leaf_spans`` (document order, once)."""
        out: dict[tuple[str, int, int], None] = {}
        clipped: dict[tuple[str, int, int], None] = {}
        for sid, a, b in leaf_spans:
            starts, spans = self.sentences(sid)
            i = max(0, bisect.bisect_right(starts, a) - 1)
            while i < len(spans) and spans[i][0] < b:
                s0, s1 = spans[i]
                if a <= (s0 + s1) / 2 < b or (s0 >= a and s1 <= b):
                    out.setdefault((sid, s0, s1), None)
                elif s1 > a:  # overlaps the leaf, mostly outside: its part inside, if needed
                    clipped.setdefault((sid, max(s0, a), min(s1, b)), None)
                i += 1
        if out:
            return list(out)
        return [(s, a, b) for s, a, b in clipped if self.span(s, a, b).strip()]


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


class ExtractiveSummarizer:
    """Central sentences of a cluster, kept as exact spans of their sources (no LLM).

    Args:
        max_tokens: the summary's length limit (cl100k tokens; RAPTOR's LLM summaries
            averaged about 130 tokens).
        duplicate_similarity: a sentence this similar (cosine) to one already kept, or
            with the same normalised text, is skipped.
        min_sentence_tokens: shorter pieces (a lone bracket, a one-word heading) are
            not candidates while longer ones exist.
        encoding_name: tiktoken encoding for counting.

    Raises:
        ValueError: ``max_tokens``, ``duplicate_similarity`` or ``min_sentence_tokens`` is out
            of range (the message names it).
    """

    kind = "extractive"

    def __init__(self, max_tokens: int = 128, *, duplicate_similarity: float = 0.97, min_sentence_tokens: int = 4,
                 encoding_name: str = DEFAULT_ENCODING) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
        if isinstance(min_sentence_tokens, bool) or not isinstance(min_sentence_tokens, int) or min_sentence_tokens < 1:
            raise ValueError(f"min_sentence_tokens must be an int >= 1, got {min_sentence_tokens!r}")
        self.min_sentence_tokens = min_sentence_tokens
        if not 0.0 < float(duplicate_similarity) <= 1.0:
            raise ValueError(f"duplicate_similarity must be in (0, 1], got {duplicate_similarity!r}")
        self.max_tokens = max_tokens
        self.duplicate_similarity = float(duplicate_similarity)
        self.encoding_name = encoding_name

    @property
    def identity(self) -> str:
        return f"extractive:{self.max_tokens}:{self.duplicate_similarity}:{self.min_sentence_tokens}"

    def summarize(self, cluster: Cluster, ctx: SummaryContext) -> Summary:
        """The cluster's central sentences (``kind="extractive"``)."""
        candidates = ctx.sentences_in(cluster.leaf_spans)
        if not candidates:
            raise ValueError("the cluster's leaves hold no sentences")
        texts = [ctx.span(s, a, b) for s, a, b in candidates]
        # fragments ("]", a lone heading) are rarely a summary: drop them unless nothing else is left
        keep = [i for i, t in enumerate(texts) if count_tokens(t, self.encoding_name) >= self.min_sentence_tokens]
        if keep and len(keep) < len(texts):
            candidates, texts = [candidates[i] for i in keep], [texts[i] for i in keep]
        vecs = _unit(ctx.embed(texts))
        centroid = _unit(_unit(cluster.vectors).mean(axis=0))
        scores = vecs @ centroid
        order = np.argsort(-scores, kind="stable")
        chosen: list[int] = []
        seen_text: set[str] = set()
        used = 0
        for i in order:
            i = int(i)
            norm = " ".join(texts[i].lower().split())
            if norm in seen_text:
                continue
            if chosen and float(np.max(vecs[chosen] @ vecs[i])) >= self.duplicate_similarity:
                continue
            n = count_tokens(texts[i], self.encoding_name)
            if used + n > self.max_tokens:
                if chosen:
                    continue
                # nothing kept yet and the best sentence is too long: keep its head
                bounds = token_boundaries(texts[i], self.encoding_name)
                cut = int(bounds[min(self.max_tokens, len(bounds) - 1)])
                sid, a, _ = candidates[i]
                candidates[i] = (sid, a, a + cut)
                texts[i] = texts[i][:cut]
                n = self.max_tokens
            chosen.append(i)
            seen_text.add(norm)
            used += n
            if used >= self.max_tokens:
                break
        chosen.sort(key=lambda i: candidates[i])
        spans = tuple(candidates[i] for i in chosen)
        span_texts = tuple(texts[i] for i in chosen)
        return Summary(" ".join(t.strip() for t in span_texts), "extractive", spans, span_texts)


class SummaryCache:
    """LLM summaries keyed by their inputs.

    Args:
        backend: ``None`` (in memory), a path (a sqlite file, via the package's
            sqlite key-value table of `HeaderCache`)
            or anything with ``get_blob``/``put_blob`` (an index's source store).
    """

    PREFIX = "raptor-summary/"

    def __init__(self, backend: Any = None) -> None:
        self._memory: dict[str, str] | None = None
        self._sqlite = None
        self._store = None
        if backend is None:
            self._memory = {}
        elif isinstance(backend, (str, os.PathLike)):
            from swrag_integrations.core.textcache import TextCache

            self._sqlite = TextCache(Path(backend))
        elif callable(getattr(backend, "get_blob", None)) and callable(getattr(backend, "put_blob", None)):
            self._store = backend
        else:
            raise TypeError(f"cache must be None, a path or a store with get_blob/put_blob, got {type(backend).__name__}")

    @staticmethod
    def key(model: str, prompt: str, max_tokens: int, text: str) -> str:
        raw = json.dumps([model, prompt, int(max_tokens), text], ensure_ascii=False)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def get(self, key: str) -> str | None:
        if self._memory is not None:
            return self._memory.get(key)
        if self._sqlite is not None:
            return self._sqlite.get(key)
        raw = self._store.get_blob(self.PREFIX + key)
        return None if raw is None else raw.decode("utf-8")

    def put(self, key: str, text: str, model: str = "") -> None:
        if self._memory is not None:
            self._memory[key] = text
        elif self._sqlite is not None:
            self._sqlite.put(key, text, model)
        else:
            self._store.put_blob(self.PREFIX + key, text.encode("utf-8"))

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()


@lru_cache(maxsize=4)
def _default_local_llm(max_new_tokens: int) -> Any:
    from swrag_integrations.llm import load_llama3

    return load_llama3(max_new_tokens=max_new_tokens).as_langchain()


class LLMSummarizer:
    """Cluster summaries from any LangChain LLM / chat model.

    Args:
        llm: a LangChain LLM or chat model, a `LocalLLM`,
            or ``None`` (the local default model, loaded on first use with
            ``max_new_tokens = max_tokens + 32``).
        prompt: template with ``{context}`` (the members' texts, blank-line separated).
        max_tokens: answers are trimmed to this many cl100k tokens.
        max_input_tokens: the joined member texts are cut to this many tokens (RAPTOR
            re-clusters clusters over 3500 tokens; `TreeBuilder` does too).
        cache: a `SummaryCache`, or what it accepts (path, store, ``None``).
        fallback: the summariser used when the LLM fails or answers nothing usable
            (default: `ExtractiveSummarizer` with the same ``max_tokens``).
        model_name: name used in cache keys (default: derived from the LLM).
        encoding_name: tiktoken encoding counting ``max_tokens`` and ``max_input_tokens``.

    Raises:
        ValueError: ``prompt`` lacks ``{context}``, or ``max_tokens``/``max_input_tokens`` is
            not a positive int.
    """

    kind = "llm"

    def __init__(self, llm: Any = None, *, prompt: str = DEFAULT_SUMMARY_PROMPT, max_tokens: int = 128,
                 max_input_tokens: int = 3500, cache: Any = None, fallback: ExtractiveSummarizer | None = None,
                 model_name: str | None = None, encoding_name: str = DEFAULT_ENCODING) -> None:
        if "{context}" not in prompt:
            raise ValueError("prompt must contain {context}")
        for name, value in (("max_tokens", max_tokens), ("max_input_tokens", max_input_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self._llm = llm
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.max_input_tokens = max_input_tokens
        self.cache = cache if isinstance(cache, SummaryCache) else SummaryCache(cache)
        self.fallback = fallback or ExtractiveSummarizer(max_tokens, encoding_name=encoding_name)
        # the default local model is named without loading it, so checking whether a
        # stored tree is up to date never loads an LLM
        self._model_name = model_name or (f"swrag-local-default:{max_tokens + 32}" if llm is None else None)
        self.encoding_name = encoding_name

    @property
    def llm(self) -> Any:
        if self._llm is None:
            self._llm = _default_local_llm(self.max_tokens + 32)
        elif hasattr(self._llm, "as_langchain") and not hasattr(self._llm, "invoke"):
            self._llm = self._llm.as_langchain()
        return self._llm

    @property
    def model_name(self) -> str:
        if self._model_name is None:
            from swrag_integrations.llm.text import model_name_of

            self._model_name = model_name_of(self.llm)
        return self._model_name

    @property
    def identity(self) -> str:
        digest = hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()[:12]
        return f"llm:{self.model_name}:{digest}:{self.max_tokens}:{self.max_input_tokens}"

    def input_text(self, cluster: Cluster) -> str:
        """The members' texts, blank-line separated, cut to ``max_input_tokens``: what the prompt's ``{context}`` gets."""
        from swrag_integrations.engine.assemble import trim_to_tokens

        text = "\n\n".join(m.text.strip() for m in cluster.members if m.text.strip())
        return trim_to_tokens(text, self.max_input_tokens, self.encoding_name)[0]

    def _fallback(self, cluster: Cluster, ctx: SummaryContext, *, error: str | None, empty: bool) -> Summary:
        got = self.fallback.summarize(cluster, ctx)
        return Summary(got.text, "fallback", got.spans, got.span_texts, llm_called=True, error=error, empty=empty)

    def summarize(self, cluster: Cluster, ctx: SummaryContext) -> Summary:
        """The LLM's summary (``kind="llm"``), or the fallback's (``kind="fallback"``)."""
        from swrag_integrations.llm.text import clean_header, llm_text
        from swrag_integrations.engine.assemble import trim_to_tokens

        text = self.input_text(cluster)
        key = SummaryCache.key(self.model_name, self.prompt, self.max_tokens, text)
        hit = self.cache.get(key)
        if hit:
            return Summary(hit, "llm", cached=True)
        try:
            raw = llm_text(self.llm.invoke(self.prompt.format(context=text)))
        except Exception as exc:  # noqa: BLE001 - a failing LLM never stops the build
            return self._fallback(cluster, ctx, error=f"{type(exc).__name__}: {exc}", empty=False)
        answer = clean_header(raw)
        answer = trim_to_tokens(answer, self.max_tokens, self.encoding_name)[0] if answer else ""
        if not answer:
            return self._fallback(cluster, ctx, error=None, empty=True)
        self.cache.put(key, answer, self.model_name)
        return Summary(answer, "llm", llm_called=True)
