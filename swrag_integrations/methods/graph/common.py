"""What HippoRAG and GraphRAG local search share: query linking, passage rankings, hits.

* `QueryLinker`: a question -> seed phrases of the graph. Phrases the question
  contains verbatim (normalised; on word boundaries for Latin text, the longest match
  wins; a capitalised phrase only where the question capitalises it, so a heading
  "Government" is not linked by "what government position") are linked with score 1; the question's own entities (its extractor's
  ``query_entities``) are linked to their nearest phrase by embedding when the cosine
  reaches ``link_threshold``. A seed's weight is its score divided by the number of
  passages mentioning the phrase (HippoRAG's node specificity), and only the
  ``link_top_k`` heaviest seeds are kept.
* `hybrid_passages`: the index's hybrid (BM25 + dense, RRF) small-chunk hits
  summed per passage -- the ranking the graph's is fused with.
* `fuse_rankings`: weighted reciprocal-rank fusion of the graph's ranking with the
  hybrid one (`rrf`).
* `passage_hits`: ranked passages -> `ChildHit`
  lists (each passage's chunks share its score), for
  `spans_for`, which widens them to their
  windows and merges them by offset under the token budget.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from swrag_integrations.core.lang import contains_cjk
from swrag_integrations.engine.fusion import rrf
from swrag_integrations.engine.protocols import ChildHit
from swrag_integrations.engine.records import END, START, WIN_END, WIN_HI, WIN_LO, WIN_START
from swrag_integrations.methods.graph.extraction import RuleExtractor
from swrag_integrations.methods.graph.graph import PassageGraph

__all__ = ["Seed", "QueryLinker", "hybrid_passages", "fuse_rankings", "passage_hits", "source_passages"]

_NON_WORD = re.compile(r"[\W_]+")


def _flat(text: str) -> str:
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).lower().replace("’", "'")).strip()


@dataclass
class Seed:
    """A graph phrase linked to a question: ``how`` is ``"lexical"`` or ``"embedding"``."""

    key: str
    name: str
    score: float
    weight: float
    how: str


class QueryLinker:
    """Links questions to graph phrases (see the module docstring).

    Args:
        graph: the `PassageGraph`.
        extractor: gives the question's entities (``query_entities``); default the rule extractor.
        embeddings: LangChain ``Embeddings`` (the graph's phrase vectors' model); ``None``:
            lexical links only.
        link_threshold: lowest cosine of an embedding link.
        link_top_k: seeds kept.
    """

    def __init__(self, graph: PassageGraph, *, extractor: Any = None, embeddings: Any = None,
                 link_threshold: float = 0.8, link_top_k: int = 10) -> None:
        if isinstance(link_top_k, bool) or not isinstance(link_top_k, int) or link_top_k <= 0:
            raise ValueError(f"link_top_k must be a positive int, got {link_top_k!r}")
        if not 0.0 < float(link_threshold) <= 1.0:
            raise ValueError(f"link_threshold must be in (0, 1], got {link_threshold!r}")
        self.graph = graph
        self.extractor = extractor if extractor is not None else RuleExtractor()
        self.embeddings = embeddings
        self.link_threshold = float(link_threshold)
        self.link_top_k = link_top_k

    def _probes(self) -> list[tuple[str, str, bool]]:
        got = self.graph._derived.get("probes")
        if got is None:
            got = []
            for key in self.graph.live_phrases():
                probe = _flat(key)
                if probe:
                    got.append((key, probe, contains_cjk(probe)))
            self.graph._derived["probes"] = got
        return got

    def _named(self, query: str, key: str) -> bool:
        """A capitalised phrase counts only where the question capitalises it too ("Writer"
        in a passage heading is not "the writer of ..."); lower-case phrases always count."""
        name = self.graph.names.get(key, key)
        if not name[:1].isupper():
            return True
        words = [re.escape(w) for w in _flat(name).split()]
        pattern = r"(?<![^\W_])" + r"[\W_]+".join(words) + r"(?![^\W_])"
        return any(m.group(0)[:1].isupper() for m in re.finditer(pattern, query.replace("’", "'"), re.IGNORECASE))

    def lexical(self, query: str) -> list[str]:
        """Phrases the question contains (longest matches; a match inside a longer one is
        dropped; a capitalised phrase must be capitalised in the question too)."""
        flat = _flat(query)
        padded = f" {flat} "
        found = [(key, probe) for key, probe, cjk in self._probes()
                 if (probe in flat if cjk else f" {probe} " in padded and self._named(query, key))]
        found.sort(key=lambda kp: -len(kp[1]))
        kept: list[tuple[str, str]] = []
        for key, probe in found:
            if not any(probe in longer for _, longer in kept):
                kept.append((key, probe))
        return [key for key, _ in kept]

    def link(self, query: str) -> list[Seed]:
        """The question's seed phrases, heaviest first."""
        passages = self.graph.phrase_passages()
        scores: dict[str, tuple[float, str]] = {}
        for key in self.lexical(query):
            scores[key] = (1.0, "lexical")
        if self.embeddings is not None:
            matched = [f" {_flat(k)} " for k in scores]  # an entity inside a verbatim match adds nothing
            entities = [e for e in self.extractor.query_entities(query)
                        if _flat(e) and not any(f" {_flat(e)} " in m for m in matched)]
            cached = self.graph._derived.get("link_vectors")
            if cached is None:
                cached = self.graph.phrase_vectors(sorted(passages))
                self.graph._derived["link_vectors"] = cached
            keys, mat = cached
            if entities and keys:
                q = np.asarray(self.embeddings.embed_documents(entities), dtype=np.float32)
                q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
                sims = q @ mat.T
                for row in range(len(entities)):
                    col = int(np.argmax(sims[row]))
                    sim = float(sims[row, col])
                    if sim >= self.link_threshold and scores.get(keys[col], (0.0, ""))[0] < sim:
                        scores[keys[col]] = (sim, "embedding")
        seeds = [Seed(key, self.graph.names.get(key, key), score, score / max(1, len(passages.get(key, ()))), how)
                 for key, (score, how) in scores.items() if key in passages]
        seeds.sort(key=lambda s: (-s.weight, s.key))
        return seeds[: self.link_top_k]


