"""The evaluation grid: datasets x configurations x questions, resumable.

`run_eval` writes one JSON line per (configuration, question) to
``<out>/records.jsonl`` as soon as it is computed; a rerun with the same output
directory skips every record already there (an interrupted run resumes where it
stopped and gives the same results). At the end it writes the per-configuration
summary (``results.json`` / ``results.csv``), the per-question records of this grid
(``records.json`` / ``records.csv``), Markdown tables and plots (`report`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.evaluation.context import DEFAULT_BUDGET
from swrag_integrations.evaluation.langchain_llm import load_llm  # the one --llm loader
from swrag_integrations.evaluation.datasets import (
    Example,
    build_corpus,
    dataset_name,
    example_sources,
    gold_sources,
    gold_spans,
    iter_jsonl,
    check_half,
    half_label,
    load_examples,
    select_half,
)
from swrag_integrations.evaluation.metrics import bootstrap_ci, context_recall, qa_f1, source_recall, span_hit
from swrag_integrations.evaluation.pipelines import PIPELINES, EvalConfig, build_pipeline, shared_ranking
from swrag_integrations.evaluation.steps import ContextSteps, StepTools, add_headers, make_tools, piece_diversity, steps_context

__all__ = [
    "PROMPT_EN",
    "PROMPT_ZH",
    "DEFAULT_WINDOWS",
    "make_grid",
    "parse_steps",
    "run_eval",
    "results_half",
    "check_out_half",
    "summarize",
    "load_llm",
    "generate_answer",
    "QueryCache",
    "RESULT_FIELDS",
]

from swrag_integrations.methods.chain import PROMPT_EN, PROMPT_ZH  # the method's prompts, one definition

# LongBench's generation limit for single-document QA (MultiFieldQA, Qasper).
DEFAULT_WINDOWS = (512, 1024, 2048)
RECORDS_FILE = "records.jsonl"

RESULT_FIELDS = [
    "dataset", "mode", "strategy", "window", "step", "step_units", "unit", "multi_query", "budget", "k",
    "split_passages", "half", "n", "context_recall", "hit", "f1", "ci_low", "ci_high", "ci_metric",
    "recall_ci_low", "recall_ci_high", "f1_ci_low", "f1_ci_high", "source_recall", "span_hit",
    "seconds", "chunks", "index_bytes", "context_tokens", "llm", "steps", "diversity", "litm", "rse", "rerank",
    "headers", "context_diversity", "context_diversity_n", "grounded_share", "unsupported_numbers",
    "unsupported_names",
]


# --------------------------------------------------------------------------- grid


def parse_steps(text: str | None) -> list[str]:
    """Parse ``--steps``: ``"1/2,1/4,3"``; ``"=128"`` is an absolute FFS/DFS step.

    Returns the labels; fractions apply to ffs/dfs, integers to dds and parent.
    """
    if not text:
        return []
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "/" in item:
            num, _, den = item.partition("/")
            if not (num.strip().isdigit() and den.strip().isdigit()) or int(den) == 0 or int(num) == 0:
                raise ValueError(f"bad step fraction {item!r} (use e.g. 1/4)")
            if int(num) > int(den):
                raise ValueError(f"step fraction {item!r} is larger than the window")
            out.append(f"{int(num)}/{int(den)}")
        elif item.startswith("="):
            if not item[1:].isdigit() or int(item[1:]) <= 0:
                raise ValueError(f"bad absolute step {item!r} (use e.g. =128)")
            out.append(item)
        elif item.isdigit() and int(item) > 0:
            out.append(str(int(item)))
        else:
            raise ValueError(f"bad step {item!r}: use fractions (1/4) for ffs/dfs, integers for dds")
    return out


def _steps_for(strategy: str, steps: Sequence[str]) -> list[str | None]:
    spec = PIPELINES[strategy]
    if spec.step_kind is None:
        return [None]
    if spec.step_kind == "count":
        mine = [s for s in steps if "/" not in s and not s.startswith("=")]
    else:
        mine = [s for s in steps if "/" in s or s.startswith("=")]
    return list(mine or spec.default_steps)


def make_grid(
    strategies: Sequence[str] = ("ffs", "dfs", "dds", "rcs"),
    windows: Sequence[int] = DEFAULT_WINDOWS,
    steps: Sequence[str] | str | None = None,
    *,
    unit: str = "token",
    multi_query: bool | Sequence[bool] = False,
) -> list[EvalConfig]:
    """All configurations of the grid.

    Args:
        strategies: names from `PIPELINES`.
        windows: window sizes.
        steps: step labels (see `parse_steps`); a strategy that gets none of
            its kind uses the method's defaults (``PipelineSpec.default_steps``).
        unit: ``"token"`` or ``"char"``.
        multi_query: ``False``, ``True`` or e.g. ``(False, True)`` for both.

    Returns:
        The distinct `EvalConfig` of every strategy, window, step and multi-query mode.

    Raises:
        ValueError: a name in ``strategies`` is not in `PIPELINES`, or ``steps`` is a
            label string `parse_steps` rejects.
    """
    if isinstance(steps, str):
        steps = parse_steps(steps)
    steps = list(steps or [])
    modes = [multi_query] if isinstance(multi_query, bool) else list(multi_query)
    grid = []
    for strategy in strategies:
        if strategy not in PIPELINES:
            raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(PIPELINES)}")
        for window in windows:
            for step in _steps_for(strategy, steps):
                for mq in modes:
                    grid.append(EvalConfig(strategy, int(window), step, unit, bool(mq)))
    return list(dict.fromkeys(grid))


# ---------------------------------------------------------------------------- LLM


def _llm_name(llm) -> str:
    if llm is None:
        return ""
    for attr in ("model_name", "model", "model_id"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return f"{type(llm).__name__}:{value}"
    return type(llm).__name__


def _text(result: Any) -> str:
    content = getattr(result, "content", result)
    if isinstance(content, list):  # content blocks
        content = "".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
    return str(content)


def generate_answer(llm, question: str, context: str, language: str = "en") -> str:
    """Ask ``llm`` the method's prompt (Chinese prompt for ``zh``)."""
    template = PROMPT_ZH if str(language).startswith("zh") else PROMPT_EN
    return _text(llm.invoke(template.format(context=context, question=question))).strip()


