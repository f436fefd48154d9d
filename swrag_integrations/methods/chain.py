"""The RAG chain of the method: retriever -> prompt -> LLM -> answer with its sources.

LangChain: :func:`build_rag_chain` (LCEL, streams answer tokens). LlamaIndex:
:func:`build_query_engine`. Both use the method's prompt, in Chinese for Chinese questions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # LangChain is imported where a chain is built: format_context and the sources need none
    from langchain_core.documents import Document
    from langchain_core.runnables import Runnable
    from langchain_core.runnables.utils import AddableDict

from swrag_integrations.core.lang import contains_cjk

__all__ = [
    "PROMPT_EN",
    "PROMPT_ZH",
    "prompt_for",
    "format_context",
    "answer_locally",
    "chat_model_for",
    "build_rag_chain",
    "build_query_engine",
]

PROMPT_EN = "Answer the question based on the following context: {context}; the question is {question}"
PROMPT_ZH = "请根据以下上下文回答问题：{context}；问题是：{question}"


def prompt_for(question: str) -> str:
    """The method's prompt template, Chinese when the question contains CJK characters."""
    return PROMPT_ZH if contains_cjk(question or "") else PROMPT_EN


def format_context(docs: Sequence[Document]) -> str:
    """Join retrieved windows in rank order, each on its own paragraph (any documents
    with ``page_content``: LangChain's or the engine's ``PlainDocument``)."""
    return "\n\n".join(doc.page_content.strip() for doc in docs if doc.page_content.strip())


def _sources(docs: Sequence[Document]) -> list[dict[str, Any]]:
    out = []
    for doc in docs:
        meta = doc.metadata
        out.append(
            {
                "source": meta.get("source", meta.get("source_id")),
                "source_id": meta.get("source_id"),
                "start_index": meta.get("start_index"),
                "end_index": meta.get("end_index"),
                "text": doc.page_content,
            }
        )
    return out


def answer_locally(llm: Any, question: str, docs: Sequence[Any], *, grounding: Any = True) -> dict[str, Any]:
    """What :func:`build_rag_chain` returns, without LangChain: the method's prompt over
    ``docs`` (retrieved windows, rank order), answered by the package's local LLM core
    (:class:`~swrag_integrations.llm.LocalLLM`) through its chat template, as the chain's
    chat model renders a one-turn prompt, with the same generation settings.

    Args:
        llm: a :class:`~swrag_integrations.llm.LocalLLM` (``load_llama3()``).
        question: the question.
        docs: the retrieved windows (``page_content`` and ``metadata`` with ``source``,
            ``start_index``, ``end_index``).
        grounding: as in :func:`build_rag_chain`.

    Returns:
        ``{"question", "answer", "context", "sources", "grounding"}`` (``grounding`` is
        ``None`` with ``grounding=False``).
    """
    question = _question(question)
    context = format_context(docs)
    prompt = prompt_for(question).format(context=context, question=question)
    answer = llm.generate([{"role": "user", "content": prompt}], chat=True).strip()
    sources = _sources(docs)
    checked = None
    if grounding:
        from swrag_integrations.methods.grounding import GroundingChecker

        checker = grounding if isinstance(grounding, GroundingChecker) else GroundingChecker()
        checked = checker.check(answer, sources, question=question).to_dict()
    return {"question": question, "answer": answer, "context": context, "sources": sources, "grounding": checked}


def chat_model_for(llm: Any) -> Any:
    """The chat model for the package's own local LLM, anything else unchanged.

    A :class:`~swrag_integrations.llm.LocalLLM` or its plain LangChain ``LLM`` adapter
    (``load_llama3().as_langchain()``) becomes the
    :class:`~swrag_integrations.llm.LocalChatModel` over the same loaded model with the
    same settings (``max_new_tokens`` -> ``max_tokens``, ``temperature``,
    ``repetition_penalty``). For a one-turn prompt both render the same chat-template
    ids, so answers do not change; the chat model adds usage metadata and token
    counting with the model's own tokenizer.
    """
    from swrag_integrations.llm.core import LocalLLM

    if isinstance(llm, LocalLLM):
        return llm.as_chat_model()
    from swrag_integrations.llm.langchain_llm import LangChainLLM  # LangChain only, as this module

    if isinstance(llm, LangChainLLM):
        return llm.core.as_chat_model(
            max_tokens=llm.max_new_tokens, temperature=llm.temperature, repetition_penalty=llm.repetition_penalty
        )
    return llm


def _question(value: Any) -> str:
    """The question of a chain input: a string or ``{"question": str}``."""
    if isinstance(value, Mapping):
        if "question" not in value:
            raise ValueError(f"the chain input dict needs a 'question' key, got {sorted(map(str, value))}")
        extra = sorted(map(str, set(value) - {"question"}))
        if extra:
            raise ValueError(f"the chain input takes only the key 'question', got also {extra}")
        value = value["question"]
    if not isinstance(value, str) or not value.strip():
        raise ValueError("the question must be a non-empty string")
    return value


