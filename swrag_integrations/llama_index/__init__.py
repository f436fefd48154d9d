"""The LlamaIndex face: the node parsers, the index and its retrievers, node conversion.

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "DynamicStepNodeParser": "parsers",
    "DynamicWindowNodeParser": "parsers",
    "FixedWindowNodeParser": "parsers",
    "MiniLMLlamaIndexEmbedding": "index",
    "NodeChunkIndex": "index",
    "SlidingWindowLlamaIndex": "index",
    "SlidingWindowNodeParser": "parsers",
    "WindowedLlamaIndexRetriever": "index",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
