"""LlamaIndex's global ``Settings`` read for the package (the embedding model, when one is set)."""

from __future__ import annotations

from typing import Any

from llama_index.core import Settings

from swrag_integrations.embeddings.minilm import as_embeddings

__all__ = ["llama_index_default_embeddings"]


def llama_index_default_embeddings() -> Any:
    """``llama_index.core.Settings.embed_model`` as an embedding object with
    ``embed_documents``/``embed_query`` (`as_embeddings`)
    if one is set (never triggers LlamaIndex's default OpenAI model), else ``None``."""
    model = getattr(Settings, "_embed_model", None)
    return None if model is None else as_embeddings(model)
