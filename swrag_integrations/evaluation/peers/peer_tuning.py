"""Tune the peer anchors on the tuning halves, as the package's own levers were (issue 29).

``python -m swrag_integrations.evaluation.peers.peer_tuning --data-dir ../shared/data/eval
--out runs/peers-tune --write docs/eval/peers_tuned.json`` runs, for every dev set
(`DEV_SETS`, in its mode) and every peer anchor, the fixed grid of that
peer (`PEER_GRIDS`) on the set's **tuning half only** (retrieval only, the same
1500-token budget, window 512, the runner's cached MiniLM embeddings and context recall
as every other run), chooses one configuration per (peer, set) with `choose`, and
writes the choices to a JSON file. ``python -m swrag_integrations.evaluation.peers.peers
--peer-config FILE --half test`` then runs each peer with its chosen configuration
(as the strategy ``<peer>-tuned``).

**Choice rule** (fixed here, before any test half is run): the highest mean tuning-half
context recall; ties (equal means) go to the cheaper configuration, the one with the
smaller index (``index_bytes`` summed over the tuning half's indexes), then to the
earlier one in the grid. Every grid holds the anchor as it was configured before
(its first entry, ``{}``), so a tuned peer is never below its old self on the tuning half.

The grids (kept small: the machine has two shared cores) sweep each framework's own
levers: the ensemble's chunk size, weights and ``k`` with CJK separators for its
``RecursiveCharacterTextSplitter``; the sentence window's size and ``k`` with the
CJK-aware sentence splitter (and NLTK punkt, the default); the parent retriever's
child and parent sizes with CJK separators; the LlamaIndex hybrid's window size, fusion
mode and weights with the CJK splitter and CJK BM25 tokens (and once each without the
CJK tokens and with ``k`` 10). A peer whose packages are missing
(``llama-index-retrievers-bm25`` for ``llamaindex-hybrid``) is skipped with a message. A
tuning run refuses ``--half test``.

``--budgets 300,500,1000,1500`` tunes per budget (issue 44): one run per set evaluates every
grid configuration at every budget, the same rule chooses for each budget on its own records,
and each peer's choices are written under ``by_budget`` (``"<budget>": {"chosen", "candidates"}``)
next to the one-budget choices, the file listing the tuned ``budgets``;
``peers --budgets ... --peer-config FILE`` reads each budget's choice.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET
from swrag_integrations.evaluation.datasets import ALL_DEV_SETS, DEV_SETS
from swrag_integrations.evaluation.report import read_records
from swrag_integrations.evaluation.pipelines import PIPELINES, register_pipeline

__all__ = [
    "PEER_GRIDS",
    "PEER_OPTIONS",
    "CHOICE_RULE",
    "peer_strategy_name",
    "register_peer",
    "choose",
    "tune_peers",
    "load_peer_config",
    "main",
]

_WEIGHTS = ((0.5, 0.5), (0.7, 0.3), (0.3, 0.7))

# Each grid's first entry is the anchor as configured before tuning ({} = the registry's defaults).
PEER_GRIDS: dict[str, tuple[dict[str, Any], ...]] = {
    "langchain-ensemble": ({},) + tuple(
        {"separators": "cjk", "chunk_size": size, "weights": list(w), "k": k}
        for size in (256, 512) for w in _WEIGHTS for k in (10, 20)
    ),
    "llamaindex-window": ({},) + tuple(
        {"sentence_splitter": "punkt", "window_size": w} for w in (1, 5)
    ) + tuple(
        {"sentence_splitter": "cjk", "window_size": w, "k": k} for w in (1, 2, 3, 5) for k in (20, 40)
    ),
    "langchain-parent": ({},) + tuple(
        {"separators": "cjk", "child_size": child, "parent_size": parent}
        for child in (64, 128) for parent in (256, 512, 1024)
    ),
    # CJK sentences and CJK BM25 tokens throughout (punkt and the shipped tokens are the {} anchor), then
    # one configuration each without the CJK tokens and with k 10
    "llamaindex-hybrid": ({},) + tuple(
        {"sentence_splitter": "cjk", "bm25_tokens": "cjk", "window_size": w, "fusion": "reciprocal_rerank"}
        for w in (1, 3, 5)
    ) + tuple(
        {"sentence_splitter": "cjk", "bm25_tokens": "cjk", "window_size": w, "fusion": "relative_score",
         "weights": list(weights)}
        for weights in ((0.5, 0.5), (0.7, 0.3)) for w in (1, 3)
    ) + (
        {"sentence_splitter": "cjk", "bm25_tokens": "default", "window_size": 1, "fusion": "reciprocal_rerank"},
        {"sentence_splitter": "cjk", "bm25_tokens": "cjk", "window_size": 1, "fusion": "reciprocal_rerank", "k": 10},
    ),
}

# The options each peer accepts (keyword arguments of its anchor class, plus k)
PEER_OPTIONS: dict[str, frozenset[str]] = {
    "langchain-ensemble": frozenset({"chunk_size", "separators", "weights", "k"}),
    "llamaindex-window": frozenset({"window_size", "sentence_splitter", "k"}),
    "langchain-parent": frozenset({"child_size", "parent_size", "separators", "k"}),
    "llamaindex-hybrid": frozenset({"window_size", "sentence_splitter", "fusion", "weights", "bm25_tokens", "k"}),
}

CHOICE_RULE = ("highest mean tuning-half context recall; ties (equal means) to the smaller index (index_bytes "
               "summed over the tuning half's indexes), then to the earlier configuration of the grid")

_ABBREV = {"chunk_size": "c", "separators": "sep", "weights": "w", "k": "k", "window_size": "win",
           "sentence_splitter": "split", "child_size": "child", "parent_size": "parent", "fusion": "f",
           "bm25_tokens": "bm25"}


def _check_options(peer: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as a plain dict; ``ValueError`` for an unknown peer or option."""
    if peer not in PEER_OPTIONS:
        raise ValueError(f"unknown peer {peer!r}; choose from {', '.join(PEER_OPTIONS)}")
    if not isinstance(options, Mapping):
        raise ValueError(f"{peer}: options must be a JSON object, got {type(options).__name__}")
    unknown = sorted(set(options) - PEER_OPTIONS[peer])
    if unknown:
        raise ValueError(f"{peer}: unknown option(s) {', '.join(unknown)}; it takes {', '.join(sorted(PEER_OPTIONS[peer]))}")
    return {key: (list(v) if isinstance(v, (list, tuple)) else v) for key, v in options.items()}


