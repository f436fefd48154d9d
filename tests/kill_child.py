"""A writer process to kill: opens an index, runs one write or repair, and kills itself
(SIGKILL, as ``kill -9``) at a chosen point. Used by the crash tests; not a test module.

    python kill_child.py PATH STORE OP [VERSION] [--kill POINT:N | --kill event:K | --count]

``STORE``: ``chroma`` (embedded Chroma + SQLite sources + tantivy keyword index) or
``milvus`` (Milvus Lite in the folder). ``OP``: ``write`` (the corpus of ``VERSION``,
pruning every other source), ``repair`` or ``deep-repair``. The kill hooks are installed
by monkeypatching library classes in this process only (no library code changes):

* ``--kill POINT:N`` kills at the ``N``-th time the named point is reached (points:
  :data:`POINTS`);
* ``--kill event:K`` kills at the ``K``-th hook event of any kind (a random point, when
  ``K`` is drawn from ``1..`` the count that ``--count`` printed for the same operation);
* ``--pick SEED:named[:AVOID,...]`` or ``--pick SEED:event`` chooses one of those
  (seeded) from the events a dry run of the same operation on a copy of the index
  counted, prints ``kill <choice>`` and dies there;
* ``--exclude POINT,...``: points never counted or killed at (a known bug's, tested apart);
* ``--count`` kills nowhere and prints ``{"events": n, "points": {point: n}}`` as JSON.

A child that runs to the end prints ``done`` and exits 0, so a test can tell a kill
(exit status -9) from a run that never reached its point.

    python kill_child.py --serve

is a fork server (:class:`Forks` starts and drives it): it imports the package, the stores
and the keyword index once, then forks one writer per request, so the crash tests pay the
interpreter start and the imports once rather than once per killed writer (about two
thirds of each writer's time). A forked writer is a process of its own like a started one:
it opens the index itself, installs its hooks itself and dies by its own SIGKILL.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fake_embeddings import TrigramEmbedder  # noqa: E402

#: The named kill points, in the order a write reaches them.
POINTS = (
    "embed",             # in the embedding, while a batch's vectors are computed
    "put",               # inside the source store's put transaction (rows written, not committed)
    "put.after",         # the pending record committed, nothing else done
    "delete.stale",      # the stale vectors of the older version half deleted
    "add",               # a batch's vectors half added
    "add.after",         # a batch's vectors added
    "complete",          # every vector of the batch added, the records not yet marked complete
    "complete.mid",      # inside the set_state('complete') transaction
    "deleting.after",    # a removed source marked 'deleting'
    "delete.remove",     # a removed source's vectors half deleted
    "remove",            # inside the remove transaction
    "keyword.commit",    # during the tantivy commit (a thread kills while it runs)
    "keyword.meta",      # tantivy wrote a commit's files (segments, .del files) but not its meta.json
    "keyword.state",     # tantivy committed, its state (generation) not yet recorded
)

#: Settings of every index the crash tests build (small chunks: several batches per write).
INDEX_SETTINGS = dict(chunk_size=24, batch_size=8, show_progress=False)
EMBED_DIM = 32


def corpus(version: int) -> list[Any]:
    """The documents of a version of the crash corpus: sources come and go between
    versions (removals), some keep their text (unchanged), others change (replacements
    with a different number of chunks, so stale vectors exist)."""
    from langchain_core.documents import Document

    vocab = [f"w{i}" for i in range(300)]
    docs = []
    for d in range(10):
        if (d + version) % 4 == 0:
            continue  # absent from this version
        edition = (version + d) // 3 if d % 2 else 0  # odd sources change every few versions
        rng = random.Random(d * 1000 + edition)
        words = 60 + 25 * ((d + edition) % 4)
        text = (f"Doc{d} edition {edition}. " + ". ".join(" ".join(rng.choice(vocab) for _ in range(9))
                                                          for _ in range(words // 9)) + f". End of doc{d}.")
        docs.append(Document(page_content=text, metadata={"source": f"doc{d}.txt", "edition": edition}))
    return docs


def open_index(path: str | os.PathLike, store: str) -> Any:
    """The crash tests' index at ``path`` (the fake trigram embedding, small chunks)."""
    from swrag_integrations.engine.engine import IndexEngine

    kw = {} if store == "chroma" else {"storage": store}
    return IndexEngine.open(path, embedding=TrigramEmbedder(EMBED_DIM), **INDEX_SETTINGS, **kw)


