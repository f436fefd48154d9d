"""Write (and optionally execute) the cookbook notebooks from the Python source below.

    .venv/bin/python cookbook/_build.py              # write the .ipynb files, no outputs
    .venv/bin/python cookbook/_build.py --execute    # write, run and save them with outputs
    .venv/bin/python cookbook/_build.py --execute 01 05   # only some notebooks

The notebooks are run with the ``python3`` kernel (the interpreter running this script)
and ``cookbook/`` as the working directory, like ``tests/project/test_cookbook.py`` does.
Edit the cells here, not in the ``.ipynb`` files, so the two never drift apart.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent


def md(text: str):
    return new_markdown_cell(textwrap.dedent(text).strip("\n"))


def code(text: str):
    return new_code_cell(textwrap.dedent(text).strip("\n"))


# Shared first cell of every notebook: offline, quiet, reproducible.
SETUP = """
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")        # never reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")                 # keep the saved outputs readable
"""

# Loading the local LLM, used by 02 and 03 (04 shows the same steps one by one).
LOAD_LLM = '''
import logging
from pathlib import Path

from swrag_integrations.llm import load_llama3

logging.getLogger("ipex_llm").setLevel(logging.ERROR)


def load_local_llm(**kwargs):
    """The local LLM through IPEX-LLM (low-bit) where it is installed; plain transformers if
    IPEX-LLM cannot run here."""
    llm = load_llama3(backend="auto", **kwargs)
    try:
        llm.generate("Hi", max_new_tokens=1)
    except Exception as exc:  # an IPEX-LLM runtime problem on this machine
        print(f"IPEX-LLM cannot generate here ({type(exc).__name__}: {exc}); using plain transformers")
        llm = load_llama3(backend="transformers", **kwargs)
    return llm


# model=None: the bundled stand-in (SmolLM2-135M-Instruct GGUF), converted once into the
# default cache (~/.cache/swrag or $SWRAG_CACHE). For a real Llama-3 see 04_ipex_llm.ipynb.
llm = load_local_llm(max_new_tokens=48)
print(f"{Path(llm.info.source).name}: backend={llm.info.backend}  device={llm.info.device}  "
      f"low_bit={llm.info.low_bit}  loaded in {llm.info.load_seconds:.1f} s")
'''

# --------------------------------------------------------------------------- 01

NB01 = [
    md("""
    # 1 · Splitting: FFS, DFS and DDS side by side

    The three sliding-window strategies of the method, on the same English and Chinese
    passage:

    | strategy | window | step |
    |---|---|---|
    | **FFS** fixed window, fixed step | `w` units | `s` units |
    | **DFS** dynamic window, fixed step | from `start` to the first delimiter at or after `start + w` | `s` units |
    | **DDS** dynamic window, dynamic step | whole delimiter-split units until `w` is reached | `s` delimiters |

    Every window is a `Span(start, end)` of character offsets into the source string, so
    `text[start:end]` *is* the chunk: offsets are exact and a window can never cut a
    multi-byte character. Units are cl100k tokens here (`unit="char"` works the same way).
    """),
    code(SETUP + """
import html

import matplotlib.pyplot as plt
from IPython.display import display

