"""Build a RAPTOR tree: embed leaves, cluster, summarise, re-embed, repeat.

`TreeBuilder` follows the RAPTOR recipe (arXiv:2401.18059): the nodes of a
layer are soft-clustered (`cluster_embeddings`), a cluster whose
members hold more than ``max_cluster_tokens`` tokens (RAPTOR: 3500) is clustered
again (and, if clustering cannot split it, cut in two in node order), every cluster of
two or more nodes is summarised into a node of the next layer, the summaries are
embedded, and this repeats until a layer has at most ``min_nodes`` nodes (RAPTOR:
``dim + 1`` = 11, below which its UMAP/GMM step is not run), no cluster of two nodes
is found, the layer does not shrink, or ``max_layers`` is reached.

Bad input never crashes a build: no leaves gives an empty tree, too few leaves a tree
of leaves only, both with a note in `BuildReport` saying why; a failing LLM
falls back per cluster (see `summarise`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from swrag_integrations.engine.assemble import count_tokens
from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.methods.raptor.clustering import ClusterConfig, cluster_embeddings
from swrag_integrations.methods.raptor.summarise import Cluster, ExtractiveSummarizer, SummaryContext, SummaryStats
from swrag_integrations.methods.raptor.tree import Leaf, RaptorNode, RaptorTree, check_leaves, interval_union

__all__ = ["TreeConfig", "BuildReport", "TreeBuilder", "build_tree"]


@dataclass(frozen=True)
class TreeConfig:
    """How a tree is built.

    Args:
        cluster: the clustering (`ClusterConfig`).
        max_layers: most summary layers (RAPTOR: 5).
        min_nodes: a layer with at most this many nodes is not clustered (default
            ``cluster.dim + 1``, as in RAPTOR).
        max_cluster_tokens: clusters whose members hold more tokens are split
            (RAPTOR: 3500).
        embed_batch_size: texts per embedding call.
    """

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    max_layers: int = 5
    min_nodes: int | None = None
    max_cluster_tokens: int = 3500
    embed_batch_size: int = 64

    def __post_init__(self) -> None:
        for name in ("max_layers", "max_cluster_tokens", "embed_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.min_nodes is not None and (isinstance(self.min_nodes, bool) or not isinstance(self.min_nodes, int)
                                           or self.min_nodes < 1):
            raise ValueError(f"min_nodes must be a positive int or None, got {self.min_nodes!r}")

    @property
    def stop_at(self) -> int:
        return self.min_nodes if self.min_nodes is not None else self.cluster.dim + 1

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict (the clustering's included, ``min_nodes`` resolved)."""
        out = asdict(self)
        out["cluster"] = self.cluster.to_json()
        out["min_nodes"] = self.stop_at
        return out


@dataclass
class BuildReport:
    """What building one or more trees did (added up over trees)."""

    trees: int = 0
    reused: int = 0  # trees loaded unchanged (incremental builds)
    removed: int = 0  # trees of sources that are gone
    sources: int = 0
    leaves: int = 0
    nodes: int = 0
    layer_sizes: list[int] = field(default_factory=list)
    summaries: SummaryStats = field(default_factory=SummaryStats)
    embedded_texts: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    cluster_seconds: float = 0.0
    summary_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def llm_calls_per_source(self) -> float:
        """LLM calls of this build per built source (cached summaries cost none)."""
        return self.summaries.llm_calls / self.sources if self.sources else 0.0

    def add_layers(self, sizes: Sequence[int]) -> None:
        for k, n in enumerate(sizes):
            if k < len(self.layer_sizes):
                self.layer_sizes[k] += n
            else:
                self.layer_sizes.append(n)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "summaries"}
        out["summaries"] = self.summaries.as_dict()
        out["llm_calls_per_source"] = self.llm_calls_per_source
        return out

    def summary(self) -> str:
        s = self.summaries
        return (f"{self.trees} tree(s) built, {self.reused} unchanged, {self.removed} removed; {self.sources} "
                f"source(s), {self.leaves} leaves, layers {self.layer_sizes}; summaries {s.summaries} "
                f"(extractive {s.extractive}, llm {s.llm}, fallback {s.fallback}; llm calls {s.llm_calls}, cached "
                f"{s.cached}, failed {s.failed}, empty {s.empty}); {self.seconds:.1f} s")


def _progress(iterable: Any, show: bool, **kwargs: Any) -> Any:
    if not show:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)


def _sparse_sources(leaves: Sequence[Leaf]) -> dict[str, str]:
    """Source texts rebuilt from leaves alone (characters no leaf covers become spaces),
    exact wherever a leaf is."""
    size: dict[str, int] = {}
    for leaf in leaves:
        size[leaf.source_id] = max(size.get(leaf.source_id, 0), leaf.end)
    chars = {sid: [" "] * n for sid, n in size.items()}
    for leaf in leaves:
        chars[leaf.source_id][leaf.start:leaf.end] = list(leaf.text)
    return {sid: "".join(c) for sid, c in chars.items()}


