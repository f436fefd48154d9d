"""WindowsView: every window, window start, delimiter unit and overlap depth on the page
matches the splitter's exact offsets (English, Chinese, emoji, CRLF); split results from
the LangChain splitters; bad input; hostile documents."""

import json
import re

import numpy as np
import pytest
from test_view_html import ALLOWED_ATTRS, ALLOWED_TAGS, HOSTILE, structure

from swrag_integrations.view import WindowsView
from swrag_integrations.view.html import marked_regions, region_text
from swrag_integrations.core.windows import WindowConfig, count_units

EN = ("The keeper climbed the stairs. He lit the lamp, and the beam swept the bay! Did the ships see it? "
      "They did.\n\nA second paragraph follows, with commas, clauses, and a final stop. ") * 6
ZH = "灯塔位于海湾北端，由工程师设计。它于1874年首次点亮！船只能看见吗？能。\n\n第二段：灯光每十五秒闪烁两次。" * 6
EMOJI = "Lights 🌊🚢 on the bay 🏝️. Family: 👨‍👩‍👧‍👦, flags 🇳🇴🇩🇪! Done? Yes 👍🏽.\n" * 8
CRLF = "First line, with a comma.\r\nSecond line! Third line?\r\n\r\nNew paragraph. End.\r\n" * 8
TEXTS = {"en": EN, "zh": ZH, "emoji": EMOJI, "crlf": CRLF, "hostile": HOSTILE * 3}
CONFIGS = [WindowConfig("FFS", 24, 8), WindowConfig("DFS", 16, 5), WindowConfig("DDS", 20, 2),
           WindowConfig("DDS", 30, 1, unit="char"), WindowConfig("FFS", 40, 15, unit="char")]


def page_data(document: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="swrag-data">(.*?)</script>', document,
                                re.S).group(1))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_window_is_drawn_at_its_exact_offsets(name):
    text = TEXTS[name]
    view = WindowsView(text, CONFIGS[0], CONFIGS[2])
    document = view.to_html()
    regions = marked_regions(document)
    data = page_data(document)["tables"]
    for doc, config in (("0", CONFIGS[0]), ("1", CONFIGS[2])):
        spans = list(config.spans(text))
        assert spans, "the test text must give windows"
        assert data[doc]["start"] == [a for a, _ in spans] and data[doc]["end"] == [b for _, b in spans]
        assert data[doc]["tokens"] == [count_units(text[a:b], "token") for a, b in spans]
        for a, b in spans:
            assert region_text(regions, doc, a, b) == text[a:b]
        assert region_text(regions, doc, 0, len(text)) == text  # the whole text, once
    for r in regions:
        assert r.text == text[r.start:r.end]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.strategy}-{c.window_size}-{c.step}-{c.unit}")
@pytest.mark.parametrize("name", ["en", "zh", "emoji", "crlf"])
def test_window_starts_units_and_depth_classes(name, config):
    text = TEXTS[name]
    document = WindowsView(text, config).to_html()
    segs = [r for r in marked_regions(document) if "s" in r.classes]
    starts, ends = config.window_arrays(text)
    assert {r.start for r in segs if "ws" in r.classes} == set(starts.tolist())
    for r in segs:  # shading: how many windows hold the segment (capped at 8)
        depth = int(np.sum((starts <= r.start) & (r.end <= ends)))
        assert ({c for c in r.classes if re.fullmatch(r"d\d", c)} == ({f"d{min(depth, 8)}"} if depth else set()))
        inside = np.sum((starts < r.end) & (r.start < ends))
        assert inside == depth  # segments are cut at every window boundary
    if config.strategy == "FFS":
        assert not any("u" in r.classes for r in segs)
    else:
        bounds = config.unit_bounds(text)
        assert {r.start for r in segs if "u" in r.classes} == set(bounds[1:-1].tolist())
        odd = {r.start for r in segs if "o" in r.classes}
        for i, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            unit_segs = [r.start for r in segs if a <= r.start < b]
            assert all((s in odd) == (i % 2 == 1) for s in unit_segs)


def test_split_results_of_the_langchain_splitters():
    from swrag_integrations import DynamicStepTextSplitter, FixedWindowTextSplitter

    docs = DynamicStepTextSplitter(window_size=24, step=2).create_documents([ZH])
    spans = list(FixedWindowTextSplitter(window_size=32, step=8).split_text(EN))
    assert spans
    view = WindowsView(ZH, docs, labels=["DDS documents"], source="zh.txt")
    document = view.to_html()
    regions = marked_regions(document)
    for d in docs:
        a, b = d.metadata["start_index"], d.metadata["end_index"]
        assert region_text(regions, "0", a, b) == d.page_content
    assert "DDS documents" in document and "Windows of zh.txt" in document
    from swrag_integrations.llama_index import DynamicWindowNodeParser

    splitter = DynamicStepTextSplitter(window_size=24, step=2)
    parser = DynamicWindowNodeParser(window_size=20, step=5)
    data = page_data(WindowsView(ZH, splitter, parser).to_html())["tables"]
    assert data["0"]["start"] == [d.metadata["start_index"] for d in docs]
    assert data["1"]["end"] == [b for _, b in WindowConfig("DFS", 20, 5).spans(ZH)]
    pairs = [(0, 5), (3, 9)]
    assert page_data(WindowsView("abcdefghij", pairs).to_html())["tables"]["0"]["start"] == [0, 3]


def test_bad_layouts_are_refused():
    from langchain_core.documents import Document

    with pytest.raises(TypeError, match="text must be a str"):
        WindowsView(b"bytes")
    with pytest.raises(ValueError, match="outside the text"):
        WindowsView("short text", [(0, 4), (5, 40)])
    with pytest.raises(ValueError, match="is not text"):
        WindowsView("short text", [Document(page_content="other", metadata={"start_index": 0, "end_index": 5})])
    with pytest.raises(ValueError, match="start_index"):
        WindowsView("short text", [Document(page_content="short")])
    with pytest.raises(TypeError, match="WindowConfig or a list"):
        WindowsView("short text", "DDS")
    with pytest.raises(ValueError, match="labels"):
        WindowsView("short text", [(0, 1)], labels=["a", "b"])


def test_gaps_and_empty_text_are_reported():
    text = "abcdefghijklmnopqrstuvwxyz"
    document = WindowsView(text, WindowConfig("FFS", 4, 8, unit="char", allow_gaps=True)).to_html()
    assert "12 characters in no window" in document  # allow_gaps: the text between windows is not hidden
    empty = WindowsView("", WindowConfig("FFS", 4, 2, unit="char")).to_html()
    assert "<b>0</b> windows" in empty


def test_hostile_document_and_names_are_inert():
    document = WindowsView(HOSTILE, CONFIGS[2], labels=[HOSTILE[:80]], source=HOSTILE[:60]).to_html()
    tags = structure(document)
    assert tags.tags <= ALLOWED_TAGS and tags.attrs <= ALLOWED_ATTRS
    assert tags.scripts == ["application/json", "text/javascript"]
    assert "<script>alert" not in document and "<img" not in document
    regions = marked_regions(document)
    assert region_text(regions, "0", 0, len(HOSTILE)) == HOSTILE


def test_repr_html_is_a_sandboxed_frame():
    view = WindowsView(EN[:200], WindowConfig("DDS", 16, 1))
    frame = view._repr_html_()
    assert frame.startswith('<iframe sandbox="allow-scripts"') and "srcdoc=" in frame


def test_save_writes_the_page(tmp_path):
    path = WindowsView(EN, CONFIGS[1]).save(tmp_path / "w.html")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
