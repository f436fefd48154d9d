"""What the README promises must run in CI: a missing piece fails there and skips elsewhere.

With the environment variable ``CI`` set (non-empty, not ``0``/``false``), a test that
cannot run because the shared data, chromium or Playwright is missing FAILS with a message
naming the missing piece and how to get it; without ``CI`` it is skipped with the same
message as its reason (``pytest -rs`` prints it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
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
    pytest.skip(message)


def require_shared(*parts: str) -> Path:
    """``../shared/<parts>``, or :func:`missing` naming the absent path."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        missing(f"the shared data ({path})", SHARED_HOW)
    return path
