"""Sliding-window index: the LangChain face (a ``VectorStore``) over :class:`~.engine.IndexEngine`.

Every source document is cut into *small chunks* (default 50 cl100k tokens that tile
the text, see :func:`~.records.plan_source`). Their vectors go to a LangChain
``VectorStore`` (:class:`~.vectors.VectorBackend`; embedded Chroma by default); the
source's exact text, its chunks' offsets and their window bounds live once in a
*source store* (:mod:`.sources`; SQLite by default), the one truth of the index, from
which the BM25 side index (:class:`~.keyword.KeywordIndex`) is derived. Windows and
*medium chunks* are never stored: they are ranges of chunks, read at query time.

All of that lives in the framework-free :class:`~.engine.IndexEngine` (``index.engine``);
this module adds the LangChain contract (documents in and out, ``VectorStore`` search
methods, retrievers) and opens the default Chroma store through ``langchain_chroma``
(the same collection the engine's own :class:`~.chroma.ChromaStorage` reads).

Guarantees (tested in ``tests/ingest/test_retrieval_reliability.py``):

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
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from swrag_integrations.engine.settings import DEFAULT_SEARCH_TYPE
from swrag_integrations.engine.engine import FORMAT, IndexDamagedError, IndexEngine, IndexMismatchError, validate_collection_name
from swrag_integrations.engine.ids import parse_member_id, source_id_for
from swrag_integrations.engine.protocols import ChildHit, ChunkRow
from swrag_integrations.stores.sources import SourceStore
from swrag_integrations.langchain.vectorstore import IndexTextEmbeddings, PrecomputedEmbeddings, VectorBackend, default_chroma

__all__ = ["SlidingWindowIndex", "IndexMismatchError", "IndexDamagedError", "validate_collection_name", "FORMAT"]


def _as_tuned_config(config: Any) -> Any:
    """``config=`` of :class:`SlidingWindowIndex` as a ``TunedConfig`` (``None`` stays ``None``).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: a file or dict that is not a tuned configuration.
        TypeError: any other type.
    """
    if config is None:
        return None
    from swrag_integrations.engine.tuned import TunedConfig

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


class _FromEngine:
    """A read-only attribute of the face that is the engine's attribute of the same name
    (the face keeps no copy of the engine's state)."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else getattr(obj.engine, self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"{self.name} is read-only (the index engine's; reopen the index to change it)")


