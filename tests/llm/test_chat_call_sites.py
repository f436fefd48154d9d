"""The LLM call sites take a chat model as well as an LLM: multi-query, contextual
headers and the RAG chain (the chain's own streaming contract is in ``test_chain.py``).

Scripted chat models check the call sites; the ``slow`` tests use the bundled SmolLM2
(shared per session, private cache) to show the local chat model takes the same fast paths
as the plain LLM: the headers' shared-prefix KV cache, and the chain's token stream.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever

from swrag_integrations.methods.langchain_chain import build_rag_chain, chat_model_for
from swrag_integrations.methods.context import ContextualChunkHeaders
from swrag_integrations.langchain.multi_query import MultiQueryFusionRetriever, agenerate_queries, generate_queries

Q = "What is the capital of France?"
DOC = Document(
    page_content=(
        "ACME Corp annual report 2023. Revenue grew by 3% over the previous year. "
        "The growth came mostly from the European division. Costs fell slightly."
    ),
    metadata={"source": "acme.txt"},
)
SPANS = [(0, 29), (30, 73), (74, len(DOC.page_content))]
TEXT = "The tower is 31 metres tall. It was first lit on 14 October 1874."


class FixedRetriever(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager=None):
        return [Document(page_content=TEXT[29:], metadata={"source": "a.md", "source_id": "s1", "start_index": 29, "end_index": len(TEXT)})]


class _Kinds(BaseCallbackHandler):
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.kinds.append("chat")

    def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
        self.kinds.append("llm")


def test_multi_query_with_a_chat_model():
    chat = FakeListChatModel(responses=["Here you go:\n1. Which city is France's capital?\n2. France's capital city?"] * 2)
    expected = [Q, "Which city is France's capital?", "France's capital city?"]
    assert generate_queries(chat, Q, 3) == expected
    import asyncio

    assert asyncio.run(agenerate_queries(chat, Q, 3)) == expected


def test_multi_query_retriever_with_a_chat_model():
    chat = FakeListChatModel(responses=["1. lighthouse opening date"])
    retriever = MultiQueryFusionRetriever(retriever=FixedRetriever(), llm=chat, n_variants=1)
    docs = retriever.invoke("When was it first lit?")
    assert docs and docs[0].page_content == TEXT[29:]


def test_contextual_headers_with_a_chat_model():
    chat = FakeListChatModel(responses=["Context: From ACME's 2023 report.", "About revenue.", "About costs."])
    headers = ContextualChunkHeaders(chat, model_name="fake-chat", show_progress=False)
    out = headers.annotate(DOC, SPANS)
    assert [d.metadata["context_header"] for d in out] == ["From ACME's 2023 report.", "About revenue.", "About costs."]


@pytest.mark.slow
def test_the_local_chat_model_keeps_the_headers_prefix_cache_path():
    from chat_shared import shared_core

    chat = shared_core().as_chat_model()
    headers = ContextualChunkHeaders(chat, max_new_tokens=6, show_progress=False)
    headers.annotate(DOC, SPANS)
    report = headers.last_report
    assert report.llm_calls == 3 and report.prefix_passes == 1 and report.kv_reused == 3


@pytest.mark.slow
def test_chain_serves_the_local_llm_through_its_chat_model_and_streams_tokens():
    from swrag_integrations.llm.langchain_chat import LocalChatModel
    from chat_shared import shared_core

    core = shared_core()
    plain = core.as_langchain(max_new_tokens=16)
    chat = chat_model_for(plain)
    assert isinstance(chat, LocalChatModel) and chat.core is core and chat.max_tokens == 16
    assert isinstance(chat_model_for(core), LocalChatModel)

    chain = build_rag_chain(FixedRetriever(), plain)
    kinds = _Kinds()
    result = chain.invoke({"question": "When was it first lit?"}, config={"callbacks": [kinds]})
    assert kinds.kinds == ["chat"]
    # same prompt ids as the plain LLM, so the same greedy answer
    prompt = ("Answer the question based on the following context: It was first lit on 14 October 1874.; "
              "the question is When was it first lit?")
    assert result["answer"] == plain.invoke(prompt).strip()
    chunks = list(chain.stream("When was it first lit?"))
    assert set(chunks[0]) == {"question", "context", "sources"}
    assert len(chunks) > 3  # token by token
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    # the grounding report carries its own wall time; everything else must be identical
    total["grounding"].pop("seconds"), result["grounding"].pop("seconds")
    assert total == result
