"""assemble_context: the budget covers the separators, cuts respect span boundaries,
merged spans carry consistent metadata."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swrag_integrations.engine.assemble import ContextSpan, assemble_context, count_tokens

EN = "".join(f"Linden & Rowe shipped {i} crates of tea to Port{i}. " for i in range(40))
ZH = "".join(f"第{i}段：城市{i}号以出产丝绸闻名，市长名叫张{i}。" for i in range(40))
MIXED = "".join(f"Harbour {i} 港口{i}号 exports 茶叶 and 瓷器; " for i in range(40))
SOURCES = {"en": EN, "zh": ZH, "mixed": MIXED}


def test_separators_count_against_the_budget():
    # 8 short spans of distinct sources: their pieces alone fit, with 7 separators they did not
    items = [(f"s{i}", 0, 30, EN[:30]) for i in range(8)]
    piece = count_tokens(EN[:30])
    budget = 4 * piece + 1
    ctx = assemble_context(items, budget)
    assert count_tokens(ctx.text) <= budget
    assert ctx.text_tokens == count_tokens(ctx.text)
    assert ctx.truncated


def test_cut_points_given_as_a_set_still_give_an_ordered_cut():
    # found by hypothesis: the boundaries reached the fitter unsorted and it kept (416, 226)
    span = ContextSpan("en", 0, 418, EN[:418], score=0.0, focus=(225, 226), boundaries=(225, 226, 416))
    ctx = assemble_context([span], 1)
    assert [(s.start, s.end) for s in ctx.spans] == [(225, 226)]


@st.composite
def span_lists(draw):
    n = draw(st.integers(1, 8))
    items = []
    for _ in range(n):
        sid = draw(st.sampled_from(sorted(SOURCES)))
        text = SOURCES[sid]
        a = draw(st.integers(0, len(text) - 1))
        b = draw(st.integers(a + 1, min(len(text), a + 600)))
        focus = None
        if draw(st.booleans()):
            f0 = draw(st.integers(a, b - 1))
            focus = (f0, draw(st.integers(f0 + 1, b)))
        boundaries = None
        if draw(st.booleans()):
            boundaries = tuple(draw(st.lists(st.integers(a, b), max_size=8)))
        items.append(ContextSpan(sid, a, b, text[a:b], score=draw(st.floats(0, 1)), focus=focus, boundaries=boundaries))
    return items


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=span_lists(), budget=st.integers(1, 400), separator=st.sampled_from(["\n\n", "\n---\n", " ", "", "。\n"]))
def test_assembled_text_never_exceeds_budget(items, budget, separator):
    ctx = assemble_context(items, budget, separator=separator)
    assert count_tokens(ctx.text) <= budget
    assert ctx.text_tokens == count_tokens(ctx.text)
    cuts_by_source = {}
    for item in items:
        allowed = cuts_by_source.setdefault(item.source_id, set())
        if item.boundaries is None:
            allowed.add(None)
        else:
            allowed.update({item.start, item.end, *item.boundaries})
    by_source = {}
    for span in ctx.spans:
        assert span.text == SOURCES[span.source_id][span.start:span.end] and span.start < span.end
        by_source.setdefault(span.source_id, []).append((span.start, span.end))
        allowed = cuts_by_source[span.source_id]
        if None not in allowed and len(ctx.spans) > 1:  # cut only where allowed (token fallback: lone span)
            assert span.start in allowed and span.end in allowed
    for spans in by_source.values():  # merged: neither overlapping nor touching
        spans.sort()
        assert all(x[1] < y[0] for x, y in zip(spans, spans[1:]))


@settings(max_examples=60, deadline=None)
@given(items=span_lists())
def test_unlimited_budget_keeps_everything(items):
    ctx = assemble_context(items, None)
    covered = {(s.source_id, i) for s in ctx.spans for i in range(s.start, s.end)}
    wanted = {(s.source_id, i) for s in items for i in range(s.start, s.end)}
    assert covered == wanted
