"""Parallel ingestion on one machine: plan and embed in N worker processes, one writer.

`index_in_parallel` (``SlidingWindowIndex.add_files(paths, workers=N)``,
``index_documents(docs, workers=N)``, ``swrag index --workers N``) spreads the two
costly steps of indexing over a ``concurrent.futures`` process pool (``spawn``
context, so it is safe with threads, torch and Chroma in the parent):

1. **load + plan** -- each file is read (`load_files` of that one file)
   and cut (`plan_source`: exact chunk offsets, token counts,
   windows) in a worker; the records come back to the writer;
2. **embed** -- the writer (`write_planned`, the package's one write
   path, under the index's writer lock) compares each record's content hash with the
   source store first: unchanged sources are not embedded again; the chunk texts of
   new and changed ones go back to the pool in batches, and the vectors are written
   through the store's `PrecomputedEmbeddings` as they arrive, in
   order, with a bounded number of batches in flight (memory stays flat).

Everything else is the single-process write: the same pending -> complete states,
delete-before-add, pruning of vanished files, BM25 refresh, `IndexReport`
and resumability (a killed run leaves sources ``pending``; the next run, parallel
or not, finishes them). The result equals a single-process build: same ids,
offsets and BM25 ids, vectors equal up to float rounding (batching differs).

Each worker loads the embedding model once (the bundled MiniLM: rebuilt in the
worker from its constructor arguments; any picklable LangChain ``Embeddings`` is
sent as it is; otherwise pass ``embedding_factory=``) and runs torch with one
thread, so N workers use N cores without oversubscribing them. When the store has no
``PrecomputedEmbeddings`` as its embedding (your own vector store built without it),
or the embedding cannot be sent to a worker, the workers only load and plan and the
writer embeds (the report's ``notes`` say so).

Programs that use this from a script must guard their entry point with
``if __name__ == "__main__":`` (the ``spawn`` start method imports the main module in
each worker).
"""

from __future__ import annotations

import bisect
import functools
import inspect
import multiprocessing
import os
import pickle
import sys
import threading
import warnings
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from swrag_integrations.engine.records import SourceRecord

if TYPE_CHECKING:
    from swrag_integrations.engine.protocols import EngineState
    from swrag_integrations.ingest.writer import IndexReport

__all__ = ["index_in_parallel", "portable_embedding", "load_and_plan"]

# --------------------------------------------------------------------------- workers

_worker_embedding: Any = None
_worker_spec: Any = None
_worker_threads = 1