class QueryCache:
    """Multi-query variants, generated once per (LLM, question) and kept in a JSONL file."""

    def __init__(self, path: str | os.PathLike | None, llm, n_queries: int = 3) -> None:
        self.path = Path(path) if path else None
        self.llm = llm
        self.n_queries = n_queries
        self.name = _llm_name(llm)
        self._cache: dict[str, list[str]] = {}
        if self.path is not None:
            for row in iter_jsonl(self.path):
                self._cache[row["key"]] = row["queries"]

    def _key(self, question: str) -> str:
        return hashlib.sha1(f"{self.name}\x00{self.n_queries}\x00{question}".encode()).hexdigest()

    def __call__(self, question: str) -> list[str]:
        key = self._key(question)
        if key not in self._cache:
            queries = self._generate(question)
            self._cache[key] = queries
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"key": key, "question": question, "queries": queries}, ensure_ascii=False) + "\n")
        return list(self._cache[key])

    def _generate(self, question: str) -> list[str]:
        if self.llm is None:
            raise ValueError("multi-query needs an LLM")
        from swrag_integrations.langchain.multi_query import generate_queries

        return generate_queries(self.llm, question, self.n_queries)[1:]


# ------------------------------------------------------------------------- running


@dataclass
class _Run:
    dataset: str
    mode: str
    split: bool
    budget: int
    k: int | None
    generate: bool
    steps: ContextSteps = ContextSteps()

    def prefix(self, config: EvalConfig) -> str:
        parts = [self.dataset, self.mode, "split" if self.split else "whole", str(self.budget), str(self.k),
                 config.key, "gen" if self.generate else "ret"]
        if self.steps.label:  # the baseline keeps the keys of runs made before steps existed
            parts.append(self.steps.label)
        return "|".join(parts)


