"""The backends of the bundled MiniLM, framework-free (imports nothing), so the command
line can name them in its help without importing the embeddings module."""

from __future__ import annotations

__all__ = ["BACKENDS", "DEFAULT_BACKEND"]

BACKENDS = ("sentence-transformers", "onnx", "onnx-int8")
#: The backend of `default_embeddings` (the index's, the CLI's and the
#: evaluation's embedding unless one is given). ONNX Runtime int8: no torch needed, 3.7x the
#: chunks per CPU-second of sentence-transformers at mean cosine 0.993, and on each of the
#: six dev sets the default retriever's context recall is within noise of fp32 (README).
DEFAULT_BACKEND = "onnx-int8"
