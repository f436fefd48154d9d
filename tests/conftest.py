import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's shared data folder (``../shared`` beside the repo)."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED


@pytest.fixture
def fake_default_embeddings(monkeypatch):
    """The CLI's default embedding, replaced by a 384-d fake (no model load)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    import swrag_integrations.retrieval.embeddings as embeddings

    monkeypatch.setattr(embeddings, "default_embeddings", lambda: DeterministicFakeEmbedding(size=384))
