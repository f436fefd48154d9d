"""The README's Python examples run as written (in README order, one namespace, in a
fresh folder holding ``docs/`` with the bundled sample document)."""

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.integration]


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def test_readme_has_examples():
    assert len(blocks()) >= 5


def test_readme_examples_run_as_written(tmp_path, monkeypatch, shared_cache):
    from swrag_integrations.cli import sample_path

    (tmp_path / "docs").mkdir()
    shutil.copy(sample_path(), tmp_path / "docs" / "sample.md")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SWRAG_CACHE", str(shared_cache))  # the run's model cache, never ~/.cache/swrag
    namespace: dict = {"__name__": "__readme__"}
    for number, code in enumerate(blocks()):
        try:
            exec(compile(code, f"README.md python block {number}", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - name the block that failed
            raise AssertionError(f"README python block {number} failed: {type(exc).__name__}: {exc}\n{code}") from exc
