"""The documentation site: every code block of its pages runs as written, and the site builds.

Per page, in page order, in a fresh folder holding ``docs/`` with the bundled sample document
(as tests/project/test_readme.py does for the README): Python blocks run in one namespace, shell
blocks run in bash with ``swrag`` being this checkout's CLI. A block that cannot run here is
preceded by ``<!-- skip: reason -->`` (a server, a dev set, a fresh environment); the skipped
blocks are counted and their reasons must be given. The measurement reports kept at their
old paths (docs/eval/, scaling.md, view.md, bench_splitters.md) hold the commands that
produced them (minutes to hours each) and are not examples: they are not run here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REPORTS = ("eval/", "scaling.md", "view.md", "bench_splitters.md")

# A fence, with the HTML comment that may precede it (blank lines allowed in between).
FENCE = re.compile(r"(?:<!--\s*skip:\s*(?P<skip>[^>]*?)\s*-->\s*\n)?^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```\s*$",
                   re.S | re.M)
SHELL = {"bash", "sh", "shell", "console"}


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str
    number: int
    lang: str
    code: str
    skip: str | None  # the reason given in <!-- skip: ... -->, else None

    @property
    def name(self) -> str:
        return f"docs/{self.page} block {self.number} ({self.lang or 'text'})"


def example_pages() -> list[str]:
    """The site's pages that hold examples (every page but the measurement reports)."""
    pages = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
    return [page for page in pages if not page.startswith(REPORTS)]


def blocks(page: str) -> list[Block]:
    """The fenced blocks of one page, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [Block(page, number, match["lang"], match["code"], match["skip"])
            for number, match in enumerate(FENCE.finditer(text))]


def test_every_block_runs_or_says_why_not():
    """A block is Python or shell (and so runs), or carries a skip reason; the count is known."""
    found = [block for page in example_pages() for block in blocks(page)]
    unmarked = [block.name for block in found
                if block.skip is None and block.lang not in SHELL | {"python"}]
    assert not unmarked, f"blocks that neither run nor say why: {unmarked}"
    empty = [block.name for block in found if block.skip is not None and not block.skip.strip()]
    assert not empty, f"skip markers without a reason: {empty}"
    run = [block for block in found if block.skip is None]
    assert len([block for block in run if block.lang == "python"]) >= 10
    skipped = [block for block in found if block.skip is not None]
    print(f"{len(run)} blocks run, {len(skipped)} skipped:", *(f"{b.name}: {b.skip}" for b in skipped), sep="\n  ")


def test_fence_parser_sees_skip_markers(tmp_path, monkeypatch):
    """The marker applies to the fence right after it and to no other."""
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    (tmp_path / "p.md").write_text("<!-- skip: needs a server -->\n```bash\nswrag x\n```\n\n```python\nx = 1\n```\n")
    first, second = blocks("p.md")
    assert (first.lang, first.skip, first.code) == ("bash", "needs a server", "swrag x\n")
    assert (second.lang, second.skip) == ("python", None)


def _swrag_on_path(folder: Path) -> dict[str, str]:
    """An environment whose ``swrag`` is this checkout's CLI run by this interpreter."""
    shim = folder / "swrag"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m swrag_integrations.cli "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


# Pages whose examples fail on today's library code, each for a bug being fixed elsewhere (strict:
# the fix makes the test pass, and the marker must then go).
# Pages whose examples fail on a known library bug: {page: the bug}, run as strict xfail
# (empty now: split-then-add offsets and from_documents(transformations=) are fixed).
KNOWN_FAILURES: dict[str, str] = {}


def _example_params() -> list:
    pages = [page for page in example_pages() if any(b.skip is None for b in blocks(page))]
    return [pytest.param(page, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[page], strict=True))
            if page in KNOWN_FAILURES else page for page in pages]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("page", _example_params())
