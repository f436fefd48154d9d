import os
from pathlib import Path

import pytest
from ci_switch import require_shared

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's shared data folder (``../shared`` beside the repo); required when ``CI`` is set."""
    return require_shared()


@pytest.fixture
def fake_default_embeddings(monkeypatch):
    """The CLI's default embedding, replaced by a 384-d fake (no model load)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    import swrag_integrations.retrieval.embeddings as embeddings

    monkeypatch.setattr(embeddings, "default_embeddings", lambda backend=None: DeterministicFakeEmbedding(size=384))
