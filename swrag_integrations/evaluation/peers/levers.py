"""Retrieval levers measured against the default before any of them enters the engine (issue 29).

A lever is a pipeline of ``swrag eval`` that changes one thing of the default retriever;
it is tuned on the tuning halves and kept only if it wins on the test halves
(``docs/eval/levers.md``). Each one here reuses the harness's parts (the default
pipeline, the DDS windows ranked by the package's CJK BM25, the one RRF) rather than
new retrieval code.

* ``default+windows``: the default's ranked parent spans fused (RRF, equal weights) with
  DDS windows (512 tokens, step 3 delimiters) ranked by BM25 over the windows' own text.
  Children ranked by dense similarity and windows ranked by their own keyword score find
  different things (the issue's observation on Chinese sets); the default fuses keyword
  and dense scores of the small children only.
* ``default+windows-lang``: the same with language-aware weights: a question with Han
  characters gives the windows' keyword list twice the default's weight (the bundled
  MiniLM is English-only, so Chinese leans on BM25); any other question gives it half.

* ``default+zh-bm25-0.7`` / ``default+zh-bm25-0.85``: language-aware fusion weights of
  the children: a question with Han characters is answered by a retriever whose RRF
  weights of (BM25, dense) are (0.7, 0.3) / (0.85, 0.15) instead of the default's
  (0.5, 0.5); any other question by the default retriever.

* ``default+adaptive-k15`` / ``default+adaptive-k10``: ``k_child`` by the question's hit
  spread and type (docs/eval/misses.md): when the default's first stage scatters its
  hits over ``SPREAD`` or more sources and the question shows no multi-hop cue
  (`multi_hop_cue`), the question is answered with ``k_child`` 15 / 10
  instead of 30, so the budget widens the best sources' hits (a factoid's answer is
  usually next to the matched sentence) instead of holding thirty one-sentence pieces;
  otherwise (one source, as in document mode, or a multi-hop question, which needs the
  coverage) by the default retriever.

* ``default+trim`` / ``default+trim-s1`` (issue 44): the default retriever asked for the
  windows of ``FETCH`` times the budget; each first-stage hit is narrowed to its sentence
  holding the most question terms (`swrag_integrations.engine.trim.narrow_hits`),
  and when the windows do not fit the budget whole each is cut to the sentences of its
  narrowed hits plus ``SENTENCES`` (0 / 1) sentences on either side
  (`swrag_integrations.engine.trim.trim_windows`, exact offsets), so the hits of
  more windows fit the budget.

* ``default+budget-k25`` / ``default+budget-k50`` (issue 44): ``k_child`` chosen from the
  budget, one first-stage hit per ``TOKENS_PER_HIT`` (25 / 50) tokens of budget, at most
  the default's 30: fewer hits compete for a tight budget, so a parent's summed score
  comes from hits that fit it (300 tokens: 12 / 6 hits; 1500 tokens: 30).

The window levers assemble the fused spans by offset under the same budget as every
pipeline; the weight levers are the default retriever with other settings.

The choice rule, fixed before any test half is run (`choose_lever`;
``python -m swrag_integrations.evaluation.peers.levers --run DIR --half tune --levers a,b``):
the lever with the highest mean tuning-half margin over the default across the six
sets, if above 0 and significantly worse on none; otherwise the default stays.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from swrag_integrations.core.lang import contains_cjk
from swrag_integrations.evaluation.datasets import DEV_SETS
from swrag_integrations.evaluation.langchain_pipelines import DefaultPipeline
from swrag_integrations.evaluation.pipelines import EvalConfig, PipelineSpec, SpanBM25Pipeline, register_pipeline, rrf_spans
from swrag_integrations.evaluation.questions import multi_hop_cue

__all__ = ["DefaultWindowsFusionPipeline", "DefaultWindowsLanguagePipeline", "DefaultChineseWeightsPipeline",
           "DefaultAdaptiveKPipeline", "DefaultTrimPipeline", "DefaultBudgetKPipeline",
           "WINDOWS", "lever_margins", "choose_lever", "margins_markdown"]

WINDOWS = EvalConfig("dds", 512, "3", "token")
"""The windows ranked by keyword: DDS 512 tokens, step 3 delimiters (the best window
strategy of the tuning halves in docs/eval/windows_vs_rcs.md on the Chinese set)."""


class DefaultWindowsFusionPipeline(DefaultPipeline):
    """The default's parent spans RRF-fused with BM25-ranked DDS windows (see the module)."""

    def __init__(self, sources, config, **kwargs) -> None:
        super().__init__(sources, config, **kwargs)
        options = {k: v for k, v in kwargs.items() if k in ("encoding_name", "budget")}
        self.windows = SpanBM25Pipeline(sources, WINDOWS, **options)
        self.chunks += self.windows.chunks
        self.index_bytes += self.windows.index_bytes

    def weights(self, question: str) -> tuple[float, float]:
        """RRF weights of (the default's spans, the keyword-ranked windows)."""
        return (1.0, 1.0)

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        parents = super().retrieve(question, queries)
        windows = self.windows.retrieve(question, queries)
        return rrf_spans([parents, windows], weights=self.weights(question))


