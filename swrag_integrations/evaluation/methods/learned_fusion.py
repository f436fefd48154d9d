"""The strategies ``default+learned-fusion`` and ``default+rrf`` (issue 44, item 2): the
default retriever with its first stage always ranked by the learned fusion model
(``fusion="learned"``) or always by fixed-weight RRF (``fusion="rrf"``).

The default itself ranks by RRF (``fusion="rrf"``), so ``default+rrf`` is ``default`` with
the fusion named; ``fusion="auto"`` (the model at budgets up to
`swrag_integrations.engine.learned_fusion.LEARNED_FUSION_MAX_BUDGET` tokens, RRF above) is
``default+learned-fusion`` at those budgets. Both keep the two fusions measurable at every
budget, paired against each other or against ``default``.
Everything else -- index, children, windows, budget planner -- is the default's.
Measured in docs/eval/levers.md.
"""

from __future__ import annotations

from swrag_integrations.evaluation.langchain_pipelines import DefaultPipeline
from swrag_integrations.evaluation.pipelines import PipelineSpec, register_pipeline

__all__ = ["DefaultLearnedFusionPipeline", "DefaultRRFPipeline"]


class DefaultLearnedFusionPipeline(DefaultPipeline):
    """`DefaultPipeline` whose first stage is always the learned fusion (``fusion="learned"``)."""

    RETRIEVER_OPTIONS = {"fusion": "learned"}


class DefaultRRFPipeline(DefaultPipeline):
    """`DefaultPipeline` whose first stage is always RRF (``fusion="rrf"``, the default's):
    the learned fusion's comparison with the fusion named."""

    RETRIEVER_OPTIONS = {"fusion": "rrf"}


register_pipeline("default+learned-fusion", PipelineSpec(
    DefaultLearnedFusionPipeline, None, needs_embeddings=True,
    description="the default with fusion='learned' at every budget: first-stage hits ranked by a logistic model "
                "over BM25/dense scores and ranks, hits per window and position (fitted on the tuning halves)"))
register_pipeline("default+rrf", PipelineSpec(
    DefaultRRFPipeline, None, needs_embeddings=True,
    description="the default with fusion='rrf' at every budget: first-stage hits ranked by fixed-weight RRF "
                "(the default's fusion, named; issue 44)"))
