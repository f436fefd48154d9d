"""The LlamaIndex face of grounding: a response hook and a query-engine wrapper.

* `ground_response` grounds a LlamaIndex ``Response`` in its ``source_nodes``
  (offsets from ``start_char_idx``/``end_char_idx``, the source from the ``source_id``
  metadata, else ``ref_doc_id``: `swrag_integrations.llama_index.convert.node_to_document`),
  stores `GroundedAnswer.to_dict` in ``response.metadata["grounding"]`` and
  returns the `GroundedAnswer`.
* `GroundedQueryEngine` wraps any query engine (e.g.
  `swrag_integrations.methods.llama_index_chain.build_query_engine`) so that every ``query``/``aquery``
  response carries ``metadata["grounding"]``.

Both run the one checker (`GroundingChecker`).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine

from swrag_integrations.llama_index.convert import node_to_document
from swrag_integrations.methods.grounding.align import GroundingChecker
from swrag_integrations.methods.grounding.result import GroundedAnswer

__all__ = ["ground_response", "GroundedQueryEngine"]


def ground_response(response: Any, *, checker: GroundingChecker | None = None,
                    question: str | None = None) -> GroundedAnswer:
    """Ground ``response.response`` in ``response.source_nodes`` (see the module docstring).

    Args:
        response: A LlamaIndex query engine ``Response``.
        checker: The `GroundingChecker` to use; ``None`` for the default one.
        question: The question; its words count as given, not invented.

    Raises:
        TypeError: ``response`` has no ``response``/``source_nodes`` (e.g. a streaming
            response that was not consumed: call ``get_response()`` first).
    """
    if not hasattr(response, "source_nodes") or not hasattr(response, "response"):
        raise TypeError(
            f"response must be a LlamaIndex Response with source_nodes, got {type(response).__name__} "
            "(for a streaming response call get_response() first)"
        )
    answer = response.response if isinstance(response.response, str) else ("" if response.response is None
                                                                          else str(response.response))
    docs = [node_to_document(n) for n in (response.source_nodes or [])]
    grounded = (checker or GroundingChecker()).check(answer, docs, question=question)
    if getattr(response, "metadata", None) is None:
        response.metadata = {}
    response.metadata["grounding"] = grounded.to_dict()
    return grounded


class GroundedQueryEngine(BaseQueryEngine):
    """A query engine whose responses carry ``metadata["grounding"]``.

    Args:
        query_engine: any LlamaIndex query engine returning ``Response`` objects.
        checker: the `GroundingChecker` (default settings if ``None``).

    Raises:
        TypeError: ``query_engine`` has no ``query``.
    """

    def __init__(self, query_engine: Any, *, checker: GroundingChecker | None = None) -> None:
        if not hasattr(query_engine, "query"):
            raise TypeError(f"query_engine must be a LlamaIndex query engine, got {type(query_engine).__name__}")
        super().__init__(callback_manager=getattr(query_engine, "callback_manager", None))
        self.query_engine = query_engine
        self.checker = checker or GroundingChecker()

    def _get_prompt_modules(self) -> dict:
        return {"query_engine": self.query_engine} if hasattr(self.query_engine, "get_prompts") else {}

    def _query(self, query_bundle: Any) -> Any:
        response = self.query_engine.query(query_bundle)
        ground_response(response, checker=self.checker, question=query_bundle.query_str)
        return response

    async def _aquery(self, query_bundle: Any) -> Any:
        response = await self.query_engine.aquery(query_bundle)
        ground_response(response, checker=self.checker, question=query_bundle.query_str)
        return response
