"""The RAG chain of the method: retriever -> prompt -> LLM -> answer with its sources.

LangChain: :func:`build_rag_chain` (LCEL). LlamaIndex: :func:`build_query_engine`.
Both use the method's prompt, in Chinese for Chinese questions.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnableParallel, RunnablePassthrough

from ._lang import contains_cjk

__all__ = ["PROMPT_EN", "PROMPT_ZH", "prompt_for", "format_context", "build_rag_chain", "build_query_engine"]

PROMPT_EN = "Answer the question based on the following context: {context}; the question is {question}"
PROMPT_ZH = "请根据以下上下文回答问题：{context}；问题是：{question}"


def prompt_for(question: str) -> str:
    """The method's prompt template, Chinese when the question contains CJK characters."""
    return PROMPT_ZH if contains_cjk(question or "") else PROMPT_EN


def format_context(docs: Sequence[Document]) -> str:
    """Join retrieved windows in rank order, each on its own paragraph."""
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


def build_rag_chain(retriever: Runnable, llm: Runnable) -> Runnable:
    """An LCEL chain ``question -> {"question", "answer", "context", "sources"}``.

    Args:
        retriever: any LangChain retriever (e.g. ``WindowedParentRetriever``).
        llm: any LangChain LLM or chat model (e.g. ``load_llama3().as_langchain()``).

    ``sources`` lists, per retrieved window, its source, exact offsets and text.
    """

    def to_prompt(inputs: dict) -> str:
        template = PromptTemplate.from_template(prompt_for(inputs["question"]))
        return template.format(context=format_context(inputs["docs"]), question=inputs["question"])

    def check(question: Any) -> str:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("the question must be a non-empty string")
        return question

    retrieve = RunnableParallel(docs=retriever, question=RunnablePassthrough())
    answer = RunnableLambda(to_prompt) | llm | StrOutputParser()
    return (
        RunnableLambda(check)
        | retrieve
        | RunnablePassthrough.assign(answer=answer)
        | RunnableLambda(
            lambda x: {
                "question": x["question"],
                "answer": x["answer"].strip(),
                "context": format_context(x["docs"]),
                "sources": _sources(x["docs"]),
            }
        )
    )


def build_query_engine(retriever: Any, llm: Any, *, language: str = "en") -> Any:
    """A LlamaIndex ``RetrieverQueryEngine`` with the method's prompt.

    Args:
        retriever: a LlamaIndex retriever (e.g. ``WindowedLlamaIndexRetriever``).
        llm: a LlamaIndex LLM (e.g. ``load_llama3().as_llamaindex()``).
        language: ``"en"`` or ``"zh"`` prompt.
    """
    from llama_index.core import PromptTemplate as LIPromptTemplate
    from llama_index.core.query_engine import RetrieverQueryEngine

    template = (PROMPT_ZH if language == "zh" else PROMPT_EN).replace("{context}", "{context_str}").replace(
        "{question}", "{query_str}"
    )
    return RetrieverQueryEngine.from_args(
        retriever=retriever, llm=llm, text_qa_template=LIPromptTemplate(template), response_mode="compact"
    )
