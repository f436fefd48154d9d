"""The retriever's settings are defined once (retrieval/settings.py): both faces, the tuner
and the tuned-configuration file take their defaults from it and refuse the same bad values."""

from __future__ import annotations

import pytest
from ci_switch import importorskip
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.engine.settings import DEFAULT_SETTINGS, RetrieverSettings
from swrag_integrations.engine.tuned import Candidate, TunedConfig
from swrag_integrations.tuning.space import DEFAULT_CANDIDATE

BAD = [
    ({"k_child": 0}, "k_child must be a positive int"),
    ({"budget_tokens": -5}, "budget_tokens must be a positive int or None"),
    ({"search_type": "bogus"}, "search_type must be one of"),
    ({"expand": "everything"}, "expand must be one of"),
    ({"weights": (0.0, 0.0)}, "weights must be two non-negative numbers"),
    ({"weights": (1.0, 0.5, 0.2)}, "weights must be two non-negative numbers"),
    ({"rrf_c": 0}, "rrf_c must be a positive number"),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    idx = SlidingWindowIndex(tmp_path_factory.mktemp("settings") / "idx", embedding=DeterministicFakeEmbedding(size=16),
                             show_progress=False)
    idx.add_texts(["The lighthouse was lit in 1890. Ships passed safely after that."], metadatas=[{"source": "a"}])
    yield idx
    idx.engine.store.close()


def test_langchain_retriever_defaults_are_the_settings(index):
    assert index.as_retriever().settings == DEFAULT_SETTINGS


def test_llama_index_retriever_defaults_are_the_settings(index):
    importorskip("llama_index.core")
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    retriever = WindowedLlamaIndexRetriever(index)
    assert retriever.settings == DEFAULT_SETTINGS


def test_default_candidate_is_the_settings():
    assert {k: getattr(DEFAULT_SETTINGS, k) for k in DEFAULT_CANDIDATE.retriever_kwargs} == DEFAULT_CANDIDATE.retriever_kwargs


@pytest.mark.parametrize(("bad", "message"), BAD)
def test_every_face_refuses_the_same_bad_value(index, bad, message):
    with pytest.raises(ValueError, match=message):
        RetrieverSettings(**bad)
    with pytest.raises(ValueError, match=message):
        index.as_retriever(**bad)
    if "rrf_c" not in bad:  # the tuner does not search rrf_c, the file holds what it searches
        with pytest.raises(ValueError, match=message):
            TunedConfig({}, bad)
    importorskip("llama_index.core")
    from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

    with pytest.raises(ValueError, match=message):
        WindowedLlamaIndexRetriever(index, **bad)


def test_candidate_fills_defaults_from_the_settings():
    cand = Candidate.make({}, {"k_child": 12})
    assert cand.retriever_kwargs["k_child"] == 12
    assert cand.retriever_kwargs["weights"] == DEFAULT_SETTINGS.weights
    assert cand.retriever_kwargs["search_type"] == DEFAULT_SETTINGS.search_type
