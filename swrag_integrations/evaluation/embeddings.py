"""An on-disk embedding cache keyed by text hash (sqlite), as a LangChain ``Embeddings``.

The evaluation grid indexes the same texts many times (every configuration of a
document, every run that resumes); :class:`CachedEmbeddings` embeds each distinct text
once per model and keeps the vectors in ``sqlite`` as float32 blobs.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path


import numpy as np
from langchain_core.embeddings import Embeddings

__all__ = ["CachedEmbeddings", "default_embeddings"]


class CachedEmbeddings(Embeddings):
    """Wrap ``base`` so each distinct text is embedded once, cached in sqlite.

    Args:
        base: the embedding model.
        path: sqlite file (created with its folder); ``None`` keeps the cache in memory.
        namespace: distinguishes models sharing one file (default: the base's
            ``model_name`` attribute or class name).

    Attributes:
        hits / misses: counts of texts served from the cache / embedded.
    """

    def __init__(self, base: Embeddings, path: str | os.PathLike | None = None, namespace: str | None = None) -> None:
        self.base = base
        self.namespace = namespace or str(getattr(base, "model_name", type(base).__name__))
        self.path = str(path) if path is not None else ":memory:"
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def _key(self, text: str) -> str:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{self.namespace}:{digest}"

    def _lookup(self, keys: list[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(f"SELECT key, vec FROM emb WHERE key IN ({marks})", part).fetchall()
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
        return found

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        keys = [self._key(t) for t in texts]
        with self._lock:
            found = self._lookup(sorted(set(keys)))
            todo: dict[str, str] = {}
            for key, text in zip(keys, texts):
                if key not in found:
                    todo.setdefault(key, text)
            self.hits += len(texts) - sum(1 for k in keys if k in todo)
            if todo:
                vectors = self.base.embed_documents(list(todo.values()))
                rows = []
                for key, vec in zip(todo, vectors):
                    arr = np.asarray(vec, dtype=np.float32)
                    found[key] = arr.tolist()
                    rows.append((key, arr.tobytes()))
                self._db.executemany("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", rows)
                self._db.commit()
                self.misses += len(todo)
        return [found[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def default_embeddings(cache_path: str | os.PathLike | None = None) -> CachedEmbeddings:
    """The packaged MiniLM model (:mod:`swrag_integrations.retrieval.embeddings`) behind
    a text-hash cache at ``cache_path`` (in memory when ``None``)."""
    from ..retrieval.embeddings import default_embeddings as minilm

    return CachedEmbeddings(minilm(), cache_path, namespace="all-MiniLM-L6-v2")
