"""BM25 in a tantivy index on disk: the incremental keyword index of a local index.

`TantivyBM25Index` indexes the package's own tokens (`tokenize`,
CJK-aware) pre-split, in Lucene-style segments: adding or deleting documents writes a
new small segment or a delete file, never the whole index, so a write costs in
proportion to the change (measured: ``benchmarks/bench_keyword.py``). Scores are
tantivy's BM25 (``k1 = 1.2``, ``b = 0.75``, quantised document lengths), so rankings can
differ a little from `BM25Index` (bm25s, ``k1 = 1.5``), which stays the
keyword index of other source stores. `KeywordIndex` keeps it in step
with the source store.
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

from swrag_integrations.core.paths import private_dir
from swrag_integrations.keyword.bm25 import TOKENIZER_VERSION, BM25Index, tokenize

__all__ = ["TantivyBM25Index"]

logger = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(?P<segment>[0-9a-f]{32})(?:\.(?P<opstamp>\d+))?\.(?P<kind>[a-z]+)$")
"""A tantivy segment's file: ``<segment id>.<component>``, or ``<segment id>.<opstamp>.del``."""


class TantivyBM25Index:
    """BM25 over the package's tokens in a tantivy index on disk, written incrementally.

    tantivy (a Rust search library in Lucene's manner) keeps the index as immutable
    segments: adding documents writes a new small segment, deleting marks them in a
    per-segment delete file, and background merges keep the number of segments
    logarithmic. A write therefore costs in proportion to the change, not to the index,
    and every `transaction` ends in one tantivy commit, which is atomic: a crash
    leaves the previous commit.

    Tokens are the package's own (`tokenize`: jieba for Han text, the stop words),
    stored pre-split: each document's tokens joined by spaces into a field that tantivy
    splits on whitespace only; a query is the same tokens as term queries (each once).

    Scores are tantivy's BM25 (Lucene's): idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``
    times ``(k1 + 1) tf / (tf + k1 (1 - b + b dl / avgdl))`` with tantivy's fixed
    ``k1 = 1.2, b = 0.75``. They differ from `BM25Index` (bm25s, ``k1 = 1.5`` by
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
        stopwords, tokenizer: as in `BM25Index`.
        group: ``id -> group`` (e.g. a chunk id's source id), indexed so that a group is
            deleted by one term; by default the id itself.
        owner: a label of what the index is derived from, kept in its settings (an index
            of another owner does not `exists` for this one).
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
                "tokenizer": TOKENIZER_VERSION if tokenizer is None else
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
        """Whether the index exists, opens, and was written with this index's `settings`
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
            private_dir(self._segments)
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

        from swrag_integrations.stores.sources import LockTimeout

        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._clear_wrong_types()
            private_dir(self.path)
            lock = FileLock(str(self.path / "writer.lock"), timeout=self.timeout)
            try:
                lock.acquire()
            except Timeout as exc:
                raise LockTimeout(f"another writer has held the keyword index at {self.path} for over "
                                  f"{self.timeout:.0f} s; retry when it is done (or raise the timeout)") from exc
            self._depth, self._staged = 1, None
            try:
                self._clear_uncommitted()
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

    def _clear_wrong_types(self) -> None:
        """Delete the parts of the layout that have the wrong type, so that the write
        that follows recreates them: ``path``, ``segments/`` as files, ``writer.lock``
        or ``state.json`` as folders (made by hand or by another program). Every open
        failed on them before (``FileExistsError`` and the like), repair included; the
        index is derived from the source store, so nothing is lost, and without a
        ``state.json`` or ``segments/`` the index does not `exists` and is built
        again (reported as rebuilt until saved)."""
        wrong = []
        if self.path.exists() and not self.path.is_dir():
            wrong.append((self.path, "a file, not a folder"))
        else:
            for part, folder in ((self._segments, True), (self.path / "writer.lock", False),
                                 (self._state_file, False)):
                if part.exists() and part.is_dir() != folder:
                    wrong.append((part, "a folder, not a file" if not folder else "a file, not a folder"))
        for part, what in wrong:
            logger.warning("the keyword index's %s is %s: deleting it (the index is rebuilt from the source store)",
                           part, what)
            if part.is_dir() and not part.is_symlink():
                shutil.rmtree(part, ignore_errors=True)
            else:
                part.unlink(missing_ok=True)

    def _clear_uncommitted(self) -> None:
        """Delete the segment files that the committed ``meta.json`` does not reference
        (under the writer lock, before anything is written).

        A tantivy commit writes its new segment and delete files first and replaces
        ``meta.json`` last. A writer killed in between leaves those files behind, and
        the replay of the same change log reaches the same opstamp: tantivy would then
        write ``<segment>.<opstamp>.del`` again and fail with ``FileAlreadyExists`` on
        every later write. What no commit references was never part of the index, so
        it goes (tantivy's own garbage collection would delete it after a commit that
        can no longer happen)."""
        try:
            meta = json.loads((self._segments / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # no committed index yet (or a damaged one, which opening reports)
        if not isinstance(meta, dict):
            return
        keep: dict[str, int | None] = {}  # segment -> opstamp of its delete file
        for segment in meta.get("segments") or []:
            deletes = segment.get("deletes") or {}
            keep[str(segment.get("segment_id", "")).replace("-", "")] = deletes.get("opstamp")
        for file in self._segments.iterdir():
            match = _SEGMENT_FILE.match(file.name)
            if match is None or not file.is_file():
                continue
            segment, opstamp = match["segment"], match["opstamp"]
            if segment in keep and (opstamp is None or int(opstamp) == keep[segment]):
                continue
            logger.warning("the keyword index at %s holds %s, which no commit references (a writer stopped "
                           "inside a commit): deleting it", self.path, file.name)
            file.unlink(missing_ok=True)

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
        """Add documents whose ids are not indexed (e.g. after `delete_groups` of
        their groups): no delete per id, unlike `upsert`."""
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

        ``allow``: as in `BM25Index.search` (pages of hits in score order are
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
