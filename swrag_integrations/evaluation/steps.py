"""Context-quality steps of the evaluation: what happens between retrieval and the context.

`ContextSteps` names the techniques of `swrag_integrations.methods.context` switched
on for a run (``swrag eval --diversity --litm --rse --rerank embedding --contextual
--autocontext``); its `ContextSteps.label` becomes part of every record's key
(so a rerun resumes and tables show each combination as its own row).

Post-retrieval steps work on the pipeline's ranked candidate list
(``pipeline.retrieve()`` → ``[(source_id, start, end), ...]``) and are applied in this
order (`steps_context`):

1. ``rerank`` (``embedding``: `swrag_integrations.methods.context.rerank.EmbeddingRescorer`,
   cosine of the question to the best 128-token piece of each candidate; ``llm``:
   `swrag_integrations.methods.context.rerank.LLMJudgeRescorer`, P(yes) of the LLM) re-sorts the
   top ``pool`` candidates; the rest follow in their retrieval order.
2. ``diversity`` (``greedy``: Haystack's greedy diversity order; ``mmr``: MMR with
   lambda 0.5, `greedy_diversity_order` /
   `mmr_order`) re-orders the top ``pool`` candidates;
   the rest follow. A candidate's vector is the mean of its 128-token pieces' vectors
   (MiniLM truncates at 256 word pieces, so a 512-token window embedded at once would
   be judged on its head).
3. ``rse`` (`swrag_integrations.methods.context.rse.SegmentExtractor`, preset
   ``balanced``, budget = the run's budget) turns the top ``pool`` candidates into
   contiguous segments of chunks; the context is these segments only (as in dsRAG).
4. the context is assembled under the budget (by offset; stock LangChain by text);
5. ``litm`` (`litm_order`) re-orders the assembled
   pieces: best first, second best last. It runs *after* the budget selection, so the
   same text is in the context and context recall cannot change: LITM is meant for the
   LLM reading the context, not for retrieval.

RSE support. RSE needs chunks with a ``source_id`` and a ``chunk_index`` and a way to
fetch the chunks that were not retrieved. The span pipelines (``ffs``, ``dfs``, ``dds``,
``rcs``) keep their chunk list (``pipeline.spans``): a chunk's index is its position
among its source's chunks (sorted by start). RSE needs chunks that tile the source, but
sliding windows overlap (and RCS chunks leave whitespace gaps), so RSE runs over
*tiles* ``[start_i, start_{i+1})`` (the last tile ends with its chunk), and a chosen
segment of tiles ``i..j`` is mapped back to the union of chunks ``i..j``
(``[start_i, max end])``. Chunk relevance is the BM25 score of the pipeline (single
query; ``score_normalization="auto"``: zero-score chunks get ``-penalty``) or, with
multi-query (RRF ranking), the rank alone. ``parent`` (its retriever returns windows
already merged under the budget) and ``langchain-stock`` (no offsets-only chunk list)
raise `StepNotSupported`.

Index-time steps: ``contextual`` / ``autocontext``
(`ContextualChunkHeaders`, mode ``contextual`` = one
LLM call per chunk, ``auto`` = one per document) put a header in front of each chunk's
text *for BM25 indexing only* (`text_to_index`); the
offsets, hence the assembled context, are the exact source text. Supported by the span
pipelines; headers are cached in ``<out>/cache/headers.sqlite``.

`piece_diversity` is the evaluation's redundancy measure: the mean pairwise cosine
distance (`mean_pairwise_cosine_distance`) of the
assembled context's pieces (merged blocks), each embedded as the mean of its 128-token
pieces' vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.evaluation.context import DEFAULT_BUDGET, SEPARATOR, AssembledContext, assemble_by_offset, assemble_by_text, context_from_spans

__all__ = [
    "ContextSteps",
    "StepNotSupported",
    "DEFAULT_POOL",
    "RSE_STRATEGIES",
    "HEADER_STRATEGIES",
    "steps_context",
    "apply_rerank",
    "apply_diversity",
    "apply_rse",
    "litm_context",
    "piece_vectors",
    "piece_diversity",
    "add_headers",
    "StepTools",
    "make_tools",
]

DEFAULT_POOL = 10  # candidates re-ordered by rerank / diversity / RSE (about 3x what fits 1500 tokens at 512-token windows)
PIECE_TOKENS = 128
RSE_STRATEGIES = ("ffs", "dfs", "dds", "rcs")
HEADER_STRATEGIES = ("ffs", "dfs", "dds", "rcs")
DIVERSITY_MODES = ("greedy", "mmr")
RERANK_MODES = ("embedding", "llm")


class StepNotSupported(ValueError):
    """A step was asked of a pipeline that cannot do it."""


@dataclass(frozen=True)
class ContextSteps:
    """The context-quality techniques of one run.

    Args:
        diversity: ``None``, ``"greedy"`` or ``"mmr"``.
        litm: lost-in-the-middle order of the assembled pieces.
        rse: relevant segment extraction (span pipelines only).
        rerank: ``None``, ``"embedding"`` or ``"llm"``.
        headers: ``None``, ``"contextual"`` or ``"auto"`` (index-time chunk headers).
        pool: candidates given to rerank / diversity / RSE.
    """

    diversity: str | None = None
    litm: bool = False
    rse: bool = False
    rerank: str | None = None
    headers: str | None = None
    pool: int = DEFAULT_POOL

    def __post_init__(self) -> None:
        if self.diversity not in (None, *DIVERSITY_MODES):
            raise ValueError(f"diversity must be one of {DIVERSITY_MODES} or None, got {self.diversity!r}")
        if self.rerank not in (None, *RERANK_MODES):
            raise ValueError(f"rerank must be one of {RERANK_MODES} or None, got {self.rerank!r}")
        if self.headers not in (None, "contextual", "auto"):
            raise ValueError(f"headers must be 'contextual', 'auto' or None, got {self.headers!r}")
        if isinstance(self.pool, bool) or not isinstance(self.pool, int) or self.pool <= 0:
            raise ValueError(f"pool must be a positive int, got {self.pool!r}")

    @property
    def names(self) -> list[str]:
        """Step names in the order they act (index time first)."""
        out = []
        if self.headers == "contextual":
            out.append("contextual")
        elif self.headers == "auto":
            out.append("autocontext")
        if self.rerank:
            out.append(f"rerank-{self.rerank}")
        if self.diversity:
            out.append("diversity" if self.diversity == "greedy" else "diversity-mmr")
        if self.rse:
            out.append("rse")
        if self.litm:
            out.append("litm")
        return out

    @property
    def post_retrieval(self) -> bool:
        return bool(self.rerank or self.diversity or self.rse or self.litm)

    @property
    def label(self) -> str:
        """``""`` for the baseline, else e.g. ``"rerank-embedding+diversity"`` (``@pool``
        appended when the pool is not the default)."""
        label = "+".join(self.names)
        if label and self.pool != DEFAULT_POOL and (self.rerank or self.diversity or self.rse):
            label += f"@{self.pool}"
        return label

    def as_record(self) -> dict:
        """Fields stored in every record / summary row."""
        return {
            "steps": self.label,
            "diversity": self.diversity,
            "litm": self.litm,
            "rse": self.rse,
            "rerank": self.rerank,
            "headers": self.headers,
        }

    def check(self, strategy: str) -> None:
        """Raise `StepNotSupported` when ``strategy``'s pipeline cannot run these steps."""
        if self.rse and strategy not in RSE_STRATEGIES:
            raise StepNotSupported(
                f"--rse needs a pipeline with a chunk list (source_id + chunk_index): {', '.join(RSE_STRATEGIES)}; "
                f"{strategy!r} returns {'windows already merged under the budget' if strategy == 'parent' else 'chunk texts'}"
            )
        if self.headers and strategy not in HEADER_STRATEGIES:
            raise StepNotSupported(
                f"--{'contextual' if self.headers == 'contextual' else 'autocontext'} is implemented for the BM25 span "
                f"pipelines ({', '.join(HEADER_STRATEGIES)}), not {strategy!r}"
            )