class _AnswerChunks:
    """Turns the assign step's chunks into the chain's output chunks.

    Keeps what has arrived of ``question`` and ``docs``; once both are there, emits the
    head chunk ``{"question", "context", "sources"}``; then emits every piece of the
    answer as ``{"answer": piece}``, without the answer's leading whitespace and with
    whitespace at the end of what has arrived held back until text follows, so the
    pieces join to ``answer.strip()``.
    """

    def __init__(self, checker: Any = None) -> None:
        self.checker = checker
        self.answer = ""
        self.seen: dict[str, Any] = {}
        self.head_sent = False
        self.answered = False
        self.started = False
        self.pending = ""

    def feed(self, chunk: Mapping[str, Any]) -> list[AddableDict]:
        from langchain_core.runnables.utils import AddableDict

        out: list[AddableDict] = []
        self.seen.update((k, v) for k, v in chunk.items() if k != "answer")
        if not self.head_sent and "docs" in self.seen and "question" in self.seen:
            self.head_sent = True
            docs = self.seen["docs"]
            out.append(AddableDict(question=self.seen["question"], context=format_context(docs), sources=_sources(docs)))
        piece = chunk.get("answer")
        if piece:
            if not self.head_sent:
                raise RuntimeError("answer tokens arrived before the retrieved documents")
            if not self.started:
                piece = piece.lstrip()
                self.started = bool(piece)
            text = self.pending + piece
            body = text.rstrip()
            self.pending = text[len(body):]
            if body:
                self.answered = True
                self.answer += body
                out.append(AddableDict(answer=body))
        return out

    def close(self) -> list[AddableDict]:
        from langchain_core.runnables.utils import AddableDict

        out = [] if self.answered else [AddableDict(answer="")]
        if self.checker is not None:  # last: every answer sentence tied to the sources
            question = self.seen.get("question")
            grounded = self.checker.check(self.answer, _sources(self.seen.get("docs") or []),
                                          question=question if isinstance(question, str) else None)
            out.append(AddableDict(grounding=grounded.to_dict()))
        return out


def build_rag_chain(retriever: Runnable, llm: Runnable, *, grounding: Any = True) -> Runnable:
    """An LCEL chain ``question -> {"question", "answer", "context", "sources", "grounding"}``.

    Args:
        retriever: any LangChain retriever (e.g. ``WindowedParentRetriever``).
        llm: any LangChain chat model or LLM, e.g. ``load_llama3().as_chat_model()``.
            The package's plain local LLM (``.as_langchain()``) or a ``LocalLLM`` is
            served through its chat model (:func:`chat_model_for`).

    Input: the question as a string, or ``{"question": "..."}``. ``sources`` lists, per
    retrieved window, its source, exact offsets and text; ``answer`` is stripped of
    surrounding whitespace. ``grounding`` (with ``grounding=True``, the default, or a
    :class:`~swrag_integrations.methods.grounding.GroundingChecker`) ties every answer sentence
    to exact source offsets and flags unsupported sentences and claims
    (:meth:`~swrag_integrations.methods.grounding.GroundedAnswer.to_dict`); ``grounding=False``
    leaves it out.

    Streaming (``.stream`` / ``.astream``): **sources first**. The first chunk is
    ``{"question", "context", "sources"}`` (as soon as retrieval is done), then one
    ``{"answer": "<text>"}`` chunk per piece of generated text as the model produces it
    (leading/trailing whitespace of the whole answer held back), then (with grounding)
    one ``{"grounding": {...}}`` chunk. Adding the chunks (``+``, they are
    ``AddableDict``) gives exactly what ``invoke`` returns.
    """
    llm = chat_model_for(llm)
    checker = None
    if grounding is not False and grounding is not None:
        from swrag_integrations.methods.grounding import GroundingChecker

        checker = grounding if isinstance(grounding, GroundingChecker) else GroundingChecker()

    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import PromptTemplate
    from langchain_core.runnables import RunnableGenerator, RunnableLambda, RunnableParallel, RunnablePassthrough

    def to_prompt(inputs: dict) -> str:
        template = PromptTemplate.from_template(prompt_for(inputs["question"]))
        return template.format(context=format_context(inputs["docs"]), question=inputs["question"])

    def finish(chunks: Iterator[Mapping[str, Any]]) -> Iterator[AddableDict]:
        state = _AnswerChunks(checker)
        for chunk in chunks:
            yield from state.feed(chunk)
        yield from state.close()

    async def afinish(chunks: AsyncIterator[Mapping[str, Any]]) -> AsyncIterator[AddableDict]:
        state = _AnswerChunks(checker)
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


def build_query_engine(retriever: Any, llm: Any, *, language: str = "en", grounding: bool = True) -> Any:
    """A LlamaIndex ``RetrieverQueryEngine`` with the method's prompt.

    Args:
        retriever: a LlamaIndex retriever (e.g. ``WindowedLlamaIndexRetriever``).
        llm: a LlamaIndex LLM (e.g. ``load_llama3().as_llamaindex()``).
        language: ``"en"`` or ``"zh"`` prompt.
        grounding: wrap it so every response carries ``metadata["grounding"]``
            (:class:`~swrag_integrations.methods.grounding.GroundedQueryEngine`).
    """
    from llama_index.core import PromptTemplate as LIPromptTemplate
    from llama_index.core.query_engine import RetrieverQueryEngine

    template = (PROMPT_ZH if language == "zh" else PROMPT_EN).replace("{context}", "{context_str}").replace(
        "{question}", "{query_str}"
    )
    engine = RetrieverQueryEngine.from_args(
        retriever=retriever, llm=llm, text_qa_template=LIPromptTemplate(template), response_mode="compact"
    )
    if not grounding:
        return engine
    from swrag_integrations.methods.grounding.llama_index import GroundedQueryEngine

    return GroundedQueryEngine(engine)
