"""A document under one or more splitter configurations, as one HTML page.

Each configuration is a panel: the text with every window drawn as a thin band (one
line per window, in up to `MAX_LANES` lanes so that overlapping windows
never share a line; shading shows how many windows hold a character), a bar at every
window start, the delimiter units of DFS/DDS (`WindowConfig.unit_bounds`) marked
and alternately coloured, and a table of windows (index, offsets, characters, tokens).
Panels sit side by side; their scrolling can be linked by offset. Clicking a row
highlights its window in the text; clicking the text lists the windows that hold it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from swrag_integrations.core.windows import DEFAULT_ENCODING, WindowConfig, count_units
from swrag_integrations.view.html import (MAX_LANES, View, assign_lanes, check_range, coverage, fmt_int, label, lane_css, lane_masks,
                   page, render_doc)

__all__ = ["Layout", "layout_of", "WindowsView"]



def _progress(items: Sequence[Any], desc: str) -> Any:
    """``items`` wrapped in a tqdm bar on a terminal when there are many (tqdm optional)."""
    if len(items) < 2000:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the retrieval extra
        return items
    return tqdm(items, desc=desc, unit="window", leave=False, disable=None)


@dataclass
class Layout:
    """One configuration's windows on a text.

    ``tokens[i]`` is ``count_units(text[starts[i]:ends[i]], "token", encoding_name)``:
    the window encoded on its own, as an LLM and the token budgets see it (it can differ
    by a token or two from the window size, which counts the tokens of the whole text).
    ``units``: the DFS/DDS delimiter units as boundaries (``None`` for FFS and for
    windows given as spans).
    """

    label: str
    starts: np.ndarray
    ends: np.ndarray
    tokens: np.ndarray
    units: np.ndarray | None = None
    encoding_name: str = DEFAULT_ENCODING
    config: WindowConfig | None = None

    @property
    def n(self) -> int:
        return int(self.starts.size)

    def uncovered(self, length: int) -> int:
        """Characters of the text in no window."""
        if not self.n:
            return length
        spans = sorted(zip(self.starts.tolist(), self.ends.tolist()))
        covered, reach = 0, 0
        for a, b in spans:
            if b > reach:
                covered += b - max(a, reach)
                reach = b
        return length - covered


def _config_label(config: WindowConfig) -> str:
    unit = "tokens" if config.unit == "token" else "chars"
    step_unit = "delimiters" if config.strategy == "DDS" else unit
    return f"{config.strategy} window {config.window_size} {unit}, step {config.step} {step_unit}"


def _spans_of(text: str, item: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of a split result: LangChain Documents (``start_index``/``end_index``
    metadata and ``page_content``), LlamaIndex nodes (``start_char_idx``), or
    ``(start, end)`` pairs (`Span`, ``Chunk``)."""
    starts, ends = [], []
    for i, obj in enumerate(item):
        what = f"window {i}"
        if hasattr(obj, "page_content") and hasattr(obj, "metadata"):
            meta = obj.metadata or {}
            if "start_index" not in meta:
                raise ValueError(f"{what}: the document has no start_index metadata (split with add_start_index "
                                 "or a swrag splitter)")
            a = meta["start_index"]
            b = meta.get("end_index", a + len(obj.page_content) if isinstance(a, int) else a)
            body = obj.page_content
        elif hasattr(obj, "start_char_idx") and hasattr(obj, "end_char_idx"):
            a, b, body = obj.start_char_idx, obj.end_char_idx, obj.get_content()
        elif hasattr(obj, "start") and hasattr(obj, "end"):
            a, b, body = obj.start, obj.end, getattr(obj, "text", None)
        else:
            try:
                a, b = obj
            except (TypeError, ValueError):
                raise TypeError(f"{what}: expected a Document, a node, a Span or a (start, end) pair, "
                                f"got {type(obj).__name__}") from None
            body = None
        a, b = check_range(a, b, len(text), what)
        if body is not None and text[a:b] != body:
            raise ValueError(f"{what}: its text is not text[{a}:{b}] (was it split from another text?)")
        starts.append(a)
        ends.append(b)
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def _config_of(item: Any) -> WindowConfig | None:
    """The `WindowConfig` of a config, a LangChain splitter (``.config``) or a
    LlamaIndex node parser (``._config``) of this package."""
    if isinstance(item, WindowConfig):
        return item
    for attr in ("config", "_config"):
        value = getattr(item, attr, None)
        if isinstance(value, WindowConfig):
            return value
    return None


