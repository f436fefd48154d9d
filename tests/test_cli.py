"""The `swrag` command through its installed entry point."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SWRAG = shutil.which("swrag", path=str(Path(sys.executable).parent)) or shutil.which("swrag")


def run(*args, **kwargs):
    if SWRAG is None:
        pytest.skip("the swrag entry point is not installed")
    return subprocess.run([SWRAG, *args], capture_output=True, text=True, timeout=300, **kwargs)


def test_split_prints_windows_of_a_file(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("One. Two. Three. Four. Five. Six.", encoding="utf-8")
    result = run("split", str(path), "--strategy", "dds", "--window", "8", "--step", "1", "--unit", "char")
    assert result.returncode == 0, result.stderr
    assert "DDS window=8 step=1 unit=char" in result.stdout
    assert "0-10" in result.stdout  # "One. Two. " is the first window
    assert "windows" in result.stdout.splitlines()[-2]


def test_split_bad_input_exit_codes(tmp_path):
    missing = run("split", str(tmp_path / "missing.txt"))
    assert missing.returncode == 3 and "no such file" in missing.stderr
    bad = run("split", "--strategy", "XYZ")
    assert bad.returncode == 2 and "strategy must be one of" in bad.stderr
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    result = run("split", str(binary))
    assert result.returncode == 2 and "not UTF-8" in result.stderr
    unknown = run("split", "--no-such-option")
    assert unknown.returncode == 2 and "unrecognized arguments" in unknown.stderr
    assert run().returncode == 2
