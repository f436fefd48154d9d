"""Sliding-window index: small-chunk vectors in Chroma, each source text stored once.

Every source document is cut into *small chunks* (default 50 cl100k tokens, FFS with
step == size, so they tile the text exactly). Only their vectors go to Chroma, in a
collection that holds nothing else (so dense search needs no metadata filter), with
the metadata ``source_id`` and ``chunk_index``. The source text itself, and per chunk
its offsets, token count and window range (chunk indices ``window_lower_bound`` /
``window_upper_bound`` and character offsets ``window_start_index`` /
``window_end_index``), live once per source in a *source store*
(:mod:`swrag_integrations.retrieval.store`): a SQLite file beside the Chroma data for a
local ``persist_directory``, or a ``<collection>_sources`` collection on a Chroma
server / caller-given client. A chunk's text is ``source_text[start:end]``; windows and
*medium chunks* (``medium_size`` consecutive small chunks, never searched densely) are
not stored at all but derived from those arrays at query time.

Ids are deterministic (``<source_id>:s:<i>``) so re-adding a document is a no-op and a
changed document overwrites its record and vectors (stale vectors are deleted). The
BM25 index is saved beside the data (``<dir>/bm25/<collection>``) as ``.npy`` + JSON; a
state token shared with the collection metadata detects a BM25 index that is out of
date (e.g. after a crash) and rebuilds it from the source store.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import os
import re
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from ..windows import DEFAULT_ENCODING, STRATEGIES, get_encoding, iter_windows
from .bm25 import BM25Index, CJKBM25Retriever
from .store import END, N_TOKENS, START, WIN_HI, WIN_LO, ChromaSourceStore, SourceRecord, SqliteSourceStore

__all__ = [
    "SlidingWindowIndex",
    "DenseChunkRetriever",
    "IndexConfig",
    "ChunkRecord",
    "load_files",
    "source_key",
    "source_id_for",
    "validate_collection_name",
]

logger = logging.getLogger(__name__)

_FORMAT = 2
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")
_RESERVED = {
    "source_id", "level", "chunk_index", "medium_index", "start_index", "end_index", "n_tokens",
    "window_lower_bound", "window_upper_bound", "window_start_index", "window_end_index",
    "first_chunk", "last_chunk", "n_chunks", "content_hash", "chunk_id",
}
_SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".pdf", ".csv")


def validate_collection_name(name: str) -> str:
    """Chroma's rule: 3-512 chars of ``[A-Za-z0-9._-]``, alphanumeric at both ends."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise ValueError(
            f"invalid collection_name {name!r}: use 3-512 characters from [A-Za-z0-9._-], "
            "starting and ending with a letter or digit, without '..'"
        )
    return name


def source_key(doc: Document) -> str:
    """The identity of a source document (what decides 'same document, new version').

    ``Document.id`` if set; else ``metadata["source"]`` (plus ``page``/``row`` when
    present, so pages of one PDF stay apart); else the text itself.
    """
    if doc.id:
        return f"id:{doc.id}"
    meta = doc.metadata or {}
    if meta.get("source") not in (None, ""):
        key = f"source:{meta['source']}"
        for extra in ("page", "row"):
            if extra in meta:
                key += f"#{extra}={meta[extra]}"
        return key
    return "text:" + hashlib.sha1(doc.page_content.encode("utf-8", "surrogatepass")).hexdigest()


def source_id_for(doc: Document) -> str:
    """Stable 16-hex-digit id of a document's source (hash of :func:`source_key`)."""
    return hashlib.sha1(source_key(doc).encode("utf-8", "surrogatepass")).hexdigest()[:16]


# --------------------------------------------------------------------------- files


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return raw.decode("utf-8", errors="replace")


