"""benchmarks/bench_growth.py's memory split: a reader's resident memory as anonymous memory
(its own) and mapped files (shared page cache), read from /proc/self/smaps_rollup."""

import mmap
import sys
import tempfile
from pathlib import Path

import pytest

from script_module import script_module

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_growth.py"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="smaps_rollup is Linux's")


@pytest.fixture(scope="module")
def bench():
    with script_module(BENCH, "bench_growth") as module:
        yield module


def test_anonymous_memory_counts_this_process_allocations(bench):
    before = bench.memory_now()
    block = bytearray(64 * 1024 * 1024)  # zero-filled: every page written, so resident
    after = bench.memory_now()
    assert after["anonymous"] - before["anonymous"] >= 60
    assert after["file"] - before["file"] < 30
    assert block[-1] == 0


def test_mapped_file_pages_count_as_file_not_anonymous(bench):
    with tempfile.TemporaryFile() as fh:
        fh.write(b"\1" * (48 * 1024 * 1024))
        fh.flush()
        before = bench.memory_now()
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            total = sum(mapped[i] for i in range(0, len(mapped), 4096))  # touch every page
            after = bench.memory_now()
    assert total == 48 * 1024 // 4
    assert after["file"] - before["file"] >= 40
    assert after["anonymous"] - before["anonymous"] < 30
    assert after["rss"] == pytest.approx(after["anonymous"] + after["file"])
