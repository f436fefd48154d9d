"""Edge cases of the core's input: delimiter scans at the end of the text, and
regular-expression delimiters that cannot be joined naively or match the empty string."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swrag_integrations.windows import WindowConfig, _Delimiters, iter_windows


def ends(text, delimiters, regex=False):
    return _Delimiters(delimiters, regex).ends(text).tolist()


# ------------------------------------------------ literal delimiters at the end of the text


@pytest.mark.parametrize(
    "text,delimiter",
    [
        ("wax", "x\x00"),  # the zero padding after the text matched the NUL
        ("wax", "x\x00\x00"),
        ("é", "é\x00"),  # the end offset fell past the text: IndexError
        ("éé", "é\x00"),
        ("waé", "éx"),
        ("你好\x00", "好\x00\x00"),
    ],
)
def test_literal_delimiter_matches_only_inside_the_text(text, delimiter):
    assert ends(text, [delimiter]) == []
    assert ends(text + delimiter, [delimiter]) == [len(text) + len(delimiter)]
    for strategy in ("DFS", "DDS"):
        spans = list(iter_windows(text, strategy, 1, 1, unit="char", delimiters=[delimiter]))
        assert all(0 <= a < b <= len(text) for a, b in spans)
        assert spans[-1][1] == len(text)
    assert list(iter_windows("wax", "DFS", 1, 1, unit="char", delimiters=["x\x00"])) == [(0, 3)]


def test_nul_delimiters_inside_the_text_still_match():
    assert ends("a\x00b\x00\x00c", ["\x00", "\x00\x00"]) == [2, 5]
    assert ends("x\x00x", ["x\x00"]) == [2]


# ------------------------------------------------- regular expressions joined in one scan


def test_backreferences_keep_their_own_groups():
    # Joined naively, "(?:(a)\1)|(?:(b)\1)": the second \1 refers to the first group.
    assert ends("xbbyaaz", [r"(a)\1", r"(b)\1"], regex=True) == [3, 6]
    assert ends("xbbyaaz", [r"(?P<q>a)(?P=q)", r"(?P<q>b)(?P=q)"], regex=True) == [3, 6]  # repeated name
    # group conditional: joined, (?(1)...) would test the group of (x)
    assert ends("ab b a xx ab!", [r"(x)\1", r"(a)?b(?(1)!|\s)"], regex=True) == [3, 5, 9, 13]
    text = "one..two!!three"
    regex = dict(delimiters=[r"(\.)\1", r"(!)\1"], is_delimiter_regex=True)
    assert list(iter_windows(text, "DDS", 5, 1, unit="char", **regex)) == [(0, 5), (5, 10), (10, 15)]
    assert list(iter_windows(text, "DFS", 2, 2, unit="char", **regex)) == list(
        iter_windows(text, "DFS", 2, 2, unit="char", delimiters=["..", "!!"])
    )


def test_global_inline_flags_in_one_of_several_regexes():
    # "(?i)" cannot be moved inside a joined alternation; each regex keeps its own flags.
    assert ends("xABcab", [r"(?i)ab", r"c"], regex=True) == [3, 4, 6]
    assert ends("xABcab", [r"(?i)ab"], regex=True) == [3, 6]


def test_regexes_without_group_references_are_joined_as_before():
    delims = _Delimiters([r"\d+", r"x", r"(ab)+"], True)
    assert delims.alternatives is None
    assert delims.pattern.pattern == r"(?:\d+)|(?:x)|(?:(ab)+)"
    assert delims.ends("a12xabab").tolist() == [3, 4, 8]
    assert _Delimiters([r"(a)\1"], True).pattern.pattern == r"(?:(a)\1)"  # one regex: as before


# Templates with one group referred to by {g}, or no group at all.
TEMPLATES = [
    r"(a)\{g}",
    r"(b+)\{g}",
    r"(x)(?:y|\{g})",
    r"(é)\{g}z",
    r"(a|b)\{g}",
    r"(?P<n{g}>ab)(?P=n{g})",
    r"(a)?b(?({g})b|\.)",
    r"\.",
    r"ab",
    r"a+b",
    r"(?<=a)b",
    r"z\b",
    r"(ab)+",
]


@settings(max_examples=500, deadline=None)
@given(
    templates=st.lists(st.sampled_from(TEMPLATES), min_size=1, max_size=4),
    text=st.text(alphabet="abxyzé. ", max_size=40),
)
def test_regex_scan_equals_one_correctly_numbered_alternation(templates, text):
    items, renumbered, groups = [], [], 0
    for template in templates:
        has_group = template.startswith("(") and not template.startswith("(?<=")
        items.append(template.format(g=1))
        renumbered.append(template.format(g=groups + 1))
        groups += has_group
    reference = re.compile("|".join(f"(?:{r})" for r in renumbered))
    assert ends(text, items, regex=True) == [m.end() for m in reference.finditer(text)]


# -------------------------------------------------------- regexes that match the empty string


EMPTY_MATCHING = [r"(?=\.)", r"\b", r"x*", r"a|", r"^", r"$", r"(?:)", r"a?", r"(a*)\1", r"(?<=\.)"]


@pytest.mark.parametrize("pattern", EMPTY_MATCHING)
@pytest.mark.parametrize("strategy", ["DFS", "DDS"])
def test_regex_delimiter_that_can_match_empty_is_rejected(pattern, strategy):
    message = rf"^delimiters: {re.escape(repr(pattern))} can match the empty string.*consume at least one character"
    with pytest.raises(ValueError, match=message):
        WindowConfig(strategy, 8, 1, unit="char", delimiters=[pattern], is_delimiter_regex=True)
    with pytest.raises(ValueError, match=message):
        WindowConfig(strategy, 8, 1, unit="char", delimiters=[r"\.", pattern], is_delimiter_regex=True)
    with pytest.raises(ValueError, match=message):
        WindowConfig(strategy, 8, 1, unit="char", delimiters=re.compile(pattern))


@pytest.mark.parametrize("pattern", [r"\.", r"(?<=\.) ", r"\b\w+\b", r"(a)\1", r"x+", r"(?=\.)\."])
def test_regex_delimiters_that_consume_are_accepted(pattern):
    WindowConfig("DDS", 8, 1, unit="char", delimiters=[pattern], is_delimiter_regex=True)
    WindowConfig("DFS", 8, 1, unit="char", delimiters=re.compile(pattern))
