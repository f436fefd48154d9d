"""`swrag --version`, `swrag status` without the embedding model, and the default
locations of indexes and caches (XDG base directories, independent of the working
directory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

import swrag_integrations
from swrag_integrations.core import paths as paths
from swrag_integrations.cli import main as swrag
from swrag_integrations.llm.loader import default_cache_dir
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.embeddings import minilm as embeddings_module
from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

LOCATION_VARIABLES = ("SWRAG_HOME", "SWRAG_CACHE", "XDG_DATA_HOME", "XDG_CACHE_HOME")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An empty HOME, no location variables, and a working directory without ./.swrag."""
    for name in LOCATION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path / "home"


def _index(path: Path) -> None:
    """A one-source index with 384-dimensional (MiniLM-sized) fake vectors."""
    idx = SlidingWindowIndex(path, embedding=DeterministicFakeEmbedding(size=384), show_progress=False)
    idx.engine.index_documents([Document(page_content="The lighthouse was first lit in 1874. " * 6,
                                  metadata={"source": "a.txt"})])
    idx.engine.store.close()


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        swrag(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"swrag {swrag_integrations.__version__}"


def test_status_does_not_load_the_embedding_model(tmp_path, monkeypatch, capsys):
    _index(tmp_path / "idx")

    def no_model(self):
        raise AssertionError("swrag status loaded the embedding model")

    monkeypatch.setattr(MiniLMEmbeddings, "_load", no_model)
    monkeypatch.setattr(embeddings_module, "_defaults", {})  # a model loaded by an earlier test is not reused
    assert swrag(["status", "--persist-dir", str(tmp_path / "idx")]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert ": ok" in out and "sources: 1 (1 complete)" in out and "--deep checks them" in out
    assert f"cache: {default_cache_dir()}" in out
    # --deep does check the vectors, with the model: here the loader raises, so it fails
    assert swrag(["status", "--deep", "--persist-dir", str(tmp_path / "idx")]) == 1
    assert "loaded the embedding model" in capsys.readouterr().err


def test_default_locations_follow_xdg_and_overrides(home, tmp_path, monkeypatch):
    assert paths.cache_dir() == default_cache_dir() == home / ".cache" / "swrag"
    assert paths.default_index_dir() == home / ".local" / "share" / "swrag" / "index"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xd"))
    assert paths.cache_dir() == default_cache_dir() == tmp_path / "xc" / "swrag"
    assert paths.default_index_dir() == tmp_path / "xd" / "swrag" / "index"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    assert paths.default_index_dir() == home / ".local" / "share" / "swrag" / "index"
    monkeypatch.setenv("SWRAG_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("SWRAG_HOME", str(tmp_path / "h"))
    assert paths.cache_dir() == default_cache_dir() == tmp_path / "c"
    assert paths.default_index_dir() == tmp_path / "h" / "index"


def test_index_and_status_use_one_location_from_any_directory(home, tmp_path, monkeypatch, capsys):
    default = home / ".local" / "share" / "swrag" / "index"
    assert SlidingWindowIndex(default, embedding=DeterministicFakeEmbedding(size=384)).engine.persist_directory == default
    _index(default)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(MiniLMEmbeddings, "_load", lambda self: pytest.fail("model loaded"))
    monkeypatch.setattr(embeddings_module, "_defaults", {})
    assert swrag(["status"]) == 0
    out = capsys.readouterr().out
    assert f"index {default} (" in out and "sources: 1" in out
    assert not (elsewhere / ".swrag").exists()


def test_an_existing_index_in_the_old_place_is_still_used(home, capsys, monkeypatch):
    _index(Path(".swrag/index"))
    with pytest.warns(UserWarning, match="default location before 0.3"):
        assert paths.default_index_dir() == Path(".swrag/index").resolve()
    monkeypatch.setattr(MiniLMEmbeddings, "_load", lambda self: pytest.fail("model loaded"))
    monkeypatch.setattr(embeddings_module, "_defaults", {})
    assert swrag(["status"]) == 0
    captured = capsys.readouterr()
    assert f"index {Path('.swrag/index').resolve()} (" in captured.out
    assert "move the folder there" in captured.err
    monkeypatch.setenv("SWRAG_HOME", os.fspath(home / "chosen"))  # an explicit choice wins
    assert paths.default_index_dir() == home / "chosen" / "index"


def test_status_imports_no_keyword_scorer_face_or_torch(tmp_path):
    """`swrag status` reads the index through the engine: neither bm25s (the keyword
    index's status comes from its stored snapshot), nor the LangChain vector-store face,
    nor torch is imported, so it answers in well under 2 s."""
    import subprocess
    import sys

    _index(tmp_path / "idx")
    heavy = ("bm25s", "numba", "torch", "langchain_core.vectorstores", "swrag_integrations.langchain.index")
    code = ("import sys\nfrom swrag_integrations.cli import main\n"
            f"code = main(['status', '--persist-dir', {str(tmp_path / 'idx')!r}])\n"
            f"print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules), code)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env=env)
    assert result.returncode == 0, result.stderr
    chunks = result.stdout.split("small chunks: ")[1].split()[0]
    assert ": ok" in result.stdout and f"keyword index: {chunks} chunks at generation" in result.stdout, result.stdout
    assert result.stdout.splitlines()[-1] == "LOADED [] 0", result.stdout
