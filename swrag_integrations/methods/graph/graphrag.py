"""GraphRAG over sliding windows: communities, local search and global search.

`GraphRAG` holds the community hierarchy of the passage-phrase graph
(`detect_communities`, Leiden) and its reports
(`extractive_report`, or `llm_report` with any
LangChain LLM).

*Local search* (`GraphRAG.rank` / `GraphRAG.spans`): the question's seed
phrases (`QueryLinker`), their strongest neighbours in the phrase
graph (``neighbour_weight``) and the other members of their smallest community
(``community_weight``) score the passages that mention them; that ranking is fused
with the hybrid one (``graph_weight``) and the passages are widened to windows and
merged by offset under the budget by the parent retriever's planner. With
``community_share`` (`GraphRAG.local_context`) part of the budget goes to the
reports of the seeds' communities.

*Global search* (`GlobalSearch`): the reports of one level are packed into
batches of at most ``map_tokens`` tokens; each batch is one LLM call that lists key
points with a 0-100 importance (map); the points, best first, fill ``reduce_tokens``
tokens of a last call that writes the answer (reduce). Every call's prompt and answer
tokens (cl100k counts), the calls and the seconds are reported in
`GlobalSearchResult.stats`. Points the map answers do not give in the asked
format are still read from plain lines (score 50); a batch with no usable line counts
as ``failed_maps``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from swrag_integrations.engine.assemble import ContextSpan, count_tokens
from swrag_integrations.engine.parents import check_query, spans_for
from swrag_integrations.engine.settings import DEFAULT_BUDGET_TOKENS
from swrag_integrations.methods.graph.common import QueryLinker, Seed, fuse_rankings, hybrid_passages, passage_hits
from swrag_integrations.methods.graph.communities import Community, CommunityReport, detect_communities, extractive_report, llm_report, truncate_tokens
from swrag_integrations.methods.graph.graph import PassageGraph

__all__ = ["GraphRAG", "LocalRanking", "GlobalSearch", "GlobalSearchResult", "MAP_PROMPT", "REDUCE_PROMPT"]


@dataclass
class LocalRanking:
    """One question's local-search ranking and how it came about."""

    passages: list[tuple[str, float]]
    seeds: list[Seed] = field(default_factory=list)
    entities: list[tuple[str, float]] = field(default_factory=list)
    communities: list[str] = field(default_factory=list)
    hybrid: list[tuple[str, float]] = field(default_factory=list)
    entity_weights: dict[str, float] = field(default_factory=dict)
    best_chunks: dict[str, int] = field(default_factory=dict)


