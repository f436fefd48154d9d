"""CLI frictions of a user's first hour (issue 39 item 4, issue 42 item 9), in process."""

from __future__ import annotations

import json

import pytest

from swrag_integrations.cli import app as cli
from swrag_integrations.engine.filters import filter_from_pairs, parse_filter


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def docs_index(tmp_path, monkeypatch, fake_default_embeddings, capsys):
    """Two files under ``docs/`` indexed from ``tmp_path`` (the working folder)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("The harbour ferry leaves at noon. " * 5, encoding="utf-8")
    (tmp_path / "docs" / "b.md").write_text("The harbour ferry returns at dusk. " * 5, encoding="utf-8")
    code, out, err = _run(capsys, "index", "docs", "--persist-dir", "ix")
    assert code == 0, err
    return tmp_path


def _sources(capsys, *filters):
    args = ["ask", "When does the harbour ferry go?", "--persist-dir", "ix", "--retrieval-only", "--json"]
    for item in filters:
        args += ["--filter", item]
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    return {s["source"].rsplit("/", 1)[-1] for s in json.loads(out)["sources"]}


def test_filter_source_takes_a_path_relative_to_the_working_folder(docs_index, capsys):
    assert _sources(capsys) == {"a.md", "b.md"}
    assert _sources(capsys, "source=docs/a.md") == {"a.md"}
    assert _sources(capsys, f"source={docs_index / 'docs' / 'b.md'}") == {"b.md"}  # absolute as before


def test_filter_repeated_key_matches_either_value(docs_index, capsys):
    assert _sources(capsys, "source=docs/a.md", "source=docs/b.md") == {"a.md", "b.md"}
    assert _sources(capsys, "source!=docs/a.md") == {"b.md"}


def test_filter_operators_map_to_the_filter_language():
    assert filter_from_pairs(["year>=2020"]) == {"year": {"$gte": 2020}}
    assert filter_from_pairs(["source==x"]) == {"source": "x"}
    flt = parse_filter(filter_from_pairs(["year>2000", "year<=2010", "kind!=draft"]))
    assert flt.matches({"year": 2005, "kind": "final"})
    assert not flt.matches({"year": 2011, "kind": "final"}) and not flt.matches({"year": 2005, "kind": "draft"})
    assert not flt.matches({"year": 2000, "kind": "final"})
    both = parse_filter(filter_from_pairs(["topic=sea", "topic=sky"]))
    assert both.matches({"topic": "sea"}) and both.matches({"topic": "sky"}) and not both.matches({"topic": "x"})
    with pytest.raises(ValueError, match="not a number"):
        filter_from_pairs(["year>=recent"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        filter_from_pairs([">=3"])


@pytest.mark.parametrize("option, value", [("--k", "0"), ("--budget", "-5")])
def test_bad_k_or_budget_is_one_line(tmp_path, capsys, option, value):
    code, out, err = _run(capsys, "ask", "anything", "--persist-dir", str(tmp_path / "none"), "--retrieval-only",
                          option, value)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and option in lines[0] and "positive" in lines[0], err
    code, out, err = _run(capsys, "demo", "--persist-dir", str(tmp_path / "demo"), "--retrieval-only", option, value)
    assert code == 2 and len(err.strip().splitlines()) == 1 and option in err
    assert not (tmp_path / "demo").exists()  # refused before anything is written


def test_embed_backend_help_names_the_real_default(capsys):
    from swrag_integrations.embeddings.minilm import DEFAULT_BACKEND

    with pytest.raises(SystemExit):
        cli.main(["status", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"else {DEFAULT_BACKEND}" in text
    assert "or sentence-transformers;" not in text


def test_encoding_is_the_fallback_for_files_that_are_not_utf8(tmp_path):
    from swrag_integrations.ingest.files import load_files

    (tmp_path / "zh.txt").write_text("灯塔高四十米，建于1871年。", encoding="utf-8")
    (tmp_path / "bom.md").write_bytes(b"\xef\xbb\xbf" + "Café au phare.".encode("utf-8"))
    (tmp_path / "old.txt").write_bytes("Café du port, élevé en 1871.".encode("latin-1"))
    docs = {d.metadata["source"].rsplit("/", 1)[-1]: d.page_content
            for d in load_files([tmp_path], encoding="latin-1").documents}
    assert docs == {"zh.txt": "灯塔高四十米，建于1871年。", "bom.md": "Café au phare.",
                    "old.txt": "Café du port, élevé en 1871."}


def test_split_and_view_split_accept_the_encoding_they_recommend(tmp_path, capsys):
    path = tmp_path / "old.txt"
    path.write_bytes("Café du port. Élevé en 1871. Le phare brille.".encode("latin-1"))
    code, out, err = _run(capsys, "view", "split", str(path), "-o", str(tmp_path / "v.html"))
    assert code == 2 and "--encoding latin-1" in err
    code, out, err = _run(capsys, "view", "split", str(path), "--encoding", "latin-1", "-o", str(tmp_path / "v.html"))
    assert code == 0, err
    assert "Café du port" in (tmp_path / "v.html").read_text(encoding="utf-8")
    code, out, err = _run(capsys, "split", str(path), "--encoding", "latin-1", "--unit", "char", "--window", "16")
    assert code == 0 and "Café" in out, err


def test_a_missing_path_is_skipped_and_the_rest_indexed(tmp_path, monkeypatch, fake_default_embeddings, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("The harbour ferry leaves at noon.", encoding="utf-8")
    (tmp_path / "b.md").write_text("The lighthouse was first lit in 1871.", encoding="utf-8")
    code, out, err = _run(capsys, "index", "a.md", "nope.md", "b.md", "--persist-dir", "ix")
    assert code == 3
    assert "nope.md" in err and "skipped" in err and "Traceback" not in err
    assert "from 2 sources" in out
    code, out, err = _run(capsys, "index", "gone1.md", "gone2.md", "--persist-dir", "ix")
    assert code == 3 and "gone1.md" in err and "gone2.md" in err
    code, out, err = _run(capsys, "index", "a.md", "b.md", "--persist-dir", "ix")
    assert code == 0 and "unchanged: 2" in out, out  # both indexed, nothing removed by the failed run


@pytest.mark.integration
def test_the_index_remembers_its_store(tmp_path, monkeypatch, fake_default_embeddings, capsys):
    """Milvus Lite (a server process): the store is recorded absolute in the manifest; later
    commands need no --store, and the same relative --store from another folder is refused."""
    pytest.importorskip("milvus_lite")
    work, other = tmp_path / "work", tmp_path / "other"
    (work / "docs").mkdir(parents=True)
    other.mkdir()
    (work / "docs" / "a.md").write_text("The harbour ferry leaves at noon. " * 5, encoding="utf-8")
    index = str(tmp_path / "ix")
    monkeypatch.chdir(work)
    code, out, err = _run(capsys, "index", "docs", "--persist-dir", index, "--store", "milvus:vec.db")
    assert code == 0, err
    code, out, err = _run(capsys, "ask", "When does the ferry leave?", "--persist-dir", index, "--retrieval-only",
                          "--json")
    assert code == 0, err
    assert json.loads(out)["sources"], out
    monkeypatch.chdir(other)
    code, out, err = _run(capsys, "status", "--persist-dir", index)
    assert code == 0, err
    code, out, err = _run(capsys, "status", "--persist-dir", index, "--store", "milvus:vec.db")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(work / "vec.db") in err and str(other / "vec.db") in err
    assert not (other / "vec.db").exists()


def test_library_indexing_is_quiet_by_default_and_the_cli_shows_bars(tmp_path, capsys):
    """tqdm bars (on stderr) from a library call only with show_progress=True; `swrag index` keeps them."""
    import sys as _sys
    from pathlib import Path as _Path

    from swrag_integrations.cli.common import open_engine
    from swrag_integrations.engine.engine import IndexEngine

    _sys.path.insert(0, str(_Path(__file__).parents[1]))
    from fake_embeddings import TrigramEmbedder

    (tmp_path / "a.md").write_text("The harbour ferry leaves at noon. " * 20, encoding="utf-8")
    capsys.readouterr()
    for folder, show in (("quiet", None), ("bars", True)):
        engine = IndexEngine.open(tmp_path / folder, embedding=TrigramEmbedder(32),
                                  **({"show_progress": show} if show else {}))
        report = engine.add_files(tmp_path / "a.md")
        engine.close()
        assert report.ids
        err = capsys.readouterr().err
        assert ("chunk" in err) is bool(show), err
    args = cli.build_parser(["index"]).parse_args(["index", str(tmp_path / "a.md"), "--persist-dir",
                                                   str(tmp_path / "cli")])
    engine = open_engine(args, must_exist=False)
    assert engine.show_progress
    engine.close()


def test_a_relative_persist_dir_is_resolved_in_each_working_folder(tmp_path, monkeypatch, fake_default_embeddings,
                                                                    capsys):
    """The same relative --persist-dir from two folders names two indexes (the embedded
    Chroma of the first is not reused for the second)."""
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.md").write_text(f"The {name} harbour ferry leaves at noon.", encoding="utf-8")
        monkeypatch.chdir(tmp_path / name)
        code, out, err = _run(capsys, "index", "a.md", "--persist-dir", "ix")
        assert code == 0, err
        assert "from 1 sources" in out and (tmp_path / name / "ix" / "sources").is_dir()


def test_retrieval_only_gives_what_the_retriever_gives(docs_index, capsys):
    """`ask --retrieval-only` (framework-free, on the engine) returns the windows the
    LangChain retriever returns for the same settings."""
    from swrag_integrations.langchain.index import SlidingWindowIndex

    question = "When does the harbour ferry return?"
    code, out, err = _run(capsys, "ask", question, "--persist-dir", "ix", "--retrieval-only", "--json", "--k", "2",
                          "--budget", "40")
    assert code == 0, err
    got = [(s["source_id"], s["start_index"], s["end_index"], s["text"]) for s in json.loads(out)["sources"]]
    index = SlidingWindowIndex(docs_index / "ix")
    docs = index.as_retriever(k=2, budget_tokens=40).invoke(question)
    index.close()
    assert got == [(d.metadata["source_id"], d.metadata["start_index"], d.metadata["end_index"], d.page_content)
                   for d in docs]
    assert got
