"""load_files: the ingest room's gives the engine's plain documents (no framework); the
LangChain face's gives LangChain Documents, with the same text, metadata and skips (issue 40)."""

from __future__ import annotations

from langchain_core.documents import Document

from swrag_integrations.ingest.files import load_files as load_plain
from swrag_integrations.langchain import load_files
from swrag_integrations.stores.storage import PlainDocument


def test_both_loaders_read_the_same_and_differ_only_in_the_document_type(tmp_path):
    (tmp_path / "a.txt").write_text("The harbour exports tea.", encoding="utf-8")
    (tmp_path / "b.csv").write_text("name,port\nAnn,Leith\nBo,Hull\n", encoding="utf-8")
    (tmp_path / "c.txt").write_bytes(b"\x00\x01binary")
    plain, lc = load_plain(tmp_path), load_files(tmp_path)
    assert all(type(d) is PlainDocument for d in plain.documents)
    assert all(type(d) is Document for d in lc.documents)
    assert [(d.page_content, d.metadata) for d in lc.documents] == [(d.page_content, d.metadata) for d in plain.documents]
    assert len(lc.documents) == 3 and [s.reason for s in lc.skipped] == [s.reason for s in plain.skipped] != []
    assert lc.files == plain.files


def test_the_tuner_still_loads_folders(tmp_path):
    from swrag_integrations.tuning.tune import load_sources

    (tmp_path / "a.txt").write_text("The harbour exports tea.", encoding="utf-8")
    [source] = load_sources([tmp_path])
    assert source.text == "The harbour exports tea." and source.title == str(tmp_path / "a.txt")