def layout_of(text: str, item: Any, name: str | None = None) -> Layout:
    """A `Layout` from a `WindowConfig` or one of the package's splitters or
    node parsers (its windows are computed), or from a split result (a list of
    Documents, nodes, Spans or ``(start, end)`` pairs)."""
    config_of = _config_of(item)
    if config_of is not None:
        item = config_of
    if isinstance(item, WindowConfig):
        starts, ends = item.window_arrays(text)
        units = item.unit_bounds(text) if item.strategy in ("DFS", "DDS") else None
        encoding = item.encoding_name
        config: WindowConfig | None = item
        default_label = _config_label(item)
    elif isinstance(item, (str, bytes)) or not hasattr(item, "__iter__"):
        raise TypeError(f"a layout is a WindowConfig or a list of windows, got {type(item).__name__}")
    else:
        starts, ends = _spans_of(text, list(item))
        units, encoding, config = None, DEFAULT_ENCODING, None
        default_label = f"{starts.size} given windows"
    pairs = list(zip(starts.tolist(), ends.tolist()))
    tokens = np.fromiter((count_units(text[a:b], "token", encoding) for a, b in _progress(pairs, "counting tokens")),
                         dtype=np.int64, count=len(pairs))
    return Layout(name or default_label, starts, ends, tokens, units, encoding, config)


