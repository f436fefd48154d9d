"""The index on PostgreSQL + pgvector (stores/postgres.py): a real PostgreSQL 16 started by
``pgserver`` in a temporary folder (Unix socket only), one fresh database per test.

Covered: the store URI, add / re-add / replace / delete / reopen, keyword (BM25, Chinese)
and dense search with filters pushed down as SQL, writers of different sources in
parallel and of one source in series, fencing by epoch, kill -9 of a writer at several
points of its transaction, and a writer stalled (SIGSTOP) past its lease.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from fake_embeddings import TrigramEmbedder
from stores import postgres_database

pytestmark = pytest.mark.integration

pytest.importorskip("psycopg", reason="needs the [postgres] extra (psycopg, pgvector)")
pytest.importorskip("pgserver", reason="needs pgserver (the [test] extra) to start PostgreSQL")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def pg_uri():
    """A fresh, empty database's URI on this process's PostgreSQL (started by pgserver in a
    private temporary folder, Unix socket only: :func:`stores.postgres_database`)."""
    return postgres_database()


def open_engine(uri, **kw):
    from swrag_integrations.engine.engine import IndexEngine

    return IndexEngine.open(storage=uri, embedding=TrigramEmbedder(), show_progress=False, **kw)


TEXTS = ["The walrus sat on the ice and ate fish. It slept in the cold sun.",
         "北京大学是一所大学。The moon is bright over the old library.",
         "Fog rolled over the harbour lighthouse while ships waited outside."]
METAS = [{"topic": "sea", "n": 1}, {"topic": "town", "n": 2}, {"topic": "sea", "n": 3}]


def chunk_rows(engine):
    """``{source_id: {content_hash of its chunks}}`` and the number of chunk rows, read in SQL."""
    st = engine.store
    rows = st.conn.execute(st._sql("SELECT source_id, content_hash FROM {c}", c="chunks")).fetchall()
    out: dict[str, set] = {}
    for sid, h in rows:
        out.setdefault(sid, set()).add(h)
    return out, len(rows)


# ---------------------------------------------------------------------------- the URI


def test_store_uri_forms():
    from swrag_integrations.stores.store_uri import parse_store_uri

    for uri in ("postgresql://me@db.example:5432/rag", "postgresql:///rag?host=/run/postgresql",
                "postgres://me@localhost/rag"):
        spec = parse_store_uri(uri)
        assert spec.kind == "postgres" and spec.text == uri


@pytest.mark.parametrize("uri", ["postgresql://me:secret@db.example/rag",
                                 "postgresql:///rag?host=/tmp&password=secret"])
def test_store_uri_with_password_is_refused(uri):
    from swrag_integrations.stores.store_uri import parse_store_uri

    with pytest.raises(ValueError) as err:
        parse_store_uri(uri)
    assert "PGPASSWORD" in str(err.value) and "secret" not in str(err.value)
    assert "\n" not in str(err.value)


def test_table_names_are_identifiers_of_the_collection():
    from swrag_integrations.stores.postgres import table_prefix

    assert table_prefix("my.index-1") == "swrag_my.index-1"
    long_a, long_b = "a" * 100 + "x", "a" * 100 + "y"
    assert table_prefix(long_a) != table_prefix(long_b)
    assert len(table_prefix(long_a).encode()) + len("_sources") <= 63


# ---------------------------------------------------------------------------- index behaviour


def test_add_readd_replace_delete_reopen(pg_uri):
    engine = open_engine(pg_uri, collection_name="notes")
    ids = engine.index_texts(TEXTS, METAS)
    assert engine.source_ids() == sorted(ids)
    assert engine.store.check() == []
    again = engine.index_documents([type("D", (), {"page_content": t, "metadata": m})() for t, m in zip(TEXTS, METAS)])
    assert again.unchanged == 3 and again.added == 0

    new_text = "The walrus left the ice. Seals came instead."
    engine.index_texts([new_text], [METAS[0]], ids=[ids[0]])
    sid = engine.resolve_ids([ids[0]])[0]
    assert engine.source_text(sid) == new_text
    hashes, n = chunk_rows(engine)
    assert hashes[sid] == {engine.store.heads([sid])[sid].content_hash}  # old version's chunks gone
    assert n == engine.count()
    assert engine.store.check() == []

    assert engine.delete([ids[1]]) == 1
    kept = engine.source_ids()
    assert len(kept) == 2 and engine.store.check() == []
    engine.close()

    reopened = open_engine(pg_uri, collection_name="notes")
    assert reopened.source_ids() == kept
    assert reopened.source_text(sid) == new_text
    assert reopened.manifest["store"] == pg_uri.replace("postgres:@", "postgres@")
    other = open_engine(pg_uri, collection_name="other")  # another collection: other tables
    assert other.source_ids() == []
    reopened.close()
    other.close()


def test_folder_remembers_the_database(pg_uri, tmp_path):
    engine = open_engine(pg_uri, collection_name="notes")
    engine.close()
    from swrag_integrations.engine.engine import IndexEngine

    first = IndexEngine.open(tmp_path / "idx", storage=pg_uri, embedding=TrigramEmbedder(), collection_name="notes")
    first.index_texts(TEXTS[:1])
    first.close()
    again = IndexEngine.open(tmp_path / "idx", embedding=TrigramEmbedder(), collection_name="notes")
    assert again.vectors.kind == "PostgreSQL" and len(again.source_ids()) == 1
    again.close()


def test_keyword_search_bm25_in_sql_chinese_included(pg_uri):
    engine = open_engine(pg_uri)
    ids = engine.index_texts(TEXTS, METAS)
    hits = engine.bm25_search("walrus fish", 3)
    assert [h.split(":")[0] for h, _ in hits] == [ids[0]]
    assert engine.bm25_search("大学", 3)[0][0].startswith(ids[1])
    # the scores are BM25's: a rarer term weighs more than a common one
    engine.index_texts(["fish fish market", "fish soup"], [{}, {}])
    walrus = dict(engine.bm25_search("walrus", 5))
    fish = dict(engine.bm25_search("fish", 5))
    assert max(walrus.values()) > max(fish.values()) > 0
    engine.close()


def test_keyword_scores_match_the_in_process_bm25_formula(pg_uri):
    """The SQL score is Lucene's BM25 (k1 1.2, b 0.75) over the package's tokens."""
    import math

    from swrag_integrations.keyword.bm25 import tokenize

    engine = open_engine(pg_uri)
    docs = ["apple banana apple", "banana cherry", "cherry cherry cherry date", "apple"]
    engine.index_texts(docs)
    got = {engine.source_text(c.split(":")[0]): s for c, s in engine.bm25_search("apple cherry", 4)}
    toks = [tokenize(d) for d in docs]
    avgdl = sum(map(len, toks)) / len(toks)

    def score(doc_tokens):
        total = 0.0
        for term in ("apple", "cherry"):
            df = sum(term in t for t in toks)
            tf = doc_tokens.count(term)
            idf = math.log(1 + (len(toks) - df + 0.5) / (df + 0.5))
            total += idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * len(doc_tokens) / avgdl)) if tf else 0.0
        return total

    want = {d: score(t) for d, t in zip(docs, toks) if score(t) > 0}
    assert set(got) == set(want)
    for d in want:
        assert got[d] == pytest.approx(want[d], rel=1e-6)
    engine.close()


def test_term_statistics_fold_without_changing_scores(pg_uri):
    engine = open_engine(pg_uri)
    ids = engine.index_texts(TEXTS + ["fish fish market", "fish soup"])
    engine.index_texts(["The walrus left."], ids=[ids[0]])  # deltas: the old version's terms taken off
    engine.delete([ids[-1]])
    before = engine.bm25_search("walrus fish soup market", 5)
    st = engine.store
    rows = st.conn.execute(st._sql("SELECT count(*) FROM {t}", t="terms")).fetchone()[0]
    left = st.compact_terms()
    assert left < rows
    terms = st.conn.execute(st._sql("SELECT term, count(*) FROM {t} GROUP BY term HAVING count(*) > 1",
                                    t="terms")).fetchall()
    assert terms == []  # one row per term
    after = engine.bm25_search("walrus fish soup market", 5)
    assert [c for c, _ in after] == [c for c, _ in before]
    assert [s for _, s in after] == pytest.approx([s for _, s in before])
    assert st.check() == []
    engine.close()


def test_keyword_top_k_skips_common_terms_and_stays_exact(pg_uri):
    """MaxScore: the top k equals scoring every chunk that holds any query term (same ids,
    scores and tie order, with and without a filter), while queries mixing rare and common
    terms read fewer candidates than all of them."""
    import random

    engine = open_engine(pg_uri)
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(400)]
    weights = [1 / (i + 1) for i in range(len(vocab))]  # Zipf: w0 in most chunks, w399 in few
    texts = [" ".join(rng.choices(vocab, weights, k=rng.randint(5, 30))) for _ in range(300)]
    engine.index_texts(texts, [{"part": i % 3} for i in range(len(texts))])
    st = engine.store
    calls: list[int] = []
    rows_of = st._bm25_rows

    def counting(candidates, terms, *args):
        calls.append(len(candidates) < len(terms))
        return rows_of(candidates, terms, *args)

    st._bm25_rows = counting
    from swrag_integrations.engine.filters import parse_filter

    native = st.native_filter(parse_filter({"part": 1}))
    pruned = 0
    for _ in range(40):
        query = " ".join(rng.sample(vocab[:5], 2) + rng.sample(vocab[100:], rng.randint(1, 3)))
        for k in (1, 5, 20):
            for flt in (None, native):
                calls.clear()
                got = st.keyword_search(query, k, native=flt)
                pruned += all(calls)
                from swrag_integrations.keyword.bm25 import tokenize

                terms = sorted(set(tokenize(query)))
                stats = dict((t, int(df)) for t, df, _ in st.conn.execute(st._sql(
                    "SELECT term, sum(df), sum(len) FROM {t} WHERE term = ANY(%s) GROUP BY term", t="terms"),
                    ([*terms, ""],)).fetchall())
                n, total = stats[""], st.conn.execute(st._sql("SELECT sum(len) FROM {t} WHERE term = ''",
                                                             t="terms")).fetchone()[0]
                import math

                idf = {t: math.log(1 + (n - stats.get(t, 0) + 0.5) / (stats.get(t, 0) + 0.5)) for t in terms}
                where, params = st._where(flt)
                with st.conn.transaction():
                    want = rows_of(terms, terms, idf, int(total) / n, where, params, k)
                assert [(d.id, sc) for d, sc in got] == [(r[2], pytest.approx(float(r[3]), rel=1e-9)) for r in want]
    assert pruned > 20  # most such queries never read the common terms' chunks
    engine.close()


def test_bulk_load_builds_the_search_indexes_at_its_end(pg_uri):
    engine = open_engine(pg_uri)
    engine.index_texts(TEXTS[:1])
    st = engine.store
    with st.bulk_load():
        assert sorted(st.missing_search_indexes()) == ["chunks_hnsw", "chunks_terms"]
        ids = engine.index_texts(TEXTS[1:])
        assert engine.bm25_search("harbour", 2)[0][0].split(":")[0] == ids[1]  # answered by scanning
    assert st.missing_search_indexes() == []
    assert engine.bm25_search("harbour lighthouse", 1)[0][0].split(":")[0] == ids[1]
    assert st.check() == []
    engine.close()


def test_an_interrupted_bulk_load_is_reported_and_repaired(pg_uri):
    engine = open_engine(pg_uri)
    engine.index_texts(TEXTS)
    st = engine.store
    st.conn.execute(st._sql("DROP INDEX {i}", i="chunks_hnsw"))  # what a bulk load killed inside leaves
    assert any("chunks_hnsw missing" in p for p in st.check())
    report = engine.repair()
    assert any("chunks_hnsw" in n for n in report.notes)
    assert st.missing_search_indexes() == [] and st.check() == []
    engine.close()


def test_private_postgres_is_private_and_creates_databases_by_identifier(tmp_path):
    import stat

    import psycopg

    from swrag_integrations.stores.private_postgres import PrivatePostgres

    with PrivatePostgres(tmp_path / "pg") as server:
        assert stat.S_IMODE((tmp_path / "pg").stat().st_mode) == 0o700
        uri = server.create_database('odd "name"; drop')
        with psycopg.connect(uri) as con:
            assert con.execute("SELECT current_database()").fetchone()[0] == 'odd "name"; drop'
            assert con.execute("SHOW listen_addresses").fetchone()[0] == ""  # no TCP port
            assert con.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone()
        with pytest.raises(ValueError, match="already exists"):
            server.create_database('odd "name"; drop')
        server.drop_database(uri)
        with psycopg.connect(server.uri()) as con:
            assert not con.execute("SELECT 1 FROM pg_database WHERE datname = %s", ('odd "name"; drop',)).fetchone()


FILTERS = [{"topic": "sea"}, {"n": {"$gte": 2}}, {"$or": [{"topic": "town"}, {"n": 3}]},
           {"topic": {"$in": ["town", "none"]}}, {"topic": {"$ne": "sea"}}]


@pytest.mark.parametrize("flt", FILTERS)
def test_filters_in_both_searches(pg_uri, flt):
    from swrag_integrations.engine.filters import parse_filter

    engine = open_engine(pg_uri)
    ids = engine.index_texts(TEXTS, METAS)
    parsed = parse_filter(flt)
    want = {sid for sid, m in zip(ids, METAS) if parsed.matches(m)}
    hits = engine.search_children("walrus harbour moon library fog", 10, filter=flt)
    assert {h.source_id for h in hits} == want
    bm25 = engine.bm25_search("walrus harbour moon library fog", 10, filter=flt)
    assert {c.split(":")[0] for c, _ in bm25} == want
    engine.close()


def test_a_selective_filter_finds_chunks_far_from_the_query(pg_uri):
    """HNSW filters after its graph search (ef_search candidates): a filter that passes
    none of them still gets the nearest chunks that pass, by an exact scan."""
    engine = open_engine(pg_uri)
    texts = [f"harbour lighthouse fog ships number {i}" for i in range(120)] + ["zebra quartz jukebox"]
    engine.index_texts(texts, [{"kind": "common"}] * 120 + [{"kind": "rare"}])
    engine.store.conn.execute("SET enable_seqscan = off")  # plan as on a large table: through HNSW
    hits = engine.dense_ids("harbour lighthouse fog ships", 1, search_type="similarity", filter={"kind": "rare"})
    assert [engine.source_text(h.split(":")[0]) for h in hits] == ["zebra quartz jukebox"]
    engine.close()


def test_filters_are_pushed_down_as_parameters():
    from swrag_integrations.engine.filters import parse_filter
    from swrag_integrations.stores.postgres import postgres_filter

    cond, params = postgres_filter(parse_filter({"topic": "x'); DROP TABLE t; --"}))
    assert "DROP" not in repr(cond) and any("DROP" in p for p in params)
    cond, params = postgres_filter(parse_filter({"topic": {"$nin": ["a", "b"]}}))
    assert "NOT" in repr(cond) and params == ['{"topic": "a"}', '{"topic": "b"}']


# ---------------------------------------------------------------------------- writers


def test_writers_of_different_sources_do_not_wait(pg_uri):
    a = open_engine(pg_uri)
    a.index_texts(TEXTS[:1])
    b = open_engine(pg_uri)
    with a.writing():  # A holds its lease (a global writer lock would stop B here)
        with a.store._transaction(["held-source"]):  # and is inside a transaction
            b.index_texts(TEXTS[1:2])
            assert len(b.source_ids()) == 2
    a.close()
    b.close()


def test_two_writers_of_one_source_serialise(pg_uri):
    a = open_engine(pg_uri)
    sid = a.resolve_ids(a.index_texts(TEXTS[:1]))[0]
    b = open_engine(pg_uri)
    done = threading.Event()

    def write_b():
        b.index_texts(["B's version of the walrus."], ids=[sid])
        done.set()

    with a.writing(), a.store._transaction([sid]):
        worker = threading.Thread(target=write_b)
        worker.start()
        assert not done.wait(1.0)  # B waits on the source's row while A's transaction is open
    worker.join(timeout=60)
    assert done.is_set() and b.source_text(sid) == "B's version of the walrus."
    a.close()
    b.close()


def test_live_writers_of_one_source_last_commit_wins(pg_uri):
    """Two live leases (no global lock): the older writer may still write a source the
    newer one wrote; the later commit wins, whole, and the fence row names its epoch."""
    a = open_engine(pg_uri)
    sid = a.resolve_ids(a.index_texts(TEXTS[:1]))[0]
    b = open_engine(pg_uri)
    with a.writing():  # A's lease first (the older epoch)
        b.index_texts(["B was here."], ids=[sid])
        a.index_texts(["A came later."], ids=[sid])
        st = a.store
        epoch = st.conn.execute(st._sql("SELECT epoch FROM {f} WHERE source_id = %s", f="fence"), (sid,)).fetchone()[0]
        assert epoch == st._lease.epoch
    assert b.source_text(sid) == "A came later." and a.store.check() == []
    a.close()
    b.close()


# ---------------------------------------------------------------------------- crashes and stalls

CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from fake_embeddings import TrigramEmbedder
    from swrag_integrations.engine.engine import IndexEngine
    from swrag_integrations.stores.postgres import PostgresStorage
    from swrag_integrations.stores.sources import LeaseLostError
    storage = PostgresStorage({uri!r}, "swrag", TrigramEmbedder(), lease_seconds={lease})
    engine = IndexEngine(storage, storage, show_progress=False)
    try:
        engine.index_texts({texts!r}, ids={ids!r})
    except LeaseLostError:
        sys.exit(3)
""")


