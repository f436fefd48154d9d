"""LlamaIndex faces of windowed retrieval: native nodes in, ``NodeWithScore`` out.

* `WindowedLlamaIndexRetriever` -- a LlamaIndex ``BaseRetriever`` running the
  framework-free planner (`parents`) over a `SlidingWindowIndex`
  or over a native ``VectorStoreIndex`` built with the package's node parsers, and
  returning ``NodeWithScore`` made straight from the core's spans (no LangChain types
  on that path). Its hits can also come from a LlamaIndex retriever, or it can wrap any
  LangChain retriever (``retriever=``).
* `NodeChunkIndex` -- the `ChunkIndex` of a
  ``VectorStoreIndex``: the exact ``start_char_idx``/``end_char_idx`` of a document's
  nodes cut it into elementary pieces (the union of all node boundaries) that tile
  the covered text, so overlapping windows are merged by offset and budgeted exactly
  like the package's own small chunks.
* `MiniLMLlamaIndexEmbedding` -- the bundled MiniLM as a LlamaIndex embedding.
* `SlidingWindowLlamaIndex` -- the package's index for LlamaIndex users, over
  the framework-free `IndexEngine` (no LangChain): insert LlamaIndex
  ``Document`` s or nodes, retrieve merged windows as ``NodeWithScore`` (with
  ``MetadataFilters``, ``similarity_top_k``), answer through a ``RetrieverQueryEngine`` or
  a chat engine, refresh changed documents, reopen from its folder.

Nothing here imports LangChain: ``pip install 'swrag-integrations[llama-index]'`` is enough.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import PrivateAttr

from swrag_integrations.llama_index.convert import document_to_node, span_to_node
from swrag_integrations.core.windows import DEFAULT_ENCODING, count_units
from swrag_integrations.engine.engine import IndexEngine
from swrag_integrations.engine.parents import check_query, hit_records, spans_for
from swrag_integrations.engine.settings import DEFAULT_SETTINGS as _D
from swrag_integrations.engine.learned_fusion import first_stage
from swrag_integrations.engine.settings import RetrieverSettings, positive_int
from swrag_integrations.engine.protocols import ChildHit, ChunkIndex, ChunkRow
from swrag_integrations.engine.trace import above_floor, check_relevance

__all__ = ["WindowedLlamaIndexRetriever", "NodeChunkIndex", "MiniLMLlamaIndexEmbedding", "SlidingWindowLlamaIndex"]


@dataclass
class _Tiling:
    """A document's covered text cut at every node boundary."""

    rows: list[ChunkRow | None]  # position == row index; None marks text no known node holds
    node_range: dict[str, tuple[int, int]]  # node id -> (first row, last row)
    order: list[str]  # node ids by start offset


def _contiguous(rows: Sequence[ChunkRow], lo: int, hi: int, w_lo: int, w_hi: int) -> tuple[int, int]:
    """The window ``w_lo..w_hi`` of the hit rows ``lo..hi`` cut back to the rows that join
    the hit without a gap (text no known node holds: nodes a filter excluded, or nodes
    that are not in the docstore), so a window is always one exact stretch of text."""
    def joined(i: int) -> bool:
        a, b = rows[i], rows[i + 1]
        return a is not None and b is not None and a.end == b.start

    while w_lo < lo and not all(joined(i) for i in range(w_lo, lo)):
        w_lo += 1
    while w_hi > hi and not all(joined(i) for i in range(hi, w_hi)):
        w_hi -= 1
    return w_lo, w_hi


