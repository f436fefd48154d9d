"""The techniques with the real local model (SmolLM2-135M, plain transformers fp32).

fp32 is used because IPEX-LLM's low-bit kernels are not batch-invariant: the cached and
uncached paths then differ slightly (see swrag_integrations.methods.context.headers).
"""

from __future__ import annotations

import os
import time

import pytest
from langchain_core.documents import Document

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from swrag_integrations.methods.context import ContextualChunkHeaders, LLMJudgeReranker  # noqa: E402

DOC = Document(page_content=(
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower. "
    "It was constructed from 1887 to 1889 as the centerpiece of the 1889 World's Fair. "
    "Although initially criticised by some of France's leading artists for its design, it has "
    "since become a global cultural icon of France and one of the most recognisable structures in the world."
))


@pytest.fixture(scope="module")
def fp32_llm(shared_cache):
    from swrag_integrations.llm import load_llama3

    import torch

    # the run's shared cache (tests/conftest.py): never reads (or depends on) ~/.cache/swrag
    llm = load_llama3(backend="transformers", max_new_tokens=12, cache_dir=shared_cache)
    with torch.no_grad():  # warm-up, so that the timings below compare like with like
        llm.model(input_ids=torch.tensor([llm.encode("Hello")]))
    return llm


@pytest.mark.slow
def test_kv_prefix_reuse_matches_plain_calls_and_runs_the_document_once(fp32_llm):
    model = fp32_llm.model
    lengths: list[int] = []
    original = model.forward

    def counting_forward(*args, **kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]
        lengths.append(int(ids.shape[1]))
        return original(*args, **kwargs)

    model.forward = counting_forward
    try:
        common = dict(max_new_tokens=3, chunk_size=40, show_progress=False)
        cached = ContextualChunkHeaders(fp32_llm, **common)
        t0 = time.perf_counter()
        out_kv = cached.transform_documents([DOC])
        t_kv = time.perf_counter() - t0
        kv_lengths, lengths[:] = list(lengths), []
        plain = ContextualChunkHeaders(fp32_llm, use_kv_cache=False, **common)
        t0 = time.perf_counter()
        out_plain = plain.transform_documents([DOC])
        t_plain = time.perf_counter() - t0
        plain_lengths = list(lengths)
    finally:
        del model.forward
    n = len(out_kv)
    assert n >= 3
    max_words = max(10, int(cached.max_header_tokens * 0.7))
    prompt = fp32_llm.prefix_cache(cached.document_prompt.format(document=DOC.page_content))
    prefix = len(prompt.prefix_ids)
    suffixes = [prompt.prompt_ids(cached.chunk_prompt.format(chunk=d.page_content, max_words=max_words))[prefix:]
                for d in out_kv]
    assert all(0 < len(s) < prefix for s in suffixes)
    # the document prefix runs through the model once with the cache, once per chunk without
    assert sum(1 for x in kv_lengths if x >= prefix) == 1
    assert sum(1 for x in plain_lengths if x >= prefix) == n
    assert sum(kv_lengths) < sum(plain_lengths) - (n - 1) * prefix + n
    assert cached.last_report.prefix_passes == 1 and cached.last_report.kv_reused == n
    assert [d.metadata.get("context_header") for d in out_kv] == [d.metadata.get("context_header") for d in out_plain]
    assert cached.last_report.with_header == n
    assert [d.page_content for d in out_kv] == [d.page_content for d in out_plain]
    print(f"\n{n} chunks, prefix {prefix} tokens: kv {t_kv:.2f}s ({sum(kv_lengths)} tokens through the model), "
          f"plain {t_plain:.2f}s ({sum(plain_lengths)} tokens)")


@pytest.mark.slow
def test_llm_judge_reranker_local_logits(fp32_llm):
    docs = [
        Document(page_content="Bananas are yellow fruits that grow in tropical climates."),
        Document(page_content="Paris is the capital and largest city of France."),
    ]
    judge = LLMJudgeReranker(llm=fp32_llm)
    out = judge.rerank("What is the capital of France?", docs)
    scores = [d.metadata["relevance_score"] for d in out]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert out[0].page_content.startswith("Paris")
    # the LangChain adapter of the same model takes the same (logit) path
    from swrag_integrations.methods.context._common import local_core

    assert local_core(fp32_llm.as_langchain()) is fp32_llm
