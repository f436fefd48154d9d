"""Every strategy of ``swrag eval``, in one place: the modules that register pipelines.

Each module below defines pipeline classes and registers them in
`PIPELINES` with
`register_pipeline` when it is imported.
Importing them here (plain imports, so the import graph sees every edge) fills the
registry; the ``evaluation`` package imports this module, so the registry is complete as
soon as any evaluation module is in use. A new strategy module is added to this list;
nothing is imported by name. The order here is the order of ``swrag eval --help``.
"""

from __future__ import annotations

from swrag_integrations.evaluation import pipelines  # ffs, dfs, dds
from swrag_integrations.evaluation import langchain_pipelines  # rcs, parent, default*, langchain-stock
from swrag_integrations.evaluation import postgres_pipelines  # default@postgres (+keyword-only, +dense-only)
from swrag_integrations.evaluation.peers import levers  # default+... (levers on the default)
from swrag_integrations.evaluation.methods import learned_fusion  # default+learned-fusion
from swrag_integrations.evaluation.peers import langchain_peers  # langchain-ensemble, langchain-parent
from swrag_integrations.evaluation.peers import llama_index_peers  # llamaindex-window
from swrag_integrations.evaluation.peers import llama_index_hybrid  # llamaindex-hybrid
from swrag_integrations.evaluation.methods import raptor  # raptor, raptor-dense, raptor-llm, raptor-traverse
from swrag_integrations.evaluation.methods import graph  # hipporag, graphrag-local (+ -llm)

__all__ = ["STRATEGY_MODULES"]

STRATEGY_MODULES = (pipelines, langchain_pipelines, postgres_pipelines, levers, learned_fusion, langchain_peers,
                    llama_index_peers, llama_index_hybrid,
                    raptor, graph)
"""The modules whose import registers the strategies, in registration order."""