def _record_key(prefix: str, qid: str) -> str:
    return f"{prefix}#{qid}"


def _question_record(
    run: _Run,
    config: EvalConfig,
    example: Example,
    pipeline,
    *,
    index_id: str,
    index_seconds: float,
    query_cache: QueryCache | None,
    llm,
    encoding_name: str,
    tools: StepTools | None = None,
    measure_diversity: bool = False,
    header_report: dict | None = None,
) -> dict:
    t0 = time.perf_counter()
    queries = query_cache(example.question) if (config.multi_query and query_cache is not None) else []
    ctx = steps_context(pipeline, example.question, run.steps, tools or StepTools(), run.budget, queries)
    t1 = time.perf_counter()
    diversity = None
    if measure_diversity and tools is not None and tools.embeddings is not None:
        texts = getattr(pipeline, "texts", {})
        pieces = [texts[s][a:b] for s, a, b in ctx.offsets if s in texts]
        diversity = piece_diversity(pieces, tools.embeddings, encoding_name=encoding_name)
    recall = context_recall(ctx.text, example.answers, example.language)
    prediction, f1 = None, None
    if run.generate:
        prediction = generate_answer(llm, example.question, ctx.text, example.language)
        f1 = qa_f1(prediction, example.answers, example.language)
    t2 = time.perf_counter()
    grounding = None
    if run.generate:
        from swrag_integrations.methods.grounding.align import groundedness

        grounding = groundedness(prediction, ctx.spans, question=example.question)
    split = run.split
    gold = gold_sources(example, split=split)
    retrieved_sources = ctx.sources
    multi_source = run.mode == "corpus" or len(example_sources(example, split=split)) > 1
    s_recall = None
    if multi_source:
        s_recall = 1.0 if source_recall(retrieved_sources, gold) == 1.0 else 0.0
    spans = gold_spans(example)
    s_hit = None
    if spans:
        doc_id = example_sources(example, split=False)[0].source_id
        s_hit = 1.0 if span_hit(ctx.offsets, doc_id, spans) else 0.0
    return {
        "key": None,  # filled by the caller
        "dataset": run.dataset,
        "mode": run.mode,
        "split_passages": split,
        "budget": run.budget,
        "k": run.k,
        "strategy": config.strategy,
        "window": config.window,
        "step": config.step,
        "step_units": config.step_units,
        "unit": config.unit,
        "multi_query": config.multi_query,
        "qid": example.qid,
        "language": example.language,
        "question": example.question,
        "answers": list(example.answers),
        "queries": queries,
        "context_recall": recall,
        "hit": 1.0 if recall >= 1.0 else 0.0,
        "f1": f1,
        "prediction": prediction,
        "groundedness": grounding,
        "context_tokens": ctx.text_tokens,
        "spans": [list(s) for s in ctx.offsets],
        "sources_retrieved": len(retrieved_sources),
        "gold_sources_found": source_recall(retrieved_sources, gold) if multi_source else None,
        "source_recall": s_recall,
        "span_hit": s_hit,
        "index_id": index_id,
        "chunks": pipeline.chunks,
        "index_bytes": pipeline.index_bytes,
        "index_seconds": index_seconds,
        "retrieve_seconds": t1 - t0,
        "generate_seconds": (t2 - t1) if run.generate else 0.0,
        "seconds": index_seconds + (t2 - t0),
        "llm": _llm_name(llm) if run.generate else None,
        **run.steps.as_record(),
        "context_pieces": len(ctx.spans),
        "context_diversity": diversity,
        "header_report": header_report,
    }


