"""Ingestion on Ray: a Ray Data pipeline feeding the index's one writer.

`index_with_ray` (``swrag index --ray ADDRESS``) runs on a laptop (``"local"``:
an in-process Ray), a ``ray start --head`` cluster or many machines (``"auto"``,
``"HOST:PORT"``, ``"ray://HOST:PORT"``)::

    files (listed by the driver, list_files)
      -> flat_map: load one file (load_files) + plan its documents (plan_source)   [Ray tasks]
         unchanged sources (content hash = the store's) pass through un-embedded,
         the chunk texts of the others are cut into batches
      -> map_batches: embed the batches in a pool of actors, each holding the model [Ray actors]
      -> the driver: write_planned (one writer, under the index's writer lock)

Ray (an existing engine) does the scheduling, the data movement and the back
pressure; nothing here schedules. The writer is the single-process one
(`write_planned`): same pending -> complete states, delete-before-add,
pruning of vanished files, BM25 refresh and save, `IndexReport`, and a
run that dies is finished by the next one. The vectors can live on a Chroma server
(``SlidingWindowIndex(host=..., port=...)``: vectors in its collection, sources in
its source collection) or in any LangChain store built with
`PrecomputedEmbeddings` (without it the actors are skipped and the
writer embeds).

Every node needs this package and its ``[ray]`` extra installed (or pass
``runtime_env``), and the files must be readable from the nodes at the same paths
(shared storage) -- the driver lists them, the tasks read them.
"""

from __future__ import annotations

import json
import logging
import socket
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from swrag_integrations.ingest.workers import build_embedding, embed_texts, limit_threads, load_and_plan, worker_embedding_spec
from swrag_integrations.engine.records import SourceRecord

if TYPE_CHECKING:
    from swrag_integrations.engine.protocols import EngineState
    from swrag_integrations.ingest.writer import IndexReport

__all__ = ["index_with_ray", "connect_ray"]

logger = logging.getLogger(__name__)

_EMPTY_ROW = {"kind": "", "path": "", "reason": "", "hint": "", "sid": "", "record": b"", "part": 0, "n_parts": 0,
              "lo": 0, "hi": 0, "texts": "", "vectors": b""}


# ------------------------------------------------------------------- connecting


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"ingestion on Ray needs the [ray] extra: pip install 'swrag-integrations[ray]' ({exc})") \
            from exc
    return ray


def _probe(host: str, port: int, address: str, timeout: float = 5.0) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        raise ConnectionError(
            f"no Ray cluster answers at {address!r} ({exc}). Start one with `ray start --head --port {port}` "
            "on that machine, or use --ray local (ADDRESS 'local') for a Ray in this process") from exc


def _host_port(value: str, address: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConnectionError(f"bad Ray address {address!r}: use 'local', 'auto', 'HOST:PORT' or 'ray://HOST:PORT'")
    return host.strip("[]"), int(port)


def connect_ray(address: str = "local", *, num_cpus: float | None = None, object_store_memory: int | None = None,
                runtime_env: dict[str, Any] | None = None, node_ip_address: str | None = None) -> bool:
    """Connect this process to Ray; returns True when it did (and should disconnect).

    ``"local"`` starts a Ray in this process (``num_cpus``, ``object_store_memory``);
    ``"auto"`` finds the cluster this machine belongs to; ``"HOST:PORT"`` (the head's
    GCS port, 6379 by default) and ``"ray://HOST:PORT"`` (Ray Client) reach a running
    cluster. A cluster that does not answer raises ``ConnectionError`` before Ray is
    asked (Ray itself aborts the process when its control store is unreachable).
    """
    ray = _import_ray()
    if not isinstance(address, str) or not address.strip():
        raise ConnectionError(f"bad Ray address {address!r}: use 'local', 'auto', 'HOST:PORT' or 'ray://HOST:PORT'")
    address = address.strip()
    if ray.is_initialized():
        return False  # the caller's own connection
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=False,
                                  runtime_env=runtime_env)
    if node_ip_address:
        kwargs["_node_ip_address"] = node_ip_address
    if address == "local":
        kwargs.update(num_cpus=num_cpus, object_store_memory=object_store_memory)
    else:
        target = address
        if address == "auto":
            from ray._private.services import canonicalize_bootstrap_address

            try:
                target = canonicalize_bootstrap_address("auto")
            except Exception as exc:  # noqa: BLE001 - any failure: no cluster found
                raise ConnectionError(f"no running Ray cluster found for 'auto' ({exc}); start one with "
                                      "`ray start --head` or use --ray local") from exc
            if target is None:
                raise ConnectionError("no running Ray cluster found for 'auto'; start one with `ray start --head` "
                                      "or use --ray local")
        client = target.startswith("ray://")
        host, port = _host_port(target[len("ray://"):] if client else target, address)
        _probe(host, port, address)
        if client:  # Ray Client takes fewer options
            kwargs = dict(runtime_env=runtime_env)
    try:
        ray.init(address=address, **{k: v for k, v in kwargs.items() if v is not None})
    except Exception as exc:  # noqa: BLE001 - Ray raises many types here
        raise ConnectionError(f"cannot connect to Ray at {address!r}: {type(exc).__name__}: {exc}") from exc
    return True


