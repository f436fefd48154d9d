"""``swrag eval`` strategies for RAPTOR: collapsed tree / traversal, extractive / LLM summaries.

===================  ==============================================================
strategy             pipeline
===================  ==============================================================
``raptor``           `RaptorPipeline`: collapsed tree (hybrid ranking), extractive summaries
``raptor-dense``     `RaptorDensePipeline`: the same ranked by cosine alone (RAPTOR's own)
``raptor-llm``       `RaptorLLMPipeline`: collapsed tree, LLM summaries
``raptor-traverse``  `RaptorTraversePipeline`: tree traversal, extractive
===================  ==============================================================

The grid's ``window`` is the **leaf size**: leaves are the index's small chunks
(FFS pieces tiling the text, `leaves_from_text` ``strategy="chunks"``)
of ``window`` tokens; RAPTOR's own leaves were 100-token chunks
(``--windows 100``). Leaves are embedded with the runner's embedder (MiniLM).
In document mode every document gets its tree; in corpus mode all sources form a
forest of per-document trees (``SWRAG_RAPTOR_SCOPE=corpus``: one tree over all).

Contexts are the budgeted `RaptorContext` as an
``AssembledContext``: leaves and extractive sentences merged by offset; an LLM summary
is a piece of the pseudo-source ``raptor-summary:<node id>`` (its words count for
context recall like any other context text).

Environment (all optional):

* ``SWRAG_RAPTOR_LLM``: the summary LLM of ``raptor-llm`` as an ``--llm`` value
  (``default``: the local model; ``fake:a|b``; ``module:factory`` imports and runs that
  factory). Summaries are cached in ``SWRAG_RAPTOR_CACHE`` (a sqlite file; default
  ``$SWRAG_CACHE/raptor-summaries.sqlite3``).
* ``SWRAG_RAPTOR_SCOPE``: ``document`` (default) or ``corpus``.
* ``SWRAG_RAPTOR_REDUCTION``: ``auto`` (default: UMAP if installed, else PCA), ``umap``, ``pca``.
* ``SWRAG_RAPTOR_TREES``: a sqlite file that keeps the trees between runs (per
  document, keyed by text and settings; runs sharing it must not run at once).
* ``SWRAG_RAPTOR_LOG``: a JSONL file; every tree build appends its
  `BuildReport` (build time, LLM calls, fallbacks, layers).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext
from swrag_integrations.evaluation.pipelines import Pipeline, PipelineSpec, register_pipeline
from swrag_integrations.methods.raptor.build import TreeConfig
from swrag_integrations.methods.raptor.clustering import ClusterConfig
from swrag_integrations.methods.raptor.langchain import RaptorSearcher
from swrag_integrations.methods.raptor.search import NodeHit, assemble_hits, traversal_hits
from swrag_integrations.methods.raptor.store import RaptorIndex
from swrag_integrations.methods.raptor.summarise import ExtractiveSummarizer, LLMSummarizer

__all__ = ["RaptorPipeline", "RaptorDensePipeline", "RaptorLLMPipeline", "RaptorTraversePipeline",
           "summary_cache_path"]


def summary_cache_path() -> Path:
    """Where ``raptor-llm`` caches summaries (``SWRAG_RAPTOR_CACHE`` or the package cache folder)."""
    path = os.environ.get("SWRAG_RAPTOR_CACHE")
    if path:
        return Path(path).expanduser()
    from swrag_integrations.llm.loader import default_cache_dir

    return default_cache_dir() / "raptor-summaries.sqlite3"


_LLM_CACHE: dict[str, Any] = {}


def _summary_llm() -> Any:
    spec = os.environ.get("SWRAG_RAPTOR_LLM") or "default"
    if spec == "default":
        return None  # LLMSummarizer loads the local model once (lru-cached)
    if spec not in _LLM_CACHE:
        from swrag_integrations.evaluation.langchain_llm import load_llm

        _LLM_CACHE[spec] = load_llm(spec)
    return _LLM_CACHE[spec]


class RaptorPipeline(Pipeline):
    """RAPTOR, collapsed tree, extractive summaries (see the module docstring)."""

    mode = "collapsed"
    ranking = "hybrid"
    summaries = "extractive"
    top_k = 5

    def __init__(self, sources, config, *, embeddings=None, budget: int = DEFAULT_BUDGET, **kwargs) -> None:
        super().__init__(sources, config, embeddings=embeddings, budget=budget, **kwargs)
        if embeddings is None:
            from swrag_integrations.embeddings.minilm import default_embeddings

            embeddings = default_embeddings()
        self.embeddings = embeddings
        scope = os.environ.get("SWRAG_RAPTOR_SCOPE", "document")
        reduction = os.environ.get("SWRAG_RAPTOR_REDUCTION", "auto")
        tree_config = TreeConfig(cluster=ClusterConfig(reduction=reduction))
        self._store = None
        trees_path = os.environ.get("SWRAG_RAPTOR_TREES")
        if trees_path:  # keep trees between runs (e.g. two budgets): rebuilt only when a text changes
            from swrag_integrations.stores.sources import SqliteSourceStore

            self._store = SqliteSourceStore(Path(trees_path).expanduser())
        name = f"eval-{self.summaries}-{config.unit}{int(config.window)}-{scope}"
        self.raptor = RaptorIndex(
            None, store=self._store, name=name, embeddings=embeddings, summarizer=self._summarizer(),
            config=tree_config, scope=scope, leaves={"strategy": "chunks", "size": int(config.window), "unit": config.unit},
            show_progress=False)
        t0 = time.perf_counter()
        # prune=False: a shared tree store holds other documents' trees too
        self.report = self.raptor.build(self.texts, prune=False) if self.sources else self.raptor.last_report
        self.build_seconds = time.perf_counter() - t0
        keys = sorted(self.texts) if scope == "document" else ["corpus"]
        trees = [t for t in (self.raptor.get(k) for k in keys) if t is not None]
        from swrag_integrations.methods.raptor.tree import RaptorTree

        tree = trees[0] if len(trees) == 1 else RaptorTree.merge(trees)
        self.chunks = len(tree)
        self.index_bytes = sum(len(t.to_bytes()) for t in trees)
        self.searcher = RaptorSearcher(tree, embeddings, encoding_name=self.encoding_name, ranking=self.ranking)
        self._log()

    def _summarizer(self) -> Any:
        if self.summaries == "llm":
            return LLMSummarizer(_summary_llm(), cache=summary_cache_path(), encoding_name=self.encoding_name)
        return ExtractiveSummarizer(encoding_name=self.encoding_name)

    def _log(self) -> None:
        path = os.environ.get("SWRAG_RAPTOR_LOG")
        if not path:
            return
        row = {"strategy": self.config.strategy, "window": self.config.window, "sources": len(self.sources),
               "source_ids": [s.source_id for s in self.sources][:50], "build_seconds": self.build_seconds,
               "nodes": self.chunks, "report": self.report.as_dict()}
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    def _hits(self, question: str, queries: Sequence[str]) -> list[NodeHit]:
        tree = self.searcher.tree
        if not tree.nodes:
            return []
        asked = [question, *queries]
        lists = []
        for q in asked:
            qvec = self.embeddings.embed_query(q)
            lists.append(self.searcher.collapsed(q, qvec) if self.mode == "collapsed"
                         else traversal_hits(tree, qvec, top_k=self.top_k))
        if len(lists) == 1:
            return lists[0]
        from swrag_integrations.engine.fusion import rrf

        fused = rrf([[h.index for h in hits] for hits in lists])
        return [NodeHit(int(i), float(score)) for i, score, _ in fused]

    def search(self, question: str, budget: int = DEFAULT_BUDGET, queries: Sequence[str] = ()):
        """The `RaptorContext` for ``question``."""
        return assemble_hits(self.searcher.tree, self._hits(question, queries), budget, k=self.k,
                             encoding_name=self.encoding_name)

    def context(self, question: str, budget: int = DEFAULT_BUDGET, queries: Sequence[str] = ()) -> AssembledContext:
        return self.search(question, budget, queries).as_assembled()

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        """The exact spans of the context (LLM summaries have none)."""
        return self.search(question, self.budget, queries).offsets

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


class RaptorDensePipeline(RaptorPipeline):
    """RAPTOR, collapsed tree ranked by cosine alone (the paper's ranking), extractive summaries."""

    ranking = "dense"


class RaptorLLMPipeline(RaptorPipeline):
    """RAPTOR, collapsed tree, LLM summaries (``SWRAG_RAPTOR_LLM``, default the local model)."""

    summaries = "llm"


class RaptorTraversePipeline(RaptorPipeline):
    """RAPTOR, tree traversal (top 5 per layer), extractive summaries."""

    mode = "traverse"


for _name, _builder, _description in (
    ("raptor", RaptorPipeline, "RAPTOR summary tree over the index's chunks (collapsed tree, hybrid ranking)"),
    ("raptor-dense", RaptorDensePipeline, "RAPTOR collapsed tree ranked by cosine alone (the paper's ranking)"),
    ("raptor-llm", RaptorLLMPipeline, "RAPTOR collapsed tree with the local LLM's summaries (slow)"),
    ("raptor-traverse", RaptorTraversePipeline, "RAPTOR tree traversal, extractive summaries"),
):
    register_pipeline(_name, PipelineSpec(_builder, None, needs_embeddings=True, description=_description))