class _Writer:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a run killed mid-line leaves a partial last line: start on a fresh one
        if path.exists() and path.stat().st_size:
            with path.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                needs_newline = fh.read(1) != b"\n"
            if needs_newline:
                with path.open("a", encoding="utf-8") as fh:
                    fh.write("\n")
        self.handle = path.open("a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


def run_eval(
    data: Sequence[str | os.PathLike],
    configs: Sequence[EvalConfig],
    out_dir: str | os.PathLike,
    *,
    mode: str = "document",
    split_passages: bool = False,
    budget: int = DEFAULT_BUDGET,
    k: int | None = None,
    limit: int | None = None,
    retrieval_only: bool = False,
    llm=None,
    embeddings=None,
    n_queries: int = 3,
    progress: bool = True,
    seed: int = 0,
    n_resamples: int = 1000,
    reports: bool = True,
    encoding_name: str = DEFAULT_ENCODING,
    max_questions: int | None = None,
    steps: ContextSteps | None = None,
    diversity: str | bool | None = None,
    litm: bool = False,
    rse: bool = False,
    rerank: str | None = None,
    contextual: bool = False,
    autocontext: bool = False,
    step_pool: int | None = None,
    measure_diversity: bool | None = None,
    header_llm=None,
    header_document_tokens: int = 6000,
    half: str | None = None,
    budgets: Sequence[int] | None = None,
) -> list[dict]:
    """Evaluate ``configs`` on every dataset file in ``data``; returns the summary rows.

    Args:
        data: LongBench-format JSONL files (dataset name = file stem).
        configs: the grid (`make_grid`).
        out_dir: output directory; existing records there are reused (resume).
        mode: ``"document"`` (each question against its own document) or
            ``"corpus"`` (all documents of a dataset in one index).
        split_passages: cut ``Passage i:`` blocks into separate sources.
        budget: context budget in tokens (same for every configuration).
        budgets: several budgets in one run (a budget curve; overrides ``budget``): every
            index is built once and asked every question under each budget, and a pipeline
            whose ranking does not depend on the budget ranks each question once
            (`shared_ranking`); one record per (question, budget), keyed
            and summarised by budget.
        k: cap on ranked chunks assembled (``None``: as many as fit the budget; the
            stock retrievers then fetch `STOCK_DEFAULT_K`).
        limit: first ``limit`` questions of each dataset (of ``half`` when given; in
            corpus mode the index still holds every document of the file).
        retrieval_only: compute context recall without generating answers.
        llm: LangChain LLM (or anything with ``as_langchain()``) for answers and
            multi-query; loaded with `load_llm` when needed and ``None``.
        embeddings: LangChain ``Embeddings`` for ``langchain-stock``/``parent``; default the
            packaged MiniLM behind a text-hash cache in ``<out>/cache/embeddings.sqlite``.
        n_queries: LLM-written query variants per question (multi-query).
        progress: show a tqdm bar over the (configuration, question) grid.
        seed: the bootstrap's random seed.
        n_resamples: bootstrap resamples per confidence interval.
        reports: write tables and plots too.
        encoding_name: the tokenizer that counts tokens (budgets, windows, contexts).
        max_questions: stop after computing this many new records (for tests of
            interrupted runs); the outputs are still written.
        steps: the context-quality steps (`ContextSteps`); or give them
            one by one with the next seven options (not both). The steps' label is part
            of every record key and row (field ``steps``; ``""`` = baseline).
        diversity: diversity selection: ``True``/``"greedy"`` or ``"mmr"`` (``None``/``False``: off).
        litm: reorder the context "lost in the middle" style (best pieces at both ends).
        rse: relevant segment extraction.
        rerank: ``"embedding"`` or ``"llm"`` reranking (``None``: off).
        contextual: index-time contextual chunk headers (not with ``autocontext``).
        autocontext: index-time AutoContext document headers (not with ``contextual``).
        step_pool: candidates given to rerank / diversity / RSE (``None``: the
            `ContextSteps` default).
        measure_diversity: record ``context_diversity`` (mean pairwise cosine distance
            of the context pieces, MiniLM by default) per question; default: on with
            ``diversity``.
        header_llm: LLM for ``contextual``/``autocontext`` headers (default ``llm``, else
            the local model).
        header_document_tokens: document tokens the header LLM sees (AutoContext: the
            document's head; contextual: the section holding the chunk).
        half: ``"tune"`` or ``"test"``: ask only that fixed half's questions
            (`half_of`; in corpus mode the index still holds every
            document of the file); ``None``: every question (reported as the whole set,
            halves mixed). Every summary row and record says which (``half``:
            ``"tune"``/``"test"``/``"all"``; a record's ``half`` is its question's own).

    Returns:
        The summary rows of `summarize` over the run's records (means, bootstrap
        confidence intervals and costs per dataset and configuration), each with its ``half``.

    Raises:
        ValueError: bad options (an unknown ``mode``, a non-positive ``k``, an empty
            ``configs``, ``steps`` together with single step options, ...), or ``out_dir``
            already holds results of another half (the halves are never merged into one report).
    """
    check_half(half)
    if mode not in ("document", "corpus"):
        raise ValueError(f"mode must be 'document' or 'corpus', got {mode!r}")
    budgets = check_budgets([budget] if budgets is None else budgets)
    if k is not None and k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    if not configs:
        raise ValueError("the grid is empty")
    steps = _make_steps(steps, diversity, litm, rse, rerank, contextual, autocontext, step_pool)
    for config in configs:
        steps.check(config.strategy)
    if measure_diversity is None:
        measure_diversity = bool(steps.diversity)
    out = Path(out_dir)
    check_out_half(out, half)
    out.mkdir(parents=True, exist_ok=True)
    generate = not retrieval_only
    need_llm = generate or any(c.multi_query for c in configs) or steps.rerank == "llm" or (
        steps.headers is not None and header_llm is None)
    if need_llm and llm is None:
        llm = load_llm("default")
    elif llm is not None and hasattr(llm, "as_langchain"):
        llm = llm.as_langchain()
    need_embeddings = (any(PIPELINES[c.strategy].needs_embeddings for c in configs) or measure_diversity
                       or steps.diversity or steps.rerank == "embedding")
    if embeddings is None and need_embeddings:
        from swrag_integrations.evaluation.embeddings import default_embeddings

        embeddings = default_embeddings(out / "cache" / "embeddings.sqlite")
    tools = make_tools(steps, embeddings=embeddings, llm=llm)
    headerer = None
    if steps.headers is not None:
        from swrag_integrations.methods.context import ContextualChunkHeaders

        headerer = ContextualChunkHeaders(
            header_llm if header_llm is not None else llm, mode=steps.headers,
            cache_path=out / "cache" / "headers.sqlite", show_progress=False, encoding_name=encoding_name,
            max_document_tokens=header_document_tokens,
        )
    query_cache = QueryCache(out / "cache" / "queries.jsonl", llm, n_queries) if need_llm else None

    records_path = out / RECORDS_FILE
    done = {row["key"] for row in iter_jsonl(records_path) if "key" in row}
    datasets = [(dataset_name(p), load_examples(p)) for p in data]

    plan = []
    for name, examples in datasets:
        questions = select_half(examples, half)  # the corpus below still gets every example
        questions = questions[:limit] if limit is not None else questions
        for config in configs:
            # one index per configuration serves every budget: (run, prefix, pending qids) per budget
            per_budget = []
            for b in budgets:
                run = _Run(name, mode, split_passages, b, k, generate, steps)
                prefix = run.prefix(config)
                per_budget.append((run, prefix, {e.qid for e in questions if _record_key(prefix, e.qid) not in done}))
            pending = [e for e in questions if any(e.qid in todo for _, _, todo in per_budget)]
            plan.append((per_budget, config, examples, questions, pending))

    total = sum(len(p[3]) * len(budgets) for p in plan)
    remaining = sum(len(todo) for p in plan for _, _, todo in p[0])
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=total - remaining, disable=not progress, desc="swrag eval", unit="q", file=sys.stderr)
    writer = _Writer(records_path)
    computed = 0
    try:
        for per_budget, config, examples, questions, pending in plan:
            if not pending:
                continue
            if max_questions is not None and computed >= max_questions:
                break
            first_run = per_budget[0][0]
            bar.set_postfix_str(f"{first_run.dataset} {config.label}", refresh=False)
            for index_id, pipe, index_seconds, group in _indexes(first_run, config, examples, pending, k, embeddings,
                                                                 encoding_name, headerer):
                try:
                    header_report = getattr(pipe, "header_report", None)
                    for example in group:
                        if max_questions is not None and computed >= max_questions:
                            break
                        with shared_ranking(pipe):
                            for run, prefix, todo in per_budget:
                                if example.qid not in todo:
                                    continue
                                if max_questions is not None and computed >= max_questions:
                                    break
                                if pipe.budget != run.budget:
                                    pipe.set_budget(run.budget)
                                record = _question_record(
                                    run, config, example, pipe, index_id=index_id, index_seconds=index_seconds,
                                    query_cache=query_cache, llm=llm, encoding_name=encoding_name,
                                    tools=tools, measure_diversity=measure_diversity, header_report=header_report,
                                )
                                index_seconds = 0.0  # the index cost is charged to its first record
                                header_report = None
                                record["key"] = _record_key(prefix, example.qid)
                                record["half"] = example.half
                                writer.write(record)
                                computed += 1
                                bar.update(1)
                finally:
                    pipe.close()
                if max_questions is not None and computed >= max_questions:
                    break
    finally:
        writer.close()
        bar.close()

    # The summary covers this grid's questions under *every* step combination found in
    # the output folder (the baseline and each earlier run with other steps), so the
    # tables show them side by side.
    wanted = {}
    bases: dict[str, set[str]] = {}
    for per_budget, config, examples, questions, pending in plan:
        for run, prefix, _ in per_budget:
            for e in questions:
                wanted[_record_key(prefix, e.qid)] = None
            base = _Run(run.dataset, run.mode, run.split, run.budget, run.k, run.generate).prefix(config)
            bases.setdefault(base, set()).update(e.qid for e in questions)
    records_by_key = {}
    others = {}
    for row in iter_jsonl(records_path):
        key = row.get("key")
        if not key:
            continue
        if key in wanted:
            records_by_key[key] = row
            continue
        prefix, _, qid = key.rpartition("#")
        base = prefix.rpartition("|")[0] if (row.get("steps") or "") else prefix
        if qid in bases.get(base, ()):
            others[key] = row
    records = [records_by_key[key] for key in wanted if key in records_by_key] + list(others.values())
    rows = summarize(records, seed=seed, n_resamples=n_resamples)
    for row in rows:
        row["half"] = half or "all"
    write_outputs(out, records, rows, reports=reports, seed=seed, n_resamples=n_resamples)
    return rows