class SlidingWindowIndex(VectorStore):
    """Windowed parent-child index over any LangChain vector store (a ``VectorStore`` itself).

    As a LangChain ``VectorStore`` its documents are *sources*: ``add_documents``
    indexes documents (each cut into small chunks), ``delete``/``get_by_ids`` take the
    ids it returned, ``similarity_search`` (with scores, MMR, by vector) returns the
    added documents as they were added, ranked by their best chunk; windows come from
    the retrievers: ``as_retriever`` gives a `WindowedParentRetriever`
    (merged windows under a token budget). It passes LangChain's
    ``VectorStoreIntegrationTests`` and works with its indexing API
    (``langchain_core.indexing.index``).

    Args:
        persist_directory: a local folder for the default stores (Chroma in
            ``<dir>/chroma``, sources in ``<dir>/sources/<collection>.sqlite3``). Given no
            location at all (no ``persist_directory``, ``vectorstore``, ``storage``,
            ``source_store``, ``host`` or ``client``) the index lives in memory, like
            LangChain's ``Chroma()``: an ``InMemoryVectorStore`` and an
            ``InMemoryByteStore``, gone with the object. The CLI's index is
            `default_index_dir` (``$SWRAG_HOME/index``, else
            ``$XDG_DATA_HOME/swrag/index``): pass it to share that one.
        vectorstore: any LangChain ``VectorStore`` for the chunk vectors (it embeds
            the chunk texts with its own embedding; ``embedding`` defaults to it).
            Needs ``source_store`` or ``persist_directory`` for the sources.
        storage: the vector store by URI (`.store_uri`): ``"milvus:PATH.db"``
            (Milvus Lite), ``"milvus"`` (``<persist_directory>/milvus.db``),
            ``"milvus://HOST:19530"``, ``"chroma://HOST:8000"`` or ``"chroma"`` (the
            default); or a `VectorStorage` object (e.g. a
            `MilvusStorage`). With Milvus, keyword search runs in the store.
        source_store: where the sources live: a `SourceStore`, a path
            to a SQLite file, or any LangChain byte store (``LocalFileStore``...).
        embedding: LangChain ``Embeddings`` for queries (and for the default Chroma);
            default the bundled MiniLM.
        collection_name: Chroma collection of the default vector store.
        host, port, ssl, headers: use a running Chroma server for vectors and sources.
        client: an existing chromadb client for the default vector store.
        chunk_size, child, medium_size, strategy, window_size, step, unit, delimiters, encoding_name: the chunking (`IndexConfig`); ``None`` takes
            the stored value of an existing index (different values raise).
        batch_size: chunks embedded and written per batch.
        show_progress: tqdm progress bars while indexing (default off: quiet in a library call).
        index_text: optional ``chunk text -> text to index`` for BM25 and the default
            store's embeddings (e.g. contextual headers); stored chunks stay exact.
        lock_timeout: seconds a writer waits for another one.
        config: a tuned configuration (a `TunedConfig`,
            the path of a file written by ``swrag tune``, or its dict): its index part
            sets the chunking (an explicit chunking keyword that disagrees raises
            ``ValueError``), and the whole configuration is recorded in the index
            (`tuned_config`, kept across reopening), so `as_retriever`
            starts from its retriever settings.
        keyword_search: ``"auto"`` (the store's own keyword search where it has one),
            ``"store"`` or ``"local"`` (the in-process BM25), see
            `IndexEngine`.
    """

    def __init__(
        self,
        persist_directory: str | os.PathLike | None = None,
        *,
        vectorstore: VectorStore | None = None,
        storage: Any = None,
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
        show_progress: bool = False,
        index_text: Callable[[str], str] | None = None,
        lock_timeout: float = 600.0,
        config: Any = None,
        keyword_search: str = "auto",
    ) -> None:
        tuned = _as_tuned_config(config)
        chunking = dict(chunk_size=chunk_size, child=child, medium_size=medium_size, strategy=strategy,
                        window_size=window_size, step=step, unit=unit,
                        delimiters=tuple(delimiters) if delimiters is not None else None, encoding_name=encoding_name)
        if tuned is not None:
            chunking = _merge_tuned_chunking(chunking, tuned.index_kwargs)
        self._collection_name = validate_collection_name(collection_name)
        if all(x is None for x in (persist_directory, vectorstore, storage, source_store, host, client)):
            vectorstore, source_store, embedding = _in_memory_parts(embedding, index_text)
        if vectorstore is not None:
            if sum(x is not None for x in (host, client, storage)):
                raise ValueError("give at most one of vectorstore, storage, host or client")
            storage = VectorBackend(vectorstore, embedding)
        self._client: Any = None  # the chromadb client of the default store
        try:
            self.engine = IndexEngine.open(
                persist_directory, embedding=embedding, storage=storage, source_store=source_store,
                collection_name=collection_name, host=host, port=port, ssl=ssl, headers=headers, client=client,
                storage_factory=self._chroma_vectors, batch_size=batch_size, show_progress=show_progress,
                index_text=index_text, lock_timeout=lock_timeout, keyword_search=keyword_search, **chunking)
        except IndexMismatchError as exc:
            if vectorstore is None or "already holds" not in str(exc):
                raise
            raise IndexMismatchError(f"{exc}; or index the documents it holds: "
                                     "SlidingWindowIndex.from_vectorstore(vectorstore, source_store=...)") from None
        if tuned is not None:
            try:
                self._record_tuned(tuned)
            except BaseException:
                if source_store is None:
                    self.engine.close()
                raise

    # ------------------------------------------------------------------ the default Chroma store
    def _chroma_vectors(self, client: Any, root: Path | None, embedding: Any, index_text: Any,
                        lock_timeout: float) -> VectorBackend:
        """The default vectors: a ``langchain_chroma.Chroma`` over the engine's collection
        (embedding through :class:`~.vectors.PrecomputedEmbeddings`, so vectors computed by
        worker processes or Ray actors are written as they are)."""
        from swrag_integrations.stores.chroma import copy_collection, fresh_client

        self._client = client
        name = self._collection_name
        store_embedding = PrecomputedEmbeddings(IndexTextEmbeddings(embedding, index_text) if index_text
                                                else embedding)

        def reopen() -> Any:  # see chroma.fresh_client: an embedded Chroma another process wrote to
            self._client = fresh_client(self._client, root, lock_timeout)
            return default_chroma(self._client, name, store_embedding)

        def rebuild(fence: Any) -> Any:  # see chroma.copy_collection: no re-embedding
            copy_collection(self._client, name, fence)
            return default_chroma(self._client, name, store_embedding)

        return VectorBackend(default_chroma(client, name, store_embedding), embedding,
                             reopen=reopen if root is not None else None, rebuild=rebuild)

    # ------------------------------------------------------------------ the engine's parts
    # read-only attributes of the engine, under the same names
    store = _FromEngine("The source store (:attr:`.engine.IndexEngine.store`).")
    vectors = _FromEngine("The vector storage (:class:`~.vectors.VectorBackend` over :attr:`vectorstore`).")
    keyword = _FromEngine("The BM25 side index (:class:`~.keyword.KeywordIndex`).")
    manifest = _FromEngine("The index manifest (format, id, chunking, embedding, vectors).")
    index_id = _FromEngine("The index's id (recorded in its manifest).")
    config = _FromEngine("The chunking (:class:`~.config.IndexConfig`).")
    persist_directory = _FromEngine("The index's folder (``None``: in memory).")
    server = _FromEngine("The Chroma server address, or ``None`` (embedded).")
    batch_size = _FromEngine("Chunks embedded and written per batch.")
    show_progress = _FromEngine("Whether long work shows progress bars.")
    lock_timeout = _FromEngine("Seconds a writer waits for the index's writer lock.")
    index_text = _FromEngine("The text normaliser applied before keyword indexing.")
    encoding_name = _FromEngine("tiktoken encoding of the token counts and budgets.")

    @property
    def vectorstore(self) -> VectorStore:
        """The LangChain ``VectorStore`` holding the chunk vectors.

        Raises:
            AttributeError: the vectors are in a storage without a LangChain face
                (:class:`~.milvus.MilvusStorage`...); see :attr:`vectors`.
        """
        store = getattr(self.engine.vectors, "store", None)
        if store is None:
            raise AttributeError(f"this index keeps its vectors in {self.engine.vectors!r}, not in a LangChain "
                                 "VectorStore: use .vectors")
        return store

    def close(self) -> None:
        """Close the index's stores (the source store; a Milvus Lite file is released)."""
        self.engine.close()

    @property
    def collection_name(self) -> str:
        return self._collection_name

    def check_embedding(self) -> None:
        """Raise `IndexMismatchError` when the embedding's dimension differs from
        the one the index was built with."""
        self.engine.check_embedding()

    # ------------------------------------------------------------------ tuned configuration
    def _record_tuned(self, tuned: Any) -> None:
        """Keep ``tuned`` (its settings and the summary of its evidence) in the manifest,
        once all of it validated: its retriever part too (a retriever is built from it
        first), so a rejected configuration is never recorded."""
        import json

        from swrag_integrations.langchain.retriever import WindowedParentRetriever

        WindowedParentRetriever(index=self, **{k: v for k, v in tuned.retriever_kwargs.items() if v is not None})
        ev = tuned.evidence or {}
        record = {"index": tuned.index_kwargs, "retriever": tuned.retriever_kwargs, "chosen": tuned.chosen,
                  "evidence": {k: ev[k] for k in ("best", "default", "versus_default") if k in ev}}
        record = json.loads(json.dumps(record, ensure_ascii=False))  # the form it is stored in
        if self.manifest.get("tuned") != record:
            self.engine.set_meta("tuned", record)

    @property
    def tuned_config(self) -> Any:
        """The tuned configuration this index was built (or last opened) with, as a
        :class:`~swrag_integrations.tuning.TunedConfig` (evidence: its summary only), or
        ``None``. Read from the index, so it survives reopening without ``config=``."""
        record = self.manifest.get("tuned")
        if not record:
            return None
        from swrag_integrations.engine.tuned import FORMAT_VERSION, TunedConfig

        return TunedConfig.from_dict({"swrag_tuned_config": FORMAT_VERSION, **record}, where="the index's record")

    # ------------------------------------------------------------------ writing
    def index_documents(self, documents: Iterable[Document], *, ids: Sequence[str] | None = None,
                        prune: bool | str = False, remove_origins: Iterable[str] | None = None,
                        workers: int | None = None) -> Any:
        """Index documents; returns an `IndexReport`.

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
        return self.engine.index_documents(documents, ids=ids, prune=prune, remove_origins=remove_origins,
                                           workers=workers)

    def add_files(self, paths: str | os.PathLike | Iterable[str | os.PathLike], *, prune: bool = True,
                  encoding: str | None = None, errors: str = "strict", workers: int | None = None) -> Any:
        """Load files and index them, the index then mirroring them: see
        `add_files` (the one implementation, which this calls)."""
        return self.engine.add_files(paths, prune=prune, encoding=encoding, errors=errors, workers=workers)

    def add_documents(self, documents: list[Document], ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """LangChain ``VectorStore.add_documents``: index whole documents; returns their ids.

        The id of a document is ``ids[i]`` or ``Document.id`` if given (and then
        ``delete``/``get_by_ids`` take it), else its source id; an id that is a source id
        of the index (what ``add_texts`` returned) replaces that source. Every document is
        kept, also several of one source (see `batch_source_ids`). Chunks that
        carry their offsets in a source (``source`` and ``start_index``, no id) are joined
        into that source's text (`join_offset_chunks`), so windows come
        back in the source's coordinates; each chunk's id is ``"<source id>@<start>:<end>"``
        (`member_id`). Deleting a chunk joins the rest of its piece again: the
        ids of chunks after a gap it leaves, or of a piece whose first chunk it was, change
        with the piece's source id.
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
        return self.engine.resolve_ids(ids)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """LangChain ``VectorStore.delete``: remove sources (by the ids `add_documents`
        returned, or source ids). ``ids=None`` raises (use `reset`)."""
        _only(kwargs, set(), "delete")
        if ids is None:
            raise ValueError("ids must be given (SlidingWindowIndex.reset() removes everything)")
        self.engine.delete(ids)
        return True

    def delete_source(self, source: str | Document) -> int:
        """Remove one source (a source id, an id given at add time, or a Document); returns
        the number of small chunks it had (0 if unknown)."""
        sid = source_id_for(source) if isinstance(source, Document) else self._resolve_ids([source])[0]
        head = self.store.heads([sid]).get(sid)
        if head is None:
            return 0
        self.engine.delete_sources([sid])
        return head.n_chunks

    def repair(self, *, deep: bool = False) -> Any:
        """Complete or remove unfinished sources, write missing vectors, rebuild a damaged
        vector collection and the keyword index from the source store; returns an
        `IndexReport`."""
        return self.engine.repair(deep=deep)

    def status(self, *, deep: bool = False, probe: bool = True) -> Any:
        """Health of every part (`IndexStatus`); ``deep`` checks every
        vector id and the source store's integrity too; ``probe=False`` skips the checks
        that need the embedding model (it is then not loaded)."""
        return self.engine.status(deep=deep, probe=probe)

    def reset(self) -> None:
        """Remove every source and vector (keeps the configuration)."""
        self.engine.reset()

    # ------------------------------------------------------------------ reading
    @property
    def embeddings(self) -> Embeddings:
        """The query embedding (LangChain ``VectorStore.embeddings``)."""
        return self.vectors.embedding

    def count(self, level: str | None = "small") -> int:
        """Small chunks (``"small"``), derived medium chunks (``"medium"``) or vectors held
        (``None``; ``-1`` if unknown): `count`."""
        return self.engine.count(level)

    def source_ids(self, *, include_incomplete: bool = False) -> list[str]:
        """Ids of the (complete) sources, sorted."""
        return self.engine.source_ids(include_incomplete=include_incomplete)

    def source_text(self, source_id: str) -> str:
        """The exact text of a source (``LookupError`` if unknown)."""
        return self.engine.source_text(source_id)

    def chunk_metadata(self, source_id: str) -> list[dict[str, Any]]:
        """Metadata of all small chunks of a source (chunk order)."""
        return self.engine.chunk_metadata(source_id)

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """LangChain ``VectorStore.get_by_ids``: the documents as they were added (whole
        text, their own metadata), under the ids asked for; unknown ids are left out."""
        from swrag_integrations.langchain.plain import source_document

        sids = self._resolve_ids(list(ids))
        records = self.store.get_many(sids)
        out = []
        for given, sid in zip(ids, sids):
            rec = records.get(sid)
            if rec is not None and rec.complete:
                member = parse_member_id(given)
                member = member if member is not None and member[0] == sid else None
                found = [m for m in rec.members if member is not None and (m["start"], m["end"]) == member[1:]]
                if member is not None and not found:
                    continue  # an offset chunk that is no longer in its segment
                doc = (Document(page_content=rec.span(member[1], member[2]), metadata=dict(found[0]["metadata"]))
                       if found else source_document(rec))
                doc.id = str(given)
                out.append(doc)
        return out

    def get_chunks(self, ids: Sequence[str]) -> list[Document]:
        """Small/medium chunks by chunk id (``<sid>:s:<i>`` / ``<sid>:m:<j>``), as Documents
        (order of ``ids``; unknown ids and incomplete sources are left out)."""
        return [Document(page_content=c.page_content, metadata=c.metadata, id=c.id)
                for c in self.engine.get_chunks(ids)]

    def chunk_rows(self, ranges: Sequence[tuple[str, int, int]]) -> dict[str, list[ChunkRow]]:
        """Rows of chunk ranges ``(source_id, lower, upper)`` (see `ChunkIndex`)."""
        return self.engine.chunk_rows(ranges)

    def medium_range(self, source_id: str, chunk_index: int) -> tuple[int, int, int, int] | None:
        """Chunk and character range of the medium chunks whose windows cover a small chunk."""
        return self.engine.medium_range(source_id, chunk_index)

    def span_text(self, source_id: str, start: int, end: int) -> str:
        """Exact source text ``[start, end)``."""
        return self.engine.span_text(source_id, start, end)

    # ------------------------------------------------------------------ search
    def bm25_search(self, query: str, k: int = 20, *, filter: Any = None) -> list[tuple[str, float]]:
        """``(chunk_id, score)`` of the ``k`` best BM25 chunks (`bm25_search`)."""
        return self.engine.bm25_search(query, k, filter=filter)

    def dense_ids(self, query: str, k: int = 20, *, search_type: str = "mmr", fetch_k: int | None = None,
                  lambda_mult: float = 0.5, filter: Any = None) -> list[str]:
        """Chunk ids of the ``k`` nearest small chunks (`dense_ids`)."""
        return self.engine.dense_ids(query, k, search_type=search_type, fetch_k=fetch_k, lambda_mult=lambda_mult,
                                     filter=filter)

    def dense_search(self, query: str, k: int = 20, *, search_type: str = "mmr", fetch_k: int | None = None,
                     lambda_mult: float = 0.5, filter: Any = None) -> list[Document]:
        """The ``k`` nearest small chunks as Documents (``metadata["dense_rank"]``)."""
        docs = self.get_chunks(self.dense_ids(query, k, search_type=search_type, fetch_k=fetch_k,
                                              lambda_mult=lambda_mult, filter=filter))
        for rank, doc in enumerate(docs, start=1):
            doc.metadata["dense_rank"] = rank
        return docs

    def search_children(self, query: str, k: int, *, search_type: str = DEFAULT_SEARCH_TYPE,
                        weights: Sequence[float] = (0.5, 0.5), rrf_c: float = 60.0,
                        filter: Any = None) -> list[ChildHit]:
        """Stage 1 of the windowed parent retriever (`search_children`)."""
        return self.engine.search_children(query, k, search_type=search_type, weights=weights, rrf_c=rrf_c,
                                           filter=filter)

    # --------------------------------------------------------- LangChain faces
    def bm25_retriever(self, k: int = 20):
        """LangChain retriever over the BM25 side index (small chunks)."""
        from swrag_integrations.langchain.search import CJKBM25Retriever

        return CJKBM25Retriever(index=_EngineKeywords(self.engine), fetch=self.get_chunks, k=k)

    def dense_retriever(self, k: int = 20, search_type: str = "mmr", *, fetch_k: int | None = None,
                        lambda_mult: float = 0.5):
        """LangChain retriever over the chunk vectors (hydrated small chunks)."""
        from swrag_integrations.langchain.search import DenseChunkRetriever

        if search_type not in ("mmr", "similarity"):
            raise ValueError(f"search_type must be 'mmr' or 'similarity', got {search_type!r}")
        return DenseChunkRetriever(index=self, k=k, search_type=search_type, fetch_k=fetch_k,
                                   lambda_mult=lambda_mult)

    def hybrid_retriever(self, k: int = 20, *, search_type: str = "mmr", weights: Sequence[float] = (0.5, 0.5),
                         c: float = 60.0):
        """BM25 + dense small-chunk retriever fused by weighted RRF."""
        from swrag_integrations.langchain.search import HybridRetriever

        return HybridRetriever(retrievers=[self.bm25_retriever(k), self.dense_retriever(k, search_type)],
                               weights=list(weights), c=c, k=k, names=["bm25", "dense"])

    def as_retriever(self, **kwargs: Any):
        """The package's retriever on this index: a `WindowedParentRetriever`.

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
        ``VectorStoreRetriever`` over the added documents, as `as_document_retriever`
        does for every search type. Unknown keywords raise ``TypeError``. An index built
        with a tuned configuration (`tuned_config`) starts from its retriever
        settings; keywords given here win.
        """
        from swrag_integrations.langchain.retriever import WindowedParentRetriever

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
        they widen to, the spans kept under the budget, what was cut; shows itself in
        Jupyter; needs ``import swrag_integrations.view`` first, which registers the view)."""
        from swrag_integrations.core.display import make_view

        return make_view("index", self, query, **options)

    # ----------------------------------------- the plain VectorStore contract (documents as added)
    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """LangChain ``VectorStore.similarity_search``: the ``k`` added documents most similar
        to ``query`` (whole text, their own metadata and id), ranked by their best small chunk.
        ``filter=`` takes a metadata filter (``{"topic": "sea"}``, ``$eq/$ne/$in/$nin/$gt/
        $gte/$lt/$lte/$and/$or``; `.filters`), also on the other search methods.

        Windows are the retrievers' part: `as_retriever` returns merged windows
        under a token budget.
        """
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """`similarity_search` with each document's relevance in [0, 1] (its best
        chunk's; higher is better), in rank order."""
        from swrag_integrations.engine.parents import check_query

        return self.similarity_search_with_score_by_vector(self.vectors.embed_query(check_query(query)), k, **kwargs)

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        """`similarity_search_with_score` for a query vector."""
        from swrag_integrations.langchain.plain import search_documents

        _only(kwargs, {"filter"}, "similarity_search")
        return search_documents(self.engine, embedding, k, filter=kwargs.get("filter"))  # type: ignore[return-value]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        """`similarity_search` for a query vector."""
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda score: score  # the scores are relevances in [0, 1] already

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      **kwargs: Any) -> list[Document]:
        """LangChain MMR search: ``k`` added documents, chosen by MMR over the small chunks
        (``fetch_k`` candidates, ``lambda_mult`` 1 = relevance only), each source once."""
        from swrag_integrations.engine.parents import check_query

        return self.max_marginal_relevance_search_by_vector(self.vectors.embed_query(check_query(query)), k, fetch_k,
                                                            lambda_mult, **kwargs)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """`max_marginal_relevance_search` for a query vector."""
        from swrag_integrations.langchain.plain import search_documents

        _only(kwargs, {"filter"}, "max_marginal_relevance_search")
        return [doc for doc, _ in search_documents(self.engine, embedding, k, mmr=True, fetch_k=fetch_k,
                                                   lambda_mult=lambda_mult, filter=kwargs.get("filter"))]

    def as_document_retriever(self, **kwargs: Any) -> Any:
        """LangChain's plain ``VectorStoreRetriever`` on this index: ``k`` (default 4) added
        documents per query (``search_type``: ``"similarity"``, ``"mmr"`` or
        ``"similarity_score_threshold"``, with ``search_kwargs``), no windows, no budget."""
        return VectorStore.as_retriever(self, **kwargs)

    @classmethod
    def from_vectorstore(cls, vectorstore: VectorStore, *, documents: Sequence[Document] | None = None,
                         **kwargs: Any) -> "SlidingWindowIndex":
        """An index over a LangChain vector store that already holds documents.

        The documents it holds (or ``documents``, when the store cannot list them) are taken
        out of the store -- their vectors are deleted -- and indexed into it (a failure while
        indexing puts them back, under their ids): each is cut
        into small chunks, and keeps its id (``get_by_ids``/``delete`` take the ids the
        store had). ``kwargs`` go to the constructor (``source_store=`` or
        ``persist_directory=`` for the source texts, ``embedding=``, chunking...).

        The store lists its documents when it is LangChain's ``InMemoryVectorStore`` or a
        ``langchain_chroma.Chroma``; for any other store pass them as ``documents``
        (their ``id`` must be the ids they have in the store).

        Raises:
            TypeError: the store cannot list its documents and ``documents`` is not given.
            ValueError: a document of ``documents`` without an id.
        """
        docs = list(documents) if documents is not None else _stored_documents(vectorstore)
        if any(not d.id for d in docs):
            raise ValueError("every document of documents= needs its id in the vector store (Document.id), so its "
                             "vectors can be deleted before it is indexed")
        ids = [str(d.id) for d in docs]
        if docs:
            vectorstore.delete(ids)
        index = None
        try:
            index = cls(vectorstore=vectorstore, **kwargs)
            if docs:
                index.add_documents(docs)
        except BaseException:
            # a failure leaves the store as it was: what was written of the index goes, the
            # documents come back under their ids (embedded by the store, as when first added)
            if index is not None and docs:
                with contextlib.suppress(Exception):
                    index.delete(ids)
            if docs:
                vectorstore.add_documents(docs, ids=ids)
            raise
        return index

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
        return self.engine.disk_size()

    def __repr__(self) -> str:
        return (f"SlidingWindowIndex({self.engine.server or str(self.persist_directory or self.store)!r}, "
                f"collection_name={self.collection_name!r}, vectors={self.vectors.kind}, config={self.config})")