class NodeChunkIndex:
    """`ChunkIndex` over a LlamaIndex ``VectorStoreIndex``.

    Args:
        index: a ``VectorStoreIndex`` whose nodes carry exact ``start_char_idx``/
            ``end_char_idx`` and a source document (``ref_doc_id``), e.g. built with
            `DynamicStepNodeParser`.
        retriever: the first stage (default ``index.as_retriever(similarity_top_k=k)``).
        neighbors: widen each hit node by this many neighbouring nodes on each side
            (0: the node itself; its overlap with other hits is still merged).
        encoding_name: tiktoken encoding of budgets.
        filters: a metadata filter (LlamaIndex ``MetadataFilters`` or a LangChain-style
            dict, `filters`): passed to the index's retriever, checked on every
            retrieved node, and nodes that fail it are left out of the windows too.

    A document's other nodes are read from ``index.docstore`` (a ``VectorStoreIndex``
    over a text-storing vector store needs ``store_nodes_override=True`` for that);
    when they are not there, only the retrieved nodes themselves are used.
    """

    def __init__(self, index: Any, *, retriever: Any = None, neighbors: int = 0,
                 encoding_name: str = DEFAULT_ENCODING, filters: Any = None) -> None:
        from swrag_integrations.llama_index.convert import parse_llama_filter

        if isinstance(neighbors, bool) or not isinstance(neighbors, int) or neighbors < 0:
            raise ValueError(f"neighbors must be an int >= 0, got {neighbors!r}")
        if retriever is None and not hasattr(index, "as_retriever"):
            raise TypeError(f"index must be a LlamaIndex VectorStoreIndex (or pass retriever=), got {type(index).__name__}")
        self.index = index
        self.retriever = retriever
        self.neighbors = neighbors
        self._encoding_name = encoding_name
        self._tilings: dict[str, _Tiling] = {}
        self._lock = threading.Lock()
        self.filter = parse_llama_filter(filters)

    def _passes(self, node: Any) -> bool:
        return self.filter is None or self.filter.matches(node.metadata or {})

    @property
    def encoding_name(self) -> str:
        return self._encoding_name

    def _retrieve(self, query: str, k: int) -> list[NodeWithScore]:
        from swrag_integrations.llama_index.convert import filter_to_llama_index

        retriever = self.retriever
        if retriever is None:
            extra = {"filters": filter_to_llama_index(self.filter)} if self.filter is not None else {}
            retriever = self.index.as_retriever(similarity_top_k=k, **extra)
        elif hasattr(retriever, "similarity_top_k"):
            retriever.similarity_top_k = k
        return [item for item in retriever.retrieve(QueryBundle(query_str=query)) if self._passes(item.node)][:k]

    def _doc_nodes(self, ref_doc_id: str, seen: Sequence[Any]) -> list[Any]:
        docstore = getattr(self.index, "docstore", None)
        nodes: list[Any] = []
        if docstore is not None:
            info = docstore.get_ref_doc_info(ref_doc_id)
            if info is not None and info.node_ids:
                nodes = [n for n in docstore.get_nodes(list(info.node_ids), raise_error=False)
                         if n is not None and self._passes(n)]
        return nodes or list(seen)

    def _tiling(self, ref_doc_id: str, seen: Sequence[Any]) -> _Tiling:
        with self._lock:
            got = self._tilings.get(ref_doc_id)
            if got is not None and all(n.node_id in got.node_range for n in seen):
                return got
        nodes = [n for n in self._doc_nodes(ref_doc_id, seen) if n.start_char_idx is not None and n.end_char_idx is not None]
        nodes.sort(key=lambda n: (n.start_char_idx, n.end_char_idx))
        cuts = sorted({p for n in nodes for p in (n.start_char_idx, n.end_char_idx)})
        rows: list[ChunkRow | None] = []
        for a, b in zip(cuts, cuts[1:]):
            cover = next((n for n in nodes if n.start_char_idx <= a and b <= n.end_char_idx), None)
            if cover is None:  # text no known node holds (only retrieved nodes are known, or a filter left it out):
                if rows and rows[-1] is not None:  # a placeholder, so the rows either side never count as adjacent
                    rows.append(None)
                continue
            text = cover.get_content()[a - cover.start_char_idx:b - cover.start_char_idx]
            rows.append(ChunkRow(len(rows), a, b, count_units(text, "token", self._encoding_name), text))
        starts = {row.start: row.index for row in rows if row is not None}
        ends = {row.end: row.index for row in rows if row is not None}
        tiling = _Tiling(rows, {n.node_id: (starts[n.start_char_idx], ends[n.end_char_idx]) for n in nodes
                                if n.end_char_idx > n.start_char_idx}, [n.node_id for n in nodes])
        with self._lock:
            self._tilings[ref_doc_id] = tiling
        return tiling

    def search_children(self, query: str, k: int, *, search_type: str = "similarity",
                        weights: Sequence[float] = (0.5, 0.5), rrf_c: float = 60.0) -> list[ChildHit]:
        """The retrieved nodes as hits on their pieces (a node's score is split evenly)."""
        found = self._retrieve(check_query(query), k)
        by_doc: dict[str, list[Any]] = {}
        for item in found:
            node = item.node
            if node.start_char_idx is None or node.end_char_idx is None or not node.ref_doc_id:
                raise ValueError(f"node {node.node_id!r} has no exact offsets or source document: build the index "
                                 "with the package's node parsers (e.g. DynamicStepNodeParser)")
            by_doc.setdefault(node.ref_doc_id, []).append(node)
        hits: list[ChildHit] = []
        for rank, item in enumerate(found, start=1):
            node = item.node
            tiling = self._tiling(node.ref_doc_id, by_doc[node.ref_doc_id])
            lo, hi = tiling.node_range[node.node_id]
            pos = tiling.order.index(node.node_id)
            around = tiling.order[max(0, pos - self.neighbors):pos + self.neighbors + 1]
            w_lo = min(tiling.node_range[n][0] for n in around)
            w_hi = max(tiling.node_range[n][1] for n in around)
            w_lo, w_hi = _contiguous(tiling.rows, lo, hi, w_lo, w_hi)
            score = 1.0 / (rrf_c + rank)
            meta = {**{k: v for k, v in (node.metadata or {}).items() if isinstance(v, (str, int, float, bool))},
                    "node_id": node.node_id, "node_score": item.score}
            for i in range(lo, hi + 1):
                row = tiling.rows[i]
                hits.append(ChildHit(node.ref_doc_id, i, score / (hi - lo + 1), rank, w_lo, w_hi,
                                     tiling.rows[w_lo].start, tiling.rows[w_hi].end, row.start, row.end, dict(meta)))
        return hits

    def chunk_rows(self, ranges: Sequence[tuple[str, int, int]], *,
                   records: dict[str, Any] | None = None) -> dict[str, list[ChunkRow]]:
        """Rows of the retrieved documents' tilings (``records``: none here, the tilings are them)."""
        out: dict[str, list[ChunkRow]] = {}
        for sid, lower, upper in ranges:
            tiling = self._tilings.get(sid)
            rows = out.setdefault(sid, [])
            if tiling is not None:
                rows.extend(r for r in tiling.rows[max(0, lower):upper + 1] if r is not None)
        return {sid: sorted({r.index: r for r in rows}.values()) for sid, rows in out.items()}

    def medium_range(self, source_id: str, chunk_index: int, *,
                     record: Any = None) -> tuple[int, int, int, int] | None:
        """``None``: nodes have no medium chunks."""
        return None


