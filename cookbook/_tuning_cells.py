"""Cells of ``08_tuning.ipynb``: ``swrag tune`` on a real corpus, and the tuned configuration
in the index.

``cookbook/_build.py`` includes them with ``cells(md, code, SETUP)`` (its own cell helpers
and shared first cell), like ``07_graph.ipynb``. The corpus is a few Wikipedia articles of
the shared dev data (SQuAD 2.0 dev, ``squad_v2_articles.jsonl``); without the shared folder
the cells say so and skip themselves, like ``05_evaluation.ipynb``.
"""

from __future__ import annotations

from typing import Any, Callable


def cells(md: Callable[[str], Any], code: Callable[[str], Any], setup: str) -> list[Any]:
    """The notebook's cells, made with ``_build.py``'s ``md``/``code`` helpers."""
    return [
        md("""
        # 8 · Tuning the configuration to your corpus (`swrag tune`)

        No default is best everywhere: the window, the shape of the small chunks, how many
        children the first stage fetches, the BM25/dense weights... depend on the documents.
        `swrag tune` picks them for *your* folder without labelled questions: it writes
        self-supervised questions from the documents (inverse cloze: a sentence's rare term
        is the answer; the question keeps only the sentence's words that also occur
        elsewhere, shuffled, so exact string matching alone cannot find it), searches index
        and retriever settings by successive halving on their context recall, and writes the
        winner with its evidence to JSON. The index records the configuration it was built
        with, so `swrag ask` and `index.as_retriever()` use it without being told again.

        ```bash
        swrag tune docs/ --out tuned.json --budget-minutes 10   # resumable: run it again to continue
        swrag index docs/ --config tuned.json
        swrag ask "When was the lighthouse first lit?"
        swrag eval --data dev.jsonl --config tuned.json --retrieval-only --windows 512 --out results/
        ```

        How well this works on the dev sets (tuned vs today's default vs the best
        configuration in hindsight) is measured in `docs/eval/tuning.md`.
        """),
        code(setup),
        md("""
        ## A real corpus: eight Wikipedia articles

        From the shared dev data (`shared/data/eval/squad_v2_articles.jsonl` beside the
        repository, or `$SWRAG_SHARED`), written as text files into a temporary folder.
        """),
        code('''
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from swrag_integrations.evaluation.datasets import build_corpus, load_examples

SHARED = Path(os.environ.get("SWRAG_SHARED") or Path.cwd().parent.parent / "shared")
SQUAD = SHARED / "data" / "eval" / "squad_v2_articles.jsonl"
WORK = Path(tempfile.mkdtemp(prefix="swrag-cookbook-08-"))
CORPUS = WORK / "articles"
CONFIG = WORK / "tuned.json"
HAVE_DATA = SQUAD.is_file()
if HAVE_DATA:
    examples = load_examples(SQUAD)
    articles = build_corpus(examples)[:8]
    CORPUS.mkdir()
    for source in articles:
        words = "".join(c if c.isalnum() else " " for c in source.text[:80]).split()[:3]
        name = "_".join(w for w in words if w.isalnum()) or source.source_id
        (CORPUS / f"{name}.txt").write_text(source.text, encoding="utf-8")
    size = sum(p.stat().st_size for p in CORPUS.iterdir())
    print(f"{len(articles)} articles, {size:,} bytes:", ", ".join(sorted(p.stem for p in CORPUS.iterdir())))
else:
    print(f"No shared dev data at {SQUAD} (set SWRAG_SHARED to the shared folder): the tuning cells are skipped.")
'''),
        md("""
        ## `swrag tune`

        The small search space and a budget of a few configurations keep this cell short;
        the default space has 3,456 configurations and samples 48 of them for its first rung.
        Progress goes to stderr; the summary to stdout.
        """),
        code('''
if HAVE_DATA:
    done = subprocess.run(
        [sys.executable, "-m", "swrag_integrations.cli", "tune", str(CORPUS), "--out", str(CONFIG),
         "--space", "small", "--max-configs", "6", "--questions", "80", "--budget-minutes", "3", "--no-progress"],
        capture_output=True, text=True)
    print(f"swrag tune exit code {done.returncode}")
    print(done.stdout or done.stderr)
'''),
        md("""
        The file holds the index keywords, the retriever keywords and the evidence: every
        candidate's synthetic context recall with a bootstrap interval, the rungs of the
        search, and the paired comparison with today's defaults. When the winner does not
        beat the defaults on the synthetic questions, the defaults are kept
        (`chosen: default`). The synthetic set reports its exact-match leak rate: the share
        of questions a plain substring search answers alone, before and after the guard.
        """),
        code('''
from swrag_integrations.tuning import TunedConfig

if HAVE_DATA:
    tuned = TunedConfig.load(CONFIG)
    print("chosen:   ", tuned.chosen)
    print("index:    ", tuned.index_kwargs)
    print("retriever:", tuned.retriever_kwargs)
    report = tuned.evidence["synthetic"]["report"]
    print(f"questions: {report['questions']} {report['kinds']}; exact-match leak: raw sentence "
          f"{report['leak_rate_raw_sentence']:.0%}, unguarded cloze {report['leak_rate_unguarded_cloze']:.0%}, "
          f"used {report['leak_rate']:.0%}")
    for row in tuned.evidence["candidates"][:4]:
        print(f"  {100 * row['mean']:5.1f} [{100 * row['ci_low']:5.1f}, {100 * row['ci_high']:5.1f}] "
              f"n={row['n']:<3} {row['label']}")
'''),
        md("""
        ## The index records the configuration

        `SlidingWindowIndex(dir, config=...)` (what `swrag index --config` does) takes the
        chunking from the file and keeps the whole configuration in the index. Reopened
        without it, the index still reports it (`tuned_config`), and `as_retriever()` starts
        from the tuned retriever settings. A real question about one of the articles:
        """),
        code('''
from swrag_integrations.langchain.index import SlidingWindowIndex

if HAVE_DATA:
    store = WORK / "index"
    index = SlidingWindowIndex(store, config=CONFIG, show_progress=False)
    print(index.add_files([CORPUS]).summary())
    index.engine.store.close()

    reopened = SlidingWindowIndex(store, show_progress=False)  # no config given
    print("recorded after reopening:", reopened.tuned_config.candidate == tuned.candidate)
    print("chunking:", reopened.config)
    retriever = reopened.as_retriever()
    print("retriever:", {k: getattr(retriever, k) for k in ("k_child", "search_type", "weights", "budget_tokens")})
    titles = {s.source_id for s in articles}
    example = next(e for e in examples if build_corpus([e])[0].source_id in titles)
    print(f"\\nQ: {example.question}  (gold: {example.answers[0]!r})")
    docs = retriever.invoke(example.question)
    context = "\\n".join(d.page_content for d in docs)
    print(f"{len(docs)} merged windows; gold answer in the context: {example.answers[0] in context}")
    for doc in docs[:2]:
        print(f"  {Path(doc.metadata['source']).name} {doc.metadata['start_index']}-{doc.metadata['end_index']}: "
              f"{doc.page_content[:120]!r}")
    reopened.store.close()
shutil.rmtree(WORK, ignore_errors=True)
'''),
    ]
