"""Does tuning on synthetic questions pick configurations that do well on real ones?

``python -m swrag_integrations.tuning.measure --data-dir DIR --out DIR [--datasets a,b] [--phase main]``
runs, per labelled dev set (LongBench-format JSONL; dev sets only):

1. ``tune()`` as a user would (no time limit, its default candidate pool and question
   set), on the set's documents (all of them: the user's "corpus"); document-mode sets
   are tuned with ``scope="document"``;
2. the synthetic grid: every candidate of that pool on every synthetic question, or on
   the first ``--grid-questions`` of the search's question order (successive halving only
   scores the survivors on all of them), to measure how well synthetic scores rank the
   candidates;
3. the labelled grid: every candidate of the same pool on the set's real questions
   (document mode: each question against its own document), giving (a) the default,
   (b) the best in hindsight and (c) the tuned configuration, with bootstrap CIs, the
   paired bootstrap of (c) vs (a) and Spearman's rank correlation of synthetic vs
   labelled means over the pool.

``--phase unguarded`` repeats step 2 with the leakage guard off (every query keeps its
sentence's wording, ``verbatim_rate=1``) to measure what the guard changes.
``--phase timing`` times a fresh ``tune()`` (nothing cached, embeddings included) on a
corpus given with ``--timing-files``.

Everything is resumable: scores are kept in ``<out>/<dataset>/`` (re-run the same command).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from swrag_integrations.engine.settings import DEFAULT_BUDGET_TOKENS

DATASETS = {  # name -> (mode, split passages)
    "multifieldqa_zh": ("document", False),
    "qasper": ("document", False),
    "squad_v2_articles": ("corpus", False),
    "hotpotqa": ("corpus", True),
    "minilongbench": ("document", False),
}


class _Labelled:
    """A labelled example as the evaluator's question."""

    def __init__(self, example: Any, source_id: str) -> None:
        self.qid = example.qid
        self.query = example.question
        self.answers = tuple(example.answers)
        self.language = example.language
        self.source_id = source_id


def _grid(evaluator: Any, candidates: Sequence[Any], qids: Sequence[str], state: Any, label: str) -> None:
    """Score every candidate on every question (grouped by index), kept in ``state``."""
    from swrag_integrations.tuning.space import group_by_index

    todo = sum(len([q for q in qids if q not in state.scores(c.key)]) for c in candidates)
    done = 0
    t0 = time.monotonic()
    for group in group_by_index(candidates).values():
        for cand in group:
            missing = [q for q in qids if q not in state.scores(cand.key)]
            if missing:
                state.record(cand.key, dict(zip(missing, evaluator.score(cand, missing))))
                done += len(missing)
        print(f"  {label}: {done}/{todo} question evaluations, {time.monotonic() - t0:.0f} s", flush=True)


def _search_order(qids: Sequence[str], seed: int) -> list[str]:
    """The question order of `successive_halving` for ``seed`` (its first
    rungs' questions come first, so a grid on a prefix reuses the search's scores)."""
    import random

    order = [str(q) for q in qids]
    random.Random(seed).shuffle(order)
    return order


def _header(path: Path) -> dict:
    with path.open(encoding="utf-8") as fh:
        return json.loads(fh.readline())["fingerprint"]


