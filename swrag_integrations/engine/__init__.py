"""The index engine and what it is made of (no framework): records, parents, assembly, fusion, filters, settings.

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "AssembledContext": "assemble",
    "IndexConfig": "config",
    "IndexDamagedError": "engine",
    "IndexEngine": "engine",
    "IndexMismatchError": "engine",
    "IndexStatus": "health",
    "MetadataFilter": "filters",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "Candidate": "parents",
    "ChildHit": "protocols",
    "ChunkId": "ids",
    "ChunkIndex": "protocols",
    "ChunkRow": "protocols",
    "ContextSpan": "assemble",
    "SourceRecord": "records",
    "assemble_context": "assemble",
    "batch_source_ids": "ids",
    "chunk_id": "ids",
    "count_tokens": "assemble",
    "doc_key": "fusion",
    "expand_parents": "parents",
    "fuse_documents": "fusion",
    "merge_spans": "assemble",
    "parse_chunk_id": "ids",
    "parse_filter": "filters",
    "plan_source": "records",
    "rank_parents": "parents",
    "rrf": "fusion",
    "source_id_for": "ids",
    "source_key": "ids",
    "validate_collection_name": "engine",
    "vector_id": "ids",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
