"""Trimming windows to the sentences around their hits (swrag_integrations/engine/trim.py, issue 44)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from swrag_integrations.engine.assemble import ContextSpan, assemble_context, count_tokens
from swrag_integrations.engine.trim import SENTENCE_DELIMITERS, narrow_hits, sentence_bounds, trim_window, trim_windows

EN = " ".join(f"Sentence number {i} talks about topic {i} at some length here." for i in range(40))
ZH = "".join(f"第{i}句话讲的是主题{i}的一些内容。" for i in range(40))


@dataclass
class Hit:
    source_id: str
    start: int
    end: int


def _window(source_id: str, text: str, start: int, end: int, rank: int = 1) -> ContextSpan:
    return ContextSpan(source_id, start, end, text[start:end], rank=rank)


def _find(text: str, needle: str) -> tuple[int, int]:
    at = text.index(needle)
    return at, at + len(needle)


def test_sentence_delimiters_are_the_package_delimiters_without_commas():
    assert "," not in SENTENCE_DELIMITERS and "，" not in SENTENCE_DELIMITERS
    assert "。" in SENTENCE_DELIMITERS and ". " in SENTENCE_DELIMITERS


def test_sentence_bounds_cut_after_each_sentence_and_include_the_ends():
    text = "One. Two, still two. Three?"
    assert sentence_bounds(text, 0, len(text)) == [0, 5, 21, len(text)]
    assert sentence_bounds(text, 5, 21) == [5, 21]
    with pytest.raises(ValueError, match="start/end"):
        sentence_bounds(text, 3, 1)


@pytest.mark.parametrize("text, needle, sentence", [
    (EN, "topic 17", "Sentence number 17 talks about topic 17 at some length here. "),
    (ZH, "主题17", "第17句话讲的是主题17的一些内容。"),
])
def test_trim_window_keeps_the_hit_sentence_with_exact_offsets(text, needle, sentence):
    window = _window("a", text, 0, len(text))
    (piece,) = trim_window(window, text, [_find(text, needle)], sentences=0)
    assert piece.text == text[piece.start:piece.end]
    assert piece.text == sentence
    assert piece.focus == _find(text, needle)
    (wider,) = trim_window(window, text, [_find(text, needle)], sentences=1)
    assert wider.text == text[wider.start:wider.end]
    assert sentence in wider.text and wider.start < piece.start and wider.end > piece.end
    assert wider.text.count("主题" if text is ZH else "topic ") == 3


def test_trim_window_merges_touching_pieces_and_orders_by_hit_rank():
    text = EN
    window = _window("a", text, 0, len(text))
    hits = [_find(text, "topic 30"), _find(text, "topic 5 "), _find(text, "topic 6 ")]
    pieces = trim_window(window, text, hits, sentences=0)
    assert [p.text.count("topic") for p in pieces] == [1, 2]  # 5 and 6 are adjacent: one piece
    assert "topic 30" in pieces[0].text
    assert all(p.text == text[p.start:p.end] for p in pieces)


def test_trim_window_without_hits_inside_is_whole_and_rejects_bad_arguments():
    window = _window("a", EN, 100, 300)
    assert trim_window(window, EN, [(0, 10)]) == [window]
    with pytest.raises(ValueError, match="sentences"):
        trim_window(window, EN, [], sentences=-1)
    with pytest.raises(ValueError, match="source text"):
        trim_window(window, ZH, [])


def _windows_and_hits(text: str, source_id: str, needles: list[str], width: int):
    windows, hits = [], []
    for rank, needle in enumerate(needles, start=1):
        a, b = _find(text, needle)
        windows.append(_window(source_id, text, max(0, a - width), min(len(text), b + width), rank))
        hits.append(Hit(source_id, a, b))
    return windows, hits


@pytest.mark.parametrize("text, needles", [
    (EN, ["topic 3 ", "topic 12", "topic 21", "topic 30", "topic 38"]),
    (ZH, ["主题3的", "主题12", "主题21", "主题30", "主题38"]),
])
def test_trimmed_windows_fit_more_hits_in_the_budget(text, needles):
    windows, hits = _windows_and_hits(text, "a", needles, width=150)
    budget = 120
    whole = assemble_context(windows, budget)
    trimmed = trim_windows(windows, {"a": text}, hits, budget, sentences=0)
    assert all(s.text == text[s.start:s.end] for s in trimmed)
    cut = assemble_context(trimmed, budget)
    assert cut.text_tokens <= budget and whole.text_tokens <= budget

    def hits_in(ctx):
        return sum(any(s.start <= h.start and h.end <= s.end for s in ctx.spans) for h in hits)

    assert hits_in(cut) == len(hits) > hits_in(whole)
    assert all(s.text == text[s.start:s.end] for s in cut.spans)


def test_windows_that_fit_the_budget_are_left_whole():
    windows, hits = _windows_and_hits(EN, "a", ["topic 3 ", "topic 30"], width=40)
    total = sum(count_tokens(w.text) for w in windows)
    assert trim_windows(windows, {"a": EN}, hits, total) == windows
    assert trim_windows(windows, {"a": EN}, hits, total - 1) != windows


def test_hits_count_only_for_their_own_source():
    windows = [_window("a", EN, 0, len(EN)), _window("b", ZH, 0, len(ZH), rank=2)]
    a, b = _find(ZH, "主题7的")
    trimmed = trim_windows(windows, {"a": EN, "b": ZH}, [Hit("b", a, b)], 50, sentences=0)
    assert trimmed[0] == windows[0]
    assert trimmed[1].text == "第7句话讲的是主题7的一些内容。"


def test_trim_windows_rejects_bad_arguments():
    window = _window("a", EN, 0, 100)
    with pytest.raises(ValueError, match="budget"):
        trim_windows([window], {"a": EN}, [], -1)
    with pytest.raises(ValueError, match="no source 'a'"):
        trim_windows([window], {}, [], 10)


@pytest.mark.parametrize("text, chunk, best", [
    (EN, "Sentence number 8 talks about topic 8 at some length here. Sentence number 9 talks about topic 9 at some "
         "length here. Sentence number 10", "Sentence number 9 talks about topic 9 at some length here. "),
    (ZH, "第8句话讲的是主题8的一些内容。第9句话讲的是主题9的一些内容。", "第9句话讲的是主题9的一些内容。"),
])
def test_narrow_hits_keeps_the_best_scoring_sentence_with_exact_offsets(text, chunk, best):
    a, b = _find(text, chunk)
    marker = "9"
    (narrow,) = narrow_hits([Hit("a", a, b)], {"a": text}, lambda sentence: sentence.count(marker))
    assert text[narrow.start:narrow.end] == best and (narrow.source_id, a <= narrow.start, narrow.end <= b) == ("a", True, True)
    (first,) = narrow_hits([Hit("a", a, b)], {"a": text}, lambda sentence: 0.0)  # ties: the first sentence
    assert first.start == a and text[first.start:first.end] in chunk
    with pytest.raises(ValueError, match="no source 'b'"):
        narrow_hits([Hit("b", 0, 1)], {"a": text}, len)


def test_narrowed_hits_free_budget_that_whole_chunk_hits_cannot():
    """Hits of whole sentences: trimming to their sentences frees nothing; narrowed to the best
    sentence, the hits of more windows fit the budget."""
    needles = [f"Sentence number {i} talks about topic {i} at some length here. Sentence number {i + 1} talks about "
               f"topic {i + 1} at some length here. " for i in (2, 12, 22, 32)]
    windows, hits = _windows_and_hits(EN, "a", needles, width=0)
    budget = 70
    whole = assemble_context(trim_windows(windows, {"a": EN}, hits, budget, sentences=0), budget)
    narrowed = narrow_hits(hits, {"a": EN}, lambda sentence: sentence.count("2"))
    cut = assemble_context(trim_windows(windows, {"a": EN}, narrowed, budget, sentences=0), budget)
    assert cut.text_tokens <= budget

    def kept(ctx):
        return sum(any(s.start <= h.start and h.end <= s.end for s in ctx.spans) for h in narrowed)

    assert kept(cut) == len(hits) > kept(whole)
