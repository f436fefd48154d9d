"""Core window arithmetic: worked examples, properties (hypothesis), bad input."""

import math
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from swrag_integrations.core.delimiters import _Delimiters
from swrag_integrations.core.windows import (
    DEFAULT_DELIMITERS,
    WindowConfig,
    get_encoding,
    iter_windows,
    token_boundaries,
)

DELIM_RE = re.compile("|".join(re.escape(d) for d in sorted(DEFAULT_DELIMITERS, key=len, reverse=True)))


def chunks(text, *args, **kwargs):
    return [text[a:b] for a, b in iter_windows(text, *args, **kwargs)]


# ------------------------------------------------------------------ worked examples


def test_ffs_formula_char():
    text = "abcdefghij"  # L = 10, w = 4, s = 3 -> N = ceil(6/3) + 1 = 3
    assert list(iter_windows(text, "FFS", 4, 3, unit="char")) == [(0, 4), (3, 7), (6, 10)]
    # N = ceil((L - w) / s) + 1 for L > w
    for length in range(5, 40):
        n = len(list(iter_windows("x" * length, "FFS", 4, 3, unit="char")))
        assert n == math.ceil((length - 4) / 3) + 1
    assert list(iter_windows("abc", "FFS", 4, 3, unit="char")) == [(0, 3)]  # L <= w: one window


def test_dfs_extends_to_next_delimiter():
    text = "One two. Three four. Five six."
    # start + w = 5 falls inside "One two. "; the window ends after ". " (offset 9).
    assert chunks(text, "DFS", 5, 5, unit="char") == [
        "One two. ",
        "wo. Three four. ",
        "hree four. ",
        "four. ",
        " Five six.",  # no delimiter after 20 + 5: the window runs to the end
    ]


def test_dfs_window_ending_exactly_on_a_delimiter_is_not_extended():
    text = "ab, cd, ef"
    assert list(iter_windows(text, "DFS", 3, 3, unit="char"))[0] == (0, 3)


def test_dds_groups_whole_sentences_and_steps_by_delimiters():
    text = "A1. B2. C3. D4. E5. "
    # units: "A1. " "B2. " "C3. " "D4. " "E5. " (4 chars each); w = 8 -> 2 units; s = 1
    assert chunks(text, "DDS", 8, 1, unit="char") == ["A1. B2. ", "B2. C3. ", "C3. D4. ", "D4. E5. "]
    # s = 2 delimiters
    assert chunks(text, "DDS", 8, 2, unit="char") == ["A1. B2. ", "C3. D4. ", "E5. "]
    # window grows until it reaches w: 5 chars needs 2 units
    assert chunks(text, "DDS", 5, 2, unit="char")[0] == "A1. B2. "


def test_dds_cuts_a_unit_longer_than_w():
    text = "x" * 25 + ". tail."
    spans = list(iter_windows(text, "DDS", 10, 1, unit="char"))
    assert all(b - a < 20 for a, b in spans)
    # 25 x + ". " is cut into 10 + 10 + 7 characters; the 7-char piece grows by "tail."
    assert [text[a:b] for a, b in spans] == ["x" * 10, "x" * 10, "x" * 5 + ". tail."]


def test_dds_never_skips_text_when_a_window_has_fewer_than_s_units():
    text = "aaaaaaaaaa. bbbbbbbbbb. cccccccccc. dddddddddd. "
    spans = list(iter_windows(text, "DDS", 10, 3, unit="char"))
    covered = set()
    for a, b in spans:
        covered.update(range(a, b))
    assert covered == set(range(len(text)))
    gappy = list(iter_windows(text, "DDS", 10, 3, unit="char", allow_gaps=True))
    assert len(gappy) < len(spans)


def ends(text, delimiters=DEFAULT_DELIMITERS, regex=False):
    return _Delimiters(delimiters, regex).ends(text).tolist()


def test_default_delimiters_include_chinese_and_double_newline():
    assert DEFAULT_DELIMITERS == ("\n\n", "\n", ". ", ",", "?", "!", "。", "！", "？", "；", "，", "．")
    text = "第一句。第二句！第三句？第四句；第五，第六．"
    assert chunks(text, "DDS", 4, 1, unit="char") == ["第一句。", "第二句！", "第三句？", "第四句；", "第五，第六．"]
    # "\n\n" is one delimiter (longest first), not two "\n"; "." alone is not one
    assert ends("a\n\nb\nc. d.e") == [3, 5, 8]


def test_custom_delimiters_strings_and_regex():
    assert ends("a|b|c", ["|"]) == [2, 4]
    assert chunks("a|b|c", "DDS", 2, 1, unit="char", delimiters=["|"]) == ["a|", "b|", "c"]
    assert ends("a1b22c", [r"\d+"], regex=True) == [2, 5]
    assert ends("a1b22c", re.compile(r"\d")) == [2, 4, 5]