def check_budgets(budgets: Sequence[int]) -> list[int]:
    """``budgets`` as a list of distinct positive integers in the given order.

    Raises:
        ValueError: empty, a repeated value, or a value that is not a positive integer.
    """
    values = list(budgets)
    bad = [b for b in values if isinstance(b, bool) or not isinstance(b, int) or b <= 0]
    if not values or bad:
        raise ValueError(f"budgets must be positive integers (tokens), e.g. 300,500,1000,1500; got {values!r}")
    repeated = sorted({b for b in values if values.count(b) > 1})
    if repeated:
        raise ValueError(f"budgets: {', '.join(map(str, repeated))} given twice; give each budget once")
    return values


def results_half(out_dir: str | os.PathLike) -> str | None:
    """The half recorded in ``out_dir/results.json``: ``"tune"``, ``"test"``, ``"all"``, or ``None`` if no results.

    Results written before halves existed have no ``half`` field: they covered the whole
    set (``"all"``).

    Raises:
        ValueError: the rows of ``results.json`` name more than one half.
    """
    path = Path(out_dir) / "results.json"
    if not path.exists():
        return None
    from swrag_integrations.evaluation.report import rows_half

    return rows_half(json.loads(path.read_text(encoding="utf-8")), where=str(path))


def check_out_half(out_dir: str | os.PathLike, half: str | None) -> None:
    """Refuse to write results of ``half`` into a folder that holds results of another half.

    Raises:
        ValueError: naming the folder, both halves and the fix (another ``--out``).
    """
    found = results_half(out_dir)
    wanted = half or "all"
    if found is not None and found != wanted:
        raise ValueError(
            f"output folder {out_dir} holds results of the {half_label(found)}, but this run asks for the "
            f"{half_label(wanted)}; halves are never merged into one report: use another --out (out_dir) "
            f"for the {half_label(wanted)}")


