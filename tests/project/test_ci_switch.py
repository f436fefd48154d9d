"""The CI switch: with ``CI`` set, missing shared data or a missing chromium fails the tests
that need it (naming what is missing and how to get it); without ``CI`` they skip with that reason.

Each case runs pytest in a subprocess: the shared-data case on a copy of this folder's
``conftest.py`` and ``ci_switch.py`` in a temporary checkout that has no ``../shared``; the
browser case on the real browser tests with ``PATH`` reduced to the interpreter's folder
(no chromium on it).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parent
TINY = '''
def test_reads_shared(shared_dir):
    assert shared_dir.is_dir()
'''


def _pytest(args: list[str], cwd: Path, ci: str | None, path: str | None = None) -> subprocess.CompletedProcess:
    """Run pytest with ``CI`` set to ``ci`` (removed when None), ``-rs`` so skip reasons print."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    if path is not None:
        env["PATH"] = path
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def checkout_without_shared(tmp_path_factory) -> Path:
    """``<tmp>/repo/tests`` with the real conftest and switch and one test that needs ``../shared``."""
    repo = tmp_path_factory.mktemp("nosharedhere") / "repo"
    tests = repo / "tests"
    tests.mkdir(parents=True)
    for name in ("conftest.py", "ci_switch.py"):
        shutil.copy(HERE / name, tests / name)
    (tests / "test_tiny.py").write_text(TINY, encoding="utf-8")
    assert not (repo.parent / "shared").exists()
    return repo


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_missing_shared_data_fails_in_ci(checkout_without_shared, ci):
    run = _pytest(["tests/test_tiny.py"], checkout_without_shared, ci)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 error" in out and "1 skipped" not in out
    assert "CI is set, so this test may not be skipped: the shared data" in out
    assert "put the project's shared data folder" in out


@pytest.mark.parametrize("ci", [None, "", "0", "false", "False"])
def test_missing_shared_data_skips_without_ci(checkout_without_shared, ci):
    run = _pytest(["tests/test_tiny.py"], checkout_without_shared, ci)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "1 skipped" in out
    assert "SKIPPED" in out and "the shared data" in out and "is missing" in out


OPTIONAL = '''
import pytest
from ci_switch import importorskip, needs

def test_imports_a_missing_package():
    importorskip("swrag_no_such_package")

@needs("swrag_no_such_package.sub", how="pip install swrag-no-such-package")
def test_marked_with_a_missing_package():
    pass

@needs("json")
def test_marked_with_an_installed_package():
    pass

def test_of_the_ipex_environment():
    importorskip("ipex_llm")
'''
MODULE_LEVEL = '''
from ci_switch import importorskip
importorskip("swrag_no_such_package")

def test_never_runs():
    pass
'''


@pytest.mark.parametrize("ci, code, outcome", [("true", 1, "1 failed, 1 passed, 1 skipped, 1 error"),
                                               (None, 0, "1 passed, 3 skipped")])
def test_missing_optional_packages_fail_in_ci(checkout_without_shared, ci, code, outcome):
    """An optional package that failed to install is a failure under CI (through
    ci_switch.importorskip or a ci_switch.needs mark), a skip naming it elsewhere; the [ipex]
    environment's own packages always skip."""
    tests = checkout_without_shared / "tests"
    (tests / "test_optional.py").write_text(OPTIONAL, encoding="utf-8")
    run = _pytest(["tests/test_optional.py"], checkout_without_shared, ci)
    out = run.stdout + run.stderr
    assert run.returncode == code, out
    assert outcome in out, out
    assert "swrag_no_such_package" in out and "pip install swrag-no-such-package" in out
    assert "ipex_llm" in out and "never required by CI" in out
    (tests / "test_module_level.py").write_text(MODULE_LEVEL, encoding="utf-8")
    run = _pytest(["tests/test_module_level.py"], checkout_without_shared, ci)
    out = run.stdout + run.stderr
    assert run.returncode == (2 if ci else 5), out  # 5: the only module skipped, no test collected
    assert ("1 error" if ci else "1 skipped") in out and "swrag_no_such_package" in out


@pytest.mark.parametrize("ci, code, summary", [("true", 1, "6 errors"), (None, 0, "6 skipped")])
def test_missing_chromium(ci, code, summary):
    bindir = Path(sys.executable).parent
    assert not any(shutil.which(name, path=str(bindir)) for name in ("chromium", "chromium-browser", "google-chrome"))
    run = _pytest(["tests/view/test_view_browser.py"], ROOT, ci, path=str(bindir))
    out = run.stdout + run.stderr
    assert run.returncode == code, out
    assert summary in out
    assert "chromium (no chromium, chromium-browser or google-chrome on PATH) is missing: apt-get install chromium" in out


@pytest.fixture
def setup_copy(tmp_path) -> tuple[Path, str]:
    """A checkout holding scripts/setup.sh with its install already done (a stub venv, a fresh stamp),
    and a ``PATH`` with only the tools the script's chromium block uses: no chromium, no apt-get."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (venv_bin / "python").chmod(0o755)
    stamp = tmp_path / ".venv" / ".swrag-installed"
    stamp.write_text("", encoding="utf-8")
    later = (tmp_path / "scripts" / "setup.sh").stat().st_mtime + 10
    os.utime(stamp, (later, later))
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("id", "tr", "dirname"):
        (tools / name).symlink_to(shutil.which(name))
    return tmp_path, str(tools)


@pytest.mark.parametrize("ci, code", [("true", 1), ("TRUE", 1), (None, 0), ("false", 0), ("0", 0)])
def test_setup_without_chromium(setup_copy, ci, code):
    checkout, path = setup_copy
    env = {"PATH": path, "HOME": str(checkout)} | ({"CI": ci} if ci is not None else {})
    run = subprocess.run([shutil.which("bash"), str(checkout / "scripts" / "setup.sh")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == code, run.stderr
    if code:
        assert "CI is set but there is no chromium on PATH" in run.stderr and "apt-get install chromium" in run.stderr
    else:
        assert "the browser tests will be skipped (apt-get install chromium)" in run.stderr
