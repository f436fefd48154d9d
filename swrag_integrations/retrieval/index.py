"""Two-level sliding-window index in Chroma (+ a BM25 index persisted beside it).

Every source document is cut into *small chunks* (default 50 cl100k tokens, FFS with
step == size, so they tile the text exactly) which are embedded and stored, and into
*medium chunks* (default 3 small chunks) which are stored as metadata only (their
vector is the normalised mean of their small chunks' vectors, their text is not
stored). Windows are never stored as text: every small chunk carries the range of the
window(s) it belongs to, as chunk indices (``window_lower_bound`` /
``window_upper_bound``) and as character offsets (``window_start_index`` /
``window_end_index``), and the window text is rebuilt at query time from the stored
small chunks with a metadata-range query.

Ids are deterministic (``<source_id>:s:<i>`` / ``<source_id>:m:<j>``) so re-adding a
document is a no-op and a changed document overwrites its chunks (stale ones are
deleted). The BM25 index is saved next to the Chroma data (``<dir>/bm25/<collection>``)
as ``.npy`` + JSON; a state token shared with the collection metadata detects a BM25
index that is out of date (e.g. after a crash) and rebuilds it from Chroma.
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
from typing import Any, Iterable, Sequence

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ..windows import DEFAULT_ENCODING, STRATEGIES, get_encoding, iter_windows
from .bm25 import BM25Index, CJKBM25Retriever

__all__ = [
    "SlidingWindowIndex",
    "IndexConfig",
    "ChunkRecord",
    "load_files",
    "source_key",
    "source_id_for",
    "validate_collection_name",
]

logger = logging.getLogger(__name__)

_FORMAT = 1
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
    small: list[ChunkRecord]
    medium: list[ChunkRecord]
    groups: list[tuple[int, int]]  # medium j -> small chunk range [first, last]


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
    ) -> None:
        import chromadb
        from chromadb.config import Settings

        self.collection_name = validate_collection_name(collection_name)
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        self.batch_size = batch_size
        self.show_progress = show_progress
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
        if embedding is None:
            from .embeddings import default_embeddings

            embedding = default_embeddings()
        self.embedding = embedding
        from langchain_chroma import Chroma

        self.vectorstore = Chroma(
            collection_name=self.collection_name,
            embedding_function=embedding,
            client=self.client,
            create_collection_if_not_exists=False,
        )
        self.bm25 = self._open_bm25()

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
        self._meta = {"swrag_config": self.config.to_json(), "swrag_format": _FORMAT, "swrag_state": "empty"}
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
                logger.warning("BM25 index at %s is out of date; rebuilding it from Chroma", self.bm25_path)
            except Exception as exc:  # unreadable / partial: rebuild
                logger.warning("BM25 index at %s unreadable (%s); rebuilding it from Chroma", self.bm25_path, exc)
        index = self._rebuild_bm25()
        if self.bm25_path is not None and len(index):
            self._save_bm25(index, state)
        return index

    def _rebuild_bm25(self) -> BM25Index:
        index = BM25Index()
        page = 5000
        offset = 0
        while True:
            got = self.collection.get(where={"level": "small"}, include=["documents"], limit=page, offset=offset)
            ids = got["ids"]
            if not ids:
                break
            index.upsert(ids, [d or "" for d in got["documents"]])
            offset += len(ids)
            if len(ids) < page:
                break
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
        m = cfg.medium_size
        base = _clean_metadata(doc.metadata)
        small: list[ChunkRecord] = []
        for i in range(n):
            meta = dict(base)
            meta.update(
                source_id=sid, level="small", chunk_index=i, start_index=int(starts[i]), end_index=int(ends[i]),
                n_tokens=int(n_tokens[i]), window_lower_bound=int(lower[i]), window_upper_bound=int(upper[i]),
                window_start_index=int(win_start[i]), window_end_index=int(win_end[i]), medium_index=i // m,
                n_chunks=n, content_hash=content_hash, chunk_id=f"{sid}:s:{i}",
            )
            small.append(ChunkRecord(f"{sid}:s:{i}", text[starts[i]:ends[i]], meta))
        medium: list[ChunkRecord] = []
        groups = []
        for j, first in enumerate(range(0, n, m)):
            last = min(first + m, n) - 1
            meta = dict(base)
            meta.update(
                source_id=sid, level="medium", medium_index=j, first_chunk=first, last_chunk=last,
                start_index=int(starts[first]), end_index=int(ends[last]),
                n_tokens=int(n_tokens[first:last + 1].sum()),
                window_lower_bound=int(lower[first:last + 1].min()), window_upper_bound=int(upper[first:last + 1].max()),
                window_start_index=int(win_start[first:last + 1].min()), window_end_index=int(win_end[first:last + 1].max()),
                n_chunks=n, content_hash=content_hash, chunk_id=f"{sid}:m:{j}",
            )
            medium.append(ChunkRecord(f"{sid}:m:{j}", None, meta))
            groups.append((first, last))
        return _Plan(sid, content_hash, small, medium, groups)

    # ---------------------------------------------------------------- adding
    def _existing(self, source_ids: list[str]) -> dict[str, tuple[set[str], set[str]]]:
        found: dict[str, tuple[set[str], set[str]]] = {}
        for i in range(0, len(source_ids), 100):
            batch = source_ids[i:i + 100]
            got = self.collection.get(where={"source_id": {"$in": batch}}, include=["metadatas"])
            for rid, meta in zip(got["ids"], got["metadatas"]):
                sid = (meta or {}).get("source_id")
                ids, hashes = found.setdefault(sid, (set(), set()))
                ids.add(rid)
                hashes.add((meta or {}).get("content_hash"))
        return found

    def add_documents(self, documents: Iterable[Document]) -> dict[str, int]:
        """Index documents; returns counts ``added``, ``replaced``, ``unchanged``,
        ``skipped_empty``, ``chunks``.

        Re-adding an unchanged document writes nothing. A document whose text changed
        (same :func:`source_key`) has its chunks overwritten and its stale chunks
        deleted. If writing fails half-way, the old data stays readable and adding the
        same documents again completes the job (the BM25 side index is rebuilt from
        Chroma when it is found out of date).
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
            existing = self._existing(list(by_sid))
        except Exception as exc:
            raise self._wrap_error(exc, "read existing chunks") from exc
        plans: list[tuple[_Plan, set[str]]] = []
        unchanged = replaced = 0
        for sid, doc in by_sid.items():
            plan = self.plan(doc)
            new_ids = {r.id for r in plan.small} | {r.id for r in plan.medium}
            old_ids, hashes = existing.get(sid, (set(), set()))
            if old_ids == new_ids and hashes == {plan.content_hash}:
                unchanged += 1
                continue
            if old_ids:
                replaced += 1
            plans.append((plan, old_ids - new_ids))
        stats = {
            "added": len(plans) - replaced, "replaced": replaced, "unchanged": unchanged,
            "skipped_empty": skipped, "chunks": sum(len(p.small) for p, _ in plans),
        }
        if not plans:
            return stats
        state = uuid.uuid4().hex
        try:
            self._set_state("dirty-" + state)
            self._write(plans)
            self.bm25.delete([i for _, stale in plans for i in stale if ":s:" in i])
            self.bm25.upsert([r.id for p, _ in plans for r in p.small], [r.text for p, _ in plans for r in p.small])
            self._save_bm25(self.bm25, state)
            self._set_state(state)
        except Exception as exc:
            # Chroma may hold part of the new chunks: make BM25 agree with it again.
            try:
                self.bm25 = self._rebuild_bm25()
            except Exception:  # server gone: leave the state dirty, rebuilt on reopen
                pass
            raise self._wrap_error(exc, "write chunks") from exc
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

    def _write(self, plans: list[tuple[_Plan, set[str]]]) -> None:
        from tqdm.auto import tqdm

        max_batch = self.batch_size
        try:
            max_batch = min(max_batch, int(self.client.get_max_batch_size()))
        except Exception:
            pass
        records = [(pi, r) for pi, (p, _) in enumerate(plans) for r in p.small]
        vectors: dict[int, np.ndarray] = {}
        remaining = {pi: len(p.small) for pi, (p, _) in enumerate(plans)}
        with tqdm(total=len(records), desc="Embedding chunks", unit="chunk", disable=not self.show_progress) as bar:
            for b in range(0, len(records), max_batch):
                batch = records[b:b + max_batch]
                embedded = self.embedding.embed_documents([r.text for _, r in batch])
                if len(embedded) != len(batch):
                    raise ValueError(f"embedding returned {len(embedded)} vectors for {len(batch)} texts")
                self.collection.upsert(
                    ids=[r.id for _, r in batch],
                    embeddings=[list(map(float, v)) for v in embedded],
                    documents=[r.text for _, r in batch],
                    metadatas=[r.metadata for _, r in batch],
                )
                for (pi, record), vec in zip(batch, embedded):
                    plan = plans[pi][0]
                    arr = vectors.get(pi)
                    if arr is None:
                        arr = vectors[pi] = np.zeros((len(plan.small), len(vec)), dtype=np.float32)
                    arr[record.metadata["chunk_index"]] = vec
                    remaining[pi] -= 1
                    if remaining[pi] == 0:
                        self._finish_source(plan, plans[pi][1], vectors.pop(pi), max_batch)
                bar.update(len(batch))

    def _finish_source(self, plan: _Plan, stale: set[str], vectors: np.ndarray, max_batch: int) -> None:
        mediums = []
        for (first, last), record in zip(plan.groups, plan.medium):
            vec = vectors[first:last + 1].mean(axis=0)
            norm = float(np.linalg.norm(vec))
            mediums.append((record, (vec / norm if norm > 0 else vec).tolist()))
        for b in range(0, len(mediums), max_batch):
            part = mediums[b:b + max_batch]
            self.collection.upsert(
                ids=[r.id for r, _ in part], embeddings=[v for _, v in part], metadatas=[r.metadata for r, _ in part]
            )
        stale_list = sorted(stale)
        for b in range(0, len(stale_list), max_batch):
            self.collection.delete(ids=stale_list[b:b + max_batch])

    # --------------------------------------------------------------- removal
    def delete_source(self, source: str | Document) -> int:
        """Remove every chunk of a source (a :func:`source_id_for` id or a Document)."""
        sid = source_id_for(source) if isinstance(source, Document) else str(source)
        got = self.collection.get(where={"source_id": sid}, include=[])
        ids = got["ids"]
        if not ids:
            return 0
        state = uuid.uuid4().hex
        self._set_state("dirty-" + state)
        self.collection.delete(ids=ids)
        self.bm25.delete([i for i in ids if ":s:" in i])
        self._save_bm25(self.bm25, state)
        self._set_state(state)
        return len(ids)

    def reset(self) -> None:
        """Delete all data of this collection (keeps its configuration)."""
        self.client.delete_collection(self.collection_name)
        self._meta["swrag_state"] = "empty"
        self.collection = self.client.create_collection(
            self.collection_name, metadata=dict(self._meta), configuration={"hnsw": {"space": "cosine"}},
            embedding_function=None,
        )
        from langchain_chroma import Chroma

        self.vectorstore = Chroma(collection_name=self.collection_name, embedding_function=self.embedding,
                                  client=self.client, create_collection_if_not_exists=False)
        self.bm25 = BM25Index()
        self._save_bm25(self.bm25, "empty")

    # ---------------------------------------------------------------- reading
    def count(self, level: str | None = "small") -> int:
        if level is None:
            return self.collection.count()
        return len(self.collection.get(where={"level": level}, include=[])["ids"])

    def source_ids(self) -> list[str]:
        got = self.collection.get(where={"$and": [{"level": "small"}, {"chunk_index": 0}]}, include=["metadatas"])
        return sorted({m["source_id"] for m in got["metadatas"]})

    def get_chunks(self, ids: Sequence[str]) -> list[Document]:
        """Small/medium chunk records by id, as Documents (order of ``ids``)."""
        if not ids:
            return []
        got = self.collection.get(ids=list(ids), include=["documents", "metadatas"])
        found = {i: (d, m) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}
        return [Document(page_content=found[i][0] or "", metadata=dict(found[i][1] or {}), id=i) for i in ids if i in found]

    def chunk_range(self, source_id: str, lower: int, upper: int) -> list[tuple[int, int, int, str]]:
        """Small chunks ``lower..upper`` of a source as ``(index, start, end, text)``,
        with a metadata-range query (``$eq`` source, ``$gte``/``$lte`` index)."""
        got = self.collection.get(
            where={"$and": [
                {"source_id": {"$eq": source_id}},
                {"level": {"$eq": "small"}},
                {"chunk_index": {"$gte": int(lower)}},
                {"chunk_index": {"$lte": int(upper)}},
            ]},
            include=["documents", "metadatas"],
        )
        rows = [(m["chunk_index"], m["start_index"], m["end_index"], d or "") for d, m in zip(got["documents"], got["metadatas"])]
        rows.sort()
        return rows

    def mediums_covering(self, source_id: str, chunk_index: int) -> list[dict[str, Any]]:
        """Metadata of the medium chunks whose window bounds cover a small chunk."""
        got = self.collection.get(
            where={"$and": [
                {"source_id": {"$eq": source_id}},
                {"level": {"$eq": "medium"}},
                {"window_lower_bound": {"$lte": int(chunk_index)}},
                {"window_upper_bound": {"$gte": int(chunk_index)}},
            ]},
            include=["metadatas"],
        )
        return sorted(got["metadatas"], key=lambda m: m["medium_index"])

    def span_text(self, source_id: str, start: int, end: int, *, lower: int | None = None, upper: int | None = None) -> str:
        """Exact source text ``[start, end)`` rebuilt from the stored small chunks."""
        if end <= start:
            return ""
        if lower is None or upper is None:
            got = self.collection.get(
                where={"$and": [
                    {"source_id": {"$eq": source_id}}, {"level": {"$eq": "small"}},
                    {"end_index": {"$gt": int(start)}}, {"start_index": {"$lt": int(end)}},
                ]},
                include=["documents", "metadatas"],
            )
            rows = sorted((m["chunk_index"], m["start_index"], m["end_index"], d or "") for d, m in zip(got["documents"], got["metadatas"]))
        else:
            rows = self.chunk_range(source_id, lower, upper)
        return _join_rows(rows, start, end, source_id)

    # ------------------------------------------------------------ retrievers
    def bm25_retriever(self, k: int = 20) -> CJKBM25Retriever:
        return CJKBM25Retriever(index=self.bm25, fetch=self.get_chunks, k=k)

    def dense_retriever(self, k: int = 20, search_type: str = "mmr", *, fetch_k: int | None = None, lambda_mult: float = 0.5):
        if search_type not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {search_type!r}")
        kwargs: dict[str, Any] = {"k": k, "filter": {"level": "small"}}
        if search_type == "mmr":
            kwargs.update(fetch_k=fetch_k or max(4 * k, 20), lambda_mult=lambda_mult)
        return self.vectorstore.as_retriever(search_type=search_type, search_kwargs=kwargs)

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
        """Bytes used on disk by the Chroma data and the BM25 index (local only)."""
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


def _join_rows(rows: list[tuple[int, int, int, str]], start: int, end: int, source_id: str) -> str:
    if not rows:
        raise LookupError(f"no stored chunks of source {source_id!r} cover {start}:{end}")
    parts, pos = [], rows[0][1]
    for _, a, b, text in rows:
        if a != pos:
            raise LookupError(
                f"chunks of source {source_id!r} are not contiguous at offset {pos} "
                "(index partially written? re-add the document)"
            )
        parts.append(text)
        pos = b
    joined = "".join(parts)
    base = rows[0][1]
    if start < base or end > pos:
        raise LookupError(f"stored chunks of source {source_id!r} cover {base}:{pos}, not {start}:{end}")
    return joined[start - base:end - base]