# ----------------------------------------------------------------------- vectors


def piece_vectors(texts: Sequence[str], embeddings, piece_tokens: int = PIECE_TOKENS,
                  encoding_name: str = DEFAULT_ENCODING) -> np.ndarray:
    """One unit vector per text: the normalised mean of its ``piece_tokens`` pieces' vectors."""
    from swrag_integrations.methods.context._common import sentence_pieces, unit_normalize

    owners: list[int] = []
    pieces: list[str] = []
    for i, text in enumerate(texts):
        parts = sentence_pieces(text, piece_tokens, encoding_name) or [text or " "]
        pieces.extend(parts)
        owners.extend([i] * len(parts))
    if not pieces:
        return np.zeros((0, 0))
    vectors = unit_normalize(embeddings.embed_documents(pieces))
    owners_arr = np.asarray(owners)
    out = np.stack([vectors[owners_arr == i].mean(axis=0) for i in range(len(texts))])
    return unit_normalize(out)


def piece_diversity(texts: Sequence[str], embeddings, encoding_name: str = DEFAULT_ENCODING) -> float | None:
    """Mean pairwise cosine distance of ``texts`` (context pieces); ``None`` for < 2 pieces."""
    from swrag_integrations.methods.context.ordering import mean_pairwise_cosine_distance

    texts = [t for t in texts if t and t.strip()]
    if len(texts) < 2:
        return None
    return mean_pairwise_cosine_distance(piece_vectors(texts, embeddings, encoding_name=encoding_name))


