"""Keyword index reliability and tokenising, round 4 (issue 42): a commit interrupted
between its files and ``meta.json``, keyword folders of the wrong type, and possessives
and elisions tokenised alike everywhere."""

import json
import shutil
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex

ROOT = Path(__file__).resolve().parents[2]


def mk(path, **kw):
    return SlidingWindowIndex(path, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, **kw)


def docs(n, start=0):
    return [Document(page_content=f"Marker{i} keeps the lighthouse lamp burning through the storm, night {i}.",
                     metadata={"source": f"doc{i}.txt"}) for i in range(start, start + n)]


# ------------------------------------------------------------------ orphan files of an interrupted commit


def test_files_of_a_commit_that_never_replaced_meta_json_do_not_block_the_replay(tmp_path):
    """kill -9 after tantivy wrote a commit's ``<segment>.<opstamp>.del`` but before it
    replaced ``meta.json``: the next open replays the same change log to the same
    opstamp and must not fail on the file left behind."""
    path = tmp_path / "idx"
    idx = mk(path)
    ids = idx.add_documents(docs(5))
    folder = idx.engine.keyword.bm25.path
    before = tmp_path / "before"
    shutil.copytree(folder, before)  # the keyword index as the last commit left it
    idx.delete([ids[0]])  # a commit that writes a delete file
    written = sorted(p.name for p in (folder / "segments").glob("*.del")
                     if not (before / "segments" / p.name).exists())
    assert written, "the delete wrote no new delete file"
    del idx
    # the state of a writer killed inside that commit: its files written, meta.json and
    # the keyword generation still the previous commit's
    shutil.rmtree(folder)
    shutil.copytree(before, folder)
    for name in written:
        (folder / "segments" / name).write_bytes(b"left by a killed writer")

    again = mk(path)
    assert again.engine.keyword.bm25.generation == again.engine.store.generation()
    assert {cid.split(":")[0] for cid in again.engine.keyword.bm25.ids} == set(again.engine.source_ids())
    assert ids[0] not in again.engine.source_ids()
    assert again.engine.status().healthy
    assert again.engine.keyword.check() == []
    assert again.engine.bm25_search("Marker1", 1)[0][0].startswith(ids[1])
    again.add_documents(docs(1, start=50))  # and it keeps writing
    assert again.engine.bm25_search("Marker50", 1)
    assert again.engine.repair() is not None and again.engine.status().healthy


# ------------------------------------------------------------------ possessives and elisions


from fake_embeddings import TrigramEmbedder  # noqa: E402
from stores import HAVE_MILVUS, STORES, store_kwargs  # noqa: E402
from swrag_integrations.keyword.bm25 import tokenize  # noqa: E402
from swrag_integrations.engine.engine import IndexEngine  # noqa: E402

APOSTROPHES = ["The walrus's tusk caught the light on the floe.",
               "Mr O'Brien rowed the survey boat past the headland.",
               "They didn’t see the walrus’ pup, and we’ll never know why l'homme left."]


@pytest.mark.parametrize("store", STORES)
def test_keyword_search_finds_words_inside_possessives_and_elisions_on_every_backend(tmp_path, store):
    engine = IndexEngine.open(tmp_path / "i", embedding=TrigramEmbedder(), show_progress=False,
                              **store_kwargs(store))
    engine.index_texts(APOSTROPHES)
    for query, wanted in [("walrus", {0, 2}), ("brien", {1}), ("O'Brien", {1}), ("walrus's tusk", {0, 2}),
                          ("homme", {2}), ("didn't", {2})]:
        hits = engine.bm25_search(query, 5)
        found = {APOSTROPHES.index(engine.source_text(cid.split(":")[0])) for cid, _ in hits}
        assert wanted <= found, (store, query, found)
    engine.close()


def test_the_package_tokens_of_possessives_and_elisions():
    assert tokenize("The walrus's tusk") == ["walrus", "tusk"]
    assert tokenize("O'Brien") == tokenize("o’brien") == ["o", "brien"]
    assert tokenize("didn't we'll they're I've I'm I'd") == ["didn"]


@pytest.mark.skipif(not HAVE_MILVUS, reason="needs the [milvus] extra (milvus-lite's analyser)")
def test_milvus_analyser_gives_the_package_tokens_on_apostrophes():
    from milvus_lite.analyzer.factory import create_analyzer

    from swrag_integrations.stores.milvus import ANALYZER

    analyser = create_analyzer(ANALYZER)
    for text in APOSTROPHES + ["O'Brien's walrus", "l’homme qu'il aime", "rock 'n' roll"]:
        assert analyser.tokenize(text) == tokenize(text), text


def test_an_index_tokenised_by_the_older_tokenizer_is_rebuilt_with_the_current_one(tmp_path):
    """Apostrophes used to stay inside words: a keyword index stored with those tokens
    is rebuilt on open, not searched with tokens it does not hold."""
    import re

    from swrag_integrations.keyword.bm25 import ENGLISH_STOPWORDS

    idx = mk(tmp_path / "i")
    idx.add_texts(APOSTROPHES)
    bm25 = idx.engine.keyword.bm25
    with bm25.transaction():  # the same chunks with the previous version's tokens
        ids = bm25.ids
        bm25.clear()
        bm25._add((cid, [t for t in re.findall(r"\w+(?:['’]\w+)*", idx.engine.source_text(cid.split(":")[0]).lower())
                         if t not in ENGLISH_STOPWORDS]) for cid in ids)
    assert len(bm25.search("walrus", 5)) == 1  # "walrus's" is one token there
    state = json.loads((bm25.path / "state.json").read_text())
    state["settings"]["tokenizer"] = None  # as the previous version recorded the built-in tokenizer
    (bm25.path / "state.json").write_text(json.dumps(state))
    del idx, bm25
    again = mk(tmp_path / "i")
    assert len(again.engine.bm25_search("walrus", 5)) == 2
    assert len(again.engine.keyword) == len(ids)


# ------------------------------------------------------------------ parts of the wrong type


@pytest.mark.parametrize("part", ["keyword folder", "segments", "writer.lock", "state.json"])
def test_a_keyword_part_of_the_wrong_type_is_rebuilt(tmp_path, part):
    path = tmp_path / "i"
    idx = mk(path)
    ids = idx.add_documents(docs(4))
    folder = idx.engine.keyword.bm25.path
    del idx
    target = {"keyword folder": folder, "segments": folder / "segments", "writer.lock": folder / "writer.lock",
              "state.json": folder / "state.json"}[part]
    if target.is_dir():
        shutil.rmtree(target)
        target.write_text("not a folder")
    else:
        target.unlink(missing_ok=True)
        target.mkdir()
        (target / "x").write_text("not a file")

    again = mk(path)  # opens (it failed with FileExistsError / IsADirectoryError before)
    assert again.engine.bm25_search("Marker2", 1)[0][0].startswith(ids[2])
    again.engine.repair()
    assert again.engine.status().healthy
    assert again.engine.keyword.check() == []
    again.add_documents(docs(1, start=60))
    assert again.engine.bm25_search("Marker60", 1)
    assert folder.is_dir() and (folder / "segments").is_dir() and (folder / "state.json").is_file()