def run_dataset(name: str, data_dir: Path, out: Path, embeddings: Any, *, phase: str = "main",
                max_candidates: int = 48, n_questions: int = 240, seed: int = 0, budget: int = DEFAULT_BUDGET_TOKENS,
                max_examples: int | None = None, grid_questions: int | None = None) -> dict:
    from swrag_integrations.evaluation.datasets import build_corpus, example_sources, load_examples
    from swrag_integrations.tuning.engine import Evaluator
    from swrag_integrations.tuning.search import SearchState
    from swrag_integrations.tuning.space import DEFAULT_CANDIDATE, SearchSpace
    from swrag_integrations.tuning.synthetic import SyntheticSet, build_synthetic_set
    from swrag_integrations.tuning.tune import tune

    mode, split = DATASETS[name]
    scope = "document" if mode == "document" else "corpus"
    examples = load_examples(data_dir / f"{name}.jsonl")
    if max_examples is not None:  # a subset (the first rows) to bound the cost; the corpus is theirs
        examples = examples[:max_examples]
    sources = build_corpus(examples, split=split)
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    candidates = SearchSpace.default().sample(max_candidates, seed=seed, include=[DEFAULT_CANDIDATE])
    print(f"[{name}] {mode} mode, {len(sources)} sources, {len(examples)} labelled questions, "
          f"{len(candidates)} candidates", flush=True)
    if phase == "unguarded":
        qset = build_synthetic_set(sources, n_questions, seed=seed, verbatim_rate=1.0)
        (d / "unguarded_questions.jsonl").write_text(qset.to_jsonl(), encoding="utf-8")
        state = SearchState(d / "unguarded_scores.jsonl", {"dataset": name, "variant": "unguarded", "seed": seed})
        with Evaluator(sources, qset.questions, embeddings=embeddings, budget_tokens=budget, scope=scope) as ev:
            _grid(ev, candidates, [q.qid for q in qset.questions], state, "unguarded synthetic grid")
        return {}
    t0 = time.monotonic()
    config = tune(sources, out=d / "tuned.json", state_dir=d / "tune", budget_minutes=None,
                  max_candidates=max_candidates, n_questions=n_questions, seed=seed, scope=scope,
                  budget_tokens=budget, embeddings=embeddings, progress=False)
    tune_seconds = time.monotonic() - t0
    print(f"  tuned in {tune_seconds:.0f} s: {config.chosen}: {config.candidate.label}", flush=True)
    qset = SyntheticSet.from_jsonl((d / "tune" / "questions.jsonl").read_text(encoding="utf-8"))
    syn_state = SearchState(d / "tune" / "scores.jsonl", _header(d / "tune" / "scores.jsonl"))
    grid_qids = _search_order([q.qid for q in qset.questions], seed)[:grid_questions]
    with Evaluator(sources, qset.questions, embeddings=embeddings, budget_tokens=budget, scope=scope) as ev:
        _grid(ev, candidates, grid_qids, syn_state, f"synthetic grid ({len(grid_qids)} questions)")
    labelled = [_Labelled(e, example_sources(e, split=False)[0].source_id if mode == "document" else "")
                for e in examples]
    lab_state = SearchState(d / "labelled_scores.jsonl", {"dataset": name, "mode": mode, "split": split,
                                                          "budget": budget})
    with Evaluator(sources, labelled, embeddings=embeddings, budget_tokens=budget, scope=scope) as ev:
        _grid(ev, candidates, [q.qid for q in labelled], lab_state, "labelled grid")
    (d / "timing.json").write_text(json.dumps({"tune_seconds": tune_seconds}), encoding="utf-8")
    (d / "run.json").write_text(json.dumps({"max_candidates": max_candidates, "n_questions": n_questions,
                                            "max_examples": max_examples, "grid_questions": len(grid_qids), "sources": len(sources),
                                            "corpus_chars": sum(len(s.text) for s in sources)}), encoding="utf-8")
    return summarize_dataset(name, out, seed=seed, max_candidates=max_candidates)


