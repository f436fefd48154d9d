"""What the README promises must run in CI: a missing piece fails there and skips elsewhere.

With the environment variable ``CI`` set (non-empty, not ``0``/``false``), a test that
cannot run because the shared data, chromium, Playwright or an optional package (an extra
that failed to install) is missing FAILS with a message naming the missing piece and how
to get it; without ``CI`` it is skipped with the same message as its reason (``pytest -rs``
prints it). Tests ask for optional packages only through :func:`importorskip` (in a test
or at module level) and :func:`needs` (a mark); the packages of the separate ``[ipex]``
environment (:data:`OWN_ENVIRONMENT`) are not part of the CI environment and always skip.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
PACKAGES_HOW = "install the project with every extra (make setup, or pip install -e '.[all,test]')"
#: Top-level modules of environments of their own (not installed with the other extras).
OWN_ENVIRONMENT = frozenset({"ipex_llm"})
SHARED_HOW = ("put the project's shared data folder (data/eval, data/corpus; see its README.md) at ../shared "
              "beside the checkout")


def ci_requires_everything() -> bool:
    """True when ``CI`` is set to anything but empty, ``0`` or ``false`` (any case)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def missing(what: str, how: str) -> NoReturn:
    """Fail (``CI`` set) or skip (otherwise) because ``what`` is missing; ``how`` says how to get it."""
    message = f"{what} is missing: {how}"
    if ci_requires_everything():
        pytest.fail(f"CI is set, so this test may not be skipped: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require_shared(*parts: str) -> Path:
    """``../shared/<parts>``, or :func:`missing` naming the absent path."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        missing(f"the shared data ({path})", SHARED_HOW)
    return path


def installed(module: str) -> bool:
    """Whether ``module`` (dotted names too) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a dotted name whose parent package is missing
        return False


def _missing_packages(modules: list[str], how: str, detail: str = "") -> NoReturn:
    what = f"the optional package(s) {', '.join(modules)}{detail}"
    if all(m.split(".")[0] in OWN_ENVIRONMENT for m in modules):
        pytest.skip(f"{what} is missing: the [ipex] extra is an environment of its own, never required by CI",
                    allow_module_level=True)
    missing(what, how)


def importorskip(module: str, how: str = PACKAGES_HOW) -> ModuleType:
    """``module`` imported, or :func:`missing` (fail under ``CI``, else skip) naming it and
    ``how`` to get it; usable at module level. The one replacement of ``pytest.importorskip``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        _missing_packages([module], how, f" ({exc})")


def needs(*modules: str, how: str = PACKAGES_HOW) -> pytest.MarkDecorator:
    """A mark for tests that need optional ``modules``: when one is missing the test is
    skipped, or fails under ``CI`` (conftest's ``pytest_runtest_setup`` applies it)."""
    return pytest.mark.needs_packages(*[m for m in modules if not installed(m)], how=how)


def check_needs(item: pytest.Item) -> None:
    """At a test's setup: :func:`missing` for the packages its :func:`needs` marks lack."""
    for mark in item.iter_markers("needs_packages"):
        if mark.args:
            _missing_packages(list(mark.args), mark.kwargs.get("how", PACKAGES_HOW))
