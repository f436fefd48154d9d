"""``swrag eval --llm``: arguments are validated before any named code runs; every bad value is exit 2."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest
from langchain_core.language_models.fake import FakeListLLM

from swrag_integrations.cli import app as top_cli
from swrag_integrations.cli import eval as eval_cli


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    row = {"input": "What is the code?", "context": "The code is 4711. " * 20, "answers": ["4711"], "_id": "q1"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def llm_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module ``swrag_test_llms`` on sys.path that records its import and factory calls in a file."""
    marker = tmp_path / "ran.txt"
    (tmp_path / "swrag_test_llms.py").write_text(textwrap.dedent(f"""
        from pathlib import Path
        from langchain_core.language_models.fake import FakeListLLM

        MARKER = Path({str(marker)!r})
        with MARKER.open("a") as fh:
            fh.write("imported\\n")
        NOT_CALLABLE = 42

        def make():
            with MARKER.open("a") as fh:
                fh.write("called\\n")
            return FakeListLLM(responses=["4711"])

        def boom():
            raise RuntimeError("no API key")

        class Wrapper:
            def as_langchain(self):
                return FakeListLLM(responses=["4711"])

        def wrapped():
            return Wrapper()
    """), encoding="utf-8")
    (tmp_path / "swrag_broken_llms.py").write_text("raise ImportError('needs torch 9')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    for name in ("swrag_test_llms", "swrag_broken_llms"):
        sys.modules.pop(name, None)


def run(capsys, *argv: str) -> tuple[int, str]:
    code = top_cli.main(["eval", *argv])
    return code, capsys.readouterr().err


def base(data: Path, tmp_path: Path) -> list[str]:
    return ["--data", str(data), "--strategies", "dds", "--windows", "64", "--steps", "2", "--no-progress",
            "--no-plots", "--bootstrap", "10", "--out", str(tmp_path / "out")]


@pytest.mark.parametrize("spec, message", [
    ("nomodule:factory", "cannot import module 'nomodule'"),
    ("os:nonexistent", "module 'os' has no attribute 'nonexistent'"),
    ("os:getcwd", "getcwd() returned str, not a LangChain LLM"),
    ("os:sep", "'sep' is a str, not a callable factory"),
    ("swrag_test_llms:boom", "boom() raised RuntimeError: no API key"),
    ("swrag_test_llms:NOT_CALLABLE", "not a callable factory"),
    ("swrag_broken_llms:make", "importing 'swrag_broken_llms' raised ImportError: needs torch 9"),
    ("justaname", "use 'default', 'fake:ANSWER|ANSWER' or 'module:factory'"),
    (":make", "use 'default'"),
    ("os:", "use 'default'"),
    ("os:getcwd()", "use 'default'"),
])
def test_bad_llm_is_a_usage_error_not_a_traceback(tmp_path, data, llm_module, capsys, spec, message):
    code, err = run(capsys, *base(data, tmp_path), "--llm", spec)
    assert code == 2
    assert err.startswith("swrag: error: --llm ") and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing was run


def test_data_and_options_are_validated_before_the_llm_code_is_imported(tmp_path, data, llm_module, capsys):
    spec = ["--llm", "swrag_test_llms:make"]
    code, err = run(capsys, *base(tmp_path / "missing.jsonl", tmp_path), *spec)
    assert code == 3 and "missing.jsonl" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "q", "context": "c", "answers": ["a"]}\nnot json\n', encoding="utf-8")
    code, err = run(capsys, *base(bad, tmp_path), *spec)
    assert code == 2 and "bad.jsonl:2: not JSON" in err
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"input": "café"}\n'.encode("latin-1"))
    code, err = run(capsys, *base(latin, tmp_path), *spec)
    assert code == 2 and "latin.jsonl: not UTF-8" in err
    code, err = run(capsys, *base(data, tmp_path), "--strategies", "parent", "--rse", *spec)
    assert code == 2 and "--rse" in err
    (tmp_path / "file").write_text("x")
    code, err = run(capsys, *base(data, tmp_path)[:-1], str(tmp_path / "file"), *spec)
    assert code == 2 and "--out" in err
    assert not llm_module.exists()  # the module was never imported


def test_valid_factory_is_imported_called_and_passed_on(tmp_path, data, llm_module, capsys, monkeypatch):
    seen = {}

    def fake_run_eval(data_files, configs, out, **kwargs):
        seen["llm"] = kwargs["llm"]
        return []

    monkeypatch.setattr(eval_cli, "run_eval", fake_run_eval)
    code, _ = run(capsys, *base(data, tmp_path), "--llm", "swrag_test_llms:make")
    assert code == 0 and isinstance(seen["llm"], FakeListLLM)
    assert llm_module.read_text().split() == ["imported", "called"]
    code, _ = run(capsys, *base(data, tmp_path), "--llm", "swrag_test_llms:wrapped")  # as_langchain() is used
    assert code == 0 and isinstance(seen["llm"], FakeListLLM)


def test_llm_is_not_imported_when_no_step_needs_it(tmp_path, data, llm_module, capsys, monkeypatch):
    monkeypatch.setattr(eval_cli, "run_eval", lambda *a, **k: [])
    code, _ = run(capsys, *base(data, tmp_path), "--retrieval-only", "--llm", "swrag_test_llms:make")
    assert code == 0 and not llm_module.exists()
    code, err = run(capsys, *base(data, tmp_path), "--retrieval-only", "--llm", "oops")  # syntax still checked
    assert code == 2 and "--llm 'oops'" in err


def test_stand_alone_entry_point_maps_llm_errors_to_2(tmp_path, data, capsys):
    assert eval_cli.main([*base(data, tmp_path), "--llm", "os:getcwd"]) == 2
    assert "swrag eval: error: --llm 'os:getcwd'" in capsys.readouterr().err


def test_llm_help_says_it_runs_the_named_code():
    help_text = " ".join(eval_cli.build_parser().format_help().split())
    assert "IMPORTS the Python module and RUNS factory()" in help_text
    assert "arbitrary code" in help_text
