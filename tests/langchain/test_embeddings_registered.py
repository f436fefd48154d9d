"""The package's embeddings are LangChain ``Embeddings`` once the LangChain face is imported,
however the user imported them (a pydantic field typed ``Embeddings`` accepts them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("langchain_core")

CODE = """
from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
from langchain_core.embeddings import Embeddings
before = issubclass(MiniLMEmbeddings, Embeddings)
import swrag_integrations.langchain
from pydantic import BaseModel, ConfigDict
class Holder(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    embeddings: Embeddings
Holder(embeddings=MiniLMEmbeddings.__new__(MiniLMEmbeddings))
print(before, issubclass(MiniLMEmbeddings, Embeddings))
"""


def test_importing_the_langchain_face_registers_the_package_embeddings():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"]