class GraphRAG:
    """GraphRAG's structures and local search over an index and its graph.

    Args:
        index: the `SlidingWindowIndex`.
        graph: its `PassageGraph`.
        extractor: gives the question's entities (default the rule extractor).
        embeddings: for linking entities to phrases (default the index's).
        link_top_k: seeds kept (see `QueryLinker`).
        link_threshold: lowest cosine of an embedding link (see `QueryLinker`).
        graph_weight: weight of the local ranking against the hybrid one (RRF).
        neighbour_weight: share of a seed's weight its graph neighbours get.
        community_weight: share spread over the other members of a seed's community.
        k_neighbours: neighbours taken per seed (strongest edges).
        k_child: small chunks the hybrid search fetches.
        search_type: the hybrid search's dense mode.
        weights: the hybrid search's (BM25, dense) weights.
        focus: one hit chunk per passage (see `passage_hits`).

    Raises:
        TypeError: ``graph`` is not a `PassageGraph`, or ``index`` lacks what a
            `SlidingWindowIndex` has.
        ValueError: a weight is outside [0, 1], or ``k_neighbours`` is negative.
    """

    def __init__(self, index: Any, graph: PassageGraph, *, extractor: Any = None, embeddings: Any = None,
                 graph_weight: float = 0.5, neighbour_weight: float = 0.5, community_weight: float = 0.25,
                 k_neighbours: int = 10, k_child: int = 30, link_top_k: int = 10, link_threshold: float = 0.8,
                 search_type: str = "mmr", weights: Sequence[float] = (0.5, 0.5), focus: bool = True) -> None:
        if not isinstance(graph, PassageGraph):
            raise TypeError(f"graph must be a PassageGraph, got {type(graph).__name__}")
        index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
        for name in ("search_children", "chunk_rows", "store", "config"):
            if not hasattr(index, name):
                raise TypeError(f"index must be a SlidingWindowIndex (needs {name}), got {type(index).__name__}")
        for name, value in (("graph_weight", graph_weight), ("neighbour_weight", neighbour_weight),
                            ("community_weight", community_weight)):
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        if isinstance(k_neighbours, bool) or not isinstance(k_neighbours, int) or k_neighbours < 0:
            raise ValueError(f"k_neighbours must be an int >= 0, got {k_neighbours!r}")
        self.index = index
        self.graph = graph
        self.graph_weight = float(graph_weight)
        self.neighbour_weight = float(neighbour_weight)
        self.community_weight = float(community_weight)
        self.k_neighbours = k_neighbours
        self.k_child = k_child
        self.focus = bool(focus)
        self.search_type = search_type
        self.weights = tuple(weights)
        emb = embeddings if embeddings is not None else getattr(getattr(index, "vectors", None), "embedding", None)
        self.linker = QueryLinker(graph, extractor=extractor, embeddings=emb, link_top_k=link_top_k,
                                  link_threshold=link_threshold)
        self.communities: list[Community] | None = None
        self.reports: dict[str, CommunityReport] = {}
        self.report_stats: dict[str, Any] = {}
        self._deepest: dict[str, str] = {}

    @property
    def encoding_name(self) -> str:
        return self.index.encoding_name

    # ------------------------------------------------------------ structures
    def build_communities(self, **options: Any) -> list[Community]:
        """Detect the hierarchy (options of `detect_communities`)."""
        self.communities = detect_communities(self.graph, **options)
        self.reports = {}
        self._deepest = {}
        for community in self.communities:  # level order: deeper ones overwrite
            for key in community.phrases:
                self._deepest[key] = community.id
        return self.communities

    def community(self, cid: str) -> Community:
        """The community with id ``cid``; raises ``KeyError`` if there is none."""
        for community in self.communities or ():
            if community.id == cid:
                return community
        raise KeyError(f"no community {cid!r}")

    def levels(self) -> list[int]:
        """The hierarchy levels that hold communities, ascending."""
        return sorted({c.level for c in self.communities or ()})

    def level_communities(self, level: int | None = None) -> list[Community]:
        """Communities of ``level``; ``None``: the leaves (communities not split further)."""
        if self.communities is None:
            self.build_communities()
        if level is None:
            return [c for c in self.communities if not c.children]
        return [c for c in self.communities if c.level == level]

    def build_reports(self, llm: Any = None, *, communities: Sequence[Community] | None = None,
                      max_tokens: int = 400, show_progress: bool = False) -> dict[str, Any]:
        """Reports of ``communities`` (default all): extractive, or written by ``llm``.

        Returns counts: ``reports``, ``llm_calls``, ``llm_failed`` (kept extractive), ``seconds``.
        """
        from tqdm.auto import tqdm

        if self.communities is None:
            self.build_communities()
        todo = list(communities) if communities is not None else list(self.communities)
        t0 = time.perf_counter()
        sids = sorted({self.graph.passages[pid].source_id for c in todo for k in c.phrases
                       for pid in self.graph.phrase_passages().get(k, ())})
        records = self.index.store.get_many(sids)
        texts = {sid: rec.text for sid, rec in records.items()}
        calls = failed = 0
        for community in tqdm(todo, disable=not show_progress, desc="community reports", unit="community"):
            report = extractive_report(self.graph, community, texts, max_tokens=max_tokens,
                                       encoding_name=self.encoding_name)
            if llm is not None:
                calls += 1
                report, ok = llm_report(report, llm, max_tokens=max_tokens, encoding_name=self.encoding_name)
                failed += not ok
            self.reports[community.id] = report
        self.report_stats = {"reports": len(todo), "llm_calls": calls, "llm_failed": failed,
                             "seconds": round(time.perf_counter() - t0, 3)}
        return self.report_stats

    def report(self, cid: str) -> CommunityReport:
        """The report of a community (an extractive one is made when missing)."""
        if cid not in self.reports:
            self.build_reports(communities=[self.community(cid)])
        return self.reports[cid]

    # ------------------------------------------------------------ local search
    def _neighbours(self) -> dict[str, list[tuple[str, float]]]:
        got = self.graph._derived.get("neighbours")
        if got is None:
            adj: dict[str, list[tuple[str, float]]] = {}
            for (a, b), w in self.graph.phrase_edges().items():
                adj.setdefault(a, []).append((b, w))
                adj.setdefault(b, []).append((a, w))
            got = {k: sorted(v, key=lambda x: (-x[1], x[0]))[: self.k_neighbours] for k, v in adj.items()}
            self.graph._derived["neighbours"] = got
        return got

    def rank(self, query: str, k_passages: int = 30) -> LocalRanking:
        """The fused local-search passage ranking of one question."""
        check_query(query)
        if isinstance(k_passages, bool) or not isinstance(k_passages, int) or k_passages <= 0:
            raise ValueError(f"k_passages must be a positive int, got {k_passages!r}")
        if self.communities is None:
            self.build_communities()
        seeds = self.linker.link(query)
        entity: dict[str, float] = {}
        for seed in seeds:
            entity[seed.key] = entity.get(seed.key, 0.0) + seed.weight
        neighbours = self._neighbours() if self.neighbour_weight > 0 and self.k_neighbours else {}
        communities: list[str] = []
        for seed in seeds:
            near = neighbours.get(seed.key, [])
            if near:
                top = near[0][1] or 1.0
                for key, w in near:
                    entity[key] = entity.get(key, 0.0) + seed.weight * self.neighbour_weight * w / top
            cid = self._deepest.get(seed.key)
            if cid is not None and cid not in communities:
                communities.append(cid)
                if self.community_weight > 0:
                    members = self.community(cid).phrases
                    share = seed.weight * self.community_weight / max(1, len(members))
                    for key in members:
                        entity[key] = entity.get(key, 0.0) + share
        mentions = self.graph.phrase_passages()
        scores: dict[str, float] = {}
        for key, weight in entity.items():
            for pid in mentions.get(key, ()):
                scores[pid] = scores.get(pid, 0.0) + weight
        local = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k_passages]
        best_chunks: dict[str, int] = {}
        hybrid = hybrid_passages(self.index, self.graph, query, k_child=self.k_child, search_type=self.search_type,
                                 weights=self.weights, best_chunks=best_chunks) if self.graph_weight < 1.0 else []
        fused = fuse_rankings([p for p, _ in local], [p for p, _ in hybrid[:k_passages]],
                              self.graph_weight if local else 0.0)
        top_entities = sorted(entity.items(), key=lambda kv: -kv[1])[:20]
        return LocalRanking(fused[:k_passages], seeds,
                            [(self.graph.names.get(k, k), float(v)) for k, v in top_entities], communities, hybrid,
                            dict(top_entities), best_chunks)

    def hits(self, query: str, k_passages: int = 30) -> list:
        """The local search's passages for ``query`` as child hits (at most ``k_passages``), each naming its communities."""
        ranking = self.rank(query, k_passages)
        extra = {pid: {"local_communities": ", ".join(ranking.communities)} for pid, _ in ranking.passages}
        hits = passage_hits(self.index, self.graph, ranking.passages, extra, focus=self.focus,
                            phrase_weights=ranking.entity_weights, best_chunks=ranking.best_chunks)
        linked = ", ".join(s.name for s in ranking.seeds)
        for hit in hits:
            hit.metadata["linked_phrases"] = linked
        return hits

    def spans(self, queries: Sequence[str], *, budget_tokens: int | None = DEFAULT_BUDGET_TOKENS, k: int | None = None,
              k_passages: int = 30, expand: str = "window") -> list[ContextSpan]:
        """Budgeted, offset-merged windows of local search (several phrasings share the budget)."""
        queries = [check_query(q) for q in queries]
        if not queries:
            raise ValueError("queries must not be empty")
        return spans_for([self.hits(q, k_passages) for q in queries], self.index, budget_tokens=budget_tokens,
                         k=k, expand=expand)

    def local_context(self, query: str, *, budget_tokens: int = DEFAULT_BUDGET_TOKENS, community_share: float = 0.0,
                      k: int | None = None, k_passages: int = 30,
                      expand: str = "window") -> tuple[list[ContextSpan], list[CommunityReport]]:
        """Windows plus the reports of the seeds' communities: the reports get up to
        ``community_share`` of the budget (best seed's community first; a report that
        does not fit is cut to what is left if at least 50 tokens are), the windows the
        rest and whatever the reports left."""
        if not 0.0 <= community_share <= 1.0:
            raise ValueError(f"community_share must be in [0, 1], got {community_share!r}")
        ranking = self.rank(query, k_passages) if community_share > 0 else None
        reports: list[CommunityReport] = []
        used = 0
        if ranking is not None:
            allowance = int(budget_tokens * community_share)
            for cid in ranking.communities:
                report = self.report(cid)
                room = allowance - used - 2
                if room < min(report.n_tokens, 50):
                    continue
                if report.n_tokens > room:  # the head of a report: title, entities, first passages
                    text = truncate_tokens(report.text, room, self.encoding_name)
                    report = replace(report, text=text, n_tokens=count_tokens(text, self.encoding_name))
                reports.append(report)
                used += report.n_tokens + 2
        spans = self.spans([query], budget_tokens=max(1, budget_tokens - used), k=k, k_passages=k_passages,
                           expand=expand)
        return spans, reports

    def global_search(self, llm: Any, *, level: int | None = None, max_reports: int | None = None,
                      **options: Any) -> "GlobalSearch":
        """A `GlobalSearch` over the reports of ``level`` (default: the leaves),
        the ``max_reports`` largest ones if given (reports are built when missing)."""
        chosen = sorted(self.level_communities(level), key=lambda c: (-len(c.phrases), c.id))
        if max_reports is not None:
            chosen = chosen[:max_reports]
        missing = [c for c in chosen if c.id not in self.reports]
        if missing:
            self.build_reports(communities=missing)
        return GlobalSearch([self.reports[c.id] for c in chosen], llm, encoding_name=self.encoding_name, **options)


