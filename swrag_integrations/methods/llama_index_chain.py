"""The LlamaIndex face of the answer chain: a query engine with the method's prompt.

`build_query_engine` is LlamaIndex's ``RetrieverQueryEngine`` with the prompt of the
framework-free core (`llama_index_template`),
wrapped by the grounding's LlamaIndex face so every response carries its grounding.
"""

from __future__ import annotations

from typing import Any

from llama_index.core import PromptTemplate
from llama_index.core.query_engine import RetrieverQueryEngine

from swrag_integrations.methods.chain import llama_index_template
from swrag_integrations.methods.grounding.llama_index import GroundedQueryEngine

__all__ = ["build_query_engine"]


def build_query_engine(retriever: Any, llm: Any, *, language: str = "en", grounding: bool = True) -> Any:
    """A LlamaIndex ``RetrieverQueryEngine`` with the method's prompt.

    Args:
        retriever: a LlamaIndex retriever (e.g. ``WindowedLlamaIndexRetriever``).
        llm: a LlamaIndex LLM (e.g. ``load_llama3().as_llamaindex()``).
        language: ``"en"`` or ``"zh"`` prompt.
        grounding: wrap it so every response carries ``metadata["grounding"]``
            (`GroundedQueryEngine`).
    """
    engine = RetrieverQueryEngine.from_args(
        retriever=retriever, llm=llm, text_qa_template=PromptTemplate(llama_index_template(language)),
        response_mode="compact",
    )
    if not grounding:
        return engine
    return GroundedQueryEngine(engine)