def limit_threads(threads: int = 1) -> None:
    """One process, ``threads`` math threads (OpenMP/MKL/torch), no tokenizer threads."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def _init_worker(spec: Any, threads: int, parent: int) -> None:
    global _worker_spec, _worker_threads
    _worker_spec, _worker_threads = spec, threads
    limit_threads(threads)
    _exit_with_parent(parent)


def _exit_with_parent(parent: int, interval: float = 1.0) -> None:
    """A worker whose writer (``parent``) died (kill -9) exits instead of waiting for work forever."""
    import time

    if os.getppid() != parent:  # it died while this worker was starting
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="swrag-parent-watch", daemon=True).start()


def build_embedding(spec: Any) -> Any:
    """The embedding a `portable_embedding` spec stands for (an embedding object
    as it is, a factory called)."""
    is_embedding = not isinstance(spec, type) and callable(getattr(spec, "embed_documents", None))
    return spec if is_embedding else spec()


def _embedding() -> Any:
    global _worker_embedding
    if _worker_embedding is None:
        _worker_embedding = build_embedding(_worker_spec)
        limit_threads(_worker_threads)  # torch may have been imported just now
    return _worker_embedding


def embed_texts(embedding: Any, texts: Sequence[str]) -> np.ndarray:
    """``embedding.embed_documents(texts)`` as a float32 ``(len(texts), dim)`` array."""
    vectors = embedding.embed_documents(list(texts))
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


def _embed_task(texts: list[str]) -> np.ndarray:
    return embed_texts(_embedding(), texts)


def _dimension_task() -> int:
    """The dimension of the worker's embedding (for the writer's embedding check, so the
    writer process does not load the model only to learn it)."""
    from swrag_integrations.embeddings.base import embedding_dimension

    return embedding_dimension(_embedding())


def load_and_plan(path: str, config_json: str, encoding: str | None = None,
                  errors: str = "strict") -> tuple[list[SourceRecord], list[tuple[str, str, str]], list[str]]:
    """Load one file (`load_files`) and plan its documents.

    Returns ``(records, skipped, warnings)``: the planned (pending) records, the file
    as ``(path, reason, hint)`` if it was skipped, and the text of the warnings the
    load raised (for the caller to show: they happen in another process).
    """
    from swrag_integrations.engine.config import IndexConfig
    from swrag_integrations.ingest.files import LoadWarning, load_files
    from swrag_integrations.engine.records import plan_source

    config = IndexConfig.from_json(config_json)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LoadWarning)
        try:
            loaded = load_files([path], encoding=encoding, errors=errors)
        except FileNotFoundError as exc:  # vanished between the listing and now
            return [], [(path, "vanished while indexing", str(exc))], []
    notes = [str(w.message) for w in caught if issubclass(w.category, LoadWarning)
             and not any(str(w.message) == s.message() for s in loaded.skipped)]
    skipped = [(str(s.path), s.reason, s.hint) for s in loaded.skipped]
    return [plan_source(doc, config) for doc in loaded.documents], skipped, notes


def _plan_task(docs: list[tuple[str, Any]], config_json: str) -> list[SourceRecord]:
    """Records of ``(source_id, document)`` pairs (ids decided for the batch by the caller;
    the documents checked by `dedupe_documents`)."""
    from swrag_integrations.engine.config import IndexConfig
    from swrag_integrations.engine.records import plan_checked

    config = IndexConfig.from_json(config_json)
    return [plan_checked(doc, config, sid) for sid, doc in docs]


# ---------------------------------------------------------------- the embedding spec


def portable_embedding(embedding: Any) -> Any:
    """Something a worker process can rebuild ``embedding`` from, or ``None``.

    A picklable ``Embeddings`` is returned as it is; one that is not (the bundled
    MiniLM holds a lock and, once loaded, its model) becomes a factory calling its
    class with the constructor arguments read back from its attributes of the same
    name; `IndexTextEmbeddings` is rebuilt around its inner
    embedding when its ``index_text`` function pickles. ``None`` when none works:
    then the workers only plan (or pass ``embedding_factory=``).
    """
    from swrag_integrations.embeddings.wrappers import IndexTextEmbeddings, PrecomputedEmbeddings

    if isinstance(embedding, PrecomputedEmbeddings):
        embedding = embedding.base
    if _pickles(embedding):
        return embedding
    if isinstance(embedding, IndexTextEmbeddings):
        inner = portable_embedding(embedding.base)
        if inner is None or not _pickles(embedding.index_text):
            return None
        return functools.partial(_index_text_embeddings, inner, embedding.index_text)
    cls = type(embedding)
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return None
    kwargs = {}
    for name, param in list(params.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if hasattr(embedding, name):
            kwargs[name] = getattr(embedding, name)
        elif param.default is param.empty:
            return None
    factory = functools.partial(cls, **kwargs)
    return factory if _pickles(factory) else None


def _index_text_embeddings(inner: Any, index_text: Any) -> Any:
    from swrag_integrations.embeddings.wrappers import IndexTextEmbeddings

    return IndexTextEmbeddings(build_embedding(inner), index_text)


def _pickles(obj: Any) -> bool:
    try:
        pickle.dumps(obj)
        return True
    except Exception:  # noqa: BLE001 - any failure means: not portable
        return False


def worker_embedding_spec(index: "EngineState", embedding_factory: Callable[[], Any] | None,
                          notes: list[str], threads: int | None = None) -> Any:
    """The spec workers embed with, or ``None`` (then the writer embeds; ``notes`` says why).

    ``threads``: the math threads each worker may use; an embedding rebuilt from its
    constructor arguments whose ``threads`` argument was left at ``None`` (the bundled
    MiniLM: "every CPU" -- N workers would each take every core) gets this value.
    """
    pre = index.vectors.precomputed
    if pre is None:
        notes.append(f"the vector store ({index.vectors.kind}) does not embed through PrecomputedEmbeddings: the "
                     "workers only loaded and planned, the writer embedded (build the store with "
                     "PrecomputedEmbeddings(embedding) to embed in the workers)")
        return None
    if embedding_factory is not None:
        if not _pickles(embedding_factory):
            raise TypeError("embedding_factory must be picklable (a module-level function or functools.partial)")
        return embedding_factory
    spec = portable_embedding(pre.base)
    if threads and isinstance(spec, functools.partial) and "threads" in spec.keywords \
            and spec.keywords["threads"] is None:
        spec = functools.partial(spec.func, **dict(spec.keywords, threads=threads))
    if spec is None:
        notes.append(f"the embedding {type(pre.base).__name__} cannot be sent to worker processes: the workers only "
                     "loaded and planned, the writer embedded (pass embedding_factory=)")
    return spec


# ------------------------------------------------------------------ embedding queue


class _Part:
    """Chunks ``lo..hi-1`` of a record: their texts are cut when the batch is submitted."""

    __slots__ = ("lo", "hi", "rec", "future", "rows", "done")

    def __init__(self, lo: int, hi: int, rec: SourceRecord | None) -> None:
        self.lo, self.hi, self.rec = lo, hi, rec
        self.future: Future | None = None
        self.rows: np.ndarray | None = None
        self.done = False


class EmbedQueue:
    """Chunk texts -> vectors in a pool, first in first out, at most ``limit`` batches
    submitted and not yet consumed by the writer (so neither texts nor vectors pile up)."""

    def __init__(self, submit: Callable[[list[str]], Future], batch: int, limit: int) -> None:
        self.submit = submit
        self.batch = batch
        self.limit = limit
        self._waiting: deque[_Part] = deque()
        self._active = 0
        self._lock = threading.Lock()

    def rows_for(self, rec: SourceRecord) -> "LazyRows":
        parts = [_Part(lo, min(rec.n_chunks, lo + self.batch), rec) for lo in range(0, rec.n_chunks, self.batch)]
        with self._lock:
            self._waiting.extend(parts)
        self.pump()
        return LazyRows(self, parts)

    def pump(self) -> None:
        with self._lock:
            while self._waiting and self._active < self.limit:
                self._start(self._waiting.popleft())

    def _start(self, part: _Part) -> None:  # lock held
        assert part.rec is not None
        part.future = self.submit([part.rec.chunk_text(i) for i in range(part.lo, part.hi)])
        part.rec = None
        self._active += 1

    def result(self, part: _Part) -> np.ndarray:
        if part.rows is None:
            with self._lock:
                if part.future is None:  # asked for before its turn: start it now
                    self._waiting.remove(part)
                    self._start(part)
            part.rows = part.future.result()
        return part.rows

    def release(self, part: _Part) -> None:
        part.rows, part.future = None, None
        with self._lock:
            self._active -= 1
        self.pump()

    def cancel(self) -> None:
        with self._lock:
            self._waiting.clear()


class LazyRows:
    """The vectors of one record, computed in the pool; ``rows[lo:hi]`` waits for them.

    The writer reads a record's rows in increasing slices; a batch is dropped (and the
    next one submitted) once a slice has passed its end.
    """

    def __init__(self, queue: EmbedQueue, parts: list[_Part]) -> None:
        self.queue = queue
        self.parts = parts
        self._firsts = [part.lo for part in parts]
        self.n = parts[-1].hi if parts else 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: slice) -> np.ndarray:
        if not isinstance(item, slice) or item.step not in (None, 1):
            raise TypeError("LazyRows takes contiguous slices")
        lo, hi, _ = item.indices(self.n)
        out = []
        # from the part holding row lo on (not every part for every slice: a large record has thousands)
        for k in range(max(0, bisect.bisect_right(self._firsts, lo) - 1), len(self.parts)):
            part = self.parts[k]
            if part.lo >= hi:
                break
            if part.hi <= lo:
                continue
            if part.done:
                raise LookupError(f"rows {part.lo}..{part.hi - 1} were already read and released")
            rows = self.queue.result(part)
            out.append(rows[max(lo, part.lo) - part.lo:min(hi, part.hi) - part.lo])
            if hi >= part.hi:
                self.queue.release(part)
                part.done = True
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)


# ------------------------------------------------------------------------ pipeline


def _pool(workers: int, spec: Any, threads: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(spec, threads, os.getpid()))


def _doc_groups(docs: Sequence[tuple[str, Any]], chars: int = 2_000_000,
                most: int = 256) -> Iterator[list[tuple[str, Any]]]:
    """``(source_id, document)`` pairs in groups of about ``chars`` characters."""
    group: list[tuple[str, Any]] = []
    size = 0
    for sid, doc in docs:
        group.append((sid, doc))
        size += len(doc.page_content)
        if size >= chars or len(group) >= most:
            yield group
            group, size = [], 0
    if group:
        yield group


def _bounded(submit: Callable[[Any], Future], items: Iterable[Any], ahead: int) -> Iterator[tuple[Any, Future]]:
    """Submit ``items`` keeping at most ``ahead`` results not yet taken; yield them in order."""
    pending: deque[tuple[Any, Future]] = deque()
    for item in items:
        pending.append((item, submit(item)))
        if len(pending) >= ahead:
            yield pending.popleft()
    while pending:
        yield pending.popleft()


def index_in_parallel(index: "EngineState | Any", documents: Iterable[Any] | None = None, *,
                      paths: Any = None, workers: int = 2, prune: bool | str = False,
                      remove_origins: Iterable[str] | None = None, encoding: str | None = None,
                      errors: str = "strict", embed_batch: int | None = None,
                      embedding_factory: Callable[[], Any] | None = None, threads_per_worker: int = 1) -> "IndexReport":
    """Index ``documents`` (or the files under ``paths``) with ``workers`` processes.

    Same semantics and report as `index_documents` /
    `add_files` (``paths``: with ``prune`` the index
    mirrors the files, as ``add_files`` does); see the module docstring for how the
    work is split.

    Args:
        index: the index to write to (a `SlidingWindowIndex` or its engine).
        documents: the documents to index (``page_content``, ``metadata``); or give ``paths``.
        paths: files or folders to load and index instead of ``documents``.
        workers: worker processes (>= 1).
        prune: which sources not given to remove, as in `index_documents` (with ``paths``,
            any true value makes the index mirror the files).
        remove_origins: origins whose sources are removed as well.
        encoding: the encoding of files that are not UTF-8 (see `load_files`).
        errors: how undecodable bytes are handled (as in ``bytes.decode``).
        embed_batch: chunk texts per embedding task (default: the index's ``batch_size``).
        embedding_factory: a picklable zero-argument callable returning the embedding
            workers should use (it must give the vectors the index's embedding gives).
        threads_per_worker: math threads per worker (torch/OpenMP).

    Raises:
        ValueError: ``workers`` or ``embed_batch`` is not a positive int, or both (or neither
            of) ``documents`` and ``paths`` are given.
    """
    from swrag_integrations.engine.protocols import as_engine
    from swrag_integrations.ingest.writer import dedupe_documents, write_planned

    index = as_engine(index)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if (documents is None) == (paths is None):
        raise ValueError("give documents or paths (not both)")
    embed_batch = embed_batch or index.batch_size
    if isinstance(embed_batch, bool) or not isinstance(embed_batch, int) or embed_batch <= 0:
        raise ValueError(f"embed_batch must be a positive int, got {embed_batch!r}")
    notes: list[str] = []
    spec = worker_embedding_spec(index, embedding_factory, notes, threads=threads_per_worker)
    config_json = index.config.to_json()
    skipped: list[tuple[str, str, str]] = []
    remove: list[str] = list(remove_origins or ())
    loaded: set[str] = set()  # the files that gave records (the others were emptied or skipped)
    if paths is not None:
        from swrag_integrations.ingest.files import list_files

        listing = list_files(paths)
        if not listing.files:
            raise ValueError("no indexable files (.txt, .md, .markdown, .pdf, .csv) under the given paths")
        bad = {str(s.path) for s in listing.skipped}
        skipped.extend((str(s.path), s.reason, s.hint) for s in listing.skipped)
        if prune:
            from swrag_integrations.ingest.files import indexed_origins

            origins = indexed_origins(index.store)
            prune = "origins"
        files = [str(f) for f in listing.files if str(f) not in bad]
        from swrag_integrations.ingest.writer import IndexReport

        report = IndexReport()
        docs_or_files: list[Any] = files
    else:
        by_sid, report = dedupe_documents(list(documents), index)
        if not by_sid and not remove and prune != "all":
            raise ValueError("no documents to add")
        docs_or_files = list(_doc_groups(list(by_sid.items())))
    planned_chunks = [0]
    from tqdm.auto import tqdm

    plan_bar = tqdm(total=len(docs_or_files), desc="Loading and planning" if paths is not None else "Planning",
                    unit="file" if paths is not None else "batch", disable=not index.show_progress, leave=False)
    pool = _pool(workers, spec, threads_per_worker)
    queue = EmbedQueue(lambda texts: pool.submit(_embed_task, texts), embed_batch, limit=2 * workers + 2)
    # the writer checks the embedding's dimension before its first write; a worker measures
    # it (it loads the model anyway), so the writer never loads the model when the workers embed
    dimension = [pool.submit(_dimension_task)] if spec is not None and not index.embedding_checked else []
    try:
        def submit_plan(item: Any) -> Future:
            if paths is not None:
                return pool.submit(load_and_plan, item, config_json, encoding, errors)
            return pool.submit(_plan_task, item, config_json)

        def planned() -> Iterator[tuple[SourceRecord, Any]]:
            for _, future in _bounded(submit_plan, docs_or_files, ahead=4 * workers):
                result = future.result()
                if dimension:  # before the first record reaches the writer's embedding check
                    index.check_embedding(dim=dimension.pop().result())
                plan_bar.update(1)
                if paths is not None:
                    records, bad_files, load_notes = result
                    for message in load_notes:
                        _warn_load(message)
                    for item in bad_files:
                        skipped.append(item)
                        _warn_load(f"skipped {item[0]}: {item[1]}" + (f"; {item[2]}" if item[2] else ""))
                    if records:
                        report.ids.extend(rec.source_id for rec in records)
                        loaded.update(rec.origin for rec in records if rec.origin is not None)
                else:
                    records = result
                for rec in records:
                    planned_chunks[0] += rec.n_chunks
                    yield rec, (queue.rows_for if spec is not None else None)

        if paths is not None and prune:
            # known after the stream: vanished, skipped and emptied files
            removals = lambda: remove + listing.stale(origins, loaded, [path for path, _, _ in skipped])  # noqa: E731
        elif paths is not None:
            removals = remove
        else:
            removals = remove
        report = write_planned(index, planned(), prune=prune, remove_origins=removals, report=report,
                               total_chunks=lambda: planned_chunks[0], lookahead=2 * workers * embed_batch,
                               desc=f"Embedding chunks ({workers} workers)")
    except BaseException:
        queue.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        plan_bar.close()
    pool.shutdown(wait=True)
    report.skipped_files = [(path, reason) for path, reason, _ in skipped]
    report.notes.extend(notes)
    return report


def _warn_load(message: str) -> None:
    from swrag_integrations.ingest.files import LoadWarning

    warnings.warn(message, LoadWarning, stacklevel=4)