class WindowedLlamaIndexRetriever(BaseRetriever):
    """Windowed parent retrieval as a LlamaIndex retriever.

    Args:
        index: a `SlidingWindowIndex`, a ``VectorStoreIndex`` built with
            the package's node parsers (wrapped in `NodeChunkIndex`), or any
            `ChunkIndex`.
        retriever: instead of ``index``, a LlamaIndex retriever (``BaseRetriever``, e.g.
            ``VectorStoreIndex.as_retriever()``, a ``QueryFusionRetriever``) whose nodes are
            the hits widened into windows (`NodeChunkIndex`; its index's docstore,
            when it has one, supplies the neighbouring nodes), or any LangChain retriever
            (its documents are converted to nodes), e.g. a ``MultiQueryFusionRetriever``.
        similarity_top_k: LlamaIndex's name of ``k`` (the number of results); pass one.
        k: at most this many merged windows are returned (``None``: as many as fit
            ``budget_tokens``), as in `WindowedParentRetriever`.
        k_child: small chunks (or nodes) fetched by the first stage per query
            (``None``: the package default; for a ``VectorStoreIndex`` or a LlamaIndex
            ``retriever``, 10 nodes).
        budget_tokens: token budget of the whole returned context (``None``: no limit).
        search_type: ``"similarity"`` or ``"mmr"`` for the dense part (a
            ``VectorStoreIndex`` or LlamaIndex ``retriever`` always uses similarity).
        weights: RRF weights of (BM25, dense).
        rrf_c: the RRF constant.
        expand: ``"window"``, ``"medium"`` or ``"chunk"``: how a hit widens, as in
            `WindowedParentRetriever`.
        fusion: ``"rrf"`` (default), ``"learned"`` or ``"auto"``: how stage 1 ranks its
            hits, as in `WindowedParentRetriever` (``"auto"`` keeps RRF for a
            ``VectorStoreIndex`` or LlamaIndex ``retriever``, whose nodes lack the ranker
            scores the model reads; ``"learned"`` there raises ``ValueError`` when retrieving).
        neighbors: for a ``VectorStoreIndex``: neighbouring nodes added to each hit's window.
        filters: a metadata filter, LlamaIndex ``MetadataFilters`` or a LangChain-style
            dict (`.filters`): only sources/nodes whose metadata passes it are
            searched and widened into windows (not with a LangChain ``retriever=``).
        callback_manager: LlamaIndex ``CallbackManager`` passed to ``BaseRetriever``.
        min_relevance: a relevance floor in [0, 1] (``None``, default: none): the hits
            below it are left out, as in `WindowedParentRetriever`.

    Raises:
        ValueError: not exactly one of ``index`` and ``retriever``; ``filters`` with a
            LangChain ``retriever``; an invalid filter, ``min_relevance``,
            ``similarity_top_k`` or ``k_child``.
        TypeError: ``k`` and ``similarity_top_k`` given with different values, or
            ``filters`` is not a filter.
    """

    def __init__(self, index: Any = None, *, retriever: Any = None, k: int | None = _D.k, k_child: int | None = None,
                 budget_tokens: int | None = _D.budget_tokens, search_type: str = _D.search_type,
                 weights: Sequence[float] = _D.weights, rrf_c: float = _D.rrf_c, expand: str = _D.expand,
                 fusion: str = _D.fusion, neighbors: int = 0, filters: Any = None, callback_manager: Any = None,
                 similarity_top_k: int | None = None, min_relevance: float | None = None) -> None:
        from swrag_integrations.llama_index.convert import parse_llama_filter

        min_relevance = check_relevance(min_relevance)

        if (retriever is None) == (index is None):
            raise ValueError("give exactly one of index or retriever")
        if similarity_top_k is not None:
            if k is not None and k != similarity_top_k:
                raise TypeError(f"pass k or similarity_top_k (LlamaIndex's name of k), not both: got k={k}, "
                                f"similarity_top_k={similarity_top_k}")
            k = positive_int("similarity_top_k", similarity_top_k)
        hit_source = None
        if isinstance(retriever, BaseRetriever):  # a LlamaIndex retriever: its nodes are the hits
            hit_source, retriever = retriever, None
        flt = parse_llama_filter(filters)
        if flt is not None and retriever is not None:
            raise ValueError("filters= applies to index=, not to a LangChain retriever= (give that retriever its own "
                             "filter, e.g. index.as_retriever(search_kwargs={'filter': ...}))")
        positive_int("k_child", k_child, optional=True)
        if isinstance(getattr(index, "engine", None), IndexEngine):  # a face (either framework's) stands for its engine
            index = index.engine
        if hit_source is not None or (index is not None and not isinstance(index, ChunkIndex)):
            if hit_source is not None:  # the neighbouring nodes come from its index's docstore, when it has one
                index = getattr(hit_source, "_index", None)
            index = NodeChunkIndex(index, retriever=hit_source, neighbors=neighbors, filters=flt)
            flt = None  # applied by the NodeChunkIndex itself
            k_child = k_child or 10
            search_type = "similarity"
        self._chunk_index = index
        self._lc_retriever = retriever
        self._settings = RetrieverSettings(k=k, k_child=k_child or _D.k_child, budget_tokens=budget_tokens,
                                           search_type=search_type, weights=tuple(weights), rrf_c=rrf_c, expand=expand,
                                           fusion=fusion)
        self._filter = flt
        self._min_relevance = min_relevance
        super().__init__(callback_manager=callback_manager)

    @property
    def chunk_index(self) -> Any:
        return self._chunk_index

    @property
    def settings(self) -> RetrieverSettings:
        """This retriever's `RetrieverSettings`."""
        return self._settings

    def trace(self, query: str) -> Any:
        """Every step of retrieving ``query`` (`RetrievalTrace`: hits, parents,
        kept spans, cuts, settings); not for a retriever built on a LangChain ``retriever=``."""
        from swrag_integrations.engine.trace import trace

        if self._chunk_index is None:
            raise ValueError("trace() needs index=: a LangChain retriever= has no stages to show")
        return trace(self._chunk_index, query, self._settings, filter=self._filter, min_relevance=self._min_relevance)

    def _nodes(self, query: str) -> list[NodeWithScore]:
        o = self._settings
        hits = above_floor(first_stage(self._chunk_index, query, o, filter=self._filter), self._min_relevance)
        spans = spans_for([hits], self._chunk_index, budget_tokens=o.budget_tokens, k=o.k, expand=o.expand)
        records = hit_records(hits)  # as the search read them: every span comes from a hit's source
        return [span_to_node(s, document_id(s.source_id, records.get(s.source_id))) for s in spans]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str  # checked once, by the engine's search (search_children)
        if self._lc_retriever is not None:
            return [document_to_node(d, with_score=True) for d in self._lc_retriever.invoke(query)]
        return self._nodes(query)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str  # checked once, by the engine's search (search_children)
        if self._lc_retriever is not None:
            return [document_to_node(d, with_score=True) for d in await self._lc_retriever.ainvoke(query)]
        return await asyncio.to_thread(self._nodes, query)




