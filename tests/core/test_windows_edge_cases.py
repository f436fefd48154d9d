"""Edge cases of the core's input: delimiter scans at the end of the text, huge windows,
regular-expression delimiters that cannot be joined naively, and parameter types checked
the same way by the core, the LangChain splitters and the LlamaIndex node parsers."""

import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from swrag_integrations.cli import app as cli
from swrag_integrations.langchain import DynamicStepTextSplitter, DynamicWindowTextSplitter, FixedWindowTextSplitter
from swrag_integrations.llama_index import DynamicStepNodeParser, DynamicWindowNodeParser, FixedWindowNodeParser
from swrag_integrations.core.delimiters import _Delimiters
from swrag_integrations.core.windows import MAX_UNITS, WindowConfig, check_parameter, iter_windows


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


# --------------------------------------------------------------- window_size and step bounds


@pytest.mark.parametrize("name", ["window_size", "step"])
@pytest.mark.parametrize("value", [MAX_UNITS + 1, 2**32, 2**62, 2**63 - 1, 2**63, 99999999999999999999])
def test_window_size_and_step_above_the_maximum_are_rejected(name, value):
    params = {"strategy": "DDS", "window_size": 8, "step": 2, "unit": "char", name: value}
    with pytest.raises(ValueError, match=rf"^{name} must be <= {MAX_UNITS} .*got {value}$"):
        WindowConfig(**params)
    with pytest.raises(ValueError, match=rf"{name} must be <= {MAX_UNITS}"):
        list(iter_windows("abc", **params))


@pytest.mark.parametrize("name", ["window_size", "step"])
@pytest.mark.parametrize("value", [True, False, 4.0, 2.0**63, "4", np.float64(4), np.float32(4), np.bool_(True), None, [4]])
def test_window_size_and_step_must_be_ints(name, value):
    with pytest.raises(TypeError, match=rf"^{name} must be an int, got {type(value).__name__}$"):
        WindowConfig(strategy="DDS", unit="char", **{name: value})


@pytest.mark.parametrize("strategy", ["FFS", "DFS", "DDS"])
@pytest.mark.parametrize("unit", ["char", "token"])
def test_the_maximum_window_gives_exact_int_offsets(strategy, unit):
    text = "Hello there. General Kenobi, 你好。" * 3
    spans = list(iter_windows(text, strategy, MAX_UNITS, MAX_UNITS, unit=unit))
    assert spans == [(0, len(text))]
    assert all(type(a) is int and type(b) is int for a, b in spans)
    small_step = list(iter_windows(text, strategy, MAX_UNITS, 1, unit=unit))
    assert small_step[0] == (0, len(text)) and all(type(x) is int for span in small_step for x in span)
    gaps = list(iter_windows(text, strategy, 1, MAX_UNITS, unit=unit, allow_gaps=True))
    assert gaps and gaps[0][0] == 0 and all(type(x) is int for span in gaps for x in span)


def test_numpy_ints_are_accepted_and_stored_as_ints():
    config = WindowConfig("DDS", np.int64(8), np.int32(2), unit="char")
    assert type(config.window_size) is int and type(config.step) is int
    assert config == WindowConfig("DDS", 8, 2, unit="char")


SIZES = st.one_of(st.integers(1, 12), st.integers(MAX_UNITS - 3, MAX_UNITS))


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="ab .,\n你。é🙂", max_size=60),
    strategy=st.sampled_from(["FFS", "DFS", "DDS"]),
    unit=st.sampled_from(["char", "token"]),
    w=SIZES,
    s=SIZES,
)
def test_spans_are_pairs_of_python_ints_for_any_valid_size(text, strategy, unit, w, s):
    assume(strategy == "DDS" or s <= w)
    spans = list(iter_windows(text, strategy, w, s, unit=unit))
    covered = set()
    for span in spans:
        a, b = span
        assert type(a) is int and type(b) is int
        assert 0 <= a < b <= len(text)
        covered.update(range(a, b))
    assert covered == (set(range(len(text))) if text.strip() else set())


def test_cli_split_with_a_huge_window_is_a_usage_error(capsys):
    assert cli.main(["split", "--window", "99999999999999999999"]) == 2
    err = capsys.readouterr().err
    assert f"window_size must be <= {MAX_UNITS}" in err and "Traceback" not in err


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


# --------------------------------------------------------------------- delimiters: types


BAD_DELIMITER_TYPES = [
    (123, "got int"),
    (1.5, "got float"),
    (b". ", "got bytes"),
    (bytearray(b". "), "got bytearray"),
    ({". ", "!"}, "got set"),
    ({". ": 1}, "got dict"),
    (iter([". "]), "got list_iterator"),
    ([". ", 1], "got int at index 1"),
    ([b". "], "got bytes at index 0"),
    ((re.compile(r"\."),), "got Pattern at index 0"),
    ([None], "got NoneType at index 0"),
    (re.compile(rb"\."), "be a str pattern, got a bytes pattern"),
]


