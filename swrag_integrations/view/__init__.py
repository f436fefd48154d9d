"""Offline HTML views of windows, retrieval and grounded answers.

* :class:`~.split.WindowsView` - a document under one or more splitter configurations.
* :class:`~.retrieval.RetrievalView` - a question against an index: the children that
  matched (with each ranker's rank), the windows they widened to, the spans merged under
  the budget, and what was cut.
* :class:`~.answer.AnswerView` - an answer with its sources, each sentence linked to its
  supporting spans when a grounding result is given.

Each view writes one self-contained HTML file (``save(path)``; styles and script inline,
no network) and shows itself in Jupyter (``_repr_html_``). The escaping and rendering
core is :mod:`.html`; ``swrag view`` is :mod:`.cli`. See docs/view.md.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_NAMES = {
    "WindowsView": ".split",
    "Layout": ".split",
    "RetrievalView": ".retrieval",
    "AnswerView": ".answer",
    "View": ".html",
    "MarkedRegion": ".html",
    "marked_regions": ".html",
    "text_html": ".html",
}

__all__ = sorted(_NAMES)


__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
