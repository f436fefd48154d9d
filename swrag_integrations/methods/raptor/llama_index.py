"""RAPTOR as a LlamaIndex-native retriever (``NodeWithScore`` straight from the core).

The same `RaptorSearcher` as the LangChain retriever; no LangChain
types on the way. Exact pieces (leaves, extractive sentences, merged by offset) become
nodes with ``start_char_idx``/``end_char_idx`` and ``source_id``/``start_index``/
``end_index`` metadata (`span_to_node`); LLM summaries
become ``TextNode`` s without offsets whose metadata ``raptor_leaves`` lists
``source_id:start-end`` of the leaves they summarise.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from swrag_integrations.llama_index.convert import span_to_node
from swrag_integrations.engine.parents import check_query
from swrag_integrations.engine.settings import positive_int
from swrag_integrations.methods.raptor.search import DEFAULT_BUDGET, MODES, RaptorSearcher, SummaryPiece

__all__ = ["RaptorLlamaIndexRetriever", "summary_node"]


def summary_node(item: SummaryPiece) -> NodeWithScore:
    """An LLM summary as a ``NodeWithScore`` (flat metadata; the leaves as ``source:start-end``)."""
    meta = item.metadata()
    meta["raptor_leaves"] = ";".join(f"{d['source_id']}:{d['start_index']}-{d['end_index']}" for d in meta["raptor_leaves"])
    meta["source_ids"] = ",".join(meta["source_ids"])
    node = TextNode(id_=item.node_id, text=item.text, metadata=meta,
                    excluded_embed_metadata_keys=list(meta), excluded_llm_metadata_keys=list(meta))
    return NodeWithScore(node=node, score=item.score)


class RaptorLlamaIndexRetriever(BaseRetriever):
    """RAPTOR trees as a LlamaIndex retriever.

    Args:
        raptor: a `RaptorIndex` or a `RaptorTree`.
        embeddings: query embedding: LangChain ``Embeddings`` or a LlamaIndex embedding
            model (default: the ``RaptorIndex``'s); the model that built the tree.
        mode: ``"collapsed"`` (default) or ``"traverse"``.
        ranking: the collapsed tree's ranking, ``"hybrid"`` (default: BM25 fused with
            cosine) or ``"dense"`` (cosine alone).
        budget_tokens: token budget of the joined nodes (default 2000).
        top_k: nodes per layer in traversal.
        k: at most this many tree nodes.
        callback_manager: LlamaIndex callbacks.

    Raises:
        ValueError: ``mode`` is not ``"collapsed"`` or ``"traverse"``.
    """

    def __init__(self, raptor: Any, embeddings: Any = None, *, mode: str = "collapsed", ranking: str = "hybrid",
                 budget_tokens: int | None = DEFAULT_BUDGET, top_k: int = 5, k: int | None = None,
                 callback_manager: Any = None) -> None:
        from swrag_integrations.embeddings.minilm import as_embeddings

        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        for name, value in (("budget_tokens", budget_tokens), ("k", k)):
            positive_int(name, value, optional=True)
        positive_int("top_k", top_k)
        self._core = RaptorSearcher(raptor, as_embeddings(embeddings) if embeddings is not None else None,
                                    ranking=ranking)
        self._options = dict(mode=mode, budget_tokens=budget_tokens, top_k=top_k, k=k)
        super().__init__(callback_manager=callback_manager)

    @property
    def core(self) -> RaptorSearcher:
        return self._core

    def _nodes(self, query: str) -> list[NodeWithScore]:
        context = self._core.search(query, **self._options)
        out = []
        for item in context.items:
            if isinstance(item, SummaryPiece):
                out.append(summary_node(item))
                continue
            for key in ("raptor_nodes", "raptor_layers", "raptor_kinds"):  # LlamaIndex metadata is flat
                if isinstance(item.metadata.get(key), list):
                    item.metadata[key] = ",".join(map(str, item.metadata[key]))
            out.append(span_to_node(item))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(check_query(query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._nodes, check_query(query_bundle.query_str))
