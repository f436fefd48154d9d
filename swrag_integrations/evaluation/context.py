"""Context assembly under a token budget.

:func:`assemble_by_offset` is the sliding-window way: retrieved spans are merged by
character offset (the union of overlapping or touching spans of one source), in rank
order, until the budget is full, so overlapping windows never pay twice for the same
text (helper :func:`swrag_integrations.retrieval.assemble.assemble_context`). :func:`assemble_by_text` is the stock way (chunk texts concatenated in rank
order). Both cut the last piece so the context never exceeds ``budget`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..windows import DEFAULT_ENCODING, get_encoding

__all__ = ["AssembledContext", "assemble_by_offset", "assemble_by_text", "count_tokens", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 1500
SEPARATOR = "\n\n"


@dataclass
class AssembledContext:
    """The context handed to the LLM and the exact spans it is made of."""

    text: str
    spans: list[tuple[str, int, int]] = field(default_factory=list)
    tokens: int = 0

    @property
    def sources(self) -> list[str]:
        """Source ids in context order (each once)."""
        return list(dict.fromkeys(src for src, _, _ in self.spans))


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Number of tiktoken tokens of ``text``."""
    return len(get_encoding(encoding_name).encode_ordinary(text)) if text else 0


def assemble_by_offset(
    ranked: Iterable[tuple[str, int, int]],
    texts: Mapping[str, str],
    budget: int = DEFAULT_BUDGET,
    *,
    encoding_name: str = DEFAULT_ENCODING,
    separator: str = SEPARATOR,
) -> AssembledContext:
    """Merge ranked spans by offset and fill the budget.

    Uses :func:`swrag_integrations.retrieval.assemble.assemble_context` (union of
    overlapping/adjacent spans per source, in rank order, last piece cut at a token
    boundary), which enforces the budget on the final text *including* the separators
    (it trims the lowest-ranked block until the joined text fits), so one call
    suffices.

    Args:
        ranked: ``(source_id, start, end)`` spans, best first.
        texts: source id -> source text.
        budget: maximum number of tokens of the returned context text.
        encoding_name: tiktoken encoding that counts the budget.
        separator: put between non-contiguous blocks.

    Returns:
        Merged blocks in the order of their best rank, each exact source text.
    """
    from ..retrieval.assemble import assemble_context

    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if budget == 0:
        return AssembledContext(text="", spans=[], tokens=0)
    items = []
    for src, a, b in ranked:
        a, b = max(0, a), min(len(texts[src]), b)
        if b > a:
            items.append((src, a, b, texts[src][a:b]))
    result = assemble_context(items, budget, encoding_name=encoding_name, separator=separator)
    text = result.text
    tokens = count_tokens(text, encoding_name)
    if tokens > budget:  # assemble_context guarantees this never happens
        raise RuntimeError(f"assembled context has {tokens} tokens, budget {budget}")
    return AssembledContext(text=text, spans=[(s.source_id, s.start, s.end) for s in result.spans], tokens=tokens)


def assemble_by_text(
    chunks: Sequence[str],
    budget: int = DEFAULT_BUDGET,
    *,
    spans: Sequence[tuple[str, int, int] | None] | None = None,
    encoding_name: str = DEFAULT_ENCODING,
    separator: str = SEPARATOR,
) -> AssembledContext:
    """Concatenate chunk texts in rank order until ``budget`` tokens (stock behaviour).

    Duplicate texts are kept as they come (overlapping chunks cost their overlap
    twice). The first chunk that does not fit whole is cut to its longest fitting
    prefix and assembly stops. ``spans`` (optional, parallel to ``chunks``) are
    reported for the chunks used; a cut chunk's span is shortened accordingly.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    enc = get_encoding(encoding_name)
    parts: list[str] = []
    used: list[tuple[str, int, int]] = []

    def cost(items):
        return len(enc.encode_ordinary(separator.join(items)))

    for pos, chunk in enumerate(chunks):
        if not chunk:
            continue
        span = spans[pos] if spans is not None else None
        if cost(parts + [chunk]) <= budget:
            parts.append(chunk)
            if span is not None:
                used.append(span)
            continue
        lo, hi = 0, len(chunk)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if cost(parts + [chunk[:mid]]) <= budget:
                lo = mid
            else:
                hi = mid
        if lo > 0:
            parts.append(chunk[:lo])
            if span is not None:
                used.append((span[0], span[1], span[1] + lo))
        break
    text = separator.join(parts)
    return AssembledContext(text=text, spans=used, tokens=len(enc.encode_ordinary(text)))
