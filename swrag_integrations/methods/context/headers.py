"""Contextual chunk headers: an LLM writes each chunk's situating context.

Two modes (after Anthropic's *Contextual Retrieval* and dsRAG's *AutoContext*):

* ``mode="contextual"`` — for every chunk the LLM sees the whole document and the chunk
  and writes 1-2 sentences (about 50-100 tokens) that place the chunk in the document.
* ``mode="auto"`` — one LLM call per document writes a title and a 1-2 sentence
  summary; that header is put in front of every chunk of the document.

The header goes into the chunk's metadata (``context_header``); the chunk's
``page_content`` and its ``start_index``/``end_index`` stay exactly the source's.
`text_to_index` gives the text to embed / BM25-index (``header + "\\n\\n" + chunk``)
and `HeadedEmbedder` (LangChain face: ``ContextualEmbeddings``) applies it transparently inside any embedder
(so a `SlidingWindowIndex` built with it embeds the
headed text while storing the exact chunk).

Cost. The document is the shared part of every chunk's prompt, so it is placed first
and, for the local transformers model (a `LocalLLM` or its
LangChain adapter), `prefix_cache` runs it through
the model **once per document** and every chunk's header is generated from a copy of
that KV cache (same prompt ids, stop strings and eos handling as
``LocalLLM.generate`` on the whole prompt). Per chunk, only the chunk part of the prompt
and the header are run through the model: cost grows with the number of chunks, not
chunks × document length. Documents longer than ``max_document_tokens`` are cut into
sections, each chunk seeing (and sharing the cache of) the section that holds it. Any
other LangChain LLM / chat model gets one plain call per chunk.

With the plain transformers backend (fp32) the cached and the uncached paths give the
same greedy header (checked by a test). IPEX-LLM low-bit kernels are not
batch-invariant: running the document and the chunk part in two passes changes the
logits slightly (max |Δ| ≈ 0.7-1.5 measured on SmolLM2-135M sym_int8), so headers can
differ from an uncached call in wording, not in kind.

Headers are cached on disk (sqlite, ``cache_path``) by (document hash, chunk span,
model name, prompt hash): re-running skips finished chunks, so an interrupted run
resumes where it stopped. Failures never raise: an LLM that raises or answers nothing
leaves the chunk without header, counted in `HeaderReport` (not cached, so a
later run retries); over-long answers are trimmed to ``max_header_tokens``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence


from swrag_integrations.llm.text import clean_header
from swrag_integrations.engine.ids import chunk_id, source_id_for
from swrag_integrations.engine.records import plan_source
from swrag_integrations.core.textcache import TextCache
from swrag_integrations._moved import moved_names_getattr
from swrag_integrations.core.windows import DEFAULT_ENCODING, iter_windows
from swrag_integrations.methods.context._common import count_tokens, llm_text, local_core, model_name_of, trim_to_tokens
from swrag_integrations.stores.storage import PlainDocument

__all__ = [
    "CONTEXT_DOCUMENT_PROMPT",
    "CONTEXT_CHUNK_PROMPT",
    "AUTO_CONTEXT_PROMPT",
    "HeaderCache",
    "HeaderReport",
    "ChunkHeaderWriter",
    "HeadedEmbedder",
    "text_to_index",
    "clean_header",
]

CONTEXT_DOCUMENT_PROMPT = (
    "You will be shown a document and then one passage cut from it.\n\n"
    "<document>\n{document}\n</document>\n"
)
CONTEXT_CHUNK_PROMPT = (
    "\nThe passage:\n<passage>\n{chunk}\n</passage>\n\n"
    "Write one or two sentences (at most {max_words} words) that situate this passage "
    "within the document: name the document's subject and the section or topic the "
    "passage belongs to, and spell out who or what it refers to, so that the passage "
    "can be found by search on its own. Reply with those sentences only."
)
AUTO_CONTEXT_PROMPT = (
    "<document>\n{document}\n</document>\n\n{title_hint}"
    "Give this document a short descriptive title and summarise what it is about in one "
    "or two sentences. Reply in exactly this form:\nTitle: <title>\nSummary: <summary>"
)


def text_to_index(doc: Any, header: str | None = None) -> str:
    """Text to embed / BM25-index for a chunk: ``header + "\\n\\n" + chunk`` (chunk alone
    when it has no header). ``doc`` may be a chunk document (header from its
    ``context_header`` metadata) or a string with ``header`` given."""
    if not isinstance(doc, str):
        text = doc.page_content
        header = header if header is not None else (doc.metadata or {}).get("context_header")
    else:
        text = doc
    return f"{header}\n\n{text}" if header else text


# ------------------------------------------------------------------------ cache
class HeaderCache(TextCache):
    """Headers on disk (sqlite; ``path=None``: in memory), keyed by `key`."""

    @staticmethod
    def key(document_hash: str, start: int, end: int, model: str, prompt_hash: str) -> str:
        raw = json.dumps([document_hash, int(start), int(end), model, prompt_hash])
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()


@dataclass
class HeaderReport:
    """What one run of `ChunkHeaderWriter` (``ContextualChunkHeaders``) did."""

    documents: int = 0
    chunks: int = 0
    with_header: int = 0
    generated: int = 0  # new headers from the LLM (this run)
    cached: int = 0  # headers read from the cache
    failed: int = 0  # the LLM raised
    empty: int = 0  # the LLM answered nothing usable
    trimmed: int = 0  # answers cut to max_header_tokens
    llm_calls: int = 0
    prefix_passes: int = 0  # forward passes over a document prefix (KV cache builds)
    kv_reused: int = 0  # chunks generated from a copied prefix cache
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def without_header(self) -> int:
        return self.chunks - self.with_header

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "errors"}
        out["errors"] = list(self.errors[:20])
        return out


# -------------------------------------------------------------------- main class
class ChunkHeaderWriter:
    """Write a context header for every chunk of a document (framework-free core).

    Documents are document-like (``page_content``, ``metadata``, ``id``: a
    ``PlainDocument``, a LangChain ``Document``); the chunks returned are built by
    `_make` (``PlainDocument`` s here; the LangChain face
    `ContextualChunkHeaders` makes LangChain ``Document`` s).

    Args:
        llm: any LangChain LLM / chat model, a `LocalLLM`
            or ``None`` (the local default model, loaded on first use).
        mode: ``"contextual"`` (one header per chunk) or ``"auto"`` (one title+summary
            header per document, prefixed to all its chunks).
        cache_path: sqlite file for the header cache (``None``: in memory only).
        max_header_tokens: headers are trimmed to this many cl100k tokens.
        max_new_tokens: generation limit of the local model (default
            ``max_header_tokens + 28``, room for a label the cleaner removes).
        max_document_tokens: longest document (cl100k tokens) given whole; longer
            ones are cut into sections of this size.
        chunk_size: chunk length in cl100k tokens when chunks are cut here (the
            `SlidingWindowIndex` default, 50).
        index: a ``SlidingWindowIndex`` whose own chunking (``index.plan``) is used
            instead, so the headers match the index's chunks exactly.
        use_kv_cache: reuse the document prefix's KV cache with the local model.
        model_name: name used in cache keys (default: derived from the LLM).
        show_progress: tqdm progress bar over chunks.
        document_prompt, chunk_prompt, auto_prompt: prompt templates (``{document}``;
            ``{chunk}``, ``{max_words}``; ``{document}``, ``{title_hint}``).
    """

    def __init__(
        self,
        llm: Any = None,
        *,
        mode: str = "contextual",
        cache_path: str | os.PathLike | None = None,
        max_header_tokens: int = 100,
        max_new_tokens: int | None = None,
        max_document_tokens: int = 6000,
        chunk_size: int = 50,
        index: Any = None,
        use_kv_cache: bool = True,
        model_name: str | None = None,
        show_progress: bool = True,
        document_prompt: str = CONTEXT_DOCUMENT_PROMPT,
        chunk_prompt: str = CONTEXT_CHUNK_PROMPT,
        auto_prompt: str = AUTO_CONTEXT_PROMPT,
        encoding_name: str = DEFAULT_ENCODING,
    ) -> None:
        if mode not in ("contextual", "auto"):
            raise ValueError(f"mode must be 'contextual' or 'auto', got {mode!r}")
        for name, value in (("max_header_tokens", max_header_tokens), ("max_document_tokens", max_document_tokens),
                            ("chunk_size", chunk_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if "{document}" not in document_prompt or "{chunk}" not in chunk_prompt or "{document}" not in auto_prompt:
            raise ValueError("prompts need {document} (document/auto prompt) and {chunk} (chunk prompt)")
        self._llm = llm
        self.mode = mode
        self.cache = HeaderCache(cache_path)
        self.max_header_tokens = max_header_tokens
        self.max_new_tokens = max_new_tokens or max_header_tokens + 28
        self.max_document_tokens = max_document_tokens
        self.chunk_size = chunk_size
        self.index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
        self.use_kv_cache = use_kv_cache
        self._model_name = model_name
        self.show_progress = show_progress
        self.document_prompt = document_prompt
        self.chunk_prompt = chunk_prompt
        self.auto_prompt = auto_prompt
        self.encoding_name = encoding_name
        self.last_report = HeaderReport()

    # ------------------------------------------------------------- properties
    @property
    def llm(self) -> Any:
        if self._llm is None:
            from swrag_integrations.llm import load_llama3

            self._llm = load_llama3()
        return self._llm

    @property
    def model_name(self) -> str:
        return self._model_name or model_name_of(self.llm)

    @property
    def prompt_hash(self) -> str:
        parts = [self.mode, str(self.max_header_tokens), str(self._section_tokens())]
        parts += [self.document_prompt, self.chunk_prompt] if self.mode == "contextual" else [self.auto_prompt]
        return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:16]

    # --------------------------------------------------------------- chunking
    def _make(self, page_content: str, metadata: dict[str, Any], id: str | None = None) -> Any:
        """One output chunk (the faces override this to build their framework's document)."""
        return PlainDocument(page_content=page_content, metadata=metadata, id=id)

    def split(self, document: Any) -> list[Any]:
        """The document's chunks (exact text and offsets), without headers."""
        if self.index is not None:  # the index's own small chunks
            rec = plan_source(document, self.index.config)
            return [self._make(page_content=rec.chunk_text(i), metadata=rec.chunk_metadata(i, self.index.config.medium_size),
                             id=chunk_id(rec.source_id, i)) for i in range(rec.n_chunks)]
        text = document.page_content
        sid = (document.metadata or {}).get("source_id") or source_id_for(document)
        out = []
        spans = iter_windows(text, "FFS", self.chunk_size, self.chunk_size, unit="token", encoding_name=self.encoding_name)
        for i, (a, b) in enumerate(spans):
            meta = dict(document.metadata or {})
            meta.update(source_id=sid, chunk_index=i, start_index=int(a), end_index=int(b))
            out.append(self._make(page_content=text[a:b], metadata=meta, id=chunk_id(sid, i)))
        return out

    # -------------------------------------------------------------- public API
    def transform_documents(self, documents: Sequence[Any], **kwargs: Any) -> Sequence[Any]:
        """Split each document and annotate its chunks (report: ``last_report``)."""
        pairs = [(doc, self.split(doc)) for doc in documents if doc.page_content and doc.page_content.strip()]
        return self._run(pairs)

    def annotate(self, document: Any, chunks: Sequence[Any] | None = None) -> list[Any]:
        """Annotate the chunks of one document.

        ``chunks``: chunk documents with ``start_index``/``end_index`` (their text
        must equal ``document[start:end]``), or ``(start, end)`` tuples; ``None`` cuts
        the document with `split`.
        """
        if isinstance(document, str):
            document = PlainDocument(page_content=document)
        if chunks is None:
            chunk_docs = self.split(document)
        else:
            chunk_docs = self._check_chunks(document, chunks)
        return self._run([(document, chunk_docs)])

    def annotate_chunks(self, chunks: Sequence[Any], sources: Mapping[str, Any]) -> list[Any]:
        """Annotate chunk documents of several sources; ``sources`` maps each chunk's
        ``source_id`` to the full text (or a document). Output keeps the input order."""
        groups: dict[str, list[tuple[int, Any]]] = {}
        for pos, chunk in enumerate(chunks):
            sid = (chunk.metadata or {}).get("source_id")
            if sid is None or sid not in sources:
                raise ValueError(f"chunk {pos} has source_id {sid!r} which is not in sources")
            groups.setdefault(str(sid), []).append((pos, chunk))
        pairs = []
        positions = []
        for sid, items in groups.items():
            src = sources[sid]
            doc = PlainDocument(page_content=src, metadata={"source_id": sid}) if isinstance(src, str) else src
            pairs.append((doc, self._check_chunks(doc, [c for _, c in items])))
            positions.extend(p for p, _ in items)
        out = self._run(pairs)
        ordered: list[Any] = [None] * len(chunks)
        for p, d in zip(positions, out):
            ordered[p] = d
        return [d for d in ordered if d is not None]

    def header_map(self, chunks: Iterable[Any]) -> dict[str, str]:
        """``{chunk text: header}`` for `HeadedEmbedder` (``ContextualEmbeddings``)."""
        return {c.page_content: c.metadata["context_header"] for c in chunks if (c.metadata or {}).get("context_header")}

    # ------------------------------------------------------------- internals
    def _check_chunks(self, document: Any, chunks: Sequence[Any]) -> list[Any]:
        text = document.page_content
        out = []
        for i, chunk in enumerate(chunks):
            if hasattr(chunk, "page_content"):
                meta = dict(chunk.metadata or {})
                if "start_index" not in meta:
                    raise ValueError(f"chunk {i} has no start_index metadata")
                a = int(meta["start_index"])
                b = int(meta.get("end_index", a + len(chunk.page_content)))
                if text[a:b] != chunk.page_content:
                    raise ValueError(f"chunk {i}: text differs from document[{a}:{b}]")
                out.append(self._make(page_content=chunk.page_content, metadata={**meta, "end_index": b},
                                      id=getattr(chunk, "id", None)))
            else:
                a, b = int(chunk[0]), int(chunk[1])
                if not 0 <= a <= b <= len(text):
                    raise ValueError(f"chunk {i}: bad span ({a}, {b}) for a document of {len(text)} characters")
                meta = dict(document.metadata or {})
                meta.update(chunk_index=i, start_index=a, end_index=b)
                out.append(self._make(page_content=text[a:b], metadata=meta))
        return out

    def _run(self, pairs: list[tuple[Any, list[Any]]]) -> list[Any]:
        from tqdm.auto import tqdm

        report = HeaderReport(documents=len(pairs), chunks=sum(len(c) for _, c in pairs))
        self.last_report = report
        started = time.perf_counter()
        out: list[Any] = []
        with tqdm(total=report.chunks, desc=f"Chunk headers ({self.mode})", unit="chunk",
                  disable=not self.show_progress) as bar:
            for document, chunks in pairs:
                if not chunks:
                    continue
                if self.mode == "auto":
                    headers = self._auto_headers(document, chunks, report)
                else:
                    headers = self._contextual_headers(document, chunks, report, bar)
                for chunk, header in zip(chunks, headers):
                    meta = dict(chunk.metadata or {})
                    meta["context_mode"] = self.mode
                    if header:
                        meta["context_header"] = header
                        report.with_header += 1
                    else:
                        meta.pop("context_header", None)
                    out.append(self._make(page_content=chunk.page_content, metadata=meta, id=getattr(chunk, "id", None)))
                if self.mode == "auto":
                    bar.update(len(chunks))
                bar.set_postfix(cached=report.cached, new=report.generated, failed=report.failed + report.empty)
        report.seconds = time.perf_counter() - started
        return out

    def _finish(self, raw: str | None, report: HeaderReport) -> str | None:
        header = clean_header(raw or "")
        if not header:
            report.empty += 1
            return None
        header, trimmed = trim_to_tokens(header, self.max_header_tokens, self.encoding_name)
        if trimmed:
            report.trimmed += 1
        return header or None

    def _fail(self, report: HeaderReport, where: str, exc: BaseException) -> None:
        report.failed += 1
        if len(report.errors) < 50:
            report.errors.append(f"{where}: {type(exc).__name__}: {exc}")

    @staticmethod
    def _doc_hash(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _section_tokens(self) -> int:
        """Section size: ``max_document_tokens``, capped for the local model so that a
        section, the chunk prompt and the header fit its context window (model tokens
        are assumed to be at most 4/3 of cl100k tokens)."""
        size = self.max_document_tokens
        core = local_core(self._llm) if self._llm is not None else None
        if core is not None:
            room = core.context_window - self.max_new_tokens - 2 * self.chunk_size - 400
            size = max(256, min(size, int(room * 0.75)))
        return size

    def _sections(self, text: str) -> list[tuple[int, int]]:
        size = self._section_tokens()
        if count_tokens(text, self.encoding_name) <= size:
            return [(0, len(text))]
        return [(int(a), int(b)) for a, b in iter_windows(
            text, "FFS", size, size, unit="token", encoding_name=self.encoding_name)]

    # ----------------------------------------------------- contextual mode
    def _contextual_headers(self, document: Any, chunks: list[Any], report: HeaderReport, bar: Any) -> list[str | None]:
        text = document.page_content
        doc_hash = self._doc_hash(text)
        model, prompt_hash = self.model_name, self.prompt_hash
        headers: list[str | None] = [None] * len(chunks)
        keys = []
        pending: list[int] = []
        for i, chunk in enumerate(chunks):
            a, b = int(chunk.metadata["start_index"]), int(chunk.metadata["end_index"])
            key = HeaderCache.key(doc_hash, a, b, model, prompt_hash)
            keys.append(key)
            hit = self.cache.get(key)
            if hit is not None:
                headers[i] = hit
                report.cached += 1
                bar.update(1)
            else:
                pending.append(i)
        if not pending:
            return headers
        sections = self._sections(text)
        by_section: dict[int, list[int]] = {}
        for i in pending:
            a, b = int(chunks[i].metadata["start_index"]), int(chunks[i].metadata["end_index"])
            mid = (a + b) // 2
            s = next((k for k, (sa, sb) in enumerate(sections) if sa <= mid < sb), len(sections) - 1)
            by_section.setdefault(s, []).append(i)
        for s, idxs in by_section.items():
            sa, sb = sections[s]
            section_text = text[sa:sb]
            chunk_texts = [chunks[i].page_content for i in idxs]

            def done(k: int, raw: str | None, error: BaseException | None) -> None:
                i = idxs[k]
                if error is not None:
                    self._fail(report, f"chunk {i}", error)
                else:
                    header = self._finish(raw, report)
                    if header:
                        headers[i] = header
                        report.generated += 1
                        self.cache.put(keys[i], header, model)
                bar.update(1)

            self._generate_section(section_text, chunk_texts, report, done)
        return headers

    def _generate_section(self, section: str, chunk_texts: list[str], report: HeaderReport, done: Any) -> None:
        document_part = self.document_prompt.format(document=section)
        max_words = max(10, int(self.max_header_tokens * 0.7))
        chunk_parts = [self.chunk_prompt.format(chunk=c, max_words=max_words) for c in chunk_texts]
        llm = self.llm
        core = local_core(llm)
        if core is None:
            for k, part in enumerate(chunk_parts):
                try:
                    report.llm_calls += 1
                    raw = llm_text(llm.invoke(document_part + part))
                except Exception as exc:  # noqa: BLE001 - counted, never raised
                    done(k, None, exc)
                    continue
                done(k, raw, None)
            return
        cache = None
        if self.use_kv_cache:
            try:
                cache = core.prefix_cache(document_part)
                report.prefix_passes += cache.passes
            except Exception as exc:  # noqa: BLE001 - fall back to uncached generation
                if len(report.errors) < 50:
                    report.errors.append(f"prefix cache: {type(exc).__name__}: {exc} (uncached calls used)")
                cache = None
        options = {"max_new_tokens": self.max_new_tokens, "temperature": 0.0}  # greedy headers
        for k, part in enumerate(chunk_parts):
            try:
                report.llm_calls += 1
                if cache is not None:
                    reused = cache.reused
                    raw = cache.generate(part, **options)
                    report.kv_reused += cache.reused - reused
                else:
                    raw = core.generate(document_part + part, **options)
            except Exception as exc:  # noqa: BLE001
                done(k, None, exc)
                continue
            done(k, raw, None)

    # ---------------------------------------------------------------- auto mode
    def _auto_headers(self, document: Any, chunks: list[Any], report: HeaderReport) -> list[str | None]:
        text = document.page_content
        key = HeaderCache.key(self._doc_hash(text), 0, len(text), self.model_name, self.prompt_hash)
        header = self.cache.get(key)
        if header is not None:
            report.cached += len(chunks)
            return [header] * len(chunks)
        head, _ = trim_to_tokens(text, self.max_document_tokens, self.encoding_name)
        meta = document.metadata or {}
        title = meta.get("title")
        hint = f"(Its given title is: {title}.)\n" if title else ""
        prompt = self.auto_prompt.format(document=head, title_hint=hint)
        llm = self.llm
        core = local_core(llm)
        try:
            report.llm_calls += 1
            if core is not None:
                raw = core.generate(prompt, max_new_tokens=self.max_new_tokens + 24)
            else:
                raw = llm_text(llm.invoke(prompt))
        except Exception as exc:  # noqa: BLE001
            self._fail(report, "auto context", exc)
            report.failed += len(chunks) - 1
            return [None] * len(chunks)
        header = self._finish(_auto_header(raw, title), report)
        if not header:
            report.empty += len(chunks) - 1
            return [None] * len(chunks)
        self.cache.put(key, header, self.model_name)
        report.generated += len(chunks)
        return [header] * len(chunks)


def _auto_header(raw: str | None, title: str | None) -> str:
    """``Document: <title>. <summary>`` from a ``Title: ... / Summary: ...`` answer."""
    raw = (raw or "").strip()
    if not raw:
        return ""
    t = re.search(r"title\s*:\s*(.+)", raw, flags=re.IGNORECASE)
    s = re.search(r"summary\s*:\s*(.+)", raw, flags=re.IGNORECASE | re.DOTALL)
    got_title = (t.group(1).strip().strip("\"'*") if t else "") or (title or "")
    summary = s.group(1).strip() if s else (raw if not t else "")
    summary = re.sub(r"\s+", " ", summary).strip()
    if got_title and summary:
        return f"Document: {got_title.rstrip('.')}. {summary}"
    return f"Document: {got_title.rstrip('.')}." if got_title else summary


class HeadedEmbedder:
    """Embed ``header + "\\n\\n" + chunk`` for chunks that have a header (framework-free).

    Wraps any embedder (``embed_documents``/``embed_query``); ``headers`` maps a chunk's
    exact text to its header (`ChunkHeaderWriter.header_map`). Texts without a
    header and queries are embedded unchanged. Give it to an index as its embedding and
    the index stores exact chunks but searches headed vectors. The LangChain face
    (an ``Embeddings``) is `ContextualEmbeddings`.
    """

    def __init__(self, base: Any, headers: Mapping[str, str]) -> None:
        self.base = base
        self.headers = dict(headers)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.base.embed_documents([text_to_index(t, self.headers.get(t)) for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.base.embed_query(text)


# The LangChain classes moved to the face module; the old names still resolve, with a warning.
__getattr__ = moved_names_getattr(__name__)
