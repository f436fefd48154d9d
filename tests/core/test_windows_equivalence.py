"""The faster core gives the very windows of the previous one (issue 21).

The oracle below is a frozen copy of the batched numpy walks of the core before the
speed-up (commit 3572bc1), fed with independent references: delimiter ends from
``re.finditer`` over the longest-first alternation, token boundaries from tiktoken's own
``decode_with_offsets``. Every path of the current core is checked against it: the
plain-Python walk of short texts, the numpy walk of long ones (forced with
``_SMALL_CHARS = 0``), the vectorised delimiter scan across block cuts, DFS's search
for each window's end near its threshold (forced with ``_LOCAL_SEARCH_CHARS = 0``), and
the adapters' batches (``chunk_batches``).
"""

import random
import re
from pathlib import Path

import numpy as np
import pytest
from ci_switch import SHARED, ci_requires_everything, require_shared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import swrag_integrations.core.delimiters as delims
import swrag_integrations.core.windows as core
from swrag_integrations.core.windows import DEFAULT_DELIMITERS, WindowConfig, chunk_batches, get_encoding

SAMPLE = (Path(core.__file__).parents[1] / "data" / "sample.md").read_text(encoding="utf-8")
CORPUS = SHARED / "data" / "corpus"
_BATCH = 8192


# ---------------------------------------------------------------- the frozen oracle


def reference_delimiter_ends(text, delimiters=DEFAULT_DELIMITERS):
    pattern = re.compile("|".join(re.escape(d) for d in sorted(set(delimiters), key=len, reverse=True)))
    return np.array([m.end() for m in pattern.finditer(text)], dtype=np.int64)


def reference_token_boundaries(text):
    enc = get_encoding()
    tokens = enc.encode_ordinary(re.sub("[\ud800-\udfff]", "\ufffd", text))
    _, starts = enc.decode_with_offsets(tokens)
    return np.array((starts + [len(text)]) if tokens else [0], dtype=np.int64)


class Measure:
    def __init__(self, text, unit):
        self.length = len(text)
        self.bounds = None if unit == "char" else reference_token_boundaries(text)
        self.n = self.length if self.bounds is None else len(self.bounds) - 1

    def offsets(self, index):
        index = np.minimum(index, self.n)
        return index if self.bounds is None else self.bounds[index]

    def index_at(self, offset):
        if self.bounds is None:
            return np.asarray(offset, dtype=np.int64)
        return np.searchsorted(self.bounds, offset, side="right") - 1


def dedupe(batches):
    last = (-1, -1)
    for starts, ends in batches:
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
        if not starts.size:
            continue
        prev_starts = np.concatenate(([last[0]], starts[:-1]))
        prev_ends = np.concatenate(([last[1]], ends[:-1]))
        fresh = (starts != prev_starts) | (ends != prev_ends)
        starts, ends = starts[fresh], ends[fresh]
        if starts.size:
            last = (int(starts[-1]), int(ends[-1]))
            yield starts, ends