class DefaultWindowsLanguagePipeline(DefaultWindowsFusionPipeline):
    """`DefaultWindowsFusionPipeline` weighting the windows 2:1 for a question with
    Han characters and 1:2 for any other question."""

    def weights(self, question: str) -> tuple[float, float]:
        return (1.0, 2.0) if contains_cjk(question) else (1.0, 0.5)


class DefaultChineseWeightsPipeline(DefaultPipeline):
    """The default retriever, except that questions with Han characters use the (BM25,
    dense) weights ``ZH_WEIGHTS`` (the bundled MiniLM is English-only)."""

    ZH_WEIGHTS: tuple[float, float] = (0.7, 0.3)

    def make_retrievers(self) -> None:
        super().make_retrievers()
        self.zh_retriever = self.make_retriever(weights=self.ZH_WEIGHTS)

    def retriever_for(self, question: str):
        return self.zh_retriever if contains_cjk(question) else self.retriever


class DefaultChineseWeights85Pipeline(DefaultChineseWeightsPipeline):
    """`DefaultChineseWeightsPipeline` with (BM25, dense) = (0.85, 0.15) for Chinese."""

    ZH_WEIGHTS = (0.85, 0.15)


class DefaultAdaptiveKPipeline(DefaultPipeline):
    """The default retriever, except that a question whose first-stage hits spread over
    ``SPREAD`` or more sources and that shows no multi-hop cue is answered with
    ``k_child=SMALL_K_CHILD`` (see the module)."""

    SMALL_K_CHILD: int = 15
    SPREAD: int = 4

    def make_retrievers(self) -> None:
        super().make_retrievers()
        self.focused_retriever = self.make_retriever(k_child=self.SMALL_K_CHILD)

    def hit_spread(self, question: str) -> int:
        """How many sources the default retriever's first-stage hits for ``question`` come from."""
        return len({hit.source_id for hit in self.retriever.find_chunks(question)})

    def retriever_for(self, question: str):
        if multi_hop_cue(question) or self.hit_spread(question) < self.SPREAD:
            return self.retriever
        return self.focused_retriever


class DefaultAdaptiveK10Pipeline(DefaultAdaptiveKPipeline):
    """`DefaultAdaptiveKPipeline` with ``k_child=10`` for spread single-hop questions."""

    SMALL_K_CHILD = 10


class DefaultTrimPipeline(DefaultPipeline):
    """The default retriever with its windows trimmed to the sentences around their hits
    when the budget cannot hold them whole (see the module): windows are fetched for
    ``FETCH`` times the budget, cut by `trim_windows`
    and assembled by offset under the budget like every pipeline."""

    SENTENCES: int = 0
    FETCH: int = 3

    def make_retrievers(self) -> None:
        super().make_retrievers()
        self.wide_retriever = self.make_retriever(budget_tokens=self.FETCH * self.budget)

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        from swrag_integrations.engine.assemble import ContextSpan
        from swrag_integrations.engine.trim import narrow_hits, trim_windows
        from swrag_integrations.keyword.bm25 import tokenize

        if not self.sources:
            return []
        windows = [ContextSpan(src, a, b, self.texts[src][a:b]) for src, a, b in
                   self._spans(self.wide_retriever.retrieve_many([question, *queries]))]
        hits = [replace(hit, source_id=self._ids.get(hit.source_id, hit.source_id))
                for query in [question, *queries] for hit in self.wide_retriever.find_chunks(query)]
        terms = {t for query in [question, *queries] for t in tokenize(query)}
        hits = narrow_hits(hits, self.texts, lambda sentence: len(terms.intersection(tokenize(sentence))))
        trimmed = trim_windows(windows, self.texts, hits, self.budget, sentences=self.SENTENCES,
                               encoding_name=self.encoding_name)
        return [(span.source_id, span.start, span.end) for span in trimmed]


