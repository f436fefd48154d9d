"""LlamaIndex's Settings.embed_model is read in the LlamaIndex face, not in embeddings.minilm (issue 40)."""

from __future__ import annotations

from llama_index.core import Settings
from llama_index.core.embeddings import MockEmbedding

from swrag_integrations.embeddings import minilm
from swrag_integrations.llama_index.settings import llama_index_default_embeddings


def test_settings_embed_model_is_read_by_the_face():
    assert not hasattr(minilm, "llama_index_default_embeddings")
    previous = getattr(Settings, "_embed_model", None)
    try:
        Settings._embed_model = None
        assert llama_index_default_embeddings() is None  # never LlamaIndex's default OpenAI model
        Settings.embed_model = MockEmbedding(embed_dim=8)
        got = llama_index_default_embeddings()
        assert got.embed_query("harbour") == Settings.embed_model.get_query_embedding("harbour")
        assert got.embed_documents(["a", "b"]) == [list(v) for v in Settings.embed_model.get_text_embedding_batch(["a", "b"])]
    finally:
        Settings._embed_model = previous
