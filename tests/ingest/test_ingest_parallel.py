"""Parallel ingestion on one machine (workers=N): equal to a single-process build, resumable."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.engine.engine import IndexMismatchError
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.cli.app import build_parser
from swrag_integrations.cli.common import ingest_from_args
from swrag_integrations.ingest.workers import portable_embedding
from swrag_integrations.langchain.vectorstore import PrecomputedEmbeddings

ROOT = Path(__file__).resolve().parents[2]


class CountingFake(DeterministicFakeEmbedding):
    """A picklable fake that leaves a mark per process that embedded documents."""

    def embed_documents(self, texts):
        marks = os.environ.get("SWRAG_TEST_MARKS")
        if marks:
            Path(marks, f"{os.getpid()}").touch()
        return super().embed_documents(texts)


class WriterSideCounting(DeterministicFakeEmbedding):
    """A picklable fake that counts the calls made on this object, i.e. in the process that
    holds it (the workers embed with pickled copies, whose counts stay with them)."""

    queries: int = 0
    documents: int = 0

    def embed_query(self, text):
        self.queries += 1
        return super().embed_query(text)

    def embed_documents(self, texts):
        self.documents += 1
        return super().embed_documents(texts)


def mk(path, embedding=None, **kw):
    return SlidingWindowIndex(path, embedding=embedding or DeterministicFakeEmbedding(size=16), show_progress=False,
                              batch_size=kw.pop("batch_size", 32), **kw)


def corpus(n=14, seed=3):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(500)] + ["红楼梦", "西游记", "灯塔"]
    docs = [Document(page_content=f"Doc{d} " + " ".join(rng.choice(vocab) for _ in range(rng.randint(20, 700))),
                     metadata={"source": f"doc{d}.txt", "kind": "test"}) for d in range(n)]
    docs.append(Document(page_content="   ", metadata={"source": "blank.txt"}))  # empty: skipped
    return docs


def folder(tmp_path):
    root = tmp_path / "files"
    (root / "sub").mkdir(parents=True)
    rng = random.Random(7)
    for i in range(6):
        words = " ".join(f"term{rng.randrange(300)}" for _ in range(rng.randint(50, 600)))
        (root / ("sub" if i % 2 else ".") / f"f{i}.txt").write_text(f"File {i}. {words}\n", encoding="utf-8")
    (root / "rows.csv").write_text("city,export\n" + "".join(f"City{i},good{i}\n" for i in range(5)), encoding="utf-8")
    (root / "latin.txt").write_bytes("café ça va".encode("latin-1") * 30)  # skipped: not UTF-8
    (root / "empty.md").write_text("", encoding="utf-8")
    return root


def state(idx):
    """Everything observable: source records (offsets, windows, states), vectors, BM25 ids."""
    heads = idx.engine.store.heads()
    records = idx.engine.store.get_many(sorted(heads))
    sources = {sid: (h.content_hash, h.state, h.n_chunks, rec.arrays.tolist(), rec.windows.tolist(), rec.text,
                     sorted(rec.metadata.items()))
               for sid, h in heads.items() for rec in [records[sid]]}
    got = idx.engine.vectors.collection.get(include=["embeddings", "metadatas", "documents"])
    vectors = {vid: (np.asarray(vec, dtype=np.float64), doc, sorted(meta.items()))
               for vid, vec, doc, meta in zip(got["ids"], got["embeddings"], got["documents"], got["metadatas"])}
    return sources, vectors, sorted(idx.engine.keyword.bm25.ids)


def assert_same(a, b, tol=1e-5):
    sa, va, ba = state(a)
    sb, vb, bb = state(b)
    assert sa == sb
    assert ba == bb and len(ba) == sum(s[2] for s in sa.values())
    assert set(va) == set(vb) and len(va) == len(ba)
    worst = 0.0
    for vid, (vec, doc, meta) in va.items():
        other = vb[vid]
        assert (doc, [m for m in meta if m[0] != "swrag_index"]) == (other[1], [m for m in other[2]
                                                                               if m[0] != "swrag_index"])
        worst = max(worst, float(np.abs(vec - other[0]).max()))
    assert worst <= tol, worst


def test_precomputed_embeddings_serve_primed_vectors_once_and_fall_back():
    base = DeterministicFakeEmbedding(size=4)
    pre = PrecomputedEmbeddings(base)
    pre.prime(["a", "b"], [[1, 0, 0, 0], [0, 1, 0, 0]])
    assert pre.embed_documents(["b", "c", "a", "a"]) == [[0.0, 1.0, 0.0, 0.0], base.embed_documents(["c"])[0],
                                                         [1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
    assert pre.served == 3
    assert pre.embed_documents(["a"]) == base.embed_documents(["a"])  # served once, then the base embeds
    assert pre.embed_query("q") == base.embed_query("q")
    with pytest.raises(ValueError, match="2 texts and 1 vectors"):
        pre.prime(["x", "y"], [[0, 0, 0, 1]])
    assert PrecomputedEmbeddings(pre).base is base  # never nested


def test_the_bundled_minilm_travels_to_workers_without_its_model():
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

    emb = MiniLMEmbeddings(batch_size=7, max_seq_length=128)
    spec = portable_embedding(PrecomputedEmbeddings(emb))
    rebuilt = spec()
    assert type(rebuilt) is MiniLMEmbeddings and rebuilt is not emb
    assert (rebuilt.model_path, rebuilt.batch_size, rebuilt.max_seq_length) == (emb.model_path, 7, 128)
    assert rebuilt._model is None  # loaded in the worker, once
    fake = DeterministicFakeEmbedding(size=8)
    assert portable_embedding(fake) is fake


def test_workers_build_equals_a_single_process_build(tmp_path):
    docs = corpus()
    single = mk(tmp_path / "single")
    one = single.engine.index_documents(docs)
    marks = tmp_path / "marks"
    marks.mkdir()
    os.environ["SWRAG_TEST_MARKS"] = str(marks)
    try:
        par = mk(tmp_path / "par", embedding=CountingFake(size=16))
        report = par.engine.index_documents(docs, workers=2)
    finally:
        del os.environ["SWRAG_TEST_MARKS"]
    assert report.as_dict() == one.as_dict() and report.ids == one.ids
    assert report.added == len(docs) - 1 and report.skipped_empty == 1 and not report.notes
    embedded_in = {int(p.name) for p in marks.iterdir()}
    assert embedded_in and os.getpid() not in embedded_in  # the chunks were embedded in the workers
    assert par.engine.vectors.precomputed.served == report.chunks  # ... and written as they came
    assert_same(single, par, tol=0.0)
    # idempotent: nothing is embedded again; a changed document is replaced like in one process
    assert par.engine.index_documents(docs, workers=2).unchanged == len(docs) - 1
    changed = docs[:3] + [Document(page_content=docs[3].page_content[:200] + " changed",
                                   metadata=docs[3].metadata)]
    r1, r2 = single.engine.index_documents(changed, prune="all"), par.engine.index_documents(changed, workers=2, prune="all")
    assert r1.as_dict() == r2.as_dict() and r2.replaced == 1 and r2.removed == len(docs) - 5
    assert_same(single, par, tol=0.0)


def test_the_writer_does_not_embed_when_the_workers_do(tmp_path):
    """The writer's embedding check takes the dimension a worker measured: with the bundled
    MiniLM, embedding one query in the writer loaded a third copy of the model (torch
    import + load: seconds of CPU and ~0.5 GB) competing with the workers for the cores."""
    emb = WriterSideCounting(size=16)
    par = mk(tmp_path / "par", embedding=emb)
    report = par.engine.index_documents(corpus(), workers=2)
    assert report.added == len(corpus()) - 1 and par.engine.vectors.precomputed.served == report.chunks
    assert (emb.queries, emb.documents) == (0, 0)  # nothing embedded in the writer's process
    assert par.engine.manifest["embedding"]["dim"] == 16  # ... and the dimension is recorded
    other = mk(tmp_path / "par", embedding=WriterSideCounting(size=8))
    with pytest.raises(IndexMismatchError, match="16-dimensional"):  # the check still refuses another one
        other.engine.index_documents(corpus(seed=5), workers=2)
    with pytest.raises(ValueError, match="dim must be a positive int"):
        other.engine.check_embedding(dim=0)


def test_the_writer_starts_the_next_records_vectors_before_it_waits_for_the_last_of_a_batch(tmp_path):
    """With vectors computed elsewhere, the writer takes the next batch once no more than
    ``lookahead`` chunks of the current one are left: before, it took it only after the
    whole batch was written, so at each boundary between large records the workers ran
    dry (one idle while the other computed the last vectors of the record)."""
    from swrag_integrations.engine.records import plan_source
    from swrag_integrations.ingest.writer import write_planned

    emb = DeterministicFakeEmbedding(size=16)
    idx = mk(tmp_path / "i", embedding=emb, batch_size=8)
    docs = [Document(page_content=" ".join(f"w{d}x{i}." for i in range(400)), metadata={"source": f"d{d}.txt"})
            for d in range(3)]
    records = [plan_source(doc, idx.engine.config) for doc in docs]
    assert all(rec.n_chunks > 40 for rec in records)
    log = []

    class Rows:  # the vectors of a record, as the workers' queue hands them out
        def __init__(self, rec):
            self.rec = rec
            log.append(("asked", rec.source_id))

        def __getitem__(self, item):
            log.append(("read", self.rec.source_id, item.stop))
            return np.asarray(emb.embed_documents([self.rec.chunk_text(i) for i in range(item.start, item.stop)]))

    report = write_planned(idx, [(rec, Rows) for rec in records], lookahead=16)
    assert report.added == 3 and idx.engine.vectors.precomputed.served == report.chunks == sum(r.n_chunks for r in records)
    for first, second in zip(records, records[1:]):
        asked = log.index(("asked", second.source_id))
        reads = [i for i, entry in enumerate(log) if entry[0] == "read" and entry[1] == first.source_id]
        assert reads[0] < asked < reads[-1]  # asked for while the first record's last vectors were awaited
        assert sum(1 for i in reads if i > asked) <= 16 // 8  # ... within the last `lookahead` chunks
    single = mk(tmp_path / "single", embedding=emb, batch_size=8)
    single.engine.index_documents(docs)
    assert_same(single, idx, tol=0.0)
    # an error in a later record still surfaces after the batch before it is complete
    bad = write_planned  # a repeated source: refused when it is reached
    with pytest.raises(ValueError, match="appears twice"):
        bad(mk(tmp_path / "j", embedding=emb, batch_size=8), [(records[0], Rows), (records[0], Rows)], lookahead=16)
    assert not mk(tmp_path / "j", embedding=emb, batch_size=8).engine.status().incomplete


def test_workers_add_files_equals_add_files_and_mirrors_the_folder(tmp_path):
    root = folder(tmp_path)
    single, par = mk(tmp_path / "single"), mk(tmp_path / "par")
    with pytest.warns(UserWarning, match="latin.txt"):
        one = single.add_files(root)
    with pytest.warns(UserWarning, match="latin.txt"):
        two = par.add_files(root, workers=2)
    assert two.as_dict() == one.as_dict() and sorted(two.ids) == sorted(one.ids)
    assert two.skipped_files == one.skipped_files and len(two.skipped_files) == 1
    assert_same(single, par, tol=0.0)
    (root / "f2.txt").unlink()
    (root / "rows.csv").write_text("city,export\nCity0,good0\n", encoding="utf-8")
    with pytest.warns(UserWarning):
        one = single.add_files(root)
    with pytest.warns(UserWarning):
        two = par.add_files(root, workers=2)
    assert two.as_dict() == one.as_dict() and two.removed == 5
    assert_same(single, par, tol=0.0)


def test_a_store_without_precomputed_embeddings_gets_planned_records_and_embeds_itself(tmp_path):
    from langchain_core.vectorstores import InMemoryVectorStore

    emb = DeterministicFakeEmbedding(size=16)
    docs = corpus(6)
    stores = [InMemoryVectorStore(emb), InMemoryVectorStore(emb)]
    a = SlidingWindowIndex(vectorstore=stores[0], source_store=str(tmp_path / "a.sqlite3"), show_progress=False)
    b = SlidingWindowIndex(vectorstore=stores[1], source_store=str(tmp_path / "b.sqlite3"), show_progress=False)
    one, two = a.engine.index_documents(docs), b.engine.index_documents(docs, workers=2)
    assert one.as_dict() == two.as_dict()
    assert any("workers only loaded and planned" in n for n in two.notes)
    assert sorted(stores[0].store) == sorted(stores[1].store)
    assert sorted(a.engine.keyword.bm25.ids) == sorted(b.engine.keyword.bm25.ids)


def test_bad_arguments_are_refused(tmp_path):
    idx = mk(tmp_path)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            idx.engine.index_documents(corpus(2), workers=bad)
    with pytest.raises(ValueError, match="no indexable files"):
        (tmp_path / "nothing").mkdir()
        idx.add_files(tmp_path / "nothing", workers=2)


def test_cli_pieces_run_the_workers_path(tmp_path):
    root = folder(tmp_path)
    parser = build_parser()  # swrag's own options for `index`
    args = parser.parse_args(["index", str(root), "--workers", "2", "--encoding", "latin-1"])
    idx = mk(tmp_path / "store")
    report = ingest_from_args(idx, args)
    assert report.added == 12 and not report.skipped_files  # latin-1 decodes every file (empty.md: nothing)
    with pytest.raises(SystemExit):  # argparse refuses it: "--workers must be >= 1"
        parser.parse_args(["index", str(root), "--workers", "0"])
    with pytest.raises(ValueError, match="--workers"):  # and so does the function, for a namespace built by hand
        ingest_from_args(idx, argparse.Namespace(**dict(vars(args), workers=0)))


KILLED = textwrap.dedent("""
    import os, sys
    sys.path[:0] = [sys.argv[3], os.path.dirname(sys.argv[3])]
    from test_ingest_parallel import corpus, Killer
    from swrag_integrations.langchain.index import SlidingWindowIndex

    if __name__ == "__main__":
        os.environ["SWRAG_KILL_PID"] = str(os.getpid())
        idx = SlidingWindowIndex(sys.argv[1], embedding=Killer(size=16), show_progress=False, batch_size=32)
        idx.index_documents(corpus(int(sys.argv[2])), workers=2)
        print("finished")
