"""One deterministic embedding for tests that need a real ranking without a model."""

from __future__ import annotations

import zlib

import numpy as np


class TrigramEmbedder:
    """A bag-of-character-trigrams embedding (crc32 buckets, L2-normalised): texts sharing
    words get similar vectors, so rankings are real ones; no model, no framework."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(self.dim)
        t = text.lower()
        for i in range(len(t) - 2):
            v[zlib.crc32(t[i:i + 3].encode("utf-8")) % self.dim] += 1.0
        n = np.linalg.norm(v)
        return (v / n).tolist() if n else v.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)