@pytest.mark.parametrize("strategy", ["FFS", "DFS", "DDS"])
@pytest.mark.parametrize("delimiters,message", BAD_DELIMITER_TYPES)
def test_delimiters_of_the_wrong_type_raise_type_error(strategy, delimiters, message):
    with pytest.raises(TypeError, match=rf"^delimiters must .*{re.escape(message)}"):
        WindowConfig(strategy, 8, 1, unit="char", delimiters=delimiters)


@pytest.mark.parametrize("delimiters", [". ", [". "], (". ", "!"), ["a|b"], re.compile(r"\. ")])
def test_delimiters_of_the_right_type(delimiters):
    assert list(iter_windows("a. b! c", "DDS", 2, 1, unit="char", delimiters=delimiters))


# ------------------------------------------------ the same checks for every entry point


BAD_PARAMETERS = [
    dict(window_size="8"),
    dict(window_size=8.0),
    dict(window_size=np.float64(8)),
    dict(window_size=True),
    dict(window_size=0),
    dict(window_size=MAX_UNITS + 1),
    dict(step=True),
    dict(step="2"),
    dict(step=2.0),
    dict(step=-1),
    dict(step=2**63),
    dict(unit=1),
    dict(unit="CHAR"),
    dict(unit=None),
    dict(encoding_name=3),
    dict(encoding_name=None),
    dict(allow_gaps="yes"),
    dict(allow_gaps=1),
    dict(allow_gaps=None),
    dict(is_delimiter_regex="yes"),
    dict(is_delimiter_regex=0),
    dict(delimiters=123),
    dict(delimiters=b". "),
    dict(delimiters=[". ", 1]),
    dict(delimiters=[r"x*"], is_delimiter_regex=True),
]
ADAPTERS = [
    (FixedWindowTextSplitter, "FFS"),
    (DynamicWindowTextSplitter, "DFS"),
    (DynamicStepTextSplitter, "DDS"),
    (FixedWindowNodeParser, "FFS"),
    (DynamicWindowNodeParser, "DFS"),
    (DynamicStepNodeParser, "DDS"),
]


def _core_error(strategy, params):
    try:
        WindowConfig(strategy=strategy, **params)
    except (TypeError, ValueError) as exc:
        return exc
    return None


@pytest.mark.parametrize("cls,strategy", ADAPTERS)
@pytest.mark.parametrize("kwargs", BAD_PARAMETERS, ids=lambda kw: repr(kw))
def test_adapters_reject_what_the_core_rejects_with_the_same_error(cls, strategy, kwargs):
    params = {"window_size": 16, "step": 2, "unit": "char", **kwargs}
    expected = _core_error(strategy, params)
    if expected is None:  # FFS does not use delimiters: neither does the adapter check them
        assert strategy == "FFS" and "is_delimiter_regex" in kwargs
        cls(**params)
        return
    with pytest.raises(type(expected)) as raised:
        cls(**params)
    assert type(raised.value) is type(expected)  # not a pydantic ValidationError
    assert str(raised.value) == str(expected)


@pytest.mark.parametrize("cls,strategy", ADAPTERS[3:])
def test_llama_index_from_defaults_checks_before_coercion(cls, strategy):
    with pytest.raises(TypeError, match="window_size must be an int, got str"):
        cls.from_defaults(window_size="64", step=2)
    with pytest.raises(TypeError, match="step must be an int, got bool"):
        cls.from_defaults(window_size=64, step=True)


@pytest.mark.parametrize("cls,strategy", ADAPTERS)
def test_adapters_accept_numpy_ints_and_delimiter_tuples(cls, strategy):
    splitter = cls(window_size=np.int64(16), step=np.int32(2), unit="char", delimiters=(". ", "!"))
    assert splitter.window_size == 16 and splitter.step == 2
    text = "One two. Three four! Five six. Seven."
    assert splitter.split_text(text) == [text[a:b] for a, b in iter_windows(text, strategy, 16, 2, unit="char", delimiters=(". ", "!"))]


def test_llama_index_single_string_delimiter_and_compiled_pattern():
    parser = DynamicStepNodeParser(window_size=2, step=1, unit="char", delimiters="|")
    assert parser.delimiters == ["|"] and parser.split_text("a|b|c") == ["a|", "b|", "c"]
    with pytest.raises(TypeError, match=r"delimiters of a LlamaIndex node parser must be strings.*\.pattern"):
        DynamicStepNodeParser(window_size=2, step=1, unit="char", delimiters=re.compile(r"\|"))


def test_check_parameter_is_the_core_definition():
    assert check_parameter("strategy", "dds") == "DDS"
    assert check_parameter("window_size", np.int64(5)) == 5 and type(check_parameter("step", np.int16(5))) is int
    assert check_parameter("allow_gaps", np.bool_(True)) is True
    with pytest.raises(TypeError, match="strategy must be a str, got int"):
        check_parameter("strategy", 1)
    with pytest.raises(KeyError):
        check_parameter("no_such_parameter", 1)
