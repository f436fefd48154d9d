"""Store backends' connection and repair, round 4 (issue 42): a repair that finds the
vector collection empty, Milvus Lite reachable by nobody else, TLS and tokens for
servers, and clear errors when a store cannot be opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fake_embeddings import TrigramEmbedder
from stores import STORES, store_kwargs
from swrag_integrations.retrieval.engine import IndexEngine

ROOT = Path(__file__).resolve().parents[1]

EN = ["The lighthouse keeper climbed the cliff at dawn to trim the lamp before the fog rolled in.",
      "Zebras crossed the quarry road while the surveyors waited with their instruments.",
      "A walrus rested on the ice floe, its tusks catching the low winter sun."]


def open_engine(path, store, **kw):
    return IndexEngine.open(path, embedding=TrigramEmbedder(), show_progress=False, **store_kwargs(store), **kw)


def _empty_the_collection(engine) -> None:
    """What a repair killed between dropping the collection and writing it again leaves:
    no vectors, every source complete."""
    vectors = engine.vectors
    if vectors.kind == "Milvus":
        vectors.client.drop_collection(vectors.collection_name)
    else:
        ids = vectors.collection.get(include=[])["ids"]
        vectors.collection.delete(ids=ids)


# ------------------------------------------------------------------ repair of an emptied collection


@pytest.mark.parametrize("store", STORES)
def test_repair_writes_the_vectors_again_when_the_collection_is_empty(tmp_path, store):
    engine = open_engine(tmp_path / "i", store)
    engine.index_texts(EN)
    chunks = engine.vectors.count()
    assert chunks
    _empty_the_collection(engine)
    engine.close()

    engine = open_engine(tmp_path / "i", store)
    assert engine.vectors.count() == 0
    assert not engine.status().healthy
    engine.repair()
    assert engine.vectors.count() == chunks
    assert engine.status().healthy
    hits = engine.dense_ids("lighthouse keeper on the cliff", 1, search_type="similarity")
    assert hits and engine.source_text(hits[0].split(":")[0]) == EN[0]
    engine.close()

