"""``tune()``: pick index and retriever settings for a corpus without labelled questions.

1. Build a self-supervised question set from the corpus (`synthetic`).
2. Sample candidate configurations from the space (`SearchSpace`,
   stratified so every index shape is in the first rung; today's default is always one
   of them).
3. Successive halving (`search`): score candidates by context recall on the
   synthetic questions (`Evaluator`), rung by rung, candidates grouped by
   the index they need so each rung builds each index once.
4. Compare the winner with the default on **fresh questions** (paired bootstrap): a
   seeded share of the synthetic set (``holdout``, default a quarter) is kept aside
   before the search and never scored during it, so the final test is not flattered by
   the winner having been picked among many candidates on the same questions (the
   winner's curse). Return a `TunedConfig` with the evidence; the default
   is kept when the winner does not beat it on the held-out questions.

Everything that takes time is kept in a state folder (default ``<out>.state/``): the
question set, every score, and the embeddings of the chunks and queries, so an
interrupted run resumes where it stopped, and a second run with a larger budget
continues the same search.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET
from swrag_integrations.evaluation.metrics import bootstrap_ci, paired_bootstrap
from swrag_integrations.tuning.config import TunedConfig, check_writable
from swrag_integrations.tuning.engine import SCOPES, Evaluator
from swrag_integrations.tuning.search import SearchState, successive_halving
from swrag_integrations.tuning.space import DEFAULT_CANDIDATE, Candidate, SearchSpace
from swrag_integrations.tuning.synthetic import SyntheticSet, build_synthetic_set

__all__ = ["tune", "load_sources", "split_holdout", "DEFAULT_MAX_CANDIDATES", "DEFAULT_QUESTIONS", "DEFAULT_HOLDOUT"]

DEFAULT_MAX_CANDIDATES = 48
DEFAULT_QUESTIONS = 240
DEFAULT_HOLDOUT = 0.25


def split_holdout(question_ids: Sequence[str], share: float, seed: int = 0) -> tuple[list[str], list[str]]:
    """``(selection, held_out)``: a seeded ``share`` of the questions kept aside for the final test.

    The split depends only on the ids and the seed (not on their order), so a resumed run
    keeps the same questions aside. At least one question lands on each side.

    Raises:
        ValueError: ``share`` is not strictly between 0 and 1, or there are fewer than two
            questions (nothing would be left to select on or to test on).
    """
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
        raise ValueError(f"holdout must be a share strictly between 0 and 1, got {share!r}")
    ids = sorted(dict.fromkeys(str(q) for q in question_ids))
    if len(ids) < 2:
        raise ValueError(f"holdout needs at least 2 questions (one to select on, one to test on), got {len(ids)}")
    random.Random(f"swrag-tune-holdout:{seed}").shuffle(ids)
    n_held = min(len(ids) - 1, max(1, round(len(ids) * share)))
    return ids[n_held:], ids[:n_held]


def load_sources(corpus: Any) -> list[Any]:
    """The corpus as `Source` s.

    Accepts a path or a list of paths (files and folders, read like ``swrag index`` reads
    them), LangChain ``Document`` s, or objects with ``source_id`` and ``text``.

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: nothing readable, or an unknown item type.
    """
    from swrag_integrations.evaluation.datasets import Source

    if isinstance(corpus, (str, os.PathLike)):
        corpus = [corpus]
    items = list(corpus)
    if not items:
        raise ValueError("the corpus is empty: give files, folders or documents to tune on")
    if all(isinstance(i, (str, os.PathLike)) for i in items):
        from swrag_integrations.langchain.files import load_files

        for p in items:
            if not Path(p).exists():
                raise FileNotFoundError(f"no such file or directory: {p}")
        loaded = load_files(items)
        for skipped in loaded.skipped:
            print(f"swrag tune: skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
        items = loaded.documents
        if not items:
            raise ValueError("no readable documents (.txt, .md, .markdown, .pdf, .csv) under the given paths")
    from swrag_integrations.engine.ids import source_id_for

    out: list[Any] = []
    for item in items:
        if hasattr(item, "page_content") and hasattr(item, "metadata"):  # a LangChain Document (or its shape)
            out.append(Source(source_id_for(item), item.page_content, str(item.metadata.get("source", ""))))
        elif hasattr(item, "source_id") and hasattr(item, "text"):
            out.append(item)
        else:
            raise ValueError(f"cannot tune on a {type(item).__name__}: give paths, LangChain Documents or Sources")
    seen: dict[str, Any] = {}
    for s in out:
        if s.text and s.text.strip():
            seen.setdefault(s.source_id, s)
    return list(seen.values())


def _fingerprint(sources: Sequence[Any]) -> str:
    h = hashlib.sha1()
    for s in sorted(sources, key=lambda s: s.source_id):
        h.update(s.source_id.encode())
        h.update(hashlib.sha1(s.text.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()[:16]


def _embeddings(embeddings: Any, cache_path: Path | None) -> Any:
    from swrag_integrations.evaluation.embeddings import CachedEmbeddings

    if isinstance(embeddings, CachedEmbeddings):
        return embeddings
    if embeddings is None:
        from swrag_integrations.embeddings.minilm import default_embeddings

        embeddings = default_embeddings()
    name = getattr(embeddings, "model_name", None) or type(embeddings).__name__
    return CachedEmbeddings(embeddings, cache_path, namespace=str(name))


def _questions(sources: Sequence[Any], path: Path | None, *, corpus: str, llm: Any, **params: Any) -> SyntheticSet:
    """The synthetic set: read from ``path`` when it was made with the same settings."""
    wanted = {**params, "llm": type(llm).__name__ if llm is not None else None, "corpus": corpus}
    if path is not None and path.is_file():
        try:
            cached = SyntheticSet.from_jsonl(path.read_text(encoding="utf-8"))
        except (ValueError, KeyError, TypeError):
            cached = None
        if cached is not None and {k: cached.params.get(k) for k in wanted} == wanted:
            return cached
    made = build_synthetic_set(sources, llm=llm, **params)
    made.params["corpus"] = corpus
    if path is not None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(made.to_jsonl(), encoding="utf-8")
        os.replace(tmp, path)
    return made


def _summary(scores: dict[str, float], qids: Sequence[str], seed: int) -> dict[str, Any]:
    vals = [scores[q] for q in qids if q in scores]
    if not vals:
        return {"n": 0, "mean": None, "ci_low": None, "ci_high": None}
    lo, hi = bootstrap_ci(vals, seed=seed)
    return {"n": len(vals), "mean": sum(vals) / len(vals), "ci_low": lo, "ci_high": hi}


def tune(
    corpus: Any,
    *,
    out: str | os.PathLike | None = None,
    budget_minutes: float | None = 10.0,
    max_candidates: int = DEFAULT_MAX_CANDIDATES,
    n_questions: int = DEFAULT_QUESTIONS,
    seed: int = 0,
    space: SearchSpace | None = None,
    scope: str = "corpus",
    budget_tokens: int = DEFAULT_BUDGET,
    embeddings: Any = None,
    llm: Any = None,
    state_dir: str | os.PathLike | None = None,
    eta: int = 3,
    min_questions: int = 20,
    verbatim_rate: float = 0.1,
    require_significant: bool = True,
    holdout: float = DEFAULT_HOLDOUT,
    progress: bool = True,
) -> TunedConfig:
    """Tune index and retriever settings to ``corpus`` on self-supervised questions.

    Args:
        corpus: paths (files/folders), LangChain Documents, or Sources (see `load_sources`).
        out: write the configuration JSON here (checked for writability first).
        budget_minutes: wall-clock budget for the whole call (question set, embedding,
            search); ``None``: no time limit. The final comparison runs even when the
            budget is spent (the winner and the default on the held-out questions).
        max_candidates: configurations in the first rung (the budget in configurations).
        n_questions: synthetic questions (the last rung uses all of them).
        seed: question set, candidate sample, question order.
        space: the configuration space (default `SearchSpace.default`).
        scope: ``"corpus"`` (questions search the whole corpus) or ``"document"`` (each
            question searches its own document only).
        budget_tokens: the context budget the configuration is tuned for.
        embeddings: LangChain ``Embeddings`` to tune with (default: the bundled MiniLM);
            use the ones you index with.
        llm: optional LangChain chat model / LLM that writes the questions (see
            `.synthetic`).
        state_dir: folder for resumable state (default ``<out>.state`` when ``out`` is
            given, else nothing is kept).
        eta: successive halving's reduction factor.
        min_questions: questions in the first rung at least.
        verbatim_rate: share of synthetic questions that keep their sentence's wording.
        require_significant: keep the default unless the winner is significantly better
            (paired bootstrap) on the held-out questions (default), not merely better.
        holdout: share of the synthetic questions kept aside before the search (seeded by
            ``seed``) for the final winner-vs-default test; the search never sees them.
        progress: progress bars on stderr.

    Returns:
        The `TunedConfig` (also written to ``out``).

    Raises:
        ValueError: bad parameters, an unwritable ``out``, or too little text
            (`TooLittleTextError`).
        TimeoutError: ``budget_minutes`` ran out while the question set was built, before
            any configuration was scored (the set is kept in the state folder).
    """
    t0 = time.monotonic()
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if budget_minutes is not None and (isinstance(budget_minutes, bool) or not budget_minutes > 0):
        raise ValueError(f"budget_minutes must be > 0 or None, got {budget_minutes!r}")
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, int) or max_candidates < 1:
        raise ValueError(f"max_candidates must be a positive int, got {max_candidates!r}")
    split_holdout(["a", "b"], holdout)  # checks the share before any work
    out_path = check_writable(out) if out is not None else None
    space = space or SearchSpace.default()
    state_path = Path(state_dir) if state_dir is not None else (
        out_path.with_name(out_path.name + ".state") if out_path is not None else None)
    if state_path is not None:
        try:
            state_path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"state folder {str(state_path)!r} cannot be created ({exc})") from exc
    sources = load_sources(corpus)
    if not sources:
        raise ValueError("the corpus has no text to tune on")
    corpus_id = _fingerprint(sources)
    say = (lambda msg: print(f"swrag tune: {msg}", file=sys.stderr)) if progress else (lambda msg: None)
    chars = sum(len(s.text) for s in sources)
    say(f"{len(sources)} document(s), {chars:,} characters; building {n_questions} synthetic questions")
    qset = _questions(sources, state_path / "questions.jsonl" if state_path else None, n=n_questions, seed=seed,
                      verbatim_rate=verbatim_rate, llm=llm, corpus=corpus_id)
    questions = qset.questions
    select_ids, held_ids = split_holdout([q.qid for q in questions], holdout, seed)
    say(f"{len(questions)} questions ({qset.report.get('kinds')}); exact-match leak rate "
        f"{100 * qset.report.get('leak_rate', 0):.0f}% (unguarded {100 * qset.report.get('leak_rate_unguarded_cloze', 0):.0f}%)")
    emb = _embeddings(embeddings, state_path / "embeddings.sqlite" if state_path else None)
    default = DEFAULT_CANDIDATE
    candidates = space.sample(max_candidates, seed=seed, include=[default])
    fingerprint = {"corpus": corpus_id, "questions": hashlib.sha1(qset.to_jsonl().encode()).hexdigest()[:16],
                   "scope": scope, "budget_tokens": budget_tokens, "embedding": emb.namespace}
    state = SearchState(state_path / "scores.jsonl" if state_path else None, fingerprint)
    evaluator = Evaluator(sources, questions, embeddings=emb, budget_tokens=budget_tokens, scope=scope)
    deadline = None
    if budget_minutes is not None:
        deadline = budget_minutes * 60 - (time.monotonic() - t0)
        if deadline <= 0:
            raise TimeoutError(f"the budget of {budget_minutes} minutes was spent building the question set; "
                               "give more time (the set is kept in the state folder)")
    by_key = {c.key: c for c in candidates}
    say(f"searching {len(candidates)} of {space.size()} configurations "
        f"({len({c.index_key for c in candidates})} index shapes), budget "
        f"{'none' if budget_minutes is None else f'{budget_minutes:g} min'}")
    try:
        result = successive_halving(candidates, evaluator.score, select_ids, key=lambda c: c.key,
                                    group=lambda c: c.index_key, eta=eta, min_questions=min_questions, seed=seed,
                                    deadline=deadline, state=state, progress=progress)
        final = result.rungs[-1] if result.stopped == "done" else next(
            r for r in reversed(result.rungs) if r.evaluated)
        final_q = result.question_ids[:final.questions]
        best = by_key[result.best_key]
        # the selection's last rung, for the record, and the held-out questions, for the decision
        for cand, qids in ((default, final_q), (best, held_ids), (default, held_ids)):
            have = state.scores(cand.key)
            missing = [q for q in qids if q not in have]
            if missing:
                state.record(cand.key, dict(zip(missing, evaluator.score(cand, missing))))
    finally:
        evaluator.close()
    scores = state.all_scores()
    selection_versus = paired_bootstrap([scores[best.key][q] for q in final_q],
                                        [scores[default.key][q] for q in final_q], seed=seed)
    best_s = [scores[best.key][q] for q in held_ids]
    default_s = [scores[default.key][q] for q in held_ids]
    versus = paired_bootstrap(best_s, default_s, seed=seed)
    better = versus["significant"] and versus["diff"] > 0 if require_significant else versus["diff"] > 0
    # "tuned" only when a configuration other than today's default won and beat it
    chosen_cand, chosen = (best, "tuned") if (better and best != default) else (default, "default")
    reached: dict[str, int] = {}
    for rung in result.rungs:
        for k in rung.evaluated:
            reached[k] = rung.index
    order = {c.key: i for i, c in enumerate(candidates)}
    table = []
    for k, rung_i in reached.items():
        n_q = result.rungs[rung_i].questions
        row = {"label": by_key[k].label, **by_key[k].to_dict(), "rung": rung_i,
               **_summary(scores.get(k, {}), result.question_ids[:n_q], seed)}
        table.append(row)
    # the search's own ranking: highest rung first, then mean, ties to the earlier candidate
    table.sort(key=lambda r: (-r["rung"], -(r["mean"] or 0), order[Candidate.from_dict(r).key]))
    evidence = {
        # best, default and versus_default: on the held-out questions the search never saw
        "best": _summary(scores[best.key], held_ids, seed) | {"label": best.label},
        "default": _summary(scores[default.key], held_ids, seed) | {"label": default.label},
        "versus_default": versus,
        "holdout": {"share": holdout, "questions": len(held_ids), "selection_questions": len(select_ids),
                    "question_ids": held_ids},
        "selection": {"best": _summary(scores[best.key], final_q, seed),
                      "default": _summary(scores[default.key], final_q, seed),
                      "versus_default": selection_versus},
        "decision": ("the winner beats the default on held-out questions"
                     + (" significantly" if require_significant else "")
                     if chosen == "tuned" and best != default else
                     "the default won" if best == default else "the winner did not beat the default: default kept"),
        "candidates": table,
        "rungs": [{"questions": r.questions, "candidates": len(r.candidates), "evaluated": len(r.evaluated),
                   "kept": len(r.kept)} for r in result.rungs],
        "search": {"candidates": len(candidates), "space_size": space.size(), "seed": seed, "eta": eta,
                   "stopped": result.stopped, "seconds": round(time.monotonic() - t0, 1),
                   "search_seconds": round(result.seconds, 1), "evaluations": result.evaluations,
                   "resumed_evaluations": state.resumed, "index_builds": evaluator.builds,
                   "build_seconds": round(evaluator.build_seconds, 1),
                   "query_seconds": round(evaluator.query_seconds, 1), "budget_minutes": budget_minutes,
                   "space": space.to_dict()},
        "synthetic": {"params": qset.params, "report": qset.report},
        "corpus": {"documents": len(sources), "characters": chars, "fingerprint": corpus_id},
        "scope": scope,
        "embedding": emb.namespace,
    }
    config = TunedConfig.from_candidate(chosen_cand, budget_tokens=budget_tokens, chosen=chosen, evidence=evidence)
    if out_path is not None:
        config.save(out_path)
        say(f"wrote {out_path}")
    return config