""")


class Killer(DeterministicFakeEmbedding):
    """In a worker: after SWRAG_KILL_AFTER embedding calls, kill -9 the writer (SWRAG_KILL_PID) or this
    worker itself, once (a marker file makes sure only one worker kills)."""

    def embed_documents(self, texts):
        if os.environ.get("SWRAG_KILL_PID"):
            left = int(os.environ["SWRAG_KILL_AFTER"])
            os.environ["SWRAG_KILL_AFTER"] = str(left - 1)
            if left <= 0:
                try:
                    os.close(os.open(os.environ["SWRAG_KILL_MARK"], os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    pass
                else:
                    writer = os.environ["SWRAG_KILL"] == "writer"
                    os.kill(int(os.environ["SWRAG_KILL_PID"]) if writer else os.getpid(), signal.SIGKILL)
        return super().embed_documents(texts)


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.integration
@pytest.mark.parametrize("victim,after", [("writer", 2), ("writer", 6), ("worker", 3)])
def test_a_killed_parallel_run_is_completed_by_the_next_run(tmp_path, victim, after):
    docs = corpus(16)
    clean = mk(tmp_path / "clean")
    clean.engine.index_documents(docs)
    path = tmp_path / "crashed"
    env = dict(os.environ, PYTHONPATH=str(ROOT), SWRAG_KILL_AFTER=str(after), SWRAG_KILL=victim,
               SWRAG_KILL_MARK=str(tmp_path / "killed"))
    log_out, log_err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(log_out, "w") as out_file, open(log_err, "w") as err_file:
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path), "16", str(Path(__file__).resolve().parent)],
                                stdout=out_file, stderr=err_file, env=env, start_new_session=True)
    try:
        proc.wait(timeout=600)
        # the workers of a killed writer notice and exit by themselves
        deadline = time.time() + 30
        while time.time() < deadline and _group_alive(proc.pid):
            time.sleep(0.5)
        assert not _group_alive(proc.pid), "worker processes outlived their writer"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out, err = log_out.read_text(), log_err.read_text()
    assert "finished" not in out, err[-2000:]
    if victim == "writer":
        assert proc.returncode == -signal.SIGKILL, err[-2000:]
    else:
        assert proc.returncode != 0 and ("BrokenProcessPool" in err or "terminated abruptly" in err), err[-2000:]
    survivor = mk(path)
    served = set(survivor.engine.source_ids())
    assert len(served) < len(docs) - 1  # it really died half-way
    assert len(survivor.engine.keyword) == survivor.engine.count("small")
    report = survivor.engine.index_documents(docs, workers=2)
    assert report.added + report.replaced + report.unchanged == len(docs) - 1
    assert not survivor.engine.status().incomplete
    assert_same(clean, survivor, tol=0.0)


@pytest.mark.slow
def test_workers_with_the_real_minilm_equal_one_process(tmp_path):
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

    root = tmp_path / "files"
    root.mkdir()
    rng = random.Random(1)
    words = "lighthouse keeper fog signal harbour copper export island ferry storm tide".split()
    for i in range(4):
        (root / f"f{i}.txt").write_text(" ".join(rng.choice(words) for _ in range(300 + 40 * i)) + ".")
    single = mk(tmp_path / "single", embedding=MiniLMEmbeddings())
    par = mk(tmp_path / "par", embedding=MiniLMEmbeddings())
    single.add_files(root)
    report = par.add_files(root, workers=2)
    assert report.added == 4 and par.engine.vectors.precomputed.served == report.chunks > 0
    assert par.engine.vectors.precomputed.base._model is None  # the writer never loaded the model
    assert_same(single, par, tol=1e-5)
