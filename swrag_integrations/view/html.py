"""The one escaping and rendering core of the HTML views.

Every view (`split`, `retrieval`, `answer`) writes its text through
this module, so one set of rules holds everywhere:

* **Escaping.** Text goes through `text_html` (exact: the browser's DOM text is the
  input) or `label` (names, ids, numbers: escaped, control characters shown as
  symbols). Nothing from the input is ever written unescaped, into a URL or into a
  script: a document holding ``<script>``, ``</style>``, ``javascript:`` links or control
  characters renders as text and runs nothing.
* **No network, only our code runs.** A page is one file: the style sheet and the script
  are inline and allowed by a Content-Security-Policy that lists their SHA-256 hashes
  (``default-src 'none'``), so even a hypothetical escaping slip could neither run a
  script nor load anything.
* **Marked regions.** A document's text is drawn as *segments*: ``<span class="s"
  data-start=a data-end=b>`` whose DOM text is exactly ``source[a:b]`` (absolute
  character offsets, Python ``str`` indices), inside a ``<div class="doc" data-doc=ID>``.
  A region (a window, a hit, a support span) is the run of segments between its
  offsets; segments are cut at every region boundary, so each region is drawn by whole
  segments. `marked_regions` reads them back the way a browser does (used by the
  tests and usable by anyone checking a page).
* **CR and other characters HTML cannot carry.** The HTML parser turns a raw CR (and
  CRLF) into LF and drops U+0000. A CR is therefore written as the character reference
  ``&#13;`` (which the parser keeps as U+000D), other C0/C1 controls, DEL, bidi and
  zero-width controls as themselves inside ``<span class="cc"
  data-sym=NAME>``, which CSS shows as a small badge (``CR``, ``NUL``, ``ESC``, ``U+202E``, ...)
  through a pseudo-element that is not part of the DOM text (the character itself is drawn
  at size 0); U+0000 and lone surrogates are put
  into the DOM by the page's script (``data-fix``). So the DOM text of every segment
  equals the source, CR included.
* **Large inputs.** Segments are grouped into pages of about `PAGE_CHARS`
  characters (cut after a newline where one is near); in documents longer than
  `LAZY_CHARS` the pages use CSS ``content-visibility: auto``, so the browser lays
  out and paints only the pages near the viewport.
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from swrag_integrations.engine.assemble import merge_ranges  # noqa: F401  (re-exported for the views)
from swrag_integrations.view._assets import BASE_CSS, SCRIPT

__all__ = [
    "PAGE_CHARS",
    "LAZY_CHARS",
    "MAX_LANES",
    "View",
    "MarkedRegion",
    "text_html",
    "label",
    "fmt_int",
    "check_range",
    "merge_ranges",
    "pieces_from_texts",
    "text_at",
    "coverage",
    "assign_lanes",
    "lane_masks",
    "lane_css",
    "render_doc",
    "page",
    "iframe",
    "marked_regions",
    "region_text",
]

PAGE_CHARS = 16_384  # characters per page (cut after a newline when one is near)
LAZY_CHARS = 200_000  # documents longer than this get lazily rendered pages
MAX_LANES = 8  # bands drawn per text line; deeper overlap is shown by shading

# Characters drawn visibly: C0 controls but TAB and LF, DEL, C1 controls, zero-width and
# bidi controls, line/paragraph separators, the BOM, and lone surrogates.
_SPECIAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060\u2066-\u2069"
                      "\ufeff\ud800-\udfff]")
_ESCAPE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


_C0_NAMES = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB "
             "ESC FS GS RS US").split()


def _symbol(ch: str) -> str:
    """The visible name of a special character: ``CR``, ``NUL``, ``DEL``, ``U+202E`` (plain
    ASCII, so every font shows it; the Control Pictures block ``␍`` is missing from many)."""
    cp = ord(ch)
    if cp < 0x20:
        return _C0_NAMES[cp]
    if cp == 0x7F:
        return "DEL"
    return f"U+{cp:04X}"


def _special_html(match: re.Match) -> str:
    ch = match.group()
    cp = ord(ch)
    sym = _symbol(ch)
    if cp == 0 or 0xD800 <= cp <= 0xDFFF:
        # cannot exist in an HTML document's text: the page's script puts it into the DOM
        return f'<span class="cc" data-sym="{sym}" data-fix="{cp:x}"></span>'
    # CR as a reference (a raw CR would become LF); every other control as itself: the
    # parser keeps it, while references to C1 map to windows-1252 (&#128; is the euro sign)
    # and some parsers drop references to C0 controls.
    body = "&#13;" if cp == 0x0D else ch
    return f'<span class="cc" data-sym="{sym}">{body}</span>'


def text_html(text: str) -> str:
    """``text`` as HTML whose DOM text is exactly ``text`` (after the page's script ran).

    ``&``, ``<``, ``>`` and quotes are escaped; the characters listed in the module
    docstring are wrapped so that they are visible and survive parsing.
    """
    out = text.translate(_ESCAPE)
    return _SPECIAL.sub(_special_html, out) if _SPECIAL.search(out) else out


def label(value: Any) -> str:
    """``value`` as escaped HTML for names, ids and numbers (text or attribute values):
    control characters become visible symbols (lossy; never used for checked text)."""
    text = str(value)
    return _SPECIAL.sub(lambda m: f"\u27e8{_symbol(m.group())}\u27e9", text).translate(_ESCAPE)


def fmt_int(value: int) -> str:
    """``12,345``."""
    return f"{int(value):,}"


def check_range(start: Any, end: Any, length: int, what: str, base: int = 0) -> tuple[int, int]:
    """``(start, end)`` as ints with ``base <= start <= end <= base + length`` (a text of
    ``length`` characters starting at source offset ``base``); ValueError otherwise."""
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{what}: {name} offset must be an int, got {value!r}")
    start, end = int(start), int(end)
    if not base <= start <= end <= base + length:
        raise ValueError(f"{what}: span {start}:{end} lies outside the text ({base}:{base + length})")
    return start, end


def pieces_from_texts(known: Iterable[tuple[int, str]], what: str) -> list[tuple[int, str]]:
    """Excerpts ``(start, text)`` of a source whose full text is not known, from pieces of
    it (e.g. retrieved spans): overlapping or touching pieces are merged; where they
    overlap their texts must agree.

    Raises:
        ValueError: two pieces disagree (``what`` names the source in the message).
    """
    out: list[tuple[int, str]] = []
    for start, text in sorted(((int(a), t) for a, t in known), key=lambda p: p[0]):
        if start < 0:
            raise ValueError(f"{what}: negative offset {start}")
        end = start + len(text)
        if out and start <= out[-1][0] + len(out[-1][1]):
            s0, t0 = out[-1]
            e0 = s0 + len(t0)
            overlap = t0[start - s0:min(e0, end) - s0]
            if overlap != text[:len(overlap)]:
                k = next(i for i, (x, y) in enumerate(zip(overlap, text)) if x != y)
                raise ValueError(f"{what}: the texts given disagree at offset {start + k}")
            if end > e0:
                out[-1] = (s0, t0 + text[e0 - start:])
        else:
            out.append((start, text))
    return out


def text_at(pieces: Sequence[tuple[int, str]], start: int, end: int) -> str | None:
    """``source[start:end]`` when one of the excerpts holds it, else ``None``."""
    for base, text in pieces:
        if base <= start and end <= base + len(text):
            return text[start - base:end - base]
    return None


# ------------------------------------------------------------------ regions -> classes


def coverage(seg_starts: np.ndarray, seg_ends: np.ndarray, starts: Sequence[int], ends: Sequence[int]) -> np.ndarray:
    """How many of the ranges ``[starts[i], ends[i])`` cover each segment.

    Segments are sorted, non-overlapping and cut at every range boundary, so a range
    covers a whole segment or none of it.
    """
    n = len(seg_starts)
    diff = np.zeros(n + 1, dtype=np.int64)
    if n and len(starts):
        lo = np.searchsorted(seg_starts, np.asarray(starts, dtype=np.int64), side="left")
        hi = np.searchsorted(seg_ends, np.asarray(ends, dtype=np.int64), side="right")
        keep = hi > lo
        np.add.at(diff, lo[keep], 1)
        np.add.at(diff, hi[keep], -1)
    return np.cumsum(diff[:-1])


def assign_lanes(starts: Sequence[int], ends: Sequence[int], max_lanes: int = MAX_LANES) -> tuple[np.ndarray, int]:
    """A lane per range so that overlapping ranges get different lanes (greedy, in order
    of start), and the number of lanes that needed. When more than ``max_lanes`` are
    needed, range ``i`` gets lane ``i % max_lanes`` (bands of deeper overlap then share
    lanes; the depth is still shown by shading)."""
    order = np.argsort(np.asarray(starts, dtype=np.int64), kind="stable")
    lane_end: list[int] = []
    lanes = np.zeros(len(order), dtype=np.int64)
    for i in order.tolist():
        a, b = int(starts[i]), int(ends[i])
        for lane, last in enumerate(lane_end):
            if last <= a:
                lane_end[lane] = b
                lanes[i] = lane
                break
        else:
            lanes[i] = len(lane_end)
            lane_end.append(b)
            if len(lane_end) > max_lanes:
                return np.arange(len(order), dtype=np.int64) % max_lanes, max(len(lane_end), max_lanes + 1)
    return lanes, len(lane_end)


def lane_masks(seg_starts: np.ndarray, seg_ends: np.ndarray, starts: Sequence[int], ends: Sequence[int],
               lanes: np.ndarray) -> np.ndarray:
    """Per segment, a bit mask of the lanes whose ranges cover it."""
    mask = np.zeros(len(seg_starts), dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    for lane in np.unique(lanes).tolist():
        pick = lanes == lane
        mask |= (coverage(seg_starts, seg_ends, starts[pick], ends[pick]) > 0).astype(np.int64) << lane
    return mask


def lane_css(masks: Iterable[int], prefix: str = "m") -> str:
    """CSS rules ``.m{mask}`` drawing one thin band per set lane (only the masks used)."""
    rules = []
    for mask in sorted(set(int(m) for m in masks)):
        bits = [lane for lane in range(MAX_LANES) if mask >> lane & 1]
        if not bits:
            continue
        images = ",".join(f"linear-gradient(var(--c{b}),var(--c{b}))" for b in bits)
        positions = ",".join(f"0 calc(100% - {b * 4}px)" for b in bits)
        sizes = ",".join("100% 3px" for _ in bits)
        rules.append(f".{prefix}{mask}{{background-image:{images};background-position:{positions};"
                     f"background-size:{sizes}}}")
    return "\n".join(rules)


# ------------------------------------------------------------------------- documents


def _page_cuts(text: str, base: int, page_chars: int) -> list[int]:
    """Absolute offsets where pages of ``text`` (starting at ``base``) end: after the first
    newline within ``page_chars`` past each mark, or at the mark when there is none."""
    cuts = []
    pos = page_chars
    while pos < len(text):
        nl = text.find("\n", pos, pos + page_chars)
        cut = nl + 1 if nl >= 0 else pos
        if cut >= len(text):
            break
        cuts.append(base + cut)
        pos = cut + page_chars
    return cuts


def render_doc(
    doc: str,
    pieces: Sequence[tuple[int, str]],
    cuts: Iterable[int] = (),
    classes: Callable[[np.ndarray, np.ndarray], Sequence[str]] | None = None,
    *,
    length: int | None = None,
    inserts: Mapping[int, str] | None = None,
    css_class: str = "",
    page_chars: int = PAGE_CHARS,
    lazy: bool | None = None,
) -> str:
    """One document's text as segments inside ``<div class="doc" data-doc=doc>``.

    Args:
        doc: the document's id on the page (``data-doc``).
        pieces: ``(start, text)`` excerpts of the source, sorted and disjoint, with
            absolute offsets (``[(0, whole_text)]`` for a whole document). Gaps between
            them are drawn as ``⋯ N characters ⋯`` (CSS text, not DOM text).
        cuts: absolute offsets where segments must be cut (region boundaries).
        classes: ``f(seg_starts, seg_ends) -> [extra class string per segment]``.
        length: the source's length (draws the gap after the last piece).
        inserts: HTML (already escaped) put at an absolute offset, between segments.
        css_class: extra classes of the container.
        lazy: pages with CSS ``content-visibility: auto`` (laid out only near the
            viewport); default: when the pieces hold more than `LAZY_CHARS`
            characters. Short documents are laid out at once, so that positions never
            move when a page is first drawn.
    """
    if lazy is None:
        lazy = sum(len(t) for _, t in pieces) > LAZY_CHARS
    page_open = '<div class="pg">' if lazy else '<div class="pe">'
    seg_a: list[np.ndarray] = []
    seg_b: list[np.ndarray] = []
    pages: list[np.ndarray] = []
    cut_arr = np.unique(np.fromiter((int(c) for c in cuts), dtype=np.int64))
    insert_at = np.array(sorted(inserts), dtype=np.int64) if inserts else np.zeros(0, dtype=np.int64)
    prev_end = None
    for base, text in pieces:
        end = base + len(text)
        if prev_end is not None and base < prev_end:
            raise ValueError(f"document {doc!r}: excerpts overlap at {base} (pieces must be sorted and disjoint)")
        prev_end = end
        page_ends = _page_cuts(text, base, page_chars)
        inner = cut_arr[(cut_arr > base) & (cut_arr < end)]
        extra = insert_at[(insert_at > base) & (insert_at < end)]
        bounds = np.unique(np.concatenate(([base], inner, extra, np.array(page_ends, dtype=np.int64), [end])))
        if len(bounds) < 2:
            bounds = np.array([base, end], dtype=np.int64)
        a, b = bounds[:-1], bounds[1:]
        keep = b > a
        a, b = a[keep], b[keep]
        seg_a.append(a)
        seg_b.append(b)
        pages.append(np.searchsorted(np.array(page_ends, dtype=np.int64), a, side="right"))
    all_a = np.concatenate(seg_a) if seg_a else np.zeros(0, dtype=np.int64)
    all_b = np.concatenate(seg_b) if seg_b else np.zeros(0, dtype=np.int64)
    extra_classes = list(classes(all_a, all_b)) if classes is not None and len(all_a) else [""] * len(all_a)
    if len(extra_classes) != len(all_a):
        raise ValueError("classes() must return one class string per segment")
    inserts = inserts or {}
    done: set[int] = set()
    out = [f'<div class="doc {label(css_class)}" data-doc="{label(doc)}">']
    k = 0
    last_end = 0
    for (base, text), a_arr, b_arr, page_arr in zip(pieces, seg_a, seg_b, pages):
        if base > last_end:
            out.append(f'<div class="gap" data-gap="\u22ef {fmt_int(base - last_end)} characters \u22ef"></div>')
        current_page = -1
        for a, b, pg in zip(a_arr.tolist(), b_arr.tolist(), page_arr.tolist()):
            if pg != current_page:
                if current_page >= 0:
                    out.append("</div>")
                out.append(page_open)
                current_page = pg
            if a in inserts and a not in done:
                out.append(inserts[a])
                done.add(a)
            cls = extra_classes[k]
            out.append(f'<span class="s{" " + cls if cls else ""}" data-start="{a}" data-end="{b}">'
                       f"{text_html(text[a - base:b - base])}</span>")
            k += 1
        end = base + len(text)
        if end in inserts and end not in done:
            out.append(inserts[end])
            done.add(end)
        if current_page >= 0:
            out.append("</div>")
        last_end = end
    if length is not None and length > last_end:
        out.append(f'<div class="gap" data-gap="\u22ef {fmt_int(length - last_end)} characters \u22ef"></div>')
    out.append("</div>")
    return "".join(out)


# ----------------------------------------------------------------------------- pages


def _csp_hash(code: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii") + "'"


def page(title: str, body: str, *, css: str = "", data: Any = None) -> str:
    """A complete, self-contained HTML page: ``body`` (escaped HTML), the base style
    sheet plus ``css``, the view script, and ``data`` as a JSON block (``id=swrag-data``).

    The Content-Security-Policy allows only this style sheet and this script (by hash):
    no other script, style, image, font, frame or connection.
    """
    style = BASE_CSS + ("\n" + css if css else "")
    if "</style" in style.lower():
        raise ValueError("css must not contain </style>")
    csp = (f"default-src 'none'; style-src {_csp_hash(style)}; script-src {_csp_hash(SCRIPT)}; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    data_block = ""
    if data is not None:
        payload = json.dumps(data, ensure_ascii=False).translate(
            str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}))
        data_block = f'<script type="application/json" id="swrag-data">{payload}</script>\n'
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{label(title)}</title>\n<style>{style}</style>\n</head>\n<body>\n{body}\n"
        f"{data_block}<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )


def iframe(document: str, *, height: int = 640) -> str:
    """``document`` inside a sandboxed ``<iframe srcdoc>`` (for notebooks): its script
    runs in an opaque origin, apart from the notebook's page and styles."""
    return (f'<iframe sandbox="allow-scripts" style="width:100%;height:{int(height)}px;border:1px solid #ddd;'
            f'border-radius:6px" srcdoc="{_html.escape(document, quote=True)}"></iframe>')


class View:
    """Base of the views: `to_html` (a whole page), `save`, and
    ``_repr_html_`` (the page in a sandboxed iframe, for Jupyter)."""

    notebook_height = 640

    def to_html(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def save(self, path: str | Path) -> Path:
        """Write the page (UTF-8) and return its path."""
        path = Path(path)
        path.write_text(self.to_html(), encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        return iframe(self.to_html(), height=self.notebook_height)


# ------------------------------------------------------------------- reading a page back


@dataclass(frozen=True)
class MarkedRegion:
    """An element with ``data-start``/``data-end`` in a page: its document id (nearest
    ``data-doc``), offsets, classes and DOM text (as a browser builds it)."""

    doc: str | None
    start: int
    end: int
    text: str
    classes: tuple[str, ...]


_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


class _RegionParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[dict[str, Any]] = []
        self.regions: list[MarkedRegion] = []
        self.raw = 0  # inside <script>/<style>: not text of any region

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            return
        a = dict(attrs)
        parent_doc = self.stack[-1]["doc"] if self.stack else None
        entry = {"tag": tag, "doc": a.get("data-doc", parent_doc), "parts": None, "attrs": a}
        if "data-start" in a and "data-end" in a:
            entry["parts"] = []
        if tag in ("script", "style", "template"):
            self.raw += 1
        fix = a.get("data-fix")
        self.stack.append(entry)
        if fix is not None:  # what the page's script puts into the DOM
            self._text(chr(int(fix, 16)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        while self.stack:
            entry = self.stack.pop()
            if entry["tag"] in ("script", "style", "template"):
                self.raw -= 1
            if entry["parts"] is not None:
                a = entry["attrs"]
                self.regions.append(MarkedRegion(entry["doc"], int(a["data-start"]), int(a["data-end"]),
                                                 "".join(entry["parts"]), tuple((a.get("class") or "").split())))
            if entry["tag"] == tag:
                break

    def _text(self, data: str) -> None:
        if self.raw:
            return
        for entry in self.stack:
            if entry["parts"] is not None:
                entry["parts"].append(data)

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1]["attrs"].get("data-fix") is not None:
            return
        self._text(data)


def marked_regions(document: str) -> list[MarkedRegion]:
    """Every element with ``data-start``/``data-end`` in ``document``, with its DOM text,
    in document order of their end tags (nested elements come before their parents)."""
    parser = _RegionParser()
    parser.feed(document)
    parser.close()
    return parser.regions


def region_text(regions: Sequence[MarkedRegion], doc: str, start: int, end: int) -> str:
    """The text drawn for ``[start, end)`` of document ``doc``: the concatenated text of
    its segments (``class="s"``) that lie inside the range, which must tile it exactly
    (what the page's script highlights for that range).

    Raises:
        ValueError: the segments inside the range do not tile it (a gap or an overlap).
    """
    segs = sorted((r for r in regions if r.doc == doc and "s" in r.classes and start <= r.start and r.end <= end),
                  key=lambda r: r.start)
    pos = start
    for r in segs:
        if r.start != pos:
            raise ValueError(f"document {doc!r}: the segments in {start}:{end} do not tile it (gap at {pos})")
        pos = r.end
    if pos != end:
        raise ValueError(f"document {doc!r}: the segments in {start}:{end} do not tile it (they stop at {pos})")
    return "".join(r.text for r in segs)