def peer_strategy_name(peer: str, options: Mapping[str, Any]) -> str:
    """The eval strategy name of ``peer`` with ``options``: ``peer@c256.sepcjk.w0.7-0.3.k10``
    (``peer@default`` for ``{}``): readable, and a different configuration never reuses
    another's records."""
    options = _check_options(peer, options)
    if not options:
        return f"{peer}@default"

    def fmt(value: Any) -> str:
        return "-".join(str(v) for v in value) if isinstance(value, list) else str(value)

    return f"{peer}@" + ".".join(f"{_ABBREV[key]}{fmt(options[key])}" for key in sorted(options))


def register_peer(peer: str, options: Mapping[str, Any], name: str | None = None) -> str:
    """Register ``peer``'s anchor with ``options`` as an eval strategy; returns its name.

    The strategy is the peer's own registry entry with ``options`` passed to its class
    (`options`): the same class, not a copy.

    Raises:
        ValueError: an unknown peer or option.
    """
    options = _check_options(peer, options)
    name = name or peer_strategy_name(peer, options)
    base = PIPELINES[peer]
    register_pipeline(name, replace(base, options=options,
                                    description=f"{peer} with {json.dumps(options, sort_keys=True)}"))
    return name


def choose(candidates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The candidate the choice rule (`CHOICE_RULE`) picks.

    Args:
        candidates: in grid order, each with ``context_recall`` (the tuning-half mean)
            and ``index_bytes``.

    Raises:
        ValueError: no candidates.
    """
    if not candidates:
        raise ValueError("choose: no candidates")
    ranked = sorted(enumerate(candidates),
                    key=lambda ic: (-round(float(ic[1]["context_recall"]), 12), int(ic[1]["index_bytes"]), ic[0]))
    return ranked[0][1]


def _candidates(records: Mapping[str, Mapping[str, dict]], peer: str) -> list[dict]:
    """Tuning-half figures of every grid configuration of ``peer`` found in ``records``."""
    from swrag_integrations.evaluation.metrics import bootstrap_ci

    out = []
    for options in PEER_GRIDS[peer]:
        rows = list(records.get(peer_strategy_name(peer, options), {}).values())
        if not rows:
            continue
        stray = sorted(r["qid"] for r in rows if r.get("half") != "tune")
        if stray:
            raise ValueError(f"{peer}: record(s) not from the tuning half (e.g. {stray[0]}); tuning uses the "
                             "tuning half only")
        recalls = [float(r["context_recall"]) for r in rows]
        lo, hi = bootstrap_ci(recalls)
        indexes = {r["index_id"]: int(r.get("index_bytes") or 0) for r in rows}
        out.append({"options": _check_options(peer, options), "context_recall": sum(recalls) / len(recalls),
                    "ci": [lo, hi], "n": len(rows), "index_bytes": sum(indexes.values())})
    return out


def _check_tune_half(half: str | None) -> None:
    if half != "tune":
        raise ValueError(f"peer tuning runs on the tuning half only (half 'tune'), got {half!r}: the test half "
                         "is for reporting the chosen configurations (peers --peer-config FILE --half test)")


def tune_peers(data_dir: str | Path, out: str | Path, datasets: Sequence[str], peers: Sequence[str], *,
               half: str = "tune", limit: int | None = None,
               budgets: Sequence[int] | None = None) -> dict[str, dict[str, dict]]:
    """Run every peer's grid on the tuning half of each dataset and choose (see the module doc).

    Args:
        data_dir: folder with ``<dataset>.jsonl``.
        out: run folder (one sub-folder per dataset; resumable).
        datasets: names from `ALL_DEV_SETS`.
        peers: names from `PEER_GRIDS`.
        half: must be ``"tune"`` (any other value raises: no tuning on the test half).
        limit: first ``limit`` tuning questions of each set (for smoke runs).
        budgets: tune for each of these context budgets (one run: every grid index serves
            every budget); ``None``: the one budget `DEFAULT_BUDGET`.

    Returns:
        ``dataset -> peer -> {"chosen": ..., "candidates": [...]}``; with ``budgets``,
        ``dataset -> peer -> {"by_budget": {"<budget>": {"chosen": ..., "candidates": [...]}}}``
        (the same rule applied to each budget's records on its own).

    Raises:
        ValueError: ``half`` is not ``"tune"``, an unknown dataset or peer, or the run failed.
        FileNotFoundError: a dataset file is missing.
    """
    _check_tune_half(half)
    if budgets is not None:
        from swrag_integrations.evaluation.runner import check_budgets

        budgets = check_budgets(budgets)
    modes = {name: flags for name, _, flags in ALL_DEV_SETS}
    unknown = sorted(set(datasets) - set(modes)) + sorted(set(peers) - set(PEER_GRIDS))
    if unknown:
        raise ValueError(f"unknown dataset(s) or peer(s) {', '.join(unknown)}; datasets: {', '.join(modes)}; "
                         f"peers: {', '.join(PEER_GRIDS)}")
    from swrag_integrations.cli.eval import main as eval_main
    from swrag_integrations.evaluation.pipelines import installed_strategies

    if not peers:
        raise ValueError("no peer to tune: give --peers")
    peers = installed_strategies(peers, "peer_tuning", what="peer")
    results: dict[str, dict[str, dict]] = {}
    for name in datasets:
        data = Path(data_dir) / f"{name}.jsonl"
        if not data.exists():
            raise FileNotFoundError(f"no such dataset file: {data}")
        names = [register_peer(peer, options) for peer in peers for options in PEER_GRIDS[peer]]
        cmd = ["--data", str(data), "--strategies", ",".join(names), "--windows", "512", "--retrieval-only",
               "--half", "tune", "--no-progress", "--no-plots", "--out", str(Path(out) / name), *modes[name]]
        if limit:
            cmd += ["--limit", str(limit)]
        if budgets:
            cmd += ["--budgets", ",".join(map(str, budgets))]
        print(f"peer_tuning: {name}: {len(names)} configurations", file=sys.stderr, flush=True)
        code = eval_main(cmd)
        if code:
            raise ValueError(f"peer_tuning: swrag eval failed on {name} (exit code {code})")
        path = Path(out) / name / "records.jsonl"
        results[name] = {}
        for peer in peers:
            if budgets is None:
                cands = _candidates(read_records(path, DEFAULT_BUDGET), peer)
                results[name][peer] = {"chosen": dict(choose(cands)), "candidates": cands}
                continue
            by_budget = {}
            for budget in budgets:
                cands = _candidates(read_records(path, budget), peer)
                by_budget[str(budget)] = {"chosen": dict(choose(cands)), "candidates": cands}
            results[name][peer] = {"by_budget": by_budget}
    return results


def write_choices(path: str | Path, results: Mapping[str, Mapping[str, dict]]) -> dict:
    """Merge ``results`` (from `tune_peers`) into the JSON file ``path``; returns its content.

    Sets already in the file and not in ``results`` are kept, so sets tuned by separate
    runs accumulate in one file; ``not_tuned`` lists the dev sets without choices (their
    peers run untuned under ``--peer-config``). Per-budget choices (``by_budget``, from
    ``tune_peers(..., budgets=...)``) are merged budget by budget and their budgets listed
    in ``budgets``; ``budget_tokens`` is the budget of the choices outside ``by_budget``.
    """
    path = Path(path)
    doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    tuned_budgets = {int(b) for by_peer in results.values() for res in by_peer.values()
                     for b in res.get("by_budget", {})}
    if tuned_budgets or "budgets" in doc:
        doc["budgets"] = sorted(set(doc.get("budgets", [])) | tuned_budgets)
    doc.update({"half": "tune", "budget_tokens": DEFAULT_BUDGET, "window": 512, "metric": "context_recall",
                "rule": CHOICE_RULE, "grids": {p: [_check_options(p, o) for o in g] for p, g in PEER_GRIDS.items()}})
    sets = doc.setdefault("sets", {})
    for name, by_peer in results.items():
        for peer, res in by_peer.items():
            entry = sets.setdefault(name, {}).setdefault(peer, {})
            by_budget = {**entry.get("by_budget", {}), **res.get("by_budget", {})}
            entry.update(res)
            if by_budget:
                entry["by_budget"] = dict(sorted(by_budget.items(), key=lambda kv: int(kv[0])))
    doc["sets"] = dict(sorted(sets.items()))
    doc["not_tuned"] = [name for name, _, _ in DEV_SETS if name not in sets]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return doc


def load_peer_config(path: str | Path, budget: int | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """The chosen options in a file written by `write_choices`: ``dataset -> peer -> options``.

    Args:
        path: the file.
        budget: the options chosen for this budget (``by_budget``; the choices outside it
            count for the file's ``budget_tokens``); ``None``: the choices outside
            ``by_budget``. A peer without a choice for the budget is left out (it runs as
            its plain anchor).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not such a file, not chosen on the tuning half, or an unknown peer/option.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--peer-config: no such file: {path}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"--peer-config {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("sets"), dict):
        raise ValueError(f"--peer-config {path}: no 'sets' object; write it with "
                         "python -m swrag_integrations.evaluation.peers.peer_tuning --write FILE")
    if doc.get("half") != "tune":
        raise ValueError(f"--peer-config {path}: configurations must be chosen on the tuning half, the file says "
                         f"{doc.get('half')!r}")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, by_peer in doc["sets"].items():
        for peer, res in by_peer.items():
            if not isinstance(res, dict):
                raise ValueError(f"--peer-config {path}: {name}/{peer} is not an object")
            if budget is not None and str(budget) in res.get("by_budget", {}):
                res = res["by_budget"][str(budget)]
            elif "by_budget" in res and "chosen" not in res:
                continue  # chosen for other budgets only
            elif budget is not None and budget != doc.get("budget_tokens", DEFAULT_BUDGET):
                continue  # chosen for another budget
            try:
                options = res["chosen"]["options"]
            except (TypeError, KeyError):
                raise ValueError(f"--peer-config {path}: {name}/{peer} has no chosen.options") from None
            out.setdefault(name, {})[peer] = _check_options(peer, options)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swrag_integrations.evaluation.peers.peer_tuning",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder with the dev sets' JSONL files")
    parser.add_argument("--out", required=True, help="run folder (one sub-folder per dataset, resumable)")
    parser.add_argument("--datasets", default=",".join(n for n, _, _ in DEV_SETS), help="dev sets (comma-separated)")
    parser.add_argument("--peers", default=",".join(PEER_GRIDS), help="peers to tune (comma-separated)")
    parser.add_argument("--half", default="tune",
                        help="must be 'tune' (the default): tuning never runs on the test half")
    parser.add_argument("--limit", type=int, default=None, help="first N tuning questions of each set (smoke runs)")
    parser.add_argument("--budgets", default=None, metavar="B1,B2,...",
                        help="tune for each of these context budgets, e.g. 300,500,1000,1500 (choices recorded per "
                             f"budget under by_budget; default: the one budget {DEFAULT_BUDGET})")
    parser.add_argument("--write", required=True, help="the JSON file of the choices (merged if it exists)")
    args = parser.parse_args(argv)
    try:
        budgets = None
        if args.budgets is not None:
            try:
                budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
            except ValueError:
                raise ValueError(f"--budgets must be positive integers such as 300,500,1000,1500, "
                                 f"got {args.budgets!r}") from None
        results = tune_peers(args.data_dir, args.out, [s for s in args.datasets.split(",") if s],
                             [p for p in args.peers.split(",") if p], half=args.half, limit=args.limit,
                             budgets=budgets)
    except FileNotFoundError as exc:
        print(f"peer_tuning: error: {exc}", file=sys.stderr)
        return 3
    except ValueError as exc:
        print(f"peer_tuning: error: {exc}", file=sys.stderr)
        return 2
    write_choices(args.write, results)
    for name, by_peer in results.items():
        for peer, res in by_peer.items():
            for budget, choice in res.get("by_budget", {str(DEFAULT_BUDGET): res}).items():
                c = choice["chosen"]
                print(f"{name:<18} {peer:<20} {budget:>5} {json.dumps(c['options'], sort_keys=True)}: tuning-half "
                      f"context recall {c['context_recall']:.4f} (n={c['n']})")
    print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
