"""Fit the learned fusion model (`swrag_integrations.engine.learned_fusion`) on the TUNING
halves of the six original dev sets; the test halves are never read.

For every tuning-half question the default index is built as ``swrag eval`` builds it
(document mode: the question's document; corpus mode: every document of the file), the
default retriever's first stage gives a candidate pool (`learned_fusion.POOL_FACTOR` times
``k_child`` hits, RRF of BM25 and dense), and each candidate becomes one row of
`hit_features` with the label 1 when it comes from a gold source (`gold_sources`) and its
chunk holds at least half of a gold answer's tokens (`context_recall` >= 0.5). A
logistic regression (scikit-learn, L2, ``C=1``, sets weighted equally: each set's rows
weigh 1 / its row count) is fitted on all rows and written as JSON::

    python -m swrag_integrations.evaluation.methods.fit_fusion --data-dir /work/shared/data/eval \\
        --out swrag_integrations/engine/fusion_model.json [--cache-dir DIR]

``--cache-dir DIR``: embedding caches ``DIR/<set>/cache/embeddings.sqlite`` (those of an
earlier ``peers`` run are warm).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from swrag_integrations.engine.learned_fusion import FEATURES, POOL_FACTOR, FusionModel, hit_features
from swrag_integrations.evaluation.datasets import (DEV_SETS, build_corpus, example_sources, gold_sources,
                                                    load_examples, select_half)
from swrag_integrations.evaluation.metrics import context_recall
from swrag_integrations.evaluation.pipelines import EvalConfig, build_pipeline

__all__ = ["candidate_rows", "fit", "main"]

LABEL_RECALL = 0.5
"""A candidate is positive when its chunk holds this share of a gold answer's tokens."""


def candidate_rows(pipe, example, split: bool) -> tuple[list[list[float]], list[int]]:
    """Features and labels of one question's candidate pool under the default pipeline ``pipe``."""
    retriever = pipe.retriever
    hits = retriever.find_chunks(example.question, POOL_FACTOR * retriever.k_child, fusion="rrf")  # the RRF pool
    gold = set(gold_sources(example, split=split))
    labels = []
    for hit in hits:
        source = pipe._ids.get(hit.source_id, hit.source_id)
        text = pipe.texts[source][hit.start:hit.end] if source in pipe.texts else ""
        good = source in gold and context_recall(text, example.answers, example.language) >= LABEL_RECALL
        labels.append(int(good))
    return hit_features(hits), labels


def _set_rows(path: Path, mode: str, embeddings) -> tuple[list[list[float]], list[int]]:
    split = "split" in mode
    examples = load_examples(path)
    questions = select_half(examples, "tune")
    config = EvalConfig("default", 512)
    X: list[list[float]] = []
    y: list[int] = []
    if mode.startswith("corpus"):
        groups = [(build_corpus(examples, split=split), questions)]
    else:
        by_doc: dict[str, list] = {}
        for example in questions:
            by_doc.setdefault(example_sources(example)[0].source_id, []).append(example)
        groups = [(example_sources(group[0], split=split), group) for group in by_doc.values()]
    for sources, group in groups:
        pipe = build_pipeline(config, sources, embeddings=embeddings)
        try:
            for example in group:
                rows, labels = candidate_rows(pipe, example, split)
                X += rows
                y += labels
        finally:
            pipe.close()
    return X, y


def fit(rows: dict[str, tuple[list[list[float]], list[int]]]) -> FusionModel:
    """A logistic model over every set's rows, each set weighing the same in total."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    X = np.asarray([r for xs, _ in rows.values() for r in xs], dtype=float)
    y = np.asarray([v for _, ys in rows.values() for v in ys], dtype=int)
    w = np.asarray([1.0 / len(ys) for _, ys in rows.values() for _ in ys], dtype=float) * len(y) / len(rows)
    model = LogisticRegression(C=1.0, max_iter=1000).fit(X, y, sample_weight=w)
    meta = {"fitted_on": "tuning halves", "label_recall": LABEL_RECALL, "pool_factor": POOL_FACTOR,
            "rows": {name: [len(ys), int(sum(ys))] for name, (_, ys) in rows.items()}}
    return FusionModel(tuple(round(float(c), 6) for c in model.coef_[0]), round(float(model.intercept_[0]), 6),
                       FEATURES, meta)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swrag_integrations.evaluation.methods.fit_fusion",
                                     description="Fit the learned fusion model on the tuning halves.")
    parser.add_argument("--data-dir", required=True, help="folder of the dev sets' <name>.jsonl files")
    parser.add_argument("--out", required=True, help="the model JSON to write")
    parser.add_argument("--cache-dir", default=None, help="embedding caches DIR/<set>/cache/embeddings.sqlite")
    args = parser.parse_args(argv)
    from swrag_integrations.evaluation.embeddings import default_embeddings

    rows = {}
    for name, mode, _ in DEV_SETS:
        path = Path(args.data_dir) / f"{name}.jsonl"
        if not path.exists():
            print(f"fit_fusion: error: no such file: {path}", file=sys.stderr)
            return 3
        cache = Path(args.cache_dir) / name / "cache" / "embeddings.sqlite" if args.cache_dir else None
        rows[name] = _set_rows(path, mode, default_embeddings(cache))
        print(f"fit_fusion: {name}: {len(rows[name][1])} candidates, {sum(rows[name][1])} positive",
              file=sys.stderr, flush=True)
    model = fit(rows)
    Path(args.out).write_text(model.to_json(), encoding="utf-8")
    print(" ".join(f"{f}={c:+.3f}" for f, c in zip(FEATURES, model.coef)) + f" intercept={model.intercept:+.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
