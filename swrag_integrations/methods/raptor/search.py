"""Retrieval over a RAPTOR tree, framework-free: collapsed tree and tree traversal.

* `collapsed_hits` ranks **all** nodes of all layers by cosine similarity to the
  query (RAPTOR's *collapsed tree*; with a 2000-token budget it was the better of the
  two modes in the paper);
* `hybrid_hits` ranks them as the package's index does: the reciprocal-rank fusion
  (`rrf`) of that cosine ranking and BM25 over
  the nodes' texts with the package's tokenizer (jieba for Chinese,
  `BM25Index`). The bundled MiniLM is an English
  model: ranked by cosine alone, RAPTOR fell 24 and 43 points below the default retriever
  on the Chinese dev sets' test halves (docs/eval/raptor.md), so ``"hybrid"`` is the
  searcher's default ranking;
* `traversal_hits` walks the tree top-down: the ``top_k`` most similar nodes of
  the top layer, then the ``top_k`` most similar of their children, and so on down to
  the leaves; nodes without a parent join the candidates of their own layer (a forest
  of per-document trees has many tops).

`assemble_hits` fills a token budget (default 2000 cl100k tokens) with the ranked
nodes. Nodes made of exact source spans -- leaves and extractive summaries -- go through
the package's one offset merger, `assemble_context`
(overlapping or touching pieces of a source are merged, no text is paid twice, the last
piece is cut at a token boundary). LLM summaries are free text: each is kept whole or
left out, and carries the exact leaf spans it summarises (``leaves``) for citation.
The budget covers the whole joined context, separators included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.engine.assemble import AssembledContext, ContextSpan, assemble_context, count_tokens
from swrag_integrations.engine.fusion import rrf
from swrag_integrations.engine.parents import check_query
from swrag_integrations.engine.settings import check_weights
from swrag_integrations.keyword.bm25 import BM25Index
from swrag_integrations.methods.raptor.tree import RaptorTree

__all__ = ["NodeHit", "SummaryPiece", "RaptorContext", "collapsed_hits", "hybrid_hits", "traversal_hits",
           "assemble_hits", "node_keyword_index", "MODES", "RANKINGS", "DEFAULT_BUDGET", "SEPARATOR", "RaptorSearcher"]

MODES = ("collapsed", "traverse")
#: How the collapsed tree ranks its nodes: cosine alone (RAPTOR's own) or fused with BM25.
RANKINGS = ("hybrid", "dense")
DEFAULT_BUDGET = 2000
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class NodeHit:
    """A ranked node: its index in the tree and its score (the cosine similarity to the query,
    or under the hybrid ranking the fused RRF score)."""

    index: int
    score: float


def _query_vector(query_vector: Any, tree: RaptorTree) -> np.ndarray:
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    if tree.nodes and q.shape[0] != tree.embeddings.shape[1]:
        raise ValueError(f"query vector has {q.shape[0]} dimensions, the tree's embeddings {tree.embeddings.shape[1]}: "
                         "embed queries with the model that built the tree")
    norm = float(np.linalg.norm(q))
    return q / norm if norm > 0 else q


def collapsed_hits(tree: RaptorTree, query_vector: Any, *, layers: Sequence[int] | None = None) -> list[NodeHit]:
    """All nodes (of ``layers``, default all), most similar first (ties: lower index)."""
    if not tree.nodes:
        return []
    scores = tree.unit_embeddings @ _query_vector(query_vector, tree)
    idx = np.arange(len(tree.nodes))
    if layers is not None:
        wanted = set(int(k) for k in layers)
        idx = np.array([i for i in idx if tree.nodes[i].layer in wanted], dtype=int)
    order = idx[np.argsort(-scores[idx], kind="stable")]
    return [NodeHit(int(i), float(scores[i])) for i in order]


def node_keyword_index(tree: RaptorTree) -> BM25Index:
    """BM25 over the texts of every node of ``tree`` (ids are the nodes' indices as strings)."""
    index = BM25Index()
    if tree.nodes:
        index.upsert([str(i) for i in range(len(tree.nodes))], [node.text for node in tree.nodes])
    return index


def hybrid_hits(tree: RaptorTree, query: str, query_vector: Any, *, keyword: BM25Index | None = None,
                weights: Sequence[float] = (0.5, 0.5), layers: Sequence[int] | None = None) -> list[NodeHit]:
    """All nodes (of ``layers``, default all) by the fusion of BM25 and cosine ranks, best first.

    Args:
        tree: the tree to rank.
        query: the question (for BM25).
        query_vector: its embedding (for the cosine ranking).
        keyword: a `node_keyword_index` of ``tree`` (built here when not given).
        weights: RRF weights of (BM25, dense), as the index's ``weights``.
        layers: only nodes of these layers.

    A node's score is its fused RRF score; nodes BM25 does not match keep their cosine rank.
    """
    w = check_weights(weights)
    dense = collapsed_hits(tree, query_vector, layers=layers)
    if not dense:
        return []
    allowed = {h.index for h in dense}
    keyword = keyword if keyword is not None else node_keyword_index(tree)
    lexical = [int(i) for i, _ in keyword.search(query, k=len(tree.nodes))] if len(keyword) else []
    fused = rrf([[i for i in lexical if i in allowed], [h.index for h in dense]], w)
    return [NodeHit(int(key), float(score)) for key, score, _ in fused]


def traversal_hits(tree: RaptorTree, query_vector: Any, *, top_k: int = 5) -> list[NodeHit]:
    """Top-down traversal: ``top_k`` nodes per layer, each layer chosen among the children
    of the layer above (plus its parentless nodes). Returned top layer first, by score
    within a layer."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    if not tree.nodes:
        return []
    scores = tree.unit_embeddings @ _query_vector(query_vector, tree)
    out: list[NodeHit] = []
    chosen: list[int] = []
    for layer in range(tree.n_layers - 1, -1, -1):
        candidates = {c for i in chosen for c in tree.nodes[i].children}
        candidates.update(i for i in tree.layer(layer) if not tree.parents(i))
        ranked = sorted(candidates, key=lambda i: (-float(scores[i]), i))[:top_k]
        out.extend(NodeHit(i, float(scores[i])) for i in ranked)
        chosen = ranked
    return out


@dataclass
class SummaryPiece:
    """An LLM summary in a context (free text: no offsets of its own).

    ``leaves`` are the exact ``(source_id, start, end)`` spans of the leaves it summarises.
    """

    node_id: str
    layer: int
    kind: str
    text: str
    leaves: list[tuple[str, int, int]]
    score: float
    rank: int
    n_tokens: int

    def metadata(self) -> dict[str, Any]:
        return {"raptor_node_id": self.node_id, "raptor_layer": self.layer, "raptor_kind": self.kind,
                "raptor_leaves": [{"source_id": s, "start_index": a, "end_index": b} for s, a, b in self.leaves],
                "source_ids": sorted({s for s, _, _ in self.leaves}), "score": self.score, "rank": self.rank,
                "n_tokens": self.n_tokens}


@dataclass
class RaptorContext:
    """A budgeted context: merged exact spans and whole LLM summaries, in rank order.

    ``items`` interleaves `ContextSpan` s
    (leaves and extractive sentences, merged by offset; metadata ``raptor_nodes``,
    ``raptor_layers``, ``raptor_kinds`` of the nodes inside them) and
    `SummaryPiece` s, best first. ``text`` joins them with ``separator``;
    ``text_tokens <= budget_tokens``.
    """

    items: list[Any]
    hits: list[NodeHit]
    budget_tokens: int | None
    separator: str = SEPARATOR
    truncated: bool = False
    encoding_name: str = DEFAULT_ENCODING
    text_tokens: int = 0
    used: list[int] = field(default_factory=list)  # node indices that made it in (whole or cut)

    @property
    def text(self) -> str:
        return self.separator.join(i.text for i in self.items)

    @property
    def spans(self) -> list[ContextSpan]:
        return [i for i in self.items if isinstance(i, ContextSpan)]

    @property
    def summaries(self) -> list[SummaryPiece]:
        return [i for i in self.items if isinstance(i, SummaryPiece)]

    @property
    def offsets(self) -> list[tuple[str, int, int]]:
        return [(s.source_id, s.start, s.end) for s in self.spans]

    def as_assembled(self) -> AssembledContext:
        """As the package's `AssembledContext`
        (for the evaluation): an LLM summary becomes a span of the pseudo-source
        ``raptor-summary:<node_id>`` (offsets 0..len(text)); real spans keep theirs."""
        spans = []
        for item in self.items:
            if isinstance(item, ContextSpan):
                spans.append(item)
            else:
                spans.append(ContextSpan(f"raptor-summary:{item.node_id}", 0, len(item.text), item.text, item.score,
                                         item.rank, item.metadata(), n_tokens=item.n_tokens))
        return AssembledContext(spans=spans, n_tokens=sum(s.n_tokens or 0 for s in spans),
                                budget_tokens=self.budget_tokens, truncated=self.truncated, separator=self.separator,
                                text_tokens=self.text_tokens)


def _node_spans(tree: RaptorTree, i: int, rank: int, score: float) -> list[ContextSpan]:
    node = tree.nodes[i]
    meta = {"raptor_node_id": node.node_id, "raptor_layer": node.layer, "raptor_kind": node.kind}
    return [ContextSpan(sid, a, b, t, score, rank, dict(meta)) for (sid, a, b), t in zip(node.spans, node.span_texts)]


def _annotate(spans: list[ContextSpan], pieces: list[ContextSpan]) -> None:
    """Record in each merged span the nodes whose pieces lie in it."""
    for span in spans:
        inside = [p for p in pieces if p.source_id == span.source_id and p.start < span.end and span.start < p.end]
        ids = list(dict.fromkeys(p.metadata["raptor_node_id"] for p in inside))
        span.metadata["raptor_nodes"] = ids
        span.metadata["raptor_layers"] = sorted({p.metadata["raptor_layer"] for p in inside})
        span.metadata["raptor_kinds"] = sorted({p.metadata["raptor_kind"] for p in inside})
        span.metadata["source_id"] = span.source_id


def assemble_hits(tree: RaptorTree, hits: Sequence[NodeHit], budget_tokens: int | None = DEFAULT_BUDGET, *,
                  k: int | None = None, encoding_name: str = DEFAULT_ENCODING,
                  separator: str = SEPARATOR) -> RaptorContext:
    """Fill ``budget_tokens`` with ranked nodes (see the module docstring).

    Args:
        tree: the tree the hits index into.
        hits: ranked nodes (`collapsed_hits` / `traversal_hits`).
        budget_tokens: tokens of the whole joined context (``None``: no limit, then
            ``k`` or all hits are used).
        k: use at most this many nodes.
        encoding_name: tiktoken encoding of the budget.
        separator: joins the pieces.
    """
    if budget_tokens is not None and (isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int)
                                      or budget_tokens <= 0):
        raise ValueError(f"budget_tokens must be a positive int or None, got {budget_tokens!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
        raise ValueError(f"k must be a positive int or None, got {k!r}")
    sep = count_tokens(separator, encoding_name)
    pieces: list[ContextSpan] = []
    summaries: list[SummaryPiece] = []
    used: list[int] = []
    truncated = False
    assembled = None

    def spans_cost(ctx: Any) -> int:
        return ctx.text_tokens if ctx is not None and ctx.spans else 0

    def total(span_ctx: Any, n_summaries: int, summary_tokens: int) -> int:
        blocks = (len(span_ctx.spans) if span_ctx is not None else 0) + n_summaries
        return spans_cost(span_ctx) + summary_tokens + sep * max(0, n_summaries if blocks > n_summaries else n_summaries - 1)

    summary_tokens = 0
    for rank, hit in enumerate(hits, start=1):
        if k is not None and len(used) >= k:
            truncated = True
            break
        node = tree.nodes[hit.index]
        if node.exact:
            trial = pieces + _node_spans(tree, hit.index, rank, hit.score)
            ctx = assemble_context(trial, None, encoding_name=encoding_name, separator=separator)
            if budget_tokens is None or total(ctx, len(summaries), summary_tokens) <= budget_tokens:
                pieces, assembled = trial, ctx
                used.append(hit.index)
                continue
            # does not fit whole: let the merger cut it into the room that is left, then stop
            room = budget_tokens - summary_tokens - sep * len(summaries)
            if room > 0:
                cut = assemble_context(trial, room, encoding_name=encoding_name, separator=separator)
                if cut.spans:
                    pieces, assembled = trial, cut
                    used.append(hit.index)
            truncated = True
            break
        n = count_tokens(node.text, encoding_name)
        if budget_tokens is not None and total(assembled, len(summaries) + 1, summary_tokens + n) > budget_tokens:
            truncated = True  # a whole summary does not fit: skip it, smaller nodes may
            continue
        summaries.append(SummaryPiece(node.node_id, node.layer, node.kind, node.text, tree.leaf_spans(hit.index),
                                      hit.score, rank, n))
        summary_tokens += n
        used.append(hit.index)
    span_list = list(assembled.spans) if assembled is not None else []
    _annotate(span_list, pieces)

    def best_rank(item: Any) -> int:
        if isinstance(item, SummaryPiece):
            return item.rank
        return min(item.metadata.get("merged_ranks") or [item.rank or 0])

    items: list[Any] = sorted([*span_list, *summaries], key=best_rank)
    text_tokens = count_tokens(separator.join(i.text for i in items), encoding_name)
    # joins can tokenise differently from the parts: drop / trim the last item until it fits
    while budget_tokens is not None and text_tokens > budget_tokens and items:
        last = items.pop()
        truncated = True
        if isinstance(last, ContextSpan):
            rest = count_tokens(separator.join(i.text for i in items), encoding_name) + (sep if items else 0)
            room = budget_tokens - rest
            if room > 0:
                cut = assemble_context([last], room, encoding_name=encoding_name, separator=separator)
                if cut.spans:
                    piece = cut.spans[0]
                    piece.metadata.update({k: v for k, v in last.metadata.items() if k.startswith("raptor_")})
                    items.append(piece)
        text_tokens = count_tokens(separator.join(i.text for i in items), encoding_name)
    for r, item in enumerate(items, start=1):
        item.rank = r
    return RaptorContext(items, list(hits), budget_tokens, separator, truncated, encoding_name, text_tokens, used)


class RaptorSearcher:
    """The retrieval core over a `RaptorIndex` or a `RaptorTree`
    (the index is recognised by its ``tree``, ``embeddings`` and ``encoding_name``, so
    this module does not import the store that builds on it).

    Args:
        raptor: a ``RaptorIndex`` (its current forest is searched) or a ``RaptorTree``.
        embeddings: query embedding (default: the ``RaptorIndex``'s; required with a
            bare tree). Must be the model that embedded the tree.
        encoding_name: tiktoken encoding of the budget.
        ranking: how the collapsed tree ranks nodes: ``"hybrid"`` (default; BM25 fused with
            cosine, `hybrid_hits`) or ``"dense"`` (cosine alone, RAPTOR's own).
            Traversal always ranks by cosine.
        weights: RRF weights of (BM25, dense) for ``"hybrid"``.

    Raises:
        TypeError: ``raptor`` is neither, or no embeddings are known.
        ValueError: an unknown ``ranking`` or bad ``weights``.
    """

    def __init__(self, raptor: Any, embeddings: Any = None, *, encoding_name: str | None = None,
                 ranking: str = "hybrid", weights: Sequence[float] = (0.5, 0.5)) -> None:
        if ranking not in RANKINGS:
            raise ValueError(f"ranking must be one of {RANKINGS}, got {ranking!r}")
        self.ranking = ranking
        self.weights = check_weights(weights)
        self._keyword: tuple[RaptorTree, BM25Index] | None = None
        if isinstance(raptor, RaptorTree):
            self._tree, self._index = raptor, None
        elif all(hasattr(raptor, name) for name in ("tree", "embeddings", "encoding_name")):  # a RaptorIndex
            self._tree, self._index = None, raptor
        else:
            raise TypeError(f"raptor must be a RaptorIndex or a RaptorTree, got {type(raptor).__name__}")
        if embeddings is None and self._index is not None:
            embeddings = self._index.embeddings
        if embeddings is None or not callable(getattr(embeddings, "embed_query", None)):
            raise TypeError("embeddings (LangChain Embeddings, the model that built the tree) are required with a bare tree")
        self.embeddings = embeddings
        self.encoding_name = encoding_name or (self._index.encoding_name if self._index is not None else DEFAULT_ENCODING)

    @property
    def tree(self) -> RaptorTree:
        return self._tree if self._tree is not None else self._index.tree

    def search(self, query: str, *, mode: str = "collapsed", budget_tokens: int | None = DEFAULT_BUDGET,
               top_k: int = 5, k: int | None = None) -> RaptorContext:
        """The budgeted context for ``query``.

        Args:
            query: the question.
            mode: ``"collapsed"`` (all nodes ranked together) or ``"traverse"``
                (``top_k`` per layer, top-down).
            budget_tokens: tokens of the joined context (default 2000, as in RAPTOR).
            top_k: nodes per layer in traversal.
            k: at most this many nodes.
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        query = check_query(query)
        tree = self.tree
        if not tree.nodes:
            return assemble_hits(tree, [], budget_tokens, k=k, encoding_name=self.encoding_name)
        qvec = self.embeddings.embed_query(query)
        hits = self.collapsed(query, qvec) if mode == "collapsed" else traversal_hits(tree, qvec, top_k=top_k)
        return assemble_hits(tree, hits, budget_tokens, k=k, encoding_name=self.encoding_name)

    def collapsed(self, query: str, query_vector: Any) -> list[NodeHit]:
        """The collapsed tree's ranking of ``query`` by this searcher's ``ranking``."""
        tree = self.tree
        if self.ranking == "dense":
            return collapsed_hits(tree, query_vector)
        return hybrid_hits(tree, query, query_vector, keyword=self._keyword_index(tree), weights=self.weights)

    def _keyword_index(self, tree: RaptorTree) -> BM25Index:
        # one BM25 per tree object: a RaptorIndex that rebuilds its forest gives a new tree
        if self._keyword is None or self._keyword[0] is not tree:
            self._keyword = (tree, node_keyword_index(tree))
        return self._keyword[1]