def summarize_dataset(name: str, out: Path, *, seed: int = 0, max_candidates: int = 48) -> dict:
    """The tables' numbers for one dataset from the kept scores."""
    from scipy.stats import spearmanr

    from swrag_integrations.evaluation.metrics import bootstrap_ci, paired_bootstrap
    from swrag_integrations.tuning.config import TunedConfig
    from swrag_integrations.tuning.search import SearchState
    from swrag_integrations.tuning.space import DEFAULT_CANDIDATE, SearchSpace

    d = out / name
    candidates = SearchSpace.default().sample(max_candidates, seed=seed, include=[DEFAULT_CANDIDATE])
    config = TunedConfig.load(d / "tuned.json")
    syn = SearchState(d / "tune" / "scores.jsonl", _header(d / "tune" / "scores.jsonl")).all_scores()
    lab = SearchState(d / "labelled_scores.jsonl", _header(d / "labelled_scores.jsonl")).all_scores()
    qids_lab = sorted(lab[DEFAULT_CANDIDATE.key])
    # the synthetic grid: the questions every candidate of the pool was scored on
    qids_syn = sorted(set.intersection(*(set(syn.get(c.key, {})) for c in candidates)))

    def mean(table: dict, key: str, qids: Sequence[str]) -> float:
        return sum(table[key][q] for q in qids) / len(qids)

    def row(key: str) -> dict:
        vals = [lab[key][q] for q in qids_lab]
        lo, hi = bootstrap_ci(vals, seed=seed)
        return {"label": next(c.label for c in candidates if c.key == key), "mean": sum(vals) / len(vals),
                "ci_low": lo, "ci_high": hi, "synthetic": mean(syn, key, qids_syn)}

    keys = [c.key for c in candidates]
    lab_means = [mean(lab, k, qids_lab) for k in keys]
    syn_means = [mean(syn, k, qids_syn) for k in keys]
    rho, p = spearmanr(syn_means, lab_means)
    default_key = DEFAULT_CANDIDATE.key
    best_key = keys[max(range(len(keys)), key=lambda i: (lab_means[i], -i))]
    tuned_key = config.candidate.key
    syn_best_key = keys[max(range(len(keys)), key=lambda i: (syn_means[i], -i))]
    vs = lambda k: paired_bootstrap([lab[k][q] for q in qids_lab], [lab[default_key][q] for q in qids_lab],  # noqa: E731
                                    seed=seed)
    result = {
        "dataset": name, "n_labelled": len(qids_lab), "n_synthetic": len(qids_syn), "candidates": len(keys),
        "default": row(default_key), "best_in_hindsight": row(best_key), "tuned": row(tuned_key),
        "tuned_chosen": config.chosen, "synthetic_grid_best": row(syn_best_key),
        "tuned_vs_default": vs(tuned_key), "best_vs_default": vs(best_key),
        "spearman": {"rho": float(rho), "p": float(p)},
        "synthetic_report": config.evidence.get("synthetic", {}).get("report"),
        "search": {k: v for k, v in config.evidence.get("search", {}).items() if k != "space"},
        "labelled_means": dict(zip(keys, lab_means)), "synthetic_means": dict(zip(keys, syn_means)),
    }
    # what the --any-gain rule would have chosen from the same search: its winner whenever
    # it beat the default on the synthetic questions at all (significant or not)
    search_vs = config.evidence.get("versus_default") or {}
    winner_label = (config.evidence.get("best") or {}).get("label")
    winner_key = next((c.key for c in candidates if c.label == winner_label), default_key)
    any_key = winner_key if search_vs.get("diff", 0) > 0 else default_key
    result["search_versus_default"] = search_vs
    result["any_gain"] = row(any_key) | {"chosen": "tuned" if any_key != default_key else "default"}
    result["any_gain_vs_default"] = vs(any_key)
    unguarded = d / "unguarded_scores.jsonl"
    if unguarded.exists():
        ung = SearchState(unguarded, _header(unguarded)).all_scores()
        if all(k in ung for k in keys):
            qids_u = sorted(ung[default_key])
            if all(len(ung[k]) == len(qids_u) for k in keys):
                u_means = [mean(ung, k, qids_u) for k in keys]
                rho_u, p_u = spearmanr(u_means, lab_means)
                result["spearman_unguarded"] = {"rho": float(rho_u), "p": float(p_u)}
                result["unguarded_default_mean"] = mean(ung, default_key, qids_u)
                result["unguarded_spread"] = max(u_means) - min(u_means)
    result["synthetic_spread"] = max(syn_means) - min(syn_means)
    for extra in ("timing.json", "run.json"):
        if (d / extra).exists():
            result.update(json.loads((d / extra).read_text()))
    (d / "summary.json").write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return result


