"""Installs the package into fresh virtual environments: the core needs no framework,
each framework's extra pulls only that framework (issue: packaging / framework-free core)."""

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(path)
    return path / "bin" / "python"


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), *args],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


def _run(python: Path, code: str) -> str:
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, cwd="/",
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def _installed(python: Path) -> set[str]:
    out = _run(python, "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'].lower() for d in m.distributions()))")
    return set(out.split())


def test_core_and_langchain_extra_install_without_llama_index(tmp_path):
    python = _venv(tmp_path / "core")
    _pip(python, str(ROOT))
    got = _installed(python)
    assert not any(name.startswith(("langchain", "llama-index", "llama_index", "torch")) for name in got), got
    out = _run(python, "from swrag_integrations import iter_windows\n"
                       "import swrag_integrations.windows as w, sys\n"
                       "print([tuple(s) for s in iter_windows('One. Two. Three.', 'DDS', 4, 1, unit='char')])\n"
                       "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'llama_index'))))")
    assert "(0, 4)" in out and out.strip().endswith("[]")
    _pip(python, f"{ROOT}[langchain]")
    got = _installed(python)
    assert "langchain-core" in got and not any(name.startswith(("llama-index", "llama_index")) for name in got), got
    out = _run(python, "from swrag_integrations import DynamicStepTextSplitter\n"
                       "print(len(DynamicStepTextSplitter(window_size=8, step=1, unit='char').split_text('A b. C d. E f.')))")
    assert int(out) >= 2
    # the chat model imports with LangChain alone; loading a model names the missing extra
    out = _run(python, "import sys\n"
                       "from swrag_integrations.llm.chat import LocalChatModel\n"
                       "from swrag_integrations.llm import load_llama3\n"
                       "try:\n    load_llama3()\nexcept ImportError as exc:\n    print('ERR', exc)\n"
                       "print('torch' in sys.modules)")
    assert "ERR" in out and "swrag-integrations[local]" in out and out.strip().endswith("False"), out
