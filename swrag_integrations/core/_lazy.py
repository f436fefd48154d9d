"""Lazy package exports: a package lists what it offers, each name is imported from its
submodule on first use (so ``import swrag_integrations.engine`` pulls in no framework
until a class that needs one is asked for).

A package may also keep names it no longer exports: importing one of those from the
package still works, with a ``DeprecationWarning`` naming the module to import it from.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def _absolute(module: str, package: str) -> str:
    """The dotted path of ``module``, given relative to ``package`` (``"store"``, ``".store"``,
    ``"..cli.eval"``) or absolute (``"swrag_integrations.core.windows"``)."""
    if module.startswith(package.split(".", 1)[0] + "."):
        return module
    return importlib.util.resolve_name(module if module.startswith(".") else f".{module}", package)


def lazy_exports(
    package: str, names: Mapping[str, str], deprecated: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build the ``(__getattr__, __dir__)`` pair of a package's lazy names.

    Args:
        package: The package's dotted name (its ``__name__``).
        names: Each exported name mapped to the submodule that defines it, relative to the
            package (``"store"`` or ``".store"``) or absolute. A name is imported on first
            access and then kept as a package attribute.
        deprecated: Names the package no longer exports, each mapped to the module that
            defines it (same forms). Accessing one from the package warns with a
            ``DeprecationWarning`` naming that module, every time, and returns the object;
            ``dir()`` of the package leaves them out.

    Returns:
        The module-level ``__getattr__`` and ``__dir__`` for the package.

    Raises:
        ValueError: If a name is both exported and deprecated.
    """

    table = {name: _absolute(module, package) for name, module in names.items()}
    retired = {name: _absolute(module, package) for name, module in (deprecated or {}).items()}
    both = sorted(set(table) & set(retired))
    if both:
        raise ValueError(f"{package}: {', '.join(both)} both exported and deprecated; keep each in one table")

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            setattr(sys.modules[package], name, value)
            return value
        module = retired.get(name)
        if module is not None:
            warnings.warn(f"importing {name} from {package} is deprecated and will stop working in the next "
                          f"release: import it from {module}", DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
