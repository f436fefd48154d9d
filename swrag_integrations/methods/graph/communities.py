"""GraphRAG's community hierarchy and community reports over the passage-phrase graph.

`detect_communities` partitions the phrase graph (phrase-phrase edges of
`phrase_edges`: triples, synonyms and co-mentions in a
passage) with the Leiden algorithm (``leidenalg``, modularity with a resolution
parameter, fixed seed), then re-partitions every community larger than
``max_cluster_size`` on its own subgraph, level by level -- the hierarchy GraphRAG
builds (GraphRAG calls graspologic's ``hierarchical_leiden`` with
``max_cluster_size=10``). A community that Leiden does not split stays a leaf.

A `CommunityReport` describes one community:

* `extractive_report` (no LLM): its top entities (by weighted degree inside the
  community), the relations between them, and the passages that mention the most of
  them, each with its exact ``(source_id, start, end)``, cut to ``max_tokens``;
* `llm_report`: a title and summary written by any LangChain LLM from that
  extractive material; an answer without a usable summary keeps the extractive text
  (counted, never fatal). Either way the entities and passages (with offsets) stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from swrag_integrations.engine.assemble import count_tokens
from swrag_integrations.core.windows import DEFAULT_ENCODING, get_encoding
from swrag_integrations.methods.graph.graph import PassageGraph

__all__ = ["Community", "CommunityReport", "detect_communities", "extractive_report", "llm_report",
           "REPORT_PROMPT", "truncate_tokens"]


@dataclass
class Community:
    """A set of phrases at one level of the hierarchy (``parent``: the community it splits)."""

    id: str
    level: int
    phrases: list[str]
    parent: str | None = None
    children: list[str] = field(default_factory=list)


@dataclass
class CommunityReport:
    """What a community is about; ``passages`` are exact ``(source_id, start, end)`` spans."""

    community: str
    level: int
    title: str
    text: str
    entities: list[str]
    passages: list[tuple[str, int, int]]
    n_tokens: int
    kind: str = "extractive"  # or "llm"
    rank: float = 0.0


def _leiden(ig_graph: Any, resolution: float, seed: int) -> list[int]:
    try:
        import leidenalg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("community detection needs leidenalg: pip install 'leidenalg>=0.12' "
                          "(the package's 'graph' extra)") from exc
    part = leidenalg.find_partition(ig_graph, leidenalg.RBConfigurationVertexPartition, weights="weight",
                                    resolution_parameter=resolution, seed=seed, n_iterations=-1)
    return list(part.membership)


def detect_communities(graph: PassageGraph, *, max_cluster_size: int = 10, resolution: float = 1.0, seed: int = 0,
                       max_levels: int = 4, min_size: int = 2, co_mention: bool = True) -> list[Community]:
    """The community hierarchy (see the module docstring), level 0 first.

    Args:
        max_cluster_size: communities larger than this are split again (next level).
        resolution: Leiden's resolution (higher: smaller communities).
        seed: Leiden's random seed (same graph + seed = same communities).
        max_levels: depth limit of the hierarchy.
        min_size: smaller communities (isolated phrases) are left out.
        co_mention: count co-mentions in a passage as edges (needed without triples).
    """
    from swrag_integrations.methods.graph.graph import _ig

    if isinstance(max_cluster_size, bool) or not isinstance(max_cluster_size, int) or max_cluster_size < 2:
        raise ValueError(f"max_cluster_size must be an int >= 2, got {max_cluster_size!r}")
    if isinstance(max_levels, bool) or not isinstance(max_levels, int) or max_levels < 1:
        raise ValueError(f"max_levels must be a positive int, got {max_levels!r}")
    if resolution <= 0:
        raise ValueError(f"resolution must be > 0, got {resolution!r}")
    ig = _ig()
    phrases = sorted(graph.live_phrases())
    if not phrases:
        return []
    index = {k: i for i, k in enumerate(phrases)}
    edges = graph.phrase_edges(co_mention=co_mention)
    whole = ig.Graph(n=len(phrases), edges=[(index[a], index[b]) for a, b in edges], directed=False)
    whole.es["weight"] = list(edges.values())
    out: list[Community] = []

    def split(members: list[int], level: int, parent: Community | None, prefix: str) -> None:
        sub = whole.induced_subgraph(members) if parent is not None else whole
        membership = _leiden(sub, resolution, seed)
        groups: dict[int, list[int]] = {}
        for pos, label in enumerate(membership):
            groups.setdefault(label, []).append(members[pos])
        if parent is not None and len(groups) < 2:
            return  # Leiden keeps it whole: a leaf
        ordered = sorted(groups.values(), key=lambda g: (-len(g), phrases[min(g)]))
        for n, group in enumerate(ordered):
            if len(group) < min_size:
                continue
            cid = f"{prefix}{n}"
            community = Community(cid, level, [phrases[i] for i in sorted(group)], parent.id if parent else None)
            if parent is not None:
                parent.children.append(cid)
            out.append(community)
            if len(group) > max_cluster_size and level + 1 < max_levels:
                split(sorted(group), level + 1, community, f"{cid}.")

    split(list(range(len(phrases))), 0, None, "")
    out.sort(key=lambda c: (c.level, [int(x) for x in c.id.split(".")]))
    return out


def truncate_tokens(text: str, max_tokens: int, encoding_name: str = DEFAULT_ENCODING) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (never a broken character)."""
    if max_tokens <= 0:
        return ""
    enc = get_encoding(encoding_name)
    ids = enc.encode_ordinary(text)
    if len(ids) <= max_tokens:
        return text
    cut = enc.decode(ids[:max_tokens])
    return cut.rstrip("\ufffd")