class TreeBuilder:
    """Builds `RaptorTree` s.

    Args:
        embeddings: LangChain ``Embeddings`` for leaves, summaries and (extractive)
            sentences; the retrievers must embed queries with the same model.
        summarizer: `ExtractiveSummarizer` (default) or
            `LLMSummarizer` (or anything with
            ``summarize(cluster, ctx) -> Summary``).
        config: `TreeConfig`.
        show_progress: tqdm bars for embedding and summarising.
        encoding_name: tiktoken encoding for token counts.
    """

    def __init__(self, embeddings: Any, summarizer: Any = None, config: TreeConfig | None = None, *,
                 show_progress: bool = True, encoding_name: str = DEFAULT_ENCODING) -> None:
        if not callable(getattr(embeddings, "embed_documents", None)):
            raise TypeError(f"embeddings must be LangChain Embeddings, got {type(embeddings).__name__}")
        self.embeddings = embeddings
        self.summarizer = summarizer if summarizer is not None else ExtractiveSummarizer(encoding_name=encoding_name)
        if not callable(getattr(self.summarizer, "summarize", None)):
            raise TypeError(f"summarizer needs summarize(cluster, ctx), got {type(self.summarizer).__name__}")
        self.config = config or TreeConfig()
        self.show_progress = show_progress
        self.encoding_name = encoding_name

    @property
    def identity(self) -> dict[str, Any]:
        """What determines a tree besides its leaves (stored in tree meta, compared on reuse)."""
        return {"tree": self.config.to_json(), "summarizer": getattr(self.summarizer, "identity",
                                                                      type(self.summarizer).__name__)}

    # ---------------------------------------------------------------- embedding
    def _embed(self, texts: list[str], report: BuildReport, desc: str) -> np.ndarray:
        t0 = time.perf_counter()
        b = self.config.embed_batch_size
        rows: list[Any] = []
        batches = range(0, len(texts), b)
        show = self.show_progress and len(texts) > b
        for i in _progress(batches, show, desc=desc, unit="batch", leave=False):
            got = self.embeddings.embed_documents(texts[i:i + b])
            if len(got) != len(texts[i:i + b]):
                raise ValueError(f"the embedding returned {len(got)} vectors for {len(texts[i:i + b])} texts")
            rows.extend(got)
        report.embedded_texts += len(texts)
        report.embed_seconds += time.perf_counter() - t0
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

    # ---------------------------------------------------------------- clustering
    def _split_long(self, cluster: list[int], vecs: np.ndarray, tokens: list[int], depth: int = 0) -> list[list[int]]:
        if len(cluster) < 2 or sum(tokens[i] for i in cluster) <= self.config.max_cluster_tokens:
            return [cluster]
        parts: list[list[int]] = []
        if depth < 6:
            sub = cluster_embeddings(vecs[cluster], self.config.cluster)
            parts = [[cluster[i] for i in c] for c in sub]
        if not parts or any(sorted(p) == sorted(cluster) for p in parts):
            half = len(cluster) // 2  # clustering cannot split it: cut in node order
            parts = [cluster[:half], cluster[half:]]
        out: list[list[int]] = []
        for p in parts:
            out.extend(self._split_long(p, vecs, tokens, depth + 1))
        return out

    # ------------------------------------------------------------------- build
    def build(self, leaves: Sequence[Leaf], sources: Mapping[str, str] | Callable[[str], str] | None = None, *,
              report: BuildReport | None = None, label: str = "") -> RaptorTree:
        """Build one tree over ``leaves``.

        Args:
            leaves: the leaves (duplicates and blank ones are dropped).
            sources: the source texts (mapping or ``source_id -> text``) for extractive
                summaries; default: rebuilt from the leaves (exact wherever a leaf is).
            report: a `BuildReport` to add to (default: a new one, in the
                tree's ``meta["report"]``).
            label: shown in progress bars and notes (e.g. the source id).
        """
        started = time.perf_counter()
        report = report if report is not None else BuildReport()
        own = BuildReport()
        leaves = check_leaves(leaves)
        name = label or (leaves[0].source_id if leaves and len({lf.source_id for lf in leaves}) == 1 else "corpus")
        nodes = [RaptorNode.from_leaf(leaf, i) for i, leaf in enumerate(leaves)]
        meta: dict[str, Any] = {"builder": self.identity, "label": name, "notes": []}
        if not leaves:
            meta["notes"].append(f"{name}: no leaves (empty or blank text): empty tree")
            return self._finish(RaptorTree([], np.zeros((0, 0), dtype=np.float32), meta), own, report, started)
        if callable(sources):
            lookup = sources
        else:
            texts = dict(sources) if sources is not None else _sparse_sources(leaves)
            lookup = texts.__getitem__
        vecs = self._embed([n.text for n in nodes], own, f"embed leaves {name}"[:40])
        ctx = SummaryContext(lambda ts: self._embed(list(ts), own, "embed sentences"), lookup,
                             encoding_name=self.encoding_name)
        tokens = [count_tokens(n.text, self.encoding_name) for n in nodes]
        current = list(range(len(nodes)))
        stop = self.config.stop_at
        for layer in range(1, self.config.max_layers + 1):
            if len(current) <= stop:
                meta["notes"].append(f"{name}: layer {layer - 1} has {len(current)} node(s), at most {stop}: "
                                     f"not clustered" + (" (too small for a summary layer: leaves only)" if layer == 1 else ""))
                break
            t0 = time.perf_counter()
            found = cluster_embeddings(vecs[current], self.config.cluster)
            clusters: list[list[int]] = []
            for c in found:
                clusters.extend(self._split_long([current[i] for i in c], vecs, tokens))
            clusters = [c for c in clusters if len(c) >= 2]
            own.cluster_seconds += time.perf_counter() - t0
            if not clusters:
                meta["notes"].append(f"{name}: layer {layer - 1}: no cluster of two or more nodes; stopped")
                break
            t0 = time.perf_counter()
            new_nodes: list[RaptorNode] = []
            for c in _progress(clusters, self.show_progress, desc=f"summaries L{layer} {name}"[:40], leave=False):
                members = [nodes[i] for i in c]
                leaf_set = sorted({j for i in c for j in nodes[i].leaves})
                cluster = Cluster(members, vecs[c], interval_union(nodes[j].spans[0] for j in leaf_set), layer)
                try:
                    summary = self.summarizer.summarize(cluster, ctx)
                except Exception as exc:  # noqa: BLE001 - one cluster never stops a build
                    own.summaries.failed += 1
                    own.summaries.errors.append(f"layer {layer}: {type(exc).__name__}: {exc}"[:300])
                    continue
                own.summaries.add(summary)
                if not summary.text.strip():
                    continue
                digest = hashlib.sha1("|".join(nodes[i].node_id for i in c).encode("utf-8")).hexdigest()[:16]
                new_nodes.append(RaptorNode(f"raptor:L{layer}:{digest}", layer, summary.kind, summary.text, tuple(c),
                                            tuple(leaf_set), summary.spans, summary.span_texts))
            own.summary_seconds += time.perf_counter() - t0
            if not new_nodes:
                meta["notes"].append(f"{name}: layer {layer}: no summary could be made; stopped")
                break
            new_vecs = self._embed([n.text for n in new_nodes], own, f"embed L{layer} {name}"[:40])
            first = len(nodes)
            nodes.extend(new_nodes)
            tokens.extend(count_tokens(n.text, self.encoding_name) for n in new_nodes)
            vecs = np.concatenate([vecs, new_vecs], axis=0)
            previous, current = current, list(range(first, len(nodes)))
            if len(current) >= len(previous):
                meta["notes"].append(f"{name}: layer {layer} did not shrink ({len(previous)} -> {len(current)}); stopped")
                break
        else:
            meta["notes"].append(f"{name}: max_layers={self.config.max_layers} reached")
        return self._finish(RaptorTree(nodes, vecs, meta), own, report, started)

    def _finish(self, tree: RaptorTree, own: BuildReport, report: BuildReport, started: float) -> RaptorTree:
        own.trees = 1
        own.sources = len(tree.source_ids)
        own.leaves = len(tree.layer(0)) if tree.nodes else 0
        own.nodes = len(tree)
        own.add_layers(tree.layer_sizes())
        own.notes.extend(tree.meta.get("notes", []))
        own.seconds = time.perf_counter() - started
        tree.meta["report"] = own.as_dict()
        _add(report, own)
        return tree


