"""swrag-integrations: sliding-window RAG for LangChain and LlamaIndex.

The splitters are importable from the top level; retrieval, the local LLM and the
evaluation live in the subpackages ``retrieval``, ``llm`` and ``evaluation``.
"""

from .langchain import (
    DDSTextSplitter,
    DFSTextSplitter,
    DynamicStepTextSplitter,
    DynamicWindowTextSplitter,
    FFSTextSplitter,
    FixedWindowTextSplitter,
    SlidingWindowTextSplitter,
)
from .windows import DEFAULT_DELIMITERS, Span, WindowConfig, iter_windows

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_DELIMITERS",
    "Span",
    "WindowConfig",
    "iter_windows",
    "SlidingWindowTextSplitter",
    "FixedWindowTextSplitter",
    "DynamicWindowTextSplitter",
    "DynamicStepTextSplitter",
    "FFSTextSplitter",
    "DFSTextSplitter",
    "DDSTextSplitter",
]
