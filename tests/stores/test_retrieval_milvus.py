"""Milvus as the vector store (retrieval.milvus.MilvusStorage on Milvus Lite), its keyword
search in the store, and stores named by URI (--store / storage=).

The index behaviours every store shares (add, re-add, replace, delete, reopen, crash and
resume, two writers, filters through the retrievers) run over Milvus too, in
test_retrieval_index.py and test_retrieval_reliability.py (parametrized by stores.STORES).
A Milvus server (milvus://HOST:19530) runs the same code but is not tested here.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fake_embeddings import TrigramEmbedder
from stores import MILVUS, vector_ids
from swrag_integrations.cli import main as cli_main
from swrag_integrations.engine.engine import IndexMismatchError
from swrag_integrations.stores.storage import PlainDocument
from swrag_integrations.engine.filters import parse_filter
from swrag_integrations.stores.store_uri import parse_store_uri
from swrag_integrations.engine.engine import IndexEngine
from swrag_integrations.keyword.index import StorageKeyword

ROOT = Path(__file__).resolve().parents[2]
milvus = pytest.mark.parametrize("store", [MILVUS])  # the Milvus Lite cases (skipped without the extra)


def open_engine(path, **kw):
    return IndexEngine.open(path, embedding=TrigramEmbedder(), storage="milvus", show_progress=False, **kw)


# --------------------------------------------------------------------------- store URIs


@pytest.mark.parametrize("uri, kind, host, port, path", [
    ("chroma", "chroma", None, None, None),
    ("chroma://db.example:9000", "chroma", "db.example", 9000, None),
    ("chroma://localhost", "chroma", "localhost", 8000, None),
    ("milvus", "milvus", None, None, None),
    ("milvus:./x.db", "milvus", None, None, Path("x.db")),
    ("milvus:/tmp/a/b.db", "milvus", None, None, Path("/tmp/a/b.db")),
    ("milvus://10.0.0.5", "milvus", "10.0.0.5", 19530, None),
    ("milvus://milvus:19531", "milvus", "milvus", 19531, None),
])
def test_store_uris_are_parsed(uri, kind, host, port, path):
    got = parse_store_uri(uri)
    assert (got.kind, got.host, got.port, got.path) == (kind, host, port, path)
    assert parse_store_uri("milvus+https://h").server == "https://h:19530"


@pytest.mark.parametrize("uri, why", [
    ("milvus:x.txt", "must end in .db"),
    ("milvus:", "no Milvus Lite file"),
    ("milvus://h:99999", "out of range"),
    ("qdrant://h:6333", "not a server address"),
    ("chroma:/some/dir", "unknown store"),
    ("./x.db", "unknown store"),
])
def test_bad_store_uris_name_the_option_and_the_forms(uri, why, capsys):
    with pytest.raises(ValueError, match=why) as info:
        parse_store_uri(uri)
    assert "--store" in str(info.value) and "milvus:PATH.db" in str(info.value)
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["status", "--persist-dir", "unused", "--store", uri])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--store" in err and "milvus://HOST[:PORT]" in err
    assert "Traceback" not in err


def test_store_and_host_together_are_refused(tmp_path, capsys):
    assert cli_main(["status", "--persist-dir", str(tmp_path), "--store", "milvus", "--host", "h"]) == 2
    assert "not both" in capsys.readouterr().err


def test_a_chroma_server_uri_is_the_host_and_port_options(tmp_path, capsys):
    """``--store chroma://HOST:PORT`` opens the Chroma server there, as ``--host``/``--port`` do
    (here: none listens, so the message names it; exit 3)."""
    assert cli_main(["status", "--store", "chroma://127.0.0.1:9"]) == 3
    assert "Chroma server at http://127.0.0.1:9" in capsys.readouterr().err


def test_missing_pymilvus_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pymilvus", None)  # import pymilvus now fails
    with pytest.raises(ModuleNotFoundError, match=r"swrag-integrations\[milvus\]"):
        IndexEngine.open(tmp_path, embedding=TrigramEmbedder(), storage="milvus", show_progress=False)
    code = cli_main(["index", str(ROOT / "swrag_integrations" / "data" / "sample.md"), "--persist-dir",
                     str(tmp_path / "cli"), "--store", "milvus"])
    err = capsys.readouterr().err
    assert code == 2 and "swrag-integrations[milvus]" in err and "Traceback" not in err


def test_keyword_search_setting_is_checked(tmp_path):
    with pytest.raises(ValueError, match="no keyword search of its own"):
        IndexEngine.open(tmp_path / "a", embedding=TrigramEmbedder(), keyword_search="store", show_progress=False)
    with pytest.raises(ValueError, match="'auto', 'store' or 'local'"):
        IndexEngine.open(tmp_path / "b", embedding=TrigramEmbedder(), keyword_search="bm25", show_progress=False)


# --------------------------------------------------------------------------- filters


def test_filters_translate_to_milvus_expressions_that_never_drop_a_match():
    from swrag_integrations.stores.milvus import milvus_collection_name, milvus_filter

    assert milvus_filter(parse_filter({"topic": "sea"})) == 'metadata["topic"] == "sea"'
    assert milvus_filter(parse_filter({"n": {"$in": [1, 2.5]}})) == '(metadata["n"] == 1 or metadata["n"] == 2.5)'
    assert milvus_filter(parse_filter({"$and": [{"n": {"$gte": 2}}, {"k": {"$lt": 0}}]})) == \
        '(metadata["n"] >= 2 and metadata["k"] < 0)'
    assert milvus_filter(parse_filter({'we"ird': 'it\'s "x"'})) == 'metadata["we\\"ird"] == "it\'s \\"x\\""'
    # parts whose Milvus meaning differs are left to the engine's own check: a wider expression, never a narrower one
    assert milvus_filter(parse_filter({"topic": {"$ne": "sea"}})) is None
    assert milvus_filter(parse_filter({"flag": True})) is None
    assert milvus_filter(parse_filter({"$and": [{"topic": "sea"}, {"n": {"$nin": [1]}}]})) == \
        'metadata["topic"] == "sea"'
    assert milvus_filter(parse_filter({"$or": [{"topic": "sea"}, {"n": {"$nin": [1]}}]})) is None
    # collection names: Milvus allows letters, digits and _ only; distinct names stay distinct
    assert milvus_collection_name("swrag") == "swrag"
    names = {milvus_collection_name(n) for n in ("my-index.v2", "my_index_v2", "my-index-v2", "2nd")}
    assert len(names) == 4 and all(n.replace("_", "a").isalnum() and not n[0].isdigit() for n in names)


FILTERS = [
    {"topic": "sea"}, {"topic": {"$ne": "sea"}}, {"n": {"$gt": 1}}, {"n": {"$lte": 2.5}},
    {"n": {"$in": [1, 3]}}, {"n": {"$nin": [1, 3]}}, {"flag": True}, {"flag": {"$ne": False}},
    {"$or": [{"topic": "sky"}, {"n": 2.5}]}, {"$and": [{"topic": "sea"}, {"n": {"$gte": 2}}]},
    {"topic": 'quote "q"'}, {"missing": {"$ne": 1}},
]


@milvus
def test_filtered_searches_in_milvus_return_exactly_the_matching_sources(tmp_path, store):
    metas = [{"topic": "sea", "n": 1, "flag": True}, {"topic": "sky", "n": 2.5}, {"topic": "sea", "n": 3, "flag": False},
             {"n": 2}, {"topic": 'quote "q"', "flag": 1}, {"topic": "land"}]
    engine = open_engine(tmp_path)
    texts = [f"Shared words about harbours and boats, document number {i}." for i in range(len(metas))]
    ids = engine.index_texts(texts, metas)
    for spec in FILTERS:
        flt = parse_filter(spec)
        want = {sid for sid, meta in zip(ids, metas) if flt.matches({**meta, "source_id": sid})}
        dense = {c.split(":")[0] for c in engine.dense_ids("harbours and boats", 50, search_type="similarity",
                                                            filter=spec)}
        keyword = {c.split(":")[0] for c, _ in engine.bm25_search("harbours boats", 50, filter=spec)}
        hybrid = {h.source_id for h in engine.search_children("harbours boats", 50, filter=spec)}
        assert dense == keyword == hybrid == want, spec
        native = engine.vectors.native_filter(flt)
        if native is not None:  # pushed down: a superset of the matches (the engine checks each hit itself)
            rows = engine.vectors.client.query(engine.vectors.collection_name, filter=native["filter"],
                                               output_fields=["metadata"])
            assert want <= {r["metadata"]["source_id"] for r in rows}, spec


# --------------------------------------------------------------------------- keyword search in the store

ZH = ["北京大学是中国著名的高等学府，位于北京市海淀区。", "上海的外滩以万国建筑博览群闻名。",
      "杭州西湖的龙井茶远近闻名。"]
EN = ["The red lighthouse stands on the cliff above the harbour.", "Zebras graze near the old quarry at dusk.",
      "Copper and tin were exported from the southern port."]


@milvus
def test_keyword_search_runs_in_the_store_for_chinese_and_english(tmp_path, store, monkeypatch):
    from swrag_integrations.keyword.index import KeywordIndex

    engine = open_engine(tmp_path)
    ids = engine.index_texts(ZH + EN, [{"source": f"{i}.txt"} for i in range(6)])
    assert isinstance(engine.keyword, StorageKeyword) and engine.keyword_mode == "store"
    monkeypatch.setattr(KeywordIndex, "search", lambda *a, **k: pytest.fail("the in-process BM25 was used"))
    # jieba (search mode) segments words inside a Han run: 北京 is found in 北京大学...北京市 (a standard
    # tokenizer keeps the run as one token and finds nothing)
    for query, want in (("北京", 0), ("龙井茶", 2), ("外滩建筑", 1), ("lighthouse", 3), ("ZEBRAS quarry", 4),
                        ("copper exported", 5)):
        hits = engine.bm25_search(query, 3)
        assert hits and hits[0][0].split(":")[0] == ids[want], query
        children = engine.search_children(query, 3, weights=(1.0, 0.0))
        assert children[0].source_id == ids[want] and children[0].metadata["bm25_rank"] == 1
    assert engine.bm25_search("的 the ，", 3) == []  # stop words and punctuation only: no hit
    assert engine.status().healthy


@milvus
def test_the_store_keyword_search_serves_no_vector_of_another_version(tmp_path, store):
    """A vector whose content hash is not its source's current one (left by a writer that
    died while replacing the source) is never served, though the store's BM25 finds it."""
    from swrag_integrations.engine.ids import vector_ids as ids_of

    engine = open_engine(tmp_path)
    sid = engine.index_texts(["The red lighthouse stands on the cliff."])[0]
    [first] = ids_of(engine.manifest, sid, engine.store.heads()[sid].content_hash, 0, 1)
    meta = dict(engine.vectors.present([first])[first], content_hash="older")
    engine.vectors.add([PlainDocument("Zebras graze near the quarry.", meta)], ids_of(engine.manifest, sid, "older", 9, 10))
    assert [d.metadata["content_hash"] for d, _ in engine.vectors.keyword_search("zebras", 5)] == ["older"]
    assert engine.bm25_search("zebras", 5) == [] and engine.search_children("zebras", 5, weights=(1, 0)) == []
    assert engine.bm25_search("lighthouse", 5)[0][0] == f"{sid}:s:0"


