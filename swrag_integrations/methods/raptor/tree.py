"""The RAPTOR tree: leaves with exact offsets, summary nodes that know what they summarise.

A `RaptorTree` is a flat list of `RaptorNode` s plus one embedding row
per node. Layer 0 holds the *leaves*: pieces of the sources with exact offsets
(``text == source_text[start:end]``), e.g. a `SlidingWindowIndex`'s
small chunks or FFS/DFS/DDS windows. Every higher layer holds *summaries* of clusters
of the layer below: ``children`` are the summarised nodes, ``leaves`` the leaf nodes
under them (transitively), so a summary can always be cited back into the sources;
an extractive summary also keeps the exact spans of the sentences it consists of.

Persistence without pickle: `RaptorTree.to_bytes` writes one self-describing
blob (magic, JSON header with the nodes, then the embeddings as ``.npy`` bytes,
``allow_pickle=False``), `RaptorTree.save` a folder with ``tree.json`` and
``embeddings.npy``. Both round-trip exactly (float32 embeddings).
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from swrag_integrations.core.paths import private_dir

__all__ = ["Leaf", "RaptorNode", "RaptorTree", "NODE_KINDS", "FORMAT", "interval_union", "check_leaves"]

FORMAT = 1
_MAGIC = b"SWRT1"
NODE_KINDS = ("leaf", "extractive", "llm", "fallback")


@dataclass(frozen=True)
class Leaf:
    """A leaf of the tree: ``text == source_text[start:end]``."""

    source_id: str
    start: int
    end: int
    text: str

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"bad leaf offsets ({self.start}, {self.end}) in source {self.source_id!r}")
        if len(self.text) != self.end - self.start:
            raise ValueError(f"leaf text has {len(self.text)} characters but end - start = {self.end - self.start} "
                             f"(source {self.source_id!r}, {self.start}:{self.end})")


@dataclass
class RaptorNode:
    """One node of the tree.

    Attributes:
        node_id: stable id: ``"<source_id>:<start>-<end>"`` for a leaf, a hash of the
            children's ids for a summary.
        layer: 0 for leaves, 1.. for summaries.
        kind: ``"leaf"``, ``"extractive"`` (sentences of the sources), ``"llm"`` (an
            LLM's summary) or ``"fallback"`` (extractive because the LLM failed).
        text: the node's text (a leaf's exact source text; a summary's text).
        children: indices (in the tree) of the summarised nodes.
        leaves: indices of the leaf nodes under this node (itself for a leaf).
        spans: exact ``(source_id, start, end)`` pieces of the sources the text is made
            of (a leaf: its own span; an extractive summary: its sentences; an LLM
            summary: none).
        span_texts: the text of each span (so the tree needs no source store to be read).
    """

    node_id: str
    layer: int
    kind: str
    text: str
    children: tuple[int, ...] = ()
    leaves: tuple[int, ...] = ()
    spans: tuple[tuple[str, int, int], ...] = ()
    span_texts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in NODE_KINDS:
            raise ValueError(f"kind must be one of {NODE_KINDS}, got {self.kind!r}")
        if len(self.spans) != len(self.span_texts):
            raise ValueError(f"node {self.node_id!r}: {len(self.spans)} spans but {len(self.span_texts)} span texts")
        for (sid, a, b), t in zip(self.spans, self.span_texts):
            if len(t) != b - a:
                raise ValueError(f"node {self.node_id!r}: span text of {sid}:{a}-{b} has {len(t)} characters")

    @property
    def is_leaf(self) -> bool:
        return self.layer == 0

    @property
    def exact(self) -> bool:
        """The node's text is made of exact source spans (leaf or extractive summary)."""
        return bool(self.spans)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.node_id, "layer": self.layer, "kind": self.kind, "text": self.text,
                "children": list(self.children), "leaves": list(self.leaves),
                "spans": [list(s) for s in self.spans], "span_texts": list(self.span_texts)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RaptorNode":
        return cls(str(data["id"]), int(data["layer"]), str(data["kind"]), str(data["text"]),
                   tuple(int(i) for i in data.get("children", ())), tuple(int(i) for i in data.get("leaves", ())),
                   tuple((str(s), int(a), int(b)) for s, a, b in data.get("spans", ())),
                   tuple(str(t) for t in data.get("span_texts", ())))

    @classmethod
    def from_leaf(cls, leaf: Leaf, index: int) -> "RaptorNode":
        return cls(f"{leaf.source_id}:{leaf.start}-{leaf.end}", 0, "leaf", leaf.text, (), (index,),
                   ((leaf.source_id, leaf.start, leaf.end),), (leaf.text,))


@dataclass
class RaptorTree:
    """Nodes of all layers and their embeddings (row ``i`` belongs to ``nodes[i]``).

    Attributes:
        nodes: leaves first (layer 0), then each layer in order.
        embeddings: float32 array ``(len(nodes), dim)``.
        meta: JSON-able facts about the build (configuration, report, notes).
    """

    nodes: list[RaptorNode]
    embeddings: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        emb = np.asarray(self.embeddings, dtype=np.float32)
        if emb.ndim != 2 and not (emb.size == 0 and not self.nodes):
            raise ValueError(f"embeddings must be 2-d, got shape {emb.shape}")
        if emb.size == 0 and not self.nodes:
            emb = emb.reshape(0, emb.shape[-1] if emb.ndim == 2 else 0)
        if emb.shape[0] != len(self.nodes):
            raise ValueError(f"{len(self.nodes)} nodes but {emb.shape[0]} embedding rows")
        n = len(self.nodes)
        for i, node in enumerate(self.nodes):
            bad = [j for j in (*node.children, *node.leaves) if not 0 <= j < n]
            if bad:
                raise ValueError(f"node {i} ({node.node_id!r}) points at missing nodes {bad[:5]}")
        self.embeddings = emb
        self._unit: np.ndarray | None = None
        self._parents: list[list[int]] | None = None

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def n_layers(self) -> int:
        """Number of layers (1 = leaves only)."""
        return 1 + max((n.layer for n in self.nodes), default=-1) if self.nodes else 0

    def layer(self, k: int) -> list[int]:
        """Indices of the nodes of layer ``k``."""
        return [i for i, n in enumerate(self.nodes) if n.layer == k]

    def layer_sizes(self) -> list[int]:
        sizes = [0] * self.n_layers
        for n in self.nodes:
            sizes[n.layer] += 1
        return sizes

    @property
    def source_ids(self) -> list[str]:
        return sorted({s for n in self.nodes if n.is_leaf for s, _, _ in n.spans})

    def parents(self, i: int) -> list[int]:
        """Indices of the summaries that have node ``i`` as a child."""
        if self._parents is None:
            parents: list[list[int]] = [[] for _ in self.nodes]
            for j, node in enumerate(self.nodes):
                for c in node.children:
                    parents[c].append(j)
            self._parents = parents
        return self._parents[i]

    def leaf_spans(self, i: int) -> list[tuple[str, int, int]]:
        """Exact ``(source_id, start, end)`` of the leaves under node ``i``, joined where
        they overlap or touch (document order)."""
        return interval_union(self.nodes[j].spans[0] for j in self.nodes[i].leaves)

    @property
    def unit_embeddings(self) -> np.ndarray:
        """Embeddings scaled to unit length (cosine similarity = dot product)."""
        if self._unit is None:
            emb = self.embeddings.astype(np.float32)
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            self._unit = emb / norms
        return self._unit

    def describe(self) -> list[dict[str, Any]]:
        """One row per layer: nodes, kinds, mean text length (for reports and notebooks)."""
        rows = []
        for k in range(self.n_layers):
            idx = self.layer(k)
            kinds: dict[str, int] = {}
            for i in idx:
                kinds[self.nodes[i].kind] = kinds.get(self.nodes[i].kind, 0) + 1
            rows.append({"layer": k, "nodes": len(idx), "kinds": kinds,
                         "mean_chars": round(float(np.mean([len(self.nodes[i].text) for i in idx])), 1) if idx else 0.0,
                         "mean_children": round(float(np.mean([len(self.nodes[i].children) for i in idx])), 2)
                         if idx and k else 0.0})
        return rows

    # ---------------------------------------------------------------- building
    @classmethod
    def merge(cls, trees: Iterable["RaptorTree"], meta: dict[str, Any] | None = None) -> "RaptorTree":
        """One tree holding the nodes of several (a forest, e.g. one tree per document):
        indices are shifted; nothing else changes."""
        nodes: list[RaptorNode] = []
        arrays = []
        dim = None
        for tree in trees:
            if not tree.nodes:
                continue
            if dim is not None and tree.embeddings.shape[1] != dim:
                raise ValueError(f"cannot merge trees of embedding sizes {dim} and {tree.embeddings.shape[1]}")
            dim = tree.embeddings.shape[1]
            off = len(nodes)
            for n in tree.nodes:
                nodes.append(RaptorNode(n.node_id, n.layer, n.kind, n.text, tuple(c + off for c in n.children),
                                        tuple(c + off for c in n.leaves), n.spans, n.span_texts))
            arrays.append(tree.embeddings)
        emb = np.concatenate(arrays, axis=0) if arrays else np.zeros((0, 0), dtype=np.float32)
        return cls(nodes, emb, dict(meta or {}))

    # ------------------------------------------------------------- persistence
    def header(self) -> dict[str, Any]:
        return {"format": FORMAT, "meta": self.meta, "dim": int(self.embeddings.shape[1]) if self.embeddings.ndim == 2 else 0,
                "nodes": [n.to_json() for n in self.nodes]}

    def to_bytes(self) -> bytes:
        """One blob: magic, JSON header, ``.npy`` float32 embeddings (no pickle)."""
        head = json.dumps(self.header(), ensure_ascii=False).encode("utf-8")
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(self.embeddings, dtype="<f4"), allow_pickle=False)
        return b"".join((_MAGIC, struct.pack("<I", len(head)), head, buf.getvalue()))

    @classmethod
    def from_bytes(cls, raw: bytes) -> "RaptorTree":
        if raw[:5] != _MAGIC:
            raise ValueError("not a RAPTOR tree blob (bad magic)")
        (n,) = struct.unpack("<I", raw[5:9])
        head = json.loads(raw[9:9 + n].decode("utf-8"))
        emb = np.load(io.BytesIO(raw[9 + n:]), allow_pickle=False)
        return cls._from_header(head, emb)

    @classmethod
    def _from_header(cls, head: dict[str, Any], emb: np.ndarray) -> "RaptorTree":
        if int(head.get("format", 0)) != FORMAT:
            raise ValueError(f"RAPTOR tree format {head.get('format')} is not supported (expected {FORMAT})")
        nodes = [RaptorNode.from_json(d) for d in head["nodes"]]
        if not nodes:
            emb = np.zeros((0, int(head.get("dim", 0))), dtype=np.float32)
        return cls(nodes, emb, head.get("meta") or {})

    def save(self, directory: str | Path) -> Path:
        """Write ``tree.json`` and ``embeddings.npy`` into ``directory`` (created)."""
        path = Path(directory)
        private_dir(path)
        (path / "tree.json").write_text(json.dumps(self.header(), ensure_ascii=False), encoding="utf-8")
        np.save(path / "embeddings.npy", np.ascontiguousarray(self.embeddings, dtype="<f4"), allow_pickle=False)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> "RaptorTree":
        path = Path(directory)
        if not (path / "tree.json").is_file():
            raise FileNotFoundError(f"no RAPTOR tree in {path} (tree.json missing)")
        head = json.loads((path / "tree.json").read_text(encoding="utf-8"))
        emb = np.load(path / "embeddings.npy", allow_pickle=False)
        return cls._from_header(head, emb)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaptorTree):
            return NotImplemented
        return (self.nodes == other.nodes and self.meta == other.meta
                and self.embeddings.shape == other.embeddings.shape
                and bool(np.array_equal(self.embeddings, other.embeddings)))


def interval_union(spans: Iterable[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The union of ``(source_id, start, end)`` intervals, per source, sorted (for citing
    what a summary covers; contexts are merged by `assemble_context`)."""
    merged: list[list[Any]] = []
    for sid, a, b in sorted(spans):
        if merged and merged[-1][0] == sid and a <= merged[-1][2]:
            merged[-1][2] = max(merged[-1][2], b)
        else:
            merged.append([sid, a, b])
    return [(s, a, b) for s, a, b in merged]


def check_leaves(leaves: Sequence[Leaf]) -> list[Leaf]:
    """Leaves as a list, each checked; duplicates (same source and span) removed."""
    seen: set[tuple[str, int, int]] = set()
    out = []
    for leaf in leaves:
        if not isinstance(leaf, Leaf):
            raise TypeError(f"leaves must be Leaf objects, got {type(leaf).__name__}")
        key = (leaf.source_id, leaf.start, leaf.end)
        if key not in seen and leaf.text.strip():
            seen.add(key)
            out.append(leaf)
    return out
