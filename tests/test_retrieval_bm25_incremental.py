"""Incremental keyword writes (issue 28, item 2): the keyword side of a local index is
SQLite tables written in proportion to a change, ranks as the bm25s snapshot did, is
crash-safe with the source store's change log, and migrates an older snapshot."""

import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.retrieval import SlidingWindowIndex
from swrag_integrations.retrieval.bm25 import BM25Index, SqliteBM25Index
from swrag_integrations.retrieval.keyword import BLOB_NAME

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = (ROOT / "swrag_integrations" / "data" / "sample.md").read_text(encoding="utf-8")


def mk(path, **kw):
    return SlidingWindowIndex(path, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, **kw)


def source_docs(n, start=0, words=60):
    """``n`` sources of sample sentences, each with a word of its own."""
    sentences = [s for s in re.split(r"(?<=[.!?。！？])\s*", SAMPLE) if s.strip()]
    return [Document(page_content=f"Marker{i} " + " ".join(sentences[(i * 3 + j) % len(sentences)] for j in range(6)),
                     metadata={"source": f"doc{i}.txt", "topic": "odd" if i % 2 else "even"})
            for i in range(start, start + n)]


def sample_chunks(lang):
    """Small English or Chinese corpora: the bundled sample's paragraphs cut in pieces."""
    han = re.compile(r"[\u4e00-\u9fff]")
    paras = [p for p in SAMPLE.split("\n\n") if p.strip() and bool(han.search(p)) == (lang == "zh")]
    size = 20 if lang == "zh" else 160
    chunks = [p[i:i + size] for p in paras for i in range(0, len(p), size)]
    return [f"{lang}{i}:s:0" for i in range(len(chunks))], chunks


