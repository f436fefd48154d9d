"""Lazy package exports: a package lists what it offers, each name is imported from its
submodule on first use (so ``import swrag_integrations.engine`` pulls in no framework
until a class that needs one is asked for)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose ``names`` map each exported name
    to the submodule holding it (``"store"`` or ``".store"``, relative to the package).
    A name is imported on first access and then kept as a package attribute."""
    table = {name: module if module.startswith(".") else f".{module}" for name, module in names.items()}

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
