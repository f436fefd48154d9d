"""The answer of the method, framework-free: prompt -> LLM -> answer with its sources.

The core of the RAG chain: the method's prompt (in Chinese for Chinese questions) over the
retrieved windows (`answer_prompt`, `format_context`), the sources with their
exact offsets, the grounding call (`grounding_checker`) and the streaming chunks
(`AnswerChunks`); `answer_locally` answers with the package's local LLM core.
The faces: the LangChain LCEL chain `build_rag_chain` (and
`chat_model_for`) and the LlamaIndex query engine
`build_query_engine`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Sequence

from swrag_integrations._moved import moved_names_getattr
from swrag_integrations.core.lang import contains_cjk

__all__ = [
    "PROMPT_EN",
    "PROMPT_ZH",
    "prompt_for",
    "answer_prompt",
    "format_context",
    "grounding_checker",
    "AnswerChunks",
    "answer_locally",
    "llama_index_template",
]

PROMPT_EN = "Answer the question based on the following context: {context}; the question is {question}"
PROMPT_ZH = "请根据以下上下文回答问题：{context}；问题是：{question}"


def prompt_for(question: str) -> str:
    """The method's prompt template, Chinese when the question contains CJK characters."""
    return PROMPT_ZH if contains_cjk(question or "") else PROMPT_EN


def llama_index_template(language: str = "en") -> str:
    """The method's prompt with LlamaIndex's variable names (``{context_str}``, ``{query_str}``):
    Chinese for ``language="zh"``, else English."""
    template = PROMPT_ZH if language == "zh" else PROMPT_EN
    return template.replace("{context}", "{context_str}").replace("{question}", "{query_str}")


def format_context(docs: Sequence[Any]) -> str:
    """Join retrieved windows in rank order, each on its own paragraph (any documents
    with ``page_content``: LangChain's or the engine's ``PlainDocument``)."""
    return "\n\n".join(doc.page_content.strip() for doc in docs if doc.page_content.strip())


def answer_prompt(question: str, docs: Sequence[Any]) -> str:
    """The method's prompt for ``question`` over ``docs`` (retrieved windows, rank order)."""
    return prompt_for(question).format(context=format_context(docs), question=question)


def grounding_checker(grounding: Any) -> Any:
    """The grounding checker a chain uses: ``True`` -> a default
    `GroundingChecker`, a checker -> itself,
    ``False``/``None`` -> ``None`` (no grounding)."""
    if grounding is False or grounding is None:
        return None
    from swrag_integrations.methods.grounding import GroundingChecker

    return grounding if isinstance(grounding, GroundingChecker) else GroundingChecker()


def _sources(docs: Sequence[Any]) -> list[dict[str, Any]]:
    """Per retrieved window: its source, ``source_id``, exact offsets and text."""
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
    """What `build_rag_chain` returns, without LangChain: the method's prompt over
    ``docs`` (retrieved windows, rank order), answered by the package's local LLM core
    (`LocalLLM`) through its chat template, as the chain's
    chat model renders a one-turn prompt, with the same generation settings.

    Args:
        llm: a `LocalLLM` (``load_llama3()``).
        question: the question.
        docs: the retrieved windows (``page_content`` and ``metadata`` with ``source``,
            ``start_index``, ``end_index``).
        grounding: as in `build_rag_chain` (`grounding_checker`).

    Returns:
        ``{"question", "answer", "context", "sources", "grounding"}`` (``grounding`` is
        ``None`` with ``grounding=False``).
    """
    question = _question(question)
    context = format_context(docs)
    answer = llm.generate([{"role": "user", "content": answer_prompt(question, docs)}], chat=True).strip()
    sources = _sources(docs)
    checker = grounding_checker(grounding)
    checked = checker.check(answer, sources, question=question).to_dict() if checker is not None else None
    return {"question": question, "answer": answer, "context": context, "sources": sources, "grounding": checked}


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


class AnswerChunks:
    """Turns the streamed chunks of an answer (``question``, ``docs``, ``answer`` pieces)
    into the chain's output chunks (dicts made by ``make``; the LangChain face makes
    ``AddableDict`` s, which add up to the whole result).

    Keeps what has arrived of ``question`` and ``docs``; once both are there, emits the
    head chunk ``{"question", "context", "sources"}``; then emits every piece of the
    answer as ``{"answer": piece}``, without the answer's leading whitespace and with
    whitespace at the end of what has arrived held back until text follows, so the
    pieces join to ``answer.strip()``.
    """

    def __init__(self, checker: Any = None, make: Callable[..., dict[str, Any]] = dict) -> None:
        self.checker = checker
        self.make = make
        self.answer = ""
        self.seen: dict[str, Any] = {}
        self.head_sent = False
        self.answered = False
        self.started = False
        self.pending = ""

    def feed(self, chunk: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self.seen.update((k, v) for k, v in chunk.items() if k != "answer")
        if not self.head_sent and "docs" in self.seen and "question" in self.seen:
            self.head_sent = True
            docs = self.seen["docs"]
            out.append(self.make(question=self.seen["question"], context=format_context(docs), sources=_sources(docs)))
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
                out.append(self.make(answer=body))
        return out

    def close(self) -> list[dict[str, Any]]:
        out = [] if self.answered else [self.make(answer="")]
        if self.checker is not None:  # last: every answer sentence tied to the sources
            question = self.seen.get("question")
            grounded = self.checker.check(self.answer, _sources(self.seen.get("docs") or []),
                                          question=question if isinstance(question, str) else None)
            out.append(self.make(grounding=grounded.to_dict()))
        return out


# The framework faces moved to their own modules; the old names still resolve, with a warning.
__getattr__ = moved_names_getattr(__name__)
