"""Embedding objects and backends: the bundled MiniLM (sentence-transformers or ONNX Runtime).

Names are imported on first use, so importing the package pulls in no framework.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "MiniLMEmbeddings": "minilm",
    "default_embeddings": "minilm",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "OnnxSentenceEncoder": "onnx",
    "ensure_onnx_model": "onnx",
    "minilm_model_path": "minilm",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
