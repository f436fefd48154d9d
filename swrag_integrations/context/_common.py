"""Small helpers shared by the context techniques (not public API)."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ..retrieval.assemble import count_tokens
from ..windows import DEFAULT_ENCODING, token_boundaries

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


def trim_to_tokens(text: str, max_tokens: int, encoding_name: str = DEFAULT_ENCODING) -> tuple[str, bool]:
    """Cut ``text`` to its first ``max_tokens`` tokens (at a token boundary).

    Returns ``(text, trimmed)``. When a sentence end lies in the second half of what is
    kept, the cut moves back to it so the header does not stop mid-sentence.
    """
    if max_tokens <= 0:
        return "", bool(text)
    bounds = token_boundaries(text, encoding_name)
    n = len(bounds) - 1
    if n <= max_tokens:
        return text, False
    cut = text[: int(bounds[max_tokens])]
    ends = [m.end() for m in re.finditer(r"[.!?。！？](?=\s|$)|[。！？]", cut)]
    if ends and ends[-1] >= len(cut) // 2:
        cut = cut[: ends[-1]]
    return cut.rstrip(), True


def llm_text(result: Any) -> str:
    """Text of an LLM / chat-model ``invoke`` result."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    content = getattr(result, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(result)


def local_core(llm: Any) -> Any:
    """The :class:`~swrag_integrations.llm.LocalLLM` behind ``llm`` (or ``None``).

    Accepts a ``LocalLLM`` itself or its LangChain / LlamaIndex adapters (``.core``).
    """
    from ..llm.core import LocalLLM

    if isinstance(llm, LocalLLM):
        return llm
    core = getattr(llm, "core", None)
    return core if isinstance(core, LocalLLM) else None


def model_name_of(llm: Any) -> str:
    """A stable name of an LLM for cache keys."""
    core = local_core(llm)
    if core is not None:
        info = core.info
        return f"local:{info.source}|{info.backend}|{info.low_bit}"
    for attr in ("model_name", "model", "model_id", "repo_id"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return f"{type(llm).__name__}:{value}"
    params = getattr(llm, "_identifying_params", None)
    if isinstance(params, dict) and params:
        try:
            return f"{type(llm).__name__}:" + json.dumps(params, sort_keys=True, default=str)
        except Exception:  # noqa: BLE001
            pass
    return type(llm).__name__


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


def as_embeddings(value: Any) -> Any:
    """LangChain ``Embeddings`` from a LangChain or a LlamaIndex embedding model.

    A LlamaIndex ``BaseEmbedding`` (e.g. ``Settings.embed_model``) is wrapped so the
    context steps accept either framework's models; anything else is returned as is.
    """
    if hasattr(value, "embed_documents") and hasattr(value, "embed_query"):
        return value
    if hasattr(value, "get_text_embedding_batch") and hasattr(value, "get_query_embedding"):
        return _LlamaIndexEmbeddings(value)
    return value


def llama_index_default_embeddings() -> Any:
    """``llama_index.core.Settings.embed_model`` as LangChain ``Embeddings`` if one is set
    (never triggers LlamaIndex's default OpenAI model), else ``None``."""
    from llama_index.core import Settings

    model = getattr(Settings, "_embed_model", None)
    return None if model is None else as_embeddings(model)


class _LlamaIndexEmbeddings(Embeddings):
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