# ---------------------------------------------------------------- global search

MAP_PROMPT = """Use the reports below to find what helps answer the question.

Reports:
{reports}

Question: {question}

List up to {max_points} key points that help answer the question, one per line, each as:
- [importance 0-100] point
If the reports say nothing about the question, write: NONE
"""


REDUCE_PROMPT = """Key points gathered from reports about a collection of documents, most important first:

{points}

Question: {question}
Answer the question using these points.
Answer:"""


_SCORED = (
    re.compile(r"^\[\s*(?:importance|score)?\s*[:=]?\s*(\d{1,3})\s*\]\s*[:\-–]?\s*(.+)$", re.IGNORECASE),
    re.compile(r"^\(\s*(?:importance|score)?\s*[:=]?\s*(\d{1,3})\s*\)\s*[:\-–]?\s*(.+)$", re.IGNORECASE),
    re.compile(r"^(?:importance|score)\s*[:=]?\s*(\d{1,3})\s*[:\-–,.]?\s*(.+)$", re.IGNORECASE),
    re.compile(r"^(\d{1,3})\s*(?:/\s*100)?\s*[:\-–|]\s*(.+)$"),
)
_TRAILING_SCORE = re.compile(r"^(.+?)\s*[\[(]\s*(?:importance|score)?\s*[:=]?\s*(\d{1,3})\s*(?:/\s*100)?\s*[\])]\s*\.?$",
                             re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•·]+|\d+[.)](?=\s))\s*")
