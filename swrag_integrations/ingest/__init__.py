"""Loading files, ingestion in worker processes or on Ray, and the one writer.

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "index_in_parallel": "workers",
    "index_with_ray": "ray",
    "load_files": "files",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "IndexReport": "writer",
    "LoadResult": "files",
    "LoadWarning": "files",
    "list_files": "files",
    "write_planned": "writer",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
