"""The LLM classes of both frameworks, thin adapters over `LocalLLM`:
`LangChainLLM` (LangChain only) and
`LlamaIndexLLM` (LlamaIndex only).

Each lives in its own module, which imports only its own framework; this module names
both and imports each on first use, so ``from swrag_integrations.llm.adapters import
LangChainLLM`` works without LlamaIndex installed (and the other way round).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LangChainLLM", "LlamaIndexLLM"]


def __getattr__(name: str) -> Any:
    if name == "LangChainLLM":
        from swrag_integrations.llm.langchain_llm import LangChainLLM

        return LangChainLLM
    if name == "LlamaIndexLLM":
        from swrag_integrations.llm.llamaindex_llm import LlamaIndexLLM

        return LlamaIndexLLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