def ffs(measure, w, s):
    n = measure.n
    count = 1 if n <= w else -(-(n - w) // s) + 1
    for first in range(0, count, _BATCH):
        starts = np.arange(first, min(first + _BATCH, count), dtype=np.int64) * s
        starts = starts[starts < n]
        if not starts.size:
            return
        yield measure.offsets(starts), measure.offsets(starts + w)


def first_end_at_or_after(ends, thresholds, length):
    idx = np.searchsorted(ends, thresholds, side="left")
    padded = np.append(ends, length)
    return np.where(thresholds >= length, length, padded[idx])


def dfs(measure, ends, w, s):
    n, length = measure.n, measure.length
    first = 0
    while first * s < n:
        starts = np.arange(first, first + _BATCH, dtype=np.int64) * s
        starts = starts[starts < n]
        window_ends = first_end_at_or_after(ends, measure.offsets(starts + w), length)
        last = np.flatnonzero(window_ends >= length)
        if last.size:
            starts, window_ends = starts[: last[0] + 1], window_ends[: last[0] + 1]
        yield measure.offsets(starts), window_ends
        if last.size:
            return
        first += _BATCH


def unit_bounds(measure, ends, w):
    length = measure.length
    bounds = np.concatenate(([0], ends[(ends > 0) & (ends < length)], [length]))
    index = measure.index_at(bounds)
    long_units = np.flatnonzero(np.diff(index) > w)
    if not long_units.size:
        return bounds
    pieces = [bounds[: long_units[0] + 1]]
    for pos, unit in enumerate(long_units):
        cuts = measure.offsets(np.arange(index[unit] + w, index[unit + 1], w, dtype=np.int64))
        pieces.append(cuts[cuts < bounds[unit + 1]])
        stop = long_units[pos + 1] + 1 if pos + 1 < long_units.size else bounds.size
        pieces.append(bounds[unit + 1 : stop])
    return np.unique(np.concatenate(pieces))


def dds(measure, ends, w, s, allow_gaps):
    bounds = unit_bounds(measure, ends, w)
    units = bounds.size - 1
    first_units = np.arange(units)
    stop = np.searchsorted(bounds, measure.offsets(measure.index_at(bounds[:-1]) + w), side="left")
    stop = np.maximum(np.minimum(stop, units), first_units + 1)
    j = 0
    while j < units:
        starts = j + s * np.arange(_BATCH, dtype=np.int64)
        starts = starts[starts < units]
        t = stop[starts]
        at_end = t >= units
        short = np.zeros(starts.size, dtype=bool) if allow_gaps else t < starts + s
        breaks = np.flatnonzero(at_end | short)
        if not breaks.size:
            yield bounds[starts], bounds[t]
            j = int(starts[-1]) + s
            continue
        f = int(breaks[0])
        yield bounds[starts[: f + 1]], bounds[t[: f + 1]]
        if at_end[f]:
            return
        j = int(t[f])


def oracle(text, strategy, w, s, unit, allow_gaps=False, delimiters=DEFAULT_DELIMITERS):
    if not text or text.isspace():
        return []
    measure = Measure(text, unit)
    if strategy == "FFS":
        batches = ffs(measure, w, s)
    elif strategy == "DFS":
        batches = dfs(measure, reference_delimiter_ends(text, delimiters), w, s)
    else:
        batches = dds(measure, reference_delimiter_ends(text, delimiters), w, s, allow_gaps)
    return [(int(a), int(b)) for starts, ends in dedupe(batches) for a, b in zip(starts, ends)]


# ---------------------------------------------------------------------- the checks


def every_path(text, strategy, w, s, unit, allow_gaps=False, delimiters=None, monkeypatch=None):
    """The windows from every entry point and walk of the current core (all must agree)."""
    config = WindowConfig(strategy, w, s, unit=unit, allow_gaps=allow_gaps, delimiters=delimiters)
    results = {}
    original = delims._SMALL_CHARS, delims._LOCAL_SEARCH_CHARS, delims._LOCAL_BACKOFF
    walks = (
        ("short walk", 1 << 40, 0, 64),
        ("numpy walk, delimiters scanned", 0, 1 << 40, 64),
        # DFS ends searched near every threshold, with the walk back to a sync point cut
        # short (so the fallback to the last sync point runs too)
        ("numpy walk, delimiters searched", 0, 0, 2),
    )
    try:
        for name, small, local, backoff in walks:
            delims._SMALL_CHARS, delims._LOCAL_SEARCH_CHARS, delims._LOCAL_BACKOFF = small, local, backoff
            results[f"{name}: spans"] = list(config.spans(text))
            results[f"{name}: span_lists"] = list(zip(*config.span_lists(text)))
            results[f"{name}: chunk_batches"] = [
                (a, b) for batch in chunk_batches(config, text) for a, b in zip(batch.starts, batch.ends)
            ]
    finally:
        delims._SMALL_CHARS, delims._LOCAL_SEARCH_CHARS, delims._LOCAL_BACKOFF = original
    results["default"] = list(config.spans(text))
    return results


def check(text, strategy, w, s, unit, allow_gaps=False, delimiters=None):
    expected = oracle(text, strategy, w, s, unit, allow_gaps, delimiters or DEFAULT_DELIMITERS)
    for name, spans in every_path(text, strategy, w, s, unit, allow_gaps, delimiters).items():
        assert spans == expected, (name, strategy, w, s, unit, allow_gaps, text[:80])


ALPHABET = st.sampled_from(
    list("ab ") + ["\n", "\n\n", ". ", ",", "?", "!", "。", "！", "？", "；", "，", "．"]
    + list("你好世界") + ["🙂", "é", "\u0301", "\ud800", "\x00", "ab. ab. "]
)
TEXTS = st.one_of(
    st.lists(ALPHABET, max_size=150).map("".join),
    st.text(max_size=200),
    st.text(alphabet="\n.,!?。，", max_size=60),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=TEXTS,
    strategy=st.sampled_from(["FFS", "DFS", "DDS"]),
    unit=st.sampled_from(["char", "token"]),
    w=st.integers(1, 12),
    s=st.integers(1, 12),
    allow_gaps=st.booleans(),
)
def test_random_text_every_path_equals_the_previous_core(text, strategy, unit, w, s, allow_gaps):
    if strategy != "DDS" and s > w and not allow_gaps:
        s = w
    check(text, strategy, w, s, unit, allow_gaps)


def _real_texts():
    texts = [SAMPLE, SAMPLE * 25]  # 2.5 KB (short walk) and 60 KB (numpy walk, several batches of units)
    for name in ("en.txt", "zh.txt"):
        path = CORPUS / name
        if ci_requires_everything():  # in CI the corpus slices must be part of the check, not silently dropped
            require_shared("data", "corpus", name)
        if path.exists():
            corpus = path.read_text(encoding="utf-8")
            rnd = random.Random(name)
            for size in (300, 3000, 9000, 60_000):
                start = rnd.randrange(len(corpus) - size)
                texts.append(corpus[start : start + size])
    return texts


@pytest.mark.parametrize("strategy", ["FFS", "DFS", "DDS"])
@pytest.mark.parametrize("unit", ["char", "token"])
@pytest.mark.parametrize("w,s", [(64, 16), (512, 128), (1024, 256), (7, 7)])
def test_real_text_every_path_equals_the_previous_core(strategy, unit, w, s):
    if strategy == "DDS":
        s = max(1, s // 64)
    for text in _real_texts():
        check(text, strategy, w, s, unit)


def test_long_text_across_delimiter_blocks_and_batches(monkeypatch):
    monkeypatch.setattr(delims, "_BLOCK_CHARS", 997)  # delimiter scan cut in many blocks
    monkeypatch.setattr(core, "_BATCH", 7)  # windows walked in many batches
    text = (SAMPLE + "\n\n\n") * 8 + "é, 你好。🙂. " * 300
    for strategy, s in (("FFS", 5), ("DFS", 5), ("DDS", 2)):
        for unit in ("char", "token"):
            check(text, strategy, 40, s, unit)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, delimiters=st.lists(st.text(alphabet="ab.\n你🙂\x00\ud800", min_size=1, max_size=3), min_size=1, max_size=4))
def test_custom_literal_delimiters_vectorised_scan_equals_the_regex(text, delimiters):
    scan = delims._Delimiters(delimiters, False)
    expected = reference_delimiter_ends(text, delimiters).tolist()
    original = delims._SMALL_CHARS
    try:
        for small in (0, 1 << 40):
            delims._SMALL_CHARS = small
            assert scan.ends(text).tolist() == expected
            assert scan.ends_list(text) == expected
    finally:
        delims._SMALL_CHARS = original
    check(text, "DDS", 3, 1, "char", delimiters=delimiters)
    check(text, "DFS", 3, 1, "char", delimiters=delimiters)
    check(text, "DFS", 6, 6, "char", delimiters=delimiters)  # thresholds far apart: walks back to sync points
    check(text, "DFS", 2, 9, "char", allow_gaps=True, delimiters=delimiters)
    check(text, "DFS", 5, 2, "token", delimiters=delimiters)


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="ab.", max_size=120),
    delimiters=st.lists(st.text(alphabet="ab.", min_size=1, max_size=5), min_size=1, max_size=4),
)
def test_overlapping_literal_delimiters_scan_equals_the_regex(text, delimiters):
    """Delimiters inside longer ones, dense text: the matches a left-to-right scan keeps.
    (Found the neighbour-only overlap check wrong: "abb" and "b" in "abb".)"""
    scan = delims._Delimiters(delimiters, False)
    expected = reference_delimiter_ends(text, delimiters).tolist()
    original = delims._SMALL_CHARS, delims._BLOCK_CHARS
    try:
        delims._SMALL_CHARS, delims._BLOCK_CHARS = 0, 7  # the numpy scan, cut in many blocks
        assert scan.ends(text).tolist() == expected
    finally:
        delims._SMALL_CHARS, delims._BLOCK_CHARS = original


