"""Sliding-window index: the LangChain face (a ``VectorStore``) over `IndexEngine`.

Every source document is cut into *small chunks* (default 50 cl100k tokens that tile
the text, see `plan_source`). Their vectors go to a LangChain
``VectorStore`` (`VectorBackend`; embedded Chroma by default); the
source's exact text, its chunks' offsets and their window bounds live once in a
*source store* (`sources`; SQLite by default), the one truth of the index, from
which the BM25 side index (`KeywordIndex`) is derived. Windows and
*medium chunks* are never stored: they are ranges of chunks, read at query time.

All of that lives in the framework-free `IndexEngine` (``index.engine``);
this module adds the LangChain contract (documents in and out, ``VectorStore`` search
methods, retrievers). The default Chroma store is the engine's own `ChromaStorage`
(one adapter for the collection, whichever face or command opened it).

Guarantees (tested in ``tests/ingest/test_retrieval_reliability.py`` and ``tests/ingest/test_crash_steps.py``):

* **Only complete sources are served.** A source is written to the source store as
  ``pending`` first, then its vectors, then it is marked ``complete``; dense and
  keyword hits of a source that is not complete (or whose vector carries another
  content hash) are dropped. A write that dies half-way is completed by the next
  write (from the stored text; the original documents are not needed) or by
  ``index.engine.repair()`` (`repair`).
* **Many writers, one truth.** Writers serialise on the source store's writer lock
  (a file lock for a local index, otherwise a lease that renews itself while held and
  whose epoch fences every write: a writer that lost it raises
  `LeaseLostError` and writes nothing more); every writer replays
  the store's change log into BM25 before it saves, and readers catch up with the
  log before every search, so no writer's documents are lost and no reader serves a
  stale keyword index.
* **Long-lived handles see other processes' writes.** Records are served from a cache
  only after it has replayed the store's change log, so a handle never reads, serves,
  re-indexes or completes (recovery) an older version of a source than the store holds.
* **Derived parts are checked.** The BM25 snapshot carries a checksum and the store
  generation it reflects; vector counts and a self-retrieval probe are checked before
  the first search (``index.engine.status()`` reports them), and re-adding a
  document whose vectors are missing writes them again.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from typing import Any, Callable, Iterable, Sequence

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from swrag_integrations.engine.engine import FORMAT, IndexDamagedError, IndexEngine, IndexMismatchError, validate_collection_name
from swrag_integrations.engine.ids import parse_member_id
from swrag_integrations.langchain.vectorstore import VectorBackend, default_chroma

__all__ = ["SlidingWindowIndex", "IndexMismatchError", "IndexDamagedError", "validate_collection_name", "FORMAT"]


def _as_tuned_config(config: Any) -> Any:
    """``config=`` of `SlidingWindowIndex` as a ``TunedConfig`` (``None`` stays ``None``).

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

    This class is the LangChain contract only. Everything else is the engine's,
    ``index.engine`` (`IndexEngine`): ``index.engine.status()``,
    ``.repair()``, ``.count()``, ``.source_text(sid)``, ``.store``, ``.config``,
    ``.tuned_config``... The small-chunk retrievers are
    `CJKBM25Retriever.from_index <.search.CJKBM25Retriever.from_index>`,
    `DenseChunkRetriever.from_index <.search.DenseChunkRetriever.from_index>` and
    `HybridRetriever.from_index <.search.HybridRetriever.from_index>`. The names this
    class used to forward to the engine still work until 0.4, with a ``DeprecationWarning``
    naming their new spelling (`DEPRECATED`).

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
        host: the host of a running Chroma server for vectors and sources.
        port: that server's port (``None``: Chroma's default).
        ssl: connect to that server over HTTPS.
        headers: HTTP headers sent to that server (e.g. authentication).
        client: an existing chromadb client for the default vector store.
        chunk_size: small-chunk length in ``unit``. This and the next eight keywords are
            the chunking (`IndexConfig`); ``None`` takes the stored value of an existing
            index (different values raise).
        child: the shape of the small chunks, ``"fixed"`` or ``"sentence"``.
        medium_size: small chunks per derived medium chunk.
        strategy: ``"chunks"`` (windows of small chunks) or ``"FFS"``/``"DFS"``/``"DDS"``.
        window_size: the windows' size (see ``strategy``).
        step: the windows' step (see ``strategy``).
        unit: ``"token"`` or ``"char"``.
        delimiters: DFS/DDS delimiters (``None``: the method's set).
        encoding_name: tiktoken encoding for token counts.
        batch_size: chunks embedded and written per batch.
        show_progress: tqdm progress bars while indexing (default off: quiet in a library call).
        index_text: optional ``chunk text -> text to index`` for BM25 and the default
            store's embeddings (e.g. contextual headers); stored chunks stay exact.
        lock_timeout: seconds a writer waits for another one.
        config: a tuned configuration (a `TunedConfig`,
            the path of a file written by ``swrag tune``, or its dict): its index part
            sets the chunking (an explicit chunking keyword that disagrees raises
            ``ValueError``), and the whole configuration is recorded in the index
            (``index.engine.tuned_config``, kept across reopening), so `as_retriever`
            starts from its retriever settings.
        keyword_search: ``"auto"`` (the store's own keyword search where it has one),
            ``"store"`` or ``"local"`` (the in-process BM25), see
            `IndexEngine`.

    Attributes:
        engine: the framework-free `IndexEngine` this face sits on: all
            that is not LangChain's contract (``status()``, ``repair()``, ``count()``,
            ``source_text(sid)``, ``store``, ``config``, ``tuned_config``...).

    Raises:
        ValueError: ``vectorstore`` given with ``storage``, ``host`` or ``client``; an
            invalid ``collection_name`` or chunking value; chunking that differs from
            the existing index's or from ``config``'s; or any other bad option
            `IndexEngine.open` rejects.
        IndexMismatchError: the stores hold another index (with a ``vectorstore`` that
            already holds documents, the message names `from_vectorstore`).
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
        name = validate_collection_name(collection_name)
        if all(x is None for x in (persist_directory, vectorstore, storage, source_store, host, client)):
            vectorstore, source_store, embedding = _in_memory_parts(embedding, index_text)
        if vectorstore is not None:
            if sum(x is not None for x in (host, client, storage)):
                raise ValueError("give at most one of vectorstore, storage, host or client")
            storage = VectorBackend(vectorstore, embedding)
        try:
            self.engine: IndexEngine = IndexEngine.open(
                persist_directory, embedding=embedding, storage=storage, source_store=source_store,
                collection_name=name, host=host, port=port, ssl=ssl, headers=headers, client=client,
                batch_size=batch_size, show_progress=show_progress,
                index_text=index_text, lock_timeout=lock_timeout, keyword_search=keyword_search, **chunking)
        except IndexMismatchError as exc:
            if vectorstore is None or "already holds" not in str(exc):
                raise
            raise IndexMismatchError(f"{exc}; or index the documents it holds: "
                                     "SlidingWindowIndex.from_vectorstore(vectorstore, source_store=...)") from None
        if tuned is not None:
            try:
                self.engine.record_tuned(tuned)
            except BaseException:
                if source_store is None:
                    self.engine.close()
                raise

    def close(self) -> None:
        """Close the index's stores (the source store; a Milvus Lite file is released)."""
        self.engine.close()

    def __getattr__(self, name: str) -> Any:
        """The names this face forwarded to the engine before 0.3, served from their new
        home with a ``DeprecationWarning`` (`DEPRECATED`); any other name raises
        ``AttributeError`` (Python calls this only for names the class does not define)."""
        moved = DEPRECATED.get(name)
        if moved is None or "engine" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        replacement, serve = moved
        warnings.warn(f"SlidingWindowIndex.{name} is deprecated and will be removed in 0.4: use {replacement}",
                      DeprecationWarning, stacklevel=2)
        return serve(self)

    # ------------------------------------------------------------------ writing
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
        with the piece's source id. What the write did (an `IndexReport`;
        pruning, ``workers``) is `index_documents`'s.
        ``batch_size`` is accepted (the index batches by itself); other keywords raise
        ``TypeError``.
        """
        _only(kwargs, {"batch_size"}, "add_documents")
        docs = list(documents)
        report = self.engine.index_documents(docs, ids=ids)
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

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """LangChain ``VectorStore.delete``: remove sources (by the ids `add_documents`
        returned, or source ids). ``ids=None`` raises (use ``index.engine.reset()``)."""
        _only(kwargs, set(), "delete")
        if ids is None:
            raise ValueError("ids must be given (index.engine.reset() removes everything)")
        self.engine.delete(ids)
        return True

    # ------------------------------------------------------------------ reading
    @property
    def embeddings(self) -> Embeddings:
        """The query embedding (LangChain ``VectorStore.embeddings``)."""
        return self.engine.vectors.embedding

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """LangChain ``VectorStore.get_by_ids``: the documents as they were added (whole
        text, their own metadata), under the ids asked for; unknown ids are left out."""
        from swrag_integrations.langchain.plain import source_document

        sids = self.engine.resolve_ids(list(ids))
        records = self.engine.store.get_many(sids)
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

    # --------------------------------------------------------- retrievers
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
        ``VectorStoreRetriever`` over the added documents (build one yourself,
        ``VectorStoreRetriever(vectorstore=index, ...)``, for the other search types).
        Unknown keywords raise ``TypeError``. An index built with a tuned configuration
        (``index.engine.tuned_config``) starts from its retriever settings; keywords given
        here win.
        """
        from swrag_integrations.langchain.retriever import WindowedParentRetriever

        if kwargs.get("search_type") == "similarity_score_threshold":
            return VectorStore.as_retriever(self, **kwargs)
        tuned = self.engine.tuned_config
        options = {k: v for k, v in tuned.retriever_kwargs.items() if v is not None} if tuned is not None else {}
        options.update(kwargs.pop("search_kwargs", None) or {})
        if "search_type" in kwargs:
            options["search_type"] = kwargs.pop("search_type")
        options.update(kwargs)
        return WindowedParentRetriever(index=self.engine, **options)

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

        return self.similarity_search_with_score_by_vector(self.engine.vectors.embed_query(check_query(query)), k,
                                                           **kwargs)

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

        return self.max_marginal_relevance_search_by_vector(self.engine.vectors.embed_query(check_query(query)), k,
                                                            fetch_k, lambda_mult, **kwargs)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """`max_marginal_relevance_search` for a query vector."""
        from swrag_integrations.langchain.plain import search_documents

        _only(kwargs, {"filter"}, "max_marginal_relevance_search")
        return [doc for doc, _ in search_documents(self.engine, embedding, k, mmr=True, fetch_k=fetch_k,
                                                   lambda_mult=lambda_mult, filter=kwargs.get("filter"))]

    # ------------------------------------------------------------------ building
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

    def __repr__(self) -> str:
        engine = self.engine
        return (f"SlidingWindowIndex({engine.server or str(engine.persist_directory or engine.store)!r}, "
                f"collection_name={engine.collection_name!r}, vectors={engine.vectors.kind}, config={engine.config})")