# ------------------------------------------------------------------- the steps

Span = tuple[str, int, int]


def _span_text(texts: Mapping[str, str], span: Span) -> str:
    sid, a, b = span
    return texts[sid][max(0, a) : max(0, b)]


def apply_rerank(question: str, ranked: Sequence[Span], texts: Mapping[str, str], reranker, pool: int) -> list[Span]:
    """Top ``pool`` re-sorted by ``reranker`` (a core `swrag_integrations.methods.context.rerank.Rescorer`,
    or anything with ``rerank(query, documents)``), on framework-free documents."""
    from swrag_integrations.stores.storage import PlainDocument

    head, tail = list(ranked[:pool]), list(ranked[pool:])
    if len(head) < 2:
        return head + tail
    docs = [PlainDocument(page_content=_span_text(texts, s) or " ", metadata={"pos": i}) for i, s in enumerate(head)]
    out = reranker.rerank(question, docs)
    return [head[d.metadata["pos"]] for d in out] + tail


def apply_diversity(question: str, ranked: Sequence[Span], texts: Mapping[str, str], embeddings, pool: int,
                    mode: str = "greedy", lambda_mult: float = 0.5,
                    encoding_name: str = DEFAULT_ENCODING) -> list[Span]:
    """Top ``pool`` in greedy-diversity (or MMR) order; the rest follow."""
    from swrag_integrations.methods.context.ordering import greedy_diversity_order, mmr_order
    from swrag_integrations.methods.context._common import unit_normalize

    head, tail = list(ranked[:pool]), list(ranked[pool:])
    if len(head) < 2:
        return head + tail
    vectors = piece_vectors([_span_text(texts, s) for s in head], embeddings, encoding_name=encoding_name)
    query = unit_normalize(embeddings.embed_query(question))[0]
    order = greedy_diversity_order(query, vectors) if mode == "greedy" else mmr_order(query, vectors, lambda_mult)
    return [head[i] for i in order] + tail


def _span_scores(pipeline, question: str, queries: Sequence[str]) -> dict[Span, float] | None:
    """BM25 score of every chunk of a span pipeline (single query), else ``None``."""
    index = getattr(pipeline, "index", None)
    spans = getattr(pipeline, "spans", None)
    if queries or index is None or spans is None or not hasattr(index, "search") or not question.strip():
        return None
    scores = {s: 0.0 for s in spans}
    for i, score in index.search(question, k=len(spans)):
        scores[spans[int(i)]] = float(score)
    return scores


