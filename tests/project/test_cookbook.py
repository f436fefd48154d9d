"""The cookbook notebooks run from top to bottom without errors.

Each notebook is read into memory and executed with ``nbclient`` (kernel ``python3``,
working directory ``cookbook/``); the committed ``.ipynb`` files are never rewritten.
The executed copy is written to the test's tmp dir for inspection.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from ci_switch import SHARED_HOW, ci_requires_everything, importorskip, missing

nbformat = importorskip("nbformat")
nbclient = importorskip("nbclient")
importorskip("ipykernel")

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"
NOTEBOOKS = sorted(COOKBOOK.glob("[0-9][0-9]_*.ipynb"))
EXPECTED = [
    "01_splitting.ipynb",
    "02_langchain_rag.ipynb",
    "03_llama_index.ipynb",
    "04_ipex_llm.ipynb",
    "05_evaluation.ipynb",
    "06_raptor.ipynb",
    "07_graph.ipynb",
    "08_tuning.ipynb",
]
# where 05_evaluation.ipynb looks for the dev data (cwd = cookbook/)
SHARED_EVAL = Path(os.environ.get("SWRAG_SHARED") or COOKBOOK.parents[1] / "shared") / "data" / "eval"
EVAL_FILES = ("multifieldqa_zh.jsonl", "hotpotqa.jsonl")
NEEDS_SHARED = {"05": EVAL_FILES, "08": ("squad_v2_articles.jsonl",)}  # notebook prefix -> files it reads
CELL_TIMEOUT = 300


def _execute(nb, tmp_path: Path, name: str):
    # jupyter_client starts the "python3" kernel with the interpreter running the tests
    # (sys.executable), so the kernel sees the same installed package.
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(COOKBOOK)}},
    )
    try:
        client.execute()
    finally:
        nbformat.write(nb, tmp_path / name)
    return nb


def _outputs(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            yield from cell.get("outputs", [])


def _text(nb) -> str:
    parts = []
    for out in _outputs(nb):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "\n".join(parts)


def _has_mime(nb, mime: str) -> bool:
    return any(mime in out.get("data", {}) for out in _outputs(nb))


def test_all_notebooks_present_and_valid():
    assert [p.name for p in NOTEBOOKS] == EXPECTED
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata["kernelspec"]["name"] == "python3"
        # committed with their outputs, so they read well on a code host
        assert any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), path.name
        assert sum(cell.cell_type == "markdown" for cell in nb.cells) >= 3, path.name


@pytest.mark.slow
def test_kernel_uses_this_interpreter(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys, swrag_integrations\nprint(sys.executable)\nprint(swrag_integrations.__file__)"
    )])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    out = _text(_execute(nb, tmp_path, "kernel.ipynb")).split("\n")
    assert os.path.realpath(out[0]) == os.path.realpath(sys.executable)
    assert Path(out[1]).resolve().is_relative_to(COOKBOOK.parent)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, monkeypatch, shared_cache):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.delenv("SWRAG_LLAMA3", raising=False)  # never the real model here
    monkeypatch.delenv("MPLBACKEND", raising=False)  # inline figures
    monkeypatch.setenv("SWRAG_CACHE", str(shared_cache))  # the run's model cache, never ~/.cache/swrag
    # One OpenMP thread in the kernel: on a busy 2-core machine torch's spinning worker
    # threads make generation ~10x slower; with one thread it stays a few seconds.
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("SWRAG_TEST_OMP_THREADS", "1"))
    # 05 and 08 skip their data cells without the shared data; in CI that is a failure, not a pass
    absent = [f for f in NEEDS_SHARED.get(path.name[:2], ()) if not (SHARED_EVAL / f).is_file()]
    if absent and ci_requires_everything():
        missing(f"the shared data the notebook's cells read ({', '.join(str(SHARED_EVAL / f) for f in absent)})",
                f"{SHARED_HOW} (or point SWRAG_SHARED at it)")
    nb = nbformat.read(path, as_version=4)
    before = sorted(p.name for p in COOKBOOK.iterdir())
    nb = _execute(nb, tmp_path, path.name)

    errors = [out for out in _outputs(nb) if out.get("output_type") == "error"]
    assert not errors, errors
    assert sorted(p.name for p in COOKBOOK.iterdir()) == before, "the notebook left files in cookbook/"
    text = _text(nb)
    name = path.name
    if name.startswith("01"):
        assert _has_mime(nb, "image/png")
        assert _has_mime(nb, "text/html")
        for strategy in ("FFS", "DFS", "DDS"):
            assert f"{strategy} (window_size=" in text
    elif name.startswith("02"):
        assert "pypdf reads 2 pages" in text
        assert "Sources:" in text and "chars " in text
        assert "annual_report_2023.pdf" in text and "warehouses.csv" in text
    elif name.startswith("03"):
        assert "DDS:" in text and "Sources:" in text
        assert "sample.md chars " in text
    elif name.startswith("07"):
        assert "reloaded equal: True" in text
    elif name.startswith("08"):
        if (SHARED_EVAL / "squad_v2_articles.jsonl").is_file():
            assert "swrag tune exit code 0" in text and "chosen:" in text
            assert "recorded after reopening: True" in text and "gold answer in the context:" in text
        else:
            assert "the tuning cells are skipped" in text
    elif name.startswith("04"):
        if importlib.util.find_spec("ipex_llm") is not None:  # the [ipex] environment
            assert "read from the low-bit cache: False" in text
            assert "read from the low-bit cache: True" in text
        else:  # the default environment: plain transformers, and the notebook says so
            assert "ipex-llm installed here: False -> backend 'transformers'" in text
            assert "backend=transformers" in text
            assert "skipped: the low-bit cache is ipex-llm's" in text
        assert "generate:" in text
        assert "SWRAG_LLAMA3 is not set" in text
    elif name.startswith("05"):
        if all((SHARED_EVAL / f).is_file() for f in EVAL_FILES):
            assert _has_mime(nb, "image/png")
            assert "| strategy | window | step |" in text
        else:
            assert "the grid below is skipped" in text
