"""The embedding base class is framework-free; the LangChain face makes the package's
embeddings LangChain ``Embeddings`` (issue 40)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_embeddings_loads_no_framework():
    code = ("import sys\n"
            "from swrag_integrations.embeddings.minilm import MiniLMEmbeddings\n"
            "from swrag_integrations.embeddings.wrappers import PrecomputedEmbeddings\n"
            "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'llama_index'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


class _Letters:
    def embed_documents(self, texts):
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text):
        return [float(len(text)), 0.0]


def test_the_package_embeddings_are_langchain_embeddings_with_the_async_methods():
    from langchain_core.embeddings import Embeddings

    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
    from swrag_integrations.embeddings.wrappers import IndexTextEmbeddings, PrecomputedEmbeddings
    from swrag_integrations.langchain.vectorstore import VectorBackend  # noqa: F401 - the face registers

    wrapped = IndexTextEmbeddings(_Letters(), lambda text: "header " + text)
    assert isinstance(wrapped, Embeddings) and isinstance(PrecomputedEmbeddings(wrapped), Embeddings)
    assert issubclass(MiniLMEmbeddings, Embeddings)
    assert asyncio.run(wrapped.aembed_documents(["ab"])) == [[9.0, 1.0]]  # "header ab"
    assert asyncio.run(wrapped.aembed_query("ab")) == [2.0, 0.0]
