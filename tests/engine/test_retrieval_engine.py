"""The framework-free index engine (retrieval/engine.py): usable with LangChain blocked,
on the same data as the LangChain face."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ci_switch import importorskip
from fake_embeddings import TrigramEmbedder
from stores import STORES, store_kwargs

ROOT = Path(__file__).resolve().parents[2]

TEXTS = [" ".join(f"{line} (note {i} of {topic})." for i in range(8) for line in lines) for topic, lines in (
    ("the coast", ["The lighthouse keeper walked along the rocky shore", "He counted the ships in the harbour"]),
    ("baking", ["Bread dough rises when yeast ferments the flour", "Bake the loaf in a hot oven until brown"]),
    ("astronomy", ["Comets are icy bodies that release gas near the sun", "Their long tails point away from it"]),
)]
METAS = [{"topic": "sea", "n": 1}, {"topic": "kitchen", "n": 2}, {"topic": "space", "n": 3}]


class HashEmbedder(TrigramEmbedder):
    """The shared trigram embedding at 64 dimensions (no model, no framework)."""

    def __init__(self) -> None:
        super().__init__(dim=64)


# The script run with every LangChain package blocked: importing one raises ImportError.
NO_LANGCHAIN = textwrap.dedent('''
    import sys
    for name in ("langchain", "langchain_core", "langchain_chroma", "langchain_community", "langchain_text_splitters"):
        sys.modules[name] = None  # "import name" raises ImportError
    import numpy as np
    from swrag_integrations.engine.engine import IndexEngine
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
    from swrag_integrations.embeddings.base import EmbeddingsBase

    assert issubclass(MiniLMEmbeddings, EmbeddingsBase)

    class Emb:
        def _vec(self, text):
            v = np.zeros(64)
            t = text.lower()
            for i in range(len(t) - 2):
                v[sum(map(ord, t[i:i + 3])) % 64] += 1.0
            return list(v / (np.linalg.norm(v) or 1.0))
        def embed_documents(self, texts):
            return [self._vec(t) for t in texts]
        def embed_query(self, text):
            return self._vec(text)

    texts, metas, where, store = TEXTS, METAS, sys.argv[1], STORE
    engine = IndexEngine.open(where, embedding=Emb(), show_progress=False, **store)
    ids = engine.index_texts(texts, metas)
    assert len(ids) == 3 and engine.count("small") > 3, engine.count("small")
    hits = engine.search_children("yeast ferments the flour", k=4)
    assert hits and hits[0].metadata["topic"] == "kitchen", [h.metadata["topic"] for h in hits]
    span = engine.span_text(hits[0].source_id, hits[0].window_start, hits[0].window_end)
    assert "yeast" in span and span in texts[1], span
    only_sea = engine.search_children("yeast ferments the flour", k=4, filter={"topic": "sea"})
    assert only_sea and {h.metadata["topic"] for h in only_sea} == {"sea"}
    dense = engine.search_children("Comets are icy bodies that release gas near the sun", k=3,
                                   weights=(0.0, 1.0), search_type="similarity")
    assert dense[0].metadata["topic"] == "space", [h.metadata["topic"] for h in dense]
    assert engine.status().healthy, engine.status().lines()
    engine.delete_sources([ids[0]])
    assert engine.source_ids() == sorted(ids[1:])
    engine.close()
    again = IndexEngine.open(where, embedding=Emb(), show_progress=False, **store)
    assert again.source_ids() == sorted(ids[1:]) and again.source_text(ids[1]) == texts[1]
    assert again.search_children("icy comets", k=2)[0].metadata["topic"] == "space"
    leaked = sorted(m for m in sys.modules if m.startswith(("langchain", "llama_index")) and sys.modules[m])
    assert not leaked, leaked
    print("ENGINE-OK")
''')


@pytest.mark.parametrize("store", STORES)
def test_engine_indexes_searches_and_reads_spans_without_langchain(tmp_path: Path, store: str) -> None:
    """With every langchain package unimportable the engine opens an embedded Chroma
    index through chromadb (or Milvus Lite through pymilvus), indexes texts, searches
    (hybrid, dense, filtered), reads window text, reports health, deletes and reopens."""
    script = NO_LANGCHAIN.replace("TEXTS, METAS,", f"{TEXTS!r}, {METAS!r},").replace(
        "STORE", repr(store_kwargs(store)))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "idx")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "ENGINE-OK" in done.stdout, done.stderr[-4000:]


def test_engine_and_langchain_face_share_one_index(tmp_path: Path) -> None:
    """What the engine writes, SlidingWindowIndex reads with the same dense ranking, and the
    other way round: both open the collection through the one adapter, `ChromaStorage`."""
    from swrag_integrations.engine.engine import IndexEngine
    from swrag_integrations.langchain.index import SlidingWindowIndex

    emb = HashEmbedder()
    engine = IndexEngine.open(tmp_path / "a", embedding=emb, show_progress=False)
    ids = engine.index_texts(TEXTS, METAS)
    face = SlidingWindowIndex(tmp_path / "a", embedding=emb, show_progress=False)
    assert type(face.engine.vectors) is type(engine.vectors) and type(engine.vectors).__name__ == "ChromaStorage"
    assert face.engine.source_ids() == sorted(ids) and face.engine.index_id == engine.index_id
    for query in ("yeast and flour", "the harbour at night", "tails of comets"):
        for search_type in ("similarity", "mmr"):
            assert face.engine.dense_ids(query, 5, search_type=search_type) == engine.dense_ids(
                query, 5, search_type=search_type), (query, search_type)
    assert face.engine.status().healthy
    face.add_texts(["A fourth text about volcanoes erupting lava and ash into the sky."], [{"topic": "earth"}])
    engine.sync_vectors()
    assert engine.search_children("volcanoes lava", k=1, filter={"topic": "earth"})[0].metadata["topic"] == "earth"
    assert len(engine.source_ids()) == 4 and engine.status().healthy


def test_writers_take_an_engine_not_a_face(tmp_path: Path) -> None:
    """write_planned, remove_sources, repair and index_status accept the engine itself."""
    from swrag_integrations.engine.engine import IndexEngine
    from swrag_integrations.engine.health import index_status
    from swrag_integrations.engine.records import plan_source
    from swrag_integrations.stores.storage import PlainDocument
    from swrag_integrations.ingest.writer import remove_sources, repair, write_planned

    engine = IndexEngine.open(tmp_path / "e", embedding=HashEmbedder(), show_progress=False)
    docs = [PlainDocument(t, dict(m, source=f"doc{i}")) for i, (t, m) in enumerate(zip(TEXTS, METAS))]
    report = write_planned(engine, [(plan_source(d, engine.config), None) for d in docs])
    assert report.added == 3 and index_status(engine).healthy
    sid = engine.source_ids()[0]
    assert remove_sources(engine, [sid]) == 1 and sid not in engine.source_ids()
    assert repair(engine).removed == 0 and engine.count("small") == engine.count(None)


def test_engine_open_rejects_unknown_chunking_keyword(tmp_path: Path) -> None:
    from swrag_integrations.engine.engine import IndexEngine

    with pytest.raises(TypeError, match="chunk_sise"):
        IndexEngine.open(tmp_path / "x", embedding=HashEmbedder(), chunk_sise=10)


def test_mmr_picks_what_langchain_chroma_picks() -> None:
    """The engine's MMR (chroma.mmr_select) chooses the same chunks as langchain_chroma's,
    near-ties included (duplicated and nearly duplicated candidates)."""
    lc = importorskip("langchain_chroma.vectorstores")
    from swrag_integrations.stores.chroma import mmr_select

    rng = np.random.default_rng(7)
    for trial in range(200):
        base = rng.normal(size=(12, 16))
        cand = np.vstack([base, base[:5] + rng.normal(scale=1e-7, size=(5, 16)), base[:3]])
        query = list(rng.normal(size=16))
        k, lam = int(rng.integers(1, 10)), float(rng.choice([0.0, 0.25, 0.5, 1.0]))
        assert mmr_select(query, cand, k, lam) == lc.maximal_marginal_relevance(
            np.array(query, dtype=np.float32), cand, k=k, lambda_mult=lam), trial


def test_an_index_reopens_with_the_backend_it_was_built_with(tmp_path: Path) -> None:
    """The default embedding changed (sentence-transformers -> onnx-int8): an index built with
    the old default and reopened without an embedding keeps its backend, so its vectors are
    never mixed with another backend's (no warning, the recorded name unchanged)."""
    import warnings

    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings, recorded_backend
    from swrag_integrations.engine.engine import IndexEngine, embedding_name

    reference = MiniLMEmbeddings(backend="sentence-transformers")
    engine = IndexEngine.open(tmp_path / "idx", embedding=reference)
    engine.index_texts(TEXTS[:1], [METAS[0]])
    built_with = engine.manifest["embedding"]["name"]
    engine.close()
    assert recorded_backend(built_with) == "sentence-transformers"

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "built with ... searching it with ..." would raise here
        again = IndexEngine.open(tmp_path / "idx")
        try:
            assert embedding_name(again.vectors.embedding) == built_with
            assert again.bm25_search("lighthouse", k=1) and again.dense_ids("lighthouse keeper", k=1)
        finally:
            again.close()
    fresh = IndexEngine.open(tmp_path / "new")  # a new index takes the default backend
    try:
        assert recorded_backend(embedding_name(fresh.vectors.embedding)) == "onnx-int8"
    finally:
        fresh.close()
    assert recorded_backend("HashEmbedder") is None and recorded_backend(None) is None