def _degrees(graph: PassageGraph, members: set[str]) -> dict[str, float]:
    deg = {k: 0.0 for k in members}
    for (a, b), w in graph.phrase_edges().items():
        if a in members and b in members:
            deg[a] += w
            deg[b] += w
    return deg


def extractive_report(graph: PassageGraph, community: Community, texts: dict[str, str], *, max_tokens: int = 400,
                      max_entities: int = 12, max_passages: int = 5,
                      encoding_name: str = DEFAULT_ENCODING) -> CommunityReport:
    """The no-LLM report of a community (see the module docstring).

    ``texts``: ``source_id -> source text`` for the passages' excerpts.
    """
    members = set(community.phrases)
    deg = _degrees(graph, members)
    mentions = graph.phrase_passages()
    ranked = sorted(members, key=lambda k: (-deg[k], -len(mentions.get(k, ())), k))
    top = ranked[:max_entities]
    names = [graph.names.get(k, k) for k in top]
    relations = []
    for (a, b), rels in sorted(graph.relation_edges().items()):
        if a in members and b in members:
            relations.append(f"{graph.names.get(a, a)} -- {rels[0]} -- {graph.names.get(b, b)}")
    scores: dict[str, tuple[int, int]] = {}
    for key in members:
        for pid in mentions.get(key, ()):
            n, m = scores.get(pid, (0, 0))
            scores[pid] = (n + 1, m + graph.mentions[pid][key])
    pids = sorted(scores, key=lambda p: (-scores[p][0], -scores[p][1], p))[:max_passages]
    spans = [(graph.passages[p].source_id, graph.passages[p].start, graph.passages[p].end) for p in pids]
    title = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
    head = [f"Community {community.id} (level {community.level}, {len(members)} entities): {title}",
            "Entities: " + ", ".join(names) + (f" (+{len(members) - len(names)} more)" if len(members) > len(names) else "")]
    if relations:
        head.append("Relations: " + "; ".join(relations[:10]))
    text = "\n".join(head)
    budget = max_tokens - count_tokens(text, encoding_name)
    kept: list[tuple[str, int, int]] = []
    for sid, start, end in spans:
        if budget <= 8 or sid not in texts:
            break
        excerpt = " ".join(texts[sid][start:end].split())
        line = truncate_tokens(f"\n[{sid} {start}-{end}] {excerpt}", budget, encoding_name)
        text += line
        budget -= count_tokens(line, encoding_name)
        kept.append((sid, start, end))
    text = truncate_tokens(text, max_tokens, encoding_name)
    return CommunityReport(community.id, community.level, title, text, names, kept or spans,
                           count_tokens(text, encoding_name), "extractive", float(sum(deg.values())))


REPORT_PROMPT = """Here is a group of related entities and passages about them.

{material}

Write a report about this group. Answer exactly in this form:
TITLE: <a short title>
SUMMARY: <two or three sentences saying what connects these entities>
"""

_TITLE = re.compile(r"title\s*[:：]\s*(.+)", re.IGNORECASE)
_SUMMARY = re.compile(r"summary\s*[:：]\s*(.+)", re.IGNORECASE | re.DOTALL)


def llm_report(base: CommunityReport, llm: Any, *, prompt: str = REPORT_PROMPT, max_tokens: int = 400,
               encoding_name: str = DEFAULT_ENCODING) -> tuple[CommunityReport, bool]:
    """A report written by ``llm`` from the extractive one; ``(report, ok)``.

    When the answer has no usable summary (or the call raises) the extractive report
    comes back with ``ok=False``.
    """
    try:
        answer = llm.invoke(prompt.format(material=base.text))
        answer = getattr(answer, "content", answer)
    except Exception:  # noqa: BLE001 - counted by the caller, never fatal
        return base, False
    if not isinstance(answer, str):
        return base, False
    summary_match = _SUMMARY.search(answer)
    summary = (summary_match.group(1) if summary_match else answer).strip()
    title_match = _TITLE.search(answer)
    title = title_match.group(1).splitlines()[0].strip() if title_match else base.title
    if summary_match is None and (title_match is not None or len(summary.split()) < 5):
        return base, False
    if len(summary.split()) < 3:
        return base, False
    text = truncate_tokens(f"{title}\n{summary}\nEntities: {', '.join(base.entities)}", max_tokens, encoding_name)
    return CommunityReport(base.community, base.level, title, text, base.entities, base.passages,
                           count_tokens(text, encoding_name), "llm", base.rank), True