from swrag_integrations import (
    DynamicStepTextSplitter,
    DynamicWindowTextSplitter,
    FixedWindowTextSplitter,
    iter_windows,
)
from swrag_integrations.core.windows import count_units
"""),
    md("""
    ## The passages

    One short English and one short Chinese passage (same content). The default
    delimiters include `. `, `,`, `\\n` and the Chinese `。，；！？`.
    """),
    code('''
EN = (
    "Sliding windows keep the context of a passage together. A fixed window cuts the text "
    "every few tokens, even in the middle of a sentence. A dynamic window waits for the next "
    "delimiter, so a sentence is never broken. The dynamic step goes one step further: windows "
    "start and end at delimiters, and the step counts sentences instead of tokens. Overlap "
    "between neighbouring windows means that an answer near a boundary still appears whole in "
    "at least one window. Larger windows give the model more context, but every question then "
    "costs more tokens."
)
ZH = (
    "滑动窗口让段落的上下文保持完整。固定窗口每隔固定数量的词元切分一次，即使句子还没有结束。"
    "动态窗口会等到下一个分隔符，因此句子不会被切断。动态步长更进一步：窗口在分隔符处开始和结束，"
    "步长按句子计数，而不是按词元计数。相邻窗口之间的重叠意味着，靠近边界的答案至少会完整地出现在"
    "一个窗口中。更大的窗口给模型更多上下文，但每个问题也要花费更多词元。"
)
for name, text in (("EN", EN), ("ZH", ZH)):
    print(f"{name}: {len(text)} characters, {count_units(text, 'token')} cl100k tokens")
'''),
    md("""
    ## Windows as highlighted spans

    `show_windows` lists every window with its offsets `[start, end)` and its length.
    The part a window shares with the previous one is shaded grey (and italic), the new
    part alternates between blue and orange. The output carries an HTML view and a plain-text
    fallback (what a terminal or a renderer without HTML shows).
    """),
    code('''
SETTINGS = {  # window size and step, in tokens (DDS: the step counts delimiters)
    "FFS": dict(window_size=40, step=20),
    "DFS": dict(window_size=40, step=20),
    "DDS": dict(window_size=40, step=2),
}
COLOURS = ("#cfe5ff", "#ffe2b5")
SHARED = "#dddddd"


def _short(text, width=60):
    text = text.replace("\\n", "⏎")
    return text if len(text) <= width else text[: width // 2 - 1] + " … " + text[-(width // 2 - 2):]


def show_windows(text, strategy, unit="token", **settings):
    """Display the windows of ``text`` (HTML + plain text); return their spans."""
    spans = list(iter_windows(text, strategy, unit=unit, **settings))
    rows_html, rows_text, prev_end = [], [], 0
    for i, (start, end) in enumerate(spans):
        cut = min(max(prev_end, start), end)  # text[start:cut] is shared with the previous window
        size = count_units(text[start:end], unit)
        body = (f'<i style="background:{SHARED}">{html.escape(text[start:cut])}</i>'  # italic if styles are stripped
                f'<span style="background:{COLOURS[i % 2]}">{html.escape(text[cut:end])}</span>')
        rows_html.append(
            f"<tr><td>{i}</td><td style='white-space:nowrap'>[{start}, {end})</td><td>{size}</td>"
            f"<td style='text-align:left'>{body}</td></tr>"
        )
        rows_text.append(f"{i:>3}  [{start:>4}, {end:>4})  {size:>3} {unit}s  {_short(text[start:end])}")
        prev_end = end
    params = ", ".join(f"{k}={v}" for k, v in settings.items())
    title = f"{strategy} ({params}, unit={unit!r}): {len(spans)} windows"
    table = (f"<b>{html.escape(title)}</b><table><tr><th>#</th><th>offsets</th><th>{unit}s</th>"
             f"<th style='text-align:left'>window</th></tr>{''.join(rows_html)}</table>")
    display({"text/html": table, "text/plain": "\\n".join([title, *rows_text])}, raw=True)
    return spans


spans = {("EN", s): show_windows(EN, s, **SETTINGS[s]) for s in SETTINGS}
'''),
    md("""
    FFS windows start every 20 tokens and stop after exactly 40, wherever that is. DFS
    windows start at the same places but run on to the end of the sentence or clause.
    DDS windows start *and* end at delimiters: each starts two delimiters after the
    previous one.

    The same on the Chinese passage. Token boundaries that fall inside a multi-byte
    character are snapped to the character start, so no window contains half a
    character (no U+FFFD). With long clauses a DDS window may hold fewer than `s`
    delimiters; the next window then starts where it ends (no text is skipped), and
    two neighbouring DDS windows can end at the same delimiter.
    """),
    code('''
spans.update({("ZH", s): show_windows(ZH, s, **SETTINGS[s]) for s in SETTINGS})
assert not any("\\ufffd" in (EN if lang == "EN" else ZH)[a:b] for (lang, _), sp in spans.items() for a, b in sp)
'''),
    md("""
    Character units work the same way (here DDS with 60-character windows moving by two
    delimiters):
    """),
    code('''
_ = show_windows(ZH, "DDS", unit="char", window_size=60, step=2)
'''),
    md("""
    ## Window lengths and overlaps

    Top: where each window lies in the passage (one bar per window, by character offset).
    Bottom: each window's length in tokens, split into the part shared with the previous
    window (grey) and the new part; the dashed line is the window size `w`.
    """),
    code('''
fig, axes = plt.subplots(2, 6, figsize=(15, 5.2), sharey="row", layout="constrained")
for col, ((lang, strategy), sp) in enumerate(sorted(spans.items(), key=lambda kv: (kv[0][0], "FFS DFS DDS".index(kv[0][1])))):
    text = EN if lang == "EN" else ZH
    top, bottom = axes[0][col], axes[1][col]
    for i, (a, b) in enumerate(sp):
        top.barh(i, b - a, left=a, height=0.7, color=COLOURS[i % 2], edgecolor="#555555", linewidth=0.5)
    top.set_title(f"{lang} · {strategy}", fontsize=10)
    top.set_xlabel("character offset", fontsize=8)
    top.invert_yaxis()
    lengths, shared, prev_end = [], [], 0
    for a, b in sp:
        lengths.append(count_units(text[a:b], "token"))
        shared.append(count_units(text[a:min(max(prev_end, a), b)], "token") if prev_end > a else 0)
        prev_end = b
    idx = range(len(sp))
    bottom.bar(idx, shared, color=SHARED, label="shared with previous")
    bottom.bar(idx, [n - s for n, s in zip(lengths, shared)], bottom=shared, color=COLOURS[0], label="new")
    bottom.axhline(SETTINGS[strategy]["window_size"], color="black", linestyle="--", linewidth=0.8)
    bottom.set_xlabel("window #", fontsize=8)
axes[0][0].set_ylabel("window #")
axes[1][0].set_ylabel("tokens")
axes[1][0].legend(fontsize=7, loc="lower left")
plt.show()
'''),
    md("""
    DFS and DDS windows are never cut mid-sentence, so their lengths vary around `w`;
    FFS windows are exactly `w` tokens except the last.

    ## The same windows as LangChain splitters

    `FixedWindowTextSplitter`, `DynamicWindowTextSplitter` and `DynamicStepTextSplitter`
    are LangChain `TextSplitter`s over the same spans. Every chunk carries its exact
    offsets (`start_index`/`end_index`) and the window settings in its metadata.
    """),
    code('''
for cls in (FixedWindowTextSplitter, DynamicWindowTextSplitter, DynamicStepTextSplitter):
    splitter = cls(**SETTINGS[cls.strategy])
    docs = splitter.create_documents([EN, ZH], metadatas=[{"source": "en"}, {"source": "zh"}])
    assert all((EN if d.metadata["source"] == "en" else ZH)[d.metadata["start_index"]:d.metadata["end_index"]]
               == d.page_content for d in docs)
    print(f"{cls.__name__}: {len(docs)} chunks; first chunk metadata:")
    print("   ", docs[0].metadata)
'''),
]

# --------------------------------------------------------------------------- 02

NB02 = [
    md("""
    # 2 · LangChain RAG with windowed parent-child retrieval

    1. Write a few documents (`.txt`, `.pdf`, `.csv`) to a temporary folder and load them.
    2. Index them in a `SlidingWindowIndex` (embedded Chroma + a CJK-aware BM25 index):
       small chunks are embedded, windows are stored only as offsets.
    3. Retrieve with the `WindowedParentRetriever`: a hybrid ensemble (BM25 + dense,
       weighted reciprocal-rank fusion) finds small chunks, which are widened to their
       windows and merged by offset within a token budget.
    4. Add multi-query (`MultiQueryFusionRetriever`) and answer with an LCEL chain on the
       local LLM, citing every source by its character offsets.

    Everything runs offline: the embedder is the bundled all-MiniLM-L6-v2 and the LLM the
    bundled SmolLM2-135M stand-in for Llama-3 (tiny, so its answers are rough).
    """),
    code(SETUP + """
