"""The keyword side of an index: BM25 (bm25s), tantivy, and the keyword index kept in step with the sources.

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "BM25Index": "bm25",
    "KeywordIndex": "index",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "contains_cjk": "bm25",
    "tokenize": "bm25",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