# --------------------------------------------------------------------- pipeline


_heads_cache: dict[str, dict[str, str]] = {}


def _resolve_heads(ref: Any) -> dict[str, str]:
    """The store's content hashes (a Ray object, fetched once per worker process)."""
    if isinstance(ref, dict):
        return ref
    import ray

    key = ref.hex()
    if key not in _heads_cache:
        _heads_cache.clear()
        _heads_cache[key] = ray.get(ref)
    return _heads_cache[key]


def _plan_rows(row: dict[str, Any], *, config_json: str, encoding: str | None, errors: str, heads: Any,
               batch: int, split: bool) -> list[dict[str, Any]]:
    """One file -> rows: its skip, its load warnings, each record and its chunk batches."""
    heads = _resolve_heads(heads)
    records, skipped, notes = load_and_plan(row["path"], config_json, encoding, errors)
    out = [dict(_EMPTY_ROW, kind="skipped", path=p, reason=r, hint=h) for p, r, h in skipped]
    out += [dict(_EMPTY_ROW, kind="note", path=row["path"], reason=n) for n in notes]
    for rec in records:
        fresh = split and rec.text.strip() and heads.get(rec.source_id) != rec.content_hash
        bounds = [(lo, min(rec.n_chunks, lo + batch)) for lo in range(0, rec.n_chunks, batch)] if fresh else []
        out.append(dict(_EMPTY_ROW, kind="record", sid=rec.source_id, record=rec.to_bytes(), n_parts=len(bounds)))
        for i, (lo, hi) in enumerate(bounds):
            texts = [rec.chunk_text(j) for j in range(lo, hi)]
            out.append(dict(_EMPTY_ROW, kind="part", sid=rec.source_id, part=i, n_parts=len(bounds), lo=lo, hi=hi,
                            texts=json.dumps(texts, ensure_ascii=False)))
    return out


class _Embedder:
    """A Ray actor's callable: holds the model, embeds the ``part`` rows of a batch."""

    def __init__(self, spec: Any, threads: int = 1) -> None:
        limit_threads(threads)
        self.embedding = build_embedding(spec)
        self.threads = threads

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        kinds = batch["kind"]
        rows = [i for i, kind in enumerate(kinds) if kind == "part"]
        texts: list[str] = []
        spans = []
        for i in rows:
            part = json.loads(batch["texts"][i])
            spans.append((len(texts), len(texts) + len(part)))
            texts.extend(part)
        vectors = embed_texts(self.embedding, texts) if texts else np.zeros((0, 0), dtype=np.float32)
        limit_threads(self.threads)  # torch is imported by the first call
        out = np.array([b""] * len(kinds), dtype=object)
        for i, (a, b) in zip(rows, spans):
            out[i] = np.ascontiguousarray(vectors[a:b], dtype=np.float32).tobytes()
        batch["vectors"] = out
        batch["texts"] = np.array([""] * len(kinds), dtype=object)
        return batch