import csv
import shutil
import tempfile
from pathlib import Path

from IPython.display import display

WORK = Path(tempfile.mkdtemp(prefix="swrag-cookbook-02-"))  # documents and the index live here
"""),
    md("""
    ## Documents

    A text file, a two-page PDF and a CSV table about an invented tea merchant, plus a
    short Chinese text. The PDF is written by hand (a minimal PDF 1.4 file with the
    built-in Helvetica font) and read back with `pypdf` to check it.
    """),
    code('''
TXT = """Linden & Rowe is a tea merchant founded in 1868 by Margaret Linden and Samuel Rowe in the port town of Kessel Bay. The two partners started with a single warehouse on Quay Street and three clippers that sailed to Fuzhou and back once a year.

In 1891 the firm opened a blending room, where tea tasters mixed leaves from China, Ceylon and Assam into house blends. The most famous of them, Harbour Breakfast, is still sold today and is made from a strong Assam tea with a little smoky Lapsang.

During the First World War two of the company's ships were requisitioned by the navy, and the firm nearly went bankrupt. It survived by selling tea in small paper packets to grocers instead of in chests to merchants, an idea of the bookkeeper Edith Moss, who later became managing director.

Between the wars the firm bought its own tea garden in the Wuyi mountains of Fujian. The garden grows Da Hong Pao and Lapsang Souchong, and its first harvest reached Kessel Bay in 1926 on the steamer Marguerite, which replaced the last of the clippers.

After 1950 the company moved its packing from Quay Street to the new North Dock warehouse, where machines filled forty thousand packets a day. In 1972 it was the first tea merchant in the country to sell tea bags made of unbleached paper.

