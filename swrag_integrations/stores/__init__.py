"""The storage interface and one adapter per backend (Chroma, Milvus, source stores, store URIs).

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "ChromaStorage": "chroma",
    "MilvusStorage": "milvus",
    "PostgresStorage": "postgres",
    "SourceStore": "sources",
    "VectorStorage": "storage",
    "parse_store_uri": "store_uri",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "ChromaByteStore": "sources",
    "Embedder": "storage",
    "KVSourceStore": "sources",
    "LockTimeout": "sources",
    "PlainDocument": "storage",
    "SourceStoreError": "sources",
    "SqliteSourceStore": "sources",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