def test_token_unit_counts_tokens():
    enc = get_encoding()
    text = " ".join(f"word{i}" for i in range(300))
    n_tokens = len(enc.encode_ordinary(text))
    spans = list(iter_windows(text, "FFS", 50, 25, unit="token"))
    assert len(spans) == math.ceil((n_tokens - 50) / 25) + 1
    for a, b in spans[:-1]:
        assert len(enc.encode_ordinary(text[a:b])) in range(48, 53)


def test_token_boundaries_match_tiktoken_offsets_and_blocks():
    enc = get_encoding()
    text = ("Line one 你好，世界！🙂\nsecond line. " * 50) + "\nend"
    tokens = enc.encode_ordinary(text)
    _, starts = enc.decode_with_offsets(tokens)
    expected = starts + [len(text)]
    assert token_boundaries(text).tolist() == expected
    # encoding in small blocks (cut after newlines) gives the very same boundaries
    assert token_boundaries(text, block_chars=16).tolist() == expected


def test_chinese_token_windows_never_contain_replacement_char():
    text = "红楼梦第一回甄士隐梦幻识通灵贾雨村风尘怀闺秀。" * 40 + "🙂🙃" * 30
    for strategy, step in (("FFS", 7), ("DFS", 7), ("DDS", 1)):
        pieces = chunks(text, strategy, 13, step, unit="token")
        assert pieces and all("\ufffd" not in p for p in pieces)


def test_empty_and_whitespace_text_give_no_windows():
    for strategy in ("FFS", "DFS", "DDS"):
        for unit in ("char", "token"):
            assert list(iter_windows("", strategy, 5, 1, unit=unit)) == []
            assert list(iter_windows(" \n\t ", strategy, 5, 1, unit=unit)) == []


# ------------------------------------------------------------------------ bad input

BAD = [
    (dict(window_size=0), ValueError, "window_size must be > 0"),
    (dict(window_size=-3), ValueError, "window_size must be > 0"),
    (dict(step=0), ValueError, "step must be > 0"),
    (dict(step=-1), ValueError, "step must be > 0"),
    (dict(window_size=1.5), TypeError, "window_size must be an int"),
    (dict(step="2"), TypeError, "step must be an int"),
    (dict(strategy="XYZ"), ValueError, "strategy must be one of FFS, DFS, DDS"),
    (dict(unit="word"), ValueError, "unit must be 'token' or 'char'"),
    (dict(strategy="FFS", window_size=4, step=5), ValueError, r"step \(5\) > window_size \(4\)"),
    (dict(strategy="DFS", window_size=4, step=5), ValueError, r"step \(5\) > window_size \(4\)"),
    (dict(strategy="DFS", delimiters=[]), ValueError, "delimiters must not be empty"),
    (dict(strategy="DDS", delimiters=[]), ValueError, "delimiters must not be empty"),
    (dict(strategy="DDS", delimiters=[""]), ValueError, "must not contain the empty string"),
    (dict(strategy="DDS", delimiters=["("], is_delimiter_regex=True), ValueError, "valid regular expression"),
    (dict(unit="token", encoding_name="no_such_encoding"), ValueError, "encoding_name='no_such_encoding'"),
]


@pytest.mark.parametrize("kwargs,error,message", BAD)
def test_bad_parameters(kwargs, error, message):
    params = dict(strategy="DDS", window_size=8, step=2, unit="char")
    params.update(kwargs)
    with pytest.raises(error, match=message):
        WindowConfig(**params)


def test_gaps_allowed_explicitly():
    spans = list(iter_windows("abcdefghijkl", "FFS", 2, 5, unit="char", allow_gaps=True))
    assert spans == [(0, 2), (5, 7), (10, 12)]


def test_non_str_text():
    with pytest.raises(TypeError, match="text must be a str"):
        list(iter_windows(b"bytes", "FFS", 4, 2, unit="char"))  # type: ignore[arg-type]


# ----------------------------------------------------------------------- properties

ALPHABET = st.sampled_from(
    list("ab ") + ["\n", "\n\n", ". ", ",", "?", "!", "。", "！", "？", "；", "，", "．"]
    + list("你好世界红楼梦") + ["🙂", "é", "\u0301", "ab. ab. "]
)
TEXTS = st.one_of(
    st.lists(ALPHABET, max_size=120).map("".join),  # delimiter-rich, repeated substrings
    st.text(max_size=200),  # arbitrary Unicode
    st.text(alphabet="abc xyz", max_size=200),  # delimiter-free
    st.text(alphabet="\n.,!?。，", max_size=60),  # delimiter-only
)