def index_with_ray(index: "EngineState | Any", paths: Any, *, address: str = "local", actors: int = 2,
                   prune: bool = True, encoding: str | None = None, errors: str = "strict",
                   embed_batch: int | None = None, embedding_factory: Callable[[], Any] | None = None,
                   actor_cpus: float = 1.0, plan_cpus: float = 0.5, threads_per_actor: int = 1,
                   num_cpus: float | None = None, object_store_memory: int | None = None,
                   runtime_env: dict[str, Any] | None = None, node_ip_address: str | None = None) -> "IndexReport":
    """Index the files under ``paths`` with a Ray Data pipeline; the driver writes.

    Same semantics and report as `add_files` (with
    ``prune`` the index mirrors the files). See the module docstring for the stages.

    Args:
        address: ``"local"``, ``"auto"``, ``"HOST:PORT"`` or ``"ray://HOST:PORT"``
            (`connect_ray`); an unreachable one raises ``ConnectionError`` and
            nothing is written. If this process is already connected to Ray, that
            connection is used (and kept).
        actors: embedding actors (each loads the model once).
        embed_batch: chunk texts per batch (default: the index's ``batch_size``).
        embedding_factory: a picklable zero-argument callable giving the embedding
            the actors use (default: rebuilt from the index's).
        actor_cpus: Ray CPUs reserved per actor.
        plan_cpus: Ray CPUs reserved per load+plan task.
        threads_per_actor: math threads per actor.
        num_cpus: CPUs of a ``"local"`` Ray (default ``actors * actor_cpus + 1``).
        object_store_memory: object store bytes of a ``"local"`` Ray.
        runtime_env: passed to ``ray.init`` (e.g. ``{"py_modules": [...]}``).
        node_ip_address: this node's IP for Ray (``ray.init(_node_ip_address=)``).
        index: the index to write to (a `SlidingWindowIndex` or its engine).
        paths: files or folders to index.
        prune: make the index mirror the files (remove the sources of files gone).
        encoding: the encoding of files that are not UTF-8 (see `load_files`).
        errors: how undecodable bytes are handled (as in ``bytes.decode``).

    Raises:
        ValueError: ``actors`` is not a positive int, or no indexable file is under ``paths``.
    """
    from swrag_integrations.engine.protocols import as_engine
    from swrag_integrations.ingest.files import list_files
    from swrag_integrations.ingest.writer import IndexReport, write_planned

    index = as_engine(index)
    if isinstance(actors, bool) or not isinstance(actors, int) or actors < 1:
        raise ValueError(f"actors must be an int >= 1, got {actors!r}")
    embed_batch = embed_batch or index.batch_size
    listing = list_files(paths)  # before Ray: a missing path is a usage error, not a cluster one
    if not listing.files:
        raise ValueError("no indexable files (.txt, .md, .markdown, .pdf, .csv) under the given paths")
    started = connect_ray(address, num_cpus=num_cpus if num_cpus is not None else actors * actor_cpus + 1,
                          object_store_memory=object_store_memory, runtime_env=runtime_env,
                          node_ip_address=node_ip_address)
    try:
        return _run(index, listing, actors=actors, prune=prune, encoding=encoding, errors=errors,
                    embed_batch=embed_batch, embedding_factory=embedding_factory, actor_cpus=actor_cpus,
                    plan_cpus=plan_cpus, threads_per_actor=threads_per_actor, write=write_planned,
                    report=IndexReport())
    finally:
        if started:
            import ray

            ray.shutdown()


