"""``swrag eval`` pipelines of graph retrieval (registered as ``hipporag``, ``graphrag-local``).

Both build what the ``parent`` pipeline builds (an in-memory
`SlidingWindowIndex`: 50-token small chunks, MiniLM
vectors in Chroma, BM25, DDS windows of ``window`` tokens / 3 delimiters), then the
passage-phrase graph over its medium chunks (`build_graph`), and answer
with the windows the graph ranks, merged by offset under the budget.

* `HippoRAGPipeline` / `GraphRAGLocalPipeline`: the rule extractor (no LLM).
* `HippoRAGLLMPipeline` / `GraphRAGLocalLLMPipeline`: triples from the
  local LLM (`load_llama3`, the bundled 135M model unless
  ``SWRAG_LLAMA3`` names another), answers cached in ``<cache>/graph/extraction.sqlite``
  so an interrupted build resumes. Slow: about 8 s per 150-token passage here.

After the build, ``pipeline.build_report`` (`BuildReport`) holds the
build time, graph size and extraction counts (LLM calls, parse failures).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from swrag_integrations.evaluation.langchain_pipelines import ParentPipeline
from swrag_integrations.evaluation.pipelines import PipelineSpec, register_pipeline
from swrag_integrations.methods.graph.extraction import LLMExtractor, RuleExtractor
from swrag_integrations.methods.graph.graph import build_graph

__all__ = ["HippoRAGPipeline", "GraphRAGLocalPipeline", "HippoRAGLLMPipeline", "GraphRAGLocalLLMPipeline",
           "local_extractor"]


def local_extractor() -> LLMExtractor:
    """The local LLM as an extractor, with a persistent answer cache."""
    from swrag_integrations.llm import load_llama3
    from swrag_integrations.llm.loader import default_cache_dir

    llm = load_llama3(max_new_tokens=160)
    return LLMExtractor(llm.as_langchain(), cache_path=default_cache_dir() / "graph" / "extraction.sqlite")


class _GraphPipeline(ParentPipeline):
    """The parent pipeline's index plus the graph (subclasses choose the retrieval)."""

    unit = "medium"
    k_passages = 30
    options: dict[str, Any] = {}

    def make_extractor(self) -> Any:
        return RuleExtractor()

    def __init__(self, sources, config, *, embeddings=None, **kwargs) -> None:
        super().__init__(sources, config, embeddings=embeddings, **kwargs)
        t0 = time.perf_counter()
        self.extractor = self.make_extractor()
        self.graph, self.build_report = build_graph(self.index, self.extractor, unit=self.unit,
                                                    embeddings=self.index.embeddings)
        self.graph_seconds = time.perf_counter() - t0
        self.index_bytes += len(self.graph.to_bytes())
        self.searcher = self.make_searcher()

    def make_searcher(self) -> Any:
        raise NotImplementedError

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        if not self.sources:
            return []
        spans = self.searcher.spans([question, *queries], budget_tokens=self.budget, k=self.k,
                                    k_passages=self.k_passages)
        return [(self._ids.get(s.source_id, s.source_id), s.start, s.end) for s in spans]

    def close(self) -> None:
        close = getattr(self.extractor, "close", None)
        if close is not None:
            close()
        super().close()


class HippoRAGPipeline(_GraphPipeline):
    """HippoRAG (PPR over the graph, fused with the hybrid ranking) -- rule extractor."""

    def make_searcher(self) -> Any:
        from swrag_integrations.methods.graph.hipporag import HippoRAG

        return HippoRAG(self.index, self.graph, extractor=self.extractor, **self.options)


class GraphRAGLocalPipeline(_GraphPipeline):
    """GraphRAG local search (seed entities, their neighbours and communities) -- rule extractor."""

    def make_searcher(self) -> Any:
        from swrag_integrations.methods.graph.graphrag import GraphRAG

        searcher = GraphRAG(self.index, self.graph, extractor=self.extractor, **self.options)
        searcher.build_communities()
        return searcher


class HippoRAGLLMPipeline(HippoRAGPipeline):
    """HippoRAG with the local LLM's triples."""

    def make_extractor(self) -> Any:
        return local_extractor()


class GraphRAGLocalLLMPipeline(GraphRAGLocalPipeline):
    """GraphRAG local search with the local LLM's triples."""

    def make_extractor(self) -> Any:
        return local_extractor()


for _name, _builder, _description in (
    ("hipporag", HippoRAGPipeline, "HippoRAG: passage-phrase graph, personalized PageRank"),
    ("graphrag-local", GraphRAGLocalPipeline, "GraphRAG local search over Leiden communities"),
    ("hipporag-llm", HippoRAGLLMPipeline, "HippoRAG with the local LLM's triples (slow)"),
    ("graphrag-local-llm", GraphRAGLocalLLMPipeline, "GraphRAG local search with the local LLM's triples (slow)"),
):
    register_pipeline(_name, PipelineSpec(_builder, None, needs_embeddings=True, description=_description))