def _add(total: BuildReport, part: BuildReport) -> None:
    """Add ``part``'s counts to ``total``."""
    for name in ("trees", "reused", "removed", "sources", "leaves", "nodes", "embedded_texts", "seconds",
                 "embed_seconds", "cluster_seconds", "summary_seconds"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.add_layers(part.layer_sizes)
    total.notes.extend(part.notes)
    s, p = total.summaries, part.summaries
    for name in ("summaries", "extractive", "llm", "llm_calls", "cached", "failed", "empty", "fallback"):
        setattr(s, name, getattr(s, name) + getattr(p, name))
    s.errors.extend(p.errors[: max(0, 20 - len(s.errors))])


def build_tree(leaves: Sequence[Leaf], embeddings: Any, summarizer: Any = None, *,
               sources: Mapping[str, str] | Callable[[str], str] | None = None, config: TreeConfig | None = None,
               show_progress: bool = True) -> RaptorTree:
    """One tree over ``leaves`` (see `TreeBuilder`); the report is in ``tree.meta["report"]``.

    Args:
        leaves: The tree's leaves (chunks or windows with exact offsets).
        embeddings: A LangChain ``Embeddings`` for leaves and summaries.
        summarizer: The cluster summariser; ``None`` for `ExtractiveSummarizer`.
        sources: ``source_id -> text`` (a mapping or a function) for the leaves' sources.
        config: The `TreeConfig`; ``None`` for the defaults.
        show_progress: Show a progress bar per layer.
    """
    return TreeBuilder(embeddings, summarizer, config, show_progress=show_progress).build(leaves, sources)