def source_passages(graph: PassageGraph) -> dict[str, tuple[list[int], list[tuple[int, int, str]]]]:
    """Per source: passages sorted by first chunk (``(lowers, [(lower, upper, pid)])``)."""
    got = graph._derived.get("source_passages")
    if got is None:
        per: dict[str, list[tuple[int, int, str]]] = {}
        for pid, p in graph.passages.items():
            per.setdefault(p.source_id, []).append((p.lower, p.upper, pid))
        got = {}
        for sid, items in per.items():
            items.sort()
            got[sid] = ([lo for lo, _, _ in items], items)
        graph._derived["source_passages"] = got
    return got


def hybrid_passages(index: Any, graph: PassageGraph, query: str, *, k_child: int = 30, search_type: str = "mmr",
                    weights: Sequence[float] = (0.5, 0.5),
                    best_chunks: dict[str, int] | None = None) -> list[tuple[str, float]]:
    """``(passage id, summed RRF score of its hit chunks)``, best first; ``best_chunks``
    (if given) receives each passage's best hit chunk."""
    hits = index.search_children(query, k_child, search_type=search_type, weights=weights)
    table = source_passages(graph)
    scores: dict[str, float] = {}
    for hit in hits:
        got = table.get(hit.source_id)
        if got is None:
            continue
        lowers, items = got
        pos = bisect.bisect_right(lowers, hit.chunk_index)
        for lo, hi, pid in reversed(items[max(0, pos - 64):pos]):  # windows overlap: every passage holding the chunk
            if lo <= hit.chunk_index <= hi:
                scores[pid] = scores.get(pid, 0.0) + float(hit.score)
                if best_chunks is not None:
                    best_chunks.setdefault(pid, hit.chunk_index)  # hits come best first
    return sorted(scores.items(), key=lambda kv: -kv[1])


