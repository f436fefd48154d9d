"""LangChain retrievers over graph retrieval: thin adapters over `HippoRAG`
and `GraphRAG` local search (and GraphRAG's global search as a ``Runnable``:
`global_search_runnable`).

Both return the windows the graph ranks, merged by offset under ``budget_tokens``, as
documents whose ``page_content == source_text[start_index:end_index]`` (metadata as
the windowed parent retriever's, plus ``graph_passage``/``graph_rank``/``graph_score``
of the best passage inside and ``linked_phrases``); ``Document.id`` is
``"<source_id>:<start>-<end>"``. ``k``, ``k_passages`` and ``budget_tokens`` can be given
per call (``retriever.invoke(q, k=2)``); any other keyword raises ``TypeError``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from pydantic import ConfigDict, field_validator

from swrag_integrations.engine.parents import check_query
from swrag_integrations.langchain.convert import spans_to_documents
from swrag_integrations.langchain.search import call_options
from swrag_integrations.engine.settings import DEFAULT_BUDGET_TOKENS, positive_int

__all__ = ["HippoRAGRetriever", "GraphRAGLocalRetriever", "global_search_runnable", "span_documents", "report_document"]


def global_search_runnable(search: Any) -> RunnableLambda:
    """A `GlobalSearch` as a LangChain ``Runnable``: question ->
    `GlobalSearchResult` (named ``GraphRAGGlobalSearch``)."""
    if not callable(getattr(search, "invoke", None)):
        raise TypeError(f"search must be a GlobalSearch (GraphRAG.global_search(llm)), got {type(search).__name__}")
    return RunnableLambda(lambda question: search.invoke(question), name="GraphRAGGlobalSearch")


def span_documents(spans: Any) -> list[Document]:
    """Core spans as documents (exact text, ``id`` = ``"<source_id>:<start>-<end>"``)."""
    return spans_to_documents(spans)


def report_document(report: Any) -> Document:
    """A community report as a document: no offsets (its text is not in any source);
    ``report_passages`` lists the exact ``[source_id, start, end]`` it draws on (JSON)."""
    return Document(page_content=report.text, id=f"community:{report.community}", metadata={
        "kind": "community_report", "community": report.community, "level": report.level, "title": report.title,
        "report_kind": report.kind, "report_passages": json.dumps([list(p) for p in report.passages]),
        "n_tokens": report.n_tokens})


class _GraphRetriever(BaseRetriever):
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    searcher: Any
    k: int | None = None
    k_passages: int = 30
    budget_tokens: int | None = DEFAULT_BUDGET_TOKENS
    expand: Literal["window", "medium", "chunk"] = "window"

    @field_validator("k", "budget_tokens")
    @classmethod
    def _optional_positive(cls, value: int | None, info) -> int | None:
        return positive_int(info.field_name, value, optional=True)

    @field_validator("k_passages")
    @classmethod
    def _positive(cls, value: int) -> int:
        return positive_int("k_passages", value)

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return call_options(kwargs, {"k": self.k, "k_passages": self.k_passages, "budget_tokens": self.budget_tokens},
                            f"{type(self).__name__}.invoke()")

    def _documents(self, query: str, options: dict[str, Any]) -> list[Document]:
        spans = self.searcher.spans([check_query(query)], budget_tokens=options["budget_tokens"], k=options["k"],
                                    k_passages=options["k_passages"], expand=self.expand)
        return span_documents(spans)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return self._documents(query, self._options(kwargs))

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        options = self._options(kwargs)
        return await asyncio.to_thread(self._documents, query, options)


class HippoRAGRetriever(_GraphRetriever):
    """HippoRAG for LangChain: personalized PageRank over the passage-phrase graph.

    Args:
        searcher: a `HippoRAG`.
        k: at most this many documents (merged windows); ``None``: as many as the budget holds.
        k_passages: passages taken from the graph's ranking.
        budget_tokens: token budget of the returned texts joined by blank lines.
        expand: how hits are widened (``"window"``, ``"medium"`` or ``"chunk"``).
    """

    @field_validator("searcher")
    @classmethod
    def _searcher(cls, value: Any) -> Any:
        from swrag_integrations.methods.graph.hipporag import HippoRAG

        if not isinstance(value, HippoRAG):
            raise TypeError(f"searcher must be a HippoRAG, got {type(value).__name__}")
        return value


class GraphRAGLocalRetriever(_GraphRetriever):
    """GraphRAG local search for LangChain.

    Args:
        searcher: a `GraphRAG`.
        community_share: share of the budget for the reports of the question's
            communities (appended after the windows as documents without offsets,
            ``metadata["kind"] == "community_report"``); 0 (default): windows only.
        k, k_passages, budget_tokens, expand: as `HippoRAGRetriever`.
    """

    community_share: float = 0.0

    @field_validator("searcher")
    @classmethod
    def _searcher(cls, value: Any) -> Any:
        from swrag_integrations.methods.graph.graphrag import GraphRAG

        if not isinstance(value, GraphRAG):
            raise TypeError(f"searcher must be a GraphRAG, got {type(value).__name__}")
        return value

    @field_validator("community_share")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"community_share must be in [0, 1], got {value!r}")
        return value

    def _documents(self, query: str, options: dict[str, Any]) -> list[Document]:
        if not self.community_share or options["budget_tokens"] is None:
            return super()._documents(query, options)
        spans, reports = self.searcher.local_context(
            check_query(query), budget_tokens=options["budget_tokens"], community_share=self.community_share,
            k=options["k"], k_passages=options["k_passages"], expand=self.expand)
        return span_documents(spans) + [report_document(r) for r in reports]