Today Linden & Rowe employs 240 people. Its tea is packed in a solar-powered plant outside Kessel Bay, and the old warehouse on Quay Street is a museum of the tea trade.
"""

PDF_PAGES = [
    ["Linden & Rowe - Annual Report 2023", "",
     "Revenue in 2023 was 41.3 million euros, up 6 percent on 2022.",
     "Operating profit was 3.9 million euros.",
     "Exports made up 35 percent of sales, mostly to Germany and Japan."],
    ["Outlook for 2024", "",
     "The company plans to open a second packing line in Kessel Bay in 2024.",
     "All tea will be bought from certified organic gardens by 2026."],
]

ROWS = [
    {"warehouse": "Quay Street", "city": "Kessel Bay", "opened": "1868", "capacity_tonnes": "0", "manager": "museum"},
    {"warehouse": "North Dock", "city": "Kessel Bay", "opened": "1954", "capacity_tonnes": "1800", "manager": "Ruth Okafor"},
    {"warehouse": "Elbe Lager", "city": "Hamburg", "opened": "1999", "capacity_tonnes": "950", "manager": "Jonas Weber"},
]

ZH_TXT = "林登与罗公司在福建武夷山有一个自己的茶园。茶园面积约为一百二十公顷，主要种植大红袍和正山小种。每年春天，茶园会雇用六十名采茶工人。"


def write_minimal_pdf(path, pages):
    """A minimal PDF: one page per list of lines, Helvetica 12 pt (ASCII text only)."""
    def esc(s):
        return s.replace("\\\\", "\\\\\\\\").replace("(", "\\\\(").replace(")", "\\\\)")

    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None,
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"]
    kids = []
    for lines in pages:
        text = "BT /F1 12 Tf 72 760 Td 16 TL " + " ".join(f"({esc(line)}) Tj T*" for line in lines) + " ET"
        objects.append(f"<< /Length {len(text)} >>\\nstream\\n{text}\\nendstream")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R >> >> /Contents {len(objects)} 0 R >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out, offsets = bytearray(b"%PDF-1.4\\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\\n{body}\\nendobj\\n".encode("latin-1")
    xref = len(out)
    out += f"xref\\n0 {len(objects) + 1}\\n0000000000 65535 f \\n".encode()
    out += "".join(f"{off:010d} 00000 n \\n" for off in offsets).encode()
    out += f"trailer\\n<< /Size {len(objects) + 1} /Root 1 0 R >>\\nstartxref\\n{xref}\\n%%EOF\\n".encode()
    Path(path).write_bytes(bytes(out))


DOCS_DIR = WORK / "docs"
DOCS_DIR.mkdir()
(DOCS_DIR / "history.txt").write_text(TXT, encoding="utf-8")
(DOCS_DIR / "tea_garden_zh.txt").write_text(ZH_TXT, encoding="utf-8")
write_minimal_pdf(DOCS_DIR / "annual_report_2023.pdf", PDF_PAGES)
with open(DOCS_DIR / "warehouses.csv", "w", newline="", encoding="utf-8") as fh:
    writer = csv.DictWriter(fh, fieldnames=list(ROWS[0]))
    writer.writeheader()
    writer.writerows(ROWS)

from pypdf import PdfReader

reader = PdfReader(DOCS_DIR / "annual_report_2023.pdf")
print(f"pypdf reads {len(reader.pages)} pages; page 1 starts with:", repr(reader.pages[0].extract_text()[:60]))
assert "41.3 million" in reader.pages[0].extract_text()
'''),
    md("""
    `load_files` turns a folder into LangChain `Document`s: one per text file, one per
    PDF (pages joined by a blank line), one per CSV row (`column: value` lines).
    """),
    code('''
from swrag_integrations.langchain import load_files

documents = load_files(DOCS_DIR)
for doc in documents:
    where = Path(doc.metadata["source"]).name + (f" row {doc.metadata['row']}" if "row" in doc.metadata else "")
    print(f"{where:<28} {len(doc.page_content):>5} chars  {doc.page_content[:50]!r}")
'''),
    md("""
    ## The index

    Small chunks of 20 tokens are embedded (MiniLM reads at most 256 word pieces, so
    small chunks embed well); windows of 4 chunks moving by 2 (80 tokens) are stored as
    chunk ranges and character offsets in each chunk's metadata, never as text. The store is an
    embedded `chromadb.PersistentClient` in the temporary folder.
    """),
    code('''
from swrag_integrations.langchain.index import SlidingWindowIndex

index = SlidingWindowIndex(
    WORK / "index", collection_name="cookbook", chunk_size=20, window_size=4, step=2, show_progress=False
)
print(index.engine.index_documents(documents).summary())
print(index.engine.config)
print(f"{index.engine.count()} small chunks, {index.engine.count('medium')} medium chunks, {len(index.engine.source_ids())} sources")
'''),
    md("""
    ## Stage 1: the hybrid ensemble finds small chunks

    BM25 (jieba tokens for Chinese) and the dense retriever (MMR over Chroma) each rank
    the small chunks; weighted reciprocal-rank fusion merges the two lists by chunk id.
    """),
    code('''
from swrag_integrations.langchain.retriever import WindowedParentRetriever

retriever = WindowedParentRetriever(index=index, k=3, k_child=4, budget_tokens=300)
question = "What was the revenue of Linden & Rowe in 2023?"

for hit in retriever.find_chunks(question):  # stage 1: small chunks with their fused ranks
    m = hit.metadata
    text = index.engine.span_text(hit.source_id, hit.start, hit.end)
    print(f"{hit.rank}. {Path(m['source']).name:<24} chunk {hit.chunk_index:>2}  bm25 #{m.get('bm25_rank', '-')!s:<2} "
          f"dense #{m.get('dense_rank', '-')!s:<2} rrf={hit.score:.4f}  {text[:45]!r}")
'''),
    md("""
    ## Stages 2-3: hits widened to windows, merged by offset

    Hits whose windows touch are grouped into one parent, parents are ranked by their
    summed scores and cut around the hits to their share of the token budget (300 tokens
    here; budget left over goes to the untrimmed windows in rank order). Each returned document is
    exactly `source_text[start_index:end_index]`: the check below re-reads the loaded
    documents. The matched chunk is highlighted inside its window.
    """),
    code('''
import html

from swrag_integrations.engine.ids import source_id_for

texts = {source_id_for(d): d.page_content for d in documents}


def show_context(docs):
    parts, plain = [], []
    for i, d in enumerate(docs, 1):
        m = d.metadata
        assert texts[m["source_id"]][m["start_index"]:m["end_index"]] == d.page_content  # exact offsets
        name = Path(m["source"]).name + (f" row {m['row']}" if "row" in m else "")
        label = f"[{i}] {name} {m['start_index']}-{m['end_index']} (chunks {m['chunk_lower_bound']}-{m['chunk_upper_bound']}, score {m['score']:.3f})"
        a, b = m.get("hit_start_index", m["start_index"]), m.get("hit_end_index", m["start_index"])
        a, b = a - m["start_index"], b - m["start_index"]
        body = (html.escape(d.page_content[:a]) + f'<mark>{html.escape(d.page_content[a:b])}</mark>'
                + html.escape(d.page_content[b:]))
        parts.append(f"<p><b>{html.escape(label)}</b><br><span style='white-space:pre-wrap'>{body}</span></p>")
        plain.append(f"{label}\\n    {' '.join(d.page_content.split())}")
    display({"text/html": "".join(parts), "text/plain": "\\n".join(plain)}, raw=True)


context_docs = retriever.invoke(question)
show_context(context_docs)
'''),
    md("""
    BM25 tokenises Chinese with jieba, so a Chinese question finds the Chinese text even
    though the English-only MiniLM cannot help there:
    """),
    code('''
show_context(retriever.invoke("茶园有多少公顷？"))
'''),
    md("""
    ## The local LLM

    `load_llama3(backend="auto")` loads the model through IPEX-LLM with `sym_int8` weights
    where ipex-llm is installed, else through plain transformers (see `04_ipex_llm.ipynb`). `.as_langchain()` gives a LangChain `LLM`.
    """),
    code(LOAD_LLM),
    md("""
    ## Multi-query

    `MultiQueryFusionRetriever` asks the LLM for rephrasings, cleans its output (numbering,
    preambles, echoed prompts) and always keeps the original question first. With a
    `WindowedParentRetriever` all phrasings are retrieved together, so they share one
    token budget and their windows are merged by offset.

    The 135M stand-in writes poor rephrasings (sometimes an answer instead of a question);
    a real Llama-3 writes useful ones. A LangChain in-memory LLM cache makes the chain
    below reuse these rephrasings instead of generating them a second time.
    """),
    code('''
from langchain_core.caches import InMemoryCache
from langchain_core.globals import set_llm_cache

from swrag_integrations.langchain.multi_query import MultiQueryFusionRetriever

set_llm_cache(InMemoryCache())
lc_llm = llm.as_langchain()
multi_query = MultiQueryFusionRetriever(retriever=retriever, llm=lc_llm, n_variants=2)

question = "Who had the idea of selling tea in small paper packets?"
mq_docs = multi_query.invoke(question)
print("queries:", *mq_docs[0].metadata["queries"], sep="\\n  ")
show_context(mq_docs)
'''),
    md("""
    ## The LCEL chain: answer with cited sources

    `build_rag_chain(retriever, llm)` is an LCEL pipeline:
    `question → {docs: retriever, question} → prompt → llm → StrOutputParser`, returning
    the answer, the context and every source with its offsets. The prompt is the method's
    ("Answer the question based on the following context: …"), in Chinese for Chinese
    questions.
    """),
    code('''
from swrag_integrations.methods.langchain_chain import build_rag_chain

chain = build_rag_chain(multi_query, lc_llm)
result = chain.invoke(question)

print("Q:", result["question"])
print("A:", result["answer"])
print("(the retrieved context holds the answer, Edith Moss:", "Edith Moss" in result["context"], ")")
print("Sources:")
for i, src in enumerate(result["sources"], 1):
    print(f"  [{i}] {Path(src['source']).name} chars {src['start_index']}-{src['end_index']}: "
          f"{' '.join(src['text'].split())[:70]!r}")
'''),
    code('''
set_llm_cache(None)
shutil.rmtree(WORK, ignore_errors=True)  # the documents and the index were temporary
'''),
]

# --------------------------------------------------------------------------- 03

NB03 = [
    md("""
    # 3 · LlamaIndex: node parsers, a vector index and the windowed retriever

    * The three strategies as LlamaIndex node parsers (`FixedWindowNodeParser`,
      `DynamicWindowNodeParser`, `DynamicStepNodeParser`) inside an `IngestionPipeline`.
    * A plain `VectorStoreIndex` over DDS windows, embedded with the bundled MiniLM.
    * The windowed parent-child retriever as a LlamaIndex retriever
      (`WindowedLlamaIndexRetriever`) and a query engine on the local LLM
      (`build_query_engine`).

    The document is the lighthouse text bundled with the package.
    """),
    code(SETUP + """
