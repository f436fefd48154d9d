"""One passage-phrase graph over an index's chunks or windows.

Nodes are *phrases* (normalised entity names, `normalize_phrase`)
and *passages* (`Passage`: a chunk range of one source with its exact
character offsets, ``source_text[start:end]``). Edges:

* passage -- phrase (weight 1) for every phrase a passage mentions;
* phrase -- phrase for every extracted triple (weight = how often it was extracted;
  the relation texts are kept for reports);
* phrase -- phrase *synonym* edges between phrases whose embeddings are close
  (cosine >= ``synonym_threshold``, each phrase's ``synonym_top_k`` nearest), from the
  index's embedding (the bundled MiniLM by default). MiniLM is an English model: its
  vectors of short Chinese phrases are close to each other whatever they mean, so
  phrases with Han characters get no synonym edges unless ``cjk_synonyms=True``.

The graph is kept as plain tables (passages, mentions, triples, phrase vectors) and
handed to ``igraph`` for the algorithms (`PassageGraph.personalized_pagerank`
uses igraph's PRPACK solver). Adding or replacing passages only touches their rows;
synonym edges are computed for new phrases only. It is stored without pickle:
`PassageGraph.save` writes ``graph.json`` + ``phrase_vectors.npy``;
`PassageGraph.to_bytes` one checksummed blob (JSON + ``.npy`` in an ``.npz``)
for the index's source store (`save_graph` / `load_graph`).

`build_graph` brings a graph up to date with a
`SlidingWindowIndex`: new and changed sources
are extracted, vanished ones removed, unchanged ones left alone.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from swrag_integrations.core.lang import contains_cjk
from swrag_integrations.engine.records import END, START, WIN_HI, WIN_LO
from swrag_integrations.methods.graph.extraction import Extraction, normalize_phrase
from swrag_integrations.core.paths import private_dir

__all__ = ["Passage", "PassageGraph", "BuildReport", "build_graph", "passages_from_index", "save_graph",
           "load_graph", "UNITS", "GRAPH_BLOB"]

UNITS = ("chunks", "medium", "windows", "sources")
GRAPH_BLOB = "graph"
_MAGIC = b"SWGR1"
FORMAT = 1


class Passage(NamedTuple):
    """A chunk range ``lower..upper`` (inclusive) of a source; ``text[start:end]`` is its text."""

    source_id: str
    lower: int
    upper: int
    start: int
    end: int

    @property
    def pid(self) -> str:
        return f"{self.source_id}:{self.lower}-{self.upper}"


def _ig():
    try:
        import igraph
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("graph retrieval needs python-igraph: pip install 'igraph>=1.0' 'leidenalg>=0.12' "
                          "(the package's 'graph' extra)") from exc
    return igraph


def passages_from_index(index: Any, unit: str = "medium", source_ids: Sequence[str] | None = None,
                        records: dict | None = None) -> list[tuple[Passage, str]]:
    """The passages of an index's complete sources, with their exact texts.

    Args:
        index: a `SlidingWindowIndex`.
        unit: ``"chunks"`` (each small chunk), ``"medium"`` (the index's medium
            chunks: ``medium_size`` small chunks, tiling the source; the default),
            ``"windows"`` (the index's windows, which overlap) or ``"sources"`` (a
            whole source per passage).
        source_ids: only these sources (default all complete ones).
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
    sids = list(source_ids) if source_ids is not None else index.source_ids()
    records = records if records is not None else index.store.get_many(sids)
    m = index.config.medium_size
    out: list[tuple[Passage, str]] = []
    for sid in sids:
        rec = records.get(sid)
        if rec is None or not rec.complete or not rec.n_chunks:
            continue
        a, n = rec.arrays, rec.n_chunks
        if unit == "chunks":
            ranges: Iterable[tuple[int, int]] = ((i, i) for i in range(n))
        elif unit == "medium":
            ranges = ((lo, min(lo + m, n) - 1) for lo in range(0, n, m))
        elif unit == "windows":
            ranges = sorted({(int(lo), int(hi)) for lo, hi in zip(rec.windows[0].tolist(), rec.windows[1].tolist())})
        else:
            ranges = [(0, n - 1)]
        for lo, hi in ranges:
            start, end = int(a[START, lo]), int(a[END, hi])
            text = rec.text[start:end]
            if text.strip():
                out.append((Passage(sid, int(lo), int(hi), start, end), text))
    return out


