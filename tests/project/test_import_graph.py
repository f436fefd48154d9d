"""The package's import graph: no circles, no lower layer importing an application, only the
framework faces importing the frameworks, no package module imported by a string.

The graph is read from the source with ``ast`` (no import is executed): every ``import``
statement counts, at module level and inside functions (a lazy import is still a
dependency), and ``from package import Name`` where the package lists ``Name`` in its
lazy export table (``_lazy.lazy_exports``) counts as an import of the submodule that
holds ``Name``. Applications are the rooms ``cli``, ``view``, ``evaluation`` and ``tuning``
and the answer chain (``methods.chain`` and its faces ``methods.langchain_chain``,
``methods.llama_index_chain``); nothing else may import them. The faces are the
rooms ``langchain`` and ``llama_index`` and the modules named ``langchain*``/``llama_index*``/
``llamaindex*`` inside a room: only they import LangChain or LlamaIndex. A lower module that offers an HTML view gets it through a registration hook
that the view module fills in when it is imported (``swrag_integrations.core.display``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = "swrag_integrations"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

APPLICATION_PACKAGES = ("cli", "view", "evaluation", "tuning")
APPLICATION_MODULES = ("methods.chain", "methods.langchain_chain", "methods.llama_index_chain")
FACE_PACKAGES = ("langchain", "llama_index")
FACE_MODULE_PREFIXES = ("langchain", "llama_index", "llamaindex")
FRAMEWORK_PREFIXES = ("langchain", "llama_index")

# Circles and layering breaches tolerated: none (a new one fails the tests below).
KNOWN_CIRCLES: list[list[str]] = []
KNOWN_LAYER_BREACHES: set[str] = set()


def module_name(path: Path, root: Path = ROOT) -> str:
    """Dotted module name of a file of the package at ``root`` (``pkg/__init__.py`` is ``pkg``)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name."""
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def lazy_table(tree: ast.Module, package: str) -> dict[str, str]:
    """``{exported name: submodule}`` of a package ``__init__`` that calls
    ``lazy_exports(__name__, TABLE)`` with a dict literal ``TABLE``."""
    tables: dict[str, ast.Dict] = {}
    table_name = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    tables[target.id] = node.value
        for call in ast.walk(node):
            if (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "lazy_exports"
                    and len(call.args) == 2 and isinstance(call.args[1], ast.Name)):
                table_name = call.args[1].id
    if table_name is None or table_name not in tables:
        return {}
    out = {}
    for key, value in zip(tables[table_name].keys, tables[table_name].values):
        if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
            out[key.value] = f"{package}.{value.value.lstrip('.')}"
    return out


def _imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(target module, imported names)`` for every import statement of a module."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    type_only = {id(inner) for node in ast.walk(tree)
                 if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for stmt in node.body for inner in ast.walk(stmt)}  # never executed: not an import
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                target = node.module or ""
            yield target, tuple(alias.name for alias in node.names)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` for the package at ``root``."""
    package = root.name
    modules = package_modules(root)
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in modules.items()}
    lazy = {name: lazy_table(tree, name) for name, tree in trees.items() if modules[name].name == "__init__.py"}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, tree in trees.items():
        for target, names in _imports(tree, name, modules[name].name == "__init__.py"):
            if not (target == package or target.startswith(package + ".")):
                continue
            while target not in modules and "." in target:  # `import pkg.mod.attr` style
                target = target.rsplit(".", 1)[0]
            hits = set()
            for imported in names:
                if f"{target}.{imported}" in modules:
                    hits.add(f"{target}.{imported}")
                elif imported in lazy.get(target, {}):
                    hits.add(lazy[target][imported])
                else:
                    hits.add(target)
            graph[name] |= hits or {target}
            graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def is_application(module: str) -> bool:
    """Whether ``module`` belongs to an application: the command line, a view, the
    evaluation, the tuning or the chain."""
    parts = module.split(".")[1:]
    if not parts:
        return False
    return (parts[0] in APPLICATION_PACKAGES or ".".join(parts) in APPLICATION_MODULES
            or parts[-1] == "__main__")


