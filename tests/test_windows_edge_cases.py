"""Edge cases of the core's input: delimiter scans at the end of the text."""

import pytest

from swrag_integrations.windows import _Delimiters, iter_windows


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