def test_page_examples_run_as_written(page, tmp_path, monkeypatch, shared_cache):
    from swrag_integrations.cli import sample_path

    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    shutil.copy(sample_path(), work / "docs" / "sample.md")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("SWRAG_CACHE", str(shared_cache))  # the run's model cache, never ~/.cache/swrag
    monkeypatch.setenv("SWRAG_HOME", str(tmp_path / "home"))
    env = _swrag_on_path(bin_dir)
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.skip is not None:
            continue
        if block.lang == "python":
            try:
                exec(compile(block.code, block.name, "exec"), namespace)
            except Exception as exc:  # noqa: BLE001 - name the block that failed
                raise AssertionError(f"{block.name} failed: {type(exc).__name__}: {exc}\n{block.code}") from exc
        else:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"{block.name} exited {done.returncode}\n{block.code}\n{done.stderr[-3000:]}"


@pytest.mark.integration
def test_site_builds_strict(tmp_path):
    """mkdocs build --strict: no broken link, no missing reference, every docstring renders;
    the API reference has one page per public module with every public name."""
    pytest.importorskip("mkdocs", reason="the [docs] extra is not installed")
    sys.path.insert(0, str(DOCS))
    try:
        import _hooks
    finally:
        sys.path.remove(str(DOCS))
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    modules = _hooks.public_modules()
    assert {"swrag_integrations", "swrag_integrations.engine", "swrag_integrations.llama_index"} <= set(modules)
    pages = {page.module: page for page in _hooks.api_pages()}
    assert set(pages) == set(modules)
    for module, names in modules.items():
        page = pages[module]
        assert list(page.names) == names
        html = (site / "api" / module / "index.html").read_text(encoding="utf-8")
        # Documented here: an anchor at its definition; documented on another page: a link to it.
        missing = [name for name, target in page.names.items()
                   if f'id="{target}"' not in html and not re.search(rf'href="[^"]*#{re.escape(target)}"', html)]
        assert not missing, f"{module}: public names missing from its API page: {missing}"


def _hooks_module():
    """docs/_hooks.py, imported from its folder."""
    pytest.importorskip("griffe", reason="the [docs] extra is not installed")
    sys.path.insert(0, str(DOCS))
    try:
        import _hooks
    finally:
        sys.path.remove(str(DOCS))
    return _hooks


def test_api_reference_names_every_public_name():
    """One page per public module, one entry per name of its __all__ (read without importing),
    each pointing at a definition that exists; a definition in full on one page only."""
    hooks = _hooks_module()
    import importlib

    pages = hooks.api_pages()
    for page in pages:
        assert list(page.names) == list(importlib.import_module(page.module).__all__), page.module
    owners: dict[str, list[str]] = {}
    for page in pages:
        for name, target in page.names.items():
            if name not in page.elsewhere:
                owners.setdefault(target, []).append(page.module)
    assert all(len(modules) == 1 for modules in owners.values()), {t: m for t, m in owners.items() if len(m) > 1}
    assert {target for page in pages for target in page.names.values()} == set(owners)
    top = next(page for page in pages if page.module == "swrag_integrations")
    assert top.names["DynamicStepTextSplitter"] == "swrag_integrations.langchain.splitters.DynamicStepTextSplitter"
    assert "DynamicStepTextSplitter" in top.elsewhere


def test_api_reference_refuses_a_name_nothing_defines(tmp_path):
    hooks = _hooks_module()
    package = tmp_path / hooks.PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('__all__ = ["real"]\n\ndef real():\n    """A function."""\n')
    (package / "sub" / "__init__.py").write_text('_NAMES = {"ghost": "mod", "thing": "mod"}\n__all__ = sorted(_NAMES)\n')
    (package / "sub" / "mod.py").write_text('def thing():\n    """Another."""\n')
    assert hooks.public_modules(tmp_path) == {hooks.PACKAGE: ["real"], f"{hooks.PACKAGE}.sub": ["ghost", "thing"]}
    with pytest.raises(ValueError, match="ghost"):
        hooks.api_pages(tmp_path)