def _corpus(n=40):
    """Documents of different lengths over a small vocabulary: terms recur with different
    frequencies, so BM25 scores rarely tie."""
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(80)]
    zh = ["茶叶", "丝绸", "瓷器", "港口", "城市", "市长", "商人", "船只"]
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(15, 45))) + " "
            + "".join(rng.choice(zh) for _ in range(rng.randint(2, 9))) + "。" for _ in range(n)]


@milvus
def test_store_bm25_ranks_as_the_in_process_bm25(tmp_path, store):
    """Same tokens (the jieba analyser with the package's stop words), same k1 and b (1.5,
    0.75: Milvus Lite's), one segment: Milvus' BM25 scores are those of the in-process
    bm25s index (the snapshot backend, exact lengths) times k1 + 1 = 2.5 (its formula keeps
    the factor, bm25s' lucene variant drops it), so rankings agree up to the order of tied
    chunks, and so do the fused hits."""
    engine = open_engine(tmp_path)
    engine.index_texts(_corpus(), [{"source": f"d{i}.txt"} for i in range(40)])
    local = IndexEngine(engine.store, engine.vectors, persist_directory=tmp_path, show_progress=False,
                        keyword_search="local")
    assert not isinstance(local.keyword, StorageKeyword)
    from swrag_integrations.keyword.index import KeywordIndex

    k1, b = 1.5, 0.75
    local.keyword = KeywordIndex(engine.store, index_text=engine.index_text, k1=k1, b=b)  # the bm25s snapshot
    local.keyword.load()
    rng = random.Random(3)
    # (distinct terms: Milvus counts a repeated query term once per occurrence, bm25s once)
    queries = [" ".join(f"w{i}" for i in rng.sample(range(80), 3)) for _ in range(8)] + [
        "瓷器 港口", "市长的船只", "w7 茶叶"]
    untied = 0
    for query in queries:
        milvus_hits, local_hits = dict(engine.bm25_search(query, 1000)), dict(local.bm25_search(query, 1000))
        assert milvus_hits.keys() == local_hits.keys() and milvus_hits, query  # every chunk with a query term
        assert [milvus_hits[c] for c in local_hits] == pytest.approx([(k1 + 1) * s for s in local_hits.values()],
                                                                     rel=1e-4), query
        fused = [(h.source_id, h.chunk_index) for h in engine.search_children(query, 8)]
        expected = [(h.source_id, h.chunk_index) for h in local.search_children(query, 8)]
        top = sorted(local_hits.values(), reverse=True)[:9]
        if len(set(top)) == len(top):  # no ties among the BM25 hits that can reach the fused top 8
            untied += 1
            assert fused == expected, query
        else:
            assert len(set(fused) & set(expected)) >= 6, query
    assert untied >= 2


