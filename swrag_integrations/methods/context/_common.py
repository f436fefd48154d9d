"""Small helpers shared by the context techniques (not public API)."""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
from langchain_core.documents import Document

# Defined below the context steps (RAPTOR and the tuning use them too); re-exported here for the steps.
from swrag_integrations.llm.text import llm_text, local_core, model_name_of  # noqa: F401
from swrag_integrations.engine.assemble import count_tokens, trim_to_tokens  # noqa: F401
from swrag_integrations.embeddings.minilm import as_embeddings  # noqa: F401
import swrag_integrations.langchain.embeddings  # noqa: F401 - the package's embeddings are LangChain Embeddings (pydantic fields)
from swrag_integrations.core.windows import DEFAULT_ENCODING, token_boundaries

SCORE_KEYS = ("relevance_score", "score", "rrf_score")


def unit_normalize(vectors: Any) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    arr = np.asarray(vectors, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return arr / norms


def annotated(documents: Sequence[Document], order: Sequence[int], scores: Any, rank_key: str) -> list[Document]:
    """``documents`` in ``order``, copies with ``relevance_score`` and ``rank_key`` (1-based) set."""
    out = []
    for rank, i in enumerate(order, start=1):
        doc = documents[i]
        meta = dict(doc.metadata or {})
        meta["relevance_score"] = float(scores[i])
        meta[rank_key] = rank
        out.append(Document(page_content=doc.page_content, metadata=meta, id=doc.id))
    return out


def doc_score(doc: Document, key: str | None = None) -> float | None:
    """The document's retrieval score from its metadata (``key`` or the usual keys)."""
    meta = doc.metadata or {}
    for k in ((key,) if key else SCORE_KEYS):
        value = meta.get(k)
        if value is not None:
            try:
                return float(value)
            except (TypeError, ValueError):
                return None
    return None


def count_words(text: str) -> int:
    return len(text.split())


def sentence_pieces(text: str, max_tokens: int, encoding_name: str = DEFAULT_ENCODING) -> list[str]:
    """Split ``text`` into sentence-ish pieces of at most ``max_tokens`` tokens.

    Sentences (ends at ``. ! ?`` + space, CJK ``。！？``, or newlines) are packed greedily
    into pieces; a sentence longer than ``max_tokens`` is cut at token boundaries.
    """
    text = text or ""
    if not text.strip():
        return []
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+", text) if s and s.strip()]
    pieces: list[str] = []
    current, current_n = "", 0
    for sentence in sentences:
        n = count_tokens(sentence, encoding_name)
        if n > max_tokens:
            if current:
                pieces.append(current)
                current, current_n = "", 0
            bounds = token_boundaries(sentence, encoding_name)
            total = len(bounds) - 1
            for a in range(0, total, max_tokens):
                part = sentence[int(bounds[a]) : int(bounds[min(a + max_tokens, total)])]
                if part.strip():
                    pieces.append(part)
            continue
        if current and current_n + n > max_tokens:
            pieces.append(current)
            current, current_n = "", 0
        current = f"{current} {sentence}" if current else sentence
        current_n += n
    if current:
        pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]


def as_documents(items: Sequence[Any]) -> list[Document]:
    out = []
    for item in items:
        if not isinstance(item, Document):
            raise TypeError(f"expected langchain Document objects, got {type(item).__name__}")
        out.append(item)
    return out
