"""Language-aware BM25 on top of ``bm25s``, persisted without pickle.

* :func:`tokenize` lower-cases text and splits it into word tokens; runs of Han
  characters (Chinese) are segmented with ``jieba`` instead of being one "word" as with
  ``str.split``.
* :class:`BM25Index` keeps the tokenised corpus as integer ids (so documents can be
  added, replaced and deleted without re-tokenising everything) and builds the
  ``bm25s`` score matrix lazily. It is saved as ``.npy`` arrays (loaded with
  ``allow_pickle=False``) plus JSON, written to a temporary directory and swapped in
  atomically.
* :class:`CJKBM25Retriever` exposes it as a LangChain retriever.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator

from .._lang import HAN, contains_cjk

__all__ = [
    "tokenize",
    "contains_cjk",
    "ENGLISH_STOPWORDS",
    "CHINESE_STOPWORDS",
    "BM25Index",
    "CJKBM25Retriever",
]

logger = logging.getLogger(__name__)

_WORD_CHAR = f"[^\\W_{HAN}]"
_TOKEN = re.compile(f"([{HAN}]+)|({_WORD_CHAR}+(?:['’]{_WORD_CHAR}+)*)")
_WORDLIKE = re.compile(r"[^\W_]")

ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have
    how i if in into is it its me my of on or our so than that the their them then there
    these they this to was we were what when where which who whom why will with would
    you your""".split()
)
CHINESE_STOPWORDS = frozenset(
    "的 了 是 在 和 与 及 或 也 都 就 而 之 其 这 那 这个 那个 一个 有 为 以 于 吗 呢 吧 啊 么 什么 哪 哪个 哪些 如何 怎么 怎样 多少 几 谁".split()
)
_STOPWORDS = ENGLISH_STOPWORDS | CHINESE_STOPWORDS

_jieba_lock = threading.Lock()
_jieba = None


