"""Leaves of a RAPTOR tree: the package's chunks or windows, with exact offsets.

* `leaves_from_text` cuts a text the way the index does: ``"chunks"`` are the
  `SlidingWindowIndex`'s small chunks (FFS pieces
  of ``size`` units with step == size, tiling the text: the same call as
  `plan_source`), ``"FFS"``/``"DFS"``/``"DDS"``
  are sliding windows from `iter_windows`
  (overlapping leaves are fine: contexts are merged by offset).
* `leaves_from_index` reads them from an existing index: its small chunks,
  its medium chunks, or its windows.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from swrag_integrations.engine.records import END, START, WIN_END, WIN_START
from swrag_integrations.engine.trace import piece_span
from swrag_integrations.core.windows import DEFAULT_ENCODING, iter_windows
from swrag_integrations.methods.raptor.tree import Leaf

__all__ = ["LEAF_STRATEGIES", "INDEX_LEVELS", "leaves_from_text", "leaves_from_index"]

LEAF_STRATEGIES = ("chunks", "FFS", "DFS", "DDS")
INDEX_LEVELS = ("small", "medium", "window")


def leaves_from_text(source_id: str, text: str, *, strategy: str = "chunks", size: int = 100,
                     step: int | None = None, unit: str = "token",
                     encoding_name: str = DEFAULT_ENCODING) -> list[Leaf]:
    """Leaves of one text.

    Args:
        source_id: the source's id (kept on every leaf).
        text: the source text.
        strategy: ``"chunks"`` (tiling pieces of ``size`` units, the index's small
            chunks; RAPTOR's leaves were 100-token chunks) or ``"FFS"``/``"DFS"``/``"DDS"``.
        size: chunk or window size in ``unit``.
        step: window step (FFS/DFS: units, default ``size // 2``; DDS: delimiters,
            default 3); not used by ``"chunks"``.
        unit: ``"token"`` or ``"char"``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    key = strategy if strategy == "chunks" else str(strategy).upper()
    if key not in LEAF_STRATEGIES:
        raise ValueError(f"strategy must be one of {LEAF_STRATEGIES}, got {strategy!r}")
    if key == "chunks":
        spans = iter_windows(text, "FFS", size, size, unit=unit, encoding_name=encoding_name)
    else:
        if step is None:
            step = 3 if key == "DDS" else max(1, size // 2)
        spans = iter_windows(text, key, size, step, unit=unit, encoding_name=encoding_name)
    return [Leaf(source_id, int(a), int(b), text[a:b]) for a, b in spans if text[a:b].strip()]


def leaves_from_index(index: Any, source_ids: Sequence[str] | None = None, *, level: str = "small") -> list[Leaf]:
    """Leaves from a `SlidingWindowIndex` (complete sources).

    Args:
        index: the index.
        source_ids: only these sources (default: all complete ones).
        level: ``"small"`` (the small chunks), ``"medium"`` (medium chunks) or
            ``"window"`` (the FFS/DFS/DDS windows of an index built with
            ``strategy=``; an index of ``"chunks"`` gives its chunk-range windows).
    """
    if level not in INDEX_LEVELS:
        raise ValueError(f"level must be one of {INDEX_LEVELS}, got {level!r}")
    index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
    sids = list(source_ids) if source_ids is not None else index.source_ids()
    records = index.store.get_many(sids)
    out: list[Leaf] = []
    m = index.config.medium_size
    for sid in sids:
        rec = records.get(sid)
        if rec is None or not rec.complete:
            continue
        text, b = rec.text, rec.base  # leaves are in source coordinates: a joined record starts at its base
        a = rec.arrays
        if level == "small":
            spans: Iterable[tuple[int, int]] = zip((a[START] + b).tolist(), (a[END] + b).tolist())
        elif level == "medium":
            spans = ((md["start_index"], md["end_index"]) for md in (rec.medium_metadata(j, m) for j in range(rec.n_mediums(m))))
        else:
            spans = sorted(set(zip((a[WIN_START] + b).tolist(), (a[WIN_END] + b).tolist())))
        pieces = ((s0, s1, piece_span(b, text, s0, s1)) for s0, s1 in spans)
        out.extend(Leaf(sid, int(s0), int(s1), piece) for s0, s1, piece in pieces if piece.strip())
    return out