def start_child(uri, texts, ids, flag, point, lease=60.0):
    env = {**os.environ, "SWRAG_PG_PAUSE_AT": point, "SWRAG_PG_PAUSE_FILE": str(flag),
           "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    code = CHILD.format(tests=str(REPO / "tests"), uri=uri, lease=lease, texts=texts, ids=ids)
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def wait_for(path, proc, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the writer exited ({proc.returncode}) before its pause"
        assert time.monotonic() < deadline, "the writer never reached its pause"
        time.sleep(0.05)


def wholly_old_or_new(engine, old, new):
    """Every source's record and chunks are of one version, the old or the new."""
    assert engine.store.check() == []
    hashes, n = chunk_rows(engine)
    assert n == engine.count()
    for sid in engine.source_ids():
        text = engine.source_text(sid)
        assert text in (old.get(sid), new.get(sid))
        assert hashes[sid] == {engine.store.heads([sid])[sid].content_hash}


@pytest.mark.parametrize("point", ["before", "chunks", "commit"])
def test_kill_9_leaves_every_source_old_or_new(pg_uri, tmp_path, point):
    engine = open_engine(pg_uri)
    ids = ["doc-a", "doc-b", "doc-c"]
    engine.index_texts(TEXTS, ids=ids)
    old = {engine.resolve_ids([i])[0]: t for i, t in zip(ids, TEXTS)}
    replacements = [f"Replacement {i}: the lighthouse keeper wrote a new log." for i in range(3)]
    new = {engine.resolve_ids([i])[0]: t for i, t in zip(ids, replacements)}
    flag = tmp_path / "paused"
    proc = start_child(pg_uri, replacements, ids, flag, point)
    try:
        wait_for(flag, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    wholly_old_or_new(engine, old, new)
    assert any(engine.source_text(s) == old[s] for s in old)  # the paused source did not land
    # the next writer needs no repair: it just writes
    engine.index_texts(replacements, ids=ids)
    assert {engine.source_text(s) for s in new} == set(replacements)
    assert engine.status().store_problems == []
    engine.close()


def test_sigstop_past_the_lease_cannot_commit(pg_uri, tmp_path):
    engine = open_engine(pg_uri)
    engine.index_texts(TEXTS[:1], ids=["doc-a"])
    sid = engine.resolve_ids(["doc-a"])[0]
    flag = tmp_path / "paused"
    proc = start_child(pg_uri, ["The stalled writer's text."], ["doc-a"], flag, "chunks", lease=1.0)
    try:
        wait_for(flag, proc)
        proc.send_signal(signal.SIGSTOP)
        flag.unlink()
        st = engine.store
        deadline = time.monotonic() + 60
        while st.conn.execute(st._sql("SELECT count(*) FROM {w} WHERE expires > clock_timestamp()",
                                      w="writers")).fetchone()[0]:
            assert time.monotonic() < deadline, "the stopped writer's lease never expired"
            time.sleep(0.1)
        proc.send_signal(signal.SIGCONT)
        assert proc.wait(timeout=60) == 3  # LeaseLostError
    finally:
        if proc.poll() is None:
            proc.kill()
    assert engine.source_text(sid) == TEXTS[0]
    assert engine.store.check() == []
    engine.close()


# ---------------------------------------------------------------------------- the CLI


def test_cli_index_status_repair_on_postgres(pg_uri, tmp_path, capsys):
    from swrag_integrations.cli import main as cli_main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The walrus sat on the ice. " * 20)
    folder = str(tmp_path / "idx")
    assert cli_main(["index", str(docs), "--persist-dir", folder, "--store", pg_uri]) == 0
    capsys.readouterr()
    assert cli_main(["status", "--persist-dir", folder, "--deep"]) == 0  # the folder remembers the database
    out = capsys.readouterr().out
    assert "PostgreSQL" in out and "checks: transactional store" in out
    assert cli_main(["repair", "--persist-dir", folder]) == 0
    assert "checks: transactional store" in capsys.readouterr().out


def test_cli_bulk_load_on_postgres_and_refused_elsewhere(pg_uri, tmp_path, capsys):
    from swrag_integrations.cli import main as cli_main
    from swrag_integrations.stores.postgres import PostgresStorage

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"{i}.txt").write_text(f"Lighthouse {i} stands on the rocks. " * 30)
    folder = str(tmp_path / "idx")
    assert cli_main(["index", str(docs), "--persist-dir", folder, "--store", pg_uri, "--bulk"]) == 0
    store = PostgresStorage(pg_uri, "swrag", None)
    assert store.missing_search_indexes() == [] and store.count() > 0
    store.close()
    capsys.readouterr()
    for extra in ([], ["--store", "chroma"]):
        assert cli_main(["index", str(docs), "--persist-dir", str(tmp_path / "chroma"), "--bulk", *extra]) != 0
        err = capsys.readouterr().err
        assert "--bulk needs a PostgreSQL store" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "chroma").exists()  # refused before anything was created


def test_cli_refuses_a_password_in_the_uri(tmp_path, capsys):
    from swrag_integrations.cli import main as cli_main

    with pytest.raises(SystemExit) as exit_:
        cli_main(["status", "--persist-dir", str(tmp_path), "--store", "postgresql://me:hunter2@db/rag"])
    err = capsys.readouterr().err
    assert exit_.value.code != 0 and "PGPASSWORD" in err and "hunter2" not in err and "Traceback" not in err


def test_first_time_writers_in_two_processes_make_one_index(pg_uri):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from fake_embeddings import TrigramEmbedder
        from swrag_integrations.engine.engine import IndexEngine
        engine = IndexEngine.open(storage={pg_uri!r}, embedding=TrigramEmbedder(), show_progress=False)
        engine.index_texts([sys.argv[1] + " walked along the harbour wall."])
        print(engine.index_id)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code, name], env=env, stdout=subprocess.PIPE, text=True)
             for name in ("Ann", "Bob")]
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    engine = open_engine(pg_uri)
    assert {o[-1] for o in outs} == {engine.index_id}  # both wrote into the one index they created
    assert len(engine.source_ids()) == 2 and engine.status(deep=True).healthy
    engine.close()


def test_cli_unreachable_database_is_one_line_and_leaves_no_folder(tmp_path, capsys):
    from swrag_integrations.cli import main as cli_main

    docs = tmp_path / "a.txt"
    docs.write_text("Some text to index.")
    folder = tmp_path / "idx"
    code = cli_main(["index", str(docs), "--persist-dir", str(folder),
                     "--store", f"postgresql:///nodb?host={tmp_path / 'no-server'}"])
    err = capsys.readouterr().err
    assert code != 0 and "cannot connect to PostgreSQL" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (folder / "sources").exists()  # nothing remembered for a database that never answered
