"""LocalLLM.prefix_cache / generate_with_prefix: the shared prefix runs through the model
once, and every answer equals the plain ``generate`` call on the whole prompt.

Uses the bundled SmolLM2-135M-Instruct with plain transformers fp32 (converted into a
private temporary cache), whose kernels give the same logits for a prompt computed in one
pass or in prefix + suffix passes. IPEX-LLM low-bit kernels do not (see test_llm.py).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from swrag_integrations.llm import LocalLLM, load_llama3  # noqa: E402
from swrag_integrations.llm.core import PrefixCache, _copy_cache  # noqa: E402

DOCUMENT = (
    "<document>\nThe Marrow Point Lighthouse stands on a granite headland at the northern end of "
    "Kessel Bay. It was designed by the engineer Ada Vance and first lit on 14 October 1874. "
    "The tower is 31 metres tall and painted with two red bands. A fog signal was added in 1899 "
    "and silenced in 2003.\n</document>\n"
)
SUFFIXES = [
    "When was the lighthouse first lit?",
    "Who designed it? Answer in one sentence.",
    "How tall is the tower?",
    "",
]


@pytest.fixture(scope="module")
def llm(shared_cache) -> LocalLLM:
    return load_llama3(backend="transformers", max_new_tokens=10, cache_dir=shared_cache)


@pytest.fixture()
def forward_lengths(llm):
    """Input lengths of every forward pass of the model while the test runs."""
    lengths: list[int] = []
    original = llm.model.forward

    def counting(*args, **kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]
        lengths.append(int(ids.shape[1]))
        return original(*args, **kwargs)

    llm.model.forward = counting
    yield lengths
    del llm.model.forward


@pytest.mark.slow
def test_generate_with_prefix_equals_plain_generate_and_runs_the_prefix_once(llm, forward_lengths):
    cached = llm.generate_with_prefix(DOCUMENT, SUFFIXES)
    cached_lengths, forward_lengths[:] = list(forward_lengths), []
    plain = [llm.generate(DOCUMENT + s) for s in SUFFIXES]
    plain_lengths = list(forward_lengths)
    assert cached == plain and all(cached)

    cache = llm.prefix_cache(DOCUMENT)
    prefix = len(cache.prefix_ids)
    assert prefix > 60
    full = [cache.prompt_ids(s) for s in SUFFIXES]
    assert full == [llm.encode(DOCUMENT + s) for s in SUFFIXES]  # the very same prompt ids
    assert all(ids[:prefix] == cache.prefix_ids for ids in full)
    # once through the prefix, then per suffix only its own tokens and one per new token
    assert [n for n in cached_lengths if n >= prefix] == [prefix]
    assert sum(cached_lengths) <= prefix + sum(len(ids) - prefix for ids in full) + len(SUFFIXES) * 10
    assert [n for n in plain_lengths if n >= prefix] == [len(ids) for ids in full]  # whole prompts


@pytest.mark.slow
def test_chat_messages_prefix_and_options(llm):
    messages = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": DOCUMENT}]
    cache = llm.prefix_cache(messages)
    for suffix in SUFFIXES[:2]:
        whole = [messages[0], {"role": "user", "content": DOCUMENT + suffix}]
        assert cache.prompt_ids(suffix) == llm.encode(whole)
        assert cache.generate(suffix, max_new_tokens=4) == llm.generate(whole, max_new_tokens=4)
    assert cache.passes == 1 and cache.reused == 2
    with pytest.raises(ValueError, match="unknown generation option"):
        cache.generate("x", top_k=3)
    with pytest.raises(ValueError, match="must not be empty"):
        llm.prefix_cache([])


@pytest.mark.slow
def test_stop_strings_and_end_of_turn_behave_as_generate(llm):
    plain = llm.generate(DOCUMENT + SUFFIXES[1], max_new_tokens=12)
    word = plain.split()[2]
    cache = llm.prefix_cache(DOCUMENT)
    ids = cache.generate_ids(SUFFIXES[1], stop=[word], max_new_tokens=12)
    assert len(ids) < 12  # generation halted at the stop string, not only the text cut
    assert cache.generate(SUFFIXES[1], stop=[word], max_new_tokens=12) == plain[: plain.index(word)]
    short = llm.generate_ids(DOCUMENT + SUFFIXES[0], max_new_tokens=40)
    assert cache.generate_ids(SUFFIXES[0], max_new_tokens=40) == short
    assert short[-1] in llm.eos_token_ids  # stopped at <|im_end|>


@pytest.mark.slow
def test_tokens_merging_across_the_boundary_cut_the_cache(llm, forward_lengths):
    """A prefix ending in a space: ``" When"`` is one token in the whole prompt, so the
    cached prefix's last token (the lone space) must not be used."""
    prefix = DOCUMENT + "Question:"
    cache = llm.prefix_cache(prefix + " ")
    full = cache.prompt_ids("When was the lighthouse first lit?")
    shared = next(i for i, (a, b) in enumerate(zip(cache.prefix_ids, full)) if a != b)
    assert shared == len(cache.prefix_ids) - 1
    forward_lengths.clear()
    answer = cache.generate("When was the lighthouse first lit?")
    assert forward_lengths[0] == len(full) - shared  # the cut cache + the rest of the prompt
    assert answer == llm.generate(prefix + " When was the lighthouse first lit?")


def test_copy_cache_is_independent_and_can_be_cut():
    import torch

    layer = (torch.arange(2 * 3 * 5 * 4, dtype=torch.float32).reshape(2, 3, 5, 4),) * 2
    cache = (layer, layer)
    copy = _copy_cache(cache)
    copy[0][0].add_(1)
    assert cache[0][0][0, 0, 0, 0] == 0
    cut = _copy_cache(cache, 3)
    assert cut[1][1].shape == (2, 3, 3, 4) and cut[1][1].is_contiguous()
    assert cut[1][1].equal(cache[1][1][:, :, :3])

    from transformers.cache_utils import DynamicCache

    if hasattr(DynamicCache, "from_legacy_cache"):  # transformers 4.x
        dynamic = DynamicCache.from_legacy_cache(cache)
    else:  # 5.x: a cache of layers
        dynamic = DynamicCache(ddp_cache_data=cache)
    cut = _copy_cache(dynamic, 2)
    assert cut.get_seq_length() == 2 and dynamic.get_seq_length() == 5
    assert getattr(cut, "seen_tokens", 2) == 2
    assert _copy_cache(dynamic).get_seq_length() == 5
    assert isinstance(PrefixCache.__doc__, str)
