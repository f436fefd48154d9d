"""Language-aware BM25 on top of ``bm25s``, persisted without pickle.

* :func:`tokenize` lower-cases text and splits it into word tokens; runs of Han
  characters (Chinese) are segmented with ``jieba`` instead of being one "word" as with
  ``str.split``.
* :class:`BM25Index` keeps the tokenised corpus as integer ids (so documents can be
  added, replaced and deleted without re-tokenising everything) and builds the
  ``bm25s`` score matrix lazily. It is serialised to one ``.npz`` blob (arrays and
  JSON, loaded with ``allow_pickle=False``; :meth:`BM25Index.to_bytes`), which an index
  keeps in its source store.
* :class:`TantivyBM25Index` is BM25 over the same tokens in a tantivy index on disk
  (Lucene-style segments): adding or deleting documents writes a new small segment or a
  delete file, never the whole index, so a local index's keyword side costs in
  proportion to a change; its scores are tantivy's (``k1 = 1.2``, quantised lengths).
* Framework-free: the LangChain retriever over it is
  :class:`~swrag_integrations.retrieval.search.CJKBM25Retriever`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
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
    "TantivyBM25Index",
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


class TantivyBM25Index:
    """BM25 over the package's tokens in a tantivy index on disk, written incrementally.

    tantivy (a Rust search library in Lucene's manner) keeps the index as immutable
    segments: adding documents writes a new small segment, deleting marks them in a
    per-segment delete file, and background merges keep the number of segments
    logarithmic. A write therefore costs in proportion to the change, not to the index,
    and every :meth:`transaction` ends in one tantivy commit, which is atomic: a crash
    leaves the previous commit.

    Tokens are the package's own (:func:`tokenize`: jieba for Han text, the stop words),
    stored pre-split: each document's tokens joined by spaces into a field that tantivy
    splits on whitespace only; a query is the same tokens as term queries (each once).

    Scores are tantivy's BM25 (Lucene's): idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``
    times ``(k1 + 1) tf / (tf + k1 (1 - b + b dl / avgdl))`` with tantivy's fixed
    ``k1 = 1.2, b = 0.75``. They differ from :class:`BM25Index` (bm25s, ``k1 = 1.5`` by
    default, no ``k1 + 1`` factor) in three ways, so rankings agree closely but not
    exactly: ``k1``; document lengths are stored quantised to one byte (exact up to 40
    tokens, then within about 1/8); and ``N``, ``df`` and the token total still count
    deleted documents until a merge drops them (as in Lucene). Scores are float32.

    Layout of ``path`` (a directory): ``segments/`` (the tantivy index), ``state.json``
    (the settings the tokens depend on and the caller's generation, replaced atomically
    after each commit) and ``writer.lock`` (one writer at a time, across processes).

    Args:
        path: the directory (created if missing).
        k1, b: must be tantivy's (1.2, 0.75): they are not configurable there.
        stopwords, tokenizer: as in :class:`BM25Index`.
        group: ``id -> group`` (e.g. a chunk id's source id), indexed so that a group is
            deleted by one term; by default the id itself.
        owner: a label of what the index is derived from, kept in its settings (an index
            of another owner does not :meth:`exists` for this one).
        timeout: seconds to wait for another writer.
        heap_size: bytes of the writer's indexing buffer.
    """

    SCHEMA_VERSION = 1
    K1, B = 1.2, 0.75

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        k1: float = K1,
        b: float = B,
        stopwords: bool | Iterable[str] = True,
        tokenizer: Callable[[str], list[str]] | None = None,
        group: Callable[[str], str] | None = None,
        owner: str = "",
        timeout: float = 600.0,
        heap_size: int = 64_000_000,
    ) -> None:
        if (float(k1), float(b)) != (self.K1, self.B):
            raise ValueError(f"k1, b: tantivy scores with k1={self.K1}, b={self.B} only, got k1={k1}, b={b} "
                             f"(use BM25Index for other values)")
        self.k1, self.b = self.K1, self.B
        self.path = Path(path)
        self.stopwords = stopwords if isinstance(stopwords, bool) else sorted(set(stopwords))
        self._tokenizer = tokenizer
        self._group = group or (lambda doc_id: doc_id)
        self.owner = str(owner)
        self.timeout = float(timeout)
        self.heap_size = int(heap_size)
        self._lock = threading.RLock()
        self._depth = 0
        self._writer: Any = None  # the tantivy IndexWriter of the open transaction (opened on first write)
        self._staged: int | None = None  # the generation to record when the transaction commits
        self._index: Any = None
        self._seen: str | None = None  # the commit (named in state.json) this handle's searcher reflects

    def __repr__(self) -> str:
        return f"TantivyBM25Index({str(self.path)!r})"

    # ------------------------------------------------------------------ schema
    @staticmethod
    def _schema() -> Any:
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("group", tokenizer_name="raw", index_option="basic")
        builder.add_text_field("tokens", tokenizer_name="whitespace", index_option="freq")
        return builder.build()

    def settings(self) -> dict[str, Any]:
        """What the stored tokens depend on (compared on open: other settings need a rebuild)."""
        tokenizer = self._tokenizer
        return {"schema": self.SCHEMA_VERSION, "owner": self.owner, "stopwords": self.stopwords,
                "tokenizer": None if tokenizer is None else
                f"{getattr(tokenizer, '__module__', '')}.{getattr(tokenizer, '__qualname__', '')}"}

    @property
    def _segments(self) -> Path:
        return self.path / "segments"

    @property
    def _state_file(self) -> Path:
        return self.path / "state.json"

    def _state(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self._state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def _write_state(self, generation: int) -> None:
        """Replace ``state.json`` (temp file, fsync, rename): after a commit, never before."""
        data = json.dumps({"settings": self.settings(), "generation": int(generation),
                           "commit": os.urandom(8).hex()}, sort_keys=True)
        fd, tmp = tempfile.mkstemp(prefix=".state.json.tmp-", dir=self.path)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._state_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def exists(self) -> bool:
        """Whether the index exists, opens, and was written with this index's :meth:`settings`
        (a damaged one, e.g. a segment file lost, is logged and reported missing)."""
        import tantivy

        state = self._state()
        if state is None or state.get("settings") != json.loads(json.dumps(self.settings())):
            return False
        with self._lock:
            try:
                if not (self._segments.is_dir() and tantivy.Index.exists(str(self._segments))):
                    return False
                self._open()
                self._reload()
                self._index.searcher().num_docs
            except Exception as exc:  # noqa: BLE001 - tantivy raises ValueError/OSError/RuntimeError alike
                logger.warning("the keyword index at %s cannot be opened (%s)", self.path, exc)
                self._index = None
                return False
        return True

    def _open(self) -> Any:
        """The tantivy index (opened once per handle)."""
        import tantivy

        if self._index is None:
            self._segments.mkdir(parents=True, exist_ok=True)
            self._index = tantivy.Index(self._schema(), path=str(self._segments), reuse=True)
            self._index.config_reader(reload_policy="manual")
            self._seen = None
        return self._index

    def create(self) -> None:
        """Create an empty index (replacing any other in ``path``) at generation -1."""
        with self.transaction():
            self._index = None
            shutil.rmtree(self._segments, ignore_errors=True)
            self._open()
            self._staged = -1

    @property
    def generation(self) -> int:
        """The caller's version number of the committed contents (-1 when new)."""
        state = self._state()
        return int(state.get("generation", -1)) if state else -1

    @generation.setter
    def generation(self, value: int) -> None:
        with self.transaction():
            self._staged = int(value)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write: the writer lock (a file lock: every process and handle), then one
        tantivy commit of everything written inside, then the staged generation. Nested
        calls join the outer one; an exception rolls back."""
        from filelock import FileLock, Timeout

        from .sources import LockTimeout

        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self.path.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.path / "writer.lock"), timeout=self.timeout)
            try:
                lock.acquire()
            except Timeout as exc:
                raise LockTimeout(f"another writer has held the keyword index at {self.path} for over "
                                  f"{self.timeout:.0f} s; retry when it is done (or raise the timeout)") from exc
            self._depth, self._staged = 1, None
            try:
                yield
                committed = self._writer is not None
                if committed:
                    self._writer.commit()
                    self._writer.wait_merging_threads()  # the merges this commit started; releases tantivy's lock
                    self._writer = None
                if committed or self._staged is not None:  # a new state file after every commit: readers reload
                    self._write_state(self.generation if self._staged is None else self._staged)
            except BaseException:
                if self._writer is not None:
                    self._writer.rollback()
                    self._writer.wait_merging_threads()
                raise
            finally:
                self._depth, self._writer, self._staged = 0, None, None
                lock.release()
            self._reload()

    def _writing(self) -> Any:
        """The tantivy writer of the open transaction."""
        if not self._depth:
            raise RuntimeError("write inside transaction()")
        if self._writer is None:
            self._writer = self._open().writer(heap_size=self.heap_size, num_threads=1)
        return self._writer

    def _reload(self) -> None:
        """Point the searcher at the last commit when ``state.json`` names another commit
        than the one this handle reads (every process replaces it after each commit)."""
        stamp = (self._state() or {}).get("commit")
        index = self._open()
        if stamp != self._seen:
            index.reload()
            self._seen = stamp

    def _searcher(self) -> Any:
        with self._lock:
            self._reload()
            return self._index.searcher()

    # ------------------------------------------------------------------ editing
    def tokenize(self, text: str) -> list[str]:
        if self._tokenizer is not None:
            return list(self._tokenizer(text))
        return tokenize(text, stopwords=self.stopwords)

    def __len__(self) -> int:
        return int(self._searcher().num_docs)

    def __contains__(self, item: object) -> bool:
        return self._count("id", str(item)) > 0

    def _count(self, field: str, value: str) -> int:
        import tantivy

        searcher = self._searcher()
        return int(searcher.search(tantivy.Query.term_query(self._index.schema, field, value, index_option="basic"),
                                   1, count=True).count)

    def token_bytes(self) -> int:
        """Bytes of the index files (the tokens live in their postings and term dictionaries)."""
        with self._lock:
            return sum(p.stat().st_size for p in self._segments.iterdir() if p.is_file() and not p.name.startswith("."))

    @property
    def ids(self) -> list[str]:
        """Every document id (reads every stored id: for checks and tests)."""
        import tantivy

        searcher = self._searcher()
        n = int(searcher.num_docs)
        if not n:
            return []
        hits = searcher.search(tantivy.Query.all_query(), n, count=False).hits
        return [searcher.doc(address)["id"][0] for _, address in hits]

    def groups(self) -> set[str]:
        """Every group that has documents."""
        return {str(self._group(doc_id)) for doc_id in self.ids}

    def _add(self, docs: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Write ``(id, tokens)`` documents (inside a transaction)."""
        import tantivy

        writer = self._writing()
        for doc_id, tokens in docs:
            writer.add_document(tantivy.Document(id=doc_id, group=str(self._group(doc_id)), tokens=" ".join(tokens)))

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Add documents whose ids are not indexed (e.g. after :meth:`delete_groups` of
        their groups): no delete per id, unlike :meth:`upsert`."""
        if len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids for {len(texts)} texts")
        tokens = [self.tokenize(text) for text in texts]
        with self.transaction():
            self._add(zip(ids, tokens))

    def upsert(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Add documents, replacing those whose id is already indexed."""
        if len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids for {len(texts)} texts")
        latest = dict(zip(ids, (self.tokenize(text) for text in texts)))  # an id given twice: its last text wins
        with self.transaction():
            writer = self._writing()
            for doc_id in latest:
                writer.delete_documents_by_term("id", doc_id)
            self._add(latest.items())

    def delete(self, ids: Iterable[str]) -> int:
        """Remove documents by id; unknown ids are ignored. Returns how many went."""
        ids = list(dict.fromkeys(ids))
        with self.transaction():
            present = [doc_id for doc_id in ids if doc_id in self]
            writer = self._writing() if present else None
            for doc_id in present:
                writer.delete_documents_by_term("id", doc_id)
        return len(present)

    def delete_groups(self, groups: Iterable[str]) -> None:
        """Remove every document of these groups (one delete term each)."""
        groups = list(dict.fromkeys(groups))
        if not groups:
            return
        with self.transaction():
            writer = self._writing()
            for name in groups:
                writer.delete_documents_by_term("group", str(name))

    def clear(self) -> None:
        """Remove every document (the generation is kept)."""
        with self.transaction():
            self._writing().delete_all_documents()

    def add_encoded(self, index: BM25Index) -> None:
        """Copy every document of ``index`` (e.g. an older snapshot) without tokenising again."""
        vocab_list = [""] * len(index.vocab)
        for token, idx in index.vocab.items():
            vocab_list[idx] = token
        with self.transaction():
            self._add((doc_id, [vocab_list[t] for t in toks.tolist()]) for doc_id, toks in zip(index.ids, index._tokens))

    # ----------------------------------------------------------------- scoring
    def search(self, query: str, k: int = 10, *,
               allow: Callable[[Sequence[str]], Sequence[bool]] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs (score > 0), best first.

        ``allow``: as in :meth:`BM25Index.search` (pages of hits in score order are
        read until ``k`` are allowed or none are left).
        """
        import tantivy

        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        tokens = sorted(set(self.tokenize(query)))
        if not tokens:
            return []
        searcher = self._searcher()
        schema = self._index.schema
        terms = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "tokens", t, index_option="freq")) for t in tokens])
        out: list[tuple[str, float]] = []
        page = k if allow is None else max(4 * k, 256)
        offset = 0
        while True:
            hits = searcher.search(terms, page, count=False, offset=offset).hits
            found = [(searcher.doc(address)["id"][0], float(score)) for score, address in hits if score > 0]
            oks = [True] * len(found) if allow is None else allow([doc_id for doc_id, _ in found])
            for hit, ok in zip(found, oks):
                if ok:
                    out.append(hit)
                    if len(out) == k:
                        return out
            if len(hits) < page:
                return out
            offset += page
            page *= 2

    def check(self) -> list[str]:
        """Problems found when opening the index afresh and reading every stored id; empty when sound."""
        import tantivy

        problems = []
        if self._state() is None:
            problems.append(f"keyword index: {self._state_file} is missing or unreadable")
        try:
            fresh = tantivy.Index.open(str(self._segments))
            searcher = fresh.searcher()
            n = int(searcher.num_docs)
            hits = searcher.search(tantivy.Query.all_query(), max(n, 1), count=True)
            if len(hits.hits) != n:
                problems.append(f"keyword index: {len(hits.hits)} documents found, {n} counted")
            for _, address in hits.hits:
                searcher.doc(address)
        except Exception as exc:  # noqa: BLE001 - any failure to read is the problem reported
            problems.append(f"keyword index: {exc}")
        return problems

    def close(self) -> None:
        with self._lock:
            self._index = None


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
