"""Reliability, round 3: emptied CSVs, symlinked files, non-UTF-8 names, torn byte-store
values, a handle opened on an empty index, rejected configurations, a full disk."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_retrieval_reliability import mk  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def sources(idx) -> set[str]:
    """The origins (files) the index serves."""
    return {h.origin for h in idx.store.heads().values()}


# ------------------------------------------------------------ 4: emptied CSV


def _csv_folder(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "keep.txt").write_text("Kestrels nest on the north tower. " * 10)
    (folder / "rows.csv").write_text("city,export\n" + "".join(f"City{i},good{i}\n" for i in range(5)))
    return folder


@pytest.mark.parametrize("emptied", ["city,export\n", ""])
def test_a_csv_emptied_to_its_header_or_to_nothing_loses_its_rows(tmp_path, emptied):
    folder = _csv_folder(tmp_path)
    idx = mk(tmp_path / "store")
    assert idx.add_files(folder)["added"] == 6
    (folder / "rows.csv").write_text(emptied)
    report = idx.add_files(folder)
    assert report["removed"] == 5 and report["unchanged"] == 1
    assert idx.bm25_retriever(3).invoke("City3") == []
    assert sources(idx) == {str(folder / "keep.txt")}


def test_keep_missing_keeps_the_rows_of_an_emptied_csv(tmp_path):
    folder = _csv_folder(tmp_path)
    idx = mk(tmp_path / "store")
    idx.add_files(folder)
    (folder / "rows.csv").write_text("city,export\n")
    assert idx.add_files(folder, prune=False)["removed"] == 0
    assert len(idx.source_ids()) == 6


@pytest.mark.integration
def test_a_csv_emptied_to_its_header_loses_its_rows_with_workers(tmp_path):
    folder = _csv_folder(tmp_path)
    idx = mk(tmp_path / "store")
    idx.add_files(folder)
    (folder / "rows.csv").write_text("city,export\n")
    report = idx.add_files(folder, workers=2)
    assert report["removed"] == 5 and report["unchanged"] == 1
    assert sources(idx) == {str(folder / "keep.txt")}