class MiniLMLlamaIndexEmbedding(BaseEmbedding):
    """The bundled all-MiniLM-L6-v2 as a LlamaIndex embedding model (offline).

    Wraps a `MiniLMEmbeddings` (the embedding
    object of `SlidingWindowIndex` and
    `SlidingWindowLlamaIndex`; it needs no LangChain), so both frameworks embed
    identically and share one loaded model.

    Args:
        embeddings: the core to wrap (any object with ``embed_documents``/``embed_query``,
            e.g. LangChain ``Embeddings``; default: the shared
            `default_embeddings` instance, or a new
            ``MiniLMEmbeddings`` when ``model_path``/``device``/... are given).
        model_path, device, normalize, max_seq_length, batch_size: passed to a new
            ``MiniLMEmbeddings`` (only without ``embeddings``).
        embed_batch_size: texts per LlamaIndex batch (default: the core's batch size).
        callback_manager: LlamaIndex callbacks.

    Example::

        from llama_index.core import Settings
        Settings.embed_model = MiniLMLlamaIndexEmbedding()
    """

    _core: Any = PrivateAttr()

    def __init__(
        self,
        embeddings: Any = None,
        *,
        model_path: str | os.PathLike | None = None,
        device: str | None = None,
        normalize: bool | None = None,
        max_seq_length: int | None = None,
        batch_size: int | None = None,
        embed_batch_size: int | None = None,
        callback_manager: Any = None,
        **kwargs: Any,
    ) -> None:
        from swrag_integrations.embeddings.minilm import MiniLMEmbeddings, default_embeddings

        options = {k: v for k, v in dict(device=device, normalize=normalize, max_seq_length=max_seq_length,
                                         batch_size=batch_size).items() if v is not None}
        if embeddings is None:
            if model_path is None and not options:
                embeddings = default_embeddings()
            else:
                embeddings = MiniLMEmbeddings(model_path, **options)
        elif model_path is not None or options:
            raise ValueError("give either embeddings or MiniLM options (model_path, device, ...), not both")
        if not (hasattr(embeddings, "embed_documents") and hasattr(embeddings, "embed_query")):
            raise TypeError(f"embeddings must have embed_documents and embed_query (e.g. MiniLMEmbeddings or "
                            f"LangChain Embeddings), got {type(embeddings).__name__}")
        name = str(getattr(embeddings, "model_path", type(embeddings).__name__))
        batch = embed_batch_size or int(getattr(embeddings, "batch_size", 0) or 10)
        kwargs.setdefault("model_name", name)
        super().__init__(embed_batch_size=batch, callback_manager=callback_manager, **kwargs)
        self._core = embeddings

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMLlamaIndexEmbedding"

    @property
    def core(self) -> Any:
        """The wrapped embedding object (``embed_documents``/``embed_query``)."""
        return self._core

    @property
    def langchain_embeddings(self) -> Any:
        """The wrapped embedding object (a LangChain ``Embeddings`` where LangChain is installed)."""
        return self._core

    def _get_query_embedding(self, query: str) -> list[float]:
        return list(self._core.embed_query(query))

    def _get_text_embedding(self, text: str) -> list[float]:
        return list(self._core.embed_documents([text])[0])

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [list(v) for v in self._core.embed_documents(list(texts))]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


