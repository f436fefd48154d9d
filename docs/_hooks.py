"""MkDocs hook: the API reference, generated from the package's public names.

One page per public module: the package ``swrag_integrations`` itself and each of its direct
submodules and subpackages (not starting with ``_``) that declares ``__all__``. Each page holds
one mkdocstrings ``::: path`` directive per name in that ``__all__``, pointing at the module
that defines the name, so the reference follows the package when modules move and every
public name appears.

Nothing is imported: ``__all__`` is read from the source (a list or tuple of strings, with
``*NAME`` of a module-level list or tuple, or ``sorted(NAME)`` of a dict literal), and each
name is found where griffe (mkdocstrings-python's static loader) says it is defined: a
re-export resolved to its target, else the one submodule of the package that defines it.
``python docs/_hooks.py`` prints the pages without building the site.
"""

from __future__ import annotations

import ast
from importlib.util import resolve_name
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = "swrag_integrations"
API_DIR = "api"
NAV_TITLE = "API reference"
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ApiPage:
    """One generated page: a public module and where each of its public names is defined."""

    module: str
    names: dict[str, str]  # public name -> dotted path of its definition
    elsewhere: frozenset[str] = frozenset()  # names documented on another page (linked from here)
    summary: str = ""  # the first paragraph of the module's docstring

    @property
    def path(self) -> str:
        """The page's path inside the docs folder, e.g. ``api/swrag_integrations.engine.md``."""
        return f"{API_DIR}/{self.module}.md"

    def markdown(self) -> str:
        """The page: one directive per public name (module docstrings are reST layout tables
        written for readers of the source: they do not render as Markdown)."""
        lines = [f"# `{self.module}`", "", self.summary, ""]
        for name, target in self.names.items():
            if name in self.elsewhere:
                lines += [f"- `{name}`: [`{target}`][{target}]", ""]
                continue
            lines += [f"::: {target}", "    options:", "      show_root_heading: true",
                      "      show_root_full_path: false", f"      heading: {name}", ""]
        return "\n".join(lines)


def _static_all(path: Path) -> list[str] | None:
    """The ``__all__`` a module's source assigns, evaluated without importing it (``None`` if none)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    assigned: dict[str, ast.expr] = {}
    result: list[str] | None = None
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    assigned[target.id] = node.value
                    if target.id == "__all__":
                        result = _evaluate(node.value, assigned, path)
    return result


def _evaluate(expr: ast.expr, assigned: dict[str, ast.expr], path: Path) -> list[str]:
    """The names an ``__all__`` expression lists (the forms the package uses)."""
    if isinstance(expr, (ast.List, ast.Tuple)):
        names: list[str] = []
        for item in expr.elts:
            if isinstance(item, ast.Starred) and isinstance(item.value, ast.Name) and item.value.id in assigned:
                names += _evaluate(assigned[item.value.id], assigned, path)
            elif isinstance(item, ast.Constant) and isinstance(item.value, str):
                names.append(item.value)
            else:
                raise ValueError(f"{path}: __all__ item {ast.unparse(item)!r} is not a string literal")
        return names
    if isinstance(expr, ast.Dict):
        return [key.value for key in expr.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)]
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "sorted"
            and len(expr.args) == 1 and isinstance(expr.args[0], ast.Name) and expr.args[0].id in assigned):
        return sorted(_evaluate(assigned[expr.args[0].id], assigned, path))
    raise ValueError(f"{path}: cannot read __all__ = {ast.unparse(expr)} without importing it")


def _lazy_table(path: Path, package: str) -> dict[str, str]:
    """Name -> submodule of a package's lazy exports (the dict it passes to ``lazy_exports``; its
    deprecated names, the third argument, are not public and get no page entry)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    dicts = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Name) and node.args[1].id in dicts):
            table = dicts[node.args[1].id]
            return {key.value: resolve_name(value.value if value.value.startswith(".") else f".{value.value}", package)
                    for key, value in zip(table.keys, table.values)
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Constant)}
    return {}