_NONE = re.compile(r"^(none|n/?a|no (relevant )?(information|points?|data)|nothing)\b", re.IGNORECASE)


def parse_points(answer: Any) -> list[tuple[int, str]]:
    """``(importance, point)`` pairs from a map answer (see the module docstring)."""
    answer = getattr(answer, "content", answer)
    if not isinstance(answer, str):
        return []
    points = []
    for raw in answer.splitlines():
        line = _BULLET.sub("", raw).strip()
        if not line or _NONE.match(line):
            continue
        score, text = 50, line
        for pattern in _SCORED:
            match = pattern.match(line)
            if match:
                score, text = int(match.group(1)), match.group(2).strip()
                break
        else:
            match = _TRAILING_SCORE.match(line)
            if match:
                text, score = match.group(1).strip(), int(match.group(2))
        if score > 100 or len(re.findall(r"[^\W\d_]{2,}", text)) < 2 or _NONE.match(text):
            continue
        points.append((score, text))
    return points


@dataclass
class GlobalSearchResult:
    """The answer, the map points behind it (``(importance, point, batch)``) and the cost."""

    answer: str
    points: list[tuple[int, str, int]]
    stats: dict[str, Any]


class GlobalSearch:
    """Map-reduce over community reports (see the module docstring).

    Args:
        reports: the `CommunityReport` s to search.
        llm: any LangChain LLM or chat model.
        map_tokens: token budget of the reports in one map call.
        reduce_tokens: token budget of the points in the reduce call.
        max_points: points asked per map call.
        no_answer: returned (without a reduce call) when no map call gave a point.
    """

    def __init__(self, reports: Sequence[CommunityReport], llm: Any, *, map_tokens: int = 1500,
                 reduce_tokens: int = 1500, max_points: int = 5, map_prompt: str = MAP_PROMPT,
                 reduce_prompt: str = REDUCE_PROMPT, no_answer: str = "I do not know: the reports say nothing about it.",
                 encoding_name: str | None = None) -> None:
        if hasattr(llm, "as_langchain") and not hasattr(llm, "invoke"):
            llm = llm.as_langchain()
        if not callable(getattr(llm, "invoke", None)):
            raise TypeError(f"llm must be a LangChain LLM or chat model, got {type(llm).__name__}")
        for name, value in (("map_tokens", map_tokens), ("reduce_tokens", reduce_tokens), ("max_points", max_points)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.reports = list(reports)
        self.llm = llm
        self.map_tokens = map_tokens
        self.reduce_tokens = reduce_tokens
        self.max_points = max_points
        self.map_prompt = map_prompt
        self.reduce_prompt = reduce_prompt
        self.no_answer = no_answer
        from swrag_integrations.core.windows import DEFAULT_ENCODING

        self.encoding_name = encoding_name or DEFAULT_ENCODING

    def batches(self) -> list[str]:
        """The reports packed into map inputs of at most ``map_tokens`` tokens each
        (a longer report is cut to fit alone)."""
        out: list[str] = []
        current: list[str] = []
        used = 0
        for report in sorted(self.reports, key=lambda r: -r.rank):
            text = truncate_tokens(report.text, self.map_tokens, self.encoding_name)
            cost = count_tokens(text, self.encoding_name) + 2
            if current and used + cost > self.map_tokens:
                out.append("\n\n".join(current))
                current, used = [], 0
            current.append(text)
            used += cost
        if current:
            out.append("\n\n".join(current))
        return out

    def _call(self, prompt: str, stats: dict[str, Any]) -> str:
        stats["calls"] += 1
        stats["prompt_tokens"] += count_tokens(prompt, self.encoding_name)
        answer = self.llm.invoke(prompt)
        answer = getattr(answer, "content", answer)
        answer = answer if isinstance(answer, str) else str(answer)
        stats["answer_tokens"] += count_tokens(answer, self.encoding_name)
        return answer

    def invoke(self, question: str, config: Any = None) -> GlobalSearchResult:
        """Answer ``question`` from all reports (map, then reduce)."""
        check_query(question)
        t0 = time.perf_counter()
        stats: dict[str, Any] = {"reports": len(self.reports), "batches": 0, "calls": 0, "map_calls": 0,
                                 "reduce_calls": 0, "prompt_tokens": 0, "answer_tokens": 0, "failed_maps": 0,
                                 "points": 0}
        points: list[tuple[int, str, int]] = []
        for b, batch in enumerate(self.batches()):
            stats["batches"] += 1
            stats["map_calls"] += 1
            try:
                answer = self._call(self.map_prompt.format(reports=batch, question=question,
                                                           max_points=self.max_points), stats)
            except Exception:  # noqa: BLE001 - one failing batch must not lose the others; counted
                stats["failed_maps"] += 1
                continue
            got = parse_points(answer)[: self.max_points]
            if not got and not _NONE.match(answer.strip()):
                stats["failed_maps"] += 1
            points.extend((score, text, b) for score, text in got if score > 0)
        points.sort(key=lambda p: (-p[0], p[2]))
        stats["points"] = len(points)
        if not points:
            stats["seconds"] = round(time.perf_counter() - t0, 3)
            return GlobalSearchResult(self.no_answer, [], stats)
        lines: list[str] = []
        used = 0
        for score, text, _ in points:
            line = f"- [{score}] {text}"
            cost = count_tokens(line, self.encoding_name) + 1
            if used + cost > self.reduce_tokens:
                break
            lines.append(line)
            used += cost
        if not lines:
            lines = [truncate_tokens(f"- [{points[0][0]}] {points[0][1]}", self.reduce_tokens, self.encoding_name)]
        stats["reduce_calls"] += 1
        answer = self._call(self.reduce_prompt.format(points="\n".join(lines), question=question), stats).strip()
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        return GlobalSearchResult(answer or self.no_answer, points, stats)

