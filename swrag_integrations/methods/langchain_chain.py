"""The LangChain face of the answer chain: an LCEL ``Runnable`` over the framework-free core.

`build_rag_chain` wires a LangChain retriever and LLM around the core of
`swrag_integrations.methods.chain` (the method's prompt, the sources with exact offsets,
the grounding call, the streaming chunks); `chat_model_for` serves the package's own
local LLM through its chat model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.runnables.utils import AddableDict

from swrag_integrations.methods.chain import AnswerChunks, _question, answer_prompt, grounding_checker

__all__ = ["build_rag_chain", "chat_model_for"]


def chat_model_for(llm: Any) -> Any:
    """The chat model for the package's own local LLM, anything else unchanged.

    A `LocalLLM` or its plain LangChain ``LLM`` adapter
    (``load_llama3().as_langchain()``) becomes the
    `LocalChatModel` over the same loaded model with the
    same settings (``max_new_tokens`` -> ``max_tokens``, ``temperature``,
    ``repetition_penalty``). For a one-turn prompt both render the same chat-template
    ids, so answers do not change; the chat model adds usage metadata and token
    counting with the model's own tokenizer.
    """
    from swrag_integrations.llm.core import LocalLLM
    from swrag_integrations.llm.langchain_llm import LangChainLLM

    if isinstance(llm, LocalLLM):
        return llm.as_chat_model()
    if isinstance(llm, LangChainLLM):
        return llm.core.as_chat_model(
            max_tokens=llm.max_new_tokens, temperature=llm.temperature, repetition_penalty=llm.repetition_penalty
        )
    return llm


def build_rag_chain(retriever: Runnable, llm: Runnable, *, grounding: Any = True) -> Runnable:
    """An LCEL chain ``question -> {"question", "answer", "context", "sources", "grounding"}``.

    Args:
        retriever: any LangChain retriever (e.g. ``WindowedParentRetriever``).
        llm: any LangChain chat model or LLM, e.g. ``load_llama3().as_chat_model()``.
            The package's plain local LLM (``.as_langchain()``) or a ``LocalLLM`` is
            served through its chat model (`chat_model_for`).

    Input: the question as a string, or ``{"question": "..."}``. ``sources`` lists, per
    retrieved window, its source, exact offsets and text; ``answer`` is stripped of
    surrounding whitespace. ``grounding`` (with ``grounding=True``, the default, or a
    `GroundingChecker`, see
    `grounding_checker`) ties every answer sentence
    to exact source offsets and flags unsupported sentences and claims
    (`to_dict`); ``grounding=False``
    leaves it out.

    Streaming (``.stream`` / ``.astream``): **sources first**. The first chunk is
    ``{"question", "context", "sources"}`` (as soon as retrieval is done), then one
    ``{"answer": "<text>"}`` chunk per piece of generated text as the model produces it
    (leading/trailing whitespace of the whole answer held back), then (with grounding)
    one ``{"grounding": {...}}`` chunk. Adding the chunks (``+``, they are
    ``AddableDict``) gives exactly what ``invoke`` returns.
    """
    llm = chat_model_for(llm)
    checker = grounding_checker(grounding)

    def to_prompt(inputs: dict) -> str:
        return answer_prompt(inputs["question"], inputs["docs"])

    def finish(chunks: Iterator[Mapping[str, Any]]) -> Iterator[AddableDict]:
        state = AnswerChunks(checker, AddableDict)
        for chunk in chunks:
            yield from state.feed(chunk)
        yield from state.close()

    async def afinish(chunks: AsyncIterator[Mapping[str, Any]]) -> AsyncIterator[AddableDict]:
        state = AnswerChunks(checker, AddableDict)
        async for chunk in chunks:
            for out in state.feed(chunk):
                yield out
        for out in state.close():
            yield out

    retrieve = RunnableParallel(docs=retriever, question=RunnablePassthrough())
    answer = RunnableLambda(to_prompt) | llm | StrOutputParser()
    return (
        RunnableLambda(_question, name="question")
        | retrieve
        | RunnablePassthrough.assign(answer=answer)
        | RunnableGenerator(finish, afinish, name="rag_answer")
    )