class _LlamaEmbedder:
    """A LlamaIndex ``BaseEmbedding`` seen as the engine's `Embedder`."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.model_name = getattr(model, "model_name", None) or type(model).__name__

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(v) for v in self.model.get_text_embedding_batch(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return list(self.model.get_query_embedding(text))


def _as_embedder(embed_model: Any) -> Any:
    """The engine's embedder for ``embed_model``: the bundled MiniLM for ``None``, the
    core of a `MiniLMLlamaIndexEmbedding`, a LlamaIndex ``BaseEmbedding`` adapted,
    any object with ``embed_documents``/``embed_query`` as it is."""
    if embed_model is None:
        from swrag_integrations.embeddings.minilm import default_embeddings

        return default_embeddings()
    if isinstance(embed_model, MiniLMLlamaIndexEmbedding):
        return embed_model.core
    if isinstance(embed_model, BaseEmbedding):
        return _LlamaEmbedder(embed_model)
    if callable(getattr(embed_model, "embed_documents", None)) and callable(getattr(embed_model, "embed_query", None)):
        return embed_model
    raise TypeError(f"embed_model must be a LlamaIndex BaseEmbedding or have embed_documents/embed_query, "
                    f"got {type(embed_model).__name__}")


def _is_random_id(doc_id: Any) -> bool:
    """Whether ``doc_id`` looks like LlamaIndex's default document id (a random UUID)."""
    try:
        return uuid.UUID(str(doc_id)).version == 4
    except ValueError:
        return False


