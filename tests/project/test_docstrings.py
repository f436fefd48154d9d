"""The docstrings of the public names (issue 41, item 5): the API reference renders them.

For every name of a package ``__all__`` (the public surface, see ``test_public_surface.py``):
a function or class has a docstring; its parameters (a class's ``__init__``) are each named
under a Google-style ``Args:`` section; every exception its body raises directly is named
under ``Raises:``; no reST role (``:class:`` ...), which mkdocstrings renders literally; no
measured figure (those live in the docs' evaluation pages). Public methods of exported
classes have a docstring.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REST_ROLE = re.compile(r":(class|func|meth|attr|mod|data|exc|obj):`")
# A measured figure: a number with a unit or percent sign ("38 ms"), a speed-up ("2-6x faster"), a
# before/after pair ("87.3 -> 85.6"), a signed difference ("+1.1"), a similarity or recall value.
FIGURE = re.compile(r"\b\d+(\.\d+)?\s?(%|ms\b|MB\b|GB\b|s/query)|\b\d+(-\d+)?x faster|\d\.\d+ -> \d"
                    r"|(?<![\w.])[+-]\d+\.\d+\b|\b(recall|cosine)( about| of|=| =)? ?[01]?\.\d+|\|Δ")
SECTION = re.compile(r"^(\w[\w ]*):\s*$")
# Docstrings not yet complete when the check came in (issue 41): this list may only shrink.
# A name listed here must still fail the check (remove it once its docstring is fixed).
KNOWN_GAPS = frozenset(f"swrag_integrations.{name}" for name in (
))


def _public() -> list[tuple[str, Any]]:
    """``(dotted name, object)`` of every function and class some package exports, once each."""
    seen: dict[int, str] = {}
    found = []
    for init in sorted((ROOT / "swrag_integrations").rglob("__init__.py")):
        package = ".".join(init.relative_to(ROOT).parent.parts)
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", []):
            value = getattr(module, name)
            if (inspect.isfunction(value) or inspect.isclass(value)) and id(value) not in seen:
                seen[id(value)] = f"{package}.{name}"
                found.append((f"{package}.{name}", value))
    return found


def _sections(doc: str) -> dict[str, str]:
    """A Google-style docstring's sections (``Args``, ``Raises``...) and their bodies."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in doc.splitlines():
        match = SECTION.match(line)
        if match and not line.startswith(" "):
            current = match.group(1)
            sections[current] = []
        elif current is not None:
            if line and not line.startswith(" "):
                current = None
            else:
                sections[current].append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def _documented(section: str) -> set[str]:
    """The parameter names an ``Args:`` (or ``Attributes:``) section lists."""
    return {match.lstrip("*") for match in re.findall(r"^\s{2,8}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:", section, re.M)}


def _parameters(function: Callable[..., Any]) -> list[str]:
    """The parameters a caller passes (not ``self``/``cls``)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [name for name in signature.parameters if name not in {"self", "cls"}]


def _raised(function: Callable[..., Any]) -> set[str]:
    """The exception names ``raise X`` / ``raise X(...)`` statements directly in ``function`` name."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return set()
    tree = ast.parse(source)
    root = tree.body[0]
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue  # nested definitions raise on their own account
            if isinstance(child, ast.Raise) and child.exc is not None:
                target = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(target, ast.Name) and target.id[:1].isupper():
                    names.add(target.id)
                elif isinstance(target, ast.Attribute):
                    names.add(target.attr)
            visit(child)

    visit(root)
    return names


def _own_function(cls: type, name: str) -> Callable[..., Any] | None:
    """``cls.name`` if the class's own body defines it as a plain function (not generated)."""
    value = cls.__dict__.get(name)
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if inspect.isfunction(value) and value.__qualname__.startswith(cls.__qualname__ + "."):
        return value
    return None


def _checks() -> Iterator[tuple[str, Any, str]]:
    """``(dotted name, function or class, kind)`` for each docstring to check."""
    for dotted, value in _public():
        yield dotted, value, "class" if inspect.isclass(value) else "function"
        if inspect.isclass(value):
            for name in sorted(value.__dict__):
                method = _own_function(value, name)
                if method is not None and not name.startswith("_"):
                    yield f"{dotted}.{name}", method, "method"


CHECKS = list(_checks())


def _problems(dotted: str, value: Any, kind: str) -> list[str]:
    """What the docstring of ``value`` lacks."""
    doc = inspect.cleandoc(value.__doc__ or "")
    problems = []
    if not doc.strip():
        return [f"{dotted}: no docstring"]
    if REST_ROLE.search(doc):
        problems.append(f"{dotted}: reST role {REST_ROLE.search(doc).group(0)} (use a `code span` or [Name][path])")
    if FIGURE.search(doc):
        problems.append(f"{dotted}: measured figure {FIGURE.search(doc).group(0)!r} (move it to docs/eval)")
    if kind == "method":
        return problems
    function = value if kind == "function" else _own_function(value, "__init__")
    if function is None:
        return problems
    if kind == "class" and function.__doc__:
        doc = doc + "\n\n" + inspect.cleandoc(function.__doc__)
    sections = _sections(doc)
    parameters = _parameters(function)
    listed = _documented(sections.get("Args", "")) | _documented(sections.get("Attributes", ""))
    missing = [name for name in parameters if name not in listed]
    if missing:
        problems.append(f"{dotted}: Args: does not name {', '.join(missing)}")
    unnamed = sorted(name for name in _raised(function) if name not in sections.get("Raises", ""))
    if unnamed:
        problems.append(f"{dotted}: Raises: does not name {', '.join(unnamed)}")
    return problems


@pytest.mark.parametrize(("dotted", "value", "kind"), CHECKS, ids=[check[0] for check in CHECKS])
def test_public_docstring(dotted: str, value: Any, kind: str) -> None:
    problems = _problems(dotted, value, kind)
    if dotted in KNOWN_GAPS:
        assert problems, f"{dotted} passes now: remove it from KNOWN_GAPS"
    else:
        assert not problems, "\n".join(problems)


def test_known_gaps_are_public_names() -> None:
    assert KNOWN_GAPS <= {check[0] for check in CHECKS}


def test_the_checks_see_what_they_check() -> None:
    """The section parser and the raise finder read a Google-style docstring as written."""

    def sample(path: str, *, strict: bool = False) -> int:
        """Count a file.

        Args:
            path: The file.
            strict (bool): Refuse an empty one.

        Raises:
            ValueError: If it is empty.
        """
        if strict and not path:
            raise ValueError("empty")
        return 1

    def undocumented(path: str) -> None:
        """Do it, see :class:`Thing`."""
        raise TypeError(path)

    assert _problems("sample", sample, "function") == []
    assert _problems("undocumented", undocumented, "function") == [
        "undocumented: reST role :class:` (use a `code span` or [Name][path])",
        "undocumented: Args: does not name path",
        "undocumented: Raises: does not name TypeError",
    ]
    assert len(CHECKS) > 100
