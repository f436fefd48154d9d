"""benchmarks/bench_growth.py's memory split: a reader's resident memory as anonymous memory
(its own) and mapped files (shared page cache), read from /proc/self/smaps_rollup.

Measured in a fresh child process: in a long-lived test worker a new allocation can reuse heap
pages that earlier tests freed but that stayed resident, and then nothing new is counted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_growth.py"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="smaps_rollup is Linux's")

_CHILD = """
import importlib.util, json, mmap, sys, tempfile
spec = importlib.util.spec_from_file_location("bench_growth", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_growth"] = bench
spec.loader.exec_module(bench)
out = {"start": bench.memory_now()}
block = b"\\x01" * (64 * 1024 * 1024)  # every byte written: every page resident
out["allocated"] = bench.memory_now()
del block
with tempfile.TemporaryFile() as fh:
    fh.write(b"\\1" * (48 * 1024 * 1024))
    fh.flush()
    out["before_map"] = bench.memory_now()
    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        out["touched"] = sum(mapped[i] for i in range(0, len(mapped), 4096))  # read every page
        out["mapped"] = bench.memory_now()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def measured():
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(BENCH)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_anonymous_memory_counts_this_process_allocations(measured):
    before, after = measured["start"], measured["allocated"]
    assert after["anonymous"] - before["anonymous"] >= 60
    assert after["file"] - before["file"] < 30


def test_mapped_file_pages_count_as_file_not_anonymous(measured):
    before, after = measured["before_map"], measured["mapped"]
    assert measured["touched"] == 48 * 1024 // 4
    assert after["file"] - before["file"] >= 40
    assert after["anonymous"] - before["anonymous"] < 30
    assert after["rss"] == pytest.approx(after["anonymous"] + after["file"])
