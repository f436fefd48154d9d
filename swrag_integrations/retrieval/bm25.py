"""Language-aware BM25 on top of ``bm25s``, persisted without pickle.

* :func:`tokenize` lower-cases text and splits it into word tokens; runs of Han
  characters (Chinese) are segmented with ``jieba`` instead of being one "word" as with
  ``str.split``.
* :class:`BM25Index` keeps the tokenised corpus as integer ids (so documents can be
  added, replaced and deleted without re-tokenising everything) and builds the
  ``bm25s`` score matrix lazily. It is serialised to one ``.npz`` blob (arrays and
  JSON, loaded with ``allow_pickle=False``; :meth:`BM25Index.to_bytes`), which an index
  keeps in its source store.
* :class:`SqliteBM25Index` is the same BM25 (same tokens, same scores) kept in SQLite
  tables with an FTS5 inverted index (stdlib ``sqlite3``): adding or deleting documents
  writes only their rows (and FTS5's incremental segment merges), never the whole
  index, so an index's keyword side costs in proportion to a change.
* Framework-free: the LangChain retriever over it is
  :class:`~swrag_integrations.retrieval.search.CJKBM25Retriever`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from .._lang import HAN, contains_cjk

__all__ = [
    "tokenize",
    "contains_cjk",
    "ENGLISH_STOPWORDS",
    "CHINESE_STOPWORDS",
    "BM25Index",
    "SqliteBM25Index",
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
        # the score matrix as bm25s saved it ({file name: bytes}), loaded (and bm25s
        # imported) only when a search or a save needs it: opening an index, or reading
        # its keyword status, never imports bm25s
        self._saved: dict[str, bytes] | None = None
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
        cannot be read back (then :meth:`_build` computes it again from the tokens, which
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
                    "stopwords": self.stopwords, "n_docs": len(self.ids)}
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
        """Load an index written by :meth:`to_bytes` (``allow_pickle=False``)."""
        import io

        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            meta = _from_json_array(data["meta"])
            if meta.get("format") != cls.FORMAT_VERSION:
                raise ValueError(f"unsupported BM25 index format {meta.get('format')!r}")
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
        """Write :meth:`to_bytes` to the file ``path`` atomically (temp file + rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
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
        """Load a file written by :meth:`save`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no BM25 index at {path}")
        return cls.from_bytes(path.read_bytes(), tokenizer=tokenizer)


class SqliteBM25Index:
    """The BM25 of :class:`BM25Index` kept in SQLite tables, written incrementally.

    The tables (prefixed ``bm25_``) can live in their own file or beside other tables
    (an index keeps them in its SQLite source store). Each document is one row of
    ``bm25_docs`` (its id, its *group* -- for an index, the source id -- and its tokens as
    an int32 array of vocabulary ids); ``bm25_vocab`` keeps each token's id and document
    frequency; a contentless FTS5 table (``bm25_fts``, the ids as words, no positions) is
    the inverted index. Adding, replacing or deleting documents writes
    their rows, their tokens' counts and FTS5's incremental segment merges: work in
    proportion to the change, not to the index. Every write runs in one SQLite
    transaction (:meth:`transaction`), so a crash leaves the previous state.

    Scores are exactly those of :class:`BM25Index` (bm25s' ``lucene`` method: idf
    ``ln(1 + (N - df + 0.5) / (df + 0.5))``, term part ``tf / (tf + k1 (1 - b + b dl /
    avgdl))``; each query term counts once), computed at query time from the stored
    counts, so no write has to touch other documents' scores. FTS5 only finds the
    candidates (MaxScore): the documents of the rarest query terms are scored first;
    the ``k``-th best score found so far is a threshold, and the commonest terms whose
    upper bounds (their idf) add up to less than it cannot lift a document into the top
    ``k`` on their own, so their documents are never read.

    Args:
        path: the SQLite file (created if missing).
        k1, b, method: BM25 parameters as in :class:`BM25Index` (``method`` must be
            ``"lucene"``, its default).
        stopwords, tokenizer: as in :class:`BM25Index`.
        group: ``id -> group`` (e.g. a chunk id's source id); by default the id itself.
        timeout: seconds to wait for another connection's write transaction.
    """

    SCHEMA_VERSION = 1

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS bm25_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS bm25_vocab (id INTEGER PRIMARY KEY, token TEXT NOT NULL UNIQUE, "
        "df INTEGER NOT NULL DEFAULT 0)",
        "CREATE TABLE IF NOT EXISTS bm25_docs (row INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
        "grp TEXT NOT NULL, tokens BLOB NOT NULL)",
        "CREATE INDEX IF NOT EXISTS bm25_docs_grp ON bm25_docs(grp)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS bm25_fts USING fts5(tokens, content='', tokenize='ascii', detail='none')",
    )

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: bool | Iterable[str] = True,
        tokenizer: Callable[[str], list[str]] | None = None,
        group: Callable[[str], str] | None = None,
        timeout: float = 60.0,
    ) -> None:
        if method != "lucene":
            raise ValueError(f"method: SqliteBM25Index scores with method='lucene' only, got {method!r} "
                             f"(use BM25Index for other bm25s methods)")
        self.k1, self.b, self.method = float(k1), float(b), method
        self.path = Path(path)
        self.stopwords = stopwords if isinstance(stopwords, bool) else sorted(set(stopwords))
        self._tokenizer = tokenizer
        self._group = group or (lambda doc_id: doc_id)
        self._lock = threading.RLock()
        self._depth = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=timeout)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")

    def __repr__(self) -> str:
        return f"SqliteBM25Index({str(self.path)!r})"

    # ------------------------------------------------------------------ schema
    def settings(self) -> dict[str, Any]:
        """What the stored tokens depend on (compared on open: other settings need a rebuild)."""
        tokenizer = self._tokenizer
        return {"schema": self.SCHEMA_VERSION, "stopwords": self.stopwords,
                "tokenizer": None if tokenizer is None else
                f"{getattr(tokenizer, '__module__', '')}.{getattr(tokenizer, '__qualname__', '')}"}

    def exists(self) -> bool:
        """Whether all the tables exist and were written with this index's :meth:`settings`."""
        with self._lock:
            tables = {r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE name LIKE 'bm25_%'")}
            if not {"bm25_meta", "bm25_vocab", "bm25_docs", "bm25_fts"} <= tables:
                return False
            return self._meta("settings") == json.dumps(self.settings(), sort_keys=True)

    def create(self) -> None:
        """Create empty tables (dropping any others of this index) at generation -1."""
        with self.transaction():
            for table in ("bm25_fts", "bm25_docs", "bm25_vocab", "bm25_meta"):
                self._con.execute(f"DROP TABLE IF EXISTS {table}")
            for sql in self._SCHEMA:
                self._con.execute(sql)
            self._set_meta("settings", json.dumps(self.settings(), sort_keys=True))
            self._set_meta("generation", "-1")
            self._set_counts(0, 0)

    def _meta(self, key: str) -> str | None:
        row = self._con.execute("SELECT value FROM bm25_meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self._con.execute("INSERT OR REPLACE INTO bm25_meta VALUES (?, ?)", (key, value))

    def _counts(self) -> tuple[int, int]:
        """(documents, tokens of all documents)."""
        return int(self._meta("n_docs") or 0), int(self._meta("n_tokens") or 0)

    def _set_counts(self, docs: int, tokens: int) -> None:
        self._set_meta("n_docs", str(docs))
        self._set_meta("n_tokens", str(tokens))

    @property
    def generation(self) -> int:
        """The caller's version number of the committed contents (-1 when new)."""
        with self._lock:
            return int(self._meta("generation") or -1)

    @generation.setter
    def generation(self, value: int) -> None:
        with self.transaction():
            self._set_meta("generation", str(int(value)))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._con.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0

    # ------------------------------------------------------------------ editing
    def tokenize(self, text: str) -> list[str]:
        if self._tokenizer is not None:
            return list(self._tokenizer(text))
        return tokenize(text, stopwords=self.stopwords)

    def __len__(self) -> int:
        with self._lock:
            return self._counts()[0]

    def __contains__(self, item: object) -> bool:
        with self._lock:
            return self._con.execute("SELECT 1 FROM bm25_docs WHERE id = ?", (str(item),)).fetchone() is not None

    def token_bytes(self) -> int:
        """As :meth:`BM25Index.token_bytes` (reads the vocabulary)."""
        with self._lock:
            vocab = self._con.execute("SELECT COALESCE(SUM(LENGTH(CAST(token AS BLOB)) + 4), 0) FROM bm25_vocab "
                                      "WHERE df > 0").fetchone()[0]
            return self._counts()[1] * 4 + int(vocab)

    @property
    def ids(self) -> list[str]:
        """Every document id, in insertion order (reads the whole table: for checks and tests)."""
        with self._lock:
            return [r[0] for r in self._con.execute("SELECT id FROM bm25_docs ORDER BY row")]

    def groups(self) -> set[str]:
        """Every group that has documents."""
        with self._lock:
            return {r[0] for r in self._con.execute("SELECT DISTINCT grp FROM bm25_docs")}

    def _token_ids(self, tokens: Iterable[str], *, add: bool) -> dict[str, int]:
        """Vocabulary ids of ``tokens`` (new tokens get ids when ``add``)."""
        unique = list(dict.fromkeys(tokens))
        if add and unique:
            self._con.executemany("INSERT OR IGNORE INTO bm25_vocab(token) VALUES (?)", [(t,) for t in unique])
        out: dict[str, int] = {}
        for b in range(0, len(unique), 500):
            part = unique[b:b + 500]
            marks = ",".join("?" * len(part))
            out.update(self._con.execute(f"SELECT token, id FROM bm25_vocab WHERE token IN ({marks})", part))
        return out

    def _insert(self, docs: Iterable[tuple[str, Sequence[int]]]) -> None:
        """Insert ``(id, token ids)`` documents (not indexed yet; inside a transaction)."""
        df: dict[int, int] = {}
        fts_rows = []
        n_tokens = 0
        for doc_id, toks in docs:
            for tok in set(toks):
                df[tok] = df.get(tok, 0) + 1
            cur = self._con.execute("INSERT INTO bm25_docs(id, grp, tokens) VALUES (?, ?, ?)",
                                    (doc_id, str(self._group(doc_id)), np.asarray(toks, dtype=np.int32).tobytes()))
            fts_rows.append((cur.lastrowid, " ".join(map(str, toks))))
            n_tokens += len(toks)
        self._con.executemany("INSERT INTO bm25_fts(rowid, tokens) VALUES (?, ?)", fts_rows)
        self._con.executemany("UPDATE bm25_vocab SET df = df + ? WHERE id = ?", [(n, t) for t, n in df.items()])
        docs_before, tokens_before = self._counts()
        self._set_counts(docs_before + len(fts_rows), tokens_before + n_tokens)

    def _drop_rows(self, where: str, keys: Sequence[str]) -> int:
        """Delete the documents whose ``where`` column is in ``keys`` (inside a transaction)."""
        dropped = n_tokens = 0
        df: dict[int, int] = {}
        for b in range(0, len(keys), 500):
            part = list(keys[b:b + 500])
            marks = ",".join("?" * len(part))
            rows = [(row, np.frombuffer(blob, dtype=np.int32).tolist())
                    for row, blob in self._con.execute(f"SELECT row, tokens FROM bm25_docs WHERE {where} IN ({marks})",
                                                       part)]
            if not rows:
                continue
            self._con.executemany("INSERT INTO bm25_fts(bm25_fts, rowid, tokens) VALUES ('delete', ?, ?)",
                                  [(row, " ".join(map(str, toks))) for row, toks in rows])
            self._con.executemany("DELETE FROM bm25_docs WHERE row = ?", [(row,) for row, _ in rows])
            for _, toks in rows:
                for tok in set(toks):
                    df[tok] = df.get(tok, 0) + 1
                n_tokens += len(toks)
            dropped += len(rows)
        if dropped:
            self._con.executemany("UPDATE bm25_vocab SET df = df - ? WHERE id = ?", [(n, t) for t, n in df.items()])
            docs_before, tokens_before = self._counts()
            self._set_counts(docs_before - dropped, tokens_before - n_tokens)
        return dropped

    def upsert(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Add documents, replacing those whose id is already indexed."""
        if len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids for {len(texts)} texts")
        latest = dict(zip(ids, (self.tokenize(text) for text in texts)))  # an id given twice: its last text wins
        with self.transaction():
            self._drop_rows("id", list(latest))
            vocab = self._token_ids((t for toks in latest.values() for t in toks), add=True)
            self._insert((doc_id, [vocab[t] for t in toks]) for doc_id, toks in latest.items())

    def delete(self, ids: Iterable[str]) -> int:
        """Remove documents by id; unknown ids are ignored. Returns how many went."""
        with self.transaction():
            return self._drop_rows("id", list(dict.fromkeys(ids)))

    def delete_groups(self, groups: Iterable[str]) -> int:
        """Remove every document of these groups; returns how many went."""
        with self.transaction():
            return self._drop_rows("grp", list(dict.fromkeys(groups)))

    def clear(self) -> None:
        """Remove every document and the vocabulary (the generation is kept)."""
        with self.transaction():
            self._con.execute("INSERT INTO bm25_fts(bm25_fts) VALUES ('delete-all')")
            self._con.execute("DELETE FROM bm25_docs")
            self._con.execute("DELETE FROM bm25_vocab")
            self._set_counts(0, 0)

    def add_encoded(self, index: BM25Index) -> None:
        """Copy every document of ``index`` (e.g. an older snapshot) without tokenising again."""
        vocab_list = [""] * len(index.vocab)
        for token, idx in index.vocab.items():
            vocab_list[idx] = token
        with self.transaction():
            ours = self._token_ids(vocab_list, add=True)
            mapping = np.array([ours[t] for t in vocab_list] or [0], dtype=np.int64)
            self._insert((doc_id, mapping[toks].tolist()) for doc_id, toks in zip(index.ids, index._tokens))

    # ----------------------------------------------------------------- scoring
    def search(self, query: str, k: int = 10, *,
               allow: Callable[[Sequence[str]], Sequence[bool]] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs (score > 0), best first (ties: older first).

        ``allow``: as in :meth:`BM25Index.search`.
        """
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        tokens = set(self.tokenize(query))
        with self._lock:
            n_docs, n_tokens = self._counts()
            terms: dict[int, float] = {}  # term id -> idf
            dfs: dict[int, int] = {}
            for b in range(0, len(tokens), 500):
                part = sorted(tokens)[b:b + 500]
                marks = ",".join("?" * len(part))
                for tok_id, df in self._con.execute(
                        f"SELECT id, df FROM bm25_vocab WHERE df > 0 AND token IN ({marks})", part):
                    terms[tok_id] = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
                    dfs[tok_id] = df
            if not terms:
                return []
            scorer = _LuceneScorer(terms, self.k1, self.b, n_tokens / n_docs)
            seen = np.zeros(0, dtype=np.int64)  # rows scored so far (their scores in ``scores``)
            scores = np.zeros(0, dtype=np.float64)
            best = np.zeros(0, dtype=np.float64)  # the k best positive scores ``allow`` accepts
            done: set[int] = set()
            by_rarity = sorted(terms, key=lambda t: dfs[t])
            by_bound = sorted(terms, key=lambda t: terms[t])
            threshold: float | None = None
            while True:
                # the terms that can still lift a document into the top k: all of them until k
                # documents are scored, then all but the commonest whose bounds stay below the k-th score
                essential, bound = set(terms), 0.0
                if threshold is not None:
                    for t in by_bound:
                        bound += terms[t]
                        if bound * (1 + 1e-9) >= threshold:
                            break
                        essential.discard(t)
                todo = [t for t in by_rarity if t in essential and t not in done]
                if not todo:
                    break
                batch, batch_df = [], 0
                for t in todo:  # the rarest terms left, enough of them to hold 2k documents
                    batch.append(t)
                    batch_df += dfs[t]
                    if batch_df >= 2 * k:
                        break
                done.update(batch)
                fetched = self._documents(batch)
                if not fetched:
                    continue
                rows = np.fromiter((r[0] for r in fetched), dtype=np.int64, count=len(fetched))
                fresh = ~np.isin(rows, seen)
                if not fresh.any():
                    continue
                rows = rows[fresh]
                new = scorer([blob for (_, blob), ok in zip(fetched, fresh.tolist()) if ok])
                seen, scores = np.concatenate([seen, rows]), np.concatenate([scores, new])
                keep = new > 0
                if allow is not None and keep.any():
                    ids = self._ids(rows[keep])
                    keep[keep] = np.fromiter((bool(ok) for ok in allow([ids[r] for r in rows[keep].tolist()])),
                                             dtype=bool, count=int(keep.sum()))
                best = np.concatenate([best, new[keep]])
                if best.size >= k:
                    best = -np.partition(-best, k - 1)[:k]
                    threshold = float(best.min())
            positive = scores > 0
            seen, scores = seen[positive], scores[positive]
            if allow is None and scores.size > k:  # only the top k (and its ties) need ordering
                kth = -np.partition(-scores, k - 1)[k - 1]
                top = scores >= kth
                seen, scores = seen[top], scores[top]
            order = np.lexsort((seen, -scores))  # best first, ties: older rows first
            ranked_rows, ranked_scores = seen[order].tolist(), scores[order].tolist()
            out: list[tuple[str, float]] = []
            block = max(4 * k, 256)
            for b in range(0, len(ranked_rows), block):
                part = ranked_rows[b:b + block]
                ids = self._ids(part)
                hits = [(ids[r], sc) for r, sc in zip(part, ranked_scores[b:b + block])]
                oks = [True] * len(hits) if allow is None else allow([h[0] for h in hits])
                for hit, ok in zip(hits, oks):
                    if ok:
                        out.append(hit)
                        if len(out) == k:
                            return out
            return out

    def _documents(self, terms: Sequence[int]) -> list[tuple[int, bytes]]:
        """``(row, tokens)`` of every document holding one of ``terms``."""
        match = " OR ".join(f'"{t}"' for t in terms)
        return self._con.execute("SELECT d.row, d.tokens FROM (SELECT rowid AS r FROM bm25_fts "
                                 "WHERE bm25_fts MATCH ?) JOIN bm25_docs AS d ON d.row = r", (match,)).fetchall()

    def _ids(self, rows: Iterable[int]) -> dict[int, str]:
        """``row -> id``."""
        rows = [int(r) for r in rows]
        out: dict[int, str] = {}
        for b in range(0, len(rows), 500):
            part = rows[b:b + 500]
            marks = ",".join("?" * len(part))
            out.update(self._con.execute(f"SELECT row, id FROM bm25_docs WHERE row IN ({marks})", part))
        return out

    def check(self) -> list[str]:
        """Problems found by FTS5's own integrity check (reads the whole index); empty when sound."""
        with self._lock:
            try:
                self._con.execute("INSERT INTO bm25_fts(bm25_fts) VALUES ('integrity-check')")
            except sqlite3.DatabaseError as exc:
                return [f"keyword index: {exc}"]
        return []

    def close(self) -> None:
        with self._lock:
            self._con.close()


class _LuceneScorer:
    """bm25s' ``lucene`` scores of documents (their int32 token blobs) for one query."""

    def __init__(self, idf: dict[int, float], k1: float, b: float, avgdl: float) -> None:
        self.terms = np.array(sorted(idf), dtype=np.int32)
        self.idf = np.array([idf[t] for t in self.terms.tolist()], dtype=np.float64)
        self.k1, self.b, self.avgdl = k1, b, avgdl

    def __call__(self, blobs: Sequence[bytes]) -> np.ndarray:
        lengths = np.fromiter((len(blob) >> 2 for blob in blobs), dtype=np.int64, count=len(blobs))
        flat = np.frombuffer(b"".join(blobs), dtype=np.int32)
        doc = np.repeat(np.arange(len(blobs)), lengths)
        pos = np.minimum(np.searchsorted(self.terms, flat), self.terms.size - 1)
        hit = self.terms[pos] == flat
        tf = np.zeros((len(blobs), self.terms.size), dtype=np.float64)
        np.add.at(tf, (doc[hit], pos[hit]), 1.0)
        norm = self.k1 * (1 - self.b + self.b * lengths / self.avgdl)
        part = np.divide(tf, tf + norm[:, None], out=np.zeros_like(tf), where=tf > 0)
        return (self.idf * part).sum(axis=1)


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