def report_tables(out: Path, names: Sequence[str]) -> str:
    """The Markdown tables of ``docs/eval/tuning.md`` from the kept ``summary.json`` files
    (datasets without one are left out)."""
    rows, labels = [], []
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    esc = lambda text: text.replace("|", "\\|")  # noqa: E731 - labels hold "|"

    def cell(r: dict) -> str:
        return f"{pct(r['mean'])} [{pct(r['ci_low'])}, {pct(r['ci_high'])}]"

    sums = []
    for name in names:
        path = out / name / "summary.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text(encoding="utf-8"))
        sums.append(r)
        vs = r["tuned_vs_default"]
        resumed = (r.get("search") or {}).get("resumed_evaluations", 0) > 0
        n_search = (r.get("synthetic_report") or {}).get("questions", "?")
        tune_time = "resumed" if resumed else f"{r.get('tune_seconds', float('nan')):.0f} s"
        subset = f"{r['n_labelled']}" + ("" if r.get("max_examples") is None else f" (first {r['max_examples']})")
        rows.append(f"| {name} | {DATASETS[name][0]} | {subset} | {n_search} / {r['n_synthetic']} | {cell(r['default'])} | "
                    f"{cell(r['best_in_hindsight'])} | {cell(r['tuned'])} | {100 * vs['diff']:+.1f} "
                    f"[{100 * vs['ci_low']:+.1f}, {100 * vs['ci_high']:+.1f}], p={vs['p']:.2f} | "
                    f"{r['spearman']['rho']:.2f} | {tune_time} |")
        labels.append(f"| {name} | {r['tuned_chosen']}: {esc(r['tuned']['label'])} | "
                      f"{esc(r['best_in_hindsight']['label'])} |")
    if not sums:
        return "(no summaries yet)"
    n = len(sums)
    avg = lambda key: sum(r[key]["mean"] for r in sums) / n  # noqa: E731
    mean_diff = sum(r["tuned_vs_default"]["diff"] for r in sums) / n
    rows.append(f"| **mean of {n}** | | | | {pct(avg('default'))} | {pct(avg('best_in_hindsight'))} | "
                f"{pct(avg('tuned'))} | {100 * mean_diff:+.1f} | "
                f"{sum(r['spearman']['rho'] for r in sums) / n:.2f} | |")
    head = ("| dataset | mode | labelled questions | synthetic questions (search / rank grid) | (a) default | (b) best in hindsight | "
            "(c) tuned | (c) − (a), paired bootstrap | Spearman ρ synthetic vs labelled | tune time |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    head2 = "| dataset | (c) tuned configuration | (b) best in hindsight |\n|---|---|---|"
    leaks = ["| dataset | questions (cloze / verbatim) | raw sentence (ICT query) | cloze without the guard | "
             "used: guarded cloze | used: all |", "|---|---|---|---|---|---|"]
    for r in sums:
        rep = r.get("synthetic_report") or {}
        kinds = rep.get("kinds", {})
        leaks.append(f"| {r['dataset']} | {rep.get('questions')} ({kinds.get('cloze')} / {kinds.get('verbatim')}) | "
                     f"{pct(rep['leak_rate_raw_sentence'])}% | {pct(rep['leak_rate_unguarded_cloze'])}% | "
                     f"{pct(rep['leak_rate_by_kind']['cloze'])}% | {pct(rep['leak_rate'])}% |")
    rules = ["| dataset | search winner vs default (synthetic, paired bootstrap) | significance rule (default) | "
             "`--any-gain` rule: choice | `--any-gain`: labelled | `--any-gain` − (a), paired bootstrap |",
             "|---|---|---|---|---|---|"]
    any_rows = [r for r in sums if "any_gain" in r]
    for r in any_rows:
        sv, ag, av = r["search_versus_default"], r["any_gain"], r["any_gain_vs_default"]
        rules.append(f"| {r['dataset']} | {100 * sv['diff']:+.1f} [{100 * sv['ci_low']:+.1f}, {100 * sv['ci_high']:+.1f}], "
                     f"p={sv['p']:.2f} | {r['tuned_chosen']} | {ag['chosen']}: {esc(ag['label'])} | {cell(ag)} | {100 * av['diff']:+.1f} "
                     f"[{100 * av['ci_low']:+.1f}, {100 * av['ci_high']:+.1f}], p={av['p']:.2f} |")
    if any_rows:
        m = len(any_rows)
        rules.append(f"| **mean of {m}** | | | | {pct(sum(r['any_gain']['mean'] for r in any_rows) / m)} | "
                     f"{100 * sum(r['any_gain_vs_default']['diff'] for r in any_rows) / m:+.1f} |")
    return (head + "\n" + "\n".join(rows) + "\n\n" + head2 + "\n" + "\n".join(labels) + "\n\n"
            + "\n".join(rules) + "\n\n" + "\n".join(leaks))


def run_timing(files: Sequence[str], out: Path, *, seed: int = 0, budget_minutes: float | None = None) -> dict:
    """A fresh ``tune()`` (no cache of any kind) on ``files``; returns its timings."""
    from swrag_integrations.tuning.tune import load_sources, tune

    sources = load_sources(files)
    size = sum(len(s.text.encode("utf-8")) for s in sources)
    d = out / "timing" / f"run-{int(time.time())}"
    t0 = time.monotonic()
    config = tune(sources, out=d / "tuned.json", budget_minutes=budget_minutes, seed=seed, progress=True)
    seconds = time.monotonic() - t0
    load = os.getloadavg()
    result = {"bytes": size, "documents": len(sources), "seconds": seconds, "loadavg": load,
              "chosen": config.chosen, "label": config.candidate.label,
              "search": {k: v for k, v in config.evidence["search"].items() if k != "space"},
              "synthetic_seconds_note": "included in seconds"}
    (d / "timing.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result, indent=1), flush=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swrag_integrations.tuning.measure", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data/eval", help="folder of the dev-set JSONL files")
    parser.add_argument("--out", required=True, help="output folder (resumable)")
    parser.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated, from {','.join(DATASETS)}")
    parser.add_argument("--phase", choices=["main", "unguarded", "summary", "timing", "report"], default="main")
    parser.add_argument("--embed-cache", default=None, help="sqlite embedding cache to share between runs")
    parser.add_argument("--embed-namespace", default=None, help="namespace of the cache's vectors")
    parser.add_argument("--timing-files", nargs="*", default=[], help="files for --phase timing")
    parser.add_argument("--timing-budget", type=float, default=None, help="budget_minutes for --phase timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-candidates", type=int, default=48, help="candidate pool (first rung) per dataset")
    parser.add_argument("--questions", type=int, default=240, help="synthetic questions per dataset")
    parser.add_argument("--grid-questions", type=int, default=None,
                        help="synthetic questions of the rank-correlation grid (default: all)")
    parser.add_argument("--max-examples", type=int, default=None,
                        help="use only the first N labelled rows (and their documents) of each dataset")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.phase == "timing":
        run_timing(args.timing_files, out, seed=args.seed, budget_minutes=args.timing_budget)
        return 0
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    bad = [n for n in names if n not in DATASETS]
    if bad:
        parser.error(f"unknown dataset(s) {bad}")
    if args.phase == "report":
        print(report_tables(out, names))
        return 0
    embeddings = None
    if args.phase != "summary":
        from swrag_integrations.evaluation.embeddings import CachedEmbeddings
        from swrag_integrations.embeddings.minilm import default_embeddings

        base = default_embeddings()
        embeddings = CachedEmbeddings(base, args.embed_cache,
                                      namespace=args.embed_namespace or str(getattr(base, "model_name", None)
                                                                            or type(base).__name__))
    for name in names:
        t0 = time.monotonic()
        if args.phase == "summary":
            res = summarize_dataset(name, out, seed=args.seed, max_candidates=args.max_candidates)
        else:
            res = run_dataset(name, Path(args.data_dir), out, embeddings, phase=args.phase, seed=args.seed,
                              max_candidates=args.max_candidates, n_questions=args.questions,
                              max_examples=args.max_examples, grid_questions=args.grid_questions)
        if res:
            print(f"[{name}] default {100 * res['default']['mean']:.1f}, best {100 * res['best_in_hindsight']['mean']:.1f}"
                  f", tuned {100 * res['tuned']['mean']:.1f} (diff {100 * res['tuned_vs_default']['diff']:+.1f}), "
                  f"spearman {res['spearman']['rho']:.2f}", flush=True)
        print(f"[{name}] {args.phase} done in {time.monotonic() - t0:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