class PassageGraph:
    """The passage-phrase graph (see the module docstring).

    Args:
        synonym_threshold: cosine similarity from which two phrases are synonyms
            (HippoRAG uses 0.8).
        synonym_top_k: nearest phrases considered per phrase.
        cjk_synonyms: also link phrases with Han characters (only with an embedding
            that reads Chinese).
    """

    def __init__(self, *, synonym_threshold: float = 0.8, synonym_top_k: int = 10, cjk_synonyms: bool = False) -> None:
        if not 0.0 < float(synonym_threshold) <= 1.0:
            raise ValueError(f"synonym_threshold must be in (0, 1], got {synonym_threshold!r}")
        if isinstance(synonym_top_k, bool) or not isinstance(synonym_top_k, int) or synonym_top_k < 0:
            raise ValueError(f"synonym_top_k must be an int >= 0, got {synonym_top_k!r}")
        self.synonym_threshold = float(synonym_threshold)
        self.synonym_top_k = synonym_top_k
        self.cjk_synonyms = bool(cjk_synonyms)
        self.passages: dict[str, Passage] = {}
        self.mentions: dict[str, dict[str, int]] = {}  # pid -> {phrase key: mentions}
        self.triples: dict[str, list[tuple[str, str, str]]] = {}  # pid -> [(subject key, relation, object key)]
        self.names: dict[str, str] = {}  # phrase key -> first spelling seen
        self.source_hashes: dict[str, str] = {}  # source id -> content hash the passages were made from
        self.synonyms: dict[tuple[str, str], float] = {}  # (a, b) with a < b -> cosine
        self.meta: dict[str, Any] = {}  # extractor, unit, embedding (recorded by build_graph)
        self._vec_keys: list[str] = []
        self._vec_row: dict[str, int] = {}
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._derived: dict[str, Any] = {}

    # ------------------------------------------------------------ writing
    def _changed(self) -> None:
        self._derived = {}

    def add(self, passage: Passage, extraction: Extraction) -> None:
        """Add or replace a passage and its phrases/triples."""
        if not isinstance(passage, Passage):
            raise TypeError(f"passage must be a Passage, got {type(passage).__name__}")
        pid = passage.pid
        counts: dict[str, int] = {}
        for name in extraction.phrases():
            key = normalize_phrase(name)
            counts[key] = counts.get(key, 0) + 1
            self.names.setdefault(key, name.strip())
        triples = []
        for s, r, o in extraction.triples:
            sk, ok = normalize_phrase(s), normalize_phrase(o)
            if sk and ok and sk != ok:
                triples.append((sk, " ".join(str(r).split())[:120], ok))
        self.passages[pid] = passage
        self.mentions[pid] = counts
        self.triples[pid] = triples
        self._changed()

    def remove_sources(self, source_ids: Iterable[str]) -> int:
        """Remove every passage of these sources; returns how many passages went."""
        sids = set(source_ids)
        gone = [pid for pid, p in self.passages.items() if p.source_id in sids]
        for pid in gone:
            del self.passages[pid], self.mentions[pid], self.triples[pid]
        for sid in sids:
            self.source_hashes.pop(sid, None)
        if gone:
            self._prune()
            self._changed()
        return len(gone)

    def _prune(self) -> None:
        live = self.live_phrases()
        for key in [k for k in self.names if k not in live]:
            del self.names[key]
        self.synonyms = {pair: s for pair, s in self.synonyms.items() if pair[0] in live and pair[1] in live}
        keep = [k for k in self._vec_keys if k in live]
        if len(keep) != len(self._vec_keys):  # a phrase that comes back is embedded and linked again
            self._vectors = self._vectors_of(keep) if keep else np.zeros((0, 0), dtype=np.float32)
            self._vec_keys = keep
            self._vec_row = {k: i for i, k in enumerate(keep)}

    def live_phrases(self) -> set[str]:
        """Phrases mentioned by at least one passage."""
        live: set[str] = set()
        for counts in self.mentions.values():
            live.update(counts)
        return live

    # ------------------------------------------------------------ synonyms
    def _wants_vector(self, key: str) -> bool:
        return self.cjk_synonyms or not contains_cjk(key)

    def link_synonyms(self, embeddings: Any, *, batch_size: int = 256, show_progress: bool = False) -> int:
        """Embed phrases that have no vector yet and add their synonym edges; returns
        the number of new edges. ``embeddings``: LangChain ``Embeddings``."""
        from tqdm.auto import tqdm

        live = sorted(k for k in self.live_phrases() if self._wants_vector(k))
        new = [k for k in live if k not in self._vec_row]
        if not new or self.synonym_top_k == 0:
            return 0
        vecs = []
        for b in tqdm(range(0, len(new), batch_size), disable=not show_progress, desc="phrase vectors", unit="batch"):
            vecs.extend(embeddings.embed_documents([self.names.get(k, k) for k in new[b:b + batch_size]]))
        mat = np.asarray(vecs, dtype=np.float32)
        mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
        if self._vectors.size and self._vectors.shape[1] != mat.shape[1]:
            raise ValueError(f"the graph's phrase vectors have {self._vectors.shape[1]} dimensions, the embedding "
                             f"gives {mat.shape[1]}: use the embedding the graph was built with")
        start = len(self._vec_keys)
        self._vectors = mat if not self._vectors.size else np.vstack([self._vectors, mat])
        for i, key in enumerate(new):
            self._vec_row[key] = start + i
            self._vec_keys.append(key)
        live_rows = np.array([self._vec_row[k] for k in live], dtype=np.int64)
        live_mat = self._vectors[live_rows]
        added = 0
        k = min(self.synonym_top_k + 1, len(live))
        for b in range(0, len(new), 1024):
            block = mat[b:b + 1024]
            sims = block @ live_mat.T
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < len(live) else np.tile(np.arange(len(live)), (len(block), 1))
            for row, cols in enumerate(top):
                a = new[b + row]
                for col in cols.tolist():
                    sim = float(sims[row, col])
                    other = live[col]
                    if other == a or sim < self.synonym_threshold:
                        continue
                    pair = (a, other) if a < other else (other, a)
                    if pair not in self.synonyms:
                        self.synonyms[pair] = round(sim, 6)
                        added += 1
        self._changed()
        return added

    def phrase_vectors(self, keys: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """``(keys that have vectors, their unit vectors)``."""
        have = [k for k in keys if k in self._vec_row]
        if not have:
            return [], np.zeros((0, self._vectors.shape[1] if self._vectors.size else 0), dtype=np.float32)
        return have, self._vectors[[self._vec_row[k] for k in have]]

    # ------------------------------------------------------------ reading
    def phrase_passages(self) -> dict[str, list[str]]:
        """``phrase key -> passage ids`` mentioning it (cached until the next change)."""
        got = self._derived.get("phrase_passages")
        if got is None:
            got = {}
            for pid, counts in self.mentions.items():
                for key in counts:
                    got.setdefault(key, []).append(pid)
            self._derived["phrase_passages"] = got
        return got

    def relation_edges(self) -> dict[tuple[str, str], list[str]]:
        """``(a, b)`` (sorted) -> relation texts of the triples between them."""
        got = self._derived.get("relations")
        if got is None:
            got = {}
            for triples in self.triples.values():
                for s, r, o in triples:
                    pair = (s, o) if s < o else (o, s)
                    got.setdefault(pair, []).append(r)
            self._derived["relations"] = got
        return got

    def phrase_edges(self, *, co_mention: bool = True, max_phrases_per_passage: int = 40) -> dict[tuple[str, str], float]:
        """Weighted phrase-phrase edges: triples (count), synonyms (cosine) and, with
        ``co_mention``, one unit per passage that mentions both (passages with more
        than ``max_phrases_per_passage`` phrases count their first ones only). Cached
        until the next change: do not modify the returned dict."""
        cache_key = ("phrase_edges", co_mention, max_phrases_per_passage)
        cached = self._derived.get(cache_key)
        if cached is not None:
            return cached
        weights: dict[tuple[str, str], float] = {}
        for pair, rels in self.relation_edges().items():
            weights[pair] = weights.get(pair, 0.0) + len(rels)
        for pair, sim in self.synonyms.items():
            weights[pair] = weights.get(pair, 0.0) + sim
        if co_mention:
            for counts in self.mentions.values():
                keys = sorted(list(counts)[:max_phrases_per_passage])
                for i, a in enumerate(keys):
                    for b in keys[i + 1:]:
                        weights[(a, b)] = weights.get((a, b), 0.0) + 1.0
        self._derived[cache_key] = weights
        return weights

    def nodes(self) -> tuple[list[str], list[str]]:
        """``(phrase keys, passage ids)`` in the graph's node order (phrases first)."""
        got = self._derived.get("nodes")
        if got is None:
            got = (sorted(self.live_phrases()), list(self.passages))
            self._derived["nodes"] = got
        return got

    def igraph(self) -> Any:
        """The graph as an undirected, weighted ``igraph.Graph`` (vertex attributes
        ``name`` and ``kind`` = ``"phrase"``/``"passage"``; parallel edges summed)."""
        got = self._derived.get("igraph")
        if got is not None:
            return got
        ig = _ig()
        phrases, pids = self.nodes()
        index = {("phrase", k): i for i, k in enumerate(phrases)}
        base = len(phrases)
        index.update({("passage", p): base + i for i, p in enumerate(pids)})
        edges: dict[tuple[int, int], float] = {}

        def add(a: int, b: int, w: float) -> None:
            pair = (a, b) if a < b else (b, a)
            edges[pair] = edges.get(pair, 0.0) + w

        for pid, counts in self.mentions.items():
            for key in counts:
                add(index[("passage", pid)], index[("phrase", key)], 1.0)
        for (a, b), rels in self.relation_edges().items():
            if ("phrase", a) in index and ("phrase", b) in index:
                add(index[("phrase", a)], index[("phrase", b)], float(len(rels)))
        for (a, b), sim in self.synonyms.items():
            if ("phrase", a) in index and ("phrase", b) in index:
                add(index[("phrase", a)], index[("phrase", b)], float(sim))
        g = ig.Graph(n=base + len(pids), edges=list(edges), directed=False)
        g.vs["name"] = phrases + pids
        g.vs["kind"] = ["phrase"] * base + ["passage"] * len(pids)
        g.es["weight"] = list(edges.values())
        self._derived["igraph"] = g
        self._derived["node_index"] = index
        return g

    def node_index(self) -> dict[tuple[str, str], int]:
        """``("phrase", key)`` / ``("passage", pid)`` -> igraph vertex id."""
        self.igraph()
        return self._derived["node_index"]

    def personalized_pagerank(self, reset: dict[tuple[str, str], float], *, damping: float = 0.5) -> np.ndarray:
        """PageRank with restarts to ``reset`` (node -> non-negative weight), by
        igraph's PRPACK solver; the vector over `nodes` order (sums to 1).

        ``damping`` is the probability of following an edge (HippoRAG uses 0.5).
        Raises ``ValueError`` when no reset weight is positive.
        """
        if not 0.0 <= damping < 1.0:
            raise ValueError(f"damping must be in [0, 1), got {damping!r}")
        g = self.igraph()
        index = self.node_index()
        vec = np.zeros(g.vcount(), dtype=np.float64)
        for node, weight in reset.items():
            if weight < 0 or not np.isfinite(weight):
                raise ValueError(f"reset weights must be finite and >= 0, got {weight!r} for {node!r}")
            if node in index:
                vec[index[node]] += weight
        if vec.sum() <= 0:
            raise ValueError("personalized PageRank needs at least one reset node of the graph with a positive weight")
        scores = g.personalized_pagerank(directed=False, damping=damping, reset=vec.tolist(), weights="weight",
                                         implementation="prpack")
        return np.asarray(scores, dtype=np.float64)

    def stats(self) -> dict[str, int]:
        """Sizes: phrases, passages, sources, mention / triple / synonym edges."""
        return {"phrases": len(self.live_phrases()), "passages": len(self.passages),
                "sources": len({p.source_id for p in self.passages.values()}),
                "mention_edges": sum(len(c) for c in self.mentions.values()),
                "triples": sum(len(t) for t in self.triples.values()),
                "relation_edges": len(self.relation_edges()), "synonym_edges": len(self.synonyms)}

    # ------------------------------------------------------------ persistence
    def to_state(self) -> dict[str, Any]:
        """Everything but the vectors, as JSON-ready data (equal graphs give equal states)."""
        live = set(self.live_phrases())
        return {
            "format": FORMAT,
            "config": {"synonym_threshold": self.synonym_threshold, "synonym_top_k": self.synonym_top_k,
                       "cjk_synonyms": self.cjk_synonyms},
            "meta": self.meta,
            "passages": [[pid, *p] for pid, p in self.passages.items()],
            "mentions": {pid: dict(sorted(c.items())) for pid, c in self.mentions.items()},
            "triples": {pid: [list(t) for t in ts] for pid, ts in self.triples.items() if ts},
            "names": dict(sorted(self.names.items())),
            "source_hashes": dict(sorted(self.source_hashes.items())),
            "synonyms": sorted([a, b, s] for (a, b), s in self.synonyms.items()),
            "vector_keys": [k for k in self._vec_keys if k in live],
        }

    def _vectors_of(self, keys: Sequence[str]) -> np.ndarray:
        if not keys:
            return np.zeros((0, self._vectors.shape[1] if self._vectors.size else 0), dtype=np.float32)
        return np.ascontiguousarray(self._vectors[[self._vec_row[k] for k in keys]], dtype=np.float32)

    @classmethod
    def from_state(cls, state: dict[str, Any], vectors: np.ndarray) -> "PassageGraph":
        if state.get("format") != FORMAT:
            raise ValueError(f"graph format {state.get('format')!r} is not {FORMAT}: build the graph again")
        graph = cls(**state["config"])
        graph.meta = dict(state.get("meta") or {})
        for pid, sid, lo, hi, start, end in state["passages"]:
            graph.passages[pid] = Passage(sid, int(lo), int(hi), int(start), int(end))
        graph.mentions = {pid: {k: int(v) for k, v in c.items()} for pid, c in state["mentions"].items()}
        graph.triples = {pid: [] for pid in graph.passages}
        graph.triples.update({pid: [tuple(t) for t in ts] for pid, ts in state["triples"].items()})
        graph.names = dict(state["names"])
        graph.source_hashes = dict(state["source_hashes"])
        graph.synonyms = {(a, b): float(s) for a, b, s in state["synonyms"]}
        keys = list(state["vector_keys"])
        if len(keys) != len(vectors):
            raise ValueError(f"{len(keys)} vector keys for {len(vectors)} vectors: the graph files do not belong together")
        graph._vec_keys = keys
        graph._vec_row = {k: i for i, k in enumerate(keys)}
        graph._vectors = np.asarray(vectors, dtype=np.float32) if len(keys) else np.zeros((0, 0), dtype=np.float32)
        return graph

    def to_bytes(self) -> bytes:
        """One self-checking blob: magic, JSON header (sha256), ``.npz`` of the state and vectors."""
        state = self.to_state()
        out = io.BytesIO()
        np.savez(out, state=np.frombuffer(json.dumps(state, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
                 vectors=self._vectors_of(state["vector_keys"]))
        payload = out.getvalue()
        head = json.dumps({"sha256": hashlib.sha256(payload).hexdigest(), "format": FORMAT}).encode()
        return _MAGIC + struct.pack("<I", len(head)) + head + payload

    @classmethod
    def from_bytes(cls, raw: bytes) -> "PassageGraph":
        if raw[:5] != _MAGIC:
            raise ValueError("not a graph blob (bad magic)")
        (n,) = struct.unpack("<I", raw[5:9])
        head = json.loads(raw[9:9 + n])
        payload = raw[9 + n:]
        if hashlib.sha256(payload).hexdigest() != head["sha256"]:
            raise ValueError("the graph blob is damaged (checksum mismatch): build the graph again")
        with np.load(io.BytesIO(payload), allow_pickle=False) as data:
            state = json.loads(data["state"].tobytes().decode("utf-8"))
            vectors = data["vectors"]
        return cls.from_state(state, vectors)

    def save(self, path: str | Path) -> Path:
        """Write ``graph.json`` and ``phrase_vectors.npy`` into the folder ``path``."""
        folder = Path(path).expanduser()
        private_dir(folder)
        state = self.to_state()
        np.save(folder / "phrase_vectors.npy", self._vectors_of(state["vector_keys"]), allow_pickle=False)
        tmp = folder / "graph.json.tmp"
        tmp.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
        tmp.replace(folder / "graph.json")
        return folder

    @classmethod
    def load(cls, path: str | Path) -> "PassageGraph":
        folder = Path(path).expanduser()
        if not (folder / "graph.json").is_file():
            raise FileNotFoundError(f"no graph.json in {folder}")
        state = json.loads((folder / "graph.json").read_text(encoding="utf-8"))
        vectors = np.load(folder / "phrase_vectors.npy", allow_pickle=False)
        return cls.from_state(state, vectors)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PassageGraph):
            return NotImplemented
        mine, theirs = self.to_state(), other.to_state()
        return mine == theirs and np.array_equal(self._vectors_of(mine["vector_keys"]),
                                                 other._vectors_of(theirs["vector_keys"]))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        s = self.stats()
        return f"PassageGraph(phrases={s['phrases']}, passages={s['passages']}, synonyms={s['synonym_edges']})"


def save_graph(graph: PassageGraph, index: Any, name: str = GRAPH_BLOB) -> None:
    """Store ``graph`` in the index's source store (a blob; no pickle).

    Args:
        graph: The `PassageGraph` to store.
        index: The `SlidingWindowIndex` whose source store holds it.
        name: The name to store it under (`load_graph` reads it back).
    """
    index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
    index.store.put_blob(name, graph.to_bytes())


def load_graph(index: Any, name: str = GRAPH_BLOB) -> PassageGraph | None:
    """The graph stored in the index's source store, or ``None``.

    Args:
        index: The `SlidingWindowIndex` the graph was saved beside.
        name: The name it was saved under.
    """
    index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
    raw = index.store.get_blob(name)
    return None if raw is None else PassageGraph.from_bytes(raw)


@dataclass
class BuildReport:
    """What `build_graph` did."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    passages: int = 0
    synonym_edges: int = 0
    extraction: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        return (f"graph: {len(self.added)} source(s) extracted ({self.passages} passages), {len(self.removed)} removed, "
                f"{self.unchanged} unchanged; {self.stats.get('phrases', 0)} phrases, "
                f"{self.stats.get('mention_edges', 0)} mentions, {self.stats.get('triples', 0)} triples, "
                f"{self.stats.get('synonym_edges', 0)} synonym edges; {self.seconds:.1f} s")


def build_graph(index: Any, extractor: Any = None, *, graph: PassageGraph | None = None, unit: str = "medium",
                embeddings: Any = None, synonyms: bool = True, show_progress: bool = False,
                batch: int = 200) -> tuple[PassageGraph, BuildReport]:
    """Bring ``graph`` (a new one by default) up to date with ``index``'s complete sources.

    New and changed sources (by content hash) are cut into passages
    (`passages_from_index`) and extracted with ``extractor`` (default
    `RuleExtractor`); sources no longer in the index are removed.
    Synonym edges are added for the new phrases with ``embeddings`` (default the
    index's) unless ``synonyms=False``.

    Args:
        index: The `SlidingWindowIndex` whose sources the graph covers.
        extractor: Gives each passage's phrases and triples (default `RuleExtractor`).
        graph: The graph to update; ``None`` builds a new one.
        unit: The passages, as in `passages_from_index` (``"chunks"``, ``"medium"``, ``"windows"``
            or ``"sources"``).
        embeddings: For the synonym edges (default the index's).
        synonyms: Add synonym edges between similar phrases.
        show_progress: Show progress bars.
        batch: Passages extracted per batch.

    Returns:
        The graph and a `BuildReport` of what changed.

    Raises:
        ValueError: ``graph`` was built with another ``unit`` or extractor (build a new one).
    """
    from tqdm.auto import tqdm

    from swrag_integrations.methods.graph.extraction import RuleExtractor

    t0 = time.perf_counter()
    extractor = extractor if extractor is not None else RuleExtractor()
    graph = graph if graph is not None else PassageGraph()
    fingerprint = extractor.fingerprint() if hasattr(extractor, "fingerprint") else type(extractor).__name__
    for key, value in (("unit", unit), ("extractor", fingerprint)):
        if graph.meta.get(key) not in (None, value):
            raise ValueError(f"the graph was built with {key}={graph.meta[key]!r}, not {value!r}: build a new graph")
    graph.meta.update(unit=unit, extractor=fingerprint)
    index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
    report = BuildReport()
    heads = {sid: h for sid, h in index.store.heads().items() if h.state == "complete"}
    gone = [sid for sid in graph.source_hashes if sid not in heads]
    todo = sorted(sid for sid, h in heads.items() if graph.source_hashes.get(sid) != h.content_hash)
    report.unchanged = len(heads) - len(todo)
    if gone:
        graph.remove_sources(gone)
        report.removed = gone
    bar = tqdm(total=len(todo), disable=not show_progress, desc="graph", unit="source")
    for b in range(0, len(todo), batch):
        sids = todo[b:b + batch]
        records = index.store.get_many(sids)
        graph.remove_sources([s for s in sids if s in graph.source_hashes])
        items = passages_from_index(index, unit, sids, records=records)
        found = extractor.extract_many([text for _, text in items])
        for (passage, _), extraction in zip(items, found):
            graph.add(passage, extraction)
        for sid in sids:
            rec = records.get(sid)
            if rec is not None and rec.complete:
                graph.source_hashes[sid] = rec.content_hash
                report.added.append(sid)
        report.passages += len(items)
        bar.update(len(sids))
    bar.close()
    if synonyms:
        emb = embeddings if embeddings is not None else getattr(getattr(index, "vectors", None), "embedding", None)
        if emb is not None:
            report.synonym_edges = graph.link_synonyms(emb, show_progress=show_progress)
            graph.meta.setdefault("embedding", type(emb).__name__)
    stats = getattr(extractor, "stats", None)
    report.extraction = stats.to_dict() if hasattr(stats, "to_dict") else {}
    report.stats = graph.stats()
    report.seconds = time.perf_counter() - t0
    return graph, report
