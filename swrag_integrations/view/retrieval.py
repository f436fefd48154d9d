"""A question against an index, as one HTML page: what matched, what it widened to,
what the budget kept, and what was cut.

Stage 1 (`search_children`)
gives small-chunk hits with each ranker's rank (``bm25_rank``/``bm25_score``,
``dense_rank``) and the fused ``rrf_score``; each hit knows its window (``lower``/``upper``
chunks, ``window_start``/``window_end``). Stages 2-3 (`spans_for`) group hits into parents and merge spans by offset under the token
budget. The page shows the hits (with their status: in the context, trimmed, or cut),
the parents, the final spans, and per source the text around them: final context
shaded green, hit chunks underlined (cut ones with a red wavy line), the widened windows
as bands.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Mapping, Sequence

import numpy as np

from swrag_integrations.engine.assemble import ContextSpan, count_tokens
from swrag_integrations.engine.protocols import ChildHit
from swrag_integrations.engine.settings import RetrieverSettings
from swrag_integrations.engine.trace import HitStatus, RetrievalTrace, hit_status, piece_span, trace  # noqa: F401  (HitStatus: re-exported)
from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.view.html import (MAX_LANES, View, assign_lanes, check_range, coverage, fmt_int, label, lane_css, lane_masks,
                   merge_ranges, page, pieces_from_texts, render_doc, text_at)

__all__ = ["RetrievalView", "HitStatus", "hit_status"]

STATUS_LABELS = {"in": "in context", "part": "trimmed", "cut": "cut"}


def _name(meta: Mapping[str, Any], source_id: str) -> str:
    source = meta.get("source")
    if source is None:
        return source_id
    name = PurePath(str(source)).name
    return name or str(source)


def _score(value: Any) -> str:
    if value is None:
        return "\u2013"
    try:
        return f"{float(value):.4f}"
    except (TypeError, ValueError):
        return label(value)


class RetrievalView(View):
    """A question against an index: hits, windows, parents, final spans, cuts.

    Build it with `from_index` (runs the retrieval the way
    `WindowedParentRetriever` does) or
    `from_retriever` (with that retriever's settings), or give the parts:

    Args:
        question: the question.
        hits: stage-1 hits (`ChildHit`).
        spans: the final spans (`ContextSpan`,
            e.g. from `spans_for`).
        sources: ``source_id -> full source text``; a source without one is drawn from
            the spans' own texts (excerpts only), and its hits must lie inside them.
        bases: ``source_id -> source offset`` where a text of ``sources`` starts (0 when
            absent; an index's joined record: `source_piece`).
        parents: the parents of stage 2 (optional; ``rank_parents`` candidates).
        budget_tokens: the token budget (for the header).
        settings: retrieval settings shown in the header.
        context_chars: characters of text shown around each window.
        encoding_name: tiktoken encoding of the token counts.

    Raises:
        TypeError: ``question`` is not a ``str``.
        ValueError: ``context_chars`` is negative; a hit, window or span lies outside its source text, or a span's text
            is not ``source[start:end]``; spans of a source disagree where they overlap; a
            hit lies outside the spans of a source given without its text.
    """

    notebook_height = 760

    def __init__(self, question: str, hits: Sequence[ChildHit], spans: Sequence[ContextSpan],
                 sources: Mapping[str, str] | None = None, *, parents: Sequence[Any] | None = None,
                 budget_tokens: int | None = None, settings: Mapping[str, Any] | None = None,
                 context_chars: int = 240, encoding_name: str = DEFAULT_ENCODING,
                 bases: Mapping[str, int] | None = None):
        if not isinstance(question, str):
            raise TypeError(f"question must be a str, got {type(question).__name__}")
        if isinstance(context_chars, bool) or not isinstance(context_chars, int) or context_chars < 0:
            raise ValueError(f"context_chars must be an int >= 0, got {context_chars!r}")
        self.question = question
        self.hits = list(hits)
        self.spans = list(spans)
        self.parents = list(parents) if parents is not None else None
        self.sources = dict(sources or {})
        self.bases = {sid: int(b) for sid, b in (bases or {}).items()}
        self.budget_tokens = budget_tokens
        self.settings = dict(settings or {})
        self.context_chars = context_chars
        self.encoding_name = encoding_name
        self._check()

    # ------------------------------------------------------------------ building
    @classmethod
    def from_trace(cls, traced: RetrievalTrace, *, context_chars: int = 240) -> "RetrievalView":
        """The view of a `RetrievalTrace` (what
        `trace` or a retriever's ``trace`` returns)."""
        settings = {k: v for k, v in traced.settings.to_dict().items() if k != "rrf_c"}
        if traced.filter is not None:
            settings["filter"] = traced.filter
        return cls(traced.question, traced.hits, traced.spans, traced.sources, parents=traced.parents,
                   budget_tokens=traced.settings.budget_tokens, settings=settings, context_chars=context_chars,
                   encoding_name=traced.encoding_name, bases=traced.bases)

    @classmethod
    def from_index(cls, index: Any, question: str, *, context_chars: int = 240, filter: Any = None,
                   **settings: Any) -> "RetrievalView":
        """Retrieve for ``question`` from ``index`` (`trace`)
        with the retriever's settings (``k_child``, ``budget_tokens``, ``k``, ``expand``,
        ``search_type``, ``weights``, ``rrf_c``: `RetrieverSettings`,
        its defaults where not given) and view every step."""
        chosen = RetrieverSettings.from_kwargs(settings, where="RetrievalView.from_index()")
        return cls.from_trace(trace(index, question, chosen, filter=filter), context_chars=context_chars)

    @classmethod
    def from_retriever(cls, retriever: Any, question: str, *, context_chars: int = 240,
                       **overrides: Any) -> "RetrievalView":
        """`from_trace` of a ``WindowedParentRetriever``'s ``trace`` (its index, settings and
        filter; keywords override the settings, e.g. ``budget_tokens=800``)."""
        return cls.from_trace(retriever.trace(question, **overrides), context_chars=context_chars)

    @classmethod
    def from_spans(cls, spans: Any, question: str = "", *, budget_tokens: int | None = None,
                   sources: Mapping[str, str] | None = None,
                   encoding_name: str = DEFAULT_ENCODING) -> "RetrievalView":
        """A view of retrieved spans alone: an ``AssembledContext``, ``ContextSpan`` s, or
        LangChain Documents with ``source_id``/``source`` and ``start_index``/``end_index``
        metadata (e.g. what ``WindowedParentRetriever.invoke`` returns). Without
        ``sources`` each source is drawn from the spans' texts."""
        if hasattr(spans, "spans") and hasattr(spans, "budget_tokens"):  # an AssembledContext
            budget_tokens = spans.budget_tokens if budget_tokens is None else budget_tokens
            spans = spans.spans
        items = [s if isinstance(s, ContextSpan) else ContextSpan.from_document(s, rank=i)
                 for i, s in enumerate(spans, 1)]
        return cls(question, [], items, sources, budget_tokens=budget_tokens, encoding_name=encoding_name)

    def _check(self) -> None:
        self._pieces: dict[str, list[tuple[int, str]]] = {}
        for sid in dict.fromkeys(s.source_id for s in self.spans):
            if sid not in self.sources:
                self._pieces[sid] = pieces_from_texts(((s.start, s.text) for s in self.spans if s.source_id == sid),
                                                      f"spans of source {sid!r}")

        def check(sid: str, start: int, end: int, what: str) -> None:
            if sid in self.sources:
                check_range(start, end, len(self.sources[sid]), what, self.bases.get(sid, 0))
            elif sid not in self._pieces:
                raise ValueError(f"{what}: no text given for source {sid!r}")
            elif text_at(self._pieces[sid], start, end) is None:
                raise ValueError(f"{what}: span {start}:{end} lies outside the spans given for source {sid!r} "
                                 "(pass its text in sources)")

        for hit in self.hits:
            what = f"hit {hit.rank} (source {hit.source_id!r}, chunk {hit.chunk_index})"
            check(hit.source_id, hit.start, hit.end, what)
            check(hit.source_id, hit.window_start, hit.window_end, what + " window")
        for i, span in enumerate(self.spans, 1):
            what = f"span {i} (source {span.source_id!r})"
            if span.source_id in self.sources:
                text, base = self.sources[span.source_id], self.bases.get(span.source_id, 0)
                a, b = check_range(span.start, span.end, len(text), what, base)
                if piece_span(base, text, a, b) != span.text:
                    raise ValueError(f"{what}: its text is not the source's characters {a}:{b}")
        for i, cand in enumerate(self.parents or [], 1):
            check(cand.source_id, cand.start, cand.end, f"parent {i} (source {cand.source_id!r})")

    # ----------------------------------------------------------------- rendering
    def _source_order(self) -> list[str]:
        order = [h.source_id for h in sorted(self.hits, key=lambda h: h.rank)] + [s.source_id for s in self.spans]
        return list(dict.fromkeys(order))

    def _names(self) -> dict[str, str]:
        names: dict[str, str] = {}
        for hit in self.hits:
            names.setdefault(hit.source_id, _name(hit.metadata, hit.source_id))
        for span in self.spans:
            names.setdefault(span.source_id, _name(span.metadata, span.source_id))
        return names

    def _source_block(self, sid: str, doc: str, name: str, masks_used: set[int]) -> str:
        text = self.sources.get(sid)
        hits = [h for h in self.hits if h.source_id == sid]
        spans = [s for s in self.spans if s.source_id == sid]
        parents = [c for c in (self.parents or []) if c.source_id == sid]
        windows = sorted({(h.window_start, h.window_end) for h in hits})
        w_starts = [a for a, _ in windows]
        w_ends = [b for _, b in windows]
        lanes, needed = assign_lanes(w_starts, w_ends)
        n_lanes = min(max(needed, 1), MAX_LANES)
        kept_hits = [h for h in hits if hit_status(h, self.spans).status == "in"]
        lost_hits = [h for h in hits if hit_status(h, self.spans).status != "in"]
        ranges = [(a, b) for a, b in windows] + [(s.start, s.end) for s in spans] + \
                 [(h.start, h.end) for h in hits] + [(c.start, c.end) for c in parents]
        pad = self.context_chars
        if text is not None:
            base = self.bases.get(sid, 0)
            excerpts = merge_ranges(((max(base, a - pad), min(base + len(text), b + pad)) for a, b in ranges), touch=1)
            pieces = [(a, piece_span(base, text, a, b)) for a, b in excerpts]
        else:
            pieces = self._pieces[sid]
        cuts = [x for r in ranges for x in r]

        def classes(seg_a: np.ndarray, seg_b: np.ndarray) -> list[str]:
            ctx = coverage(seg_a, seg_b, [s.start for s in spans], [s.end for s in spans]) > 0
            hit_in = coverage(seg_a, seg_b, [h.start for h in kept_hits], [h.end for h in kept_hits]) > 0
            hit_out = coverage(seg_a, seg_b, [h.start for h in lost_hits], [h.end for h in lost_hits]) > 0
            in_win = coverage(seg_a, seg_b, w_starts, w_ends) > 0
            masks = lane_masks(seg_a, seg_b, w_starts, w_ends, lanes)
            masks_used.update(np.unique(masks).tolist())
            out = []
            for c, hi, ho, w, m in zip(ctx.tolist(), hit_in.tolist(), hit_out.tolist(), in_win.tolist(),
                                       masks.tolist()):
                parts = ["ctx" if c else ("win" if w else "out")]
                if ho and not c:
                    parts.append("cut")
                elif hi or ho:
                    parts.append("hit")
                if m:
                    parts.append(f"m{m}")
                out.append(" ".join(parts))
            return out

        end = None if text is None else self.bases.get(sid, 0) + len(text)
        doc_html = render_doc(doc, pieces, cuts, classes, length=end, css_class=f"rv lanes{n_lanes}")
        in_ctx = sum(b - a for a, b in merge_ranges((s.start, s.end) for s in spans))
        size = "excerpts only" if text is None else f"{fmt_int(len(text))} characters"
        return (f'<div class="src-title"><h3>{label(name)}</h3><span class="meta">source id {label(sid)} \u00b7 '
                f"{size} \u00b7 {len(hits)} hit chunks \u00b7 {len(windows)} windows \u00b7 "
                f"{fmt_int(in_ctx)} characters in the context</span></div>{doc_html}")

    def _hits_table(self, doc_of: Mapping[str, str], names: Mapping[str, str]) -> str:
        rows = ['<div class="row head"><span class="num">rank</span><span>source</span><span class="num">chunk</span>'
                '<span class="num">characters</span><span class="num">RRF</span><span class="num">BM25 rank</span>'
                '<span class="num">dense rank</span><span>window (chunks, characters)</span><span>status</span></div>']
        for hit in sorted(self.hits, key=lambda h: (h.rank, h.source_id, h.chunk_index)):
            meta = hit.metadata or {}
            bm25 = meta.get("bm25_rank")
            bm25_text = "\u2013" if bm25 is None else label(bm25)
            if meta.get("bm25_score") is not None:
                bm25_text += f' <span class="meta">({float(meta["bm25_score"]):.2f})</span>'
            dense = meta.get("dense_rank")
            dense_text = "\u2013" if dense is None else label(dense)
            st = hit_status(hit, self.spans)
            status = st.status
            tag = STATUS_LABELS[status] + (f" {st.kept}/{st.size}" if status == "part" else "")
            doc = doc_of[hit.source_id]
            rows.append(
                f'<div class="row" tabindex="0" data-doc="{doc}" data-goto="{hit.start}:{hit.end}" '
                f'data-what="hit {hit.rank}, chunk {hit.chunk_index}">'
                f'<span class="num">{hit.rank}</span><span title="{label(hit.source_id)}">{label(names[hit.source_id])}'
                f'</span><span class="num">{hit.chunk_index}</span><span class="num">{hit.start}\u2013{hit.end}</span>'
                f'<span class="num">{_score(meta.get("rrf_score", hit.score))}</span><span class="num">{bm25_text}</span>'
                f'<span class="num">{dense_text}</span>'
                f'<span><a class="go" tabindex="0" data-doc="{doc}" data-goto="{hit.window_start}:{hit.window_end}" '
                f'data-what="window of hit {hit.rank}">{hit.lower}\u2013{hit.upper} '
                f'({hit.window_start}\u2013{hit.window_end})</a></span>'
                f'<span><span class="tag t-{status}">{tag}</span></span></div>')
        if not self.hits:
            return ('<p class="meta">No chunk matched.</p>' if self.parents is not None else
                    '<p class="meta">Spans only: no stage-1 hits were given.</p>')
        return '<div class="tbl hits">' + "".join(rows) + "</div>"

    def _parents_table(self, doc_of: Mapping[str, str], names: Mapping[str, str]) -> str:
        if not self.parents:
            return ""
        rows = ['<div class="row head"><span class="num">rank</span><span>source</span><span class="num">chunks</span>'
                '<span class="num">characters</span><span class="num">score</span><span>hit chunks</span>'
                '<span>kept</span></div>']
        for i, cand in enumerate(self.parents, 1):
            size = cand.end - cand.start
            kept = sum(max(0, min(b, cand.end) - max(a, cand.start))
                       for a, b in merge_ranges((s.start, s.end) for s in self.spans if s.source_id == cand.source_id))
            status = "in" if kept >= size else ("part" if kept else "cut")
            hit_chunks = ", ".join(str(h[0]) for h in sorted(cand.hits, key=lambda h: h[0]))
            rows.append(
                f'<div class="row" tabindex="0" data-doc="{doc_of[cand.source_id]}" data-goto="{cand.start}:{cand.end}" '
                f'data-what="parent {i}"><span class="num">{i}</span><span>{label(names.get(cand.source_id, cand.source_id))}'
                f'</span><span class="num">{cand.lower}\u2013{cand.upper}</span><span class="num">{cand.start}\u2013'
                f'{cand.end}</span><span class="num">{_score(cand.score)}</span><span>{label(hit_chunks)}</span>'
                f'<span><span class="tag t-{status}">{fmt_int(kept)}/{fmt_int(size)} chars</span></span></div>')
        return ('<h3>Parents: hits whose windows overlap or touch, grouped (stage 2)</h3>'
                '<div class="tbl parents">' + "".join(rows) + "</div>")

    def _spans_table(self, doc_of: Mapping[str, str], names: Mapping[str, str]) -> str:
        if not self.spans:
            return '<h3>Context</h3><p class="meta">No span fits the budget.</p>'
        rows = ['<div class="row head"><span class="num">rank</span><span>source</span><span class="num">characters</span>'
                '<span class="num">tokens</span><span class="num">score</span><span>hit chunks inside</span></div>']
        for i, span in enumerate(self.spans, 1):
            hit_chunks = span.metadata.get("hit_chunk_indices", [])
            rows.append(
                f'<div class="row" tabindex="0" data-doc="{doc_of[span.source_id]}" data-goto="{span.start}:{span.end}" '
                f'data-what="context span {i}"><span class="num">{span.rank if span.rank is not None else i}</span>'
                f'<span>{label(names.get(span.source_id, span.source_id))}</span><span class="num">{span.start}\u2013'
                f'{span.end}</span><span class="num">{count_tokens(span.text, self.encoding_name)}</span>'
                f'<span class="num">{_score(span.score)}</span><span>{label(", ".join(map(str, hit_chunks)))}</span></div>')
        return ('<h3>Context: spans merged by offset under the budget (stage 3)</h3>'
                '<div class="tbl spans">' + "".join(rows) + "</div>")

    def to_html(self) -> str:
        """The view as one self-contained HTML page (styles and script inline)."""
        names = self._names()
        order = self._source_order()
        doc_of = {sid: str(i) for i, sid in enumerate(order)}
        masks_used: set[int] = set()
        blocks = [self._source_block(sid, doc_of[sid], names.get(sid, sid), masks_used) for sid in order]
        context = "\n\n".join(s.text for s in self.spans)
        used = count_tokens(context, self.encoding_name)
        statuses = [hit_status(h, self.spans).status for h in self.hits]
        n_cut, n_part = statuses.count("cut"), statuses.count("part")
        budget = "no budget" if self.budget_tokens is None else f"budget {fmt_int(self.budget_tokens)}"
        settings = " \u00b7 ".join(f"{label(k)} {label(v)}" for k, v in self.settings.items() if v is not None)
        header = (
            f"<header><h1>Retrieval: {label(self.question)}</h1>"
            f'<div class="meta"><b>{len(self.hits)}</b> hit chunks \u00b7 '
            + (f"<b>{len(self.parents)}</b> parents \u00b7 " if self.parents is not None else "")
            + f"<b>{len(self.spans)}</b> context spans \u00b7 <b>{fmt_int(used)}</b> tokens of context ({budget}) \u00b7 "
            f'<span class="{"flag" if n_cut else ""}">{n_cut} hits cut</span>, {n_part} trimmed'
            + (f"<br>{settings}" if settings else "") + "</div></header>"
        )
        legend = ('<div class="toolbar"><span class="legend"><span class="sw ctx-sw"></span> in the context</span>'
                  '<span class="legend"><span class="sw hit-sw"></span> hit chunk in the context</span>'
                  '<span class="legend"><span class="sw cut-sw"></span> hit chunk cut by the budget</span>'
                  '<span class="legend"><span class="sw lane win-sw"></span> window of a hit (one line each)'
                  '</span><label><input type="checkbox" data-toggle="bands" checked> bands</label></div>')
        body = (
            f"{header}<main><section class=\"panel\"><h2>Matched chunks (stage 1: BM25 + dense, fused by RRF)</h2>"
            f'<div class="status">Click a row to show the chunk, a window to show the window.</div>'
            f"{self._hits_table(doc_of, names)}{self._parents_table(doc_of, names)}{self._spans_table(doc_of, names)}"
            f"<h2>Sources</h2>{legend}{''.join(blocks) or '<p class=meta>No source.</p>'}</section></main>"
        )
        css = [lane_css(masks_used)]
        css.extend(f".lanes{k}{{--lanes:{k}}}" for k in range(1, MAX_LANES + 1))
        css.extend(f'.sw[data-lane="{k}"]{{background:var(--c{k})}}' for k in range(MAX_LANES))
        css.append(".tbl.hits{--cols:3.5em minmax(6em,1.2fr) 4em 8em 5em 6.5em 6.5em minmax(10em,1.4fr) 8em}")
        css.append(".tbl.parents{--cols:3.5em minmax(6em,1.2fr) 6em 9em 5em minmax(6em,1fr) 9em}")
        css.append(".tbl.spans{--cols:3.5em minmax(6em,1.2fr) 9em 5em 5em minmax(6em,1fr)}")
        css.append(".ctx-sw{background:var(--ctx)}.hit-sw{background:#8ce99a}.cut-sw{background:#ffe3e3;"
                   "border-bottom:2px solid var(--cut)}.win-sw{background:#3b5bdb}h2{margin-top:12px}")
        return page(f"swrag view: {self.question}", body, css="\n".join(css))