def _run(index: "EngineState", listing: Any, *, actors: int, prune: bool, encoding: str | None, errors: str,
         embed_batch: int, embedding_factory: Any, actor_cpus: float, plan_cpus: float, threads_per_actor: int,
         write: Callable[..., Any], report: "IndexReport") -> "IndexReport":
    import ray
    from ray.data import ActorPoolStrategy, DataContext

    from swrag_integrations.ingest.files import LoadWarning, indexed_origins

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    context = DataContext.get_current()
    context.enable_progress_bars = False
    notes: list[str] = []
    spec = worker_embedding_spec(index, embedding_factory, notes, threads=threads_per_actor)
    bad = {str(s.path) for s in listing.skipped}
    skipped: list[tuple[str, str]] = [(str(s.path), s.reason) for s in listing.skipped]
    files = [str(f) for f in listing.files if str(f) not in bad]
    origins = indexed_origins(index.store) if prune else []
    loaded: set[str] = set()  # the files that gave records (the others were emptied or skipped)
    known = [0]

    def planned() -> Iterator[tuple[SourceRecord, Any]]:
        # runs inside write_planned: the writer lock is held and interrupted writes are finished
        heads = {sid: h.content_hash for sid, h in index.store.heads().items() if h.state == "complete"}
        ds = ray.data.from_items([{"path": f} for f in files], override_num_blocks=max(1, min(len(files), 2000)))
        ds = ds.flat_map(_plan_rows, fn_kwargs=dict(config_json=index.config.to_json(), encoding=encoding,
                                                    errors=errors, heads=ray.put(heads), batch=embed_batch,
                                                    split=spec is not None), num_cpus=plan_cpus)
        if spec is not None:
            ds = ds.map_batches(_Embedder, fn_constructor_kwargs=dict(spec=spec, threads=threads_per_actor),
                                compute=ActorPoolStrategy(size=actors), num_cpus=actor_cpus, batch_size=2,
                                batch_format="numpy")
        waiting: dict[str, dict[str, Any]] = {}
        for row in ds.iter_rows():
            kind = row["kind"]
            if kind == "skipped":
                skipped.append((row["path"], row["reason"]))
                warnings.warn(f"skipped {row['path']}: {row['reason']}" + (f"; {row['hint']}" if row["hint"] else ""),
                              LoadWarning, stacklevel=2)
                continue
            if kind == "note":
                warnings.warn(row["reason"], LoadWarning, stacklevel=2)
                continue
            entry = waiting.setdefault(row["sid"], {"record": None, "parts": {}, "n_parts": int(row["n_parts"])})
            if kind == "record":
                entry["record"] = SourceRecord.from_bytes(bytes(row["record"]))
                report.ids.append(row["sid"])
                if entry["record"].origin is not None:
                    loaded.add(entry["record"].origin)
                known[0] += entry["record"].n_chunks
            else:
                n = int(row["hi"]) - int(row["lo"])
                entry["parts"][int(row["part"])] = np.frombuffer(bytes(row["vectors"]), dtype=np.float32).reshape(n, -1)
            if entry["record"] is not None and len(entry["parts"]) == entry["n_parts"]:
                del waiting[row["sid"]]
                parts = entry["parts"]
                vectors = np.concatenate([parts[i] for i in range(len(parts))]) if parts else None
                if vectors is not None and spec is not None and not index.embedding_checked:
                    # the writer checks the embedding's dimension before its first write: take it from the
                    # actors' vectors, so the driver does not load the model just to learn it
                    index.check_embedding(dim=int(vectors.shape[1]))
                yield entry["record"], vectors
        if waiting:
            raise RuntimeError(f"the Ray pipeline lost parts of {len(waiting)} source(s); nothing of them was "
                               "written: run again")

    # the writer lock renews its own lease while the driver waits on Ray (sources.KVSourceStore)
    result = index.wrap(lambda: write(index, planned(), prune="origins" if prune else False,
                                       remove_origins=lambda: listing.stale(origins, loaded, [p for p, _ in skipped])
                                       if prune else [], report=report,
                                       total_chunks=lambda: known[0], desc=f"Writing chunks (Ray, {actors} actors)"),
                         "write the index")
    result.skipped_files = skipped
    result.notes.extend(notes)
    return result