def _make_steps(steps, diversity, litm, rse, rerank, contextual, autocontext, step_pool) -> ContextSteps:
    if contextual and autocontext:
        raise ValueError("choose one of contextual and autocontext")
    if diversity is True:
        diversity = "greedy"
    elif diversity is False:
        diversity = None
    given = dict(
        diversity=diversity, litm=bool(litm), rse=bool(rse), rerank=rerank or None,
        headers="contextual" if contextual else ("auto" if autocontext else None),
    )
    if steps is not None:
        if any(v for v in given.values()) or step_pool is not None:
            raise ValueError("give either steps=ContextSteps(...) or the single step options, not both")
        return steps
    if step_pool is not None:
        given["pool"] = step_pool
    return ContextSteps(**given)


def _build(run: _Run, config: EvalConfig, sources, k, embeddings, encoding_name, headerer):
    pipe = build_pipeline(config, sources, k=k, embeddings=embeddings, budget=run.budget, encoding_name=encoding_name)
    if headerer is not None:
        try:
            if config.unit == "token" and headerer.mode == "contextual":
                headerer.chunk_size = max(headerer.chunk_size, int(config.window))
            pipe.header_report = add_headers(pipe, headerer)
        except BaseException:
            pipe.close()
            raise
    return pipe


def _indexes(run: _Run, config: EvalConfig, examples, pending, k, embeddings, encoding_name, headerer=None):
    """Yield ``(index_id, pipeline, build_seconds, questions)`` for the pending questions."""
    if run.mode == "corpus":
        sources = build_corpus(examples, split=run.split)
        t0 = time.perf_counter()
        pipe = _build(run, config, sources, k, embeddings, encoding_name, headerer)
        yield "corpus", pipe, time.perf_counter() - t0, pending
        return
    groups: dict[str, list[Example]] = {}
    for example in pending:
        groups.setdefault(example_sources(example, split=False)[0].source_id, []).append(example)
    for doc_id, group in groups.items():
        sources = example_sources(group[0], split=run.split)
        t0 = time.perf_counter()
        pipe = _build(run, config, sources, k, embeddings, encoding_name, headerer)
        yield doc_id, pipe, time.perf_counter() - t0, group