import shutil
import tempfile
from importlib.resources import files
from pathlib import Path

from llama_index.core import Document, Settings

WORK = Path(tempfile.mkdtemp(prefix="swrag-cookbook-03-"))
TEXT = (files("swrag_integrations") / "data" / "sample.md").read_text(encoding="utf-8")
document = Document(text=TEXT, metadata={"source": "sample.md"})
print(f"{len(TEXT)} characters; starts with {TEXT[:60]!r}")
"""),
    md("""
    ## Node parsers in an `IngestionPipeline`

    Each node carries exact `start_char_idx`/`end_char_idx` (LlamaIndex's own `str.find`
    guess is replaced), the window settings in its metadata and PREVIOUS/NEXT links.
    """),
    code('''
from llama_index.core.ingestion import IngestionPipeline

from swrag_integrations.llama_index import DynamicStepNodeParser, DynamicWindowNodeParser, FixedWindowNodeParser

parsers = {
    "FFS": FixedWindowNodeParser(window_size=128, step=64),
    "DFS": DynamicWindowNodeParser(window_size=128, step=64),
    "DDS": DynamicStepNodeParser(window_size=128, step=3),
}
for name, parser in parsers.items():
    nodes = IngestionPipeline(transformations=[parser]).run(documents=[document])
    assert all(TEXT[n.start_char_idx:n.end_char_idx] == n.text for n in nodes)
    sizes = [n.end_char_idx - n.start_char_idx for n in nodes]
    print(f"{name}: {len(nodes):>2} nodes, {min(sizes)}-{max(sizes)} characters")

first = nodes[0]
print("\\nfirst DDS node:", first.start_char_idx, first.end_char_idx, first.metadata)
print("relationships:", sorted(r.name for r in first.relationships))
'''),
    md("""
    ## A plain vector index

    A small `BaseEmbedding` adapter puts the bundled MiniLM into LlamaIndex; adding it to
    the pipeline embeds the nodes there, and `VectorStoreIndex` stores them. This is
    the usual LlamaIndex way: each whole window is embedded as one vector and returned
    as it is. A short fact inside a long window is easily diluted (and MiniLM reads only
    the first 256 word pieces), so check the *holds the answer* column.
    """),
    code('''
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from pydantic import PrivateAttr

from swrag_integrations.embeddings.minilm import MiniLMEmbeddings


class MiniLMEmbedding(BaseEmbedding):
    """The bundled all-MiniLM-L6-v2 as a LlamaIndex embedding model (offline)."""

    _model: MiniLMEmbeddings = PrivateAttr()

    def __init__(self, **kwargs):
        super().__init__(model_name="all-MiniLM-L6-v2 (bundled)", **kwargs)
        self._model = MiniLMEmbeddings()

    def _get_query_embedding(self, query):
        return self._model.embed_query(query)

    async def _aget_query_embedding(self, query):
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text):
        return self._model.embed_documents([text])[0]

    def _get_text_embeddings(self, texts):
        return self._model.embed_documents(texts)


Settings.embed_model = MiniLMEmbedding()
pipeline = IngestionPipeline(transformations=[parsers["DDS"], Settings.embed_model])
nodes = pipeline.run(documents=[document])
vector_index = VectorStoreIndex(nodes)

question = "Who was the last resident keeper of the lighthouse?"
ANSWER = "Tomas Greer"
for hit in vector_index.as_retriever(similarity_top_k=3).retrieve(question):
    print(f"score {hit.score:.3f}  chars {hit.node.start_char_idx}-{hit.node.end_char_idx}  "
          f"holds the answer: {ANSWER in hit.node.text!s:<5}  {' '.join(hit.node.text.split())[:60]!r}")
'''),
    md("""
    ## The windowed retriever in LlamaIndex

    `WindowedLlamaIndexRetriever(index=SlidingWindowIndex)` runs the same parent-child
    retrieval as in notebook 2 (small chunks of 20 tokens found by BM25 + dense search,
    widened to their windows of 3 chunks and merged by offset, within 150 tokens) and
    returns `NodeWithScore`s with exact offsets.
    """),
    code('''
from langchain_core.documents import Document as LCDocument

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.llama_index.index import WindowedLlamaIndexRetriever

sw_index = SlidingWindowIndex(
    WORK / "index", collection_name="lighthouse", chunk_size=20, window_size=3, step=1, show_progress=False
)
sw_index.add_documents([LCDocument(page_content=document.text, metadata=document.metadata)])
retriever = WindowedLlamaIndexRetriever(index=sw_index, k=2, k_child=3, budget_tokens=150)

for hit in retriever.retrieve(question):
    node = hit.node
    assert TEXT[node.start_char_idx:node.end_char_idx] == node.text
    print(f"score {hit.score:.3f}  chars {node.start_char_idx}-{node.end_char_idx}  "
          f"holds the answer: {ANSWER in node.text!s:<5}  hit chunks {node.metadata['hit_chunk_indices']}")
'''),
    md("""
    ## A query engine on the local LLM

    `llm.as_llamaindex()` is a LlamaIndex `CustomLLM` over the same local model as in
    notebook 2; `build_query_engine` puts it and the windowed retriever into a
    `RetrieverQueryEngine` with the method's prompt. The 135M stand-in model mixes the
    retrieved facts with invented ones; a real Llama-3 (notebook 4) answers properly
    with the same code.
    """),
    code(LOAD_LLM),
    code('''
from swrag_integrations.methods.llama_index_chain import build_query_engine

Settings.llm = llm.as_llamaindex()
engine = build_query_engine(retriever, Settings.llm)
response = engine.query(question)

print("Q:", question)
print("A:", str(response).strip())
print("Sources:")
for i, hit in enumerate(response.source_nodes, 1):
    print(f"  [{i}] {hit.node.metadata['source']} chars {hit.node.start_char_idx}-{hit.node.end_char_idx}")
'''),
    code('''
shutil.rmtree(WORK, ignore_errors=True)
'''),
]

# --------------------------------------------------------------------------- 04

NB04 = [
    md("""
    # 4 · IPEX-LLM: Llama-3 with low-bit weights on CPU or an Intel GPU

    `swrag_integrations.llm.load_llama3` loads a Llama-family chat model through
    [IPEX-LLM](https://github.com/intel-analytics/ipex-llm): the weights are converted to a
    low-bit format (`sym_int8` by default, `sym_int4` for large models) when the model is
    loaded, the converted model is saved with `save_low_bit` and later loads read it back
    with `load_low_bit`, which is much faster. `device="xpu"` runs on an Intel GPU;
    without one it falls back to the CPU with a warning.

    Here everything runs on the CPU with the bundled stand-in model: SmolLM2-135M-Instruct
    (a Llama-architecture model) shipped as a GGUF file, so nothing is downloaded. The
    code for a real Llama-3 is at the end.

    ipex-llm is deprecated upstream and pins transformers 4.37 and numpy < 2, so it has its
    own environment: `pip install torch==2.13.0` then `pip install -e '.[ipex]'` into a fresh
    venv, and run this notebook there to see the low-bit steps. In the default environment
    (current transformers) the same cells load the model with plain transformers and say so.
    """),
    code(SETUP + """
import importlib.util
import logging
import shutil
import tempfile
from pathlib import Path

import torch

from swrag_integrations.llm import LOW_BIT_FORMATS, load_llama3
from swrag_integrations.llm.gguf_convert import bundled_gguf_path, ensure_hf_checkpoint
from swrag_integrations.llm.loader import default_cache_dir

logging.getLogger("ipex_llm").setLevel(logging.ERROR)
# ipex-llm pins transformers 4.37 and numpy < 2, so it lives in its own environment
# (pip install -e '.[ipex]' into a fresh venv); elsewhere these cells use plain transformers.
IPEX = importlib.util.find_spec("ipex_llm") is not None
BACKEND = "ipex" if IPEX else "transformers"
print("ipex-llm installed here:", IPEX, "-> backend", repr(BACKEND))
print("Intel GPU (xpu) available:", bool(hasattr(torch, "xpu") and torch.xpu.is_available()))
print("low-bit formats:", ", ".join(LOW_BIT_FORMATS[:10]), "...")
"""),
    md("""
    ## The stand-in model

    The GGUF file is converted once into a transformers checkpoint, cached in
    `~/.cache/swrag` (or `$SWRAG_CACHE`); later calls find it there.
    """),
    code('''
def folder_size(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


gguf = bundled_gguf_path()
checkpoint, converted_now = ensure_hf_checkpoint(gguf, default_cache_dir())
print(f"GGUF: {gguf.name} ({gguf.stat().st_size / 1e6:.0f} MB)")
print(f"checkpoint: {checkpoint.name} ({folder_size(checkpoint) / 1e6:.0f} MB, converted now: {converted_now})")
'''),
    md("""
    ## First load: convert to `sym_int8` and save the low-bit model

    The low-bit cache goes to a temporary folder here (`cache_dir=`), so this notebook
    always shows the conversion. Its default is the same cache root as above.
    """),
    code('''
LOW_BIT_CACHE = Path(tempfile.mkdtemp(prefix="swrag-cookbook-04-"))

llm = load_llama3(checkpoint, backend=BACKEND, device="auto", low_bit="sym_int8", cache_dir=LOW_BIT_CACHE,
                  max_new_tokens=32)
info = llm.info
print(f"backend={info.backend}  device={info.device}  low_bit={info.low_bit}")
if IPEX:
    print(f"loaded in {info.load_seconds:.1f} s; read from the low-bit cache: {info.from_cache}")
    saved = Path(info.cache_path)
    print(f"saved low-bit model: {saved.name} ({folder_size(saved) / 1e6:.0f} MB)")
    print("files:", ", ".join(sorted(p.name for p in saved.iterdir())))
else:
    print(f"loaded in {info.load_seconds:.1f} s; no low-bit conversion without ipex-llm (fp32 weights)")
'''),
    md("""
    ## Second load: `load_low_bit` from the cache

    The same call again finds the saved low-bit model and skips the conversion.
    """),
    code('''
if IPEX:
    del llm
    llm = load_llama3(checkpoint, backend=BACKEND, device="auto", low_bit="sym_int8", cache_dir=LOW_BIT_CACHE,
                      max_new_tokens=32)
    print(f"loaded in {llm.info.load_seconds:.1f} s; read from the low-bit cache: {llm.info.from_cache}")
else:
    print("skipped: the low-bit cache is ipex-llm's (its own environment: pip install -e '.[ipex]')")
'''),
    md("""
    ## Generation

    Greedy decoding with a repetition penalty of 1.1 (the method's settings). The prompt
    goes through the model's chat template, and generation stops at the end-of-turn token
    (`<|eot_id|>` for Llama-3). `stream` yields the same text piece by piece.
    """),
    code('''
question = "What is the capital of France? Answer in one sentence."
try:
    print("generate:", llm.generate(question))
except Exception as exc:  # an IPEX-LLM runtime problem on this machine
    print(f"IPEX-LLM cannot generate here ({type(exc).__name__}: {exc}); using plain transformers")
    llm = load_llama3(checkpoint, backend="transformers", max_new_tokens=32)
    print("generate:", llm.generate(question))
print("stream:  ", "|".join(llm.stream("Name three colours.", max_new_tokens=16)))
'''),
    md("""
    The same core behind LangChain and LlamaIndex (used in notebooks 2 and 3):
    """),
    code('''
lc_llm = llm.as_langchain(max_new_tokens=64)
li_llm = llm.as_llamaindex(max_new_tokens=64)
print(f"LangChain:  {type(lc_llm).__name__} ({lc_llm._llm_type}), max_new_tokens={lc_llm.max_new_tokens}")
meta = li_llm.metadata
print(f"LlamaIndex: {type(li_llm).__name__}, context_window={meta.context_window}, "
      f"num_output={meta.num_output}, is_chat_model={meta.is_chat_model}")
'''),
    md("""
    ## A real Llama-3 (not run here)

    Give a hub id (needs the model in the local Hugging Face cache when offline, and a
    licence accepted on the hub) or a local directory. `sym_int4` keeps an 8B model at
    about 5 GB; `device="xpu"` needs an Intel GPU with the oneAPI runtime, and
    `"auto"` picks it when present. The cell runs only when `SWRAG_LLAMA3` is set:

    ```bash
    SWRAG_LLAMA3=meta-llama/Meta-Llama-3-8B-Instruct jupyter lab cookbook/04_ipex_llm.ipynb
    ```
    """),
    code('''
REAL_MODEL = os.environ.get("SWRAG_LLAMA3")  # e.g. "meta-llama/Meta-Llama-3-8B-Instruct" or /models/llama3-8b
if REAL_MODEL:
    llama3 = load_llama3(REAL_MODEL, backend=BACKEND, device="auto", low_bit="sym_int4", max_new_tokens=128)
    print(llama3.info)  # second run: from_cache=True (load_low_bit)
    print(llama3.generate("In one sentence: what is retrieval-augmented generation?"))
else:
    print("SWRAG_LLAMA3 is not set: skipped (the bundled stand-in model was used above)")
'''),
    md("""
    Under the hood this is IPEX-LLM's own API:

    ```python
    from ipex_llm.transformers import AutoModelForCausalLM
    from transformers import AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_id, load_in_low_bit="sym_int4")
    model.save_low_bit(cache_dir)                                # once
    model = AutoModelForCausalLM.load_low_bit(cache_dir)         # every later run
    model = model.to("xpu")                                      # Intel GPU
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    ```
    """),
    code('''
shutil.rmtree(LOW_BIT_CACHE, ignore_errors=True)
'''),
]

# --------------------------------------------------------------------------- 05

NB05 = [
    md("""
    # 5 · Evaluation: a small grid on the shared dev data

    `swrag_integrations.evaluation` runs a grid of strategies × windows × steps over
    LongBench-format question sets and reports context recall (is the gold answer in the
    retrieved context?), answer F1 when answers are generated, bootstrap confidence
    intervals, a Table-2-style Markdown table and window × step heatmaps.

    Here: retrieval only (no LLM, so it is fast), the first few questions of two dev sets.
    The data lives in `shared/data/eval/` beside the repository (or `$SWRAG_SHARED`); the
    notebook skips the grid when it is not there. The same run from the command line:

    ```bash
    swrag eval --data ../shared/data/eval/multifieldqa_zh.jsonl --strategies ffs,dfs,dds,rcs \\
        --windows 256,512 --steps 1/2,1/4,2,3 --limit 10 --budget 512 --retrieval-only --out results/demo
    ```
    """),
    code(SETUP + """
import json
import shutil
import tempfile
from pathlib import Path

from IPython.display import Image, display

SHARED = Path(os.environ.get("SWRAG_SHARED") or Path.cwd().parent.parent / "shared")
EVAL_DIR = SHARED / "data" / "eval"
DATASETS = [EVAL_DIR / "multifieldqa_zh.jsonl", EVAL_DIR / "hotpotqa.jsonl"]
HAVE_DATA = all(p.is_file() for p in DATASETS)
if HAVE_DATA:
    print("dev data:", ", ".join(p.name for p in DATASETS))
else:
    print(f"No dev data in {EVAL_DIR} (set SWRAG_SHARED to the shared folder): the grid below is skipped.")
"""),
    md("""
    ## The grid

    `make_grid` expands strategies × windows × steps; FFS/DFS steps are fractions of the
    window, DDS steps count delimiters, RCS (LangChain's `RecursiveCharacterTextSplitter`)
    is the baseline without overlap. All use the same BM25 ranking and the same context
    budget, so only the chunking differs.
    """),
    code('''
from swrag_integrations.evaluation import make_grid, run_eval

grid = make_grid(["ffs", "dfs", "dds", "rcs"], windows=[256, 512], steps=["1/2", "1/4", "2", "3"])
print(f"{len(grid)} configurations:", ", ".join(c.label for c in grid))
'''),
    code('''
OUT = Path(tempfile.mkdtemp(prefix="swrag-cookbook-05-"))
if HAVE_DATA:
    rows = run_eval(DATASETS, grid, OUT, retrieval_only=True, limit=10, budget=512,
                    progress=False, n_resamples=200)
    print(f"{len(rows)} summary rows; outputs:", ", ".join(sorted(p.name for p in OUT.iterdir())))
'''),
    md("""
    ## The table

    Context recall ×100 per configuration and dataset, with a 95% bootstrap interval
    (ten questions per set, so the intervals are wide: this is a smoke run, not a result).
    """),
    code('''
from swrag_integrations.evaluation.report import markdown_table

if HAVE_DATA:
    table = markdown_table(rows, "context_recall")
    display({"text/markdown": table, "text/plain": table}, raw=True)
'''),
    md("""
    ## The heatmap

    Window × step heatmaps per strategy and dataset (the method's Figure 5 layout), written
    by the run as `heatmap.png`.
    """),
    code('''
if HAVE_DATA:
    display(Image(filename=str(OUT / "heatmap.png")))
'''),
    md("""
    Every (configuration, question) pair is also kept as a record (`records.jsonl`), so an
    interrupted run resumes, and single questions can be inspected:
    """),
    code('''
if HAVE_DATA:
    records = [json.loads(line) for line in (OUT / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    for rec in [r for r in records if r["strategy"] == "dds" and r["window"] == 512 and r["step"] == "3"][:4]:
        print(f"{rec['dataset']:<16} recall={rec['context_recall']:.2f}  tokens={rec['context_tokens']:>4}  "
              f"{rec['question'][:50]!r} -> {rec['answers'][0][:30]!r}")
shutil.rmtree(OUT, ignore_errors=True)
'''),
]

sys.path.insert(0, str(HERE))  # the cells of the later notebooks live in their own files
from _graph_cells import cells as graph_cells  # noqa: E402
from _raptor_cells import raptor_cells  # noqa: E402
from _tuning_cells import cells as tuning_cells  # noqa: E402

NOTEBOOKS = {
    "01_splitting.ipynb": NB01,
    "02_langchain_rag.ipynb": NB02,
    "03_llama_index.ipynb": NB03,
    "04_ipex_llm.ipynb": NB04,
    "05_evaluation.ipynb": NB05,
    "06_raptor.ipynb": raptor_cells(md, code, SETUP),
    "07_graph.ipynb": graph_cells(md, code, SETUP),
    "08_tuning.ipynb": tuning_cells(md, code, SETUP),
}

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def build(name: str):
    nb = new_notebook(cells=NOTEBOOKS[name])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python", "version": "3.11"}
    for i, cell in enumerate(nb.cells):  # stable ids keep diffs small
        cell["id"] = f"{Path(name).stem[:2]}-{i:02d}"
    return nb


def execute(nb, timeout: int = 600):
    from nbclient import NotebookClient

    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(HERE)}},
    )
    client.execute()
    nb.metadata["language_info"] = {"name": "python", "version": "3.11"}
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="notebook name prefixes (e.g. 01 04); default all")
    parser.add_argument("--execute", action="store_true", help="run the notebooks and save their outputs")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the kernel's torch: no spinning threads on a busy machine
    names = [n for n in NOTEBOOKS if not args.only or any(n.startswith(p) for p in args.only)]
    for name in names:
        nb = build(name)
        if args.execute:
            started = time.perf_counter()
            execute(nb)
            print(f"{name}: executed in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        nbformat.validate(nb)
        nbformat.write(nb, HERE / name)
        print(f"wrote {HERE / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
