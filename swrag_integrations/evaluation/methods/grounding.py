"""Measure the grounding checker on ``swrag eval`` answers and on hand labels.

``python -m swrag_integrations.evaluation.methods.grounding --records DIR/records.jsonl --data FILE.jsonl
[--labels docs/eval/grounding_labels.jsonl] [--embeddings] [--out results.json]``

* re-builds each record's retrieved context from its ``spans`` (``source_id``, start,
  end) and the dataset's documents, grounds the record's ``prediction`` and reports the
  flag rate (unsupported sentences / checked sentences), unsupported claims per answer
  and the checker's cost per answer (warm: after one warm-up call that loads jieba);
* grounds the gold answers of records whose context holds them (`gold_flags`):
  flags there are false flags;
* with ``--labels`` (JSON lines: ``dataset``, ``qid``, ``sentence_start``,
  ``sentence_end``, ``label`` in ``supported``/``unsupported``), the checker's precision
  and recall at flagging unsupported sentences, next to the flag-everything baseline.

`sample_sentences` draws the sentences to label (seeded, without looking at the
checker).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from swrag_integrations.methods.grounding.align import GroundingChecker, to_passages
from swrag_integrations.methods.grounding.sentences import Sentence, split_sentences

__all__ = ["load_answers", "ground_records", "summary", "gold_flags", "label_scores", "sample_sentences", "main"]


def load_answers(records: str | Path, data: Sequence[str | Path] = (),
                 sources: dict[str, str] | None = None) -> list[dict]:
    """Records with a prediction, each with ``passages`` (dicts with exact offsets into its
    document). Documents come from the dataset files ``data`` and from ``sources``
    (``source_id -> text``)."""
    from swrag_integrations.evaluation.datasets import example_sources, iter_jsonl, load_examples

    texts: dict[str, str] = dict(sources or {})
    for path in data:
        for example in load_examples(path):
            for src in example_sources(example, split=False):
                texts[src.source_id] = src.text
    out = []
    for rec in iter_jsonl(records):
        if rec.get("prediction") is None:
            continue
        passages = []
        for sid, start, end in rec["spans"]:
            if sid not in texts:
                raise ValueError(f"record {rec['qid']}: source {sid} is not in --data")
            passages.append({"source": rec["dataset"], "source_id": sid, "start_index": start, "end_index": end,
                             "text": texts[sid][start:end]})
        out.append({**rec, "passages": passages})
    return out


def ground_records(answers: Iterable[dict], checker: GroundingChecker | None = None) -> list[dict]:
    """Ground every answer; each gets ``grounded`` (a `GroundedAnswer`) and ``ms``."""
    checker = checker or GroundingChecker()
    answers = list(answers)
    # warm-up: jieba's dictionaries and POS model load once per process
    checker.check("张伟于1990年在北京大学工作。", ["张伟在北京大学工作。"])
    out = []
    for rec in answers:
        t0 = time.perf_counter()
        grounded = checker.check(rec["prediction"], rec["passages"], question=rec["question"])
        out.append({**rec, "grounded": grounded, "ms": (time.perf_counter() - t0) * 1000})
    return out


def summary(grounded: Sequence[dict]) -> dict[str, Any]:
    """Flag rate, claims per answer, cost per answer (ms)."""
    sentences = [s for r in grounded for s in r["grounded"].sentences]
    checked = [s for s in sentences if s.supported is not None]
    flagged = [s for s in checked if s.supported is False]
    ms = [r["ms"] for r in grounded]
    claims = [r["grounded"].unsupported_claims for r in grounded]
    gen = [r.get("generate_seconds") or 0.0 for r in grounded]
    return {
        "answers": len(grounded),
        "sentences": len(sentences),
        "checked": len(checked),
        "flagged": len(flagged),
        "flag_rate": len(flagged) / len(checked) if checked else None,
        "flagged_low_support": sum(1 for s in flagged if "low_support" in s.reasons),
        "flagged_claims_only": sum(1 for s in flagged if s.reasons == ["unsupported_claims"]),
        "unsupported_claims_per_answer": statistics.mean(len(c) for c in claims) if claims else None,
        "unsupported_numbers_per_answer": statistics.mean(
            sum(1 for x in c if x.kind in ("number", "date")) for c in claims) if claims else None,
        "unsupported_names_per_answer": statistics.mean(
            sum(1 for x in c if x.kind == "name") for c in claims) if claims else None,
        "ms_per_answer_median": statistics.median(ms) if ms else None,
        "ms_per_answer_mean": statistics.mean(ms) if ms else None,
        "ms_per_answer_max": max(ms) if ms else None,
        "generate_seconds_median": statistics.median(gen) if gen else None,
    }


def gold_flags(answers: Sequence[dict], checker: GroundingChecker | None = None) -> dict[str, Any]:
    """Ground, per record, the first gold answer whose tokens all occur in the retrieved
    context (`context_recall` of 1 for that
    answer alone): the context supports it, so a flag there is most likely a false flag
    (a token match does not prove support; see the examples returned)."""
    from swrag_integrations.evaluation.metrics import context_recall

    checker = checker or GroundingChecker()
    sentences = flagged = answers_n = 0
    examples = []
    for rec in answers:
        context = "\n\n".join(p["text"] for p in rec["passages"])
        gold = next((g for g in rec.get("answers") or []
                     if context_recall(context, [g], rec.get("language", "en")) >= 1.0), None)
        if gold is None:
            continue
        answers_n += 1
        grounded = checker.check(gold, rec["passages"], question=rec["question"])
        checked = grounded.checked
        sentences += len(checked)
        bad = [s for s in checked if s.supported is False]
        flagged += len(bad)
        examples += [{"qid": rec["qid"], "sentence": s.text, "reasons": s.reasons,
                      "claims": [c.text for c in s.unsupported_claims], "score": s.score} for s in bad]
    return {"answers": answers_n, "sentences": sentences, "flagged": flagged,
            "false_flag_rate": flagged / sentences if sentences else None, "flagged_examples": examples}


def label_scores(grounded: Sequence[dict], labels: Iterable[dict]) -> dict[str, Any]:
    """Precision/recall of flagging ``unsupported`` sentences against hand labels.

    Labels are ``supported``, ``unsupported`` or ``no_claim`` (a heading, a lead-in such
    as "The answer is:", a fragment that says nothing); ``no_claim`` sentences are kept
    out of precision and recall and counted (with how many the checker flagged).
    """
    by_key = {(r["dataset"], r["qid"]): r for r in grounded}
    tp = fp = fn = tn = skipped = 0
    no_claim = no_claim_flagged = 0
    rows = []
    for lab in labels:
        rec = by_key.get((lab["dataset"], lab["qid"]))
        if rec is None:
            raise ValueError(f"label for {lab['dataset']}/{lab['qid']} has no record")
        match = [s for s in rec["grounded"].sentences
                 if (s.start, s.end) == (lab["sentence_start"], lab["sentence_end"])]
        if not match:
            raise ValueError(f"label {lab['qid']} {lab['sentence_start']}-{lab['sentence_end']}: no such sentence")
        s = match[0]
        if lab["label"] not in ("supported", "unsupported", "no_claim"):
            raise ValueError(f"label {lab['qid']}: {lab['label']!r} is not supported/unsupported/no_claim")
        if lab["label"] == "no_claim":  # nothing to check: kept out of precision/recall
            no_claim += 1
            no_claim_flagged += s.supported is False
            rows.append({**lab, "checker": None if s.supported is None else
                         ("unsupported" if s.supported is False else "supported"), "score": s.score,
                         "reasons": s.reasons})
            continue
        truth = lab["label"] == "unsupported"
        if s.supported is None:
            skipped += 1
            rows.append({**lab, "checker": None})
            continue
        flagged = s.supported is False
        tp += truth and flagged
        fp += (not truth) and flagged
        fn += truth and not flagged
        tn += (not truth) and not flagged
        rows.append({**lab, "checker": "unsupported" if flagged else "supported", "score": s.score,
                     "reasons": s.reasons})
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "unchecked": skipped, "precision": precision, "recall": recall,
            "flag_everything": flag_everything(tp + fn, fp + tn),
            "no_claim": no_claim, "no_claim_flagged": no_claim_flagged, "rows": rows}


def flag_everything(unsupported: int, supported: int) -> dict[str, float | None]:
    """The baseline a checker must beat: flag every labelled sentence as unsupported.

    Its precision is the share of unsupported sentences among the labelled ones and its
    recall is 1; on a set where most sentences are unsupported a high precision says little.
    """
    total = unsupported + supported
    return {"precision": unsupported / total if total else None, "recall": 1.0 if unsupported else None}


def judge_labels(answers: Sequence[dict], labels: Iterable[dict], judge: Any,
                 checker: GroundingChecker | None = None) -> dict[str, Any]:
    """Ask ``judge`` (an `LLMJudge`) about each labelled sentence (with the
    context the checker would give it) and score its "no" answers against the labels
    like `label_scores` (``no_claim`` labels skipped; unparsed replies counted)."""
    checker = checker or GroundingChecker()
    by_key = {(a["dataset"], a["qid"]): a for a in answers}
    tp = fp = fn = tn = failed = 0
    seconds: list[float] = []
    for lab in labels:
        if lab["label"] == "no_claim":
            continue
        rec = by_key[(lab["dataset"], lab["qid"])]
        passages, _ = to_passages(rec["passages"])
        units = checker._units(passages)
        sent = Sentence(lab["sentence"], lab["sentence_start"], lab["sentence_end"])
        t0 = time.perf_counter()
        verdict = judge(sent.text, checker._judge_context(sent, units))
        seconds.append(time.perf_counter() - t0)
        if verdict is None:
            failed += 1
            continue
        truth = lab["label"] == "unsupported"
        flagged = verdict is False
        tp += truth and flagged
        fp += (not truth) and flagged
        fn += truth and not flagged
        tn += (not truth) and not flagged
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "unparsed": failed,
            "precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None,
            "seconds_per_sentence_median": statistics.median(seconds) if seconds else None}


def sample_sentences(answers: Sequence[dict], n_per_dataset: int, seed: int = 0) -> list[dict]:
    """``n_per_dataset`` answer sentences per dataset, drawn uniformly (seeded) over all
    sentences; the sample for a larger ``n_per_dataset`` starts with the smaller one's."""
    out = []
    for dataset in sorted({a["dataset"] for a in answers}):
        pool = [(a, s) for a in answers if a["dataset"] == dataset for s in split_sentences(a["prediction"])]
        random.Random(f"{seed}:{dataset}").shuffle(pool)  # a larger n extends a smaller one's sample
        for a, s in pool[:n_per_dataset]:
            out.append({"dataset": dataset, "qid": a["qid"], "question": a["question"], "sentence": s.text,
                        "sentence_start": s.start, "sentence_end": s.end,
                        "context_offsets": [[p["source_id"], p["start_index"], p["end_index"]] for p in a["passages"]]})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swrag_integrations.evaluation.methods.grounding", description=__doc__)
    parser.add_argument("--records", action="append", required=True, help="records.jsonl of a generating swrag eval run")
    parser.add_argument("--data", action="append", default=[], help="the dataset JSONL files of those runs")
    parser.add_argument("--source", action="append", default=[], metavar="ID=PATH",
                        help="a document the records' spans point into (source id = a text file)")
    parser.add_argument("--labels", action="append", default=[], help="hand labels (JSON lines; repeatable)")
    parser.add_argument("--embeddings", action="store_true", help="mix the bundled MiniLM embeddings into the score")
    parser.add_argument("--judge-local", action="store_true",
                        help="also ask the local model (LLMJudge over load_llama3) about each labelled sentence")
    parser.add_argument("--threshold", type=float, default=0.6)
    parser.add_argument("--sample", type=int, default=None, metavar="N",
                        help="print N sentences per dataset to label (JSON lines) and stop")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    sources = {}
    for item in args.source:
        sid, sep, path = item.partition("=")
        if not sep:
            parser.error(f"--source must be ID=PATH, got {item!r}")
        sources[sid] = Path(path).read_text(encoding="utf-8")
    answers = [a for path in args.records for a in load_answers(path, args.data, sources)]
    if args.sample:
        for row in sample_sentences(answers, args.sample):
            print(json.dumps(row, ensure_ascii=False))
        return 0
    embeddings = None
    if args.embeddings:
        from swrag_integrations.embeddings.minilm import default_embeddings

        embeddings = default_embeddings()
    checker = GroundingChecker(threshold=args.threshold, embeddings=embeddings)
    grounded = ground_records(answers, checker)
    figures: dict[str, Any] = {"checker": checker.method, "threshold": args.threshold}
    for dataset in sorted({r["dataset"] for r in grounded}):
        figures[dataset] = summary([r for r in grounded if r["dataset"] == dataset])
    figures["all"] = summary(grounded)
    for dataset in sorted({r["dataset"] for r in grounded}):
        figures[dataset]["gold_answers"] = gold_flags([a for a in answers if a["dataset"] == dataset], checker)
    everything: list[dict] = []
    for path in args.labels:
        labels = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        figures[f"labels:{Path(path).name}"] = label_scores(grounded, labels)
        everything += labels
    if len(args.labels) > 1:
        figures["labels:all"] = label_scores(grounded, everything)
    if args.judge_local and everything:
        from swrag_integrations.llm import load_llama3
        from swrag_integrations.methods.grounding.judge import LLMJudge

        judge = LLMJudge(load_llama3(max_new_tokens=8).as_langchain())
        figures["llm_judge:local"] = judge_labels(answers, everything, judge, checker)
    text = json.dumps(figures, ensure_ascii=False, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
