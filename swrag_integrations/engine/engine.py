"""The index engine: every store-agnostic part of a sliding-window index, no framework.

`IndexEngine` owns the source store (texts, chunk offsets, the manifest, the
writer lock/lease and change log), the keyword index, the embedding checks and the
searches of small chunks (BM25, dense, hybrid) and their spans, over a
`VectorStorage`. The writers (`writer`), health checks
(`health`), parallel and Ray ingestion take an engine. Framework faces sit on
top: `SlidingWindowIndex` (LangChain) and
`SlidingWindowLlamaIndex` (LlamaIndex); the engine imports neither
framework, so it runs with only ``chromadb`` and an embedding installed::

    engine = IndexEngine.open("my_index", embedding=my_embedding)  # embed_documents/embed_query
    engine.index_texts(["first text", "second text"], [{"topic": "a"}, {"topic": "b"}])
    hits = engine.search_children("a question", k=5, filter={"topic": "a"})
    engine.span_text(hits[0].source_id, hits[0].window_start, hits[0].window_end)

The guarantees (only complete sources served, one writer at a time with a fenced
lease, long-lived handles catch up with other processes' writes, derived parts
checked) are those described in `index` and tested there.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from swrag_integrations.engine.config import IndexConfig
from swrag_integrations.embeddings.base import embedding_dimension
from swrag_integrations.engine.settings import DEFAULT_SEARCH_TYPE
from swrag_integrations.engine.fusion import rrf
from swrag_integrations.engine.ids import (VECTOR_ID_SCHEME, chunk_id, parse_chunk_id, parse_member_id, source_id_for, source_id_of_id,
                  vector_id_scheme, vector_ids)
from swrag_integrations.keyword.index import KeywordIndex, StorageKeyword, keyword_mode
from swrag_integrations.engine.protocols import ChildHit, ChunkRow, as_engine
from swrag_integrations.engine.records import END, N_TOKENS, START, WIN_HI, WIN_LO, SourceRecord
from swrag_integrations.stores.sources import ChromaByteStore, KVSourceStore, SourceStore, SqliteSourceStore
from swrag_integrations.stores.storage import PlainDocument, VectorStorage

__all__ = ["IndexEngine", "IndexMismatchError", "IndexDamagedError", "validate_collection_name", "FORMAT", "as_engine",
           "embedding_name"]

FORMAT = 3
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")


class IndexMismatchError(ValueError):
    """The parts given do not belong together (another index's vectors, another embedding...)."""


class IndexDamagedError(RuntimeError):
    """A derived part of the index is damaged; the message names the repair command."""


def validate_collection_name(name: str) -> str:
    """Chroma's rule: 3-512 chars of ``[A-Za-z0-9._-]``, alphanumeric at both ends."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise ValueError(
            f"invalid collection_name {name!r}: use 3-512 characters from [A-Za-z0-9._-], "
            "starting and ending with a letter or digit, without '..'"
        )
    return name


def embedding_name(embedding: Any) -> str:
    """A name for an embedding object, recorded in the manifest (class and model)."""
    name = getattr(embedding, "model_name", None)
    if isinstance(name, str) and name:
        return f"{type(embedding).__name__}:{name}"
    for attr in ("model_path", "model"):
        value = getattr(embedding, attr, None)
        if isinstance(value, (str, os.PathLike)) and str(value):
            return f"{type(embedding).__name__}:{Path(str(value)).name}"
    return type(embedding).__name__


def as_source_store(value: Any) -> SourceStore:
    """A `SourceStore` from a store, a SQLite path or a key-value byte store."""
    if isinstance(value, (SqliteSourceStore, KVSourceStore)):
        return value
    if isinstance(value, (str, os.PathLike)):
        return SqliteSourceStore(value)
    if all(callable(getattr(value, m, None)) for m in ("get_many", "heads", "put", "changes_since")):
        return value  # a SourceStore of the caller's own
    return KVSourceStore(value)  # a LangChain byte store (raises TypeError if it is none)


StorageFactory = Callable[[Any, "Path | None", Any, "Callable[[str], str] | None", float], VectorStorage]


def chroma_storage(client: Any, root: Path | None, embedding: Any, index_text: Callable[[str], str] | None,
                   lock_timeout: float, collection_name: str = "swrag") -> VectorStorage:
    """The default storage: a `ChromaStorage` (``index_text`` applied to
    the chunk texts it embeds)."""
    from swrag_integrations.stores.chroma import ChromaStorage

    return ChromaStorage(client, collection_name, embedding, index_text=index_text, root=root,
                         lock_timeout=lock_timeout)


class IndexEngine:
    """A sliding-window index without a framework (see the module docstring).

    Build one with `open`; the constructor takes parts already opened.

    Args:
        store: the source store (the one truth of the index).
        vectors: the vector storage (`VectorStorage`).
        collection_name: the name recorded in the manifest.
        persist_directory: the folder of a local index (``None`` otherwise).
        server: the URL of a Chroma server the parts live on (for messages).
        chunking: chunking keywords (`IndexConfig`; ``None`` values take
            the stored ones of an existing index).
        batch_size: chunks embedded and written per batch.
        show_progress: tqdm progress bars while indexing (default off: a library call is
            quiet; ``swrag index`` turns them on).
        index_text: ``chunk text -> text to index`` for BM25 (the storage applies it to
            what it embeds).
        lock_timeout: seconds a writer waits for another one.
        keyword_search: where keyword (BM25) search runs: ``"auto"`` (default) in the
            storage when it offers ``keyword_search`` (`MilvusStorage`),
            else in process; ``"store"`` requires the storage's; ``"local"`` always the
            in-process `KeywordIndex`. Either way its hits are checked
            and fused with the dense ones alike (`search_children`).

    Raises:
        ValueError: ``batch_size`` is not a positive int, ``collection_name`` is invalid,
            ``keyword_search`` is unknown (or ``"store"`` for a storage without keyword
            search), or ``chunking`` differs from the parameters the index was built with.
        IndexMismatchError: the store's manifest is of another format or records another
            kind of vector storage, or the store holds sources but no manifest.
    """

    def __init__(self, store: SourceStore, vectors: VectorStorage, *, collection_name: str = "swrag",
                 persist_directory: Path | None = None, server: str | None = None,
                 chunking: dict[str, Any] | None = None, batch_size: int = 256, show_progress: bool = False,
                 index_text: Callable[[str], str] | None = None, lock_timeout: float = 600.0,
                 keyword_search: str = "auto") -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.collection_name = validate_collection_name(collection_name)
        self.store = store
        self.vectors = vectors
        self.persist_directory = persist_directory
        self.server = server
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.index_text = index_text or (lambda text: text)
        self.lock_timeout = float(lock_timeout)
        self.probed = False  # the self-retrieval probe passed since the last repair
        self._embedding_checked = False
        self._embedding_dim: int | None = None
        self._vector_generation: int | None = None  # the store generation this handle's vectors reflect
        self._size: tuple[int, int, int] | None = None  # (store generation, chunks, sources): sizes()
        self.manifest = self._open_manifest({k: v for k, v in (chunking or {}).items()})
        self.index_id: str = self.manifest["index_id"]
        self.config = IndexConfig.from_json(self.manifest["config"])
        self.keyword_mode = keyword_mode(keyword_search, vectors)
        self.keyword: KeywordIndex | StorageKeyword
        if self.keyword_mode == "store":
            self.keyword = StorageKeyword(self)
        else:
            self.keyword = KeywordIndex(self.store, index_text=self.index_text)
            self.wrap(self.keyword.load, "load the keyword index")

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, persist_directory: str | os.PathLike | None = None, *, embedding: Any = None,
             storage: VectorStorage | str | None = None, source_store: Any = None, collection_name: str = "swrag",
             host: str | None = None, port: int | None = None, ssl: bool = False,
             headers: dict[str, str] | None = None, client: Any = None,
             storage_factory: StorageFactory | None = None, batch_size: int = 256, show_progress: bool = False,
             index_text: Callable[[str], str] | None = None, lock_timeout: float = 600.0,
             keyword_search: str = "auto", **chunking: Any) -> "IndexEngine":
        """Open (or create) an index.

        Args:
            persist_directory: a local folder (Chroma in ``<dir>/chroma``, sources in
                ``<dir>/sources/<collection>.sqlite3``); default
                `default_index_dir` when no ``storage``,
                ``host``, ``client`` or ``source_store`` is given.
            embedding: any object with ``embed_documents``/``embed_query``
                (`Embedder`); default the bundled MiniLM.
            storage: a vector storage of your own (then give ``source_store`` or
                ``persist_directory`` for the sources), or a store URI
                (`.store_uri`): ``"milvus:PATH.db"`` (Milvus Lite), ``"milvus"``
                (``<persist_directory>/milvus.db``), ``"milvus://HOST:19530"``,
                ``"chroma://HOST:8000"`` (as ``host``/``port``) or ``"chroma"`` (the
                default). With Milvus the sources stay in ``persist_directory``; a
                ``"postgresql://USER@HOST/DB"`` database keeps everything
                (`PostgresStorage`, see `_open_postgres`).
            source_store: a `SourceStore`, a SQLite path or a key-value
                byte store.
            host, port, ssl, headers: a Chroma server for vectors and sources.
            client: an existing chromadb client.
            storage_factory: ``(client, root, embedding, index_text, lock_timeout) ->
                storage`` for the Chroma collection (default `chroma_storage`).
            keyword_search: ``"auto"``, ``"store"`` or ``"local"`` (see `IndexEngine`).
            chunking: ``chunk_size``, ``child``, ``medium_size``, ``strategy``,
                ``window_size``, ``step``, ``unit``, ``delimiters``, ``encoding_name``.
        """
        from swrag_integrations.stores.chroma import open_client

        validate_collection_name(collection_name)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        unknown = sorted(set(chunking) - set(IndexConfig.__dataclass_fields__))
        if unknown:
            raise TypeError(f"IndexEngine.open() got unexpected keyword argument(s) {', '.join(unknown)}")
        milvus = None
        given_store = isinstance(storage, (str, os.PathLike))  # named by URI (else the recorded store, or Chroma)
        if isinstance(storage, (str, os.PathLike)):
            from swrag_integrations.stores.store_uri import parse_store_uri

            spec = parse_store_uri(storage)
            if spec.kind == "postgres":
                return cls._open_postgres(spec, persist_directory, embedding=embedding, source_store=source_store,
                                          collection_name=collection_name, others=(host, client),
                                          batch_size=batch_size, show_progress=show_progress, index_text=index_text,
                                          lock_timeout=lock_timeout, keyword_search=keyword_search, **chunking)
            storage = None
            if spec.kind == "milvus" or spec.host is not None:
                if host is not None or client is not None:
                    raise ValueError(f"store {spec.text!r} names the vector store already: give no host or client")
                if spec.kind == "milvus":
                    milvus = spec
                else:
                    host, port, ssl = spec.host, spec.port, spec.ssl
        if sum(x is not None for x in (storage, host, client)) > 1:
            raise ValueError("give at most one of vectorstore/storage, host or client")
        root = None
        if persist_directory is not None or (storage is None and host is None and client is None
                                             and source_store is None):
            from swrag_integrations.core.paths import default_index_dir, private_dir

            if persist_directory is None:
                persist_directory = default_index_dir()
            root = Path(persist_directory).expanduser()
            try:
                private_dir(root)  # new folders 0700; a user's existing folder keeps its mode
            except OSError as exc:
                raise ValueError(f"persist_directory {str(root)!r} cannot be created ({exc})") from exc
            if not root.is_dir():
                raise ValueError(f"persist_directory {str(root)!r} is not a directory")
        # the store a local index was built with is in its manifest: used when none is given, and a
        # different one refused (a relative Milvus Lite file resolved from another folder is another file)
        store_uri = None
        if root is not None and storage is None and host is None and client is None:
            if milvus is not None:
                milvus = absolute_store(milvus)
            store_uri = milvus.text if milvus is not None else "chroma"
            recorded = _recorded_store(root, collection_name) if source_store is None else None
            if recorded is not None and given_store and store_uri != recorded:
                kind = "Chroma" if recorded == "chroma" else "Milvus"
                raise IndexMismatchError(
                    f"the index in {root} keeps its vectors in {kind} ({recorded}), not {store_uri}: leave "
                    "--store (storage=) out, the index remembers its store, or index into a new folder")
            if recorded is not None and not given_store and recorded.startswith(("postgresql://", "postgres://")):
                from swrag_integrations.stores.store_uri import parse_store_uri

                return cls._open_postgres(parse_store_uri(recorded), root, embedding=embedding,
                                          source_store=source_store, collection_name=collection_name,
                                          others=(host, client), batch_size=batch_size, show_progress=show_progress,
                                          index_text=index_text, lock_timeout=lock_timeout,
                                          keyword_search=keyword_search, **chunking)
            if recorded is not None and not given_store and recorded != store_uri:
                from swrag_integrations.stores.store_uri import parse_store_uri

                milvus, store_uri = absolute_store(parse_store_uri(recorded)), recorded
        server = None
        embedded = storage is None and host is None and client is None  # an embedded Chroma of ours
        if storage is None and milvus is None:
            client, server = open_client(root, host=host, port=port, ssl=ssl, headers=headers, client=client,
                                         lock_timeout=lock_timeout)
        store = _open_source_store(source_store, root, client, storage is not None or milvus is not None,
                                   collection_name, server)
        opened = None  # a storage opened here (closed again if the open fails)
        try:
            if storage is None:
                if embedding is None:  # the bundled MiniLM, with the backend an existing index was built with
                    from swrag_integrations.embeddings.minilm import default_embeddings, recorded_backend

                    built_with = (store.get_meta().get("embedding") or {}).get("name")
                    embedding = default_embeddings(recorded_backend(built_with))
                if milvus is not None:
                    from swrag_integrations.stores.milvus import MilvusStorage

                    def factory(c: Any, r: Any, e: Any, t: Any, lt: float) -> VectorStorage:
                        return MilvusStorage.open(milvus, collection_name, e, root=root, index_text=t)
                else:
                    factory = storage_factory or (lambda c, r, e, t, lt: chroma_storage(c, r, e, t, lt,
                                                                                        collection_name))
                own_root = root if embedded else None
                with store.writer_lock(lock_timeout):  # two first-time writers must not race to create it
                    storage = opened = _wrap(server, lambda: factory(client, own_root, embedding, index_text,
                                                                     lock_timeout), "open the vector collection")
            elif index_text is not None:
                raise ValueError("index_text only applies to the default Chroma store; for your own vectorstore, "
                                 "build it with IndexTextEmbeddings(embedding, index_text) as its embedding")
            elif embedding is not None:
                storage.embedding = embedding
            engine = cls(store, storage, collection_name=collection_name, persist_directory=root, server=server,
                         chunking=chunking, batch_size=batch_size, show_progress=show_progress,
                         index_text=index_text, lock_timeout=lock_timeout, keyword_search=keyword_search)
            if store_uri is not None and engine.manifest.get("store") != store_uri:
                engine.set_meta("store", store_uri)  # a new index, or one written before the store was recorded
            return engine
        except BaseException:
            if source_store is None:  # ours: do not leave the database open behind a failed open
                store.close()
            if callable(getattr(opened, "close", None)):
                opened.close()
            raise

    def _open_manifest(self, requested: dict[str, Any]) -> dict[str, Any]:
        manifest = self.wrap(self.store.get_meta, "read the index manifest")
        if not manifest:
            with self.writing():
                manifest = self.store.get_meta()
                if not manifest:
                    return self._create_manifest(requested)
        if manifest.get("format") != FORMAT:
            raise IndexMismatchError(f"the index was written in format {manifest.get('format')!r}; this version reads "
                                     f"format {FORMAT}: index the files again into a new directory")
        recorded = (manifest.get("vectors") or {}).get("kind")
        if recorded != self.vectors.kind and "Milvus" in (recorded, self.vectors.kind):
            raise IndexMismatchError(
                f"this index keeps its vectors in {recorded}, not {self.vectors.kind}: open it with the store it was "
                "built with (--store / storage=), or index into a new folder")
        vector_id_scheme(manifest)  # one this version knows
        config = IndexConfig.from_json(manifest["config"])
        mismatched = config.mismatches(requested)
        if mismatched:
            detail = ", ".join(f"{k}={v!r} (index has {s!r})" for k, (v, s) in mismatched.items())
            raise ValueError(f"this index was built with other chunking parameters: {detail}. "
                             "Leave them unset to reuse the stored ones, or use a new index.")
        self._check_pairing(manifest)
        return manifest

    def _create_manifest(self, requested: dict[str, Any]) -> dict[str, Any]:
        heads = self.store.heads()
        held = self.vectors.count()
        if heads:
            raise IndexMismatchError(f"the source store {self.store!r} holds {len(heads)} sources but no index manifest; "
                                     "it was not written by SlidingWindowIndex")
        if held:
            raise IndexMismatchError(
                f"the vector store ({self.vectors.kind}) already holds {held} vectors, but the source store "
                f"{self.store!r} is empty: its source texts are lost or it belongs to another index. Use an empty "
                "vector store (another collection), or restore the source store"
                + (f" (a local index: move {self.persist_directory} away and index the files again)"
                   if self.persist_directory else ""))
        manifest = {
            "format": FORMAT, "index_id": uuid.uuid4().hex, "config": IndexConfig.resolve(**requested).to_json(),
            "embedding": {"name": embedding_name(self.vectors.embedding), "dim": None},
            "vectors": {"kind": self.vectors.kind, "collection": self.collection_name},
            "vector_ids": VECTOR_ID_SCHEME,
        }
        self.store.set_meta(manifest)
        return manifest

    def _check_pairing(self, manifest: dict[str, Any]) -> None:
        """The vectors sampled from complete sources must carry this index's id."""
        if not self.vectors.can_get:
            return
        heads = self.store.heads()
        sample = [(sid, h) for sid, h in sorted(heads.items()) if h.state == "complete" and h.n_chunks][:5]
        if not sample:
            return
        ids = [v for sid, h in sample for v in vector_ids(manifest, sid, h.content_hash, 0, 1)]
        found = self.wrap(lambda: self.vectors.present(ids), "read vectors")
        foreign = [m.get("swrag_index") for m in found.values() if m.get("swrag_index") != manifest["index_id"]]
        if foreign:
            raise IndexMismatchError(
                f"the vector store ({self.vectors.kind}) holds vectors of another index ({foreign[0]!r}), not of the "
                f"index whose sources are in {self.store!r}: pass the vector store this index was built with")

    # ------------------------------------------------------------------ files
    def add_files(self, paths: str | os.PathLike | Iterable[str | os.PathLike], *, prune: bool = True,
                  encoding: str | None = None, errors: str = "strict", workers: int | None = None) -> Any:
        """Load files (`load_files`) and index them.

        A file's identity (``metadata["source"]``) is the absolute path it was reached
        by: a symlinked file is read through its link but indexed under the link's path.
        With ``prune`` (default) the index then mirrors the given paths
        (`stale`): sources of files that were deleted, emptied
        (a CSV down to its header or 0 bytes too), or can no longer be read faithfully
        (skipped, with a warning) are removed, as are CSV rows and PDF pages that
        disappeared, sources stored under another path to a file indexed now (the
        resolved path earlier versions stored), and sources of files elsewhere that no
        longer exist while their folder does; files the walk does not look at (hidden
        or symlinked folders) keep their sources while they exist. Returns an `IndexReport`
        (``skipped_files`` lists what was not loaded and why). ``workers``: load, cut and embed in this many
        worker processes, one writer (`index_in_parallel`). ``swrag index``
        and both faces (``SlidingWindowIndex.add_files``) run this; Ray ingestion
        (`index_with_ray`) prunes with the same
        `indexed_origins` and `stale`.

        Raises:
            ValueError: no indexable file under ``paths``.
            FileNotFoundError: a given path does not exist.
        """
        if workers is not None:
            from swrag_integrations.ingest.workers import index_in_parallel

            return index_in_parallel(self, paths=paths, workers=workers, prune=prune, encoding=encoding,
                                     errors=errors)
        from swrag_integrations.ingest.files import indexed_origins, load_files

        loaded = load_files(paths, encoding=encoding, errors=errors)
        if not loaded.files:
            raise ValueError("no indexable files (.txt, .md, .markdown, .pdf, .csv) under the given paths")
        remove: list[str] = []
        if prune:
            remove = loaded.stale(indexed_origins(self.store), {str(d.metadata["source"]) for d in loaded.documents},
                                  [s.path for s in loaded.skipped])
        report = self.index_documents(loaded.documents, prune="origins" if prune else False, remove_origins=remove)
        report.skipped_files = [(str(s.path), s.reason) for s in loaded.skipped]
        return report

    def set_meta(self, key: str, value: Any) -> None:
        """Record ``value`` under ``key`` in the manifest (writer lock held meanwhile)."""
        with self.writing():
            manifest = dict(self.store.get_meta())
            manifest[key] = value
            self.store.set_meta(manifest)
        self.manifest = manifest

    def close(self) -> None:
        """Close the source store, and the vector storage where it can be closed
        (`close` releases a Milvus Lite file)."""
        self.store.close()
        if callable(getattr(self.vectors, "close", None)):
            self.vectors.close()

    # ------------------------------------------------------------------ checks
    def wrap(self, fn: Callable[[], Any], action: str) -> Any:
        """``fn()``; on a Chroma server, a connection failure becomes a ``ConnectionError``
        that names the server and the ``action``."""
        return _wrap(self.server, fn, action)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the writer lock (or lease) of the index; afterwards this handle's vectors
        count as current (it wrote them itself)."""
        with self.store.writer_lock(self.lock_timeout):
            try:
                yield
            finally:
                self._vector_generation = self.wrap(self.store.generation, "read the index generation")

    def sync_vectors(self, generation: int | None = None) -> None:
        """Reopen a local storage once another process has written to the index.

        An embedded Chroma collection keeps its HNSW index in this process and does not
        read what another process added later; the source store's generation tells when
        anything was written since this handle last wrote or looked, and then the
        storage is reopened (`reopen`). A server or a
        caller's own store is left alone. ``generation``: the store's generation as this
        search read it (`read_generation`; ``None``: read it here).
        """
        if not self.vectors.reopenable or self.persist_directory is None:
            return
        if generation is None:
            generation = self.read_generation()
        if self._vector_generation is None:
            self._vector_generation = generation
        elif generation != self._vector_generation:
            self.vectors.reopen()
            self._vector_generation = generation

    @property
    def embedding_checked(self) -> bool:
        """Whether `check_embedding` has passed on this handle (it runs once)."""
        return self._embedding_checked

    def check_embedding(self, dim: int | None = None) -> None:
        """Raise `IndexMismatchError` when the embedding's dimension differs from
        the one the index was built with (recorded on the first write).

        Args:
            dim: the embedding's dimension when it was measured elsewhere with the same
                embedding (`embedding_dimension` in a worker process of a parallel
                build), so that this process does not load the model just to learn it;
                ``None``: one query is embedded here.
        """
        if self._embedding_checked:
            return
        if dim is None:
            dim = embedding_dimension(self.vectors.embedding)
        elif isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int (the embedding's dimension), got {dim!r}")
        stored = (self.manifest.get("embedding") or {}).get("dim")
        name = embedding_name(self.vectors.embedding)
        if stored is not None and int(stored) != dim:
            raise IndexMismatchError(
                f"this index was built with {stored}-dimensional embeddings "
                f"({self.manifest['embedding'].get('name')}); the embedding given now ({name}) makes {dim}: pass the "
                "embedding the index was built with, or index into a new directory")
        stored_name = (self.manifest.get("embedding") or {}).get("name")
        if stored is not None and stored_name and stored_name != name and not stored_name.startswith("migrated"):
            warnings.warn(f"this index was built with {stored_name}; searching it with {name} (same dimension) "
                          "gives slightly different vectors", stacklevel=3)
        self._embedding_dim = dim
        self._embedding_checked = True

    def record_embedding(self) -> None:
        """Store the embedding's dimension in the manifest (first write; lock held)."""
        self.check_embedding()
        if (self.manifest.get("embedding") or {}).get("dim") is None:
            self.manifest = dict(self.store.get_meta())
            self.manifest["embedding"] = {"name": embedding_name(self.vectors.embedding), "dim": self._embedding_dim}
            self.store.set_meta(self.manifest)

    def before_search(self) -> None:
        """The embedding check and (once per handle and repair) the self-retrieval probe."""
        self.check_embedding()
        if not self.probed:
            from swrag_integrations.engine.health import probe_vectors

            problem = probe_vectors(self)
            if problem:
                raise IndexDamagedError(f"{problem}; run `swrag repair` (or index.engine.repair()) on "
                                        f"{self.persist_directory or self.store!r}")
            self.probed = True

    # ------------------------------------------------------------------ writing
    def index_documents(self, documents: Iterable[Any], *, ids: Sequence[str] | None = None,
                        prune: bool | str = False, remove_origins: Iterable[str] | None = None,
                        workers: int | None = None) -> Any:
        """Index documents (anything with ``page_content``, ``metadata`` and optionally
        ``id``: a `PlainDocument`, a LangChain ``Document``); returns an
        `IndexReport`.

        Re-adding an unchanged document writes nothing (unless its vectors are
        missing); a changed one (same `source_key`) replaces its record and
        vectors; an empty one removes the previous version of that source. ``ids`` gives
        each document's identity (as ``Document.id``). Text or metadata with a lone
        surrogate (not valid Unicode) is refused with a ``ValueError`` naming the
        document, before anything is written (`check_storable`).

        Args:
            prune: ``"origins"`` (or ``True``): for every file (``metadata["source"]``)
                in this batch, remove that file's sources not in the batch (e.g. CSV rows
                or PDF pages that disappeared); ``"all"``: remove every source not in the
                batch.
            remove_origins: also remove the sources of these files (``metadata["source"]``
                values) that are not in the batch, e.g. files deleted from a re-indexed folder.
            workers: cut and embed in this many worker processes, one writer
                (`index_in_parallel`); ``None``: in this process.
        """
        from swrag_integrations.ingest.writer import write_documents

        docs = list(documents)
        if ids is not None:
            ids = list(ids)
            if len(ids) != len(docs):
                raise ValueError(f"got {len(ids)} ids for {len(docs)} documents")
            docs = [PlainDocument(page_content=d.page_content, metadata=dict(d.metadata or {}), id=str(i))
                    for d, i in zip(docs, ids)]
        # each document is checked once, all before anything is written: by dedupe_documents,
        # the door of both paths below
        if workers is not None:
            from swrag_integrations.ingest.workers import index_in_parallel

            return index_in_parallel(self, docs, workers=workers, prune=prune, remove_origins=remove_origins)
        return write_documents(self, docs, prune=prune, remove_origins=remove_origins)

    def index_texts(self, texts: Iterable[str], metadatas: Sequence[dict[str, Any]] | None = None, *,
                    ids: Sequence[str] | None = None) -> list[str]:
        """Index each text as one source; returns their ids (``ids`` if given, else the
        source ids)."""
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        if len(metas) != len(texts):
            raise ValueError(f"got {len(metas)} metadatas for {len(texts)} texts")
        docs = [PlainDocument(page_content=t, metadata=dict(m or {})) for t, m in zip(texts, metas)]
        report = self.index_documents(docs, ids=ids)
        return [str(i) for i in ids] if ids is not None else list(report.ids)

    def resolve_ids(self, ids: Sequence[str]) -> list[str]:
        """Source ids for ids given at add time (user ids), source ids, or the ids of offset
        chunks (`member_id`: their segment's source id)."""
        members = [parse_member_id(v) for v in ids]
        heads = self.store.heads(sorted({str(v) for v in ids} | {m[0] for m in members if m is not None}))
        return [m[0] if m is not None and m[0] in heads else source_id_of_id(v, heads) for v, m in zip(ids, members)]

    def delete(self, ids: Sequence[str]) -> int:
        """Remove what ``ids`` name (ids returned at add time, or source ids; unknown ones
        are ignored); returns how many sources went.

        The id of an offset chunk (`member_id`) removes that chunk only: the
        rest of its segment is joined again from the remaining chunks
        (`join_offset_chunks`) and written in its place.
        """
        from swrag_integrations.ingest.writer import write_documents

        whole: list[str] = []
        dropped: dict[str, set[tuple[int, int]]] = {}
        for given, sid in zip(ids, self.resolve_ids(ids)):
            member = parse_member_id(given)
            if member is None or member[0] != sid:
                whole.append(sid)
            else:
                dropped.setdefault(sid, set()).add(member[1:])
        records = self.store.get_many(sorted(set(dropped) - set(whole)))
        rest = [PlainDocument(rec.span(m["start"], m["end"]), dict(m["metadata"]))
                for sid, rec in records.items() for m in rec.members
                if rec.complete and (m["start"], m["end"]) not in dropped[sid]]
        kept = set(write_documents(self, rest, join_stored=False).ids) if rest else set()
        kept = {parse_member_id(i)[0] for i in kept if parse_member_id(i) is not None}
        return self.delete_sources(whole + [sid for sid in records if sid not in kept])

    def delete_sources(self, source_ids: Sequence[str]) -> int:
        """Remove sources by source id (unknown ids are ignored); returns how many went."""
        from swrag_integrations.ingest.writer import remove_sources

        return remove_sources(self, list(source_ids))

    def repair(self, *, deep: bool = False) -> Any:
        """Complete or remove unfinished sources, write missing vectors, rebuild a damaged
        vector collection and the keyword index (`repair`)."""
        from swrag_integrations.ingest.writer import repair

        return repair(self, deep=deep)

    def status(self, *, deep: bool = False, probe: bool = True) -> Any:
        """Health of every part (`IndexStatus`)."""
        from swrag_integrations.engine.health import index_status

        return index_status(self, deep=deep, probe=probe)

    def reset(self) -> None:
        """Remove every source and vector (keeps the configuration)."""
        self.delete_sources(sorted(self.store.heads()))

    # ------------------------------------------------------------------ reading
    @property
    def encoding_name(self) -> str:
        """tiktoken encoding of the token counts."""
        return self.config.encoding_name

    def count(self, level: str | None = "small") -> int:
        """Small chunks (``"small"``) or derived medium chunks (``"medium"``) of the
        complete sources, or vectors held by the storage (``None``; ``-1`` if unknown)."""
        if level is None:
            n = self.vectors.count()
            return -1 if n is None else n
        heads = [h for h in self.store.heads().values() if h.state == "complete"]
        if level == "small":
            return sum(h.n_chunks for h in heads)
        if level == "medium":
            m = self.config.medium_size
            return sum(-(-h.n_chunks // m) for h in heads)
        raise ValueError(f"level must be 'small', 'medium' or None, got {level!r}")

    def source_ids(self, *, include_incomplete: bool = False) -> list[str]:
        """Ids of the (complete) sources, sorted."""
        heads = self.store.heads()
        return sorted(s for s, h in heads.items() if include_incomplete or h.state == "complete")

    def record(self, source_id: str) -> SourceRecord | None:
        """The complete record of a source, or ``None``."""
        rec = self.store.get_many([source_id]).get(source_id)
        return rec if rec is not None and rec.complete else None

    def source_text(self, source_id: str) -> str:
        """The exact text of a source (``LookupError`` if unknown)."""
        rec = self.record(source_id)
        if rec is None:
            raise LookupError(f"no source {source_id!r} in the index")
        return rec.text

    def chunk_metadata(self, source_id: str) -> list[dict[str, Any]]:
        """Metadata of all small chunks of a source (chunk order)."""
        rec = self.record(source_id)
        if rec is None:
            return []
        return [rec.chunk_metadata(i, self.config.medium_size) for i in range(rec.n_chunks)]

    def get_chunks(self, ids: Sequence[str], *, records: dict[str, Any] | None = None) -> list[PlainDocument]:
        """Small/medium chunks by chunk id (``<sid>:s:<i>`` / ``<sid>:m:<j>``), in the
        order of ``ids`` (unknown ids and incomplete sources are left out); ``records``:
        the sources' records when the caller fetched them already (``store.get_many``)."""
        parsed = [(cid, p) for cid in ids if (p := parse_chunk_id(cid)) is not None]
        records = self.records_of([p.source_id for _, p in parsed], records)
        m = self.config.medium_size
        out = []
        for cid, p in parsed:
            rec = records.get(p.source_id)
            if rec is None or not rec.complete:
                continue
            if p.level == "s" and p.index < rec.n_chunks:
                out.append(PlainDocument(rec.chunk_text(p.index), rec.chunk_metadata(p.index, m), str(cid)))
            elif p.level == "m" and p.index < rec.n_mediums(m):
                meta = rec.medium_metadata(p.index, m)
                out.append(PlainDocument(rec.span(meta["start_index"], meta["end_index"]), meta, str(cid)))
        return out

    def records_of(self, source_ids: Sequence[str], records: dict[str, Any] | None = None) -> dict[str, Any]:
        """The records of ``source_ids`` (unknown ones left out): those in ``records`` (read
        by this search already: `ChildHit.record`) as they are, the others read from the
        store in one ``get_many`` (none when all were given)."""
        given = records or {}
        missing = sorted({sid for sid in source_ids if sid not in given})
        if not missing:
            return given
        return {**self.store.get_many(missing), **given}

    def chunk_rows(self, ranges: Sequence[tuple[str, int, int]], *,
                   records: dict[str, Any] | None = None) -> dict[str, list[ChunkRow]]:
        """Rows of chunk ranges ``(source_id, lower, upper)`` (see `ChunkIndex`);
        ``records``: the sources' records this search read already (`ChildHit.record`)."""
        records = self.records_of([r[0] for r in ranges], records)
        wanted: dict[str, set[int]] = {}
        for sid, lower, upper in ranges:
            rec = records.get(sid)
            if rec is None or not rec.complete:
                continue
            lo, hi = max(0, int(lower)), min(int(upper), rec.n_chunks - 1)
            wanted.setdefault(sid, set()).update(range(lo, hi + 1))
        out: dict[str, list[ChunkRow]] = {sid: [] for sid, _, _ in ranges}
        for sid, idx in wanted.items():
            a, text, b = records[sid].arrays, records[sid].text, records[sid].base  # offsets: source coordinates
            out[sid] = [ChunkRow(i, b + int(a[START, i]), b + int(a[END, i]), int(a[N_TOKENS, i]),
                                 text[a[START, i]:a[END, i]]) for i in sorted(idx)]
        return out

    def medium_range(self, source_id: str, chunk_index: int, *,
                     record: Any = None) -> tuple[int, int, int, int] | None:
        """Chunk and character range of the medium chunks whose windows cover a small chunk;
        ``record``: the source's record as this search read it (`ChildHit.record`)."""
        rec = self.records_of([source_id], {source_id: record} if record is not None else None).get(source_id)
        if rec is None or not rec.complete:
            return None
        m = self.config.medium_size
        firsts = np.arange(0, rec.n_chunks, m)
        lo = np.minimum.reduceat(rec.arrays[WIN_LO], firsts)
        hi = np.maximum.reduceat(rec.arrays[WIN_HI], firsts)
        js = np.nonzero((lo <= chunk_index) & (hi >= chunk_index))[0]
        if not js.size:
            return None
        metas = [rec.medium_metadata(int(j), m) for j in js]
        return (min(x["first_chunk"] for x in metas), max(x["last_chunk"] for x in metas),
                min(x["start_index"] for x in metas), max(x["end_index"] for x in metas))

    def span_text(self, source_id: str, start: int, end: int) -> str:
        """Exact source text ``[start, end)`` (source coordinates: a segment of offset
        chunks starts at its `base`)."""
        if end <= start:
            return ""
        rec = self.record(source_id)
        if rec is None:
            raise LookupError(f"no source {source_id!r} in the index")
        return rec.span(start, end)

    # ------------------------------------------------------------------ search
    def read_generation(self) -> int:
        """The store's generation: read once per search and handed to every step of it
        (sizes, keyword catch-up, vector reopening), so one search sees one snapshot."""
        return self.wrap(self.store.generation, "read the index generation")

    def sizes(self, generation: int | None = None) -> tuple[int, int]:
        """``(small chunks, sources)`` of the complete sources, read once per store generation
        (``generation``: the search's snapshot, `read_generation`)."""
        if generation is None:
            generation = self.read_generation()
        if self._size is None or self._size[0] != generation:
            heads = [h for h in self.store.heads().values() if h.state == "complete"]
            self._size = (generation, sum(h.n_chunks for h in heads), len(heads))
        return self._size[1], self._size[2]

    def size(self) -> int:
        """Small chunks of the complete sources: the most results a search can give."""
        return self.sizes()[0]

    def source_count(self) -> int:
        """Complete sources: the most documents a plain search can give."""
        return self.sizes()[1]

    def search_k(self, k: Any, name: str = "k", *, generation: int | None = None) -> int:
        """``k`` checked and clipped for a search: a positive int (not a bool), else a
        ``ValueError`` naming ``name``; then at most `size` (and at least 1), so no
        backend is ever asked for more results than the index holds (tantivy allocates
        ``k`` slots up front: ``k=10**12`` aborted the process). ``generation``: the
        search's snapshot (`read_generation`)."""
        from swrag_integrations.engine.settings import positive_int

        return max(1, min(positive_int(name, k), self.sizes(generation)[0]))

    def bm25_search(self, query: str, k: int = 20, *, filter: Any = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` of the ``k`` best BM25 chunks (complete sources only;
        ``filter``: only sources whose metadata passes it, see `.filters`), from the
        storage's keyword search or the in-process index (``keyword_search``)."""
        from swrag_integrations.engine.filters import SourceMatcher, parse_filter

        flt = parse_filter(filter)
        return self.keyword_hits(query, k, flt, SourceMatcher(flt, self.store) if flt is not None else None)

    def keyword_hits(self, query: str, k: int, flt: Any = None, matcher: Any = None, *,
                     generation: int | None = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` of the ``k`` best keyword chunks for a checked filter
        ``flt`` (`MetadataFilter`) and its `SourceMatcher`
        (``k``: see `search_k`; ``generation``: the search's snapshot,
        `read_generation`)."""
        if generation is None:
            generation = self.read_generation()
        k = self.search_k(k, generation=generation)
        allow = matcher.chunk_ids() if matcher is not None else None
        if isinstance(self.keyword, StorageKeyword):
            native = self.vectors.native_filter(flt) if flt is not None else None
            return self.keyword.search(query, k, allow=allow, native=native, generation=generation)
        return self.keyword.search(query, k, allow=allow, generation=generation)

    def _served(self, docs: Sequence[Any]) -> list[str | None]:
        """For each chunk a storage returned, its chunk id when it may be served (its
        source is complete and the chunk's vector was written for the source's current
        text), else ``None``."""
        heads = self.store.heads(sorted({str((d.metadata or {}).get("source_id")) for d in docs}))
        out: list[str | None] = []
        for doc in docs:
            meta = doc.metadata or {}
            sid = str(meta.get("source_id"))
            head = heads.get(sid)
            if head is None or head.state != "complete" or meta.get("content_hash") != head.content_hash:
                out.append(None)  # a vector of a source being rewritten, or of an old version
            else:
                out.append(chunk_id(sid, int(meta["chunk_index"])))
        return out

    def storage_keyword_hits(self, query: str, k: int, *, allow: Callable[..., Any] | None = None,
                             native: dict[str, Any] | None = None,
                             generation: int | None = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` of the ``k`` best chunks by the storage's own keyword
        search (``vectors.keyword_search``), best first: only servable chunks
        (`_served`) that ``allow`` (a chunk-id predicate, e.g. a filter's) passes;
        ``native``: the storage's filter arguments. More chunks are fetched while fewer
        than ``k`` passed and the storage had more (up to `MAX_FETCH`); ``generation``:
        the search's snapshot (`read_generation`)."""
        if generation is None:
            generation = self.read_generation()
        self.sync_vectors(generation)
        k = self.search_k(k, generation=generation)
        n = min(k, MAX_FETCH)
        while True:
            hits = self.wrap(lambda: self.vectors.keyword_search(query, n, native=native),
                             "search keywords in the vector store")
            out = [(cid, float(score)) for cid, (_, score) in zip(self._served([d for d, _ in hits]), hits)
                   if cid is not None]
            if allow is not None and out:
                out = [hit for hit, ok in zip(out, allow([c for c, _ in out])) if ok]
            if len(out) >= k or len(hits) < n or n >= MAX_FETCH:
                return out[:k]
            n = min(4 * n, MAX_FETCH)

    def dense_ids(self, query: str, k: int = 20, *, search_type: str = "mmr", fetch_k: int | None = None,
                  lambda_mult: float = 0.5, filter: Any = None) -> list[str]:
        """Chunk ids of the ``k`` nearest small chunks (optionally MMR), best first,
        only chunks whose vector matches a complete source's current text.

        ``filter``: a metadata filter (`.filters`), pushed down to the storage where
        it can filter, and checked against each source's record; more chunks are
        fetched while fewer than ``k`` passed and the storage had more. ``k`` and
        ``fetch_k`` are checked and clipped to the index size (`search_k`).
        """
        from swrag_integrations.engine.filters import SourceMatcher, parse_filter

        if search_type not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {search_type!r}")
        generation = self.read_generation()
        k = self.search_k(k, generation=generation)
        fetch_k = None if fetch_k is None else self.search_k(fetch_k, "fetch_k", generation=generation)
        flt = parse_filter(filter)
        matcher = SourceMatcher(flt, self.store) if flt is not None else None
        native = self.vectors.native_filter(flt) if flt is not None else None
        self.before_search()
        self.sync_vectors(generation)
        qvec = self.vectors.embed_query(query)
        return [cid for cid, _ in self._dense_scored(qvec, k, search_type, fetch_k, lambda_mult, matcher, native,
                                                     generation=generation)]

    def _dense_scored(self, qvec: Sequence[float], k: int, search_type: str, fetch_k: int | None,
                      lambda_mult: float, matcher: Any, native: Any, *,
                      generation: int | None = None) -> list[tuple[str, float | None]]:
        """`dense_ids` for a query vector and a checked ``k``: ``(chunk_id, cosine
        similarity clipped to [0, 1])``, the similarity ``None`` under MMR (the store
        reports none); ``generation``: the search's snapshot (`read_generation`).
        Fetches more while vectors it does not serve (filtered out, or of another version:
        `_served`) leave fewer than ``k``."""
        size = self.sizes(generation)[0]
        n = k
        while True:
            if search_type == "mmr":
                pairs = [(d, None) for d in self.wrap(
                    lambda: self.vectors.search(qvec, n, mmr=True, fetch_k=fetch_k or max(n, min(max(4 * n, 20), size)),
                                                lambda_mult=lambda_mult, native=native), "search the vectors")]
            else:
                pairs = self.wrap(lambda: self.vectors.search_scored(qvec, n, native=native), "search the vectors")
            out = [(cid, score) for cid, (_, score) in zip(self._served([d for d, _ in pairs]), pairs)
                   if cid is not None]
            unserved = len(pairs) - len(out)  # vectors no current record references
            if matcher is not None and out:
                out = [hit for hit, ok in zip(out, matcher.passes([parse_chunk_id(c).source_id for c, _ in out]))
                       if ok]
            if (matcher is None and not unserved) or len(out) >= k or len(pairs) < n or n >= size + unserved:
                return out[:k]
            n = min(4 * n, size + unserved)

    def relevances(self, qvec: Sequence[float], chunk_ids: Sequence[str], *,
                   records: dict[str, Any] | None = None) -> dict[str, float]:
        """The relevance of chunks to a query vector: the cosine similarity of the query
        and the chunk's embedding (of its indexed text, as stored), clipped to [0, 1]
        (the score the dense search reports on Chroma, Milvus and ``InMemoryVectorStore``).

        The vectors the storage holds are read back where it can
        (``vectors.stored_vectors(vector_ids)``, e.g. `ChromaStorage`): the
        very vectors the dense search compares, kept when written for the source's current
        text; the other chunks are embedded again. ``records``: the sources' records as
        this search already fetched them (``store.get_many``), so they are not fetched again.
        """
        ids = [str(c) for c in chunk_ids]
        records = self.records_of([p.source_id for c in ids if (p := parse_chunk_id(c)) is not None], records)
        vectors: dict[str, Any] = {}
        stored = getattr(self.vectors, "stored_vectors", None)
        if callable(stored):
            vid = {}
            for c in ids:
                parsed, rec = parse_chunk_id(c), None
                if parsed is not None:
                    rec = records.get(parsed.source_id)
                if rec is not None:  # the id this version's record references (vector_ids: scheme-aware)
                    vid[vector_ids(self.manifest, parsed.source_id, rec.content_hash, parsed.index,
                                   parsed.index + 1)[0]] = c
            for v, (vec, meta) in self.wrap(lambda: stored(list(vid)), "read the stored vectors").items():
                cid = vid.get(v)
                rec = records.get(str((meta or {}).get("source_id")))
                if cid is not None and rec is not None and (meta or {}).get("content_hash") == rec.content_hash:
                    vectors[cid] = vec
        missing = [c for c in ids if c not in vectors]
        if missing:
            docs = self.get_chunks(missing, records=records)
            if docs:
                for d, v in zip(docs, self.vectors.embed_documents([d.page_content for d in docs])):
                    vectors[str(d.id)] = v
        kept = [c for c in ids if c in vectors]
        if not kept:
            return {}
        vecs = np.asarray([vectors[c] for c in kept], dtype=float)
        q = np.asarray(qvec, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            cos = vecs @ q / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(q))
        return {c: float(min(1.0, max(0.0, x))) if np.isfinite(x) else 0.0 for c, x in zip(kept, cos)}

    def search_children(self, query: str, k: int, *, search_type: str = DEFAULT_SEARCH_TYPE,
                        weights: Sequence[float] = (0.5, 0.5), rrf_c: float = 60.0,
                        filter: Any = None) -> list[ChildHit]:
        """Stage 1 of the windowed parent retriever (see `ChunkIndex`).

        The ``k`` best small chunks, BM25 and dense fused by weighted RRF (``weights``:
        ``(bm25, dense)``; ``(1, 0)`` is BM25 only, ``(0, 1)`` dense only). (Ranking whole
        windows from their chunks' BM25 statistics was measured and dropped: lower context
        recall on every dev set, see docs/eval/ranking.md.) ``filter``: only chunks of
        sources whose metadata passes it (`.filters`), in both rankings, so no
        window is built from (or around) a source the filter excludes.

        Each hit's metadata carries ``relevance``: the cosine similarity of the query and
        the chunk, clipped to [0, 1] (`relevances`; the dense search's own score
        where it measured one). Unlike the RRF score it does not depend on the ranks, so
        it compares across queries; it does not change the ranking.
        """
        from swrag_integrations.engine.filters import SourceMatcher, parse_filter
        from swrag_integrations.engine.parents import check_query

        check_query(query)
        if len(weights) != 2:
            raise ValueError(f"weights must be (bm25, dense), got {weights!r}")
        if search_type not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {search_type!r}")
        generation = self.read_generation()  # one snapshot for every step of this search
        k = self.search_k(k, generation=generation)
        flt = parse_filter(filter)
        matcher = SourceMatcher(flt, self.store) if flt is not None else None
        bm25 = self.keyword_hits(query, k, flt, matcher, generation=generation) if weights[0] > 0 else []
        self.before_search()
        self.sync_vectors(generation)
        qvec = self.vectors.embed_query(query)
        dense_scored = (self._dense_scored(qvec, k, search_type, None, 0.5, matcher,
                                           self.vectors.native_filter(flt) if flt is not None else None,
                                           generation=generation)
                        if weights[1] > 0 else [])
        dense = [cid for cid, _ in dense_scored]
        fused = rrf([[cid for cid, _ in bm25], dense], weights, c=rrf_c)[:k]
        bm25_score = dict(bm25)
        parsed = [(cid, parse_chunk_id(cid), score, ranks) for cid, score, ranks in fused]
        records = self.records_of([p.source_id for _, p, _, _ in parsed if p is not None],
                                  matcher.records if matcher is not None else None)  # the filter read most already
        relevance = {cid: score for cid, score in dense_scored if score is not None}
        unscored = [cid for cid, _, _ in fused if cid not in relevance]
        if unscored:  # keyword-only hits (and MMR's): measured the same way, on the records fetched above
            relevance.update(self.relevances(qvec, unscored, records=records))
        m = self.config.medium_size
        hits = []
        for cid, p, score, ranks in parsed:
            rec = records.get(p.source_id) if p is not None else None
            if rec is None or not rec.complete or p.index >= rec.n_chunks:
                continue
            if flt is not None and not flt.matches({**rec.index_metadata, "source_id": rec.source_id}):
                continue  # changed since the rankings looked (never served against the filter)
            meta = rec.chunk_metadata(p.index, m)
            meta.update(rrf_score=score, fused_rank=len(hits) + 1, relevance=relevance.get(cid, 0.0))
            if ranks[0] is not None:
                meta.update(bm25_rank=ranks[0], bm25_score=bm25_score[cid])
            if ranks[1] is not None:
                meta["dense_rank"] = ranks[1]
            hits.append(ChildHit(p.source_id, p.index, score, len(hits) + 1, meta["window_lower_bound"],
                                 meta["window_upper_bound"], meta["window_start_index"], meta["window_end_index"],
                                 meta["start_index"], meta["end_index"], meta, rec))
        return hits

    def disk_size(self) -> int:
        """Bytes used on disk by a local index (vectors, sources, keyword index)."""
        root = self.persist_directory
        if root is None or not root.exists():
            return 0
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    def __repr__(self) -> str:
        where = self.server or (str(self.persist_directory) if self.persist_directory else repr(self.store))
        return f"IndexEngine({where!r}, collection_name={self.collection_name!r}, vectors={self.vectors.kind})"

    # ------------------------------------------------------------------ what the faces used to hold
    @property
    def tuned_config(self) -> Any:
        """The tuned configuration this index was built (or last opened) with, as a
        `TunedConfig` (evidence: its summary only), or
        ``None``. Read from the manifest, so it survives reopening without ``config=``."""
        record = self.manifest.get("tuned")
        if not record:
            return None
        from swrag_integrations.engine.tuned import FORMAT_VERSION, TunedConfig

        return TunedConfig.from_dict({"swrag_tuned_config": FORMAT_VERSION, **record}, where="the index's record")

    def record_tuned(self, tuned: Any) -> None:
        """Keep ``tuned`` (a ``TunedConfig``: its settings and the summary of its evidence) in
        the manifest, once all of it validated: its retriever part is checked as retriever
        settings first (`RetrieverSettings`), so a rejected configuration is
        never recorded. Nothing is written when the manifest holds it already."""
        import json

        from swrag_integrations.engine.settings import RetrieverSettings

        RetrieverSettings.from_kwargs({k: v for k, v in tuned.retriever_kwargs.items() if v is not None},
                                      where="the tuned configuration's retriever part")
        ev = tuned.evidence or {}
        record = {"index": tuned.index_kwargs, "retriever": tuned.retriever_kwargs, "chosen": tuned.chosen,
                  "evidence": {k: ev[k] for k in ("best", "default", "versus_default") if k in ev}}
        record = json.loads(json.dumps(record, ensure_ascii=False))  # the form it is stored in
        if self.manifest.get("tuned") != record:
            self.set_meta("tuned", record)

    def delete_source(self, source: Any) -> int:
        """Remove one source: a source id, an id given at add time, or a document (its
        `source_id_for`); returns the number of small chunks it had (0 if unknown)."""
        sid = self.resolve_ids([source])[0] if isinstance(source, str) else source_id_for(source)
        head = self.store.heads([sid]).get(sid)
        if head is None:
            return 0
        self.delete_sources([sid])
        return head.n_chunks

    def explain(self, query: str, **options: Any) -> Any:
        """An HTML view of a query against this index with the retriever's settings (hits with
        their ranks, the windows they widen to, the spans kept under the budget, what was cut;
        shows itself in Jupyter; needs ``import swrag_integrations.view`` first, which
        registers the view)."""
        from swrag_integrations.core.display import make_view

        return make_view("index", self, query, **options)

    def held(self, doc_id: str) -> tuple[str, str] | None:
        """What the index holds under an id given at add time (or a source id):
        ``(content hash, metadata as sorted JSON)``, or ``None``; two calls differ exactly
        when the document's text or metadata changed in between."""
        import json

        record = self.record(self.resolve_ids([str(doc_id)])[0])
        if record is None:
            return None
        return record.content_hash, json.dumps(record.metadata, sort_keys=True, default=str)

    def delete_document(self, doc_id: str) -> None:
        """Remove a document by the id it was added under (or its source id), with the
        offset chunks joined under that id (the sources whose origin,
        ``metadata["source"]``, it is); unknown ids are ignored."""
        self.delete_sources(self.resolve_ids([str(doc_id)]))
        self.index_documents([], remove_origins=[str(doc_id)])

    # ------------------------------------------------------------------ PostgreSQL
    @classmethod
    def _open_postgres(cls, spec: Any, persist_directory: Any, *, embedding: Any, source_store: Any,
                       collection_name: str, others: tuple[Any, ...], index_text: Any, batch_size: int,
                       show_progress: bool, lock_timeout: float, keyword_search: str,
                       **chunking: Any) -> "IndexEngine":
        """`open` for a ``postgresql://`` store: one `PostgresStorage`
        is both the source store and the vector storage (sources, chunks, vectors and
        keywords commit together), so no index folder is needed. A ``persist_directory``
        given only remembers the store (its manifest records the URI), so the folder
        opens the database index again without ``storage=`` (``--store``)."""
        from swrag_integrations.stores.postgres import PostgresStorage
        from swrag_integrations.stores.store_uri import redacted_uri

        if any(x is not None for x in others):
            raise ValueError(f"store {spec.text!r} names the vector store already: give no host or client")
        if source_store is not None:
            raise ValueError("a postgresql:// store keeps the sources in the database: give no source_store")
        uri = redacted_uri(spec.text)
        storage = PostgresStorage.open(spec, collection_name, embedding, index_text=index_text)
        try:
            if persist_directory is not None:  # once the database answered
                _remember_store(Path(persist_directory).expanduser(), collection_name, uri)
            if embedding is None:  # the bundled MiniLM, with the backend the index was built with
                from swrag_integrations.embeddings.minilm import default_embeddings, recorded_backend

                storage.set_embedding(default_embeddings(recorded_backend(
                    (storage.get_meta().get("embedding") or {}).get("name"))))
            engine = cls(storage, storage, collection_name=collection_name, chunking=chunking, batch_size=batch_size,
                         show_progress=show_progress, index_text=index_text, lock_timeout=lock_timeout,
                         keyword_search=keyword_search)
            if engine.manifest.get("store") != uri:
                engine.set_meta("store", uri)
            return engine
        except BaseException:
            storage.close()
            raise


MAX_FETCH = 16384
"""The most chunks one storage keyword search asks for (a Milvus server's top-k limit)."""


def _wrap(server: str | None, fn: Callable[[], Any], action: str) -> Any:
    try:
        return fn()
    except Exception as exc:
        if server is not None:
            text = str(exc).lower()
            if "connect" in text or type(exc).__name__ in ("ConnectError", "ConnectTimeout", "ReadTimeout"):
                raise ConnectionError(f"Chroma server at {server} did not answer while trying to "
                                      f"{action}: {exc}") from exc
        raise


def absolute_store(spec: Any) -> Any:
    """A Milvus store URI (`StoreURI`) with its Lite file made absolute
    (against the working folder) and its text the canonical form recorded in the
    manifest: ``milvus:/abs/path.db``, ``milvus`` (the index folder's file) or the
    server's ``milvus[+https]://HOST:PORT``."""
    import dataclasses

    if spec.path is not None:
        path = Path(os.path.abspath(spec.path.expanduser()))
        return dataclasses.replace(spec, path=path, text=f"milvus:{path}")
    if spec.host is not None:
        return dataclasses.replace(spec, text=f"{'milvus+https' if spec.ssl else 'milvus'}://{spec.host}:{spec.port}")
    return dataclasses.replace(spec, text="milvus")


def _recorded_store(root: Path, collection_name: str) -> str | None:
    """The store URI the manifest of the local index in ``root`` records, or ``None``
    (no index there yet, or written before stores were recorded)."""
    path = root / "sources" / f"{collection_name}.sqlite3"
    if not path.is_file():
        return None
    store = SqliteSourceStore(path)
    try:
        return (store.get_meta() or {}).get("store")
    finally:
        store.close()


def _remember_store(root: Path, collection_name: str, uri: str) -> None:
    """Record a database store's ``uri`` in the local folder ``root`` (created private),
    which keeps nothing else; a folder holding a local index of another store is refused."""
    from swrag_integrations.core.paths import private_dir

    try:
        private_dir(root)
    except OSError as exc:
        raise ValueError(f"persist_directory {str(root)!r} cannot be created ({exc})") from exc
    recorded = _recorded_store(root, collection_name)
    if recorded == uri:
        return
    store = SqliteSourceStore(root / "sources" / f"{collection_name}.sqlite3")
    try:
        meta = store.get_meta() or {}
        if meta.get("index_id") or store.heads():
            raise IndexMismatchError(f"the index in {root} keeps its vectors in {recorded or 'chroma'}, not {uri}: "
                                     "leave --store (storage=) out, or give another folder")
        store.set_meta({**meta, "store": uri})
    finally:
        store.close()


def _open_source_store(source_store: Any, root: Path | None, client: Any, own_storage: bool, collection_name: str,
                       server: str | None) -> SourceStore:
    if source_store is not None:
        return as_source_store(source_store)
    if root is not None:
        from swrag_integrations.engine.migrate import migrate_if_needed

        migrate_if_needed(root, collection_name, client)
        return SqliteSourceStore(root / "sources" / f"{collection_name}.sqlite3")
    if own_storage:
        raise ValueError("give source_store= (a SourceStore, a SQLite path or a LangChain byte store such as "
                         "LocalFileStore) or persist_directory= to keep the source texts")
    name = validate_collection_name(collection_name + "_sources")
    return KVSourceStore(_wrap(server, lambda: ChromaByteStore(client, name), "open the source collection"))
