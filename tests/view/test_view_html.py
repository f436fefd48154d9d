"""The escaping and rendering core of the HTML views: exact DOM text, hostile input,
the page's Content-Security-Policy, lanes and coverage."""

import base64
import hashlib
import html as stdlib_html
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swrag_integrations.view.html import (MAX_LANES, MarkedRegion, assign_lanes, check_range, coverage, iframe, label,
                                          lane_masks, marked_regions, merge_ranges, page, region_text, render_doc,
                                          text_html)

# A document that tries everything: markup, closing our style and script, URLs, event
# handlers, comments, CDATA, every kind of control character, bidi overrides, CRLF.
HOSTILE = (
    "<script>alert('x')</script></script></style><style>body{display:none}</style>"
    '<img src=x onerror="alert(1)"><a href="javascript:alert(2)">click me</a> javascript:alert(3) '
    "<iframe src=\"https://example.com/\"></iframe><!-- c --> <![CDATA[ x ]]> </textarea></title>"
    "&amp; &lt; &#60; &#x3C; \"dq\" 'sq' `bt` {{x}} ${x}\r\n"
    "nul\x00 soh\x01 esc\x1b[31m bel\x07 ff\x0c vt\x0b del\x7f c1\x80\x85\x9f cr\rlf\ncrlf\r\n"
    "rlo\u202eevil\u202c lre\u202a zwsp\u200b bom\ufeff ls\u2028ps\u2029 lone\ud800surrogate \U0001F600 末\n"
)

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "main", "section", "h1", "h2", "h3",
                "div", "span", "a", "sup", "p", "b", "ul", "li", "label", "input", "script", "br"}
ALLOWED_ATTRS = {"class", "data-doc", "data-start", "data-end", "data-sym", "data-fix", "data-goto", "data-what",
                 "data-i", "data-n", "data-gap", "data-panel", "data-table", "data-windows", "data-lane",
                 "data-toggle", "tabindex", "title", "type", "checked", "id", "charset", "http-equiv", "content",
                 "name", "lang"}


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.scripts, self._in_script = set(), set(), [], False

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.update(name for name, _ in attrs)
        if tag == "script":
            self._in_script = True
            self.scripts.append(dict(attrs).get("type", "text/javascript"))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False


def structure(document: str) -> _Tags:
    parser = _Tags()
    parser.feed(document)
    return parser


def doc_page(text: str, cuts=()) -> str:
    return page("t", render_doc("0", [(0, text)], cuts))


def test_text_html_round_trips_every_character_through_the_html_parser():
    regions = marked_regions(doc_page(HOSTILE, cuts=range(0, len(HOSTILE), 7)))
    assert region_text(regions, "0", 0, len(HOSTILE)) == HOSTILE
    for r in regions:
        assert r.text == HOSTILE[r.start:r.end]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=80),
       st.lists(st.integers(0, 80), max_size=6))
def test_any_text_and_cuts_round_trip(text, cuts):
    regions = marked_regions(doc_page(text, cuts=[c for c in cuts if c <= len(text)]))
    assert region_text(regions, "0", 0, len(text)) == text


def test_hostile_text_is_inert():
    document = page(HOSTILE, render_doc(HOSTILE[:5], [(0, HOSTILE)]) + f"<p>{label(HOSTILE)}</p>")
    tags = structure(document)
    assert tags.tags <= ALLOWED_TAGS, tags.tags - ALLOWED_TAGS
    assert tags.attrs <= ALLOWED_ATTRS, tags.attrs - ALLOWED_ATTRS
    assert tags.scripts == ["text/javascript"]  # only the page's own script
    # no raw markup of the input survives anywhere (text, attributes, title)
    for needle in ("<script>alert", "<img", "<iframe", 'onerror="', "</style><style>", 'href="', "<!--"):
        assert needle not in document
    assert "\r" not in document and "\x00" not in document  # CR as &#13;, NUL put in by the script
    assert "\ud800" not in document  # a lone surrogate too (it could not even be written as UTF-8)


def test_control_characters_are_visible_and_cr_is_kept():
    out = text_html("a\r\nb\x00c\x1bd\u202ee\x85")
    assert '<span class="cc" data-sym="CR">&#13;</span>' in out  # kept as U+000D by the parser
    assert 'data-fix="0"' in out and 'data-sym="NUL"' in out  # written into the DOM by the page's script
    assert 'data-sym="ESC">\x1b</span>' in out
    assert 'data-sym="U+202E">\u202e</span>' in out  # the bidi override is shown, and isolated by CSS
    assert "\x85" in out  # C1 as itself: &#133; would become U+2026 in a browser
    assert stdlib_html.unescape("&#133;") != "\x85"


