"""Cells of ``06_raptor.ipynb`` (RAPTOR summary trees), for ``cookbook/_build.py``.

``_build.py`` mounts them with two lines::

    from _raptor_cells import raptor_cells                      # with the other imports
    "06_raptor.ipynb": raptor_cells(md, code, SETUP),           # in NOTEBOOKS

``md``/``code`` are ``_build.py``'s cell makers and ``SETUP`` its shared first cell, so
this file needs nothing from it at import time (no circular import).
"""

from __future__ import annotations

from typing import Any, Callable


def raptor_cells(md: Callable[[str], Any], code: Callable[[str], Any], setup: str) -> list[Any]:
    """The cells of the RAPTOR notebook."""
    return [
        md("""
        # 6 · RAPTOR: a summary tree over sliding-window chunks

        RAPTOR (*Recursive Abstractive Processing for Tree-Organized Retrieval*, Sarthi et
        al., ICLR 2024) clusters a document's chunks, summarises every cluster, and
        repeats on the summaries, so questions about a whole document ("what is the
        paper's contribution?") find a node that covers it. Here the leaves are the
        index's own small chunks with **exact offsets**, summaries say **which leaves**
        they summarise, and retrieved leaves are **merged by offset** like the windowed
        parent retriever's windows.

        This notebook builds a tree over a real document (the first QASPER paper of the
        shared dev data, or the bundled sample when that is not there) with the
        **extractive** summariser, which needs no LLM: the sentences of a cluster closest
        to its centroid, kept as exact spans of the source. Then it shows what each
        layer holds and retrieves with the collapsed tree and with tree traversal.
        """),
        code(setup + """
import json
import shutil
import tempfile
from importlib.resources import files
from pathlib import Path

from langchain_core.documents import Document

SHARED = Path(os.environ.get("SWRAG_SHARED") or Path.cwd().parent.parent / "shared")
QASPER = SHARED / "data" / "eval" / "qasper.jsonl"
if QASPER.is_file():
    row = json.loads(QASPER.open(encoding="utf-8").readline())
    text, question, source = row["context"], row["input"], "qasper-0"
else:  # the bundled sample is short: smaller leaves keep the tree interesting
    text = files("swrag_integrations").joinpath("data/sample.md").read_text(encoding="utf-8")
    question, source = "When was the lighthouse first lit?", "sample.md"
print(f"{source}: {len(text):,} characters")
print(text[:300].replace("\\n", " ") + " ...")
"""),
        md("""
        ## Index the document, then grow the tree over its chunks

        `SlidingWindowIndex` cuts the document into 50-token small chunks (exact
        offsets, stored once in its source store). `RaptorIndex(index)` takes those
        chunks as leaves, embeds them with the index's embedder (the bundled MiniLM),
        soft-clusters them (dimension reduction + Gaussian mixtures, the number of
        clusters chosen by BIC), summarises each cluster and repeats until a layer is too
        small to cluster. The trees are stored in the index's source store (JSON +
        `.npy`, no pickle); building again only rebuilds trees whose source changed.

        The reduction is `"auto"`: UMAP (as in RAPTOR) when `umap-learn` is installed
        (`pip install "swrag-integrations[raptor]"`), which compiles its kernels once per
        process (a minute on a small machine), else scikit-learn's PCA. With PCA the
        mixtures often find a single cluster in MiniLM's space, and a cluster too long to
        summarise is then cut in two in document order: the tree is shallower.
        """),
        code("""
from swrag_integrations.methods.raptor import ClusterConfig, ExtractiveSummarizer, RaptorIndex, TreeConfig
from swrag_integrations.langchain.index import SlidingWindowIndex

workdir = Path(tempfile.mkdtemp(prefix="swrag-raptor-"))
index = SlidingWindowIndex(workdir / "index", show_progress=False)
index.engine.index_documents([Document(page_content=text, id=source, metadata={"source": source})])
print(f"{index.engine.count('small')} small chunks")

raptor = RaptorIndex(index, summarizer=ExtractiveSummarizer(max_tokens=100),
                     config=TreeConfig(cluster=ClusterConfig(reduction="auto")), show_progress=False)
print("reduction:", ClusterConfig(reduction="auto").resolved_reduction)
report = raptor.build()
print(report.summary())
for note in report.notes:
    print("note:", note)
tree = raptor.tree
"""),
        md("""
        ## What each layer holds

        Layer 0 are the leaves (the index's chunks); every higher layer holds one summary
        per cluster of the layer below. A node lists its `children` and, transitively, the
        `leaves` under it; `tree.leaf_spans(i)` gives their exact character ranges.
        """),
        code("""
print(f"{'layer':>5} {'nodes':>6} {'kinds':<28} {'mean chars':>10} {'mean children':>13}")
for row in tree.describe():
    kinds = ", ".join(f"{k} {v}" for k, v in row["kinds"].items())
    print(f"{row['layer']:>5} {row['nodes']:>6} {kinds:<28} {row['mean_chars']:>10} {row['mean_children']:>13}")
"""),
        code("""
from textwrap import shorten

for layer in range(tree.n_layers - 1, -1, -1):
    ids = tree.layer(layer)
    print(f"=== layer {layer}: {len(ids)} nodes")
    for i in ids[:3]:
        node = tree.nodes[i]
        where = ", ".join(f"{a}-{b}" for _, a, b in tree.leaf_spans(i)[:4])
        more = " ..." if len(tree.leaf_spans(i)) > 4 else ""
        print(f"  [{node.kind}] {len(node.children)} children, {len(node.leaves)} leaves at {where}{more}")
        print("   ", shorten(" ".join(node.text.split()), 220))
"""),
        md("""
        An extractive summary is made of exact sentences of the source: each of its
        `spans` is `(source_id, start, end)` with `text[start:end]` equal to the sentence,
        so a summary cites itself.
        """),
        code("""
top = tree.layer(tree.n_layers - 1)[0]
node = tree.nodes[top]
for (sid, a, b), piece in zip(node.spans, node.span_texts):
    assert text[a:b] == piece
    print(f"{sid} {a:>6}-{b:<6} {shorten(piece, 100)}")
"""),
        md("""
        ## Retrieval: collapsed tree and tree traversal

        The **collapsed tree** ranks all nodes of all layers by similarity to the question
        and fills the budget (2000 cl100k tokens by default, the better setting in the
        RAPTOR paper); leaves and extractive sentences go through the package's offset
        merger, so overlapping pieces never pay twice. **Tree traversal** picks the
        `top_k` best nodes of the top layer, then the best of their children, down to the
        leaves. Both are LangChain retrievers (`raptor.as_retriever`) and LlamaIndex
        retrievers (`raptor.as_llama_index_retriever`) over one core.
        """),
        code("""
from swrag_integrations.engine.assemble import count_tokens

print("Q:", question)
for mode in ("collapsed", "traverse"):
    docs = raptor.as_retriever(mode=mode, budget_tokens=600).invoke(question)
    joined = "\\n\\n".join(d.page_content for d in docs)
    print(f"\\n--- {mode}: {len(docs)} pieces, {count_tokens(joined)} tokens")
    for d in docs[:5]:
        m = d.metadata
        if "start_index" in m:
            assert text[m["start_index"]:m["end_index"]] == d.page_content
            print(f"  {m['start_index']:>6}-{m['end_index']:<6} layers {m['raptor_layers']}: "
                  f"{shorten(' '.join(d.page_content.split()), 90)}")
        else:
            print(f"  summary L{m['raptor_layer']} of {len(m['raptor_leaves'])} leaf spans: "
                  f"{shorten(d.page_content, 90)}")
"""),
        md("""
        ## LLM summaries

        `LLMSummarizer(llm)` takes any LangChain LLM or chat model (default: the local
        model from `load_llama3()`), with a configurable prompt (`{context}`), a cache of
        summaries keyed by their inputs (sqlite or the index's source store), and a
        fallback: a cluster whose LLM call fails or answers nothing gets the extractive
        summary, counted in the build report. The bundled 135M stand-in writes generic
        summaries slowly (about a minute per cluster here), so this notebook does not run
        it; with a real model:

        ```python
        from swrag_integrations.llm import load_llama3
        from swrag_integrations.methods.raptor import LLMSummarizer

        llm = load_llama3("/path/to/Meta-Llama-3-8B-Instruct", max_new_tokens=160).as_langchain()
        raptor = RaptorIndex(index, name="raptor-llm", summarizer=LLMSummarizer(llm, cache=index.engine.store))
        raptor.build()
        ```
        From the command line: `swrag index docs/ --raptor` or `swrag raptor build|show|ask`.
        """),
        code("""
index.engine.store.close()
shutil.rmtree(workdir, ignore_errors=True)
"""),
    ]
