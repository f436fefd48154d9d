"""swrag-integrations: sliding-window RAG for LangChain and LlamaIndex.

The framework-free core (``swrag_integrations.core.windows``: FFS/DFS/DDS windows as exact
spans) needs only numpy and tiktoken. The LangChain splitters are importable from the
top level (``from swrag_integrations import DynamicStepTextSplitter``; needs the
``[langchain]`` extra), the LlamaIndex node parsers from
``swrag_integrations.llama_index`` (``[llama-index]``); each framework's index and
retrievers live in its face (``langchain``, ``llama_index``), the local LLM in ``llm``.
Each room exports its few entry points; everything else is reachable by module path.
Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from typing import Any

from swrag_integrations import _moved
from swrag_integrations.core._lazy import lazy_exports
from swrag_integrations.core.windows import DEFAULT_DELIMITERS, Span, WindowConfig, iter_windows

_moved.install()  # the module paths from before the rooms (0.3) still import, with a warning

__version__ = "0.2.0"

# The LangChain splitters (the README's FFS/DFS/DDS classes), imported on first use.
_LAZY = {
    "DynamicStepTextSplitter": "langchain.splitters",
    "DynamicWindowTextSplitter": "langchain.splitters",
    "FixedWindowTextSplitter": "langchain.splitters",
    "SlidingWindowTextSplitter": "langchain.splitters",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "DDSTextSplitter": "langchain.splitters",
    "DFSTextSplitter": "langchain.splitters",
    "FFSTextSplitter": "langchain.splitters",
}

__all__ = ["DEFAULT_DELIMITERS", "Span", "WindowConfig", "iter_windows", *_LAZY]

_lazy_getattr, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)


def __getattr__(name: str) -> Any:
    """The splitters, imported on first use; a missing LangChain is named with the extra to install."""
    try:
        return _lazy_getattr(name)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(f"{name} needs LangChain: pip install 'swrag-integrations[langchain]' ({exc})") from exc