def public_modules(root: Path = ROOT) -> dict[str, list[str]]:
    """Each public module's dotted name and its ``__all__``: the package, then its children; a
    subpackage without ``__all__`` (a room of modules, e.g. ``core``) stands for its children."""
    package_dir = root / PACKAGE
    modules = {PACKAGE: _static_all(package_dir / "__init__.py") or []}

    def visit(folder: Path, dotted: str) -> None:
        for child in sorted(folder.iterdir()):
            if child.name.startswith("_"):
                continue
            source = child / "__init__.py" if child.is_dir() else child
            if child.is_file() and child.suffix != ".py" or not source.is_file():
                continue
            names = _static_all(source)
            if names:
                modules[f"{dotted}.{child.stem}"] = names
            elif child.is_dir():
                visit(child, f"{dotted}.{child.stem}")

    visit(package_dir, PACKAGE)
    return modules


def _definitions(module: Any) -> dict[str, list[str]]:
    """Name -> dotted paths of the objects defined (not re-exported) in ``module`` and below it."""
    found: dict[str, list[str]] = {}
    for member in module.members.values():
        if member.is_alias:
            continue
        if member.is_module:
            for name, paths in _definitions(member).items():
                found.setdefault(name, []).extend(paths)
        else:
            found.setdefault(member.name, []).append(member.path)
    return found


def api_pages(root: Path = ROOT) -> list[ApiPage]:
    """The reference's pages; a public name that cannot be located raises ``ValueError``."""
    import griffe

    package = griffe.load(PACKAGE, search_paths=[str(root)], try_relative_path=False, resolve_aliases=False,
                          allow_inspection=False)
    pages = []
    for dotted, names in public_modules(root).items():
        module = package if dotted == PACKAGE else package[dotted.split(".", 1)[1]]
        # Defined in the module itself, else below it, else (the top package's lazy names) anywhere.
        scopes = [_definitions(module), _definitions(package)] if module.is_init_module else [{}, _definitions(package)]
        lazy = _lazy_table(Path(module.filepath), dotted) if module.is_init_module else {}
        located: dict[str, str] = {}
        for name in names:
            member = module.members.get(name)
            if name in lazy:
                located[name] = f"{lazy[name]}.{name}"
            elif member is not None and member.is_alias:
                located[name] = member.target_path
            elif member is not None:
                located[name] = member.path
            else:
                located[name] = _unique(name, dotted, scopes)
        summary = module.docstring.value.split("\n\n")[0] if module.docstring else ""
        pages.append(ApiPage(dotted, located, summary=summary))
    return _documented_once(pages)


def _documented_once(pages: list[ApiPage]) -> list[ApiPage]:
    """Each definition in full on one page only: the page of the innermost public module that
    exports it (``swrag_integrations.langchain`` for the splitters the top package re-exports);
    the other pages link to it."""
    owner: dict[str, str] = {}
    for page in pages:
        for target in page.names.values():
            holder = owner.get(target)
            inside = target.startswith(page.module + ".")
            if holder is None or inside and (not target.startswith(holder + ".") or len(page.module) > len(holder)):
                owner[target] = page.module
    return [ApiPage(page.module, page.names, frozenset(name for name, target in page.names.items()
                                                       if owner[target] != page.module), page.summary)
            for page in pages]


def _unique(name: str, module: str, scopes: list[dict[str, list[str]]]) -> str:
    """The one definition of ``name`` in the first scope that has any."""
    for scope in scopes:
        paths = scope.get(name, [])
        if module != PACKAGE:
            paths = [path for path in paths if path.startswith(module + ".")] or paths
        if len(paths) == 1:
            return paths[0]
        if len(paths) > 1:
            raise ValueError(f"{module}.__all__ names {name!r}, defined in several places: {', '.join(paths)}")
    raise ValueError(f"{module}.__all__ names {name!r}, which no module of {PACKAGE} defines")


_PAGES: list[ApiPage] = []


def on_config(config: Any) -> Any:
    """Fill the nav's ``API reference`` entry with the generated pages."""
    _PAGES[:] = api_pages()
    entries = [{page.module: page.path} for page in _PAGES]
    for index, item in enumerate(config.nav or []):
        if isinstance(item, dict) and NAV_TITLE in item:
            config.nav[index] = {NAV_TITLE: entries}
            return config
    raise ValueError(f"mkdocs.yml: the nav has no {NAV_TITLE!r} entry for the generated pages")


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's files (nothing is written into docs/)."""
    from mkdocs.structure.files import File

    for page in _PAGES:
        files.append(File.generated(config, page.path, content=page.markdown()))
    return files


if __name__ == "__main__":
    for page in api_pages():
        print(f"{page.path}: {len(page.names)} names")