def test_label_escapes_and_shows_controls():
    assert label('<b a="1">\x00') == "&lt;b a=&quot;1&quot;&gt;\u27e8NUL\u27e9"
    assert label(12) == "12"


def test_csp_allows_only_the_pages_own_style_and_script():
    document = page("t", "<p>x</p>", css=".x{color:red}")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', document).group(1)
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "http" not in csp
    style = re.search(r"<style>(.*?)</style>", document, re.S).group(1)
    script = re.findall(r"<script>(.*?)</script>", document, re.S)[-1]
    for code in (style, script):
        digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert not re.search(r"\b(?:src|href)=", document)
    with pytest.raises(ValueError, match="</style>"):
        page("t", "", css="x</style>")


def test_data_block_cannot_close_its_script():
    document = page("t", "", data={"x": "</script><script>alert(1)</script>\u2028"})
    assert document.count("</script>") == 2  # the data block's and the page script's own
    assert "\\u003c/script\\u003e" in document


def test_iframe_srcdoc_holds_the_page():
    document = page("t", render_doc("0", [(0, HOSTILE)]))
    frame = iframe(document)
    assert frame.startswith('<iframe sandbox="allow-scripts"') and "allow-same-origin" not in frame
    srcdoc = re.search(r'srcdoc="([^"]*)"', frame).group(1)
    assert stdlib_html.unescape(srcdoc) == document


def test_excerpts_gaps_and_pages():
    text = ("line of text\n" * 3000)  # 39,000 characters: several pages
    pieces = [(0, text[:100]), (20_000, text[20_000:39_000])]
    document = page("t", render_doc("7", pieces, cuts=[50, 25_000], length=len(text) + 5, lazy=True))
    regions = marked_regions(document)
    assert region_text(regions, "7", 0, 100) == text[:100]
    assert region_text(regions, "7", 20_000, 39_000) == text[20_000:39_000]
    assert document.count('class="pg"') >= 2  # pages laid out only near the viewport
    assert 'class="pg"' not in render_doc("7", pieces)  # short documents: laid out at once
    assert render_doc("8", [(0, "x" * 200_001)]).count('class="pg"') == 13
    assert 'data-gap="\u22ef 19,900 characters \u22ef"' in document and "\u22ef 5 characters" in document
    with pytest.raises(ValueError, match="tile"):
        region_text(regions, "7", 50, 20_100)
    with pytest.raises(ValueError, match="overlap"):
        render_doc("x", [(0, "abc"), (2, "cd")])


def test_check_range_and_merge():
    assert check_range(1, 3, 3, "w") == (1, 3)
    with pytest.raises(ValueError, match="outside the text"):
        check_range(2, 4, 3, "window 1")
    with pytest.raises(ValueError, match="int"):
        check_range("1", 2, 3, "w")
    assert merge_ranges([(5, 7), (0, 2), (1, 3), (8, 9)], touch=1) == [(0, 3), (5, 9)]


def test_coverage_lanes_and_masks():
    starts, ends = [0, 5, 10, 12], [10, 15, 20, 13]
    cuts = np.unique(np.array(starts + ends))
    a, b = cuts[:-1], cuts[1:]
    assert coverage(a, b, starts, ends).tolist() == [1, 2, 2, 3, 2, 1]
    lanes, needed = assign_lanes(starts, ends)
    assert needed == 3
    for i in range(4):
        for j in range(i):
            if starts[i] < ends[j] and starts[j] < ends[i]:
                assert lanes[i] != lanes[j]
    masks = lane_masks(a, b, starts, ends, lanes)
    assert all(bin(m).count("1") == c for m, c in zip(masks.tolist(), coverage(a, b, starts, ends).tolist()))
    deep, needed = assign_lanes(list(range(20)), [100] * 20)
    assert needed > MAX_LANES and deep.max() < MAX_LANES


def test_marked_regions_reads_nesting_and_docs():
    document = ('<div data-doc="a"><span data-start="0" data-end="5">ab<span data-start="2" data-end="3">c</span>'
                'de</span></div><div data-doc="b"><span class="s" data-start="1" data-end="2">&#13;</span></div>')
    got = marked_regions(document)
    assert MarkedRegion("a", 2, 3, "c", ()) in got and MarkedRegion("a", 0, 5, "abcde", ()) in got
    assert MarkedRegion("b", 1, 2, "\r", ("s",)) in got
