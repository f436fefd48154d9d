"""Language-aware BM25 on top of ``bm25s``, persisted without pickle.

* `tokenize` lower-cases text and splits it into word tokens; runs of Han
  characters (Chinese) are segmented with ``jieba`` instead of being one "word" as with
  ``str.split``.
* `BM25Index` keeps the tokenised corpus as integer ids (so documents can be
  added, replaced and deleted without re-tokenising everything) and builds the
  ``bm25s`` score matrix lazily. It is serialised to one ``.npz`` blob (arrays and
  JSON, loaded with ``allow_pickle=False``; `BM25Index.to_bytes`), which an index
  keeps in its source store.
* `TantivyBM25Index` is BM25 over the same tokens in a tantivy
  index on disk, written incrementally (a local index's keyword side).
* Framework-free: the LangChain retriever over it is
  `CJKBM25Retriever`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from swrag_integrations.core.lang import HAN, contains_cjk
from swrag_integrations.core.paths import private_dir

__all__ = [
    "tokenize",
    "contains_cjk",
    "ENGLISH_STOPWORDS",
    "CHINESE_STOPWORDS",
    "BM25Index",
]

logger = logging.getLogger(__name__)

_WORD_CHAR = f"[^\\W_{HAN}]"
_TOKEN = re.compile(f"([{HAN}]+)|({_WORD_CHAR}+)")
_WORDLIKE = re.compile(r"[^\W_]")

TOKENIZER_VERSION = 2
"""Changes whenever `tokenize` gives other tokens for the same text, so that stored
keyword indexes built with the older tokens are rebuilt (2: apostrophes split words)."""

CLITICS = frozenset("s t d ll m re ve".split())
"""What an apostrophe splits off an English word (``walrus's``, ``don't``, ``we'll``,
``I'm``, ``they're``, ``I've``, ``I'd``): stop words, as Lucene's possessive filter drops ``'s``."""

ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have
    how i if in into is it its me my of on or our so than that the their them then there
    these they this to was we were what when where which who whom why will with would
    you your""".split()
) | CLITICS
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
    tokens (runs of letters/digits). Punctuation, apostrophes included, and whitespace
    never become tokens, so possessives and elisions split as Milvus' analyser splits
    them (``The walrus's tusk`` -> walrus, tusk; ``O'Brien`` -> o, brien).
    ``stopwords=True`` drops a small English + Chinese function-word list (with the
    `CLITICS` an apostrophe splits off); pass ``False`` or your own collection to
    change that.
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
        k1: BM25's term-frequency saturation, passed to ``bm25s.BM25``.
        b: BM25's length normalisation, passed to ``bm25s.BM25``.
        method: the BM25 variant, passed to ``bm25s.BM25``.
        stopwords: as in `tokenize`.
        tokenizer: custom ``str -> list[str]``; replaces `tokenize`.
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
        # the score matrix as bm25s saved it ({file name: bytes}), loaded (and bm25s
        # imported) only when a search or a save needs it: opening an index, or reading
        # its keyword status, never imports bm25s
        self._saved: dict[str, bytes] | None = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ editing
    def tokenize(self, text: str) -> list[str]:
        """The index's tokens of ``text``: its own tokenizer's, else `tokenize` with the index's ``stopwords``."""
        if self._tokenizer is not None:
            return list(self._tokenizer(text))
        return tokenize(text, stopwords=self.stopwords)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, item: object) -> bool:
        return item in self._row

    def token_bytes(self) -> int:
        """Bytes of the tokenised corpus: 4 per token plus each vocabulary entry (UTF-8 + 4)."""
        with self._lock:
            return sum(int(t.size) * 4 for t in self._tokens) + sum(len(t.encode("utf-8")) + 4 for t in self.vocab)

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
            self._bm25 = self._saved = None

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
            self._bm25 = self._saved = None
            return len(drop)

    def clear(self) -> None:
        """Drop every document (the index is empty afterwards)."""
        with self._lock:
            self.ids, self._row, self._tokens, self.vocab, self._bm25, self._saved = [], {}, [], {}, None, None

    # ----------------------------------------------------------------- scoring
    def _build(self):
        import bm25s

        if not self.ids or not self.vocab:
            return None
        bm25 = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        corpus = [t.tolist() for t in self._tokens]
        bm25.index((corpus, dict(self.vocab)), create_empty_token=False, show_progress=False)
        return bm25

    def _load_saved(self):
        """The score matrix saved with the index (``bm25s.BM25.load``), or ``None`` when it
        cannot be read back (then `_build` computes it again from the tokens, which
        it is derived from)."""
        import bm25s

        try:
            with tempfile.TemporaryDirectory() as tmp:
                for name, content in self._saved.items():
                    with open(os.path.join(tmp, os.path.basename(name)), "wb") as fh:
                        fh.write(content)
                bm25 = bm25s.BM25.load(tmp, load_corpus=False, allow_pickle=False)
            if int(bm25.scores["num_docs"]) != len(self.ids):
                raise ValueError(f"{bm25.scores['num_docs']} documents in the score matrix, {len(self.ids)} indexed")
        except Exception as exc:  # noqa: BLE001 - derived data: computed again below
            logger.warning("the saved BM25 score matrix cannot be used (%s); computing it again", exc)
            return None
        return bm25

    def _ensure(self):
        with self._lock:
            if self._bm25 is None and self.ids:
                if self._saved:
                    self._bm25 = self._load_saved()
                    self._saved = None
                if self._bm25 is None:
                    self._bm25 = self._build()
            return self._bm25

    def search(self, query: str, k: int = 10, *,
               allow: Callable[[Sequence[str]], Sequence[bool]] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs (score > 0), best first.

        ``allow``: only ids it accepts (called on blocks of ids in score order, e.g. the
        chunks of sources a metadata filter lets through) count towards ``k``.
        """
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
        if allow is not None:
            return _allowed_top(ids, scores, k, allow)
        n = scores.shape[0]
        k = min(k, n)
        if k < n:
            top = np.argpartition(-scores, k - 1)[:k]
        else:
            top = np.arange(n)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(ids[i], float(scores[i])) for i in top.tolist() if scores[i] > 0]

    # ------------------------------------------------------------- persistence
    def to_bytes(self) -> bytes:
        """The whole index as one ``.npz`` blob (arrays and JSON only; no pickle anywhere)."""
        import io

        with self._lock:
            bm25 = None if self._saved and self._bm25 is None else self._ensure()
            lengths = np.fromiter((t.size for t in self._tokens), dtype=np.int64, count=len(self._tokens))
            offsets = np.zeros(len(self._tokens) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            flat = np.concatenate(self._tokens) if self._tokens else np.zeros(0, dtype=np.int32)
            vocab_list = [""] * len(self.vocab)
            for token, idx in self.vocab.items():
                vocab_list[idx] = token
            meta = {"format": self.FORMAT_VERSION, "k1": self.k1, "b": self.b, "method": self.method,
                    "stopwords": self.stopwords, "tokens": TOKENIZER_VERSION, "n_docs": len(self.ids)}
            arrays: dict[str, np.ndarray] = {
                "tokens": flat.astype(np.int32), "offsets": offsets,
                "vocab": _json_array(vocab_list), "ids": _json_array(self.ids), "meta": _json_array(meta),
            }
            if self._saved and self._bm25 is None:  # loaded, unchanged and not yet needed: as it was
                for name, content in sorted(self._saved.items()):
                    arrays["bm25s/" + name] = np.frombuffer(content, dtype=np.uint8)
            elif bm25 is not None:  # the score matrix, saved by bm25s itself
                with tempfile.TemporaryDirectory() as tmp:
                    bm25.save(tmp, allow_pickle=False, show_progress=False)
                    for name in sorted(os.listdir(tmp)):
                        with open(os.path.join(tmp, name), "rb") as fh:
                            arrays["bm25s/" + name] = np.frombuffer(fh.read(), dtype=np.uint8)
        out = io.BytesIO()
        np.savez(out, **arrays)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, raw: bytes, *, tokenizer: Callable[[str], list[str]] | None = None) -> "BM25Index":
        """Load an index written by `to_bytes` (``allow_pickle=False``)."""
        import io

        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            meta = _from_json_array(data["meta"])
            if meta.get("format") != cls.FORMAT_VERSION:
                raise ValueError(f"unsupported BM25 index format {meta.get('format')!r}")
            if tokenizer is None and meta.get("tokens", 1) != TOKENIZER_VERSION:
                raise ValueError(f"BM25 index tokenised by tokenizer version {meta.get('tokens', 1)}, this "
                                 f"version tokenises as version {TOKENIZER_VERSION}: rebuild it")
            index = cls(k1=meta["k1"], b=meta["b"], method=meta["method"], stopwords=meta.get("stopwords", True),
                        tokenizer=tokenizer)
            flat, offsets = data["tokens"], data["offsets"]
            ids, vocab_list = _from_json_array(data["ids"]), _from_json_array(data["vocab"])
            if len(ids) + 1 != offsets.size or len(ids) != meta["n_docs"] or (offsets.size and offsets[-1] != flat.size):
                raise ValueError("BM25 index is inconsistent (ids vs offsets)")
            if flat.size and int(flat.max()) >= len(vocab_list):
                raise ValueError("BM25 index is inconsistent (token ids past the vocabulary)")
            index.ids = list(ids)
            index._row = {doc_id: r for r, doc_id in enumerate(index.ids)}
            if len(index._row) != len(index.ids):
                raise ValueError("BM25 index is inconsistent (duplicate ids)")
            index._tokens = [flat[offsets[i]:offsets[i + 1]] for i in range(len(ids))]
            index.vocab = {token: i for i, token in enumerate(vocab_list)}
            files = {name[6:]: data[name].tobytes() for name in data.files if name.startswith("bm25s/")}
        if files and index.ids:
            # checked here without bm25s (its own parameter file); loaded on first use
            try:
                saved_docs = json.loads(files["params.index.json"])["num_docs"]
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"BM25 index is inconsistent (score matrix parameters: {exc})") from exc
            if saved_docs != len(index.ids):
                raise ValueError("BM25 index is inconsistent (score matrix vs documents)")
            index._saved = files
        return index

    def save(self, path: str | os.PathLike) -> None:
        """Write `to_bytes` to the file ``path`` atomically (temp file + rename)."""
        path = Path(path)
        private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(self.to_bytes())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike, *, tokenizer: Callable[[str], list[str]] | None = None) -> "BM25Index":
        """Load a file written by `save`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no BM25 index at {path}")
        return cls.from_bytes(path.read_bytes(), tokenizer=tokenizer)


def _allowed_top(ids: Sequence[str], scores: np.ndarray, k: int,
                 allow: Callable[[Sequence[str]], Sequence[bool]]) -> list[tuple[str, float]]:
    """The ``k`` best positive-scored ids that ``allow`` accepts, best first."""
    positive = np.nonzero(scores > 0)[0]
    order = positive[np.argsort(-scores[positive], kind="stable")]
    out: list[tuple[str, float]] = []
    block = max(4 * k, 256)
    for b in range(0, order.size, block):
        rows = order[b:b + block].tolist()
        for row, ok in zip(rows, allow([ids[r] for r in rows])):
            if ok:
                out.append((ids[row], float(scores[row])))
                if len(out) == k:
                    return out
    return out


def _json_array(value: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(value, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def _from_json_array(arr: np.ndarray) -> Any:
    return json.loads(arr.tobytes().decode("utf-8"))