def apply_rse(question: str, ranked: Sequence[Span], pipeline, pool: int, budget: int,
              queries: Sequence[str] = (), encoding_name: str = DEFAULT_ENCODING, preset: str = "balanced") -> list[Span]:
    """Segments (as spans, best first) of the top ``pool`` candidates (see module doc), by the
    core `swrag_integrations.methods.context.rse.SegmentExtractor` on the chunks' spans."""
    from swrag_integrations.engine.assemble import ContextSpan
    from swrag_integrations.methods.context.rse import SegmentExtractor

    spans = getattr(pipeline, "spans", None)
    if spans is None:
        raise StepNotSupported(
            f"--rse needs a pipeline with a chunk list: {type(pipeline).__name__} has no 'spans' "
            f"(supported strategies: {', '.join(RSE_STRATEGIES)})"
        )
    texts = pipeline.texts
    chunks: dict[str, list[tuple[int, int]]] = {}
    for sid, a, b in spans:
        chunks.setdefault(sid, []).append((a, b))
    index_of: dict[Span, int] = {}
    tiles: dict[str, list[tuple[int, int]]] = {}
    ends: dict[str, list[int]] = {}
    for sid, items in chunks.items():
        items = sorted(set(items))
        # one tile per distinct start; the chunk ending latest among equal starts counts
        starts: list[int] = []
        last_end: list[int] = []
        for a, b in items:
            if starts and starts[-1] == a:
                last_end[-1] = max(last_end[-1], b)
            else:
                starts.append(a)
                last_end.append(b)
        position = {a: i for i, a in enumerate(starts)}
        for a, b in items:
            index_of[(sid, a, b)] = position[a]
        tiles[sid] = [(starts[i], starts[i + 1] if i + 1 < len(starts) else last_end[i]) for i in range(len(starts))]
        ends[sid] = last_end

    def fetch(source_id: str, lo: int, hi: int):
        rows = []
        for i in range(max(0, lo), min(hi, len(tiles[source_id]) - 1) + 1):
            a, b = tiles[source_id][i]
            rows.append((i, a, b, texts[source_id][a:b]))
        return rows

    scores = _span_scores(pipeline, question, queries)
    candidates = []
    for span in ranked[:pool]:
        if span not in index_of:
            raise StepNotSupported(f"--rse: candidate {span} is not one of the pipeline's chunks")
        sid = span[0]
        i = index_of[span]
        a, b = tiles[sid][i]
        candidates.append(ContextSpan(sid, a, b, texts[sid][a:b], metadata={"chunk_index": i},
                                      score=scores.get(span, 0.0) if scores is not None else None))
    extractor = SegmentExtractor(
        preset=preset, chunks=fetch, budget_tokens=budget, encoding_name=encoding_name,
        score_normalization="auto" if scores is not None else "rank",
    )
    out = []
    for seg in extractor.extract(candidates):
        sid = seg.source_id
        start = tiles[sid][seg.first_chunk][0]
        end = max(ends[sid][seg.first_chunk : seg.last_chunk + 1])
        out.append((sid, start, end))
    return out


def litm_context(ctx: AssembledContext, texts: Mapping[str, str], separator: str = SEPARATOR,
                 encoding_name: str = DEFAULT_ENCODING) -> AssembledContext:
    """The assembled pieces in lost-in-the-middle order (same pieces, same text)."""
    from swrag_integrations.methods.context.ordering import litm_order

    if len(ctx.spans) < 3:
        return ctx
    spans = [ctx.spans[i] for i in litm_order(len(ctx.spans))]
    return context_from_spans(spans, ctx.budget_tokens, separator=separator, truncated=ctx.truncated,
                              encoding_name=encoding_name)


@dataclass
class StepTools:
    """What the steps need: the embedder (diversity, embedding rerank, measure) and the
    reranker (a framework-free core, built once per run)."""

    embeddings: Any = None
    reranker: Any = None


