"""The `swrag` command through its installed entry point."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_switch import missing

SWRAG = shutil.which("swrag", path=str(Path(sys.executable).parent)) or shutil.which("swrag")


def run(*args, **kwargs):
    if SWRAG is None:
        missing("the swrag entry point", "pip install -e . (it installs the swrag command)")
    return subprocess.run([SWRAG, *args], capture_output=True, text=True, timeout=300, **kwargs)


def test_split_prints_windows_of_a_file(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("One. Two. Three. Four. Five. Six.", encoding="utf-8")
    result = run("split", str(path), "--strategy", "dds", "--window", "8", "--step", "1", "--unit", "char")
    assert result.returncode == 0, result.stderr
    assert "DDS window=8 step=1 unit=char" in result.stdout
    assert "0-10" in result.stdout  # "One. Two. " is the first window
    assert "windows" in result.stdout.splitlines()[-2]


def test_split_bad_input_exit_codes(tmp_path):
    missing = run("split", str(tmp_path / "missing.txt"))
    assert missing.returncode == 3 and "no such file" in missing.stderr
    bad = run("split", "--strategy", "XYZ")
    assert bad.returncode == 2 and "strategy must be one of" in bad.stderr
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x81\x00\xfe\x00\x9f garbage")  # split reads as the index does: binary is refused
    result = run("split", str(binary))
    assert result.returncode == 2 and "binary file" in result.stderr
    unknown = run("split", "--no-such-option")
    assert unknown.returncode == 2 and "unrecognized arguments" in unknown.stderr
    assert run().returncode == 2


@pytest.mark.slow
def test_index_then_ask_retrieval_only(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    text = "Penguins live in the southern hemisphere. " * 3 + "The secret code of the vault is 7421. " + "Bananas are yellow. " * 3
    (docs / "facts.txt").write_text(text, encoding="utf-8")
    (docs / "ignored.bin").write_bytes(b"\x00\x01")
    store = str(tmp_path / "store")
    first = run("index", str(docs), "--persist-dir", store)
    assert first.returncode == 0, first.stderr
    assert "added: 1" in first.stdout
    again = run("index", str(docs), "--persist-dir", store)  # idempotent
    assert again.returncode == 0 and "unchanged: 1" in again.stdout
    ask = run("ask", "What is the secret code of the vault?", "--persist-dir", store, "--retrieval-only")
    assert ask.returncode == 0, ask.stderr
    assert "facts.txt" in ask.stdout
    start, end = (int(x) for x in ask.stdout.split("facts.txt ")[1].split(":")[0].split("-"))
    assert "7421" in text[start:end]


def test_ask_and_index_bad_input(tmp_path):
    missing = run("ask", "question?", "--persist-dir", str(tmp_path / "nothing"), "--retrieval-only")
    assert missing.returncode == 3 and "no index at" in missing.stderr
    bad_path = run("index", str(tmp_path / "nope.txt"), "--persist-dir", str(tmp_path / "s"))
    assert bad_path.returncode == 3 and "no such file or directory" in bad_path.stderr
    empty = run("ask", "   ", "--persist-dir", str(tmp_path), "--retrieval-only")
    assert empty.returncode == 2 and "must not be empty" in empty.stderr
    assert run("ask").returncode == 2  # missing question


def test_demo_store_holds_only_the_current_sample(tmp_path, monkeypatch, capsys):
    """Running the demo from two checkouts (two sample paths) must not serve both copies."""
    import swrag_integrations.cli as cli
    from swrag_integrations.langchain.index import SlidingWindowIndex

    monkeypatch.setenv("SWRAG_CACHE", str(tmp_path / "cache"))
    text = cli.sample_path().read_text(encoding="utf-8")
    for i in (1, 2):
        copy = tmp_path / f"checkout{i}" / "sample.md"
        copy.parent.mkdir()
        copy.write_text(text, encoding="utf-8")
        monkeypatch.setattr(cli, "sample_path", lambda copy=copy: copy)
        assert cli.main(["demo", "--retrieval-only", "--question", "When was it first lit?"]) == 0
    out = capsys.readouterr().out
    assert out.count("Q: When was it first lit?") == 2  # once per run
    index = SlidingWindowIndex(tmp_path / "cache" / "demo-index", show_progress=False)
    assert len(index.source_ids()) == 1


HEAVY = ("langchain_core", "torch", "transformers", "chromadb")


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (this checkout's package first on the path)."""
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)


@pytest.mark.parametrize("argv", [["--help"], ["--version"], [], ["status", "--help"], ["split", "--help"]])
def test_help_and_version_import_no_framework(argv, tmp_path):
    """Building the parser imports no subcommand's modules: `swrag --help` is fast and works
    with no extra installed."""
    code = ("import sys\nfrom swrag_integrations.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))")
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "LOADED []"


def test_subcommand_without_its_extra_says_which_in_one_line(tmp_path):
    """A missing extra: one line naming it, exit code 2, no traceback."""
    (tmp_path / "a.txt").write_text("Some text.", encoding="utf-8")
    code = ("import sys\nsys.modules['chromadb'] = None  # as if [engine] were not installed\n"
            "from swrag_integrations.cli import main\n"
            f"sys.exit(main(['index', 'a.txt', '--persist-dir', 'store']))")
    result = _python(code, tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0] == ("swrag: error: `swrag index` needs the [engine] extra (module 'chromadb' is not "
                        "installed): pip install 'swrag-integrations[engine]'")


def test_missing_extra_is_blamed_only_when_really_missing(monkeypatch):
    from swrag_integrations.cli.common import missing_extra_message

    assert missing_extra_message(ModuleNotFoundError("x", name="langchain_core"), "status") is None  # installed
    assert missing_extra_message(ModuleNotFoundError("x", name="no_such_module_xyz"), "status") is None
    assert missing_extra_message(ImportError("x"), "status") is None
    monkeypatch.setitem(sys.modules, "torch", None)
    message = missing_extra_message(ModuleNotFoundError("x", name="torch.nn"), "ask")
    assert message == ("`swrag ask` needs the [local] extra (module 'torch' is not installed): "
                       "pip install 'swrag-integrations[local]'")


@pytest.mark.parametrize("backend, shown, hidden", [("transformers", "transformers on cpu", "sym_int8"),
                                                     ("ipex-llm", "ipex-llm sym_int8 on cpu", None)])
def test_llm_loading_lines_name_the_low_bit_format_only_for_ipex(backend, shown, hidden, monkeypatch, capsys):
    """The demo's loading lines say which backend served; ``--low-bit`` is shown only when
    IPEX-LLM applied it (the transformers backend ignores it)."""
    import swrag_integrations.llm as llm_module
    from swrag_integrations.cli.app import build_parser
    from swrag_integrations.cli.common import load_llm
    from swrag_integrations.llm.generation import LoadInfo

    info = LoadInfo(source="m", backend=backend, device="cpu", low_bit="sym_int8" if backend == "ipex-llm" else None,
                    load_seconds=1.5)
    monkeypatch.setattr(llm_module, "load_llama3", lambda *a, **k: type("Loaded", (), {"info": info})())
    load_llm(build_parser().parse_args(["demo"]))
    err = capsys.readouterr().err
    assert f"loaded: {shown}, 1.5 s" in err, err
    if hidden:
        assert hidden not in err, err