def index_contents(index: Any) -> dict[str, Any]:
    """Everything an index holds, to compare with a clean build: per source its state,
    content hash, id span, metadata, text, chunk offsets and windows; per vector its text,
    metadata and vector (rounded to 5 decimals: equal within float tolerance); the
    keyword index's chunk ids (a store's own keyword search covers its vectors)."""
    import numpy as np

    records = {}
    heads = index.store.heads()
    for sid, rec in index.store.get_many(sorted(heads)).items():
        records[sid] = dict(state=rec.state, content_hash=rec.content_hash, id_span=rec.id_span,
                            n_chunks=rec.n_chunks, metadata=rec.metadata, text=rec.text,
                            offsets=np.asarray(rec.arrays).tolist(),
                            windows=None if rec.windows is None else np.asarray(rec.windows).tolist(),
                            chunks=[rec.chunk_text(i) for i in range(rec.n_chunks)])
    vectors = index.vectors
    if vectors.kind == "Milvus":
        rows = [(str(r["id"]), r["text"], r.get("metadata") or {}, r["vector"]) for r in vectors.rows()]
    else:
        got = vectors.collection.get(include=["embeddings", "documents", "metadatas"])
        rows = list(zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"]))
    def own(meta: dict[str, Any]) -> dict[str, Any]:
        # each index has its own random id: same index, not the same id as another build's
        meta = dict(meta)
        meta["swrag_index"] = meta.get("swrag_index") == index.index_id
        return meta

    stored = {vid: (text, own(meta), np.round(np.asarray(vec, dtype=np.float64), 5).tolist())
              for vid, text, meta, vec in rows}
    keyword = sorted(index.keyword.bm25.ids) if hasattr(index.keyword, "bm25") else sorted(stored)
    return {"records": records, "vectors": stored, "keyword": keyword}


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Where two :func:`index_contents` differ, one line each (empty when equal)."""
    out = []
    for part in ("records", "vectors"):
        for key in sorted(set(got[part]) | set(want[part])):
            if key not in got[part]:
                out.append(f"{part}: {key} missing")
            elif key not in want[part]:
                out.append(f"{part}: {key} extra")
            elif got[part][key] != want[part][key]:
                if part == "records":
                    fields = [f for f in want[part][key] if got[part][key].get(f) != want[part][key][f]]
                else:
                    fields = [f for f, a, b in zip(("text", "metadata", "vector"), got[part][key], want[part][key])
                              if a != b]
                out.append(f"{part}: {key} differs in {', '.join(fields)}")
    if got["keyword"] != want["keyword"]:
        out.append(f"keyword ids: {len(set(got['keyword']) - set(want['keyword']))} extra, "
                   f"{len(set(want['keyword']) - set(got['keyword']))} missing")
    return out


class Killer:
    """Counts hook events and kills this process at the chosen one."""

    def __init__(self, spec: str | None, exclude: set[str] | None = None) -> None:
        self.exclude = exclude or set()  # points that are neither counted nor killed at
        self.events = 0
        self.points: dict[str, int] = {}
        self.point, self.at = None, 0
        if spec:
            name, _, n = spec.rpartition(":")
            if name != "event" and name not in POINTS:
                raise SystemExit(f"--kill: unknown point {name!r}; known: event, {', '.join(POINTS)}")
            self.point, self.at = name, int(n)

    def hit(self, point: str) -> bool:
        """Record that ``point`` was reached; True when this is where to die."""
        if point in self.exclude:
            return False
        self.events += 1
        self.points[point] = self.points.get(point, 0) + 1
        if self.point == "event":
            return self.events == self.at
        return self.point == point and self.points[point] == self.at

    def reach(self, point: str) -> None:
        if self.hit(point):
            die()


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _caller(depth: int = 2) -> str:
    return sys._getframe(depth).f_code.co_name


def install(killer: Killer) -> None:
    """Wrap the library's write steps so each reaches its kill point (this process only)."""
    from swrag_integrations.keyword import tantivy as bm25_tantivy
    from swrag_integrations.stores import chroma as chroma
    from swrag_integrations.stores import milvus as milvus
    from swrag_integrations.stores import sources as sources

    store_cls = sources.SqliteSourceStore
    in_txn: list[str] = []  # the store method whose transaction is open

    def around(cls: Any, name: str, wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        setattr(cls, name, wrapper(getattr(cls, name)))

    def embed(orig):
        def wrapped(self, texts):
            out = orig(self, texts)
            killer.reach("embed")
            return out
        return wrapped
    around(TrigramEmbedder, "embed_documents", embed)

    def transaction(kind: str):
        def wrap(orig):
            def wrapped(self, *args, **kwargs):
                state = args[1] if kind == "set_state" and len(args) > 1 else kwargs.get("state")
                in_txn.append(f"{kind}:{state}" if kind == "set_state" else kind)
                try:
                    if kind == "set_state" and state == "complete":
                        killer.reach("complete")
                    out = orig(self, *args, **kwargs)
                finally:
                    in_txn.pop()
                if kind == "put":
                    killer.reach("put.after")
                elif kind == "set_state" and state == "deleting":
                    killer.reach("deleting.after")
                return out
            return wrapped
        return wrap
    for kind in ("put", "set_state", "remove"):
        around(store_cls, kind, transaction(kind))

    def log(orig):
        def wrapped(self, sids):
            out = orig(self, sids)  # the change-log rows are written: the transaction is about to commit
            where = in_txn[-1] if in_txn else ""
            if where == "put":
                killer.reach("put")
            elif where == "set_state:complete":
                killer.reach("complete.mid")
            elif where == "remove":
                killer.reach("remove")
            return out
        return wrapped
    around(store_cls, "_log", log)

    def vectors(cls: Any) -> None:
        def add(orig):
            def wrapped(self, chunks, ids):
                half = len(ids) // 2
                if half and killer.hit("add"):
                    orig(self, chunks[:half], ids[:half])
                    die()
                out = orig(self, chunks, ids)
                killer.reach("add.after")
                return out
            return wrapped

        def delete(orig):
            def wrapped(self, ids):
                point = "delete.remove" if _caller() == "_remove" else "delete.stale"
                ids = list(ids)
                half = len(ids) // 2
                if half and killer.hit(point):
                    orig(self, ids[:half])
                    die()
                return orig(self, ids)
            return wrapped
        around(cls, "add", add)
        around(cls, "delete", delete)
    vectors(chroma.ChromaStorage)
    vectors(milvus.MilvusStorage)

    tantivy_cls = bm25_tantivy.TantivyBM25Index

    def writing(orig):
        def wrapped(self):
            writer = orig(self)
            if not isinstance(writer, _Writer):
                writer = self._writer = _Writer(writer, killer, self._segments)
            return writer
        return wrapped
    around(tantivy_cls, "_writing", writing)

    def write_state(orig):
        def wrapped(self, generation):
            killer.reach("keyword.state")
            return orig(self, generation)
        return wrapped
    around(tantivy_cls, "_write_state", write_state)


class _Writer:
    """A tantivy writer whose commit may be interrupted: at ``keyword.commit`` a thread
    kills the process a moment after the commit started (in tantivy's native code); at
    ``keyword.meta`` the commit's files are left without its meta.json."""

    def __init__(self, writer: Any, killer: Killer, segments: Path) -> None:
        self._w, self._killer, self._segments = writer, killer, segments

    def commit(self) -> Any:
        if self._killer.hit("keyword.meta"):
            # the disk as a kill leaves it after tantivy wrote the commit's files and before it
            # replaced meta.json (the last step of a commit): the new files, the old meta.json
            meta = self._segments / "meta.json"
            before = meta.read_bytes() if meta.exists() else None
            self._w.commit()
            if before is None:
                meta.unlink()
            else:
                meta.write_bytes(before)
            die()
        if self._killer.hit("keyword.commit"):
            delay = random.Random(self._killer.events).uniform(0.0, 0.004)
            threading.Thread(target=lambda: (time.sleep(delay), die()), daemon=True).start()
            out = self._w.commit()
            self._w.wait_merging_threads()
            die()  # the commit outran the thread: die right after it, before the state is recorded
            return out
        return self._w.commit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._w, name)


def run(path: str | os.PathLike, store: str, op: str, version: int) -> None:
    """Open the index and do ``op`` (the hooks installed decide whether it dies)."""
    index = open_index(path, store)
    try:
        if op == "write":
            index.index_documents(corpus(version), prune="all")
        elif op in ("repair", "deep-repair"):
            index.repair(deep=op == "deep-repair")
        else:
            raise SystemExit(f"unknown operation {op!r}: write, repair or deep-repair")
    finally:
        index.close()


def pick(path: str, store: str, op: str, version: int, spec: str, killer: Killer) -> str:
    """Choose a kill that ``op`` surely reaches: a dry run on a copy of the index counts
    the hook events, then ``spec`` (``SEED:named[:AVOID,...]`` or ``SEED:event``) draws,
    seeded, a named point (one not in AVOID when there is one) at a random occurrence,
    or any event; ``""`` (no kill) when the operation reaches no step at all."""
    import shutil
    import tempfile

    seed, mode, *rest = spec.split(":")
    avoid = set(rest[0].split(",")) if rest and rest[0] else set()
    with tempfile.TemporaryDirectory(prefix="swrag-dry-run-") as scratch:
        copy = Path(scratch) / "index"
        if Path(path).exists():
            shutil.copytree(path, copy)
        run(copy, store, op, version)
    rng = random.Random(seed)
    if not killer.events:
        return ""  # nothing to do (no step reached): the operation runs whole
    if mode == "event":
        return f"event:{rng.randint(1, killer.events)}"
    seen = [p for p in POINTS if p in killer.points]
    point = rng.choice([p for p in seen if p not in avoid] or seen)
    return f"{point}:{rng.randint(1, killer.points[point])}"


def main(argv: list[str]) -> None:
    path, store, op = argv[0], argv[1], argv[2]
    version = int(argv[3]) if len(argv) > 3 and not argv[3].startswith("--") else 0
    spec = argv[argv.index("--kill") + 1] if "--kill" in argv else None
    exclude = set(argv[argv.index("--exclude") + 1].split(",")) if "--exclude" in argv else set()
    killer = Killer(None, exclude)
    install(killer)
    if "--pick" in argv:
        spec = pick(path, store, op, version, argv[argv.index("--pick") + 1], killer)
        print(f"kill {spec or 'none'}", flush=True)
    killer.__init__(spec, exclude)
    run(path, store, op, version)
    if "--count" in argv:
        print(json.dumps({"events": killer.events, "points": killer.points}))
    print("done")


#: What the fork server imports before it forks (everything a writer's run imports).
PRELOAD = ("swrag_integrations.engine.engine", "swrag_integrations.keyword.tantivy", "swrag_integrations.stores.chroma",
           "swrag_integrations.stores.milvus", "swrag_integrations.stores.sources", "langchain_core.documents",
           "chromadb", "numpy")


def _writer(request: dict[str, Any]) -> int:
    """In a forked child: stdout and stderr into the request's files, a deadline (SIGALRM,
    whose default action ends the process), then :func:`main`; returns the exit code."""
    for fd, name in ((1, "out"), (2, "err")):
        target = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = open(os.devnull)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(int(request["timeout"]))
    try:
        main(request["argv"])
        return 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def serve() -> None:
    """The fork server: one JSON request a line on stdin (``argv``, ``out``, ``err``,
    ``timeout``), one JSON reply a line on stdout: ``{"returncode": n}``, negative for the
    signal that ended the writer (as :mod:`subprocess` reports it)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:  # a fork copies only the forking thread
        raise SystemExit(f"kill_child --serve: the imports started threads {threading.enumerate()}; cannot fork")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_writer(request))
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


class Forks:
    """A running fork server (``python kill_child.py --serve``): :meth:`run` returns what
    :func:`subprocess.run` would for ``python kill_child.py ARGS`` with captured text output."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._proc: subprocess.Popen | None = None

    def run(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
        import tempfile

        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=self._env)
        with tempfile.TemporaryDirectory(prefix="swrag-writer-") as scratch:
            out, err = Path(scratch) / "out", Path(scratch) / "err"
            request = {"argv": list(argv), "out": str(out), "err": str(err), "timeout": max(1, int(timeout))}
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            reply = self._proc.stdout.readline()
            if not reply:
                raise RuntimeError(f"the kill_child fork server ended (exit {self._proc.wait()})")
            returncode = json.loads(reply)["returncode"]
            return subprocess.CompletedProcess(["kill_child.py", *argv], returncode,
                                               out.read_text() if out.exists() else "",
                                               err.read_text() if err.exists() else "")

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait(timeout=60)
            self._proc = None


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(sys.argv[1:])
