"""``swrag raptor build|show|ask`` and ``swrag index --raptor``, mounted as cli.py would mount them."""

from __future__ import annotations

import argparse

import pytest

from swrag_integrations.cli.app import cmd_index
from swrag_integrations.cli.common import open_index, store_options
from swrag_integrations.cli.raptor import add_arguments, add_index_options, build_after_index


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swrag")
    sub = parser.add_subparsers(dest="command")
    raptor = sub.add_parser("raptor")
    store_options(raptor)
    add_arguments(raptor)
    index = sub.add_parser("index")
    index.add_argument("paths", nargs="+")
    store_options(index)
    add_index_options(index)
    for name, default in (("encoding", None), ("errors", "strict"), ("strategy", None), ("window", None), ("step", None)):
        index.add_argument(f"--{name}", default=default)
    index.add_argument("--keep-missing", action="store_true")
    return parser


def _doc(tmp_path):
    words = ["river", "mountain", "forest", "desert", "ocean", "valley"]
    text = "\n".join(f"The {words[i % 6]} number {i} lies near the {words[(i * 5) % 6]}. It has {i} trees."
                     for i in range(120))
    path = tmp_path / "docs" / "geo.txt"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    return path


def test_index_raptor_then_show_and_ask(tmp_path, capsys):
    path = _doc(tmp_path)
    store = str(tmp_path / "store")
    parser = _parser()
    args = parser.parse_args(["index", str(path), "--persist-dir", store, "--raptor", "--raptor-reduction", "pca"])
    assert cmd_index(args) == 0
    build_after_index(_open(args), args)
    out = capsys.readouterr().out
    assert "raptor: 1 tree(s) built" in out
    args = parser.parse_args(["raptor", "--persist-dir", store, "build", "--reduction", "pca"])
    assert args.func(args) == 0
    assert "0 tree(s) built, 1 unchanged" in capsys.readouterr().out
    args = parser.parse_args(["raptor", "--persist-dir", store, "show", "--reduction", "pca"])
    assert args.func(args) == 0
    shown = capsys.readouterr().out
    assert "layer 0:" in shown and "layer 1:" in shown and "extractive" in shown
    args = parser.parse_args(["raptor", "--persist-dir", store, "ask", "Which river has trees?", "--budget", "300",
                              "--reduction", "pca"])
    assert args.func(args) == 0
    answer = capsys.readouterr().out
    assert "of 300 tokens" in answer and "[1]" in answer


def _open(args):
    return open_index(args, must_exist=True)


def test_errors_are_clear(tmp_path):
    parser = _parser()
    args = parser.parse_args(["raptor", "--persist-dir", str(tmp_path / "none"), "build"])
    with pytest.raises(FileNotFoundError, match="swrag index"):
        args.func(args)
    path = _doc(tmp_path)
    store = str(tmp_path / "store")
    cmd_index(parser.parse_args(["index", str(path), "--persist-dir", store]))
    args = parser.parse_args(["raptor", "--persist-dir", store, "ask", "anything"])
    with pytest.raises(LookupError, match="raptor build"):
        args.func(args)
    args = parser.parse_args(["raptor", "--persist-dir", store, "show", "--source", "nope"])
    with pytest.raises(LookupError, match="nope"):
        args.func(args)