def test_graph_reader_sees_lazy_and_function_level_imports(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text(
        "from .._lazy import lazy_exports\n_LAZY = {'Thing': 'impl'}\n"
        "__getattr__, __dir__ = lazy_exports(__name__, _LAZY)\n")
    (root / "sub" / "impl.py").write_text("Thing = 1\n")
    (root / "_lazy.py").write_text("")
    (root / "low.py").write_text("def f():\n    from .sub import Thing\n    return Thing\n")
    (root / "top.py").write_text("import pkg.low\nfrom . import sub\n")
    (root / "a.py").write_text("from .b import x\n")
    (root / "b.py").write_text("def g():\n    from . import a\nx = 1\n")
    graph = import_graph(root)
    assert graph["pkg.low"] == {"pkg.sub.impl"}          # function level, through the lazy table
    assert graph["pkg.top"] == {"pkg.low", "pkg.sub"}
    assert graph["pkg.sub"] == {"pkg._lazy"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_no_import_cycles():
    graph = import_graph()
    circles = [circle for circle in cycles(graph) if circle not in KNOWN_CIRCLES]
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(circle) for circle in circles)


def test_lower_layers_do_not_import_applications():
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items() if not is_application(module)
        for target in targets if is_application(target)
    )
    wrong = [edge for edge in wrong if edge not in KNOWN_LAYER_BREACHES]
    assert not wrong, "lower layers importing applications:\n" + "\n".join(wrong)


@pytest.mark.parametrize("module", [f"{PACKAGE}.cli", f"{PACKAGE}.cli.raptor", f"{PACKAGE}.view.answer",
                                    f"{PACKAGE}.methods.chain", f"{PACKAGE}.tuning.tune",
                                    f"{PACKAGE}.evaluation.methods.graph_measure"])
def test_applications_are_recognised(module):
    assert is_application(module)


@pytest.mark.parametrize("module", [f"{PACKAGE}.engine.assemble", f"{PACKAGE}.methods.grounding.align",
                                    f"{PACKAGE}.methods.raptor.store", f"{PACKAGE}.llm.core",
                                    f"{PACKAGE}.langchain.index"])
def test_lower_layers_are_recognised(module):
    assert not is_application(module)


METHOD_PACKAGES = ("methods.context", "methods.grounding", "methods.raptor", "methods.graph")
"""The methods built on retrieval and the LLM: none imports another (shared helpers live
below them, in ``llm``, the retrieval rooms or ``core``)."""
BASE_PACKAGES = ("core", "engine", "stores", "keyword", "embeddings", "ingest", "langchain", "llama_index", "llm")


def _package(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "methods":
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else ""


def test_methods_do_not_import_each_other_and_the_base_imports_no_method():
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items() if not is_application(module)
        for target in targets
        if _package(target) in METHOD_PACKAGES and _package(target) != _package(module)
        and (_package(module) in METHOD_PACKAGES or _package(module) in BASE_PACKAGES)
    )
    assert not wrong, "imports across the method layers:\n" + "\n".join(wrong)


def test_views_register_themselves(tmp_path):
    """A splitter, an assembled context and a grounded answer offer HTML views without
    importing swrag_integrations.view: the view package registers them when imported."""
    import subprocess
    import sys

    code = """
import sys
from swrag_integrations.core.display import ViewsNotLoadedError
from swrag_integrations.methods.grounding import ground_answer
from swrag_integrations.langchain import FixedWindowTextSplitter
from swrag_integrations.engine.assemble import assemble_context

text = "The lighthouse was first lit in 1874. It is 31 metres tall."
splitter = FixedWindowTextSplitter(window_size=8, step=4, unit="char")
context = assemble_context([splitter.create_documents([text], metadatas=[{"source": "a.txt"}])[0]])
grounded = ground_answer("It was first lit in 1874.", [text])
assert context._repr_html_() is None and grounded._repr_html_() is None
try:
    splitter.view(text)
except ViewsNotLoadedError as exc:
    assert "import swrag_integrations.view" in str(exc)
else:
    raise AssertionError("no error without the views")
assert "swrag_integrations.view" not in sys.modules
import swrag_integrations.view
assert type(splitter.view(text)).__name__ == "WindowsView"
assert "<iframe" in context._repr_html_() and "<iframe" in grounded._repr_html_()
print("OK")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(ROOT.parent)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


# ------------------------------------------------------------------ the framework faces


def is_face(module: str) -> bool:
    """Whether ``module`` is a framework face: in the ``langchain``/``llama_index`` rooms, or
    a module named ``langchain*``/``llama_index*``/``llamaindex*`` inside another room."""
    parts = module.split(".")[1:]
    return bool(parts) and (parts[0] in FACE_PACKAGES or parts[-1].startswith(FACE_MODULE_PREFIXES))


def framework_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: frameworks it imports}`` (``langchain*``/``llama_index*`` top-level names;
    at module level or inside functions, not under ``TYPE_CHECKING``)."""
    modules = package_modules(root)
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for target, _names in _imports(tree, name, path.name == "__init__.py"):
            top = target.split(".")[0]
            if top.startswith(FRAMEWORK_PREFIXES):
                found.setdefault(name, set()).add(top)
    return found


