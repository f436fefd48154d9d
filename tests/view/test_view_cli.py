"""`swrag view` (split, retrieval, answer): pages written, bad input gives a message and
exit code 2 or 3 through the swrag command's own error handling."""

import json

import pytest
from test_view_answer import TEXTS, result

from swrag_integrations.cli import app as cli
from swrag_integrations.cli.view import parse_configs
from swrag_integrations.view.html import marked_regions, region_text
from swrag_integrations.core.windows import WindowConfig

DOC = ("The Marrow Point Lighthouse was first lit on 14 October 1874. The tower is 31 metres tall.\r\n"
       "灯塔高31米，于1874年首次点亮。🌊 Ships navigate by satellite now.\n") * 12


@pytest.fixture
def swrag():
    """The ``swrag`` command's entry point as installed: ``swrag view`` must be wired in cli.py itself."""
    return cli.main


def test_split_page(swrag, tmp_path, capsys):
    path = tmp_path / "doc.txt"
    path.write_text(DOC, encoding="utf-8", newline="")
    out = tmp_path / "split.html"
    code = swrag(["view", "split", str(path), "--strategy", "DDS,FFS", "--window", "24", "--step", "2,8", "-o",
                  str(out)])
    assert code == 0, capsys.readouterr().err
    assert f"wrote {out}" in capsys.readouterr().out
    regions = marked_regions(out.read_text(encoding="utf-8"))
    assert "\r\n" in DOC  # read as the index reads it: CRLF kept, offsets into the file's characters
    for doc, config in (("0", WindowConfig("DDS", 24, 2)), ("1", WindowConfig("FFS", 24, 8))):
        for a, b in config.spans(DOC):
            assert region_text(regions, doc, a, b) == DOC[a:b]


def test_split_reads_utf8_with_bom_and_refuses_other_bytes(swrag, tmp_path, capsys):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffA line.\r\nAnother line.".encode("utf-8"))
    out = tmp_path / "bom.html"
    assert swrag(["view", "split", str(path), "--unit", "char", "--window", "8", "-o", str(out)]) == 0
    regions = marked_regions(out.read_text(encoding="utf-8"))
    assert region_text(regions, "0", 0, 22) == "A line.\r\nAnother line."
    path.write_bytes(b"caf\xe9")
    assert swrag(["view", "split", str(path)]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err


def test_split_defaults_to_the_bundled_sample(swrag, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert swrag(["view", "split"]) == 0
    assert "Windows of sample.md" in (tmp_path / "swrag-view-split.html").read_text(encoding="utf-8")


def test_parse_configs():
    configs = parse_configs("dds,ffs,dfs", "64", None, "token")
    assert [(c.strategy, c.window_size, c.step) for c in configs] == [("DDS", 64, 3), ("FFS", 64, 16), ("DFS", 64, 16)]
    assert [c.window_size for c in parse_configs("DDS", "32,64", "1", "char")] == [32, 64]
    with pytest.raises(ValueError, match="2 values given for 3"):
        parse_configs("DDS,FFS,DFS", "1,2", None, "token")


@pytest.mark.parametrize("argv, code, message", [
    (["view", "split", "MISSING"], 3, "no such file"),
    (["view", "split", "--window", "abc"], 2, "'abc' is not an integer"),
    (["view", "split", "--strategy", "XYZ"], 2, "strategy must be one of"),
    (["view", "split", "--window", "0"], 2, "window_size must be > 0"),
    (["view", "split", "--unit", "word"], 2, "unit must be 'token' or 'char'"),
    (["view", "split", "-o", "NOFOLDER/x.html"], 3, "does not exist"),
    (["view", "retrieval", "a question", "--persist-dir", "NOINDEX"], 3, "no index at"),
    (["view", "retrieval", "  ", "--persist-dir", "NOINDEX"], 2, "must not be empty"),
    (["view", "answer", "MISSING.json"], 3, "no such file"),
    (["view"], 2, ""),
])
def test_bad_input_exit_codes(swrag, tmp_path, monkeypatch, capsys, argv, code, message):
    monkeypatch.chdir(tmp_path)
    try:
        got = swrag(argv)
    except SystemExit as exc:  # argparse usage errors
        got = exc.code
    err = capsys.readouterr().err
    assert got == code, err
    assert message in err and "Traceback" not in err


def test_answer_page_and_its_errors(swrag, tmp_path, capsys):
    good = tmp_path / "result.json"
    good.write_text(json.dumps(result(), ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "answer.html"
    assert swrag(["view", "answer", str(good), "-o", str(out)]) == 0, capsys.readouterr().err
    regions = marked_regions(out.read_text(encoding="utf-8"))
    assert any(r.doc == "answer" and r.text == "The keeper lit the lamp." for r in regions)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json", encoding="utf-8")
    assert swrag(["view", "answer", str(bad_json)]) == 2
    assert "not a JSON file" in capsys.readouterr().err
    outside = result()
    outside["grounding"]["sentences"][0]["supports"].append(
        {"source": "x", "source_id": "s-en", "start_index": 400, "end_index": 10_000, "score": 1.0})
    bad = tmp_path / "outside.json"
    bad.write_text(json.dumps(outside, ensure_ascii=False), encoding="utf-8")
    assert swrag(["view", "answer", str(bad), "-o", str(out)]) == 2
    assert "outside the retrieved spans" in capsys.readouterr().err
    assert set(TEXTS) == {"s-en", "s-zh", "s-emoji", "s-crlf"}


def test_retrieval_page_from_an_indexed_folder(swrag, tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "lighthouse.txt").write_text(DOC, encoding="utf-8", newline="")
    store = tmp_path / "store"
    assert swrag(["index", str(folder), "--persist-dir", str(store)]) == 0, capsys.readouterr().err
    out = tmp_path / "retrieval.html"
    code = swrag(["view", "retrieval", "When was the lighthouse first lit?", "--persist-dir", str(store),
                  "--budget", "80", "--k-child", "8", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    document = out.read_text(encoding="utf-8")
    regions = marked_regions(document)
    assert regions and all(r.text == DOC[r.start:r.end] for r in regions)
    assert "When was the lighthouse first lit?" in document and "budget 80" in document
