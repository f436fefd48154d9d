"""Evaluation of sliding-window retrieval on LongBench-format QA sets.

Python API::

    from swrag_integrations.evaluation import make_grid, run_eval
    grid = make_grid(["dds", "rcs"], [1024], ["3"])
    rows = run_eval(["multifieldqa_zh.jsonl"], grid, "results/zh", retrieval_only=True)

Command line: ``swrag eval ...`` or ``python -m swrag_integrations.evaluation ...``
(see `swrag_integrations.cli.eval`).
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

# Every strategy module registers its pipelines when imported (evaluation/strategies.py lists them).
from swrag_integrations.evaluation import strategies as _strategies  # noqa: E402,F401

# The command line lives in cli/eval.py, which imports this package: its names load on first use.
_LAZY = {
    "main": "..cli.eval",
    "make_grid": "runner",
    "run_eval": "runner",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "AssembledContext": "context",
    "CachedEmbeddings": "embeddings",
    "DEFAULT_BUDGET": "context",
    "EvalConfig": "pipelines",
    "Example": "datasets",
    "PIPELINES": "pipelines",
    "PROMPT_EN": "runner",
    "PROMPT_ZH": "runner",
    "Passage": "datasets",
    "Pipeline": "pipelines",
    "PipelineSpec": "pipelines",
    "QueryCache": "runner",
    "Source": "datasets",
    "add_arguments": "..cli.eval",
    "answer_tokens": "metrics",
    "assemble_by_offset": "context",
    "assemble_by_text": "context",
    "bootstrap_ci": "metrics",
    "build_corpus": "datasets",
    "build_parser": "..cli.eval",
    "build_pipeline": "pipelines",
    "context_recall": "metrics",
    "count_tokens": "context",
    "default_embeddings": "embeddings",
    "example_sources": "datasets",
    "generate_answer": "runner",
    "gold_sources": "datasets",
    "gold_spans": "datasets",
    "half_of": "datasets",
    "load_examples": "datasets",
    "load_llm": "runner",
    "markdown_table": "report",
    "normalize_answer": "metrics",
    "paired_bootstrap": "metrics",
    "parse_steps": "runner",
    "plot_heatmaps": "report",
    "plot_multi_query": "report",
    "qa_f1": "metrics",
    "register_pipeline": "pipelines",
    "run_from_args": "..cli.eval",
    "select_half": "datasets",
    "significance_table": "report",
    "source_recall": "metrics",
    "span_hit": "metrics",
    "split_passages": "datasets",
    "summarize": "runner",
    "write_reports": "report",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
