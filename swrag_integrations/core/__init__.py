"""Framework-free basics: windows as exact spans, delimiters, language, paths, caches.

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
