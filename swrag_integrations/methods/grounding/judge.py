"""An optional LLM judge for the grounding checker: is this sentence supported by this context?

`LLMJudge` wraps any LangChain chat model or LLM (anything with ``invoke``
returning a string or a message) and asks one yes/no question per sentence.
`parse_verdict` reads the reply robustly: the first verdict word wins (``yes``/
``no``, ``true``/``false``, ``supported``/``not supported``/``unsupported``, ``是``/
``否``/``不是``, ``支持``/``不支持``), ``<think>...</think>`` blocks are skipped, and
anything else gives ``None``. The judge never raises: a failing call or an unreadable
reply is ``None``, which `GroundingChecker` counts as a judge failure and
answers with its lexical verdict instead.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from swrag_integrations.core.lang import contains_cjk

__all__ = ["LLMJudge", "parse_verdict", "JUDGE_PROMPT_EN", "JUDGE_PROMPT_ZH"]

logger = logging.getLogger(__name__)

JUDGE_PROMPT_EN = (
    "Context:\n{context}\n\nStatement: {sentence}\n\n"
    "Is every fact in the statement supported by the context? Answer with one word: yes or no."
)
JUDGE_PROMPT_ZH = "上下文：\n{context}\n\n陈述：{sentence}\n\n上下文是否支持该陈述中的每一个事实？只回答一个字：是 或 否。"

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
# order matters: negative forms before the positive words they contain
_VERDICT = re.compile(
    r"(?P<no>\b(?:no|false|incorrect|(?:does\s+)?not\s+(?:support|entail)\w*|doesn't\s+(?:support|entail)\w*|"
    r"unsupported)\b|不是|不支持|不正确|否)"
    r"|(?P<yes>\b(?:yes|true|correct|supported|supports|entail\w*)\b|是的|支持|正确|是)",
    re.IGNORECASE,
)


def parse_verdict(text: Any) -> bool | None:
    """``True`` / ``False`` for a yes / no reply, ``None`` when there is no verdict word."""
    if not isinstance(text, str):
        return None
    text = _THINK.sub(" ", text).strip()
    match = _VERDICT.search(text)
    if match is None:
        return None
    return match.group("yes") is not None


def _content(result: Any) -> str:
    content = getattr(result, "content", result)
    if isinstance(content, list):  # content blocks
        content = "".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
    return str(content)


class LLMJudge:
    """Ask ``llm`` whether a sentence is supported by a context (see the module docstring).

    Args:
        llm: a LangChain chat model or LLM (``invoke(str)``), e.g.
            ``load_llama3(...).as_langchain()``.
        prompt_en: template with ``{context}`` and ``{sentence}``, for English sentences.
        prompt_zh: the same for sentences holding Han characters.
        max_context_chars: the context is cut to this many characters (default 2000).

    Calling it returns ``True``/``False``, or ``None`` on a failed call or an unreadable
    reply (``calls``/``failures`` count them).

    Raises:
        TypeError: ``llm`` has no ``invoke``.
        ValueError: a prompt lacks ``{context}``/``{sentence}``, or ``max_context_chars`` < 1.
    """

    def __init__(self, llm: Any, *, prompt_en: str = JUDGE_PROMPT_EN, prompt_zh: str = JUDGE_PROMPT_ZH,
                 max_context_chars: int = 2000) -> None:
        if not hasattr(llm, "invoke"):
            raise TypeError(f"llm must be a LangChain chat model or LLM (with invoke), got {type(llm).__name__}")
        for name, prompt in (("prompt_en", prompt_en), ("prompt_zh", prompt_zh)):
            if not isinstance(prompt, str) or "{context}" not in prompt or "{sentence}" not in prompt:
                raise ValueError(f"{name} must be a str with {{context}} and {{sentence}}")
        if not isinstance(max_context_chars, int) or isinstance(max_context_chars, bool) or max_context_chars < 1:
            raise ValueError(f"max_context_chars must be a positive int, got {max_context_chars!r}")
        self.llm = llm
        self.prompt_en = prompt_en
        self.prompt_zh = prompt_zh
        self.max_context_chars = max_context_chars
        self.calls = 0
        self.failures = 0

    def __call__(self, sentence: str, context: str) -> bool | None:
        self.calls += 1
        template = self.prompt_zh if contains_cjk(sentence) else self.prompt_en
        prompt = template.replace("{context}", context[: self.max_context_chars]).replace("{sentence}", sentence)
        try:
            reply = _content(self.llm.invoke(prompt))
        except Exception as exc:  # noqa: BLE001 - never fatal
            logger.warning("LLM judge call failed: %s", exc)
            self.failures += 1
            return None
        verdict = parse_verdict(reply)
        if verdict is None:
            logger.info("LLM judge reply has no yes/no: %r", reply[:200])
            self.failures += 1
        return verdict