def wal_bytes(path):
    """Bytes in the write-ahead log of the SQLite file ``path`` (what was written since the last truncation)."""
    wal = Path(str(path) + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def truncate_wal(path):
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # nobody held it up
    finally:
        con.close()


# ------------------------------------------------------------------ writes in proportion


def _write_cost(tmp_path, name, n_sources):
    """Bytes written to the source store's file by adding, then by deleting, one source."""
    idx = mk(tmp_path / name)
    idx.add_documents(source_docs(n_sources))
    path = idx.store.path
    truncate_wal(path)
    ids = idx.add_documents(source_docs(1, start=10_000))
    added = wal_bytes(path)
    truncate_wal(path)
    idx.delete(ids)
    deleted = wal_bytes(path)
    return added, deleted, idx


def test_adding_or_deleting_one_source_writes_in_proportion_to_that_source(tmp_path):
    small_add, small_del, small = _write_cost(tmp_path, "small", 4)
    big_add, big_del, big = _write_cost(tmp_path, "big", 120)
    assert len(big.keyword) > 20 * len(small.keyword) / 2
    # the same one-source change costs about the same at 4 and at 120 sources (the bm25s
    # snapshot rewrote the whole keyword index, ~30x more at 120 sources)
    page = 4096
    print("bytes written: add", small_add, big_add, "delete", small_del, big_del)
    assert big_add <= 1.5 * small_add + 8 * page, (small_add, big_add)
    assert big_del <= 1.5 * small_del + 8 * page, (small_del, big_del)
    assert big.keyword.incremental and big.store.get_blob(BLOB_NAME) is None


def test_keyword_rows_touched_are_the_sources_own(tmp_path):
    idx = mk(tmp_path / "s")
    idx.add_documents(source_docs(30))
    con = sqlite3.connect(idx.store.path)
    rows_before = dict(con.execute("SELECT id, row FROM bm25_docs"))
    idx.add_documents(source_docs(1, start=500))
    rows_after = dict(con.execute("SELECT id, row FROM bm25_docs"))
    # every earlier chunk keeps its row; only the new source's chunks are new rows
    assert {k: rows_after[k] for k in rows_before} == rows_before
    new = set(rows_after) - set(rows_before)
    assert new and len({cid.split(":")[0] for cid in new}) == 1
    con.close()


# ------------------------------------------------------------------ ranking


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ranking_equals_the_bm25s_snapshot_within_ties(tmp_path, lang):
    ids, texts = sample_chunks(lang)
    assert len(ids) >= 8
    old = BM25Index()
    old.upsert(ids, texts)
    new = SqliteBM25Index(tmp_path / "k.sqlite")
    new.create()
    new.upsert(ids, texts)
    words = sorted({t for text in texts for t in old.tokenize(text)})
    queries = [" ".join(words[i::7][:4]) for i in range(7)] + [texts[3][5:30], texts[-1][:20], "lighthouse 灯塔"]
    compared = 0
    for query in queries:
        for k in (3, len(ids)):
            a, b = old.search(query, k), new.search(query, k)
            assert [round(s, 4) for _, s in a] == [round(s, 4) for _, s in b], query
            # equal scores may come in another order (float32 in bm25s): compare as sets per score
            groups = {}
            for (ida, sa), (idb, _) in zip(a, b):
                groups.setdefault(round(sa, 4), [set(), set()])
                groups[round(sa, 4)][0].add(ida)
                groups[round(sa, 4)][1].add(idb)
            if k == len(ids):
                assert all(x == y for x, y in groups.values()), query
            compared += len(a)
    assert compared > 20


def test_replace_and_delete_keep_scores_equal(tmp_path):
    ids, texts = sample_chunks("en")
    old, new = BM25Index(), SqliteBM25Index(tmp_path / "k.sqlite")
    new.create()
    for index in (old, new):
        index.upsert(ids, texts)
        index.upsert(ids[:3], ["lighthouse keeper " * 3, "granite tower", "puffin colony cliffs"])
        index.delete(ids[5:8])
    assert len(new) == len(old) and sorted(new.ids) == sorted(old.ids)
    for query in ("lighthouse keeper", "granite tower puffin", "paraffin lamp"):
        assert [(i, round(s, 5)) for i, s in old.search(query, 5)] == [(i, round(s, 5)) for i, s in new.search(query, 5)]


# ------------------------------------------------------------------ filters, reopen


def test_filters_still_apply_to_keyword_hits(tmp_path):
    idx = mk(tmp_path / "f")
    idx.add_documents(source_docs(12))
    hits = idx.bm25_search("lighthouse granite keeper", 10, filter={"topic": "odd"})
    assert hits
    for cid, _ in hits:
        meta = idx.store.get_many([cid.split(":")[0]])[cid.split(":")[0]].metadata
        assert meta["topic"] == "odd"
    # the filtered top k is the best k among the allowed chunks
    every = idx.bm25_search("lighthouse granite keeper", 1000)
    allowed = [(c, s) for c, s in every if idx.store.get_many([c.split(":")[0]])[c.split(":")[0]].metadata["topic"] == "odd"]
    assert [round(s, 6) for _, s in hits] == [round(s, 6) for _, s in allowed[:10]]


def test_reopen_serves_the_same_and_keeps_writing(tmp_path):
    path = tmp_path / "r"
    idx = mk(path)
    idx.add_documents(source_docs(6))
    first = idx.bm25_search("Marker3 lighthouse", 5)
    del idx
    again = mk(path)
    assert again.keyword.incremental and not again.keyword.rebuilt
    assert again.bm25_search("Marker3 lighthouse", 5) == first
    again.add_documents(source_docs(1, start=77))
    assert again.bm25_search("Marker77", 1)[0][0].split(":")[0] in again.source_ids()
    assert len(again.keyword) == again.count("small") and again.status().healthy
    assert again.keyword.check() == []


# ------------------------------------------------------------------ crash


KILLED = textwrap.dedent("""
    import os, sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    sys.path.insert(0, sys.argv[2])
    from test_retrieval_bm25_incremental import source_docs
    from swrag_integrations.retrieval import SlidingWindowIndex
    from swrag_integrations.retrieval import keyword

    original = keyword.KeywordIndex._apply

    def apply_then_die(self, *args, **kwargs):
        original(self, *args, **kwargs)   # the keyword rows are written, not committed
        if os.environ.get("SWRAG_ARMED"):
            os.kill(os.getpid(), 9)

    keyword.KeywordIndex._apply = apply_then_die
    idx = SlidingWindowIndex(sys.argv[1], embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    os.environ["SWRAG_ARMED"] = "1"
    idx.add_documents(source_docs(2, start=900))
""")


def test_a_crash_between_the_keyword_write_and_its_commit_is_recovered(tmp_path):
    path = tmp_path / "c"
    idx = mk(path)
    idx.add_documents(source_docs(5))
    generation = idx.keyword.bm25.generation
    del idx
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path), str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    survivor = mk(path)
    store_generation = survivor.store.generation()
    assert store_generation > generation
    assert survivor.keyword.bm25.generation == store_generation  # caught up from the change log on open
    assert not survivor.keyword.rebuilt
    complete = {s for s, h in survivor.store.heads().items() if h.state == "complete"}
    assert {cid.split(":")[0] for cid in survivor.keyword.bm25.ids} == complete
    assert len(survivor.keyword) == survivor.count("small")
    assert survivor.keyword.check() == []
    survivor.add_documents(source_docs(2, start=900))
    assert survivor.bm25_search("Marker901", 1)[0][0].split(":")[0] in survivor.source_ids()
    assert survivor.status().healthy


# ------------------------------------------------------------------ migration


def test_an_older_snapshot_is_migrated_on_first_open(tmp_path, caplog):
    path = tmp_path / "m"
    idx = mk(path)
    idx.add_documents(source_docs(8))
    expected = {q: idx.bm25_search(q, 6) for q in ("lighthouse keeper", "Marker5 granite", "灯塔")}
    ids = sorted(idx.keyword.bm25.ids)
    # make it an index of the previous version: the bm25s snapshot blob, no keyword tables
    kw = idx.keyword
    kw.incremental, kw.bm25, kw.generation = False, BM25Index(), -1
    kw.refresh()
    kw.save()
    assert idx.store.get_blob(BLOB_NAME) is not None
    con = sqlite3.connect(idx.store.path)
    for table in ("bm25_fts", "bm25_docs", "bm25_vocab", "bm25_meta"):
        con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    del idx, kw
    with caplog.at_level(logging.WARNING, logger="swrag_integrations.retrieval.keyword"):
        again = mk(path)
    assert any("migrating the keyword index" in r.getMessage() for r in caplog.records)
    assert again.keyword.incremental and not again.keyword.rebuilt
    assert sorted(again.keyword.bm25.ids) == ids
    assert again.keyword.bm25.generation == again.store.generation()
    for query, hits in expected.items():
        assert [(c, round(s, 6)) for c, s in again.bm25_search(query, 6)] == [(c, round(s, 6)) for c, s in hits]
    again.add_documents(source_docs(1, start=40))  # the next write drops the migrated snapshot
    assert again.store.get_blob(BLOB_NAME) is None
    assert again.status().healthy
