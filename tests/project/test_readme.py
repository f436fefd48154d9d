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


def test_readme_fits_two_screens_with_python_early():
    """Issue 41: at most ~200 lines, an Install section, a newcomer's first Python within the
    first 60 lines, one LangChain and one LlamaIndex example (the docs' blocks run in test_docs.py)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move the detail into docs/"
    assert "## Install" in lines
    first = next(number for number, line in enumerate(lines, 1) if line.startswith("```python"))
    assert first <= 60, f"the first Python block starts at line {first}"
    code = blocks()
    assert [any("swrag_integrations.langchain" in c for c in code),
            any("swrag_integrations.llama_index" in c for c in code)] == [True, True], code


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
