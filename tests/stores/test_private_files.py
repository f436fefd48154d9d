"""Private by default (issue 42, item 6): the folders swrag creates for data and caches are
0700 and the database files it creates are 0600 (with their -wal/-shm), under a umask of
022 that would otherwise give 0755/0644; a folder the user already had keeps its mode."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

import swrag_integrations

CODE = Path(swrag_integrations.__file__).resolve().parents[1]  # the checkout under test, for the child
LOCATION_VARIABLES = ("SWRAG_HOME", "SWRAG_CACHE", "XDG_DATA_HOME", "XDG_CACHE_HOME")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask022():
    """The common default umask, under which a plain mkdir gives 0755 and a file 0644."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A HOME that does not exist yet, no location variables."""
    for name in LOCATION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def assert_private_index(root: Path, open_db: bool = True) -> None:
    """The folders and database files an index of ours creates are owner-only (``open_db``:
    the store is still open, so SQLite's -wal and -shm files exist; a clean close removes them)."""
    for folder in (root, root / "sources", root / "sources" / "swrag.keyword", root / "chroma"):
        assert mode(folder) == 0o700, f"{folder}: {oct(mode(folder))}"
    db = root / "sources" / "swrag.sqlite3"
    files = [db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm"))]
    assert all(f.is_file() for f in (files if open_db else files[:1])), files
    files = [f for f in files if f.exists()]
    for f in files:
        assert mode(f) == 0o600, f"{f}: {oct(mode(f))}"


def _add_one(index) -> None:
    index.engine.index_documents([Document(page_content="The lighthouse was first lit in 1874. " * 6,
                                    metadata={"source": "a.txt"})])


def test_private_dir_creates_missing_folders_0700_and_leaves_existing_ones(tmp_path, umask022):
    from swrag_integrations.core.paths import private_dir, private_file

    own = tmp_path / "own"
    own.mkdir(mode=0o755)
    made = private_dir(own / "a" / "b")
    assert made == own / "a" / "b" and made.is_dir()
    assert mode(own / "a") == mode(own / "a" / "b") == 0o700
    assert mode(own) == 0o755  # the user's folder keeps its mode
    (own / "open").mkdir(mode=0o755)
    assert private_dir(own / "open") == own / "open" and mode(own / "open") == 0o755
    db = private_file(own / "c" / "x.sqlite3")
    assert db.stat().st_size == 0 and mode(db) == 0o600 and mode(own / "c") == 0o700
    db.chmod(0o640)
    private_file(db)  # an existing file is neither truncated nor chmod-ed
    assert mode(db) == 0o640
    (own / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        private_dir(own / "file" / "sub")


def test_a_fresh_default_index_is_private(home, umask022):
    from swrag_integrations.core.paths import default_index_dir
    from swrag_integrations.langchain.index import SlidingWindowIndex

    # the default location the CLI uses (SlidingWindowIndex() without one is in memory)
    index = SlidingWindowIndex(default_index_dir(), embedding=DeterministicFakeEmbedding(size=384),
                               show_progress=False)
    _add_one(index)
    root = home / ".local" / "share" / "swrag" / "index"
    assert Path(index.engine.persist_directory) == root
    assert_private_index(root)
    # the XDG folders created on the way are private too (the spec asks 0700 for them)
    for folder in (home / ".local", home / ".local" / "share", home / ".local" / "share" / "swrag"):
        assert mode(folder) == 0o700, folder
    index.engine.store.close()


def test_an_existing_user_folder_keeps_its_mode_and_the_index_inside_is_private(tmp_path, umask022):
    from swrag_integrations.langchain.index import SlidingWindowIndex

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    index = SlidingWindowIndex(mine, embedding=DeterministicFakeEmbedding(size=384), show_progress=False)
    _add_one(index)
    assert mode(mine) == 0o755
    for folder in (mine / "sources", mine / "sources" / "swrag.keyword", mine / "chroma"):
        assert mode(folder) == 0o700, folder
    assert mode(mine / "sources" / "swrag.sqlite3") == 0o600
    index.engine.store.close()


def test_caches_are_private(tmp_path, umask022):
    from swrag_integrations.llm.cache import memo_sha256, staging_dir
    from swrag_integrations.core.textcache import TextCache

    cache = TextCache(tmp_path / "cache" / "texts" / "headers.sqlite3")
    cache.put("k", "a header")
    cache.close()
    assert mode(tmp_path / "cache") == mode(tmp_path / "cache" / "texts") == 0o700
    assert mode(tmp_path / "cache" / "texts" / "headers.sqlite3") == 0o600

    with staging_dir(tmp_path / "llm" / "low-bit" / "entry") as staged:
        assert mode(staged) == 0o700
    assert mode(tmp_path / "llm") == mode(tmp_path / "llm" / "low-bit") == 0o700
    source = tmp_path / "weights.bin"
    source.write_bytes(b"weights")
    memo_sha256(source, tmp_path / "llm" / "file-hashes")
    assert mode(tmp_path / "llm" / "file-hashes") == 0o700


@pytest.mark.integration
@pytest.mark.slow
def test_swrag_index_makes_a_private_index_and_model_cache(tmp_path):
    """`swrag index` in a fresh HOME under umask 022 (the real default embedding, onnx-int8:
    its ONNX files are written into the cache on first use)."""
    home = tmp_path / "home"
    doc = tmp_path / "doc.txt"
    doc.write_text("The lighthouse was first lit in 1874. It stands on the northern cape.\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARIABLES}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(CODE), env.get("PYTHONPATH")])))
    env.pop("SWRAG_EMBEDDINGS_BACKEND", None)
    proc = subprocess.run([sys.executable, "-m", "swrag_integrations.cli", "index", str(doc)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, preexec_fn=lambda: os.umask(0o022))
    assert proc.returncode == 0, proc.stderr
    assert_private_index(home / ".local" / "share" / "swrag" / "index", open_db=False)
    cache = home / ".cache" / "swrag"
    onnx = cache / "onnx"
    entries = [p for p in onnx.iterdir() if p.is_dir()]
    assert entries, "no ONNX model was cached"
    for folder in (home / ".cache", cache, onnx, *entries):
        assert mode(folder) == 0o700, folder


@pytest.mark.milvus
@pytest.mark.integration
def test_a_milvus_lite_file_gets_a_private_folder(tmp_path, umask022):
    """Milvus Lite (>= 3.2) keeps its data in a folder at the path it is given: that folder, and
    the ones above it we create, are private even inside a user's open folder."""
    from swrag_integrations.stores.milvus import open_milvus

    client = open_milvus(path=tmp_path / "new" / "vectors" / "milvus.db")
    (tmp_path / "open").mkdir(mode=0o755)
    other = open_milvus(path=tmp_path / "open" / "milvus.db")
    try:
        assert mode(tmp_path / "new") == mode(tmp_path / "new" / "vectors") == 0o700
        assert mode(tmp_path / "new" / "vectors" / "milvus.db") == mode(tmp_path / "open" / "milvus.db") == 0o700
        assert mode(tmp_path / "open") == 0o755
    finally:
        client.close()
        other.close()


def test_saved_graph_raptor_and_keyword_folders_are_private(tmp_path, umask022):
    """The folders the graph, a RAPTOR tree and a BM25 snapshot are saved into hold document
    text: created private like the index."""
    pytest.importorskip("networkx")
    from swrag_integrations.methods.graph.extraction import Extraction
    from swrag_integrations.methods.graph.graph import Passage, PassageGraph
    from swrag_integrations.methods.raptor.build import build_tree
    from swrag_integrations.methods.raptor.leaves import leaves_from_text
    from swrag_integrations.keyword.bm25 import BM25Index

    graph = PassageGraph()
    graph.add(Passage("a", 0, 0, 0, 10), Extraction(entities=["Ed Wood"]))
    graph.save(tmp_path / "g" / "graph")
    tree = build_tree(leaves_from_text("tiny", "A short note. It has two sentences.", size=5),
                      DeterministicFakeEmbedding(size=8), show_progress=False)
    tree.save(tmp_path / "t" / "tree")
    keyword = BM25Index()
    keyword.upsert(["a", "b"], ["the lighthouse", "the cape"])
    keyword.save(tmp_path / "k" / "bm25.bin")
    for folder in ("g", "g/graph", "t", "t/tree", "k"):
        assert mode(tmp_path / folder) == 0o700, folder