@pytest.mark.parametrize("delimiters,unit", [(["abb", "b"], "abb"), (["abcde", "b", "d"], "abcde"), (["\n\n", "\n"], "\n" * 41)])
def test_matches_inside_a_longer_match_are_skipped_in_long_text(delimiters, unit):
    text = ("x" * 10 + unit) * 600  # long: the vectorised scan
    expected = reference_delimiter_ends(text, delimiters).tolist()
    assert delims._Delimiters(delimiters, False).ends(text).tolist() == expected


@pytest.mark.parametrize("backoff", [1, 3, 64])
def test_dfs_search_near_thresholds_starts_where_the_scan_is_in_step(monkeypatch, backoff):
    """Searching from a place inside a run of overlapping delimiters gives other ends than
    the left-to-right scan ("aaa" in "aaaaaa": the scan ends at 3 and 6, a search from 2
    ends at 5); the search must start where no match can straddle."""
    monkeypatch.setattr(delims, "_LOCAL_BACKOFF", backoff)
    text = "x" * 10 + "a" * 14 + "x" * 5 + "\n\n\n" + "y" * 9 + ". . ." + "z" * 7
    for delimiters in (["aaa"], ["aaa", "a"], ["\n\n", "\n"], [". "], ["aaa", ". ", "\n\n"]):
        scan = delims._Delimiters(delimiters, False)
        ends = reference_delimiter_ends(text, delimiters)
        for x in range(len(text) + 2):  # one threshold per call: every sync point from scratch
            expected = delims._first_end_at_or_after(ends, np.array([x]), len(text)).tolist()
            assert scan._local_ends(text)(np.array([x])).tolist() == expected, (delimiters, x)
        for step in (1, 2, 5, 11):  # thresholds in batches: the state carried across calls
            thresholds = np.arange(0, len(text) + 3, step)
            find = scan._local_ends(text)
            got = [v for batch in np.array_split(thresholds, 4) for v in find(batch).tolist()]
            assert got == delims._first_end_at_or_after(ends, thresholds, len(text)).tolist(), (delimiters, step)


