"""An on-disk embedding cache keyed by text hash (sqlite): an embedder with
``embed_documents`` / ``embed_query`` on the package's embedding base class
(`EmbeddingsBase`: LangChain's ``Embeddings``
when LangChain is installed, so the LangChain pipelines take it as it is).

The evaluation grid indexes the same texts many times (every configuration of a
document, every run that resumes); `CachedEmbeddings` embeds each distinct text
once per model and keeps the vectors in ``sqlite`` as float32 blobs.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any


import numpy as np

from swrag_integrations.embeddings.base import EmbeddingsBase

__all__ = ["CachedEmbeddings", "default_embeddings"]


class CachedEmbeddings(EmbeddingsBase):
    """Wrap ``base`` so each distinct text is embedded once, cached in sqlite.

    Args:
        base: the embedding model.
        path: sqlite file (created with its folder); ``None`` keeps the cache in memory.
        namespace: distinguishes models sharing one file (default: the base's
            ``model_name`` attribute or class name).

    Attributes:
        hits / misses: counts of texts served from the cache / embedded.

    Why not LangChain's ``CacheBackedEmbeddings`` (``langchain_classic.embeddings``):
    measured with ``python benchmarks/bench_embeddings.py --cache`` (10k corpus chunks,
    384-float vectors, 2-CPU machine under load 2):

    ============================================  ======  =============  ==========
    cache                                         fill s  10k lookups s  disk
    ============================================  ======  =============  ==========
    this class (sqlite, float32 blobs)            0.93    0.16           43 MB
    CacheBackedEmbeddings + ``LocalFileStore``    3.31    1.29           79 MB
    CacheBackedEmbeddings + ``SQLStore`` (sqlite) 3.26    1.25           84 MB
    ============================================  ======  =============  ==========

    Same vectors from all three, and no errors with two processes filling one cache at
    once. The flaws found in the library path: ``LocalFileStore`` writes each entry in
    place (no temp file + rename), so an entry cut short by a crash makes *every* later
    lookup of that text raise ``JSONDecodeError`` until the file is deleted by hand; the
    transactional alternative, ``SQLStore``, is in langchain-community (being sunset)
    and needs SQLAlchemy; both are 8x slower on cached lookups (JSON values) and take
    twice the disk; ``CacheBackedEmbeddings`` embeds a text repeated within one call
    once per occurrence (this class: once) and does not cache queries unless asked.
    """

    def __init__(self, base: EmbeddingsBase, path: str | os.PathLike | None = None, namespace: str | None = None) -> None:
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
        """The query's vector: from the cache of documents for a symmetric model (MiniLM
        embeds a query as a document), else through the model's own ``embed_query``,
        cached under a key of its own (E5's ``query:`` prefix)."""
        if not getattr(self.base, "asymmetric", False):
            return self.embed_documents([text])[0]
        key = "query|" + self._key(text)
        with self._lock:
            found = self._lookup([key])
            if key in found:
                self.hits += 1
                return found[key]
            arr = np.asarray(self.base.embed_query(text), dtype=np.float32)
            self._db.execute("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", (key, arr.tobytes()))
            self._db.commit()
            self.misses += 1
        return arr.tolist()

    def close(self) -> None:
        with self._lock:
            self._db.close()


EVAL_EMBEDDINGS = ("minilm", "e5")
"""The models an evaluation can run on (``$SWRAG_EVAL_EMBEDDING``, ``peers --embedding``)."""


def eval_embedding_name(name: str | None = None) -> str:
    """The evaluation's embedding: ``name``, else ``$SWRAG_EVAL_EMBEDDING``, else ``"minilm"``.

    Raises:
        ValueError: a name not in `EVAL_EMBEDDINGS`.
    """
    name = name or os.environ.get("SWRAG_EVAL_EMBEDDING") or "minilm"
    if name not in EVAL_EMBEDDINGS:
        raise ValueError(f"the evaluation's embedding must be one of {', '.join(EVAL_EMBEDDINGS)} "
                         f"($SWRAG_EVAL_EMBEDDING / --embedding), got {name!r}")
    return name


def default_embeddings(cache_path: str | os.PathLike | None = None, name: str | None = None) -> CachedEmbeddings:
    """The evaluation's embedding behind a text-hash cache at ``cache_path`` (in memory
    when ``None``), namespaced by its ``model_name``: the packaged MiniLM
    (`swrag_integrations.embeddings.minilm`; ``all-MiniLM-L6-v2``, plus ``@onnx-int8``
    etc. for other backends) or, with ``name="e5"``, `E5Embeddings`.

    Args:
        cache_path: the sqlite cache file.
        name: ``"minilm"`` or ``"e5"``; ``None`` reads ``$SWRAG_EVAL_EMBEDDING`` (default
            ``"minilm"``).

    Raises:
        ValueError: an unknown name.
    """
    if eval_embedding_name(name) == "e5":
        from swrag_integrations.embeddings.e5 import E5Embeddings

        model: Any = E5Embeddings()
    else:
        from swrag_integrations.embeddings.minilm import default_embeddings as minilm

        model = minilm()
    return CachedEmbeddings(model, cache_path, namespace=model.model_name)
