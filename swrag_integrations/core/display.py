"""Registration hooks for the HTML views: the lower layers offer views
(``splitter.view(text)``, ``retriever.explain(q)``, ``_repr_html_`` of an assembled
context or a grounded answer) without importing `swrag_integrations.view`.

The view package registers a factory per kind of view when it is imported
(``import swrag_integrations.view``, or importing any of its modules); until then
`make_view` raises `ViewsNotLoadedError` saying so and `html_of`
returns ``None`` (Jupyter then shows the plain ``repr``). This module imports nothing of
the package, so it sits below every module that uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["VIEW_KINDS", "ViewsNotLoadedError", "register_view", "make_view", "html_of", "views_loaded"]

VIEW_KINDS = ("windows", "retrieval", "index", "spans", "answer")
"""``windows``: ``(text, splitter, *others)`` -> a windows view; ``retrieval``:
``(retriever, query, **overrides)`` -> a retrieval view; ``index``: ``(index, query,
**settings)`` -> the same view with the retriever's settings given directly; ``spans``: ``(assembled
context)`` -> a view of its spans; ``answer``: ``(grounded answer)`` -> an answer view."""

_FACTORIES: dict[str, Callable[..., Any]] = {}


class ViewsNotLoadedError(LookupError):
    """An HTML view was asked for before `swrag_integrations.view` registered its views."""


def register_view(kind: str, factory: Callable[..., Any]) -> None:
    """Make ``factory`` build the views of ``kind`` (one of `VIEW_KINDS`); a later
    registration replaces an earlier one."""
    if kind not in VIEW_KINDS:
        raise ValueError(f"kind must be one of {VIEW_KINDS}, got {kind!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable, got {type(factory).__name__}")
    _FACTORIES[kind] = factory


def views_loaded(kind: str) -> bool:
    """Whether a view of ``kind`` is registered."""
    return kind in _FACTORIES


def make_view(kind: str, *args: Any, **kwargs: Any) -> Any:
    """The view of ``kind`` built from ``args``/``kwargs`` by its registered factory.

    Raises:
        ViewsNotLoadedError: no view of ``kind`` is registered (``import swrag_integrations.view``).
    """
    factory = _FACTORIES.get(kind)
    if factory is None:
        raise ViewsNotLoadedError(f"the {kind!r} HTML view is not loaded: run `import swrag_integrations.view` "
                                  "first (it registers the views)")
    return factory(*args, **kwargs)


def html_of(kind: str, *args: Any) -> str | None:
    """The HTML of the view of ``kind`` (for ``_repr_html_``), or ``None`` while no view
    of ``kind`` is registered."""
    if kind not in _FACTORIES:
        return None
    return make_view(kind, *args)._repr_html_()