def load_files(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Document]:
    """Load ``.txt``/``.md`` (one document), ``.pdf`` (pypdf; pages joined by a blank
    line, one document) and ``.csv`` (one document per row, ``column: value`` lines).
    Directories are walked recursively for these suffixes."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix.lower() in _SUPPORTED_SUFFIXES))
        elif path.is_file():
            if path.suffix.lower() not in _SUPPORTED_SUFFIXES:
                raise ValueError(f"unsupported file type {path.suffix!r} ({path}); supported: {', '.join(_SUPPORTED_SUFFIXES)}")
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
    docs: list[Document] = []
    for path in files:
        suffix = path.suffix.lower()
        source = str(path.resolve())
        if suffix == ".pdf":
            from pypdf import PdfReader

            reader = PdfReader(str(path))
            pages = [(page.extract_text() or "") for page in reader.pages]
            docs.append(Document(page_content="\n\n".join(pages), metadata={"source": source, "n_pages": len(pages)}))
        elif suffix == ".csv":
            with open(path, newline="", encoding="utf-8-sig") as fh:
                for row_no, row in enumerate(csv.DictReader(fh)):
                    text = "\n".join(f"{k}: {v}" for k, v in row.items() if k is not None)
                    docs.append(Document(page_content=text, metadata={"source": source, "row": row_no}))
        else:
            docs.append(Document(page_content=_read_text(path), metadata={"source": source}))
    return docs


# -------------------------------------------------------------------------- config


@dataclass(frozen=True)
class IndexConfig:
    """How documents are cut; stored in the collection metadata and checked on reopen."""

    chunk_size: int = 50
    medium_size: int = 3
    strategy: str = "chunks"
    window_size: int = 6
    step: int = 3
    unit: str = "token"
    delimiters: tuple[str, ...] | None = None
    encoding_name: str = DEFAULT_ENCODING

    def __post_init__(self) -> None:
        for name in ("chunk_size", "medium_size", "window_size", "step"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        strategy = self.strategy.upper() if isinstance(self.strategy, str) else self.strategy
        if strategy == "CHUNKS":
            strategy = "chunks"
        if strategy not in ("chunks", *STRATEGIES):
            raise ValueError(f"unknown strategy {self.strategy!r}: use 'chunks' (windows of small chunks), 'FFS', 'DFS' or 'DDS'")
        object.__setattr__(self, "strategy", strategy)
        if self.unit not in ("token", "char"):
            raise ValueError(f"unit must be 'token' or 'char', got {self.unit!r}")
        if strategy == "chunks" and self.step > self.window_size:
            raise ValueError(f"step ({self.step}) > window_size ({self.window_size}) would leave chunks outside every window")
        if self.delimiters is not None:
            object.__setattr__(self, "delimiters", tuple(self.delimiters))
        if self.unit == "token":
            get_encoding(self.encoding_name)
        if strategy != "chunks":  # validate window parameters early
            next(iter(iter_windows("x", strategy, self.window_size, self.step, unit=self.unit,
                                   delimiters=self.delimiters, encoding_name=self.encoding_name)), None)

    @classmethod
    def resolve(cls, *, strategy=None, window_size=None, step=None, **kwargs: Any) -> "IndexConfig":
        strategy = strategy or "chunks"
        chunk_size = kwargs.get("chunk_size") or 50
        if isinstance(strategy, str) and strategy.lower() == "chunks":
            window_size = window_size if window_size is not None else 6
            step = step if step is not None else 3
        elif isinstance(strategy, str) and strategy.upper() == "DDS":
            window_size = window_size if window_size is not None else 6 * chunk_size
            step = step if step is not None else 3
        else:
            window_size = window_size if window_size is not None else 6 * chunk_size
            step = step if step is not None else 3 * chunk_size
        clean = {k: v for k, v in kwargs.items() if v is not None}
        return cls(strategy=strategy, window_size=window_size, step=step, **clean)

    def to_json(self) -> str:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["delimiters"] = list(self.delimiters) if self.delimiters is not None else None
        return json.dumps(data, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "IndexConfig":
        data = json.loads(text)
        if data.get("delimiters") is not None:
            data["delimiters"] = tuple(data["delimiters"])
        return cls(**data)


@dataclass
class ChunkRecord:
    """One planned record (small or medium chunk)."""

    id: str
    text: str | None
    metadata: dict[str, Any]


@dataclass
class _Plan:
    source_id: str
    content_hash: str
    record: SourceRecord
    medium_size: int

    def ids(self) -> list[str]:
        return [f"{self.source_id}:s:{i}" for i in range(self.record.n_chunks)]

    def texts(self) -> list[str]:
        return [self.record.chunk_text(i) for i in range(self.record.n_chunks)]

    @property
    def small(self) -> list[ChunkRecord]:
        rec = self.record
        return [ChunkRecord(f"{self.source_id}:s:{i}", rec.chunk_text(i), rec.chunk_metadata(i, self.medium_size))
                for i in range(rec.n_chunks)]

    @property
    def medium(self) -> list[ChunkRecord]:
        rec = self.record
        return [ChunkRecord(f"{self.source_id}:m:{j}", None, rec.medium_metadata(j, self.medium_size))
                for j in range(rec.n_mediums(self.medium_size))]

    @property
    def groups(self) -> list[tuple[int, int]]:  # medium j -> small chunk range [first, last]
        m, n = self.medium_size, self.record.n_chunks
        return [(f, min(f + m, n) - 1) for f in range(0, n, m)]


def _clean_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in (meta or {}).items():
        if key in _RESERVED or not isinstance(key, str):
            continue
        if isinstance(value, (str, bool, int, float)) and not (isinstance(value, float) and not np.isfinite(value)):
            out[key] = value
    return out


# ---------------------------------------------------------------------------- index


class SlidingWindowIndex:
    """Small chunks + medium chunks + window ranges in Chroma, with a BM25 side index.

    Args:
        persist_directory: directory for the embedded ``chromadb.PersistentClient``
            (data in ``<dir>/chroma``, BM25 in ``<dir>/bm25/<collection>``). Default
            ``.swrag/index`` when neither ``host`` nor ``client`` is given.
        collection_name: Chroma collection (3-512 chars of ``[A-Za-z0-9._-]``).
        embedding: any LangChain ``Embeddings``; default the bundled MiniLM.
        host, port, ssl, headers: use a running Chroma server (``chromadb.HttpClient``).
        client: an existing chromadb client (then ``bm25_directory`` says where the
            BM25 index lives; without it BM25 is rebuilt from Chroma on open).
        bm25_directory: where to persist BM25 (overrides the default location).
        chunk_size: small-chunk length in ``unit`` (default 50 tokens).
        medium_size: small chunks per medium chunk (default 3).
        strategy: ``"chunks"`` (windows of ``window_size`` small chunks moving by
            ``step`` chunks; default W=6, S=3) or ``"FFS"``/``"DFS"``/``"DDS"``
            (windows from :func:`~swrag_integrations.windows.iter_windows`, sizes in
            ``unit``; default 300/150 tokens, DDS step 3 delimiters).
        unit, delimiters, encoding_name: as in :func:`iter_windows`.
        batch_size: chunks embedded (and written) per batch.
        show_progress: tqdm progress bar while indexing.
        index_text: optional ``chunk text -> text to index`` used for BM25 and embeddings
            (e.g. contextual chunk headers: ``lambda t: text_to_index(t, headers.get(t))``
            with :mod:`swrag_integrations.context`); stored chunks and offsets stay the
            source's exact text. Pass the same function when reopening the index.

    Chunking parameters left at ``None`` are taken from an existing collection; giving
    different ones than those it was built with raises ``ValueError``.
    """

    def __init__(
        self,
        persist_directory: str | os.PathLike | None = None,
        *,
        collection_name: str = "swrag",
        embedding: Embeddings | None = None,
        host: str | None = None,
        port: int | None = None,
        ssl: bool = False,
        headers: dict[str, str] | None = None,
        client: Any = None,
        bm25_directory: str | os.PathLike | None = None,
        chunk_size: int | None = None,
        medium_size: int | None = None,
        strategy: str | None = None,
        window_size: int | None = None,
        step: int | None = None,
        unit: str | None = None,
        delimiters: Sequence[str] | None = None,
        encoding_name: str | None = None,
        batch_size: int = 256,
        show_progress: bool = True,
        index_text: Callable[[str], str] | None = None,
    ) -> None:
        import chromadb
        from chromadb.config import Settings

        self.collection_name = validate_collection_name(collection_name)
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.index_text = index_text or (lambda text: text)
        if sum(x is not None for x in (persist_directory, host, client)) > 1:
            raise ValueError("give only one of persist_directory, host or client")
        settings = Settings(anonymized_telemetry=False)
        self.persist_directory: Path | None = None
        self.server: str | None = None
        if client is not None:
            self.client = client
        elif host is not None:
            port = int(port or 8000)
            self.server = f"{'https' if ssl else 'http'}://{host}:{port}"
            try:
                self.client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers, settings=settings)
                self.client.heartbeat()
            except Exception as exc:  # chromadb raises ValueError / httpx errors
                raise ConnectionError(
                    f"cannot reach the Chroma server at {self.server} ({exc}). Start one with "
                    f"`chroma run --path DIR --host {host} --port {port}` or check host/port."
                ) from exc
        else:
            root = Path(persist_directory if persist_directory is not None else ".swrag/index")
            try:
                root.mkdir(parents=True, exist_ok=True)
                probe = root / f".write-test-{uuid.uuid4().hex}"
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as exc:
                raise ValueError(f"persist_directory {str(root)!r} is not a writable directory ({exc})") from exc
            self.persist_directory = root
            try:
                self.client = chromadb.PersistentClient(path=str(root / "chroma"), settings=settings)
            except Exception as exc:
                raise ValueError(f"cannot open a Chroma database in {str(root / 'chroma')!r}: {exc}") from exc
        if bm25_directory is not None:
            self.bm25_path: Path | None = Path(bm25_directory)
        elif self.persist_directory is not None:
            self.bm25_path = self.persist_directory / "bm25" / self.collection_name
        else:
            self.bm25_path = None

        requested = dict(
            chunk_size=chunk_size, medium_size=medium_size, strategy=strategy, window_size=window_size,
            step=step, unit=unit, delimiters=tuple(delimiters) if delimiters is not None else None,
            encoding_name=encoding_name,
        )
        self.collection = self._open_collection(requested)
        if self._meta.get("swrag_text") == "file":
            if self.persist_directory is None:
                raise ValueError(
                    f"collection {self.collection_name!r} keeps its texts in the local directory it was built in; "
                    "open it with persist_directory=<that directory>"
                )
            self.store: SqliteSourceStore | ChromaSourceStore = SqliteSourceStore(
                self.persist_directory / "sources" / f"{self.collection_name}.sqlite3")
        else:
            try:
                self.store = ChromaSourceStore(self.client, self._sources_name())
            except Exception as exc:
                raise self._wrap_error(exc, "open the source collection") from exc
        if embedding is None:
            from .embeddings import default_embeddings

            embedding = default_embeddings()
        self.embedding = embedding
        from langchain_chroma import Chroma

        # Plain LangChain view of the chunk vectors (its documents have no text: texts
        # live in ``self.store``; use :meth:`dense_retriever` for hydrated results).
        self.vectorstore = Chroma(
            collection_name=self.collection_name,
            embedding_function=embedding,
            client=self.client,
            create_collection_if_not_exists=False,
        )
        self.bm25 = self._open_bm25()

    def _sources_name(self) -> str:
        return validate_collection_name(self.collection_name + "_sources")

    # ------------------------------------------------------------ collection
    def _open_collection(self, requested: dict[str, Any]):
        from chromadb.errors import NotFoundError

        try:
            collection = self.client.get_collection(self.collection_name, embedding_function=None)
        except (NotFoundError, ValueError):
            collection = None
        except Exception as exc:
            raise self._wrap_error(exc, "open the collection") from exc
        if collection is not None:
            meta = collection.metadata or {}
            stored = meta.get("swrag_config")
            if stored is None:
                raise ValueError(
                    f"collection {self.collection_name!r} exists but was not created by SlidingWindowIndex; "
                    "choose another collection_name"
                )
            if meta.get("swrag_format") != _FORMAT:
                raise ValueError(
                    f"collection {self.collection_name!r} was built by an older version of SlidingWindowIndex "
                    f"(format {meta.get('swrag_format')!r}, now {_FORMAT}); delete it and index the documents again"
                )
            self.config = IndexConfig.from_json(stored)
            given = {k: v for k, v in requested.items() if v is not None}
            if given.get("strategy") is not None:
                given["strategy"] = IndexConfig.resolve(strategy=given["strategy"]).strategy
            mismatched = {k: (v, getattr(self.config, k)) for k, v in given.items() if getattr(self.config, k) != v}
            if mismatched:
                detail = ", ".join(f"{k}={v!r} (index has {s!r})" for k, (v, s) in mismatched.items())
                raise ValueError(
                    f"collection {self.collection_name!r} was built with other chunking parameters: {detail}. "
                    "Leave them unset to reuse the stored ones, or use a new collection_name."
                )
            self._meta = dict(meta)
            return collection
        self.config = IndexConfig.resolve(**requested)
        self._meta = {
            "swrag_config": self.config.to_json(), "swrag_format": _FORMAT, "swrag_state": "empty",
            "swrag_text": "file" if self.persist_directory is not None else "chroma",
        }
        if self._meta["swrag_text"] == "chroma":
            self._sources_name()  # the derived name must be valid too
        try:
            return self.client.create_collection(
                self.collection_name,
                metadata=self._meta,
                configuration={"hnsw": {"space": "cosine"}},
                embedding_function=None,
            )
        except Exception as exc:
            raise self._wrap_error(exc, "create the collection") from exc

    def _wrap_error(self, exc: Exception, action: str) -> Exception:
        if self.server is not None:
            text = str(exc).lower()
            if "connect" in text or "connection" in text or type(exc).__name__ in ("ConnectError", "ConnectTimeout", "ReadTimeout"):
                return ConnectionError(f"Chroma server at {self.server} did not answer while trying to {action}: {exc}")
        return exc

    def _set_state(self, state: str) -> None:
        self._meta["swrag_state"] = state
        self.collection.modify(metadata=dict(self._meta))

    def _stored_state(self) -> str:
        try:
            collection = self.client.get_collection(self.collection_name, embedding_function=None)
            return (collection.metadata or {}).get("swrag_state", "")
        except Exception:
            return ""

    # ------------------------------------------------------------------ BM25
    def _open_bm25(self) -> BM25Index:
        state = self._stored_state()
        if self.bm25_path is not None and (self.bm25_path / "meta.json").is_file():
            try:
                index = BM25Index.load(self.bm25_path)
                with open(self.bm25_path / "state.json", encoding="utf-8") as fh:
                    saved_state = json.load(fh).get("state")
                if saved_state == state and not state.startswith("dirty"):
                    return index
                logger.warning("BM25 index at %s is out of date; rebuilding it from the source store", self.bm25_path)
            except Exception as exc:  # unreadable / partial: rebuild
                logger.warning("BM25 index at %s unreadable (%s); rebuilding it from the source store", self.bm25_path, exc)
        index = self._rebuild_bm25()
        if self.bm25_path is not None and len(index):
            self._save_bm25(index, state)
        return index

    def _rebuild_bm25(self) -> BM25Index:
        index = BM25Index()
        for rec in self.store.iter_records():
            index.upsert([f"{rec.source_id}:s:{i}" for i in range(rec.n_chunks)],
                         [self.index_text(rec.chunk_text(i)) for i in range(rec.n_chunks)])
        return index

    def _save_bm25(self, index: BM25Index, state: str) -> None:
        if self.bm25_path is None:
            return
        index.save(self.bm25_path)
        tmp = self.bm25_path / "state.json.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"state": state}, fh)
        os.replace(tmp, self.bm25_path / "state.json")

    # -------------------------------------------------------------- planning
    def plan(self, doc: Document) -> _Plan:
        """Cut one document into its small and medium chunk records (no I/O)."""
        cfg = self.config
        text = doc.page_content
        sid = source_id_for(doc)
        content_hash = hashlib.sha1(
            (cfg.to_json() + "\x00" + text).encode("utf-8", "surrogatepass")
        ).hexdigest()[:16]
        spans = list(iter_windows(text, "FFS", cfg.chunk_size, cfg.chunk_size, unit=cfg.unit, encoding_name=cfg.encoding_name))
        n = len(spans)
        starts = np.fromiter((s.start for s in spans), dtype=np.int64, count=n)
        ends = np.fromiter((s.end for s in spans), dtype=np.int64, count=n)
        # exact cl100k-style token count of each chunk on its own (used for budgets)
        encoding = get_encoding(cfg.encoding_name)
        n_tokens = np.fromiter(
            (len(t) for t in encoding.encode_ordinary_batch([text[a:b] for a, b in spans])), dtype=np.int64, count=n
        )
        # window bounds of each small chunk (union of the windows holding it)
        idx = np.arange(n, dtype=np.int64)
        if cfg.strategy == "chunks":
            w, s = cfg.window_size, cfg.step
            n_windows = 1 if n <= w else -(-(n - w) // s) + 1
            k_min = np.maximum(0, -(-(idx - w + 1) // s))
            k_max = np.minimum(idx // s, n_windows - 1)
            lower = k_min * s
            upper = np.minimum(k_max * s + w, n) - 1
            win_start, win_end = starts[lower], ends[upper]
        else:
            win_start = starts.copy()
            win_end = ends.copy()
            for ws, we in iter_windows(text, cfg.strategy, cfg.window_size, cfg.step, unit=cfg.unit,
                                       delimiters=cfg.delimiters, encoding_name=cfg.encoding_name):
                c_lo = int(np.searchsorted(starts, ws, side="right")) - 1
                c_hi = int(np.searchsorted(starts, we, side="left")) - 1
                if c_hi < c_lo:
                    continue
                sl = slice(max(c_lo, 0), c_hi + 1)
                np.minimum(win_start[sl], ws, out=win_start[sl])
                np.maximum(win_end[sl], we, out=win_end[sl])
            lower = np.searchsorted(starts, win_start, side="right") - 1
            upper = np.searchsorted(starts, win_end, side="left") - 1
        arrays = np.stack([starts, ends, n_tokens, lower, upper, win_start, win_end]).astype(np.int64)
        record = SourceRecord(sid, content_hash, text, arrays, _clean_metadata(doc.metadata), complete=False)
        return _Plan(sid, content_hash, record, self.config.medium_size)

    # ---------------------------------------------------------------- adding
    def add_documents(self, documents: Iterable[Document]) -> dict[str, int]:
        """Index documents; returns counts ``added``, ``replaced``, ``unchanged``,
        ``skipped_empty``, ``chunks``.

        Re-adding an unchanged document writes nothing. A document whose text changed
        (same :func:`source_key`) has its record and chunk vectors overwritten and its
        stale vectors deleted. Each source is written to the source store first (text,
        offsets; marked incomplete), then to BM25, then its vectors to Chroma, then
        marked complete: if writing fails half-way, adding the same documents again
        completes the job.
        """
        docs = list(documents)
        if not docs:
            raise ValueError("no documents to add")
        for doc in docs:
            if not isinstance(doc, Document):
                raise TypeError(f"expected langchain Document objects, got {type(doc).__name__}")
        usable = [d for d in docs if d.page_content and not d.page_content.isspace()]
        skipped = len(docs) - len(usable)
        if not usable:
            raise ValueError(f"all {len(docs)} documents are empty (no text to index)")
        if skipped:
            warnings.warn(f"skipped {skipped} empty document(s)", stacklevel=2)
        by_sid: dict[str, Document] = {}
        for doc in usable:  # same source twice in one call: the last one wins
            by_sid[source_id_for(doc)] = doc
        try:
            existing = self.store.status(list(by_sid))
        except Exception as exc:
            raise self._wrap_error(exc, "read existing sources") from exc
        plans: list[tuple[_Plan, bool]] = []
        unchanged = replaced = 0
        for sid, doc in by_sid.items():
            old = existing.get(sid)
            plan = self.plan(doc)
            if old is not None and old == (plan.content_hash, True):
                unchanged += 1
                continue
            if old is not None:
                replaced += 1
            plans.append((plan, old is not None))
        stats = {
            "added": len(plans) - replaced, "replaced": replaced, "unchanged": unchanged,
            "skipped_empty": skipped, "chunks": sum(p.record.n_chunks for p, _ in plans),
        }
        if not plans:
            return stats
        state = uuid.uuid4().hex
        try:
            self._set_state("dirty-" + state)
            old_counts = self.store.n_chunks_of([p.source_id for p, had in plans if had]) if replaced else {}
            self.store.put([p.record for p, _ in plans])
            self.bm25.delete([f"{p.source_id}:s:{i}" for p, _ in plans
                              for i in range(p.record.n_chunks, old_counts.get(p.source_id, 0))])
            self.bm25.upsert([i for p, _ in plans for i in p.ids()],
                             [self.index_text(t) for p, _ in plans for t in p.texts()])
            self._save_bm25(self.bm25, state)
            self._set_state(state)
        except Exception as exc:
            # the store may hold part of the new sources: make BM25 agree with it again
            try:
                self.bm25 = self._rebuild_bm25()
            except Exception:  # server gone: leave the state dirty, rebuilt on reopen
                pass
            raise self._wrap_error(exc, "write sources") from exc
        try:
            self._write(plans)
        except Exception as exc:
            raise self._wrap_error(exc, "write chunk vectors") from exc
        return stats

    def add_texts(self, texts: Iterable[str], metadatas: Iterable[dict] | None = None) -> dict[str, int]:
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        if len(metas) != len(texts):
            raise ValueError(f"got {len(metas)} metadatas for {len(texts)} texts")
        return self.add_documents([Document(page_content=t, metadata=dict(m)) for t, m in zip(texts, metas)])

    def add_files(self, paths: str | os.PathLike | Iterable[str | os.PathLike]) -> dict[str, int]:
        """Load (see :func:`load_files`) and index files."""
        return self.add_documents(load_files(paths))

    def _write(self, plans: list[tuple[_Plan, bool]]) -> None:
        from tqdm.auto import tqdm

        max_batch = self.batch_size
        try:
            max_batch = min(max_batch, int(self.client.get_max_batch_size()))
        except Exception:
            pass
        records = [(pi, i) for pi, (p, _) in enumerate(plans) for i in range(p.record.n_chunks)]
        remaining = {pi: p.record.n_chunks for pi, (p, _) in enumerate(plans)}
        with tqdm(total=len(records), desc="Embedding chunks", unit="chunk", disable=not self.show_progress) as bar:
            for b in range(0, len(records), max_batch):
                batch = records[b:b + max_batch]
                embedded = self.embedding.embed_documents(
                    [self.index_text(plans[pi][0].record.chunk_text(i)) for pi, i in batch]
                )
                if len(embedded) != len(batch):
                    raise ValueError(f"embedding returned {len(embedded)} vectors for {len(batch)} texts")
                self.collection.upsert(
                    ids=[f"{plans[pi][0].source_id}:s:{i}" for pi, i in batch],
                    embeddings=np.asarray(embedded, dtype=np.float32),
                    metadatas=[{"source_id": plans[pi][0].source_id, "chunk_index": i} for pi, i in batch],
                )
                done = []
                for pi, _ in batch:
                    remaining[pi] -= 1
                    if remaining[pi] == 0:
                        done.append(pi)
                for pi in done:
                    plan, had = plans[pi]
                    if had:  # vectors of chunks past the new end are stale
                        self.collection.delete(where={"$and": [
                            {"source_id": {"$eq": plan.source_id}}, {"chunk_index": {"$gte": plan.record.n_chunks}}]})
                if done:
                    self.store.mark_complete([plans[pi][0].source_id for pi in done])
                bar.update(len(batch))

    # --------------------------------------------------------------- removal
    def delete_source(self, source: str | Document) -> int:
        """Remove a source (a :func:`source_id_for` id or a Document); returns the
        number of small chunks it had (0 if unknown)."""
        sid = source_id_for(source) if isinstance(source, Document) else str(source)
        n = self.store.n_chunks_of([sid]).get(sid)
        if n is None:
            return 0
        state = uuid.uuid4().hex
        self._set_state("dirty-" + state)
        self.collection.delete(where={"source_id": {"$eq": sid}})
        self.store.delete([sid])
        self.bm25.delete([f"{sid}:s:{i}" for i in range(n)])
        self._save_bm25(self.bm25, state)
        self._set_state(state)
        return n

    def reset(self) -> None:
        """Delete all data of this collection (keeps its configuration)."""
        self.client.delete_collection(self.collection_name)
        self._meta["swrag_state"] = "empty"
        self.collection = self.client.create_collection(
            self.collection_name, metadata=dict(self._meta), configuration={"hnsw": {"space": "cosine"}},
            embedding_function=None,
        )
        self.store.clear()
        from langchain_chroma import Chroma

        self.vectorstore = Chroma(collection_name=self.collection_name, embedding_function=self.embedding,
                                  client=self.client, create_collection_if_not_exists=False)
        self.bm25 = BM25Index()
        self._save_bm25(self.bm25, "empty")

    # ---------------------------------------------------------------- reading
    def count(self, level: str | None = "small") -> int:
        """Small chunks (``"small"``), derived medium chunks (``"medium"``) or stored
        vectors (``None``; only small chunks have vectors)."""
        if level is None:
            return self.collection.count()
        counts = self.store.n_chunks_of(None)
        if level == "small":
            return sum(counts.values())
        if level == "medium":
            m = self.config.medium_size
            return sum(-(-n // m) for n in counts.values())
        raise ValueError(f"level must be 'small', 'medium' or None, got {level!r}")

    def source_ids(self) -> list[str]:
        return self.store.ids()

    def source_text(self, source_id: str) -> str:
        rec = self.store.get(source_id)
        if rec is None:
            raise LookupError(f"no source {source_id!r} in the index")
        return rec.text

    def chunk_metadata(self, source_id: str) -> list[dict[str, Any]]:
        """Metadata of all small chunks of a source (chunk order)."""
        rec = self.store.get(source_id)
        if rec is None:
            return []
        return [rec.chunk_metadata(i, self.config.medium_size) for i in range(rec.n_chunks)]

    def get_chunks(self, ids: Sequence[str]) -> list[Document]:
        """Small/medium chunk records by id (``<sid>:s:<i>`` / ``<sid>:m:<j>``), as
        Documents (order of ``ids``; unknown ids are left out). Medium chunks have no
        stored text: theirs is the text of their small chunks."""
        parsed = []
        for cid in ids:
            sid, _, rest = str(cid).partition(":")
            level, _, num = rest.partition(":")
            if level in ("s", "m") and num.isdigit():
                parsed.append((cid, sid, level, int(num)))
        records = self.store.get_many([p[1] for p in parsed])
        m = self.config.medium_size
        out = []
        for cid, sid, level, num in parsed:
            rec = records.get(sid)
            if rec is None:
                continue
            if level == "s" and num < rec.n_chunks:
                out.append(Document(page_content=rec.chunk_text(num), metadata=rec.chunk_metadata(num, m), id=cid))
            elif level == "m" and num < rec.n_mediums(m):
                meta = rec.medium_metadata(num, m)
                out.append(Document(page_content=rec.text[meta["start_index"]:meta["end_index"]], metadata=meta, id=cid))
        return out

    def chunk_range(self, source_id: str, lower: int, upper: int) -> list[tuple[int, int, int, str]]:
        """Small chunks ``lower..upper`` of a source as ``(index, start, end, text)``."""
        return [(i, a, b, text) for i, a, b, _, text in self.fetch_ranges([(source_id, lower, upper)])[source_id]]

    def fetch_ranges(self, ranges: Sequence[tuple[str, int, int]], mode: str = "store") -> dict[str, list[tuple]]:
        """Chunk rows ``(index, start, end, n_tokens, text)`` of several ``(source_id,
        lower, upper)`` ranges, per source (sorted, deduplicated).

        ``mode="store"`` (default) slices the source record (offset arrays + text, one
        cached read per source). ``"ids"`` and ``"where"`` first ask Chroma which chunks
        of the range have vectors (by primary key, or with a metadata-range query
        ``source_id $eq`` + ``chunk_index $gte/$lte``) and keep only those; the text
        still comes from the store (Chroma holds none).
        """
        if mode not in ("store", "ids", "where"):
            raise ValueError(f"mode must be 'store', 'ids' or 'where', got {mode!r}")
        records = self.store.get_many([r[0] for r in ranges])
        wanted: dict[str, set[int]] = {}
        for sid, lower, upper in ranges:
            rec = records.get(sid)
            if rec is None:
                continue
            lo, hi = max(0, int(lower)), min(int(upper), rec.n_chunks - 1)
            wanted.setdefault(sid, set()).update(range(lo, hi + 1))
        if mode == "ids":
            ids = [f"{sid}:s:{i}" for sid, idx in wanted.items() for i in sorted(idx)]
            got = self.collection.get(ids=ids, include=["metadatas"]) if ids else {"metadatas": []}
            present = {(m["source_id"], m["chunk_index"]) for m in got["metadatas"]}
            wanted = {sid: {i for i in idx if (sid, i) in present} for sid, idx in wanted.items()}
        elif mode == "where":
            present = set()
            for sid, lower, upper in ranges:
                got = self.collection.get(where={"$and": [
                    {"source_id": {"$eq": sid}},
                    {"chunk_index": {"$gte": int(lower)}},
                    {"chunk_index": {"$lte": int(upper)}},
                ]}, include=["metadatas"])
                present.update((m["source_id"], m["chunk_index"]) for m in got["metadatas"])
            wanted = {sid: {i for i in idx if (sid, i) in present} for sid, idx in wanted.items()}
        out: dict[str, list[tuple]] = {sid: [] for sid, _, _ in ranges}
        for sid, idx in wanted.items():
            a = records[sid].arrays
            text = records[sid].text
            out[sid] = [(i, int(a[START, i]), int(a[END, i]), int(a[N_TOKENS, i]), text[a[START, i]:a[END, i]])
                        for i in sorted(idx)]
        return out

    def mediums_covering(self, source_id: str, chunk_index: int) -> list[dict[str, Any]]:
        """Metadata of the medium chunks whose window bounds cover a small chunk."""
        rec = self.store.get(source_id)
        if rec is None:
            return []
        m = self.config.medium_size
        firsts = np.arange(0, rec.n_chunks, m)
        lo = np.minimum.reduceat(rec.arrays[WIN_LO], firsts)
        hi = np.maximum.reduceat(rec.arrays[WIN_HI], firsts)
        js = np.nonzero((lo <= chunk_index) & (hi >= chunk_index))[0]
        return [rec.medium_metadata(int(j), m) for j in js]

    def span_text(self, source_id: str, start: int, end: int, *, lower: int | None = None, upper: int | None = None) -> str:
        """Exact source text ``[start, end)`` (``lower``/``upper`` are accepted for
        compatibility and ignored)."""
        if end <= start:
            return ""
        rec = self.store.get(source_id)
        if rec is None:
            raise LookupError(f"no stored source {source_id!r}")
        if start < 0 or end > len(rec.text):
            raise LookupError(f"source {source_id!r} has {len(rec.text)} characters, not {start}:{end}")
        return rec.text[start:end]

    # ------------------------------------------------------------ retrievers
    def bm25_retriever(self, k: int = 20) -> CJKBM25Retriever:
        return CJKBM25Retriever(index=self.bm25, fetch=self.get_chunks, k=k)

    def dense_retriever(self, k: int = 20, search_type: str = "mmr", *, fetch_k: int | None = None, lambda_mult: float = 0.5):
        """Dense retriever over the small-chunk vectors (no metadata filter: the
        collection holds nothing else), returning hydrated chunk Documents."""
        if search_type not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {search_type!r}")
        return DenseChunkRetriever(index=self, k=k, search_type=search_type,
                                   fetch_k=fetch_k or max(4 * k, 20), lambda_mult=lambda_mult)

    def dense_search(self, query: str, k: int = 20, *, search_type: str = "mmr", fetch_k: int | None = None,
                     lambda_mult: float = 0.5) -> list[Document]:
        """The ``k`` nearest small chunks (cosine), optionally re-ranked with MMR."""
        n = self.collection.count()
        if n == 0:
            return []
        qvec = np.asarray(self.embedding.embed_query(query), dtype=np.float32)
        if search_type == "similarity":
            got = self.collection.query(query_embeddings=[qvec], n_results=min(k, n), include=["distances"])
            ids = got["ids"][0]
            scores = [1.0 - float(d) for d in got["distances"][0]]
        else:
            fetch_k = min(fetch_k or max(4 * k, 20), n)
            got = self.collection.query(query_embeddings=[qvec], n_results=fetch_k, include=["embeddings", "distances"])
            from langchain_core.vectorstores.utils import maximal_marginal_relevance

            embs = np.asarray(got["embeddings"][0], dtype=np.float32)
            picked = maximal_marginal_relevance(qvec, embs, k=min(k, len(embs)), lambda_mult=lambda_mult)
            ids = [got["ids"][0][i] for i in picked]
            scores = [1.0 - float(got["distances"][0][i]) for i in picked]
        docs = {d.id: d for d in self.get_chunks(ids)}
        out = []
        for cid, score in zip(ids, scores):
            doc = docs.get(cid)
            if doc is not None:
                doc.metadata["dense_score"] = score
                out.append(doc)
        return out

    def hybrid_retriever(self, k: int = 20, *, search_type: str = "mmr", weights: Sequence[float] = (0.5, 0.5), c: float = 60.0):
        from .fusion import HybridRetriever

        return HybridRetriever(
            retrievers=[self.bm25_retriever(k), self.dense_retriever(k, search_type)],
            weights=list(weights), c=c, k=k, names=["bm25", "dense"],
        )

    def as_retriever(self, **kwargs: Any):
        """A :class:`~swrag_integrations.retrieval.WindowedParentRetriever` on this index."""
        from .retriever import WindowedParentRetriever

        return WindowedParentRetriever(index=self, **kwargs)

    def disk_size(self) -> int:
        """Bytes used on disk by the Chroma data, the source store and the BM25 index (local only)."""
        total = 0
        for root in (self.persist_directory, self.bm25_path if self.persist_directory is None else None):
            if root is None or not Path(root).exists():
                continue
            for path in Path(root).rglob("*"):
                if path.is_file():
                    total += path.stat().st_size
        return total

    def __repr__(self) -> str:
        where = self.server or (str(self.persist_directory) if self.persist_directory else "client")
        return f"SlidingWindowIndex({where!r}, collection_name={self.collection_name!r}, config={self.config})"


class DenseChunkRetriever(BaseRetriever):
    """LangChain retriever for :meth:`SlidingWindowIndex.dense_search`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    k: int = 20
    search_type: str = "mmr"
    fetch_k: int = 80
    lambda_mult: float = 0.5

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.index.dense_search(query, self.k, search_type=self.search_type, fetch_k=self.fetch_k,
                                       lambda_mult=self.lambda_mult)