class _EngineKeywords:
    """The engine's keyword search as ``search(query, k)`` for :class:`~.search.CJKBM25Retriever`:
    through :meth:`~.engine.IndexEngine.bm25_search`, so ``k`` is checked and clipped there."""

    def __init__(self, engine: IndexEngine) -> None:
        self.engine = engine

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        return self.engine.bm25_search(query, k)


def _stored_documents(vectorstore: Any) -> list[Document]:
    """The documents a LangChain vector store holds, for the stores that can list them
    (``InMemoryVectorStore``, ``langchain_chroma.Chroma``); ``TypeError`` for the others."""
    from langchain_core.vectorstores import InMemoryVectorStore

    if isinstance(vectorstore, InMemoryVectorStore):
        return [Document(page_content=r["text"], metadata=dict(r.get("metadata") or {}), id=str(key))
                for key, r in vectorstore.store.items()]
    if type(vectorstore).__name__ == "Chroma" and callable(getattr(vectorstore, "get", None)):
        got = vectorstore.get(include=["documents", "metadatas"])
        return [Document(page_content=text or "", metadata=dict(meta or {}), id=str(key))
                for key, text, meta in zip(got["ids"], got["documents"], got["metadatas"])]
    raise TypeError(f"cannot list the documents of a {type(vectorstore).__name__}: pass them as "
                    "SlidingWindowIndex.from_vectorstore(vectorstore, documents=[...], source_store=...)")


def _in_memory_parts(embedding: Any, index_text: Any) -> tuple[VectorStore, Any, Any]:
    """The parts of an index given no location (as LangChain's ``Chroma()`` without
    arguments): LangChain's ``InMemoryVectorStore`` and ``InMemoryByteStore``, gone with
    the object; ``(vectorstore, source_store, embedding)``."""
    from langchain_core.stores import InMemoryByteStore
    from langchain_core.vectorstores import InMemoryVectorStore

    if index_text is not None:
        raise ValueError("index_text needs the default Chroma store: give persist_directory (an index without a "
                         "location lives in memory, in an InMemoryVectorStore)")
    if embedding is None:
        from swrag_integrations.embeddings.minilm import default_embeddings

        embedding = default_embeddings()
    return InMemoryVectorStore(embedding), InMemoryByteStore(), embedding


def _only(kwargs: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword argument(s) {', '.join(unknown)}"
                        + (f"; it accepts {', '.join(sorted(allowed))}" if allowed else ""))


def warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)
