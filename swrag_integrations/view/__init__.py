"""Offline HTML views of windows, retrieval and grounded answers.

* `WindowsView` - a document under one or more splitter configurations.
* `RetrievalView` - a question against an index: the children that
  matched (with each ranker's rank), the windows they widened to, the spans merged under
  the budget, and what was cut.
* `AnswerView` - an answer with its sources, each sentence linked to its
  supporting spans when a grounding result is given.

Each view writes one self-contained HTML file (``save(path)``; styles and script inline,
no network) and shows itself in Jupyter (``_repr_html_``). Importing this package
registers the views with `swrag_integrations.core.display`, through which
``splitter.view(text)``, ``retriever.explain(question)`` and the ``_repr_html_`` of an
assembled context or a grounded answer reach them. The escaping and rendering
core is `html`; ``swrag view`` is `cli`. See docs/view.md.
"""

from __future__ import annotations

from typing import Any

from swrag_integrations.core._lazy import lazy_exports
from swrag_integrations.core.display import register_view

_NAMES = {
    "AnswerView": ".answer",
    "RetrievalView": ".retrieval",
    "WindowsView": ".split",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "Layout": ".split",
    "MarkedRegion": ".html",
    "View": ".html",
    "marked_regions": ".html",
    "text_html": ".html",
}

__all__ = sorted(_NAMES)


__getattr__, __dir__ = lazy_exports(__name__, _NAMES, _DEPRECATED)


def _windows_view(text: str, *configs: Any) -> Any:
    from swrag_integrations.view.split import WindowsView

    return WindowsView(text, *configs)


def _retrieval_view(retriever: Any, query: str, **overrides: Any) -> Any:
    from swrag_integrations.view.retrieval import RetrievalView

    return RetrievalView.from_retriever(retriever, query, **overrides)


def _index_view(index: Any, query: str, **options: Any) -> Any:
    from swrag_integrations.view.retrieval import RetrievalView

    return RetrievalView.from_index(index, query, **options)


def _spans_view(context: Any) -> Any:
    from swrag_integrations.view.retrieval import RetrievalView

    return RetrievalView.from_spans(context)


def _answer_view(grounded: Any) -> Any:
    from swrag_integrations.view.answer import AnswerView

    return AnswerView(grounded)


# The lower layers offer these views through swrag_integrations.core.display, without importing
# this package: importing it (or any of its modules) registers them.
register_view("windows", _windows_view)
register_view("retrieval", _retrieval_view)
register_view("index", _index_view)
register_view("spans", _spans_view)
register_view("answer", _answer_view)