def _check(text, strategy, w, s, unit):
    spans = list(iter_windows(text, strategy, w, s, unit=unit))
    if not text.strip():
        assert spans == []
        return
    covered = [False] * len(text)
    previous = None
    for a, b in spans:
        assert 0 <= a < b <= len(text)
        assert "\ufffd" not in text[a:b] or "\ufffd" in text
        if previous is not None:  # windows advance
            assert a >= previous[0] and b >= previous[1] and (a, b) != previous
        previous = (a, b)
        for i in range(a, b):
            covered[i] = True
    assert all(covered), "every character is in some window"
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    if unit == "char":
        for a, b in spans:
            if strategy == "FFS":
                assert b - a == min(w, len(text) - a)
            elif strategy == "DFS":
                assert a % s == 0
                limit = a + w
                if b < len(text):  # ends at the first delimiter end at or after a + w
                    assert b >= limit
                    ends = [m.end() for m in DELIM_RE.finditer(text)]
                    assert b in ends and not any(limit <= e < b for e in ends)
            else:  # DDS: a window is shorter than 2w and starts on a unit boundary
                assert b - a < 2 * w
    if strategy == "FFS" and unit == "char":
        assert [a for a, _ in spans] == list(range(0, s * len(spans), s))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=TEXTS,
    strategy=st.sampled_from(["FFS", "DFS", "DDS"]),
    w=st.integers(1, 12),
    s=st.integers(1, 12),
)
def test_properties_char(text, strategy, w, s):
    assume(strategy == "DDS" or s <= w)
    _check(text, strategy, w, s, "char")


@settings(max_examples=700, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=TEXTS,
    strategy=st.sampled_from(["FFS", "DFS", "DDS"]),
    w=st.integers(1, 8),
    s=st.integers(1, 8),
)
def test_properties_token(text, strategy, w, s):
    assume(strategy == "DDS" or s <= w)
    _check(text, strategy, w, s, "token")


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, w=st.integers(1, 8), s=st.integers(1, 8))
def test_token_ffs_windows_follow_tiktoken_offsets(text, w, s):
    assume(s <= w and text.strip())
    enc = get_encoding()
    tokens = enc.encode_ordinary(text)
    _, starts = enc.decode_with_offsets(tokens)
    bounds = starts + [len(text)]
    n = len(tokens)
    expected, k = [], 0
    while True:
        a, b = bounds[k * s], bounds[min(k * s + w, n)]
        if b > a and (not expected or expected[-1] != (a, b)):
            expected.append((a, b))
        if k * s + w >= n:
            break
        k += 1
    assert list(iter_windows(text, "FFS", w, s, unit="token")) == expected


@settings(max_examples=1000, deadline=None)
@given(text=TEXTS)
def test_vectorised_delimiter_scan_equals_regex_scan(text):
    fast = _Delimiters(DEFAULT_DELIMITERS, False)
    assert fast.literals is not None
    assert fast.ends(text).tolist() == [m.end() for m in DELIM_RE.finditer(text)]


def test_vectorised_delimiter_scan_across_blocks(monkeypatch):
    import swrag_integrations.core.delimiters as core

    monkeypatch.setattr(core, "_BLOCK_CHARS", 7)
    text = "ab\n\n\ncd. ，。x\n\n" * 9 + "é. 你好。\n\n\n\n"
    assert _Delimiters(DEFAULT_DELIMITERS, False).ends(text).tolist() == [m.end() for m in DELIM_RE.finditer(text)]


# Literal delimiters over awkward alphabets: NUL (the scan pads with zero bytes),
# multi-byte characters, delimiters that are prefixes of each other.
LITERAL_CHARS = ["a", "b", "x", "\x00", "é", "你", "🙂", "\n", "."]
LITERAL_SETS = st.lists(st.text(alphabet=LITERAL_CHARS, min_size=1, max_size=4), min_size=1, max_size=4)


@settings(max_examples=1000, deadline=None)
@given(data=st.data(), delimiters=LITERAL_SETS, prefixes=st.booleans(), block=st.sampled_from([3, 7, 1 << 20]))
def test_vectorised_scan_equals_regex_scan_for_any_literals(data, delimiters, prefixes, block):
    import swrag_integrations.core.delimiters as core

    if prefixes:  # every prefix of every delimiter is a delimiter too
        delimiters = delimiters + [d[:k] for d in delimiters for k in range(1, len(d))]
    pieces = st.sampled_from(LITERAL_CHARS + delimiters + [d[:-1] for d in delimiters if len(d) > 1])
    text = data.draw(st.one_of(st.lists(pieces, max_size=40).map("".join), st.text(max_size=40)))
    fast = _Delimiters(delimiters, False)
    assert fast.literals is not None
    reference = re.compile("|".join(re.escape(d) for d in sorted(set(delimiters), key=len, reverse=True)))
    original, core._BLOCK_CHARS = core._BLOCK_CHARS, block
    try:
        assert fast.ends(text).tolist() == [m.end() for m in reference.finditer(text)]
    finally:
        core._BLOCK_CHARS = original
