"""RAPTOR's LangChain face over the framework-free core.

`RaptorSearcher` (in `search`) embeds the query, ranks the tree's nodes (collapsed tree or
traversal, `search`) and fills the token budget. `RaptorRetriever`
(LangChain ``BaseRetriever``) and `RaptorLlamaIndexRetriever`
(LlamaIndex ``BaseRetriever``, in `llama_index`) only convert its
`RaptorContext`:

* exact pieces (leaves and extractive summary sentences, merged by offset) become
  documents / nodes with ``source_id``, ``start_index``, ``end_index``
  (``page_content == source_text[start_index:end_index]``) and ``raptor_nodes``,
  ``raptor_layers``, ``raptor_kinds`` (the tree nodes inside them);
* LLM summaries become documents / nodes **without** offsets (their text is not in any
  source) with ``raptor_node_id``, ``raptor_layer``, ``raptor_kind`` and
  ``raptor_leaves``: the exact ``{source_id, start_index, end_index}`` of the leaves
  they summarise, so a citation can point into the sources.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr, field_validator

from swrag_integrations.engine.settings import positive_int
from swrag_integrations.langchain.convert import span_to_document
from swrag_integrations.langchain.search import call_options
from swrag_integrations.methods.raptor.search import DEFAULT_BUDGET, RaptorContext, RaptorSearcher, SummaryPiece

__all__ = ["RaptorSearcher", "RaptorRetriever", "context_documents"]


def context_documents(context: RaptorContext) -> list[Document]:
    """A `RaptorContext` as LangChain documents (see the module docstring)."""
    docs = []
    for item in context.items:
        if isinstance(item, SummaryPiece):
            docs.append(Document(page_content=item.text, metadata=item.metadata(), id=item.node_id))
        else:
            docs.append(span_to_document(item))
    return docs


class RaptorRetriever(BaseRetriever):
    """RAPTOR as a LangChain retriever (collapsed tree by default, 2000-token budget).

    Args:
        raptor: a `RaptorIndex` or a `RaptorTree`.
        embeddings: query embedding (default: the ``RaptorIndex``'s).
        mode: ``"collapsed"`` or ``"traverse"``.
        ranking: the collapsed tree's ranking, ``"hybrid"`` (default: BM25 fused with cosine)
            or ``"dense"`` (cosine alone, the paper's).
        budget_tokens: token budget of the joined documents (``None``: no limit).
        top_k: nodes per layer in traversal.
        k: at most this many tree nodes (``None``: the budget decides).

    ``k``, ``top_k`` and ``budget_tokens`` can be given per call; other keywords raise
    ``TypeError``. See the module docstring for the documents returned.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    raptor: Any
    embeddings: Any = None
    mode: Literal["collapsed", "traverse"] = "collapsed"
    ranking: Literal["hybrid", "dense"] = "hybrid"
    budget_tokens: int | None = DEFAULT_BUDGET
    top_k: int = 5
    k: int | None = None

    _core: RaptorSearcher = PrivateAttr()

    @field_validator("budget_tokens", "k")
    @classmethod
    def _optional_positive(cls, value: int | None, info: Any) -> int | None:
        return positive_int(info.field_name, value, optional=True)

    @field_validator("top_k")
    @classmethod
    def _positive(cls, value: int) -> int:
        return positive_int("top_k", value)

    def model_post_init(self, __context: Any) -> None:
        """Build the framework-free `RaptorSearcher` the retriever delegates to (pydantic hook)."""
        self._core = RaptorSearcher(self.raptor, self.embeddings, ranking=self.ranking)

    @property
    def core(self) -> RaptorSearcher:
        return self._core

    def search(self, query: str, **kwargs: Any) -> RaptorContext:
        """The `RaptorContext` (call-time ``k``, ``top_k``, ``budget_tokens``)."""
        o = call_options(kwargs, {"k": self.k, "top_k": self.top_k, "budget_tokens": self.budget_tokens},
                         "RaptorRetriever.invoke()")
        return self._core.search(query, mode=self.mode, budget_tokens=o["budget_tokens"], top_k=o["top_k"], k=o["k"])

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return context_documents(self.search(query, **kwargs))

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        return await asyncio.to_thread(lambda: context_documents(self.search(query, **kwargs)))
