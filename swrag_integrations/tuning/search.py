"""Successive halving under a budget: resumable, seeded, with progress.

`successive_halving` is the synchronous algorithm of Jamieson and Talwalkar (2016):
every candidate is scored on the first ``r_0`` questions, the best ``1/eta`` go on to
``eta`` times as many questions, and so on until the survivors are scored on all of
them. The questions are one seeded permutation, so every comparison within a rung is
paired (same questions), and a candidate carries its earlier scores into the next rung.

Why our own and not a library's: optuna (5.0.0 installs here without changing a pinned
package) offers ``SuccessiveHalvingPruner``, but that is the *asynchronous* variant
(ASHA): a trial is judged only against the trials that reached the same rung before it,
so with trials run one after another the first ones are never pruned and the outcome
depends on the order the sampler proposes them. The tuner needs the synchronous form for
two reasons: every rung is a paired comparison of all its candidates, and a rung's
candidates can be evaluated grouped by the index they need (an index rebuild costs far
more than a retriever setting), which only works when the whole rung is known before it
is evaluated. The algorithm is twenty lines; the state file (JSON lines of scores) makes
it resumable without optuna's database.

Budgets: ``deadline`` (seconds from the start of the call) stops the search between two
candidate evaluations; the result then names the best candidate of the highest rung
reached and says it stopped early (``stopped == "budget"``). Results are deterministic
for a seed when the deadline does not cut the search (the rung plan, the question order
and the evaluation order depend on the seed only).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Hashable, Mapping, Sequence, TypeVar

__all__ = ["SearchState", "SearchResult", "Rung", "plan_rungs", "successive_halving"]

T = TypeVar("T")
STATE_VERSION = 1


class SearchState:
    """Scores per (candidate key, question id), appended to a JSON-lines file.

    The first line holds a ``fingerprint`` (what the scores were computed on); opening
    an existing file with another fingerprint raises ``ValueError`` instead of mixing
    runs. ``path=None`` keeps the state in memory.

    Raises:
        ValueError: the file belongs to another run, is not a state file, or cannot be
            written (the message names the path).
    """

    def __init__(self, path: str | os.PathLike | None, fingerprint: Mapping[str, Any]) -> None:
        self.path = Path(path) if path is not None else None
        self.fingerprint = json.loads(json.dumps(dict(fingerprint), sort_keys=True, default=str))
        self._scores: dict[str, dict[str, float]] = {}
        self.resumed = 0
        if self.path is None:
            return
        if self.path.exists() and self.path.stat().st_size:
            self._load()
        else:
            self._write_line({"swrag_tune_state": STATE_VERSION, "fingerprint": self.fingerprint}, mode="w")

    def _load(self) -> None:
        assert self.path is not None
        with self.path.open(encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        try:
            head = json.loads(lines[0])
        except (json.JSONDecodeError, IndexError):
            head = {}
        if head.get("swrag_tune_state") != STATE_VERSION:
            raise ValueError(f"{self.path} is not a tuning state file; remove it or choose another state path")
        if head.get("fingerprint") != self.fingerprint:
            differ = sorted(k for k in set(head.get("fingerprint", {})) | set(self.fingerprint)
                            if head.get("fingerprint", {}).get(k) != self.fingerprint.get(k))
            raise ValueError(f"{self.path} holds a tuning run with other settings ({', '.join(differ)} differ); "
                             "delete it to start over, or use another state path")
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut off by an interrupted run
            self._scores.setdefault(row["key"], {}).update({q: float(s) for q, s in row["scores"].items()})
            self.resumed += len(row["scores"])
        if lines and not lines[-1].endswith("}"):
            self._write_line(None)

    def _write_line(self, row: Mapping[str, Any] | None, mode: str = "a") -> None:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open(mode, encoding="utf-8") as fh:
                fh.write("\n" if row is None else json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        except OSError as exc:
            raise ValueError(f"cannot write the tuning state file {self.path}: {exc}") from exc

    def scores(self, key: str) -> dict[str, float]:
        """The scores recorded for ``key`` (question id -> score)."""
        return dict(self._scores.get(key, {}))

    def record(self, key: str, scores: Mapping[str, float]) -> None:
        """Keep (and append to the file) new scores of ``key``."""
        clean = {str(q): float(s) for q, s in scores.items()}
        self._scores.setdefault(key, {}).update(clean)
        if self.path is not None and clean:
            self._write_line({"key": key, "scores": clean})

    def all_scores(self) -> dict[str, dict[str, float]]:
        return {k: dict(v) for k, v in self._scores.items()}


@dataclass
class Rung:
    """One rung: its question count and candidates (keys), and who went on."""

    index: int
    questions: int
    candidates: list[str]
    evaluated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "questions": self.questions, "candidates": list(self.candidates),
                "evaluated": list(self.evaluated), "kept": list(self.kept)}


@dataclass
class SearchResult(Generic[T]):
    """What `successive_halving` found.

    Attributes:
        best: the winning candidate; ``best_key`` its key.
        rungs: the rung plan and what happened in each.
        question_ids: the question order used (rung ``k`` uses the first ``rungs[k].questions``).
        scores: every recorded score, key -> {question id -> score}.
        stopped: ``"done"`` or ``"budget"`` (the deadline cut it).
        evaluations: question evaluations computed by this call (resumed ones excluded).
        seconds: wall time of this call.
    """

    best: T
    best_key: str
    rungs: list[Rung]
    question_ids: list[str]
    scores: dict[str, dict[str, float]]
    stopped: str
    evaluations: int
    seconds: float

    def mean(self, key: str, n: int | None = None) -> float | None:
        """Mean score of ``key`` on the first ``n`` questions (all when ``None``), if
        they were all evaluated."""
        qids = self.question_ids if n is None else self.question_ids[:n]
        got = self.scores.get(key, {})
        if not qids or any(q not in got for q in qids):
            return None
        return sum(got[q] for q in qids) / len(qids)


def plan_rungs(n_candidates: int, n_questions: int, *, eta: int = 3, min_questions: int = 20) -> list[tuple[int, int]]:
    """``[(candidates, questions)]`` per rung.

    The number of eliminations is the smaller of ``ceil(log_eta(n_candidates))`` and
    ``floor(log_eta(n_questions / min_questions))``; rung ``k`` of ``s`` uses
    ``round(n_questions / eta**(s-k))`` questions and keeps ``ceil(n / eta)`` candidates.
    """
    if n_candidates <= 0:
        raise ValueError(f"there must be at least one candidate, got {n_candidates}")
    if n_questions <= 0:
        raise ValueError(f"there must be at least one question, got {n_questions}")
    if isinstance(eta, bool) or not isinstance(eta, int) or eta < 2:
        raise ValueError(f"eta must be an int >= 2, got {eta!r}")
    by_n = math.ceil(math.log(n_candidates) / math.log(eta) - 1e-9) if n_candidates > 1 else 0
    by_q = int(math.floor(math.log(max(n_questions / max(min_questions, 1), 1.0)) / math.log(eta) + 1e-9))
    s = max(0, min(by_n, by_q))
    plan, n = [], n_candidates
    for k in range(s + 1):
        r = max(1, min(n_questions, int(round(n_questions / eta ** (s - k)))))
        plan.append((n, r))
        n = max(1, math.ceil(n / eta))
    return plan


def successive_halving(
    candidates: Sequence[T],
    evaluate: Callable[[T, list[str]], Sequence[float]],
    question_ids: Sequence[str],
    *,
    key: Callable[[T], str] = str,
    group: Callable[[T], Hashable] | None = None,
    eta: int = 3,
    min_questions: int = 20,
    seed: int = 0,
    deadline: float | None = None,
    state: SearchState | None = None,
    progress: bool = True,
    on_rung: Callable[[Rung], None] | None = None,
) -> SearchResult[T]:
    """Find the candidate with the highest mean score by successive halving.

    Args:
        candidates: the candidates (distinct keys).
        evaluate: ``evaluate(candidate, question_ids) -> scores`` (one per id, higher is
            better); called only for questions not in ``state`` yet.
        question_ids: the questions; shuffled once with ``seed``.
        key: a candidate's stable string key (for the state file).
        group: candidates with the same group value are evaluated one after another
            (e.g. those sharing an index); groups run in a seeded order that reverses
            every rung, so the last groups of a rung open the next one (their indexes
            are still built).
        eta: reduction factor (keep the best ``1/eta``, ``eta`` times the questions).
        min_questions: questions in the first rung at least.
        seed: question order and group order.
        deadline: stop after this many seconds (checked between evaluations).
        state: where scores are kept (resume); default in memory.
        progress: a tqdm bar on stderr.
        on_rung: called with each finished `Rung`.

    Returns:
        `SearchResult`. Ties are broken by the candidates' order in ``candidates``.
    """
    start = time.monotonic()
    items = list(candidates)
    keys = [key(c) for c in items]
    if len(set(keys)) != len(keys):
        raise ValueError("candidate keys must be distinct")
    if not items:
        raise ValueError("no candidates to search")
    if deadline is not None and deadline <= 0:
        raise ValueError(f"deadline must be > 0 seconds, got {deadline!r}")
    qids = [str(q) for q in question_ids]
    if len(set(qids)) != len(qids):
        raise ValueError("question ids must be distinct")
    rng = random.Random(seed)
    rng.shuffle(qids)
    state = state or SearchState(None, {})
    plan = plan_rungs(len(items), len(qids), eta=eta, min_questions=min_questions)
    order_of = {k: i for i, k in enumerate(keys)}
    by_key = dict(zip(keys, items))
    group_order: list[Hashable] = []
    if group is not None:
        seen: dict[Hashable, None] = {}
        for c in items:
            seen.setdefault(group(c), None)
        group_order = list(seen)
        rng.shuffle(group_order)

    def todo(k: str, n: int) -> list[str]:
        have = state.scores(k)
        return [q for q in qids[:n] if q not in have]

    survivors = list(keys)
    from tqdm.auto import tqdm

    bar = tqdm(total=None, disable=not progress, desc="tuning", unit="q", file=sys.stderr, dynamic_ncols=True)
    rungs: list[Rung] = []
    evaluations = 0
    stopped = "done"
    try:
        for k_rung, (n_k, r) in enumerate(plan):
            rung = Rung(k_rung, r, list(survivors))
            rungs.append(rung)
            ordered = list(survivors)
            if group is not None:
                gorder = group_order if k_rung % 2 == 0 else list(reversed(group_order))
                rank = {g: i for i, g in enumerate(gorder)}
                ordered.sort(key=lambda k: (rank[group(by_key[k])], order_of[k]))
            pending = sum(len(todo(k, r)) for k in ordered)
            bar.reset(total=pending)
            bar.set_description(f"tuning rung {k_rung + 1}/{len(plan)} ({len(ordered)} configs x {r} q)")
            for k in ordered:
                missing = todo(k, r)
                if missing:
                    if deadline is not None and time.monotonic() - start > deadline:
                        stopped = "budget"
                        break
                    scores = list(evaluate(by_key[k], missing))
                    if len(scores) != len(missing):
                        raise ValueError(f"evaluate returned {len(scores)} scores for {len(missing)} questions")
                    state.record(k, dict(zip(missing, scores)))
                    evaluations += len(missing)
                    bar.update(len(missing))
                rung.evaluated.append(k)
                best = _ranked(rung.evaluated, state, qids[:r], order_of)[0]
                bar.set_postfix_str(f"best {_mean(state, best, qids[:r]):.3f}", refresh=False)
            if stopped == "budget":
                break
            ranked = _ranked(rung.evaluated, state, qids[:r], order_of)
            keep = ranked if k_rung == len(plan) - 1 else ranked[:max(1, math.ceil(len(ranked) / eta))]
            rung.kept = list(keep)
            survivors = list(keep)
            if on_rung is not None:
                on_rung(rung)
    finally:
        bar.close()
    done = [r for r in rungs if r.evaluated]
    last = done[-1] if done else rungs[0]
    if not last.evaluated:
        raise TimeoutError("the budget ran out before any candidate was evaluated; give more time")
    best_key = _ranked(last.evaluated, state, qids[:last.questions], order_of)[0]
    return SearchResult(by_key[best_key], best_key, rungs, qids, state.all_scores(), stopped, evaluations,
                        time.monotonic() - start)


def _mean(state: SearchState, key: str, qids: Sequence[str]) -> float:
    got = state.scores(key)
    return sum(got[q] for q in qids) / len(qids)


def _ranked(keys: Sequence[str], state: SearchState, qids: Sequence[str], order_of: Mapping[str, int]) -> list[str]:
    return sorted(keys, key=lambda k: (-_mean(state, k, qids), order_of[k]))