# ------------------------------------------------------------------------ summary


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def summarize(records: Sequence[dict], *, seed: int = 0, n_resamples: int = 1000) -> list[dict]:
    """One row per (dataset, configuration): means, 95% bootstrap CIs, costs.

    ``ci_low``/``ci_high`` belong to F1 when answers were generated, else to context
    recall (``ci_metric`` says which). ``chunks``/``index_bytes`` add up the distinct
    indexes built; ``seconds`` adds up index building, retrieval and generation.
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        key = (r["dataset"], r["mode"], r["split_passages"], r["budget"], r["k"], r["strategy"], r["window"],
               r["step"], r["unit"], r["multi_query"], r["f1"] is not None, r.get("steps") or "")
        groups[key].append(r)
    rows = []
    for key, rs in groups.items():
        recall = [r["context_recall"] for r in rs]
        f1 = [r["f1"] for r in rs if r["f1"] is not None]
        r_lo, r_hi = bootstrap_ci(recall, seed=seed, n_resamples=n_resamples)
        f_lo, f_hi = bootstrap_ci(f1, seed=seed, n_resamples=n_resamples) if f1 else (None, None)
        indexes = {}
        for r in rs:
            indexes.setdefault(r["index_id"], (r["chunks"], r["index_bytes"]))
        first = rs[0]
        has_f1 = bool(f1)
        div = [r["context_diversity"] for r in rs if r.get("context_diversity") is not None]
        grounded = [r["groundedness"] for r in rs if r.get("groundedness")]
        shares = [g["supported_share"] for g in grounded if g.get("supported_share") is not None]
        rows.append(
            {
                "dataset": first["dataset"],
                "mode": first["mode"],
                "strategy": first["strategy"],
                "window": first["window"],
                "step": first["step"],
                "step_units": first["step_units"],
                "unit": first["unit"],
                "multi_query": first["multi_query"],
                "budget": first["budget"],
                "k": first["k"],
                "split_passages": first["split_passages"],
                "n": len(rs),
                "context_recall": _mean(recall),
                "hit": _mean(r["hit"] for r in rs),
                "f1": _mean(f1) if has_f1 else None,
                "ci_low": f_lo if has_f1 else r_lo,
                "ci_high": f_hi if has_f1 else r_hi,
                "ci_metric": "f1" if has_f1 else "context_recall",
                "recall_ci_low": r_lo,
                "recall_ci_high": r_hi,
                "f1_ci_low": f_lo,
                "f1_ci_high": f_hi,
                "source_recall": _mean(r.get("source_recall") for r in rs),
                "span_hit": _mean(r.get("span_hit") for r in rs),
                "seconds": sum(r["seconds"] for r in rs),
                "chunks": sum(c for c, _ in indexes.values()),
                "index_bytes": sum(b for _, b in indexes.values()),
                "context_tokens": _mean(r["context_tokens"] for r in rs),
                "llm": first.get("llm"),
                "steps": first.get("steps") or "",
                "diversity": first.get("diversity"),
                "litm": bool(first.get("litm")),
                "rse": bool(first.get("rse")),
                "rerank": first.get("rerank"),
                "headers": first.get("headers"),
                "context_diversity": _mean(div) if div else None,
                "context_diversity_n": len(div),
                # groundedness of generated answers (swrag_integrations.methods.grounding): share of checked
                # sentences supported, and unsupported numbers/dates and names per answer
                "grounded_share": _mean(shares) if shares else None,
                "unsupported_numbers": _mean((g.get("unsupported_numbers") or 0) + (g.get("unsupported_dates") or 0)
                                             for g in grounded) if grounded else None,
                "unsupported_names": _mean(g.get("unsupported_names") or 0 for g in grounded) if grounded else None,
            }
        )
    return rows


_RECORD_CSV_FIELDS = [
    "dataset", "mode", "strategy", "window", "step", "unit", "multi_query", "budget", "k", "split_passages",
    "steps", "qid", "language", "context_recall", "hit", "f1", "source_recall", "span_hit", "gold_sources_found",
    "context_tokens", "context_diversity", "sources_retrieved", "chunks", "index_bytes", "seconds", "question", "answers", "prediction",
]


def _csv_value(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return ""
    return value


def write_outputs(out: Path, records: Sequence[dict], rows: Sequence[dict], *, reports: bool = True,
                  seed: int = 0, n_resamples: int = 1000) -> None:
    """Write ``results.json/csv``, ``records.json/csv`` and (optionally) reports."""
    out = Path(out)
    with (out / "results.json").open("w", encoding="utf-8") as fh:
        json.dump(list(rows), fh, ensure_ascii=False, indent=1)
    with (out / "results.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=RESULT_FIELDS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: _csv_value(row.get(k)) for k in RESULT_FIELDS})
    with (out / "records.json").open("w", encoding="utf-8") as fh:
        json.dump(list(records), fh, ensure_ascii=False)
    with (out / "records.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=_RECORD_CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for rec in records:
            w.writerow({k: _csv_value(rec.get(k)) for k in _RECORD_CSV_FIELDS})
    if reports:
        from swrag_integrations.evaluation.report import write_reports

        write_reports(out, rows, records, seed=seed, n_resamples=n_resamples)