def _get_jieba():
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def tokenize(text: str, *, stopwords: bool | Iterable[str] = True) -> list[str]:
    """Split ``text`` into lower-case BM25 tokens.

    Han runs are segmented with jieba (search mode: long words also give their
    sub-words, e.g. 北京大学 -> 北京, 大学, 北京大学); everything else gives word
    tokens (letters/digits, inner apostrophes kept). Punctuation and whitespace never
    become tokens. ``stopwords=True`` drops a small English + Chinese function-word
    list; pass ``False`` or your own collection to change that.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if stopwords is True:
        stop: frozenset[str] | set[str] = _STOPWORDS
    elif stopwords is False or stopwords is None:
        stop = frozenset()
    else:
        stop = set(stopwords)
    text = text.lower()
    out: list[str] = []
    append = out.append
    jieba = None
    for match in _TOKEN.finditer(text):
        han = match.group(1)
        if han is None:
            token = match.group(2)
            if token not in stop:
                append(token)
            continue
        if len(han) == 1:
            if han not in stop:
                append(han)
            continue
        if jieba is None:
            jieba = _get_jieba()
        for token in jieba.lcut_for_search(han, HMM=True):
            if token and token not in stop and _WORDLIKE.search(token):
                append(token)
    return out


class BM25Index:
    """A mutable BM25 index over string ids, persisted without pickle.

    Args:
        k1, b, method: BM25 parameters passed to ``bm25s.BM25``.
        stopwords: as in :func:`tokenize`.
        tokenizer: custom ``str -> list[str]``; replaces :func:`tokenize`.
    """

    FORMAT_VERSION = 1

    def __init__(
        self,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: bool | Iterable[str] = True,
        tokenizer: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.k1, self.b, self.method = float(k1), float(b), method
        self.stopwords = stopwords if isinstance(stopwords, bool) else sorted(set(stopwords))
        self._tokenizer = tokenizer
        self.ids: list[str] = []
        self._row: dict[str, int] = {}
        self._tokens: list[np.ndarray] = []
        self.vocab: dict[str, int] = {}
        self._bm25 = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ editing
    def tokenize(self, text: str) -> list[str]:
        if self._tokenizer is not None:
            return list(self._tokenizer(text))
        return tokenize(text, stopwords=self.stopwords)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, item: object) -> bool:
        return item in self._row

    def _encode(self, tokens: Sequence[str]) -> np.ndarray:
        vocab = self.vocab
        out = np.empty(len(tokens), dtype=np.int32)
        for i, token in enumerate(tokens):
            idx = vocab.get(token)
            if idx is None:
                idx = vocab[token] = len(vocab)
            out[i] = idx
        return out

    def upsert(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Add documents, replacing those whose id is already indexed."""
        if len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids for {len(texts)} texts")
        encoded = [self._encode(self.tokenize(text)) for text in texts]
        with self._lock:
            for doc_id, toks in zip(ids, encoded):
                row = self._row.get(doc_id)
                if row is None:
                    self._row[doc_id] = len(self.ids)
                    self.ids.append(doc_id)
                    self._tokens.append(toks)
                else:
                    self._tokens[row] = toks
            self._bm25 = None

    def delete(self, ids: Iterable[str]) -> int:
        """Remove documents by id; unknown ids are ignored. Returns how many went."""
        with self._lock:
            drop = {i for i in ids if i in self._row}
            if not drop:
                return 0
            keep = [r for r, doc_id in enumerate(self.ids) if doc_id not in drop]
            self.ids = [self.ids[r] for r in keep]
            self._tokens = [self._tokens[r] for r in keep]
            self._row = {doc_id: r for r, doc_id in enumerate(self.ids)}
            self._bm25 = None
            return len(drop)

    def clear(self) -> None:
        with self._lock:
            self.ids, self._row, self._tokens, self.vocab, self._bm25 = [], {}, [], {}, None

    # ----------------------------------------------------------------- scoring
    def _build(self):
        import bm25s

        if not self.ids or not self.vocab:
            return None
        bm25 = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        corpus = [t.tolist() for t in self._tokens]
        bm25.index((corpus, dict(self.vocab)), create_empty_token=False, show_progress=False)
        return bm25

    def _ensure(self):
        with self._lock:
            if self._bm25 is None and self.ids:
                self._bm25 = self._build()
            return self._bm25

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs (score > 0), best first."""
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        with self._lock:
            bm25 = self._ensure()
            if bm25 is None:
                return []
            token_ids = sorted({self.vocab[t] for t in self.tokenize(query) if t in self.vocab})
            if not token_ids:
                return []
            scores = bm25.get_scores_from_ids(token_ids)
            ids = self.ids
        n = scores.shape[0]
        k = min(k, n)
        if k < n:
            top = np.argpartition(-scores, k - 1)[:k]
        else:
            top = np.arange(n)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(ids[i], float(scores[i])) for i in top.tolist() if scores[i] > 0]

    # ------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the index to directory ``path`` atomically (tmp dir + rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            bm25 = self._ensure()
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
            try:
                lengths = np.fromiter((t.size for t in self._tokens), dtype=np.int64, count=len(self._tokens))
                offsets = np.zeros(len(self._tokens) + 1, dtype=np.int64)
                np.cumsum(lengths, out=offsets[1:])
                flat = np.concatenate(self._tokens) if self._tokens else np.zeros(0, dtype=np.int32)
                np.save(tmp / "tokens.npy", flat.astype(np.int32), allow_pickle=False)
                np.save(tmp / "offsets.npy", offsets, allow_pickle=False)
                vocab_list = [""] * len(self.vocab)
                for token, idx in self.vocab.items():
                    vocab_list[idx] = token
                with open(tmp / "vocab.json", "w", encoding="utf-8") as fh:
                    json.dump(vocab_list, fh, ensure_ascii=False)
                with open(tmp / "ids.json", "w", encoding="utf-8") as fh:
                    json.dump(self.ids, fh, ensure_ascii=False)
                if bm25 is not None:
                    bm25.save(tmp / "bm25s", allow_pickle=False, show_progress=False)
                meta = {
                    "format": self.FORMAT_VERSION,
                    "k1": self.k1,
                    "b": self.b,
                    "method": self.method,
                    "stopwords": self.stopwords,
                    "n_docs": len(self.ids),
                }
                with open(tmp / "meta.json", "w", encoding="utf-8") as fh:
                    json.dump(meta, fh)
                old = None
                if path.exists():
                    old = path.with_name(f".{path.name}.old-{os.getpid()}-{threading.get_ident()}")
                    os.replace(path, old)
                os.replace(tmp, path)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise

    @classmethod
    def load(cls, path: str | os.PathLike, *, tokenizer: Callable[[str], list[str]] | None = None) -> "BM25Index":
        """Load an index written by :meth:`save` (no pickle involved)."""
        path = Path(path)
        try:
            with open(path / "meta.json", encoding="utf-8") as fh:
                meta = json.load(fh)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"no BM25 index at {path}") from exc
        if meta.get("format") != cls.FORMAT_VERSION:
            raise ValueError(f"unsupported BM25 index format {meta.get('format')!r} at {path}")
        stop = meta.get("stopwords", True)
        index = cls(k1=meta["k1"], b=meta["b"], method=meta["method"], stopwords=stop, tokenizer=tokenizer)
        flat = np.load(path / "tokens.npy", allow_pickle=False)
        offsets = np.load(path / "offsets.npy", allow_pickle=False)
        with open(path / "vocab.json", encoding="utf-8") as fh:
            vocab_list = json.load(fh)
        with open(path / "ids.json", encoding="utf-8") as fh:
            ids = json.load(fh)
        if len(ids) + 1 != offsets.size or len(ids) != meta["n_docs"]:
            raise ValueError(f"BM25 index at {path} is inconsistent (ids vs offsets)")
        index.ids = list(ids)
        index._row = {doc_id: r for r, doc_id in enumerate(index.ids)}
        index._tokens = [flat[offsets[i] : offsets[i + 1]] for i in range(len(ids))]
        index.vocab = {token: i for i, token in enumerate(vocab_list)}
        if (path / "bm25s").is_dir() and index.ids:
            import bm25s

            index._bm25 = bm25s.BM25.load(path / "bm25s", load_corpus=False, allow_pickle=False)
        return index


class CJKBM25Retriever(BaseRetriever):
    """BM25 retriever with jieba segmentation for Chinese and fast ``bm25s`` scoring.

    Unlike ``langchain_community.retrievers.BM25Retriever`` (``str.split`` tokens,
    pure-Python scoring) it handles Chinese and scales to 100k+ chunks. Documents are
    either kept in memory (:meth:`from_documents` / :meth:`from_texts`) or fetched by id
    through ``fetch`` (how :class:`~swrag_integrations.retrieval.SlidingWindowIndex`
    uses it, so chunk texts live only in the vector store).

    Each returned document carries ``metadata["bm25_score"]`` and its ``id``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    docs: dict[str, Document] | None = None
    fetch: Callable[[list[str]], list[Document]] | None = None
    k: int = 4

    @field_validator("k")
    @classmethod
    def _check_k(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"k must be > 0, got {value}")
        return value

    @classmethod
    def from_documents(cls, documents: Iterable[Document], *, k: int = 4, **bm25_kwargs: Any) -> "CJKBM25Retriever":
        docs = list(documents)
        ids = [d.id or str(d.metadata.get("id", "")) or f"doc-{i}" for i, d in enumerate(docs)]
        if len(set(ids)) != len(ids):
            raise ValueError("documents must have distinct ids (Document.id)")
        index = BM25Index(**bm25_kwargs)
        index.upsert(ids, [d.page_content for d in docs])
        stored = {i: Document(page_content=d.page_content, metadata=dict(d.metadata), id=i) for i, d in zip(ids, docs)}
        return cls(index=index, docs=stored, k=k)

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Iterable[dict] | None = None,
        ids: Iterable[str] | None = None,
        *,
        k: int = 4,
        **bm25_kwargs: Any,
    ) -> "CJKBM25Retriever":
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        id_list = list(ids) if ids is not None else [f"doc-{i}" for i in range(len(texts))]
        docs = [Document(page_content=t, metadata=m, id=i) for t, m, i in zip(texts, metas, id_list)]
        return cls.from_documents(docs, k=k, **bm25_kwargs)

    def search(self, query: str, k: int | None = None) -> list[Document]:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        hits = self.index.search(query, k or self.k)
        if not hits:
            return []
        ids = [h[0] for h in hits]
        if self.docs is not None:
            found = {i: self.docs[i] for i in ids if i in self.docs}
        elif self.fetch is not None:
            found = {d.id: d for d in self.fetch(ids)}
        else:
            raise ValueError("CJKBM25Retriever needs docs or fetch to return documents")
        out = []
        for doc_id, score in hits:
            doc = found.get(doc_id)
            if doc is None:
                continue
            meta = dict(doc.metadata)
            meta["bm25_score"] = score
            out.append(Document(page_content=doc.page_content, metadata=meta, id=doc_id))
        return out

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.search(query)
