"""Issue 39, item 1: the LangChain-named parameters of the drop-in splitters keep the
meaning they have in the LangChain splitter they replace (characters counted with ``len``),
``length_function`` is taken, and ``from_tiktoken_encoder`` never reaches for the network."""

import pickle
import socket

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.utils import get_tokenizer

from swrag_integrations import DynamicStepTextSplitter, DynamicWindowTextSplitter, FixedWindowTextSplitter, iter_windows
import swrag_integrations.langchain as lc
from swrag_integrations.llama_index import FixedWindowNodeParser
from swrag_integrations.core.windows import count_units

TEXT = "The quick brown fox jumps over the lazy dog. It was not amused, and said so twice.\n\n" * 40
LC = [FixedWindowTextSplitter, DynamicWindowTextSplitter, DynamicStepTextSplitter]


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def overlap_for(cls, overlap: int = 50) -> dict:
    return {"chunk_overlap": 0} if cls.strategy == "DDS" else {"chunk_overlap": overlap}


@pytest.mark.parametrize("cls", LC)
def test_chunk_size_counts_characters_like_the_langchain_splitter_it_replaces(cls):
    langchain = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=50)
    splitter = cls(chunk_size=200, **overlap_for(cls))
    assert splitter.config.unit == "char"
    ours, theirs = splitter.split_text(TEXT), langchain.split_text(TEXT)
    # the same scale as LangChain's chunks (tokens made them 4-5x larger)
    assert max(map(len, theirs)) <= 200
    limit = 200 if cls.strategy == "FFS" else 2 * 200  # DFS runs on to a delimiter; DDS < 2w
    assert max(map(len, ours)) <= limit
    assert sum(map(len, ours)) / len(ours) < 2 * sum(map(len, theirs)) / len(theirs)
    if cls.strategy == "FFS":
        assert [(a, b) for a, b in iter_windows(TEXT, "FFS", 200, 150, unit="char")] == [
            (d.metadata["start_index"], d.metadata["end_index"]) for d in splitter.create_documents([TEXT])
        ]


def test_window_size_and_step_keep_counting_tokens():
    assert FixedWindowTextSplitter(window_size=64, step=32).config.unit == "token"
    # a token source named with the LangChain sizes still means tokens
    assert FixedWindowTextSplitter(chunk_size=64, chunk_overlap=8, encoding_name="cl100k_base_offline").config.unit == "token"
    assert FixedWindowTextSplitter(chunk_size=64, chunk_overlap=8, unit="token").config.unit == "token"


@pytest.mark.parametrize("cls", LC)
def test_length_function_len_and_token_length_measure_the_windows(cls, no_network):
    by_len = cls(chunk_size=120, length_function=len, **overlap_for(cls))
    assert by_len.config.unit == "char"
    assert by_len.split_text(TEXT) == cls(chunk_size=120, unit="char", **overlap_for(cls)).split_text(TEXT)

    by_tokens = cls(chunk_size=30, length_function=lc.TokenLength("cl100k_base"), **overlap_for(cls, 10))
    assert (by_tokens.config.unit, by_tokens.config.encoding_name) == ("token", "cl100k_base_offline")
    tiktoken_made = cls.from_tiktoken_encoder(chunk_size=30, **overlap_for(cls, 10))
    assert by_tokens.split_text(TEXT) == tiktoken_made.split_text(TEXT)
    if cls.strategy == "FFS":
        assert max(lc.TokenLength()(chunk) for chunk in by_tokens.split_text(TEXT)) == 30
    assert lc.TokenLength()(TEXT) == count_units(TEXT, "token")
    # picklable, for worker processes
    again = pickle.loads(pickle.dumps(by_tokens))
    assert again.split_text(TEXT[:500]) == by_tokens.split_text(TEXT[:500])


def test_length_function_that_cannot_cut_windows_is_refused_with_what_is_supported():
    with pytest.raises(TypeError, match=r"length_function=word_count: .*only len \(characters\) and .*TokenLength"):

        def word_count(text: str) -> int:
            return len(text.split())

        FixedWindowTextSplitter(chunk_size=100, chunk_overlap=10, length_function=word_count)
    with pytest.raises(ValueError, match="counts chars, but unit='token'"):
        FixedWindowTextSplitter(chunk_size=100, chunk_overlap=10, length_function=len, unit="token")


@pytest.mark.parametrize("kwargs, named", [
    (dict(model_name="gpt-4o"), "model_name='gpt-4o' (encoding 'o200k_base')"),
    (dict(encoding_name="gpt2"), "encoding_name='gpt2'"),
])
def test_from_tiktoken_encoder_names_the_offline_encodings_instead_of_downloading(kwargs, named, no_network):
    with pytest.raises(ValueError) as caught:
        FixedWindowTextSplitter.from_tiktoken_encoder(chunk_size=16, chunk_overlap=0, **kwargs)
    message = str(caught.value)
    assert message.startswith(named) and "not bundled offline" in message
    assert all(repr(name) in message for name in lc.offline_encodings())
    assert lc.offline_encodings()["cl100k_base"] == "cl100k_base_offline"


def test_node_parsers_keep_tokens_as_llama_index_sentence_splitter_does():
    # LlamaIndex's own SentenceSplitter measures chunk_size with a tokenizer, not len
    sentence = SentenceSplitter(chunk_size=40, chunk_overlap=0)
    tokens = get_tokenizer()
    chunks = sentence.split_text(TEXT)
    assert max(len(tokens(c)) for c in chunks) <= 40 < max(len(c) for c in chunks)
    assert FixedWindowNodeParser(chunk_size=40, chunk_overlap=0).unit == "token"
