"""Read the misses of a run, per set: which questions a pipeline did not fully recall, and why.

``python -m swrag_integrations.evaluation.peers.misses --run DIR --data-dir ../shared/data/eval
--pipeline default --half tune`` reads the per-question records of a run folder (the
peer runner's layout: ``DIR/<dataset>/records.jsonl``, read with
`read_records`) and, for every question of the pipeline whose context
recall is below 1, lists the question's language, length and type guess, the gold
evidence's size and position, how much of the budget the context used, and a cause:

* ``verbatim``: the answer string is in the context, but the metric's tokens differ
  (jieba cuts the answer alone and the context differently; ``Rockefeller's`` is one
  English token): retrieval did its part.
* ``ceiling``: the context already holds every answer token its gold source(s) hold
  (a paraphrased or yes/no answer): no retrieval can do better.
* ``source missed``: a gold source (corpus mode) has no span in the context.
* ``evidence cut``: every gold source is in the context but the evidence (the
  window of the gold source with the answer's tokens) is not.

With ``--trace`` the pipeline is rebuilt over the same sources (embeddings from the run's
cache) and each ``source missed`` / ``evidence cut`` miss is retraced
(`trace`) to tell where the answer's tokens
were lost:

* ``hit, cut by budget/merge``: a child hit in a gold source holds answer tokens the
  context lacks (the first stage found it; merging or the budget dropped it);
* ``in a hit's window, cut by budget``: no hit holds them, but the window of a hit in a
  gold source does (the hit's own window, not the parents merged from many hits):
  widening that hit would have reached them had the budget allowed;
* ``beyond k_child``: only the deeper search (``--deep-k``) finds a hit holding them;
* ``never retrieved``: not even the deeper search does.

Only the half given is read (``--half tune`` to design a lever: never the test half).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from swrag_integrations.evaluation.context import SEPARATOR
from swrag_integrations.evaluation.datasets import DEV_SETS, Example, build_corpus, check_half, example_sources, gold_sources, load_examples
from swrag_integrations.evaluation.metrics import answer_tokens, context_recall
from swrag_integrations.evaluation.questions import multi_hop_cue, question_type
from swrag_integrations.evaluation.report import read_records

__all__ = ["Miss", "evidence_window", "find_misses", "trace_misses",
           "misses_markdown", "main", "CAUSES", "TRACE_CAUSES"]

CAUSES = ("verbatim", "ceiling", "source missed", "evidence cut")
TRACE_CAUSES = ("hit, cut by budget/merge", "in a hit's window, cut by budget", "beyond k_child", "never retrieved")
EVIDENCE_CHARS = 300  # the evidence window's size (characters) when locating an answer's tokens

def evidence_window(text: str, answers: Sequence[str], language: str,
                    size: int = EVIDENCE_CHARS) -> tuple[int, int, float]:
    """The ``size``-character window of ``text`` (step ``size // 2``) with the highest
    context recall of ``answers``: ``(start, end, recall)`` (the first best one; a verbatim
    occurrence of an answer wins outright). ``(0, 0, 0.0)`` for an empty text."""
    for answer in answers:
        at = text.find(answer) if answer.strip() else -1
        if at >= 0:
            return at, at + len(answer), 1.0
    if not text:
        return 0, 0, 0.0
    best = (0, min(size, len(text)), -1.0)
    step = max(1, size // 2)
    for start in range(0, max(1, len(text) - size // 2), step):
        end = min(len(text), start + size)
        recall = context_recall(text[start:end], answers, language)
        if recall > best[2]:
            best = (start, end, recall)
    return best


@dataclass
class Miss:
    """One question with context recall below 1 (see the module docstring for ``cause``).

    Attributes:
        question_chars: the question's length in characters; ``question_tokens`` in the
            metric's tokens.
        gold_tokens: the (first usable) gold answer's size in the metric's tokens.
        gold_position: where the evidence starts in its gold source, as a fraction of the
            source's length (0 = start); ``gold_source_chars`` that source's length.
        evidence_in_context: characters of the evidence window the context covers / its size.
        budget_use: the context's tokens / the budget.
        ceiling: the recall of the context plus every gold source's full text.
        trace_cause / hit_rank: with ``--trace``: where the tokens were lost and the rank of
            the first child hit that holds answer tokens the context lacks (``None``: none).
    """

    dataset: str
    qid: str
    question: str
    answer: str
    language: str
    question_chars: int
    question_tokens: int
    qtype: str
    multi_hop: bool
    recall: float
    ceiling: float
    gold_tokens: int
    gold_sources: int
    gold_sources_in_context: int
    gold_source_chars: int
    gold_position: float | None
    evidence_in_context: float
    budget_use: float
    pieces: int
    cause: str
    trace_cause: str | None = None
    hit_rank: int | None = None


def _covered(spans: Iterable[tuple[str, int, int]], source: str, start: int, end: int) -> int:
    """Characters of ``source[start:end]`` that the ``spans`` cover."""
    from swrag_integrations.engine.assemble import merge_ranges

    return sum(max(0, min(b, end) - max(a, start)) for a, b in merge_ranges((a, b) for s, a, b in spans if s == source))


def _miss(example: Example, record: Mapping[str, Any], texts: Mapping[str, str], split: bool) -> Miss:
    spans = [(str(s), int(a), int(b)) for s, a, b in record.get("spans") or []]
    context = SEPARATOR.join(texts[s][a:b] for s, a, b in spans if s in texts)
    gold = [g for g in gold_sources(example, split=split) if g in texts]
    gold_text = "\n".join(texts[g] for g in gold)
    recall = float(record["context_recall"])
    ceiling = context_recall(context + SEPARATOR + gold_text, example.answers, example.language)
    # the evidence: the gold source whose best window recalls the most of the answer
    located = [(evidence_window(texts[g], example.answers, example.language), g) for g in gold]
    (start, end, _), source = max(located, key=lambda item: item[0][2]) if located else ((0, 0, 0.0), "")
    in_context = _covered(spans, source, start, end) / (end - start) if end > start else 0.0
    sources_in = sum(1 for g in gold if any(s == g for s, _, _ in spans))
    if any(a.strip() and a in context for a in example.answers):
        cause = "verbatim"
    elif recall >= ceiling:
        cause = "ceiling"
    elif sources_in < len(gold):
        cause = "source missed"
    else:
        cause = "evidence cut"
    usable = [answer_tokens(a, example.language) for a in example.answers]
    usable = [t for t in usable if t]
    budget = record.get("budget") or 0
    return Miss(
        dataset=str(record.get("dataset") or example.dataset), qid=example.qid, question=example.question,
        answer=example.answers[0] if example.answers else "", language=example.language,
        question_chars=len(example.question), question_tokens=len(answer_tokens(example.question, example.language)),
        qtype=question_type(example.question), multi_hop=multi_hop_cue(example.question), recall=recall,
        ceiling=ceiling, gold_tokens=len(usable[0]) if usable else 0, gold_sources=len(gold),
        gold_sources_in_context=sources_in, gold_source_chars=len(texts.get(source, "")),
        gold_position=start / len(texts[source]) if source and texts[source] else None,
        evidence_in_context=in_context,
        budget_use=(record.get("context_tokens") or 0) / budget if budget else 0.0,
        pieces=len(spans), cause=cause)


def find_misses(run_dir: str | Path, data_dir: str | Path, pipeline: str = "default", half: str | None = "tune",
                datasets: Sequence[str] | None = None) -> dict[str, list[Miss]]:
    """The misses of ``pipeline`` in every dataset folder of ``run_dir``, per dataset.

    Args:
        run_dir: a run folder with ``<dataset>/records.jsonl`` (the peer runner's layout).
        data_dir: the folder with the datasets' ``<dataset>.jsonl`` files.
        pipeline: the strategy whose records are read.
        half: ``"tune"`` / ``"test"``: only questions of that half are read (records of
            another half are refused); ``None``: every question.
        datasets: dataset names (default: every dev set with a records file).

    Raises:
        FileNotFoundError: a dataset file is missing.
        ValueError: a record of another half, or a bad ``half``.
    """
    check_half(half)
    run_dir, data_dir = Path(run_dir), Path(data_dir)
    names = list(datasets) if datasets else [n for n, _, _ in DEV_SETS if (run_dir / n / "records.jsonl").exists()]
    out: dict[str, list[Miss]] = {}
    for name in names:
        path = run_dir / name / "records.jsonl"
        records = read_records(path).get(pipeline, {})
        if half is not None:
            stray = sorted(q for q, r in records.items() if r.get("half") != half)
            if stray:
                raise ValueError(f"{path}: {len(stray)} {pipeline} record(s) are not from the {half} half "
                                 f"(e.g. {stray[0]}); read the run made with --half {half}")
        data = data_dir / f"{name}.jsonl"
        if not data.exists():
            raise FileNotFoundError(f"no such dataset file: {data} (give --data-dir the folder of {name}.jsonl)")
        examples = load_examples(data)
        split = any(r.get("split_passages") for r in records.values())
        corpus = any(r.get("mode") == "corpus" for r in records.values())
        by_qid = {e.qid: e for e in examples}
        texts: dict[str, str] = {}
        if corpus:
            texts = {s.source_id: s.text for s in build_corpus(examples, split=split)}
        misses = []
        for qid, record in records.items():
            if float(record["context_recall"]) >= 1.0 or qid not in by_qid:
                continue
            example = by_qid[qid]
            own = texts if corpus else {s.source_id: s.text for s in example_sources(example, split=split)}
            misses.append(_miss(example, record, own, split))
        out[name] = misses
    return out


def trace_misses(misses: list[Miss], run_dir: str | Path, data_dir: str | Path, pipeline: str = "default",
                 deep_k: int = 100, embeddings: Any = None) -> None:
    """Fill ``trace_cause`` and ``hit_rank`` of the ``source missed`` / ``evidence cut`` ``misses`` of one dataset by
    rebuilding ``pipeline`` over the run's sources and tracing each question twice: with
    the retriever's own ``k_child`` and with ``deep_k`` (see the module docstring).

    The embeddings default to the run's cache (``<run>/<dataset>/cache/embeddings.sqlite``,
    written to as needed: give a copy of a read-only run).
    """
    from swrag_integrations.evaluation.embeddings import default_embeddings
    from swrag_integrations.evaluation.pipelines import EvalConfig, build_pipeline

    todo = [m for m in misses if m.cause not in ("ceiling", "verbatim")]
    if not todo:
        return
    name = todo[0].dataset
    records = read_records(Path(run_dir) / name / "records.jsonl").get(pipeline, {})
    first = next(iter(records.values()))
    split, corpus = bool(first.get("split_passages")), first.get("mode") == "corpus"
    examples = {e.qid: e for e in load_examples(Path(data_dir) / f"{name}.jsonl")}
    if embeddings is None:
        embeddings = default_embeddings(Path(run_dir) / name / "cache" / "embeddings.sqlite")
    config = EvalConfig(pipeline, int(first.get("window") or 512))
    budget = int(first.get("budget") or 1500)

    def _trace(pipe, miss: Miss) -> None:
        example = examples[miss.qid]
        record = records[miss.qid]
        spans = [(str(s), int(a), int(b)) for s, a, b in record.get("spans") or []]
        context = SEPARATOR.join(pipe.texts[s][a:b] for s, a, b in spans if s in pipe.texts)
        gold = set(gold_sources(example, split=split))
        ids = getattr(pipe, "_ids", {})
        retriever = pipe.retriever_for(example.question)

        def adds(trace, source: str, start: int, end: int) -> bool:
            """``source[start:end]`` (in ``trace``'s sources) holds answer tokens the recorded context lacks."""
            text = trace.source_span(source, start, end)
            return context_recall(context + SEPARATOR + text, example.answers, example.language) > miss.recall

        trace = retriever.trace(example.question)
        for rank, hit in enumerate(trace.hits, 1):
            if ids.get(hit.source_id, hit.source_id) in gold and adds(trace, hit.source_id, hit.start, hit.end):
                miss.trace_cause, miss.hit_rank = "hit, cut by budget/merge", rank
                return
        for rank, hit in enumerate(trace.hits, 1):  # each hit's own window, not the merged parents
            source = hit.source_id
            if ids.get(source, source) in gold and adds(trace, source, hit.window_start, hit.window_end):
                miss.trace_cause, miss.hit_rank = "in a hit's window, cut by budget", rank
                return
        trace = retriever.trace(example.question, k_child=deep_k)
        for rank, hit in enumerate(trace.hits, 1):
            if ids.get(hit.source_id, hit.source_id) in gold and adds(trace, hit.source_id, hit.start, hit.end):
                miss.trace_cause, miss.hit_rank = "beyond k_child", rank
                return
        miss.trace_cause = "never retrieved"

    if corpus:
        pipe = build_pipeline(config, build_corpus(examples.values(), split=split), embeddings=embeddings,
                              budget=budget)
        try:
            for miss in todo:
                _trace(pipe, miss)
        finally:
            pipe.close()
        return
    for miss in todo:
        pipe = build_pipeline(config, example_sources(examples[miss.qid], split=split), embeddings=embeddings,
                              budget=budget)
        try:
            _trace(pipe, miss)
        finally:
            pipe.close()


def _excerpt(text: str, n: int = 60) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= n else text[: n - 1] + "…"


def misses_markdown(by_set: Mapping[str, Sequence[Miss]], totals: Mapping[str, int] | None = None) -> str:
    """Per dataset: the counts by cause (and by traced cause), then one row per miss."""
    lines: list[str] = []
    for name, misses in by_set.items():
        n = f" of {totals[name]}" if totals and name in totals else ""
        lines += [f"## {name}: {len(misses)} misses{n}", ""]
        if not misses:
            continue
        causes = Counter(m.cause for m in misses)
        lines.append("causes: " + ", ".join(f"{c} {causes[c]}" for c in CAUSES if causes[c]))
        traced = Counter(m.trace_cause for m in misses if m.trace_cause)
        if traced:
            lines.append("traced: " + ", ".join(f"{c} {traced[c]}" for c in TRACE_CAUSES if traced[c]))
        lines += ["", "| qid | question | answer | lang | q tok | type | multi-hop | recall | ceiling | gold tok "
                  "| gold pos | evidence in ctx | budget | pieces | cause | traced (hit rank) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for m in misses:
            pos = "–" if m.gold_position is None else f"{m.gold_position:.2f}"
            traced_cell = "–" if not m.trace_cause else m.trace_cause + (f" ({m.hit_rank})" if m.hit_rank else "")
            lines.append(
                f"| {m.qid[:12]} | {_excerpt(m.question)} | {_excerpt(m.answer, 30)} | {m.language} | "
                f"{m.question_tokens} | {m.qtype} | {'yes' if m.multi_hop else 'no'} | {m.recall:.2f} | "
                f"{m.ceiling:.2f} | {m.gold_tokens} | {pos} | {m.evidence_in_context:.2f} | {m.budget_use:.2f} | "
                f"{m.pieces} | {m.cause} | {traced_cell} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swrag_integrations.evaluation.peers.misses",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="run folder with <dataset>/records.jsonl (peer runner layout)")
    parser.add_argument("--data-dir", required=True, help="folder with the datasets' JSONL files")
    parser.add_argument("--pipeline", default="default", help="the strategy whose misses are read (default: default)")
    parser.add_argument("--half", choices=["tune", "test", "all"], default="tune",
                        help="the half whose questions are read (default tune: never design on the test half)")
    parser.add_argument("--datasets", default=None,
                        help="dataset names, comma-separated (default: every dev set in --run)")
    parser.add_argument("--trace", action="store_true",
                        help="rebuild the pipeline (embeddings from the run's cache) and retrace each source-missed / "
                             "evidence-cut miss")
    parser.add_argument("--deep-k", type=int, default=100, help="k_child of the deeper trace (default 100)")
    parser.add_argument("--out", default=None, help="write the Markdown here (default: stdout)")
    parser.add_argument("--json", default=None, help="also write the misses as JSON lines here")
    args = parser.parse_args(argv)
    if args.deep_k <= 0:
        parser.error(f"--deep-k must be a positive int, got {args.deep_k}")
    half = None if args.half == "all" else args.half
    names = [n for n in args.datasets.split(",") if n] if args.datasets else None
    try:
        by_set = find_misses(args.run, args.data_dir, args.pipeline, half, names)
    except (FileNotFoundError, ValueError) as exc:
        print(f"misses: error: {exc}", file=sys.stderr)
        return 2
    if args.trace:
        for misses in by_set.values():
            trace_misses(misses, args.run, args.data_dir, args.pipeline, deep_k=args.deep_k)
    totals = {name: len(read_records(Path(args.run) / name / "records.jsonl").get(args.pipeline, {}))
              for name in by_set}
    text = f"# Misses of `{args.pipeline}` ({args.half} half) in `{Path(args.run).name}/`\n\n" + \
        misses_markdown(by_set, totals)
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as handle:
            for misses in by_set.values():
                for m in misses:
                    handle.write(json.dumps(asdict(m), ensure_ascii=False) + "\n")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
