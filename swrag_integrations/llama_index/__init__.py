"""The LlamaIndex face: the node parsers, the index and its retrievers, node conversion.

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "DynamicStepNodeParser": "parsers",
    "DynamicWindowNodeParser": "parsers",
    "FixedWindowNodeParser": "parsers",
    "SlidingWindowLlamaIndex": "index",
    "SlidingWindowNodeParser": "parsers",
    "WindowedLlamaIndexRetriever": "index",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "MiniLMLlamaIndexEmbedding": "index",
    "NodeChunkIndex": "index",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
