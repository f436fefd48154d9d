"""benchmarks/bench_splitters.py's verdicts: per-language ceiling labels, and the token floor
measured with ``encode_to_numpy`` (what the package calls), not ``encode_ordinary``."""

import argparse
import gc
import sys
from pathlib import Path

import pytest

from script_module import script_module

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_splitters.py"


@pytest.fixture(scope="module")
def bench_module():
    with script_module(BENCH, "bench_splitters") as module:
        yield module


@pytest.fixture
def bench(bench_module):
    """The benchmark module, with the heap that existed before the test frozen (``gc.freeze``).
    ``timed_rounds`` runs a full ``gc.collect()`` before every timed case; on a test worker's
    heap (the tokenizer tables, LangChain and whatever earlier test files of the worker
    loaded) each took about 0.2 s (10 s per ``bench_big``). Frozen objects are not scanned,
    so each collection sees only what the test itself allocates; what the benchmark runs and
    reports is unchanged."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter  # noqa: F401  (imported before the freeze)

    from swrag_integrations.core.windows import get_encoding

    get_encoding()  # the cached tokenizer tables, built before the freeze
    gc.collect()
    gc.freeze()
    try:
        yield bench_module
    finally:
        gc.unfreeze()


def test_a_miss_below_its_ceiling_is_not_called_ceiling_bound(bench):
    # docs/bench_splitters.md: DDS token strings 0.71x EN (ceiling 0.81x) and 0.84x ZH (ceiling 0.93x), goal 0.9x
    label, bound = bench.miss_label([0.71, 0.84], (0.9, 0.9), [0.81, 0.93])
    assert label == "MISSED (EN goal above the ceiling (0.81x); ZH 0.84x, below its ceiling 0.93x)"
    assert bound is False
    # 100 KB docs: DDS 0.63x EN (ceiling 1.30x) and 0.24x ZH (ceiling 0.44x), goal 1x
    label, bound = bench.miss_label([0.63, 0.24], (1, 1), [1.30, 0.44])
    assert label.startswith("MISSED (EN 0.63x, below its ceiling 1.30x; ZH goal above the ceiling")
    assert bound is False


def test_ceiling_bound_only_when_every_missed_language_is(bench):
    assert bench.miss_label([2.41, 5.77], (3, 8), [2.73, 6.39]) == (
        "MISSED (EN goal above the ceiling (2.73x); ZH goal above the ceiling (6.39x))", True)
    assert bench.miss_label([3.14, 6.71], (3, 8), [3.28, 6.76]) == ("MISSED (ZH goal above the ceiling (6.76x))", True)
    assert bench.miss_label([0.89, 0.93], (0.9, 0.9), [1.0, 1.0]) == ("MISSED (EN 0.89x, below its ceiling 1.00x)",
                                                                       False)
    assert bench.miss_label([0.5, 0.5], (1, 1), [None, None])[1] is False
    assert bench.miss_label([1.2, 1.0], (1, 1), [None, None]) == ("OK", False)


def test_table_counts_a_mixed_row_as_missed_not_beyond(bench):
    table = bench.Table()
    for lang, base, ours, floor in (("en", 1.0, 0.71, 0.81), ("zh", 1.0, 0.84, 0.93)):
        table.add("big", lang, "base", 1.0, 1 / base, 1)
        table.add("big", lang, "ours", 1.0, 1 / ours, 1)
        table.add("big", lang, "floor", 1.0, 1 / floor, 1)
    table.target("big", "ours", "base", 0.9, floor=("floor",))
    assert (table.missed, table.beyond) == (1, 0)
    assert "ZH 0.84x, below its ceiling 0.93x" in table.targets[0]


def test_the_token_floor_is_the_packages_encoding(bench, monkeypatch):
    from swrag_integrations.core.windows import get_encoding

    text = "The Marrow Point Lighthouse was first lit in 1874. 灯塔高31米。" * 40
    table = bench.Table()
    monkeypatch.setitem(sys.modules, "chonkie", None)  # peers out: only the package and LangChain rows
    monkeypatch.setitem(sys.modules, "semchunk", None)
    monkeypatch.setitem(sys.modules, "semantic_text_splitter", None)
    bench.bench_big(table, {"en": text, "zh": text}, argparse.Namespace(quick=True, repeat=1))
    tokens = len(get_encoding().encode_ordinary(text))
    assert table.rows[("big", "en", bench.TOKEN_FLOOR)][1] == tokens
    assert bench.TOKEN_FLOOR.startswith("tiktoken encode_to_numpy")


def test_every_token_ceiling_uses_that_floor(bench, monkeypatch, shared_dir, capsys):
    floors = {}
    real_target = bench.Table.target

    def target(self, section, label, base, goal, name=None, info=False, floor=()):
        floors[label + " / " + base] = floor
        return real_target(self, section, label, base, goal, name=name, info=info, floor=floor)

    monkeypatch.setattr(bench.Table, "target", target)
    for peer in ("chonkie", "semchunk", "semantic_text_splitter"):
        monkeypatch.setitem(sys.modules, peer, None)
    monkeypatch.setattr(sys, "argv", ["bench_splitters.py", "--sections", "big", "--quick", "--repeat", "1",
                                      "--max-chars", "3000"])
    assert bench.main() == 0
    token_rows = {k: v for k, v in floors.items() if " token " in k and v}
    assert len(token_rows) == 6  # FFS/DFS/DDS token strings and spans against tiktoken
    assert all(bench.TOKEN_FLOOR in floor and "tiktoken encode_ordinary" not in floor for floor in token_rows.values())
    assert "| target | EN | ZH | goal | ceiling EN / ZH | result |" in capsys.readouterr().out
