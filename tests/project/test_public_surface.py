"""The public surface a newcomer can hold (issue 40, item 5).

The packages' ``__all__`` lists (the top package and each room's ``__init__``) together name
at most ``SURFACE_LIMIT`` objects (the issue's goal: about 120); each listed name resolves;
the names a package no longer lists but used to still import from it for one release, with a
``DeprecationWarning`` naming the module that defines them; and every name the README and
the getting-started and how-to pages import from a package is one that package exports.
"""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import pytest

from swrag_integrations.core._lazy import _absolute, lazy_exports

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "swrag_integrations"
SURFACE_LIMIT = 104  # the count reached when the surface was cut (+ langchain.load_files, which the docs teach, and stores.PostgresStorage); the goal is ~120
TAUGHT = [ROOT / "README.md", *sorted((ROOT / "docs" / "getting-started").glob("*.md")),
          *sorted((ROOT / "docs" / "how-to").glob("*.md"))]
IMPORT = re.compile(r"^[ \t]*from (swrag_integrations(?:\.\w+)*) import (\([^)]*\)|[^\n]*)", re.M)


def _packages() -> list[str]:
    """Every package of the project (each folder with an ``__init__.py``), dotted."""
    return sorted(".".join(init.relative_to(ROOT).parent.parts) for init in PACKAGE_DIR.rglob("__init__.py"))


def _exports() -> dict[str, list[str]]:
    """Each package's ``__all__`` (packages without one export nothing)."""
    return {name: list(getattr(importlib.import_module(name), "__all__", [])) for name in _packages()}


def _deprecated() -> list[tuple[str, str, str]]:
    """``(package, name, defining module)`` for every name a package keeps only for one release."""
    found = []
    for package in _packages():
        table = getattr(importlib.import_module(package), "_DEPRECATED", {})
        found += [(package, name, _absolute(module, package)) for name, module in sorted(table.items())]
    return found


def _imported_names(text: str) -> list[tuple[str, str]]:
    """``(module, name)`` for each ``from swrag_integrations... import name`` in ``text``."""
    pairs = []
    for module, body in IMPORT.findall(text):
        body = re.sub(r"#[^\n]*", "", body).strip("()")
        pairs += [(module, item.split(" as ")[0].strip()) for item in body.replace("\n", " ").split(",") if item.strip()]
    return pairs


def _python_blocks(path: Path) -> str:
    """The ```` ```python ```` blocks of a Markdown file, joined."""
    return "\n".join(re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S))


def test_surface_stays_small() -> None:
    counts = {package: len(names) for package, names in _exports().items()}
    total = sum(counts.values())
    assert total <= SURFACE_LIMIT, f"{total} public names (limit {SURFACE_LIMIT}): {counts}"
    assert all(len(names) == len(set(names)) for names in _exports().values())


def test_every_exported_name_resolves_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for package, names in _exports().items():
            module = importlib.import_module(package)
            for name in names:
                assert getattr(module, name) is not None, f"{package}.{name}"
                assert name in dir(module), f"dir({package}) lacks {name}"


@pytest.mark.parametrize(("package", "name", "module"), _deprecated(), ids=lambda value: str(value))
def test_deprecated_name_warns_and_is_the_same_object(package: str, name: str, module: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"import it from {re.escape(module)}$"):
        value = getattr(importlib.import_module(package), name)
    assert value is getattr(importlib.import_module(module), name)
    assert name not in dir(importlib.import_module(package))
    assert name not in getattr(importlib.import_module(package), "__all__", [])


def test_from_import_of_a_deprecated_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="swrag_integrations.methods.raptor.tree"):
        from swrag_integrations.methods.raptor import Leaf  # noqa: F401


def test_a_name_is_exported_or_deprecated_not_both() -> None:
    with pytest.raises(ValueError, match="both exported and deprecated"):
        lazy_exports("swrag_integrations.engine", {"IndexEngine": "engine"}, {"IndexEngine": "engine"})


@pytest.mark.parametrize("page", TAUGHT, ids=lambda path: str(path.relative_to(ROOT)))
def test_names_the_docs_teach_are_exported(page: Path) -> None:
    packages = set(_packages())
    exports = _exports()
    taught = [(module, name) for module, name in _imported_names(_python_blocks(page)) if module in packages]
    for module, name in taught:
        folder = PACKAGE_DIR.parent.joinpath(*module.split("."))
        is_submodule = (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()
        assert is_submodule or name in exports[module], f"{page.name} imports {name} from {module}, which does not export it"


def test_the_project_imports_no_deprecated_name_from_a_package() -> None:
    """The package, its tests, benchmarks, scripts, cookbook and docs import each name from where it is public."""
    deprecated = {(package, name): module for package, name, module in _deprecated()}
    sources = [path for folder in ("swrag_integrations", "tests", "benchmarks", "scripts", "cookbook", "docs")
               for path in (ROOT / folder).rglob("*") if path.suffix in {".py", ".md"}]
    sources += [ROOT / "README.md"]
    this = Path(__file__).resolve()
    offenders = [f"{path.relative_to(ROOT)}: from {package} import {name} (use {deprecated[package, name]})"
                 for path in sources if path.resolve() != this
                 for package, name in _imported_names(path.read_text(encoding="utf-8"))
                 if (package, name) in deprecated]
    assert not offenders, "\n".join(offenders)



def test_api_reference_reads_a_lazy_table_with_deprecated_names(tmp_path: Path) -> None:
    """docs/_hooks.py locates a lazy name through the table given to ``lazy_exports`` even when a
    deprecated table follows it, and gives the deprecated names no entry."""
    import sys

    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import _hooks
    finally:
        sys.path.remove(str(ROOT / "docs"))
    package = tmp_path / _hooks.PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('__all__ = []\n')
    (package / "sub" / "__init__.py").write_text(
        "from x import lazy_exports\n_LAZY = {'main': 'app'}\n_DEPRECATED = {'old': 'app'}\n__all__ = sorted(_LAZY)\n"
        "__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)\n")
    for module in ("app", "other"):  # ``main`` is defined twice: only the lazy table says which is public
        (package / "sub" / f"{module}.py").write_text('def main():\n    """Run."""\n\ndef old():\n    """Old."""\n')
    pages = {page.module: page for page in _hooks.api_pages(tmp_path)}
    assert pages[f"{_hooks.PACKAGE}.sub"].names == {"main": f"{_hooks.PACKAGE}.sub.app.main"}
