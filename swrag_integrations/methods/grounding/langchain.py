"""The LangChain face of grounding: a Runnable the RAG chain can append, and CLI formatting.

* `ground_chain_output` takes a chain output dict (``{"question", "answer",
  "sources" | "documents" | "docs", ...}``, as `swrag_integrations.methods.langchain_chain.build_rag_chain`
  returns) and returns a copy with ``"grounding"``: `GroundedAnswer.to_dict`
  (``None`` when ``answer`` is ``None``, i.e. nothing was generated).
* `grounding_runnable` is the same as a LangChain ``Runnable``:
  ``build_rag_chain(retriever, llm) | grounding_runnable()``.
* `format_grounded_answer` renders such a dict for the terminal: the answer with
  ``[n]`` markers, unsupported sentences/claims marked, one entry per distinct cited
  span, and the distinct retrieved spans.

All three run the one checker (`GroundingChecker`).
"""

from __future__ import annotations

from functools import partial
from pathlib import PurePath
from typing import Any

from swrag_integrations.methods.grounding.align import GroundingChecker
from swrag_integrations.methods.grounding.result import GroundedAnswer

__all__ = ["ground_chain_output", "grounding_runnable", "format_grounded_answer", "SOURCE_KEYS"]

SOURCE_KEYS = ("sources", "documents", "docs", "source_documents")


def _sources_of(result: dict) -> Any:
    for key in SOURCE_KEYS:
        if key in result and result[key] is not None:
            return result[key]
    context = result.get("context")
    if isinstance(context, (list, tuple)):
        return context
    return []


def ground_chain_output(result: dict, *, checker: GroundingChecker | None = None) -> dict:
    """``result`` plus ``"grounding"`` (see the module docstring).

    The passages are ``result["sources"]`` (the chain's dicts), else ``"documents"``/
    ``"docs"``/``"source_documents"`` (LangChain ``Document`` s), else ``"context"`` when
    it is a list; ``result["question"]`` (if any) counts as given, not invented.

    Args:
        result: A RAG chain's output dict (``"answer"`` plus its sources).
        checker: The `GroundingChecker` to use; ``None`` for the default one.

    Raises:
        TypeError: ``result`` is not a dict, or its answer is not a ``str``/``None``.
        ValueError: ``result`` has no ``"answer"``.
    """
    if not isinstance(result, dict):
        raise TypeError(f"result must be a dict with 'answer' and 'sources', got {type(result).__name__}")
    if "answer" not in result:
        raise ValueError("result must have an 'answer' key (and 'sources' or 'documents')")
    out = dict(result)
    answer = result["answer"]
    if answer is None:
        out["grounding"] = None
        return out
    question = result.get("question") if isinstance(result.get("question"), str) else None
    grounded = (checker or GroundingChecker()).check(answer, _sources_of(result), question=question)
    out["grounding"] = grounded.to_dict()
    return out


def grounding_runnable(checker: GroundingChecker | None = None) -> Any:
    """A LangChain ``Runnable`` ``dict -> dict`` running `ground_chain_output`.

    Args:
        checker: The `GroundingChecker` to use; ``None`` for the default one.
    """
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(partial(ground_chain_output, checker=checker), name="grounding")


def _label(src: dict) -> str:
    name = PurePath(str(src.get("source") or src.get("source_id") or "?")).name
    if src.get("start_index") is None:
        return f"{name} (no offsets)"
    return f"{name} {src.get('start_index')}-{src.get('end_index')}"


def format_grounded_answer(result: dict, *, width: int = 100) -> str:
    """Terminal text for a chain output dict (grounded first if it has no ``"grounding"``).

    ``Q: ...``, ``A: ...`` with citation markers and marks, the numbered distinct
    citations, a grounding summary, then ``retrieved: `` the distinct retrieved spans.
    Without an answer (retrieval only) the distinct retrieved spans are listed, numbered.

    Args:
        result: A chain output dict (``"question"``, ``"answer"``, its sources, and
            ``"grounding"`` if already grounded).
        width: The line width the text is wrapped to.

    Raises:
        TypeError: If ``result`` is not a dict.
    """
    if not isinstance(result, dict):
        raise TypeError(f"result must be a dict, got {type(result).__name__}")
    lines = [f"Q: {result.get('question', '')}"]
    sources = _sources_of(result)
    spans: dict[tuple, dict] = {}
    for src in sources:
        if isinstance(src, dict):
            entry = src
        else:  # a Document
            meta = dict(getattr(src, "metadata", {}) or {})
            entry = {**meta, "text": getattr(src, "page_content", "")}
        key = (entry.get("source_id") or entry.get("source"), entry.get("start_index"), entry.get("end_index"))
        spans.setdefault(key, entry)
    if result.get("answer") is None:
        for i, src in enumerate(spans.values(), 1):
            text = " ".join(str(src.get("text", "")).split())
            text = text if len(text) <= width else text[: width - 3] + "..."
            lines.append(f"  [{i}] {_label(src)}: {text}")
        return "\n".join(lines) + "\n"
    grounding = result.get("grounding")
    if grounding is None:
        grounding = ground_chain_output(result)["grounding"]
    grounded = GroundedAnswer.from_dict(grounding)
    lines.append("A: " + grounded.render(width=width))
    if spans:
        lines.append("  retrieved: " + ", ".join(_label(s) for s in spans.values()))
    return "\n".join(lines) + "\n"
