"""swrag-integrations: sliding-window RAG for LangChain and LlamaIndex.

The framework-free core (``swrag_integrations.core.windows``: FFS/DFS/DDS windows as exact
spans) needs only numpy and tiktoken. The LangChain splitters are importable from the
top level (``from swrag_integrations import DynamicStepTextSplitter``; needs the
``[langchain]`` extra), the LlamaIndex node parsers from
``swrag_integrations.llama_index`` (``[llama-index]``); retrieval, the local LLM and
the evaluation live in the subpackages ``retrieval``, ``llm`` and ``evaluation``.
Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from typing import Any

from swrag_integrations import _moved
from swrag_integrations.core.windows import DEFAULT_DELIMITERS, Span, WindowConfig, iter_windows

_moved.install()  # the module paths from before the rooms (0.3) still import, with a warning

__version__ = "0.2.0"

_SPLITTERS = (
    "SlidingWindowTextSplitter",
    "FixedWindowTextSplitter",
    "DynamicWindowTextSplitter",
    "DynamicStepTextSplitter",
    "FFSTextSplitter",
    "DFSTextSplitter",
    "DDSTextSplitter",
)

__all__ = ["DEFAULT_DELIMITERS", "Span", "WindowConfig", "iter_windows", *_SPLITTERS]


def __getattr__(name: str) -> Any:
    if name in _SPLITTERS:
        try:
            from swrag_integrations import langchain as module

            value = getattr(module, name)  # the face's names import LangChain on first use
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(f"{name} needs LangChain: pip install 'swrag-integrations[langchain]' ({exc})") from exc
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_SPLITTERS))