def _engine_attribute(name: str) -> Callable[[SlidingWindowIndex], Any]:
    return lambda index: getattr(index.engine, name)


def _from_search(name: str) -> Callable[[SlidingWindowIndex], Any]:
    """A function of `search` with the index's engine as its first argument."""
    def serve(index: SlidingWindowIndex) -> Any:
        from swrag_integrations.langchain import search

        return functools.partial(getattr(search, name), index.engine)
    return serve


def _retriever_from_index(cls_name: str) -> Callable[[SlidingWindowIndex], Any]:
    def serve(index: SlidingWindowIndex) -> Any:
        from swrag_integrations.langchain import search

        return functools.partial(getattr(search, cls_name).from_index, index)
    return serve


_ENGINE_NAMES = ("store", "vectors", "keyword", "manifest", "index_id", "config", "persist_directory", "server",
                 "batch_size", "show_progress", "lock_timeout", "index_text", "encoding_name", "collection_name",
                 "tuned_config", "status", "repair", "reset", "count", "source_ids", "source_text",
                 "chunk_metadata", "chunk_rows", "medium_range", "span_text", "bm25_search", "dense_ids",
                 "search_children", "disk_size", "delete_source", "index_documents", "check_embedding", "explain")

DEPRECATED: dict[str, tuple[str, Callable[[SlidingWindowIndex], Any]]] = {
    **{name: (f"index.engine.{name}", _engine_attribute(name)) for name in _ENGINE_NAMES},
    "vectorstore": ("index.engine.vectors (the engine's vector storage; for a LangChain vector store you passed, "
                    "index.engine.vectors.store)", lambda index: _legacy_vectorstore(index)),
    "get_chunks": ("swrag_integrations.langchain.search.chunk_documents(index.engine, ids)",
                   _from_search("chunk_documents")),
    "dense_search": ("DenseChunkRetriever.from_index(index, k=..., ...).invoke(query) or "
                     "swrag_integrations.langchain.search.dense_documents(index.engine, query, k, ...)",
                     _from_search("dense_documents")),
    "bm25_retriever": ("CJKBM25Retriever.from_index(index, k=...)", _retriever_from_index("CJKBM25Retriever")),
    "dense_retriever": ("DenseChunkRetriever.from_index(index, k=..., search_type=...)",
                        _retriever_from_index("DenseChunkRetriever")),
    "hybrid_retriever": ("HybridRetriever.from_index(index, k=..., search_type=...)",
                         _retriever_from_index("HybridRetriever")),
    "as_document_retriever": ("langchain_core.vectorstores.VectorStoreRetriever(vectorstore=index, ...)",
                              lambda index: functools.partial(VectorStore.as_retriever, index)),
}
"""Names `SlidingWindowIndex` forwarded before 0.3 (removed in 0.4): name ->
(the new spelling, a function of the index that serves it)."""


def _legacy_vectorstore(index: SlidingWindowIndex) -> Any:
    """What ``index.vectorstore`` was before 0.3: the LangChain vector store you passed,
    or, for the default Chroma, a ``langchain_chroma.Chroma`` over the engine's collection
    (a view made on request; the index itself writes through `ChromaStorage`)."""
    vectors = index.engine.vectors
    store = getattr(vectors, "store", None)
    if store is not None:
        return store
    if not hasattr(vectors, "collection_name") or not hasattr(vectors, "client"):
        return vectors
    try:
        import langchain_chroma  # noqa: F401
    except ImportError:
        raise ImportError("index.vectorstore over the default Chroma needs langchain-chroma "
                          "(pip install langchain-chroma); or use index.engine.vectors") from None
    return default_chroma(vectors.client, vectors.collection_name, vectors.precomputed)


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
