"""The storage interface and one adapter per backend (Chroma, Milvus, source stores, store URIs).

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "ChromaByteStore": "sources",
    "ChromaStorage": "chroma",
    "Embedder": "storage",
    "KVSourceStore": "sources",
    "LockTimeout": "sources",
    "MilvusStorage": "milvus",
    "PlainDocument": "storage",
    "SourceStore": "sources",
    "SourceStoreError": "sources",
    "SqliteSourceStore": "sources",
    "VectorStorage": "storage",
    "parse_store_uri": "store_uri",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