def fuse_rankings(graph_ranked: Sequence[str], hybrid_ranked: Sequence[str], graph_weight: float,
                  *, c: float = 60.0) -> list[tuple[str, float]]:
    """``graph_weight`` 1: the graph's ranking; 0: the hybrid one; between: weighted RRF."""
    if not 0.0 <= graph_weight <= 1.0:
        raise ValueError(f"graph_weight must be in [0, 1], got {graph_weight!r}")
    if graph_weight >= 1.0 or not hybrid_ranked:
        return [(pid, 1.0 / (c + r)) for r, pid in enumerate(graph_ranked, start=1)]
    if graph_weight <= 0.0 or not graph_ranked:
        return [(pid, 1.0 / (c + r)) for r, pid in enumerate(hybrid_ranked, start=1)]
    return [(pid, score) for pid, score, _ in rrf([list(graph_ranked), list(hybrid_ranked)],
                                                  [graph_weight, 1.0 - graph_weight], c=c)]


def _focus(rec: Any, passage: Any, weights: dict[str, float]) -> int:
    """The chunk of a passage holding the most phrase weight (its first chunk on a tie)."""
    best, best_score = passage.lower, 0.0
    for i in range(passage.lower, passage.upper + 1):
        flat = f" {_flat(rec.chunk_text(i))} "
        score = sum(w for probe, w in weights.items() if (probe in flat if contains_cjk(probe) else f" {probe} " in flat))
        if score > best_score:
            best, best_score = i, score
    return best


def passage_hits(index: Any, graph: PassageGraph, ranked: Sequence[tuple[str, float]],
                 extra: dict[str, dict[str, Any]] | None = None, *, focus: bool = True,
                 phrase_weights: dict[str, float] | None = None,
                 best_chunks: dict[str, int] | None = None) -> list[ChildHit]:
    """Ranked ``(passage id, score)`` -> `ChildHit` s for the parent planner.

    With ``focus`` (default) a passage gives one hit: its chunk found by the hybrid
    search (``best_chunks``), else its chunk holding the most ``phrase_weights`` (phrase
    key -> weight; its first chunk when none occurs), so the budget holds many passages'
    best chunks before any widening (whole passages as hits filled a 1500-token budget
    with 14 HotpotQA sources instead of the parent retriever's 23; see
    docs/eval/graph.md). Without it every chunk of the passage is a hit, the passage's
    score divided among them. Each hit keeps its chunk's own window, which
    `spans_for` widens to. ``extra`` adds
    metadata per passage id.
    """
    probes = {_flat(k): w for k, w in (phrase_weights or {}).items() if _flat(k)}
    passages = [(graph.passages[pid], score) for pid, score in ranked if pid in graph.passages]
    records = index.store.get_many(sorted({p.source_id for p, _ in passages}))
    m = index.config.medium_size
    hits: list[ChildHit] = []
    for rank, (p, score) in enumerate(passages, start=1):
        rec = records.get(p.source_id)
        if rec is None or not rec.complete or p.upper >= rec.n_chunks:
            continue  # the index changed since the graph was built
        a = rec.arrays
        if int(a[START, p.lower]) != p.start or int(a[END, p.upper]) != p.end:
            continue
        if focus:
            chosen = best_chunks.get(p.pid) if best_chunks else None
            chunks = [chosen if chosen is not None else _focus(rec, p, probes)]
        else:
            chunks = list(range(p.lower, p.upper + 1))
        n = len(chunks)
        for i in chunks:
            meta = rec.chunk_metadata(i, m)
            meta.update(graph_passage=p.pid, graph_rank=rank, graph_score=float(score))
            if extra and p.pid in extra:
                meta.update(extra[p.pid])
            hits.append(ChildHit(p.source_id, i, float(score) / n, rank, int(a[WIN_LO, i]), int(a[WIN_HI, i]),
                                 int(a[WIN_START, i]), int(a[WIN_END, i]), int(a[START, i]), int(a[END, i]), meta))
    return hits
