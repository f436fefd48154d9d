"""The strategy ``default+learned-fusion`` (issue 44, item 2): the default with its first
stage ranked by the learned fusion model instead of fixed RRF weights.

For each query the default retriever's first stage is run wider
(`swrag_integrations.engine.learned_fusion.POOL_FACTOR` times its ``k_child`` hits, BM25 and
dense fused by RRF as usual), the pool is re-ranked by the logistic model shipped in
``engine/fusion_model.json`` (`swrag_integrations.engine.learned_fusion.rerank`) and its
``k_child`` best hits go through the default's parent ranking and budget planner
unchanged (`swrag_integrations.engine.parents.spans_for`). Everything else -- index,
children, windows, budget -- is the default's. Measured in docs/eval/levers.md.
"""

from __future__ import annotations

from typing import Sequence

from swrag_integrations.engine.learned_fusion import POOL_FACTOR, FusionModel, load_model, rerank
from swrag_integrations.engine.parents import spans_for
from swrag_integrations.evaluation.langchain_pipelines import DefaultPipeline
from swrag_integrations.evaluation.pipelines import PipelineSpec, register_pipeline

__all__ = ["DefaultLearnedFusionPipeline", "learned_hits"]


def learned_hits(retriever, query: str, model: FusionModel) -> list:
    """Stage 1 of ``default+learned-fusion`` for one query: the retriever's RRF first stage
    over ``POOL_FACTOR`` times its ``k_child`` candidates, re-ranked by ``model``, its
    ``k_child`` best (`ChildHit` s), without those under the retriever's
    ``min_relevance`` (as the default retriever drops them)."""
    from swrag_integrations.engine.trace import above_floor

    pool = retriever.find_chunks(query, POOL_FACTOR * retriever.k_child)
    return above_floor(rerank(pool, retriever.k_child, model), retriever.min_relevance) if pool else []


class DefaultLearnedFusionPipeline(DefaultPipeline):
    """`DefaultPipeline` whose first-stage hits are ranked by the learned fusion model."""

    def __init__(self, sources, config, **kwargs) -> None:
        self.model = load_model()
        super().__init__(sources, config, **kwargs)

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        if not self.sources:
            return []
        retriever = self.retriever_for(question)
        hits = [learned_hits(retriever, q, self.model) for q in [question, *queries]]
        spans = spans_for(hits, retriever.index, budget_tokens=self.budget, k=retriever.k, expand=retriever.expand)
        return [(self._ids.get(s.source_id, s.source_id), s.start, s.end) for s in spans]


register_pipeline("default+learned-fusion", PipelineSpec(
    DefaultLearnedFusionPipeline, None, needs_embeddings=True,
    description="the default; first-stage hits ranked by a logistic model over BM25/dense scores and ranks, "
                "hits per window and position (fitted on the tuning halves) instead of RRF"))