class DefaultTrimS1Pipeline(DefaultTrimPipeline):
    """`DefaultTrimPipeline` keeping one sentence on either side of each narrowed hit."""

    SENTENCES = 1


class DefaultBudgetKPipeline(DefaultPipeline):
    """The default retriever with ``k_child`` from the budget: ``budget // TOKENS_PER_HIT``
    hits, at least 1 and at most the default's (see the module)."""

    TOKENS_PER_HIT: int = 25

    def k_child_for(self, budget: int) -> int:
        """The first-stage hits for ``budget`` tokens."""
        from swrag_integrations.engine.settings import DEFAULT_K_CHILD

        return max(1, min(DEFAULT_K_CHILD, budget // self.TOKENS_PER_HIT))

    def make_retrievers(self) -> None:
        self.retriever = self.make_retriever(k_child=self.k_child_for(self.budget))


class DefaultBudgetK50Pipeline(DefaultBudgetKPipeline):
    """`DefaultBudgetKPipeline` with one hit per 50 tokens of budget."""

    TOKENS_PER_HIT = 50


for _name, _builder, _description in (
    ("default+windows", DefaultWindowsFusionPipeline, "the default's spans RRF-fused with DDS 512/3 windows ranked by BM25"),
    ("default+windows-lang", DefaultWindowsLanguagePipeline,
     "default+windows, windows weighted 2:1 for Chinese questions, 1:2 for others"),
    ("default+zh-bm25-0.7", DefaultChineseWeightsPipeline, "the default; Chinese questions fuse (BM25, dense) 0.7/0.3"),
    ("default+zh-bm25-0.85", DefaultChineseWeights85Pipeline, "the default; Chinese questions fuse (BM25, dense) 0.85/0.15"),
    ("default+adaptive-k15", DefaultAdaptiveKPipeline,
     "the default; k_child 15 for a question whose hits spread over 4+ sources without a multi-hop cue"),
    ("default+adaptive-k10", DefaultAdaptiveK10Pipeline,
     "the default; k_child 10 for a question whose hits spread over 4+ sources without a multi-hop cue"),
    ("default+trim", DefaultTrimPipeline,
     "the default; windows for 3x the budget cut to each hit's best sentence when they do not fit whole"),
    ("default+trim-s1", DefaultTrimS1Pipeline,
     "the default; windows for 3x the budget cut to each hit's best sentence +-1 when they do not fit whole"),
    ("default+budget-k25", DefaultBudgetKPipeline, "the default; k_child = budget // 25 tokens (at most 30)"),
    ("default+budget-k50", DefaultBudgetK50Pipeline, "the default; k_child = budget // 50 tokens (at most 30)"),
):
    register_pipeline(_name, PipelineSpec(_builder, None, needs_embeddings=True, description=_description))


# ---------------------------------------------------------------- the fixed choice rule


def lever_margins(run: str | Path, levers: Sequence[str], half: str | None, baseline: str = "default",
                  datasets: Sequence[str] | None = None, *, budget: int | None = None,
                  baseline_run: str | Path | None = None) -> dict[str, dict[str, dict]]:
    """Each lever's paired margin over ``baseline`` per dataset of the run folder ``run``
    (the peer runner's layout): lever -> dataset -> ``paired_bootstrap`` of lever minus
    baseline over their shared questions (plus ``n``); a dataset without the lever's
    records is left out of that lever's dict.

    ``budget`` reads that budget's records of a budget-curve run; ``baseline_run`` takes the
    baseline's records from another run folder (e.g. the same strategy with another
    embedding, ``peers --embedding``), paired by question.

    Raises:
        ValueError: a dataset's results or records come from another half than ``half``.
    """
    from swrag_integrations.evaluation.metrics import paired_bootstrap
    from swrag_integrations.evaluation.peers.peers import _checked_records

    run = Path(run)
    names = list(datasets) if datasets else [n for n, _, _ in DEV_SETS]
    out: dict[str, dict[str, dict]] = {lever: {} for lever in levers}
    for name in names:
        recs = _checked_records(run, name, half, budget)
        base = (recs if baseline_run is None else _checked_records(Path(baseline_run), name, half, budget)).get(
            baseline, {})
        for lever in levers:
            other = recs.get(lever, {})
            shared = sorted(set(base) & set(other))
            if shared:
                res = paired_bootstrap([other[q]["context_recall"] for q in shared],
                                       [base[q]["context_recall"] for q in shared])
                out[lever][name] = {**res, "n": len(shared)}
    return out


def choose_lever(margins: Mapping[str, Mapping[str, dict]], datasets: Sequence[str]) -> str | None:
    """The fixed choice rule of docs/eval/levers.md: among the levers run on every one of
    ``datasets`` and significantly worse than the baseline on none (no paired interval
    wholly below 0), the one with the highest mean margin, if that mean is above 0;
    otherwise ``None`` (keep the baseline)."""
    best: tuple[float, str] | None = None
    for lever, by_set in margins.items():
        if any(name not in by_set for name in datasets):
            continue
        if any(by_set[name]["ci_high"] < 0 for name in datasets):
            continue
        mean = sum(by_set[name]["diff"] for name in datasets) / len(datasets)
        if mean > 0 and (best is None or mean > best[0]):
            best = (mean, lever)
    return best[1] if best else None


def margins_markdown(margins: Mapping[str, Mapping[str, dict]], datasets: Sequence[str]) -> str:
    """One row per lever: its margin over the baseline ×100 [paired 95% CI] per dataset, the
    mean over ``datasets`` and the rule's verdict (`choose_lever`)."""
    chosen = choose_lever(margins, datasets)
    lines = ["| lever | " + " | ".join(datasets) + " | mean | chosen |", "|---|" + "---|" * (len(datasets) + 2)]
    for lever, by_set in margins.items():
        cells = []
        for name in datasets:
            res = by_set.get(name)
            cells.append("–" if res is None else
                         f"{100 * res['diff']:+.1f} [{100 * res['ci_low']:+.1f}, {100 * res['ci_high']:+.1f}]")
        complete = all(name in by_set for name in datasets)
        mean = f"{100 * sum(by_set[n]['diff'] for n in datasets) / len(datasets):+.2f}" if complete else "–"
        lines.append(f"| {lever} | " + " | ".join(cells) + f" | {mean} | {'yes' if lever == chosen else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m swrag_integrations.evaluation.peers.levers --run DIR --half tune --levers a,b``:
    the levers' margins over the default per dataset and the fixed rule's choice."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m swrag_integrations.evaluation.peers.levers",
                                     description="Margins of levers over the default and the fixed choice rule")
    parser.add_argument("--run", required=True, help="run folder of the peer runner (<dataset>/records.jsonl)")
    parser.add_argument("--levers", required=True, help="strategies to compare with the baseline (comma-separated)")
    parser.add_argument("--half", choices=["tune", "test"], required=True, help="the half the run was made on")
    parser.add_argument("--baseline", default="default", help="the strategy the margins are taken over")
    parser.add_argument("--datasets", default=",".join(n for n, _, _ in DEV_SETS), help="dev sets (comma-separated)")
    parser.add_argument("--budget", type=int, default=None, help="that budget's records (of a budget-curve run)")
    parser.add_argument("--baseline-run", default=None, metavar="DIR",
                        help="read the baseline from this run folder instead (e.g. another --embedding)")
    args = parser.parse_args(argv)
    names = [n for n in args.datasets.split(",") if n]
    try:
        margins = lever_margins(args.run, [x for x in args.levers.split(",") if x], args.half, args.baseline, names,
                                budget=args.budget, baseline_run=args.baseline_run)
    except ValueError as exc:
        print(f"levers: error: {exc}", file=sys.stderr)
        return 2
    print(margins_markdown(margins, names))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
