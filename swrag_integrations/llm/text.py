"""Text out of language models, whatever their framework: the text of a result, the
`LocalLLM` behind a wrapper, a stable model name for cache
keys, and an answer cleaned of labels and quotes. Shared by the context steps, the RAPTOR
summaries and the tuning (one definition each, below all of them)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["llm_text", "local_core", "model_name_of", "clean_header"]

_LABEL = re.compile(
    r"^\s*(?:here(?:'s| is)[^:\n]{0,60}:|context(?:ual)?(?:\s+header)?\s*:|header\s*:|answer\s*:|summary\s*:)\s*",
    re.IGNORECASE,
)


def llm_text(result: Any) -> str:
    """Text of an LLM / chat-model ``invoke`` result."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    content = getattr(result, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(result)


def local_core(llm: Any) -> Any:
    """The `LocalLLM` behind ``llm`` (or ``None``).

    Accepts a ``LocalLLM`` itself or its LangChain / LlamaIndex adapters (``.core``).
    """
    from swrag_integrations.llm.core import LocalLLM

    if isinstance(llm, LocalLLM):
        return llm
    core = getattr(llm, "core", None)
    return core if isinstance(core, LocalLLM) else None


def model_name_of(llm: Any) -> str:
    """A stable name of an LLM for cache keys."""
    core = local_core(llm)
    if core is not None:
        info = core.info
        return f"local:{info.source}|{info.backend}|{info.low_bit}"
    for attr in ("model_name", "model", "model_id", "repo_id"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return f"{type(llm).__name__}:{value}"
    params = getattr(llm, "_identifying_params", None)
    if isinstance(params, dict) and params:
        try:
            return f"{type(llm).__name__}:" + json.dumps(params, sort_keys=True, default=str)
        except Exception:  # noqa: BLE001
            pass
    return type(llm).__name__


def clean_header(text: str) -> str:
    """Strip labels ("Context:"), wrapping quotes and extra whitespace from an LLM answer."""
    text = (text or "").strip()
    for _ in range(2):
        text = _LABEL.sub("", text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1].strip()
    return re.sub(r"\s+", " ", text).strip()