# Modules outside the faces that import a framework today, each with why; to be moved into a
# face (issue 40). A module not listed here that imports a framework fails the test below.
KNOWN_FRAMEWORK_BREACHES: dict[str, str] = {
}


def test_only_faces_import_the_frameworks():
    wrong = sorted(f"{module}: {', '.join(sorted(tops))}" for module, tops in framework_imports().items()
                   if not is_face(module) and module not in KNOWN_FRAMEWORK_BREACHES)
    assert not wrong, "framework imports outside the faces:\n" + "\n".join(wrong)


def test_known_framework_breaches_are_still_breaches():
    """A module fixed (it no longer imports a framework, or was renamed) leaves the list."""
    current = {module for module in framework_imports() if not is_face(module)}
    assert not set(KNOWN_FRAMEWORK_BREACHES) - current


@pytest.mark.parametrize("module,face", [
    (f"{PACKAGE}.langchain.index", True), (f"{PACKAGE}.llama_index.parsers", True),
    (f"{PACKAGE}.llm.langchain_chat", True), (f"{PACKAGE}.llm.llamaindex_llm", True),
    (f"{PACKAGE}.methods.raptor.langchain", True), (f"{PACKAGE}.methods.context.llama_index", True),
    (f"{PACKAGE}.engine.engine", False), (f"{PACKAGE}.methods.raptor.search", False), (PACKAGE, False),
])
def test_faces_are_recognised(module, face):
    assert is_face(module) is face


# ------------------------------------------------------------------ imports by string

# Modules that may import by a string: the lazy exports and the old paths' hook.
STRING_IMPORTERS = {f"{PACKAGE}.core._lazy", f"{PACKAGE}._moved"}
# Other calls of importlib.import_module / __import__, each with why (a new one fails).
KNOWN_STRING_IMPORTS: dict[str, str] = {
    f"{PACKAGE}.evaluation.langchain_llm": "the one --llm loader: module:factory imports the user's module named on "
                                          "the command line (never a package module)",
}


def string_imports(root: Path = ROOT) -> set[str]:
    """Modules that call ``importlib.import_module``, ``import_module`` or ``__import__``."""
    found = set()
    for name, path in package_modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("import_module", "__import__"):
                    found.add(name)
    return found


def test_no_imports_by_string_outside_the_lazy_tables():
    wrong = sorted(string_imports() - STRING_IMPORTERS - set(KNOWN_STRING_IMPORTS))
    assert not wrong, "importlib.import_module / __import__ outside _lazy and _moved:\n" + "\n".join(wrong)
    assert not set(KNOWN_STRING_IMPORTS) - string_imports()  # a fixed one leaves the list


def test_string_import_reader_sees_the_forms(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("import importlib\ndef f():\n    return importlib.import_module('pkg.b')\n")
    (root / "b.py").write_text("from importlib import import_module\nx = import_module\n")
    (root / "c.py").write_text("m = __import__('os')\n")
    (root / "d.py").write_text("from langchain_core.documents import Document\n")
    assert string_imports(root) == {"pkg.a", "pkg.c"}
    assert framework_imports(root) == {"pkg.d": {"langchain_core"}}
