"""Evaluation of sliding-window retrieval on LongBench-format QA sets.

Python API::

    from swrag_integrations.evaluation import make_grid, run_eval
    grid = make_grid(["dds", "rcs"], [1024], ["3"])
    rows = run_eval(["multifieldqa_zh.jsonl"], grid, "results/zh", retrieval_only=True)

Command line: ``swrag eval ...`` or ``python -m swrag_integrations.evaluation ...``
(see :mod:`swrag_integrations.cli.eval`).
"""

from swrag_integrations.core._lazy import lazy_exports
from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext, assemble_by_offset, assemble_by_text, count_tokens
from swrag_integrations.evaluation.datasets import (
    Example,
    Passage,
    Source,
    build_corpus,
    example_sources,
    gold_sources,
    gold_spans,
    half_of,
    load_examples,
    select_half,
    split_passages,
)
from swrag_integrations.evaluation.embeddings import CachedEmbeddings, default_embeddings
from swrag_integrations.evaluation.metrics import (
    answer_tokens,
    bootstrap_ci,
    context_recall,
    normalize_answer,
    paired_bootstrap,
    qa_f1,
    source_recall,
    span_hit,
)
from swrag_integrations.evaluation.pipelines import PIPELINES, EvalConfig, Pipeline, PipelineSpec, build_pipeline, register_pipeline
from swrag_integrations.evaluation.report import markdown_table, plot_heatmaps, plot_multi_query, significance_table, write_reports
from swrag_integrations.evaluation.runner import (
    PROMPT_EN,
    PROMPT_ZH,
    QueryCache,
    generate_answer,
    load_llm,
    make_grid,
    parse_steps,
    run_eval,
    summarize,
)

__all__ = [
    "AssembledContext",
    "CachedEmbeddings",
    "DEFAULT_BUDGET",
    "PIPELINES",
    "PipelineSpec",
    "register_pipeline",
    "EvalConfig",
    "Example",
    "PROMPT_EN",
    "PROMPT_ZH",
    "Passage",
    "Pipeline",
    "QueryCache",
    "Source",
    "add_arguments",
    "answer_tokens",
    "assemble_by_offset",
    "assemble_by_text",
    "bootstrap_ci",
    "build_corpus",
    "build_parser",
    "build_pipeline",
    "context_recall",
    "count_tokens",
    "default_embeddings",
    "example_sources",
    "generate_answer",
    "gold_sources",
    "gold_spans",
    "load_examples",
    "half_of",
    "select_half",
    "load_llm",
    "main",
    "make_grid",
    "markdown_table",
    "normalize_answer",
    "paired_bootstrap",
    "parse_steps",
    "plot_heatmaps",
    "plot_multi_query",
    "qa_f1",
    "run_eval",
    "run_from_args",
    "significance_table",
    "source_recall",
    "span_hit",
    "split_passages",
    "summarize",
    "write_reports",
]



# Every strategy module registers its pipelines when imported (evaluation/strategies.py lists them).
from swrag_integrations.evaluation import strategies as _strategies  # noqa: E402,F401

# The command line lives in cli/eval.py, which imports this package: its names load on first use.
_CLI = {"add_arguments": "..cli.eval", "build_parser": "..cli.eval", "main": "..cli.eval", "run_from_args": "..cli.eval"}

__getattr__, __dir__ = lazy_exports(__name__, _CLI)