class WindowsView(View):
    """A document under one or more splitter configurations (side by side).

    Args:
        text: the document.
        *layouts: `WindowConfig` s, the package's splitters or node parsers
            (``DynamicStepTextSplitter(...)``), and/or split results (lists of LangChain
            Documents with ``start_index``/``end_index``, LlamaIndex nodes, ``Span`` s
            or ``(start, end)`` pairs); default: ``WindowConfig()``.
        labels: a title per layout (default: the configuration, e.g. ``DDS window 128
            tokens, step 3 delimiters``).
        source: the document's name in the page title.

    Raises:
        TypeError: ``text`` is not a ``str``, a layout is neither.
        ValueError: a window lies outside the text or its text is not ``text[start:end]``.

    ``to_html()`` gives the page, ``save(path)`` writes it, and in Jupyter the view
    shows itself (``_repr_html_``).
    """

    notebook_height = 720

    def __init__(self, text: str, *layouts: Any, labels: Sequence[str] | None = None, source: str | None = None):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not layouts:
            layouts = (WindowConfig(),)
        if labels is not None and len(labels) != len(layouts):
            raise ValueError(f"labels: {len(labels)} given for {len(layouts)} layouts")
        self.text = text
        self.source = source
        self.layouts = [layout_of(text, item, labels[i] if labels else None) for i, item in enumerate(layouts)]

    # ------------------------------------------------------------------ rendering
    def _panel(self, i: int, lay: Layout, masks_used: set[int], tables: dict[str, Any]) -> str:
        text = self.text
        starts, ends = lay.starts, lay.ends
        lanes, needed = assign_lanes(starts.tolist(), ends.tolist())
        n_lanes = min(max(needed, 1), MAX_LANES)
        start_set = np.unique(starts)
        units = lay.units

        def classes(seg_a: np.ndarray, seg_b: np.ndarray) -> list[str]:
            depth = np.minimum(coverage(seg_a, seg_b, starts, ends), 8)
            masks = lane_masks(seg_a, seg_b, starts, ends, lanes)
            masks_used.update(np.unique(masks).tolist())
            is_start = np.isin(seg_a, start_set)
            if units is not None:
                unit_index = np.searchsorted(units, seg_a, side="right") - 1
                is_unit = np.isin(seg_a, units) & (seg_a > 0)
                odd = unit_index % 2 == 1
            else:
                is_unit = odd = np.zeros(seg_a.size, dtype=bool)
            out = []
            for dep, mask, st, un, od in zip(depth.tolist(), masks.tolist(), is_start.tolist(), is_unit.tolist(),
                                             odd.tolist()):
                parts = []
                if dep:
                    parts.append(f"d{dep}")
                if mask:
                    parts.append(f"m{mask}")
                if st:
                    parts.append("ws")
                if un:
                    parts.append("u")
                if od:
                    parts.append("o")
                out.append(" ".join(parts))
            return out

        cuts = np.concatenate([starts, ends] + ([units] if units is not None else []))
        linked = " linked" if len(self.layouts) > 1 else ""
        doc_html = render_doc(str(i), [(0, text)], cuts, classes, css_class=f"lanes{n_lanes}{linked}")

        # table of windows: drawn lazily by the page's script from the numbers in the data block
        table = ('<div class="row head"><span class="num">#</span><span class="num">start</span>'
                 '<span class="num">end</span><span class="num">chars</span><span class="num">tokens</span></div>'
                 '<div class="vbody"><div class="vrows"></div></div>')
        tables[str(i)] = {"start": starts.tolist(), "end": ends.tolist(), "tokens": lay.tokens.tolist()}
        length = len(text)
        stats = [f"<b>{fmt_int(lay.n)}</b> windows"]
        if lay.n:
            tok = lay.tokens
            chars = ends - starts
            stats.append(f"tokens {int(tok.min())}\u2013{int(tok.max())} (mean {tok.mean():.1f})")
            stats.append(f"chars {int(chars.min())}\u2013{int(chars.max())}")
            if length:
                stats.append(f"text covered {chars.sum() / length:.2f}\u00d7")
            stats.append(f"up to {needed} overlapping")
        if units is not None:
            stats.append(f"{fmt_int(len(units) - 1)} delimiter units")
        missing = lay.uncovered(length)
        if missing and text.strip():
            stats.append(f'<span class="flag">{fmt_int(missing)} characters in no window</span>')
        legend = "".join(f'<span class="sw lane" title="lane {k}" data-lane="{k}"></span>'
                         for k in range(n_lanes))
        toolbar = (
            '<div class="toolbar">'
            f'<span class="legend">bands {legend}</span>'
            '<label><input type="checkbox" data-toggle="bands" checked> bands</label>'
            '<label><input type="checkbox" data-toggle="depth" checked> overlap shading</label>'
            '<label><input type="checkbox" data-toggle="bounds" checked> window starts</label>'
            + ('<label><input type="checkbox" data-toggle="units" checked> delimiter units</label>'
               if units is not None else "")
            + "</div>"
        )
        stats_html = " \u00b7 ".join(stats)
        return (f'<section class="panel" data-panel="{i}"><h2>{label(lay.label)}</h2>'
                f'<div class="meta">{stats_html}</div>{toolbar}'
                '<div class="status">Click a row to highlight its window; click the text to list the windows that '
                f'hold it.</div>{doc_html}<div class="tbl vtbl" data-windows="{lay.n}" data-table="{i}" data-doc="{i}">{table}'
                '</div></section>')

    def to_html(self) -> str:
        """The view as one self-contained HTML page (styles and script inline)."""
        masks_used: set[int] = set()
        tables: dict[str, Any] = {}
        panels = [self._panel(i, lay, masks_used, tables) for i, lay in enumerate(self.layouts)]
        n = len(self.layouts)
        text = self.text
        name = self.source or "document"
        lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        link = ('<label class="meta"><input type="checkbox" id="link-scroll" checked> link scrolling by offset'
                "</label>" if n > 1 else "")
        header = (f"<header><h1>Windows of {label(name)}</h1><div class=\"meta\">{fmt_int(len(text))} characters \u00b7 "
                  f"{fmt_int(lines)} lines \u00b7 {n} configuration{'s' if n > 1 else ''} \u00b7 offsets are Python "
                  f"string indices {link}</div></header>")
        css = [lane_css(masks_used)]
        css.extend(f".lanes{k}{{--lanes:{k}}}" for k in range(1, MAX_LANES + 1))
        css.extend(f'.sw[data-lane="{k}"]{{background:var(--c{k})}}' for k in range(MAX_LANES))
        css.append(".tbl[data-windows]{--cols:4em 1fr 1fr 1fr 1fr}")
        body = f'{header}<main class="cols n{min(n, 4)}">{"".join(panels)}</main>'
        return page(f"swrag view: windows of {name}", body, css="\n".join(css), data={"tables": tables})