def make_tools(steps: ContextSteps, *, embeddings=None, llm=None) -> StepTools:
    reranker = None
    if steps.rerank == "embedding":
        from swrag_integrations.methods.context.rerank import EmbeddingRescorer

        reranker = EmbeddingRescorer(embeddings=embeddings)
    elif steps.rerank == "llm":
        from swrag_integrations.methods.context.rerank import LLMJudgeRescorer

        reranker = LLMJudgeRescorer(llm=llm)
    return StepTools(embeddings=embeddings, reranker=reranker)


def steps_context(pipeline, question: str, steps: ContextSteps, tools: StepTools, budget: int = DEFAULT_BUDGET,
                  queries: Sequence[str] = ()) -> AssembledContext:
    """The budgeted context of ``pipeline`` for ``question`` with ``steps`` applied."""
    if not steps.post_retrieval:
        return pipeline.context(question, budget, queries)
    strategy = getattr(getattr(pipeline, "config", None), "strategy", None)
    if strategy is not None:
        steps.check(strategy)
    encoding_name = getattr(pipeline, "encoding_name", DEFAULT_ENCODING)
    texts = pipeline.texts
    ranked = [s for s in pipeline.retrieve(question, queries) if s[0] in texts and s[2] > s[1] >= 0]
    if steps.rerank:
        ranked = apply_rerank(question, ranked, texts, tools.reranker, steps.pool)
    if steps.diversity:
        ranked = apply_diversity(question, ranked, texts, tools.embeddings, steps.pool, steps.diversity,
                                 encoding_name=encoding_name)
    if steps.rse:
        ranked = apply_rse(question, ranked, pipeline, steps.pool, budget, queries, encoding_name=encoding_name)
    if getattr(pipeline, "assembly", "offset") == "text":
        ctx = assemble_by_text([_span_text(texts, s) for s in ranked], budget, spans=ranked, encoding_name=encoding_name)
    else:
        ctx = assemble_by_offset(ranked, texts, budget, encoding_name=encoding_name)
    if steps.litm:
        ctx = litm_context(ctx, texts, encoding_name=encoding_name)
    return ctx


# -------------------------------------------------------------- index-time steps


def add_headers(pipeline, headerer) -> dict:
    """Re-index a span pipeline's BM25 over ``header + chunk`` texts.

    ``headerer`` is a `swrag_integrations.methods.context.headers.ChunkHeaderWriter` (or its
    LangChain face ``ContextualChunkHeaders``); each
    source's chunks are annotated (one call per chunk in ``contextual`` mode, one per
    document in ``auto`` mode; cached). Offsets are unchanged. Returns the header
    report as a dict (chunks, with_header, llm_calls, cached, failed, seconds...).
    """
    from swrag_integrations.methods.context.headers import text_to_index
    from swrag_integrations.evaluation.pipelines import _bm25_bytes, _bm25_index

    spans = getattr(pipeline, "spans", None)
    if spans is None or not hasattr(pipeline, "index"):
        raise StepNotSupported(f"chunk headers need a BM25 span pipeline ({', '.join(HEADER_STRATEGIES)})")
    from swrag_integrations.stores.storage import PlainDocument

    by_source: dict[str, list[int]] = {}
    for pos, (sid, _a, _b) in enumerate(spans):
        by_source.setdefault(sid, []).append(pos)
    headers: list[str | None] = [None] * len(spans)
    totals: dict[str, float] = {}
    titles = {s.source_id: getattr(s, "title", "") for s in getattr(pipeline, "sources", [])}
    for sid, positions in by_source.items():
        meta = {"source_id": sid}
        if titles.get(sid):
            meta["title"] = titles[sid]
        doc = PlainDocument(page_content=pipeline.texts[sid], metadata=meta)
        annotated = headerer.annotate(doc, [(spans[p][1], spans[p][2]) for p in positions])
        for p, chunk in zip(positions, annotated):
            headers[p] = (chunk.metadata or {}).get("context_header")
        for key, value in headerer.last_report.as_dict().items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    if spans:
        pipeline.index = _bm25_index([text_to_index(pipeline.texts[s][a:b], h) for (s, a, b), h in zip(spans, headers)])
        pipeline.index_bytes = pipeline.chunks * 20 + _bm25_bytes(pipeline.index)
    pipeline.headers = headers
    return totals
