"""Sliding-window index: small-chunk vectors in any vector store, each source text stored once.

Every source document is cut into *small chunks* (default 50 cl100k tokens that tile
the text, see :func:`~.records.plan_source`). Their vectors go to a LangChain
``VectorStore`` (:class:`~.vectors.VectorBackend`; embedded Chroma by default); the
source's exact text, its chunks' offsets and their window bounds live once in a
*source store* (:mod:`.sources`; SQLite by default), the one truth of the index, from
which the BM25 side index (:class:`~.keyword.KeywordIndex`) is derived. Windows and
*medium chunks* are never stored: they are ranges of chunks, read at query time.

Guarantees (tested in ``tests/test_retrieval_reliability.py``):

* **Only complete sources are served.** A source is written to the source store as
  ``pending`` first, then its vectors, then it is marked ``complete``; dense and
  keyword hits of a source that is not complete (or whose vector carries another
  content hash) are dropped. A write that dies half-way is completed by the next
  write (from the stored text; the original documents are not needed) or by
  :meth:`SlidingWindowIndex.repair`.
* **Many writers, one truth.** Writers serialise on the source store's writer lock
  (a file lock for a local index, otherwise a lease that renews itself while held and
  whose epoch fences every write: a writer that lost it raises
  :class:`~.sources.LeaseLostError` and writes nothing more); every writer replays
  the store's change log into BM25 before it saves, and readers catch up with the
  log before every search, so no writer's documents are lost and no reader serves a
  stale keyword index.
* **Long-lived handles see other processes' writes.** Records are served from a cache
  only after it has replayed the store's change log, so a handle never reads, serves,
  re-indexes or completes (recovery) an older version of a source than the store holds.
* **Derived parts are checked.** The BM25 snapshot carries a checksum and the store
  generation it reflects; vector counts and a self-retrieval probe are checked before
  the first search (:meth:`SlidingWindowIndex.status` reports them), and re-adding a
  document whose vectors are missing writes them again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from .config import DEFAULT_SEARCH_TYPE, IndexConfig
from .fusion import rrf
from .ids import chunk_id, parse_chunk_id, source_id_for, source_key, vector_id
from .keyword import KeywordIndex
from .protocols import ChildHit, ChunkRow
from .records import END, N_TOKENS, START, WIN_HI, WIN_LO, SourceRecord
from .sources import ChromaByteStore, KVSourceStore, LockTimeout, SourceStore, SourceStoreError, SqliteSourceStore
from .vectors import IndexTextEmbeddings, PrecomputedEmbeddings, VectorBackend, default_chroma

__all__ = ["SlidingWindowIndex", "IndexMismatchError", "IndexDamagedError", "validate_collection_name", "FORMAT"]

logger = logging.getLogger(__name__)

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


def _as_tuned_config(config: Any) -> Any:
    """``config=`` of :class:`SlidingWindowIndex` as a ``TunedConfig`` (``None`` stays ``None``).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: a file or dict that is not a tuned configuration.
        TypeError: any other type.
    """
    if config is None:
        return None
    from ..tuning.config import TunedConfig

    if isinstance(config, TunedConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        return TunedConfig.load(config)
    if isinstance(config, dict):
        return TunedConfig.from_dict(config)
    raise TypeError(f"config must be a TunedConfig, a path to a configuration file or its dict, "
                    f"got {type(config).__name__}")


def _merge_tuned_chunking(given: dict[str, Any], tuned: dict[str, Any]) -> dict[str, Any]:
    """The chunking keywords with the tuned configuration's filled in; an explicit keyword
    that disagrees with the configuration raises ``ValueError`` naming both values."""
    out = dict(given)
    for name, value in tuned.items():
        explicit = out.get(name)
        if explicit is not None:
            same = (str(explicit).upper() == str(value).upper()) if name == "strategy" else explicit == value
            if not same:
                raise ValueError(f"{name}={explicit!r} contradicts the tuned configuration ({name}={value!r}); "
                                 f"leave {name} unset or edit the configuration")
        out[name] = value
    return out


def _as_source_store(value: Any) -> SourceStore:
    if isinstance(value, (SqliteSourceStore, KVSourceStore)):
        return value
    if isinstance(value, (str, os.PathLike)):
        return SqliteSourceStore(value)
    if all(callable(getattr(value, m, None)) for m in ("get_many", "heads", "put", "changes_since")):
        return value  # a SourceStore of the caller's own
    return KVSourceStore(value)  # a LangChain byte store (raises TypeError if it is none)


class SlidingWindowIndex(VectorStore):
    """Windowed parent-child index over any LangChain vector store (a ``VectorStore`` itself).

    As a LangChain ``VectorStore`` its documents are *sources*: ``add_documents``
    indexes documents (each cut into small chunks), ``delete``/``get_by_ids`` take the
    ids it returned, ``similarity_search`` (with scores, MMR, by vector) returns the
    added documents as they were added, ranked by their best chunk; windows come from
    the retrievers: ``as_retriever`` gives a :class:`~.retriever.WindowedParentRetriever`
    (merged windows under a token budget). It passes LangChain's
    ``VectorStoreIntegrationTests`` and works with its indexing API
    (``langchain_core.indexing.index``).

    Args:
        persist_directory: a local folder for the default stores (Chroma in
            ``<dir>/chroma``, sources in ``<dir>/sources/<collection>.sqlite3``). Default
            :func:`~swrag_integrations.paths.default_index_dir` (``$SWRAG_HOME/index``, else
            ``$XDG_DATA_HOME/swrag/index``) when no ``vectorstore``, ``host`` or ``client`` is given.
        vectorstore: any LangChain ``VectorStore`` for the chunk vectors (it embeds
            the chunk texts with its own embedding; ``embedding`` defaults to it).
            Needs ``source_store`` or ``persist_directory`` for the sources.
        source_store: where the sources live: a :class:`~.sources.SourceStore`, a path
            to a SQLite file, or any LangChain byte store (``LocalFileStore``...).
        embedding: LangChain ``Embeddings`` for queries (and for the default Chroma);
            default the bundled MiniLM.
        collection_name: Chroma collection of the default vector store.
        host, port, ssl, headers: use a running Chroma server for vectors and sources.
        client: an existing chromadb client for the default vector store.
        chunk_size, child, medium_size, strategy, window_size, step, unit, delimiters,
            encoding_name: the chunking (:class:`~.config.IndexConfig`); ``None`` takes
            the stored value of an existing index (different values raise).
        batch_size: chunks embedded and written per batch.
        show_progress: tqdm progress bars while indexing.
        index_text: optional ``chunk text -> text to index`` for BM25 and the default
            store's embeddings (e.g. contextual headers); stored chunks stay exact.
        lock_timeout: seconds a writer waits for another one.
        config: a tuned configuration (a :class:`~swrag_integrations.tuning.TunedConfig`,
            the path of a file written by ``swrag tune``, or its dict): its index part
            sets the chunking (an explicit chunking keyword that disagrees raises
            ``ValueError``), and the whole configuration is recorded in the index
            (:attr:`tuned_config`, kept across reopening), so :meth:`as_retriever`
            starts from its retriever settings.
    """

    def __init__(
        self,
        persist_directory: str | os.PathLike | None = None,
        *,
        vectorstore: VectorStore | None = None,
        source_store: Any = None,
        embedding: Embeddings | None = None,
        collection_name: str = "swrag",
        host: str | None = None,
        port: int | None = None,
        ssl: bool = False,
        headers: dict[str, str] | None = None,
        client: Any = None,
        chunk_size: int | None = None,
        child: str | None = None,
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
        lock_timeout: float = 600.0,
        config: Any = None,
    ) -> None:
        tuned = _as_tuned_config(config)
        chunking = dict(chunk_size=chunk_size, child=child, medium_size=medium_size, strategy=strategy,
                        window_size=window_size, step=step, unit=unit,
                        delimiters=tuple(delimiters) if delimiters is not None else None, encoding_name=encoding_name)
        if tuned is not None:
            chunking = _merge_tuned_chunking(chunking, tuned.index_kwargs)
        self.collection_name = validate_collection_name(collection_name)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if sum(x is not None for x in (vectorstore, host, client)) > 1:
            raise ValueError("give at most one of vectorstore, host or client")
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.lock_timeout = float(lock_timeout)
        self.index_text = index_text or (lambda text: text)
        self._custom_index_text = index_text is not None
        self.server: str | None = None
        self._client: Any = None
        root = None
        if persist_directory is not None or (vectorstore is None and host is None and client is None
                                             and source_store is None):
            if persist_directory is None:
                from ..paths import default_index_dir

                persist_directory = default_index_dir()
            root = Path(persist_directory).expanduser()
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ValueError(f"persist_directory {str(root)!r} cannot be created ({exc})") from exc
            if not root.is_dir():
                raise ValueError(f"persist_directory {str(root)!r} is not a directory")
        self.persist_directory = root
        self._own_chroma = vectorstore is None and host is None and client is None  # an embedded Chroma of ours
        self._vector_generation: int | None = None  # the source-store generation this handle's vectors reflect
        if vectorstore is None:
            self._client = self._chroma_client(root, host, port, ssl, headers, client)
        self.store = self._open_source_store(source_store, root, vectorstore)
        try:
            self._open_rest(vectorstore, embedding, index_text, chunking)
            if tuned is not None:
                self._record_tuned(tuned)
        except BaseException:
            if source_store is None:  # ours: do not leave the database open behind a failed open
                self.store.close()
            raise

    def _open_rest(self, vectorstore: Any, embedding: Any, index_text: Any, requested: dict[str, Any]) -> None:
        if embedding is None and vectorstore is None:
            from .embeddings import default_embeddings

            embedding = default_embeddings()
        if vectorstore is None:
            # PrecomputedEmbeddings: vectors computed by worker processes / Ray actors are
            # written through the store as they are (see retrieval/parallel.py)
            store_embedding = PrecomputedEmbeddings(IndexTextEmbeddings(embedding, index_text) if index_text
                                                    else embedding)
            with self.store.writer_lock(self.lock_timeout):  # two first-time writers must not race to create it
                vectorstore = self._wrap(lambda: default_chroma(self._client, self.collection_name, store_embedding),
                                         "open the vector collection")
        elif index_text is not None:
            raise ValueError("index_text only applies to the default Chroma store; for your own vectorstore, build it "
                             "with IndexTextEmbeddings(embedding, index_text) as its embedding")
        self.vectors = VectorBackend(vectorstore, embedding, reopen=self._reopen_chroma if self._own_chroma else None)
        self.vectorstore = vectorstore
        self._embedding_checked = False
        self._probed = False
        self.manifest = self._open_manifest(requested)
        self.index_id: str = self.manifest["index_id"]
        self.config = IndexConfig.from_json(self.manifest["config"])
        self.keyword = KeywordIndex(self.store, index_text=self.index_text)
        self._wrap(self.keyword.load, "load the keyword index")

    # ------------------------------------------------------------------ tuned configuration
    def _record_tuned(self, tuned: Any) -> None:
        """Keep ``tuned`` (its settings and the summary of its evidence) in the manifest,
        once all of it validated: its retriever part too (a retriever is built from it
        first), so a rejected configuration is never recorded."""
        import json

        from .retriever import WindowedParentRetriever

        WindowedParentRetriever(index=self, **{k: v for k, v in tuned.retriever_kwargs.items() if v is not None})
        ev = tuned.evidence or {}
        record = {"index": tuned.index_kwargs, "retriever": tuned.retriever_kwargs, "chosen": tuned.chosen,
                  "evidence": {k: ev[k] for k in ("best", "default", "versus_default") if k in ev}}
        record = json.loads(json.dumps(record, ensure_ascii=False))  # the form it is stored in
        if self.manifest.get("tuned") == record:
            return
        with self._writing():
            manifest = dict(self.store.get_meta())
            manifest["tuned"] = record
            self.store.set_meta(manifest)
        self.manifest = manifest

    @property
    def tuned_config(self) -> Any:
        """The tuned configuration this index was built (or last opened) with, as a
        :class:`~swrag_integrations.tuning.TunedConfig` (evidence: its summary only), or
        ``None``. Read from the index, so it survives reopening without ``config=``."""
        record = self.manifest.get("tuned")
        if not record:
            return None
        from ..tuning.config import FORMAT_VERSION, TunedConfig

        return TunedConfig.from_dict({"swrag_tuned_config": FORMAT_VERSION, **record}, where="the index's record")

    # ------------------------------------------------------------------ opening
    def _chroma_client(self, root: Path | None, host, port, ssl, headers, client) -> Any:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        if client is not None:
            return client
        if host is not None:
            port = int(port or 8000)
            self.server = f"{'https' if ssl else 'http'}://{host}:{port}"
            try:
                found = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers, settings=settings)
                found.heartbeat()
                return found
            except Exception as exc:  # chromadb raises ValueError / httpx errors
                raise ConnectionError(
                    f"cannot reach the Chroma server at {self.server} ({exc}). Start one with "
                    f"`chroma run --path DIR --host {host} --port {port}` or check host/port."
                ) from exc
        assert root is not None
        from filelock import FileLock, Timeout

        # Chroma creates its SQLite schema on first open without a lock of its own: two
        # processes opening a new folder at once raced ("table collections already exists")
        try:
            with FileLock(str(root / "chroma.open.lock"), timeout=self.lock_timeout):
                return chromadb.PersistentClient(path=str(root / "chroma"), settings=settings)
        except Timeout as exc:
            raise LockTimeout(f"another process has been opening the Chroma database in {str(root)!r} for over "
                              f"{self.lock_timeout:.0f} s") from exc
        except Exception as exc:
            raise ValueError(f"cannot open a Chroma database in {str(root / 'chroma')!r}: {exc}") from exc

    def _reopen_chroma(self) -> Any:
        """A fresh embedded Chroma system for this index's folder; returns the new store.

        chromadb keeps one ``System`` per folder and process (``SharedSystemClient``),
        shared by every client opened on it. A nearest-neighbour query on a collection
        while it was empty leaves that system's HNSW segment state at "nothing
        persisted"; once another process has written, every search, ``status()`` and
        ``repair()`` of every handle in this process fails with "Error creating hnsw
        segment reader: Nothing found on disk", and chromadb offers no reload. A new
        ``System`` reads the collection afresh (from its files and write log). So the
        stale system is dropped from chromadb's cache (not stopped: other handles may
        still hold it; they reopen in turn and then share the new one) and the
        collection is opened again through a new client.
        """
        from chromadb.api.shared_system_client import SharedSystemClient

        identifier = getattr(self._client, "_identifier", None)
        cache = SharedSystemClient._identifier_to_system
        if identifier is not None and cache.get(identifier) is getattr(self._client, "_system", None):
            cache.pop(identifier, None)
        self._client = self._chroma_client(self.persist_directory, None, None, False, None, None)
        self.vectorstore = default_chroma(self._client, self.collection_name, self.vectorstore.embeddings)
        return self.vectorstore

    def _open_source_store(self, source_store: Any, root: Path | None, vectorstore: Any) -> SourceStore:
        if source_store is not None:
            return _as_source_store(source_store)
        if root is not None:
            path = root / "sources" / f"{self.collection_name}.sqlite3"
            from .migrate import migrate_if_needed

            migrate_if_needed(root, self.collection_name, self._client)
            return SqliteSourceStore(path)
        if vectorstore is not None:
            raise ValueError("give source_store= (a SourceStore, a SQLite path or a LangChain byte store such as "
                             "LocalFileStore) or persist_directory= to keep the source texts")
        name = validate_collection_name(self.collection_name + "_sources")
        return KVSourceStore(self._wrap(lambda: ChromaByteStore(self._client, name), "open the source collection"))

    def _open_manifest(self, requested: dict[str, Any]) -> dict[str, Any]:
        manifest = self._wrap(self.store.get_meta, "read the index manifest")
        if not manifest:
            with self._writing():
                manifest = self.store.get_meta()
                if not manifest:
                    return self._create_manifest(requested)
        if manifest.get("format") != FORMAT:
            raise IndexMismatchError(f"the index was written in format {manifest.get('format')!r}; this version reads "
                                     f"format {FORMAT}: index the files again into a new directory")
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
            "embedding": {"name": _embedding_name(self.vectors.embedding), "dim": None},
            "vectors": {"kind": self.vectors.kind, "collection": self.collection_name},
        }
        self.store.set_meta(manifest)
        return manifest

    def _check_pairing(self, manifest: dict[str, Any]) -> None:
        """The vectors sampled from complete sources must carry this index's id."""
        if not self.vectors.can_get:
            return
        heads = self.store.heads()
        sample = [sid for sid, h in sorted(heads.items()) if h.state == "complete" and h.n_chunks][:5]
        if not sample:
            return
        ids = [vector_id(chunk_id(sid, 0)) for sid in sample]
        found = self._wrap(lambda: self.vectors.present(ids), "read vectors")
        foreign = [m.get("swrag_index") for m in found.values() if m.get("swrag_index") != manifest["index_id"]]
        if foreign:
            raise IndexMismatchError(
                f"the vector store ({self.vectors.kind}) holds vectors of another index ({foreign[0]!r}), not of the "
                f"index whose sources are in {self.store!r}: pass the vector store this index was built with")

    def _wrap(self, fn: Callable[[], Any], action: str) -> Any:
        try:
            return fn()
        except Exception as exc:
            if self.server is not None:
                text = str(exc).lower()
                if "connect" in text or type(exc).__name__ in ("ConnectError", "ConnectTimeout", "ReadTimeout"):
                    raise ConnectionError(f"Chroma server at {self.server} did not answer while trying to "
                                          f"{action}: {exc}") from exc
            raise

    # ------------------------------------------------------------------ checks
    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        with self.store.writer_lock(self.lock_timeout):
            try:
                yield
            finally:  # what this handle wrote, its own Chroma client already sees
                self._vector_generation = self._wrap(self.store.generation, "read the index generation")

    def _sync_vectors(self) -> None:
        """Reopen an embedded Chroma store once another process has written to it.

        An embedded (``persist_directory``) Chroma collection keeps its HNSW index in
        this process and does not read what another process added later: a long-lived
        handle's dense search missed those vectors until it wrote itself. The source
        store's generation tells when anything was written since this handle last wrote
        or looked; then the collection is opened afresh (:meth:`_reopen_chroma`). A
        Chroma server or a caller's own vector store is left alone.
        """
        if not self._own_chroma or self.persist_directory is None:
            return
        generation = self._wrap(self.store.generation, "read the index generation")
        if self._vector_generation is None:
            self._vector_generation = generation
        elif generation != self._vector_generation:
            self.vectors.store = self._reopen_chroma()
            self._vector_generation = generation

    def check_embedding(self) -> None:
        """Raise :class:`IndexMismatchError` when the embedding's dimension differs from
        the one the index was built with (records it on the first write)."""
        if self._embedding_checked:
            return
        dim = len(self.vectors.embedding.embed_query("dimension probe"))
        stored = (self.manifest.get("embedding") or {}).get("dim")
        name = _embedding_name(self.vectors.embedding)
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

    def _record_embedding(self) -> None:
        """Store the embedding's dimension in the manifest (first write; lock held)."""
        self.check_embedding()
        if (self.manifest.get("embedding") or {}).get("dim") is None:
            self.manifest = dict(self.store.get_meta())
            self.manifest["embedding"] = {"name": _embedding_name(self.vectors.embedding), "dim": self._embedding_dim}
            self.store.set_meta(self.manifest)

    def _before_search(self) -> None:
        self.check_embedding()
        if not self._probed:
            from .health import probe_vectors

            problem = probe_vectors(self)
            if problem:
                raise IndexDamagedError(f"{problem}; run `swrag repair` (or SlidingWindowIndex.repair()) on "
                                        f"{self.persist_directory or self.store!r}")
            self._probed = True

    # ------------------------------------------------------------------ writing
    def index_documents(self, documents: Iterable[Document], *, ids: Sequence[str] | None = None,
                        prune: bool | str = False, remove_origins: Iterable[str] | None = None,
                        workers: int | None = None) -> Any:
        """Index documents; returns an :class:`~.writer.IndexReport`.

        Re-adding an unchanged document writes nothing (unless its vectors are
        missing); a changed one (same :func:`~.ids.source_key`) replaces its record and
        vectors; an empty one removes the previous version of that source. ``ids`` gives
        each document's identity (as ``Document.id``). Text or metadata with a lone
        surrogate (not valid Unicode) is refused with a ``ValueError`` naming the
        document, before anything is written (:func:`~.records.check_storable`).

        Args:
            prune: ``"origins"`` (or ``True``): for every file (``metadata["source"]``)
                in this batch, remove that file's sources not in the batch (e.g. CSV rows
                or PDF pages that disappeared); ``"all"``: remove every source not in the
                batch.
            remove_origins: also remove the sources of these files (``metadata["source"]``
                values) that are not in the batch, e.g. files deleted from a re-indexed folder.
            workers: cut and embed in this many worker processes, one writer
                (:func:`~.parallel.index_in_parallel`); ``None``: in this process.
        """
        from .writer import write_documents

        docs = list(documents)
        if ids is not None:
            ids = list(ids)
            if len(ids) != len(docs):
                raise ValueError(f"got {len(ids)} ids for {len(docs)} documents")
            docs = [Document(page_content=d.page_content, metadata=dict(d.metadata or {}), id=str(i))
                    for d, i in zip(docs, ids)]
        from .records import check_storable

        for doc in docs:  # all of them before anything is written
            if isinstance(doc, Document):
                check_storable(doc)
        if workers is not None:
            from .parallel import index_in_parallel

            return index_in_parallel(self, docs, workers=workers, prune=prune, remove_origins=remove_origins)
        return write_documents(self, docs, prune=prune, remove_origins=remove_origins)

    def add_files(self, paths: str | os.PathLike | Iterable[str | os.PathLike], *, prune: bool = True,
                  encoding: str | None = None, errors: str = "strict", workers: int | None = None) -> Any:
        """Load files (:func:`~.files.load_files`) and index them.

        A file's identity (``metadata["source"]``) is the absolute path it was reached
        by: a symlinked file is read through its link but indexed under the link's path.
        With ``prune`` (default) the index then mirrors the given paths
        (:meth:`~.files.LoadResult.stale`): sources of files that were deleted, emptied
        (a CSV down to its header or 0 bytes too), or can no longer be read faithfully
        (skipped, with a warning) are removed, as are CSV rows and PDF pages that
        disappeared, sources stored under another path to a file indexed now (the
        resolved path earlier versions stored), and sources of files elsewhere that no
        longer exist while their folder does; files the walk does not look at (hidden
        or symlinked folders) keep their sources while they exist. Returns an :class:`~.writer.IndexReport` (``skipped_files`` lists
        what was not loaded and why). ``workers``: load, cut and embed in this many
        worker processes, one writer (:func:`~.parallel.index_in_parallel`).
        """
        if workers is not None:
            from .parallel import index_in_parallel

            return index_in_parallel(self, paths=paths, workers=workers, prune=prune, encoding=encoding,
                                     errors=errors)
        from .files import load_files

        loaded = load_files(paths, encoding=encoding, errors=errors)
        if not loaded.files:
            raise ValueError("no indexable files (.txt, .md, .markdown, .pdf, .csv) under the given paths")
        remove: list[str] = []
        if prune:
            origins = sorted({h.origin for h in self.store.heads().values() if h.origin})
            remove = loaded.stale(origins, {str(d.metadata["source"]) for d in loaded.documents},
                                  [s.path for s in loaded.skipped])
        report = self.index_documents(loaded.documents, prune="origins" if prune else False, remove_origins=remove)
        report.skipped_files = [(str(s.path), s.reason) for s in loaded.skipped]
        return report

    def add_documents(self, documents: list[Document], ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """LangChain ``VectorStore.add_documents``: index whole documents; returns their ids.

        The id of a document is ``ids[i]`` or ``Document.id`` if given (and then
        ``delete``/``get_by_ids`` take it), else its source id. Every document is kept,
        also several of one source (chunks of a file: see :func:`~.ids.batch_source_ids`).
        ``batch_size`` is accepted (the index batches by itself); other keywords raise
        ``TypeError``.
        """
        _only(kwargs, {"batch_size"}, "add_documents")
        docs = list(documents)
        report = self.index_documents(docs, ids=ids)
        if ids is not None:
            return [str(i) for i in ids]
        return [str(d.id) if d.id else sid for d, sid in zip(docs, report.ids)]

    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None,
                  **kwargs: Any) -> list[str]:
        """LangChain ``VectorStore.add_texts``: one source per text."""
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        if len(metas) != len(texts):
            raise ValueError(f"got {len(metas)} metadatas for {len(texts)} texts")
        return self.add_documents([Document(page_content=t, metadata=dict(m or {})) for t, m in zip(texts, metas)],
                                  ids=ids, **kwargs)

    def _resolve_ids(self, ids: Sequence[str]) -> list[str]:
        """Source ids for ids given to :meth:`add_documents` (user ids) or source ids."""
        heads = self.store.heads([str(i) for i in ids])
        out = []
        for value in ids:
            value = str(value)
            out.append(value if value in heads else source_id_for(f"id:{value}"))
        return out

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """LangChain ``VectorStore.delete``: remove sources (by the ids :meth:`add_documents`
        returned, or source ids). ``ids=None`` raises (use :meth:`reset`)."""
        from .writer import remove_sources

        _only(kwargs, set(), "delete")
        if ids is None:
            raise ValueError("ids must be given (SlidingWindowIndex.reset() removes everything)")
        remove_sources(self, self._resolve_ids(ids))
        return True

    def delete_source(self, source: str | Document) -> int:
        """Remove one source (a source id, an id given at add time, or a Document); returns
        the number of small chunks it had (0 if unknown)."""
        from .writer import remove_sources

        sid = source_id_for(source) if isinstance(source, Document) else self._resolve_ids([source])[0]
        head = self.store.heads([sid]).get(sid)
        if head is None:
            return 0
        remove_sources(self, [sid])
        return head.n_chunks

    def repair(self, *, deep: bool = False) -> Any:
        """Complete or remove unfinished sources, write missing vectors, rebuild a damaged
        vector collection and the keyword index from the source store; returns an
        :class:`~.writer.IndexReport`."""
        from .writer import repair

        return repair(self, deep=deep)

    def status(self, *, deep: bool = False, probe: bool = True) -> Any:
        """Health of every part (:class:`~.health.IndexStatus`); ``deep`` checks every
        vector id and the source store's integrity too; ``probe=False`` skips the checks
        that need the embedding model (it is then not loaded)."""
        from .health import index_status

        return index_status(self, deep=deep, probe=probe)

    def reset(self) -> None:
        """Remove every source and vector (keeps the configuration)."""
        from .writer import remove_sources

        remove_sources(self, sorted(self.store.heads()))

    # ------------------------------------------------------------------ reading
    @property
    def embeddings(self) -> Embeddings:
        """The query embedding (LangChain ``VectorStore.embeddings``)."""
        return self.vectors.embedding

    @property
    def encoding_name(self) -> str:
        return self.config.encoding_name

    def count(self, level: str | None = "small") -> int:
        """Small chunks (``"small"``) or derived medium chunks (``"medium"``) of the
        complete sources, or vectors held by the store (``None``; ``-1`` if unknown)."""
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
        heads = self.store.heads()
        return sorted(s for s, h in heads.items() if include_incomplete or h.state == "complete")

    def _record(self, source_id: str) -> SourceRecord | None:
        rec = self.store.get_many([source_id]).get(source_id)
        return rec if rec is not None and rec.complete else None

    def source_text(self, source_id: str) -> str:
        rec = self._record(source_id)
        if rec is None:
            raise LookupError(f"no source {source_id!r} in the index")
        return rec.text

    def chunk_metadata(self, source_id: str) -> list[dict[str, Any]]:
        """Metadata of all small chunks of a source (chunk order)."""
        rec = self._record(source_id)
        if rec is None:
            return []
        return [rec.chunk_metadata(i, self.config.medium_size) for i in range(rec.n_chunks)]

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """LangChain ``VectorStore.get_by_ids``: the documents as they were added (whole
        text, their own metadata), under the ids asked for; unknown ids are left out."""
        from .plain import source_document

        sids = self._resolve_ids(list(ids))
        records = self.store.get_many(sids)
        out = []
        for given, sid in zip(ids, sids):
            rec = records.get(sid)
            if rec is not None and rec.complete:
                doc = source_document(rec)
                doc.id = str(given)
                out.append(doc)
        return out

    def get_chunks(self, ids: Sequence[str]) -> list[Document]:
        """Small/medium chunks by chunk id (``<sid>:s:<i>`` / ``<sid>:m:<j>``), as Documents
        (order of ``ids``; unknown ids and incomplete sources are left out)."""
        parsed = [(cid, p) for cid in ids if (p := parse_chunk_id(cid)) is not None]
        records = self.store.get_many([p.source_id for _, p in parsed])
        m = self.config.medium_size
        out = []
        for cid, p in parsed:
            rec = records.get(p.source_id)
            if rec is None or not rec.complete:
                continue
            if p.level == "s" and p.index < rec.n_chunks:
                out.append(Document(page_content=rec.chunk_text(p.index), metadata=rec.chunk_metadata(p.index, m),
                                    id=str(cid)))
            elif p.level == "m" and p.index < rec.n_mediums(m):
                meta = rec.medium_metadata(p.index, m)
                out.append(Document(page_content=rec.text[meta["start_index"]:meta["end_index"]], metadata=meta,
                                    id=str(cid)))
        return out

    def chunk_rows(self, ranges: Sequence[tuple[str, int, int]]) -> dict[str, list[ChunkRow]]:
        """Rows of chunk ranges ``(source_id, lower, upper)`` (see :class:`~.protocols.ChunkIndex`)."""
        records = self.store.get_many([r[0] for r in ranges])
        wanted: dict[str, set[int]] = {}
        for sid, lower, upper in ranges:
            rec = records.get(sid)
            if rec is None or not rec.complete:
                continue
            lo, hi = max(0, int(lower)), min(int(upper), rec.n_chunks - 1)
            wanted.setdefault(sid, set()).update(range(lo, hi + 1))
        out: dict[str, list[ChunkRow]] = {sid: [] for sid, _, _ in ranges}
        for sid, idx in wanted.items():
            a, text = records[sid].arrays, records[sid].text
            out[sid] = [ChunkRow(i, int(a[START, i]), int(a[END, i]), int(a[N_TOKENS, i]), text[a[START, i]:a[END, i]])
                        for i in sorted(idx)]
        return out

    def medium_range(self, source_id: str, chunk_index: int) -> tuple[int, int, int, int] | None:
        """Chunk and character range of the medium chunks whose windows cover a small chunk."""
        rec = self._record(source_id)
        if rec is None:
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
        """Exact source text ``[start, end)``."""
        if end <= start:
            return ""
        text = self.source_text(source_id)
        if start < 0 or end > len(text):
            raise LookupError(f"source {source_id!r} has {len(text)} characters, not {start}:{end}")
        return text[start:end]

    # ------------------------------------------------------------------ search
    def bm25_search(self, query: str, k: int = 20, *, filter: Any = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` of the ``k`` best BM25 chunks (complete sources only;
        ``filter``: only sources whose metadata passes it, see :mod:`.filters`)."""
        from .filters import SourceMatcher, parse_filter

        flt = parse_filter(filter)
        return self.keyword.search(query, k, allow=SourceMatcher(flt, self.store).chunk_ids() if flt else None)

    def dense_ids(self, query: str, k: int = 20, *, search_type: str = "mmr", fetch_k: int | None = None,
                  lambda_mult: float = 0.5, filter: Any = None) -> list[str]:
        """Chunk ids of the ``k`` nearest small chunks (optionally MMR), best first,
        only chunks whose vector matches a complete source's current text.

        ``filter``: a metadata filter (:mod:`.filters`), pushed down to the store where
        it can filter, and checked against each source's record; more chunks are
        fetched while fewer than ``k`` passed and the store had more.
        """
        from .filters import SourceMatcher, native_filter, parse_filter

        if search_type not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {search_type!r}")
        flt = parse_filter(filter)
        matcher = SourceMatcher(flt, self.store) if flt is not None else None
        native = native_filter(flt, self.vectorstore) if flt is not None else None
        self._before_search()
        self._sync_vectors()
        qvec = self.vectors.embed_query(query)
        n = k
        while True:
            docs = self._wrap(lambda: self.vectors.search(qvec, n, mmr=search_type == "mmr",
                                                          fetch_k=fetch_k or max(4 * n, 20), lambda_mult=lambda_mult,
                                                          native=native),
                              "search the vectors")
            heads = self.store.heads(sorted({str(d.metadata.get("source_id")) for d in docs}))
            out = []
            for doc in docs:
                meta = doc.metadata or {}
                sid = str(meta.get("source_id"))
                head = heads.get(sid)
                if head is None or head.state != "complete" or meta.get("content_hash") != head.content_hash:
                    continue  # a vector of a source being rewritten, or of an old version
                if matcher is not None and not matcher.passes([sid])[0]:
                    continue
                out.append(chunk_id(sid, int(meta["chunk_index"])))
            if matcher is None or len(out) >= k or len(docs) < n:
                return out[:k]
            n *= 4

    def dense_search(self, query: str, k: int = 20, *, search_type: str = "mmr", fetch_k: int | None = None,
                     lambda_mult: float = 0.5, filter: Any = None) -> list[Document]:
        """The ``k`` nearest small chunks as Documents (``metadata["dense_rank"]``)."""
        docs = self.get_chunks(self.dense_ids(query, k, search_type=search_type, fetch_k=fetch_k,
                                              lambda_mult=lambda_mult, filter=filter))
        for rank, doc in enumerate(docs, start=1):
            doc.metadata["dense_rank"] = rank
        return docs

    def search_children(self, query: str, k: int, *, search_type: str = DEFAULT_SEARCH_TYPE, weights: Sequence[float] = (0.5, 0.5),
                        rrf_c: float = 60.0, filter: Any = None) -> list[ChildHit]:
        """Stage 1 of the windowed parent retriever (see :class:`~.protocols.ChunkIndex`).

        The ``k`` best small chunks, BM25 and dense fused by weighted RRF. (Ranking whole
        windows from their chunks' BM25 statistics was measured and dropped: lower context
        recall on every dev set, see docs/eval/ranking.md.) ``filter``: only chunks of
        sources whose metadata passes it (:mod:`.filters`), in both rankings, so no
        window is built from (or around) a source the filter excludes.
        """
        from .filters import SourceMatcher, parse_filter
        from .parents import check_query

        check_query(query)
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        if len(weights) != 2:
            raise ValueError(f"weights must be (bm25, dense), got {weights!r}")
        flt = parse_filter(filter)
        matcher = SourceMatcher(flt, self.store) if flt is not None else None
        bm25 = self.keyword.search(query, k, allow=matcher.chunk_ids() if matcher else None) if weights[0] > 0 else []
        dense = self.dense_ids(query, k, search_type=search_type, filter=flt) if weights[1] > 0 else []
        fused = rrf([[cid for cid, _ in bm25], dense], weights, c=rrf_c)[:k]
        bm25_score = dict(bm25)
        parsed = [(cid, parse_chunk_id(cid), score, ranks) for cid, score, ranks in fused]
        records = self.store.get_many(sorted({p.source_id for _, p, _, _ in parsed if p is not None}))
        m = self.config.medium_size
        hits = []
        for cid, p, score, ranks in parsed:
            rec = records.get(p.source_id) if p is not None else None
            if rec is None or not rec.complete or p.index >= rec.n_chunks:
                continue
            if flt is not None and not flt.matches({**rec.index_metadata, "source_id": rec.source_id}):
                continue  # changed since the rankings looked (never served against the filter)
            meta = rec.chunk_metadata(p.index, m)
            meta.update(rrf_score=score, fused_rank=len(hits) + 1)
            if ranks[0] is not None:
                meta.update(bm25_rank=ranks[0], bm25_score=bm25_score[cid])
            if ranks[1] is not None:
                meta["dense_rank"] = ranks[1]
            hits.append(ChildHit(p.source_id, p.index, score, len(hits) + 1, meta["window_lower_bound"],
                                 meta["window_upper_bound"], meta["window_start_index"], meta["window_end_index"],
                                 meta["start_index"], meta["end_index"], meta))
        return hits

    # --------------------------------------------------------- LangChain faces
    def bm25_retriever(self, k: int = 20):
        """LangChain retriever over the BM25 side index (small chunks)."""
        from .search import CJKBM25Retriever

        return CJKBM25Retriever(index=self.keyword, fetch=self.get_chunks, k=k)

    def dense_retriever(self, k: int = 20, search_type: str = "mmr", *, fetch_k: int | None = None,
                        lambda_mult: float = 0.5):
        """LangChain retriever over the chunk vectors (hydrated small chunks)."""
        from .search import DenseChunkRetriever

        if search_type not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {search_type!r}")
        return DenseChunkRetriever(index=self, k=k, search_type=search_type, fetch_k=fetch_k,
                                   lambda_mult=lambda_mult)

    def hybrid_retriever(self, k: int = 20, *, search_type: str = "mmr", weights: Sequence[float] = (0.5, 0.5),
                         c: float = 60.0):
        """BM25 + dense small-chunk retriever fused by weighted RRF."""
        from .search import HybridRetriever

        return HybridRetriever(retrievers=[self.bm25_retriever(k), self.dense_retriever(k, search_type)],
                               weights=list(weights), c=c, k=k, names=["bm25", "dense"])

    def as_retriever(self, **kwargs: Any):
        """The package's retriever on this index: a :class:`~.retriever.WindowedParentRetriever`.

        It does not return a fixed ``k=4``: it returns as many merged windows (exact
        ``text[start_index:end_index]``) as fit its token budget, ``budget_tokens=1500``
        for all documents together, best first (a window whose hits lie apart can come
        back in pieces, each a document). Cap the count with ``k``
        (``search_kwargs={"k": 4}`` or ``invoke(q, k=4)``), change the budget with
        ``budget_tokens`` (``None``: no limit).

        Takes the retriever's fields as keywords, and like a ``VectorStore``
        ``search_kwargs={...}`` and ``search_type``: ``"similarity"``/``"mmr"`` choose the
        dense part of the windowed retriever; ``"similarity_score_threshold"`` (with
        ``search_kwargs={"score_threshold": ...}``) returns LangChain's plain
        ``VectorStoreRetriever`` over the added documents, as :meth:`as_document_retriever`
        does for every search type. Unknown keywords raise ``TypeError``. An index built
        with a tuned configuration (:attr:`tuned_config`) starts from its retriever
        settings; keywords given here win.
        """
        from .retriever import WindowedParentRetriever

        if kwargs.get("search_type") == "similarity_score_threshold":
            return self.as_document_retriever(**kwargs)
        tuned = self.tuned_config
        options = {k: v for k, v in tuned.retriever_kwargs.items() if v is not None} if tuned is not None else {}
        options.update(kwargs.pop("search_kwargs", None) or {})
        if "search_type" in kwargs:
            options["search_type"] = kwargs.pop("search_type")
        options.update(kwargs)
        return WindowedParentRetriever(index=self, **options)

    def explain(self, query: str, **options: Any) -> Any:
        """An HTML view of a query against this index (hits with their ranks, the windows
        they widen to, the spans kept under the budget, what was cut); shows itself in
        Jupyter."""
        from ..view.retrieval import RetrievalView

        return RetrievalView.from_index(self, query, **options)

    # ----------------------------------------- the plain VectorStore contract (documents as added)
    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """LangChain ``VectorStore.similarity_search``: the ``k`` added documents most similar
        to ``query`` (whole text, their own metadata and id), ranked by their best small chunk.
        ``filter=`` takes a metadata filter (``{"topic": "sea"}``, ``$eq/$ne/$in/$nin/$gt/
        $gte/$lt/$lte/$and/$or``; :mod:`.filters`), also on the other search methods.

        Windows are the retrievers' part: :meth:`as_retriever` returns merged windows
        under a token budget.
        """
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """:meth:`similarity_search` with each document's relevance in [0, 1] (its best
        chunk's; higher is better), in rank order."""
        from .parents import check_query

        return self.similarity_search_with_score_by_vector(self.vectors.embed_query(check_query(query)), k, **kwargs)

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        """:meth:`similarity_search_with_score` for a query vector."""
        from .plain import search_documents

        _only(kwargs, {"filter"}, "similarity_search")
        return search_documents(self, embedding, k, filter=kwargs.get("filter"))  # type: ignore[return-value]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        """:meth:`similarity_search` for a query vector."""
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda score: score  # the scores are relevances in [0, 1] already

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      **kwargs: Any) -> list[Document]:
        """LangChain MMR search: ``k`` added documents, chosen by MMR over the small chunks
        (``fetch_k`` candidates, ``lambda_mult`` 1 = relevance only), each source once."""
        from .parents import check_query

        return self.max_marginal_relevance_search_by_vector(self.vectors.embed_query(check_query(query)), k, fetch_k,
                                                            lambda_mult, **kwargs)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query vector."""
        from .plain import search_documents

        _only(kwargs, {"filter"}, "max_marginal_relevance_search")
        return [doc for doc, _ in search_documents(self, embedding, k, mmr=True, fetch_k=fetch_k,
                                                   lambda_mult=lambda_mult, filter=kwargs.get("filter"))]

    def as_document_retriever(self, **kwargs: Any) -> Any:
        """LangChain's plain ``VectorStoreRetriever`` on this index: ``k`` (default 4) added
        documents per query (``search_type``: ``"similarity"``, ``"mmr"`` or
        ``"similarity_score_threshold"``, with ``search_kwargs``), no windows, no budget."""
        return VectorStore.as_retriever(self, **kwargs)

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, *,
                   ids: list[str] | None = None, **kwargs: Any) -> "SlidingWindowIndex":
        """Build an index (``kwargs`` go to the constructor) and add ``texts``."""
        index = cls(embedding=embedding, **kwargs)
        if texts:
            index.add_texts(texts, metadatas, ids=ids)
        return index

    def disk_size(self) -> int:
        """Bytes used on disk by a local index (vectors, sources, keyword index)."""
        root = self.persist_directory
        if root is None or not root.exists():
            return 0
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    def __repr__(self) -> str:
        where = self.server or (str(self.persist_directory) if self.persist_directory else repr(self.store))
        return (f"SlidingWindowIndex({where!r}, collection_name={self.collection_name!r}, "
                f"vectors={self.vectors.kind}, config={self.config})")


def _only(kwargs: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword argument(s) {', '.join(unknown)}"
                        + (f"; it accepts {', '.join(sorted(allowed))}" if allowed else ""))


def _embedding_name(embedding: Any) -> str:
    name = getattr(embedding, "model_name", None)
    if isinstance(name, str) and name:
        return f"{type(embedding).__name__}:{name}"
    for attr in ("model_path", "model"):
        value = getattr(embedding, attr, None)
        if isinstance(value, (str, os.PathLike)) and str(value):
            return f"{type(embedding).__name__}:{Path(str(value)).name}"
    return type(embedding).__name__


def warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)