def _retriever_keywords(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords of `WindowedLlamaIndexRetriever` taken out of ``kwargs`` (the
    rest go to the LlamaIndex engine), so that none is silently dropped by it."""
    keys = {*RetrieverSettings.keys(), "filters", "similarity_top_k", "min_relevance"}
    return {k: kwargs.pop(k) for k in list(kwargs) if k in keys}


def with_stable_ids(documents: Sequence[Any]) -> list[Any]:
    """``documents`` with a stable identity where LlamaIndex gave them a random one.

    A ``Document`` read from a file (``SimpleDirectoryReader``: ``metadata["file_path"]``)
    gets a new random ``doc_id`` on every read, so indexing the folder twice would hold
    every file twice. A document whose ``doc_id`` is such a random UUID and that has a
    ``file_path`` is identified by its file path instead (as the reader's own
    ``filename_as_id=True`` does: ``file_path``, or ``f"{file_path}_part_{i}"`` when one
    file gave several documents in the batch, e.g. the pages of a PDF), so re-reading
    replaces (or, unchanged, skips) instead of duplicating. Other documents and nodes are
    returned as they are; a copy is made, the caller's documents are not changed.
    """
    docs = list(documents)
    paths: dict[str, int] = {}
    for doc in docs:
        path = (getattr(doc, "metadata", None) or {}).get("file_path")
        if isinstance(path, str) and path and _is_random_id(getattr(doc, "doc_id", None)):
            paths[path] = paths.get(path, 0) + 1
    parts: dict[str, int] = {}
    out = []
    for doc in docs:
        path = (getattr(doc, "metadata", None) or {}).get("file_path")
        if isinstance(path, str) and path in paths and _is_random_id(getattr(doc, "doc_id", None)):
            part = parts[path] = parts.get(path, -1) + 1
            doc = doc.model_copy(update={"id_": path if paths[path] == 1 else f"{path}_part_{part}"})
        out.append(doc)
    return out


def _drop_temporary(engine: Any, folder: str) -> None:
    """Close ``engine`` and remove its temporary index ``folder`` (an index without a location)."""
    import shutil

    try:
        engine.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def document_id(source_id: str, record: Any) -> str:
    """The id a source was added as, LlamaIndex's ``ref_doc_id``: a document's ``doc_id``;
    for nodes joined into a source, the ``ref_doc_id`` they carried (the source's
    ``metadata["source"]``); else the source id."""
    if record is None:
        return source_id
    return record.doc_id or (record.metadata.get("source") if record.members else None) or source_id


def as_plain_document(doc: Any) -> Any:
    """A LlamaIndex ``Document`` or node as the engine's `PlainDocument`.

    A ``Document`` is one source under its ``doc_id``. A node cut from a document (a
    ``ref_doc_id`` and an int ``start_char_idx``: the package's node parsers, LlamaIndex's
    own) is an *offset chunk* (`offset_of`) of source ``ref_doc_id`` (its
    ``metadata["source"]`` when it has one) at ``start_char_idx``, its ``node_id`` kept in
    its metadata: the nodes of one document inserted together are joined back into that
    document's text (`join_offset_chunks`), so windows come back in the
    document's own coordinates.

    Raises:
        TypeError: not a LlamaIndex document or node.
    """
    from swrag_integrations.stores.storage import PlainDocument

    if not hasattr(doc, "get_content") or not hasattr(doc, "metadata"):
        raise TypeError(f"insert_documents takes LlamaIndex Documents or nodes, got {type(doc).__name__}")
    text = doc.text if hasattr(doc, "text") else doc.get_content()
    meta = dict(doc.metadata or {})
    start, ref = getattr(doc, "start_char_idx", None), getattr(doc, "ref_doc_id", None)
    if ref is not None and isinstance(start, int) and not isinstance(start, bool):
        meta.setdefault("source", str(ref))
        meta.update(start_index=start, end_index=start + len(text), node_id=str(doc.node_id))
        return PlainDocument(page_content=text, metadata=meta)
    doc_id = getattr(doc, "doc_id", None) or getattr(doc, "node_id", None)
    return PlainDocument(page_content=text, metadata=meta, id=None if doc_id is None else str(doc_id))


class SlidingWindowLlamaIndex:
    """The sliding-window index for LlamaIndex: documents in, merged windows out.

    The index lives in a folder (Chroma vectors, SQLite sources, BM25), written as
    documents are inserted: there is nothing to persist, and ``SlidingWindowLlamaIndex(dir)``
    reopens it. Each inserted ``Document`` is one source under its ``doc_id``
    (re-inserting it replaces it, an unchanged one is skipped); its metadata can be
    filtered on.

    Args:
        persist_dir: the index folder. ``None`` (the default): the index lives only as long
            as this object (a private temporary folder, removed when the object is
            garbage-collected or the interpreter exits), as LlamaIndex's
            ``VectorStoreIndex`` keeps its data in memory until you persist it; give a
            folder to keep it (the CLI's own index is
            `default_index_dir`).
        embed_model: a LlamaIndex embedding (``BaseEmbedding``), any object with
            ``embed_documents``/``embed_query``, or ``None``: the bundled MiniLM
            (`MiniLMLlamaIndexEmbedding` shares its model).
        engine: an `IndexEngine` already open (instead of the above).
        engine_options: for `open` (``collection_name``,
            chunking such as ``chunk_size``, ``show_progress``, ``host``/``port``...).

    Raises:
        ValueError: ``engine`` given together with ``persist_dir``, ``embed_model`` or
            options, or an option `IndexEngine.open` rejects.
        TypeError: ``engine`` is not an `IndexEngine`, ``embed_model`` is no embedding,
            or an unknown option.
        IndexMismatchError: the folder holds an index of another format or with
            other stores.

    Example::

        from llama_index.core import Document
        from llama_index.core.vector_stores import MetadataFilters, MetadataFilter
        from swrag_integrations.llama_index import SlidingWindowLlamaIndex

        index = SlidingWindowLlamaIndex.from_documents(
            [Document(text=..., metadata={"topic": "sea"}), ...], persist_dir="my_index")
        nodes = index.as_retriever(k=4, filters=MetadataFilters(
            filters=[MetadataFilter(key="topic", value="sea")])).retrieve("a question")
        answer = index.as_query_engine(llm=my_llm).query("a question")
        index = SlidingWindowLlamaIndex("my_index")  # later: reopen
    """

    def __init__(self, persist_dir: str | os.PathLike | None = None, *, embed_model: Any = None,
                 engine: Any = None, **engine_options: Any) -> None:
        if engine is not None:
            if persist_dir is not None or embed_model is not None or engine_options:
                raise ValueError("give engine= alone (it is open already), or persist_dir/embed_model/options")
            if not isinstance(engine, IndexEngine):
                raise TypeError(f"engine must be an IndexEngine, got {type(engine).__name__}")
            self.engine = engine
        else:
            temporary = None
            if persist_dir is None and not engine_options.get("host"):
                import tempfile

                persist_dir = temporary = tempfile.mkdtemp(prefix="swrag-index-")  # 0700
            self.engine = IndexEngine.open(persist_dir, embedding=_as_embedder(embed_model), **engine_options)
            if temporary is not None:
                weakref.finalize(self, _drop_temporary, self.engine, temporary)

    @classmethod
    def from_documents(cls, documents: Sequence[Any], persist_dir: str | os.PathLike | None = None, *,
                       embed_model: Any = None, transformations: Sequence[Any] | None = None,
                       **engine_options: Any) -> "SlidingWindowLlamaIndex":
        """Open (or create) the index in ``persist_dir`` and insert ``documents``.

        ``transformations``: LlamaIndex transformations (e.g. ``[DynamicStepNodeParser(...)]``)
        run over the documents, as in ``VectorStoreIndex.from_documents``; their nodes are
        inserted (`insert_nodes`), each a piece of its ``ref_doc_id`` at
        ``start_char_idx``..``end_char_idx``. The documents get their stable identity
        (`with_stable_ids`) first, so the nodes' ``ref_doc_id`` is stable too.
        """
        index = cls(persist_dir, embed_model=embed_model, **engine_options)
        if transformations is None:
            index.insert_documents(documents)
        else:
            from llama_index.core.ingestion import run_transformations

            index.insert_nodes(run_transformations(with_stable_ids(documents), list(transformations)))
        return index

    def insert_documents(self, documents: Sequence[Any]) -> Any:
        """Index LlamaIndex ``Document`` s or nodes (`as_plain_document`; a document's
        identity: ``doc_id``, or the file path of a document read from a file,
        `with_stable_ids`); returns the `IndexReport`."""
        return self.engine.index_documents([as_plain_document(doc) for doc in with_stable_ids(documents)])

    def insert(self, document: Any) -> None:
        """Index one LlamaIndex ``Document`` (as ``VectorStoreIndex.insert``)."""
        self.insert_documents([document])

    def insert_nodes(self, nodes: Sequence[Any]) -> Any:
        """Index LlamaIndex nodes (as ``VectorStoreIndex.insert_nodes``), e.g. from the
        package's node parsers: each node is a piece of its ``ref_doc_id`` at
        ``start_char_idx``; returns the `IndexReport`."""
        nodes = list(nodes)
        for node in nodes:
            if not hasattr(node, "get_content") or not hasattr(node, "node_id"):
                raise TypeError(f"insert_nodes takes LlamaIndex nodes, got {type(node).__name__}")
        return self.insert_documents(nodes)

    def refresh_ref_docs(self, documents: Sequence[Any]) -> list[bool]:
        """Insert the documents that are new or changed (as LlamaIndex's ``refresh_ref_docs``).

        Returns one ``bool`` per document: ``True`` if it was inserted or updated because
        the index did not hold it, or held another text or metadata (LlamaIndex compares
        ``Document.hash``, of text and metadata; here the index's own record is compared),
        ``False`` if it was unchanged. Identity as in `insert_documents`.
        """
        documents = with_stable_ids(documents)
        refreshed = []
        for doc in documents:
            before = self.engine.held(doc.doc_id)
            self.insert_documents([doc])
            refreshed.append(before != self.engine.held(doc.doc_id))
        return refreshed

    def delete_ref_doc(self, ref_doc_id: str) -> None:
        """Remove a document by its ``doc_id``, with the nodes inserted for it (their
        ``ref_doc_id``: the origin of the source they were joined into); unknown ids are
        ignored."""
        self.engine.delete_document(ref_doc_id)

    @property
    def ref_doc_ids(self) -> list[str]:
        """The ``doc_id`` of every document in the index (for nodes inserted with a
        ``ref_doc_id``: that id, the origin they were joined under), sorted."""
        records = self.engine.store.get_many(self.engine.source_ids())
        return sorted(document_id(sid, rec) for sid, rec in records.items())

    def as_retriever(self, **kwargs: Any) -> WindowedLlamaIndexRetriever:
        """A `WindowedLlamaIndexRetriever` over this index: merged windows as
        ``NodeWithScore`` (``k`` or LlamaIndex's ``similarity_top_k``, ``budget_tokens``,
        ``filters`` -- ``MetadataFilters`` or a dict --, ``search_type``, ``weights``,
        ``min_relevance``...)."""
        return WindowedLlamaIndexRetriever(self.engine, **kwargs)

    def as_query_engine(self, llm: Any = None, **kwargs: Any) -> Any:
        """A LlamaIndex ``RetrieverQueryEngine`` over `as_retriever`. Keywords of
        the retriever (``k``, ``similarity_top_k``, ``filters``...) go to it; the rest to
        ``RetrieverQueryEngine.from_args`` (``response_mode``...). ``llm``: default
        LlamaIndex's ``Settings.llm``."""
        from llama_index.core.query_engine import RetrieverQueryEngine

        retriever = self.as_retriever(**_retriever_keywords(kwargs))
        return RetrieverQueryEngine.from_args(retriever, llm=llm, **kwargs)

    def as_chat_engine(self, chat_mode: str = "condense_plus_context", llm: Any = None, **kwargs: Any) -> Any:
        """A LlamaIndex chat engine over `as_retriever` (as ``VectorStoreIndex.as_chat_engine``).

        ``chat_mode``: ``"condense_plus_context"`` (default: the question is condensed with
        the history, then answered from the retrieved windows), ``"context"`` (the windows
        of each message go into the system prompt) or ``"condense_question"`` (the
        condensed question goes to `as_query_engine`). Keywords of the retriever
        (``k``, ``similarity_top_k``, ``filters``...) go to it; the rest to the engine's
        ``from_defaults`` (``memory``, ``system_prompt``...). ``llm``: default LlamaIndex's
        ``Settings.llm``.
        """
        from llama_index.core.chat_engine import (
            CondensePlusContextChatEngine,
            CondenseQuestionChatEngine,
            ContextChatEngine,
        )

        mode = getattr(chat_mode, "value", chat_mode)
        if mode == "condense_question":
            query_engine = self.as_query_engine(llm=llm, **_retriever_keywords(kwargs))
            return CondenseQuestionChatEngine.from_defaults(query_engine=query_engine, llm=llm, **kwargs)
        engines = {"condense_plus_context": CondensePlusContextChatEngine, "context": ContextChatEngine}
        if mode not in engines:
            raise ValueError(f"chat_mode must be one of 'condense_plus_context', 'context', 'condense_question', "
                             f"got {chat_mode!r}")
        retriever = self.as_retriever(**_retriever_keywords(kwargs))
        return engines[mode].from_defaults(retriever=retriever, llm=llm, **kwargs)

    def persist(self) -> None:
        """Nothing to do: every insert is on disk when it returns (kept for LlamaIndex habits)."""

    def __repr__(self) -> str:
        return f"SlidingWindowLlamaIndex({self.engine!r})"