def test_dfs_search_switches_to_one_scan_where_delimiters_are_dense(monkeypatch):
    """Text made of delimiters: after a bounded number of searches the rest of the
    thresholds (in the batch where it happens and later ones) come from one scan."""
    text = ". " * 400 + "x" * 300 + ". \n\n" * 200 + "y" * 50
    scan = delims._Delimiters([". ", "\n\n", "\n"], False)
    ends = reference_delimiter_ends(text, [". ", "\n\n", "\n"])
    thresholds = np.arange(0, len(text) + 3, 31)  # about 15 delimiters between thresholds
    expected = delims._first_end_at_or_after(ends, thresholds, len(text)).tolist()
    calls = []
    original_ends = scan.ends
    monkeypatch.setattr(scan, "ends", lambda t: calls.append(1) or original_ends(t))
    find = scan._local_ends(text)
    got = [v for batch in np.array_split(thresholds, 5) for v in find(batch).tolist()]
    assert got == expected
    assert calls == [1]  # switched once, mid-way


def test_token_boundaries_equal_tiktoken_offsets_with_surrogates_and_specials():
    text = "<|endoftext|> a\ud800b 你好🙂\n" * 30 + "\udfff"
    expected = reference_token_boundaries(text).tolist()
    assert core.token_boundaries(text).tolist() == expected
    assert core.token_boundaries(text, block_chars=5).tolist() == expected


def test_a_million_spaces_in_token_mode_are_split_not_an_error():
    """tiktoken itself fails on a run of about a million spaces or tabs (its regex engine
    runs out of backtracking stack); the windows still cover the text exactly."""
    enc = get_encoding()
    blank = " " * 1_100_000
    with pytest.raises(ValueError):
        enc.encode_to_numpy("a" + blank + "b", disallowed_special=())  # the limitation worked around
    text = "Intro. " + blank + "x. End.\n" + "\t" * 5 + "y"
    config = WindowConfig("DDS", 2048, 2, unit="token")
    spans = list(config.spans(text))
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(b > a for a, b in spans) and all(b1 >= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))
    assert core.count_units(text) == len(core.token_boundaries(text)) - 1
    short = "a" + " " * 300_000 + "b"  # where tiktoken works, its tokens are kept
    assert core.token_boundaries(short).tolist() == reference_token_boundaries(short).tolist()
