"""Context assembly under a token budget, for the evaluation.

Both functions return the package's one
`AssembledContext` (``.text``,
``.spans``, ``.offsets``, ``.text_tokens``):

* `assemble_by_offset` is the sliding-window way: retrieved spans are merged by
  character offset (the union of overlapping or touching spans of one source), in rank
  order, until the budget is full, so overlapping windows never pay twice for the same
  text (`assemble_context`);
* `assemble_by_text` is the stock way: chunk texts concatenated in rank order.

Both cut the last piece so the context never exceeds ``budget`` tokens.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from swrag_integrations.engine.assemble import AssembledContext, ContextSpan, assemble_context, count_tokens
from swrag_integrations.engine.settings import DEFAULT_BUDGET_TOKENS
from swrag_integrations.core.windows import DEFAULT_ENCODING, get_encoding

__all__ = ["AssembledContext", "assemble_by_offset", "assemble_by_text", "count_tokens", "DEFAULT_BUDGET",
           "SEPARATOR", "context_from_spans"]

DEFAULT_BUDGET = DEFAULT_BUDGET_TOKENS  # the retriever's default budget (retrieval/settings.py)
SEPARATOR = "\n\n"


def _empty(budget: int, separator: str) -> AssembledContext:
    return AssembledContext(spans=[], n_tokens=0, budget_tokens=budget, truncated=False, separator=separator,
                            text_tokens=0)


def context_from_spans(spans: Sequence[ContextSpan], budget: int | None, *, separator: str = SEPARATOR,
                       truncated: bool = False, encoding_name: str = DEFAULT_ENCODING) -> AssembledContext:
    """An `AssembledContext` of spans kept as they are (no merging)."""
    text = separator.join(s.text for s in spans)
    return AssembledContext(spans=list(spans), n_tokens=sum(count_tokens(s.text, encoding_name) for s in spans),
                            budget_tokens=budget, truncated=truncated, separator=separator,
                            text_tokens=count_tokens(text, encoding_name))


def assemble_by_offset(
    ranked: Iterable[tuple[str, int, int]],
    texts: Mapping[str, str],
    budget: int = DEFAULT_BUDGET,
    *,
    encoding_name: str = DEFAULT_ENCODING,
    separator: str = SEPARATOR,
) -> AssembledContext:
    """Merge ranked ``(source_id, start, end)`` spans by offset and fill the budget.

    The budget covers the final text *including* the separators (the lowest-ranked
    block is trimmed until the joined text fits). Returns merged blocks in the order of
    their best rank, each exact source text.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if budget == 0:
        return _empty(budget, separator)
    items = []
    for src, a, b in ranked:
        a, b = max(0, a), min(len(texts[src]), b)
        if b > a:
            items.append((src, a, b, texts[src][a:b]))
    result = assemble_context(items, budget, encoding_name=encoding_name, separator=separator)
    if result.text_tokens is not None and result.text_tokens > budget:  # assemble_context guarantees it never is
        raise RuntimeError(f"assembled context has {result.text_tokens} tokens, budget {budget}")
    return result


def assemble_by_text(
    chunks: Sequence[str],
    budget: int = DEFAULT_BUDGET,
    *,
    spans: Sequence[tuple[str, int, int]],
    encoding_name: str = DEFAULT_ENCODING,
    separator: str = SEPARATOR,
) -> AssembledContext:
    """Concatenate chunk texts in rank order until ``budget`` tokens (stock behaviour).

    Duplicate texts are kept as they come (overlapping chunks cost their overlap
    twice). The first chunk that does not fit whole is cut to its longest fitting
    prefix and assembly stops. ``spans`` (parallel to ``chunks``) are their offsets;
    a cut chunk's span is shortened accordingly.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if len(spans) != len(chunks):
        raise ValueError(f"got {len(spans)} spans for {len(chunks)} chunks")
    enc = get_encoding(encoding_name)
    parts: list[ContextSpan] = []
    truncated = False

    def cost(items: list[str]) -> int:
        return len(enc.encode_ordinary(separator.join(items)))

    for chunk, (sid, start, _end) in zip(chunks, spans):
        if not chunk:
            continue
        texts = [p.text for p in parts]
        if cost(texts + [chunk]) <= budget:
            parts.append(ContextSpan(sid, start, start + len(chunk), chunk, rank=len(parts) + 1))
            continue
        lo, hi = 0, len(chunk)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if cost(texts + [chunk[:mid]]) <= budget:
                lo = mid
            else:
                hi = mid
        if lo > 0:
            parts.append(ContextSpan(sid, start, start + lo, chunk[:lo], rank=len(parts) + 1))
        truncated = True
        break
    return context_from_spans(parts, budget, separator=separator, truncated=truncated, encoding_name=encoding_name)
