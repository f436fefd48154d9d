"""Peer comparisons: other RAG libraries measured on the same questions (`peers`), their
tuning (`peer_tuning`), the framework anchors (`anchors`, shared, and the faces
`langchain_peers`, `llama_index_peers`, `llama_index_hybrid`),
levers, misses and budgets. ``python -m swrag_integrations.evaluation.peers.peers`` runs the
comparison. The names of `peers` are importable from here (imported on first use)."""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "main": "peers",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "DEV_SETS": "peers",
    "PEERS": "peers",
    "report": "peers",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