# --------------------------------------------------------------------------- the storage itself


@milvus
def test_storage_search_scores_mmr_rebuild_and_long_chunks(tmp_path, store):
    from swrag_integrations.stores.milvus import MAX_TEXT_BYTES

    engine = open_engine(tmp_path)
    engine.index_texts(EN + ZH)
    vectors = engine.vectors
    query = vectors.embed_query("lighthouse on the cliff")
    scored = vectors.search_scored(query, 4)
    assert len(scored) == 4 and all(0.0 <= s <= 1.0 for _, s in scored)
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    assert scored[0][0].page_content == EN[0] and scored[0][0].metadata["chunk_index"] == 0
    mmr = vectors.search(query, 3, mmr=True, fetch_k=6, lambda_mult=0.3)
    assert len({d.id for d in mmr}) == 3 and mmr[0].page_content == EN[0]
    before, n = vector_ids(engine), vectors.count()
    fenced = []
    assert vectors.rebuild(fence=lambda: fenced.append(True)) and fenced
    assert vector_ids(engine) == before and vectors.count() == n
    assert engine.bm25_search("zebras", 1)[0][0] == engine.bm25_search("zebras quarry", 1)[0][0]
    with pytest.raises(ValueError, match="Milvus stores at most"):
        vectors.add([PlainDocument("字" * (MAX_TEXT_BYTES // 3 + 1), {"chunk_id": "x:s:0"})], ["x"])


@milvus
def test_an_index_opens_only_with_the_store_it_was_built_with(tmp_path, store):
    engine = open_engine(tmp_path / "m")
    engine.index_texts(EN)
    engine.close()
    reopened = IndexEngine.open(tmp_path / "m", embedding=TrigramEmbedder(), show_progress=False)
    assert reopened.vectors.kind == "Milvus" and reopened.count(None) > 0  # the index remembers its store
    reopened.close()
    with pytest.raises(IndexMismatchError, match="keeps its vectors in Milvus"):
        IndexEngine.open(tmp_path / "m", embedding=TrigramEmbedder(), storage="chroma", show_progress=False)
    chroma = IndexEngine.open(tmp_path / "c", embedding=TrigramEmbedder(), show_progress=False)
    chroma.index_texts(EN)
    with pytest.raises(IndexMismatchError, match="keeps its vectors in Chroma"):
        open_engine(tmp_path / "c")
    # a named Lite file and its collection name: another name is another collection
    other = IndexEngine.open(tmp_path / "n", embedding=TrigramEmbedder(), storage=f"milvus:{tmp_path}/v.db",
                             collection_name="my-index.v2", show_progress=False)
    other.index_texts(ZH)
    assert other.count(None) == 3 and (tmp_path / "v.db").exists()
    other.close()
    # ... or given as an object (MilvusStorage.open takes the same URIs)
    from swrag_integrations.stores.milvus import MilvusStorage

    given = MilvusStorage.open(f"milvus:{tmp_path}/v.db", "my-index.v2", TrigramEmbedder())
    again = IndexEngine.open(tmp_path / "n", storage=given, collection_name="my-index.v2", show_progress=False)
    assert again.vectors is given and again.keyword_mode == "store" and again.count(None) == 3
    assert "西湖" in again.source_text(again.bm25_search("西湖", 1)[0][0].split(":")[0])


BUSY = textwrap.dedent("""
    import sys
    from swrag_integrations.cli import main
    sys.exit(main(["status", "--persist-dir", sys.argv[1], "--store", "milvus"]))
""")


@milvus
def test_a_second_process_on_a_milvus_lite_file_gets_a_clear_error(tmp_path, store):
    engine = open_engine(tmp_path)
    engine.index_texts(EN)
    proc = subprocess.run([sys.executable, "-c", BUSY, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "Milvus Lite serves one process at a time" in proc.stderr and "Traceback" not in proc.stderr
    engine.close()  # the last handle releases the file: now the other process opens it
    proc = subprocess.run([sys.executable, "-c", BUSY, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "3 in Milvus" in proc.stdout



@milvus
def test_the_eval_pipeline_default_milvus_searches_keywords_in_milvus(tmp_path, store, monkeypatch):
    """``swrag eval --strategies default,default-milvus`` compares the two keyword searches
    on the same windows; the Milvus one never touches the in-process BM25 and releases
    its Lite file when closed."""
    import json

    from swrag_integrations.evaluation.pipelines import EvalConfig
    from swrag_integrations.evaluation.runner import run_eval
    from swrag_integrations.keyword.index import KeywordIndex

    monkeypatch.setattr(KeywordIndex, "search", lambda *a, **k: pytest.fail("the in-process BM25 was used"))
    filler = " ".join(f"Line {i} talks about the weather and the roads." for i in range(40))
    rows = [{"input": "What is the secret code of the harbour?", "context": filler + " The secret code of the harbour "
             "is 4711 and it never changes. " + filler, "answers": ["4711"], "language": "en", "_id": "q1"},
            {"input": "全国会议在哪所大学举办？", "context": "这是一个关于城市的报告。" * 30 + "全国会议在厦门大学举办。"
             + "天气很好，道路通畅。" * 30, "answers": ["厦门大学"], "language": "zh", "_id": "q2"}]
    data = tmp_path / "tiny.jsonl"
    data.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    got = run_eval([data], [EvalConfig("default-milvus", 512)], tmp_path / "out", retrieval_only=True,
                   embeddings=TrigramEmbedder(), progress=False, budget=300, n_resamples=50)
    assert [r["strategy"] for r in got] == ["default-milvus"] and got[0]["chunks"] > 0
    records = json.loads((tmp_path / "out" / "records.json").read_text())
    assert [(r["qid"], r["hit"]) for r in records] == [("q1", 1.0), ("q2", 1.0)]  # the answers were retrieved


@milvus
def test_workers_write_to_milvus_what_one_process_writes(tmp_path, store):
    """``workers=2``: the chunks are embedded in worker processes (which never open the
    Lite file) and written by this one, equal to a single-process build."""
    docs = [PlainDocument(text, {"source": f"d{i}.txt"}) for i, text in enumerate(_corpus(12) + ZH + EN)]
    one, two = open_engine(tmp_path / "one"), open_engine(tmp_path / "two")
    r1, r2 = one.index_documents(docs), two.index_documents(docs, workers=2)
    assert r1.as_dict() == r2.as_dict() and r1.added == len(docs) and not r2.notes
    rows1 = {r["id"]: (r["text"], r["vector"]) for r in one.vectors.rows()}
    rows2 = {r["id"]: (r["text"], r["vector"]) for r in two.vectors.rows()}
    assert rows1.keys() == rows2.keys() and len(rows1) == one.count("small")
    assert all(rows1[v][0] == rows2[v][0] and rows1[v][1] == pytest.approx(rows2[v][1], abs=1e-6) for v in rows1)
    for query in ("北京", "w3 w17", "lighthouse cliff"):
        assert one.bm25_search(query, 5) == two.bm25_search(query, 5)
