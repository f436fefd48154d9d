"""The lower rooms work without the faces: the helpers an index builds its stores with live
below the faces, and one test says whether a LangChain store is a Chroma store (issue 40)."""

from __future__ import annotations

import chromadb
import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document

from fake_embeddings import TrigramEmbedder
from project.test_import_graph import PACKAGE, import_graph, is_face
from swrag_integrations.langchain.vectorstore import VectorBackend

LOWER_ROOMS = ("core", "engine", "stores", "keyword", "embeddings", "ingest")


def test_the_lower_rooms_import_no_face_module():
    wrong = sorted(f"{module} -> {target}" for module, targets in import_graph().items()
                   if module.split(".")[1:2] and module.split(".")[1] in LOWER_ROOMS
                   for target in targets if is_face(target))
    assert not wrong, "lower rooms importing a face:\n" + "\n".join(wrong)


def test_old_import_paths_of_the_moved_helpers_still_work():
    from swrag_integrations.embeddings import wrappers
    from swrag_integrations.engine import ids
    from swrag_integrations.langchain import vectorstore
    from swrag_integrations.stores import chroma

    assert vectorstore.IndexTextEmbeddings is wrappers.IndexTextEmbeddings
    assert vectorstore.PrecomputedEmbeddings is wrappers.PrecomputedEmbeddings
    assert vectorstore.precomputed_of is wrappers.precomputed_of
    assert vectorstore.doc_vector_ids is ids.doc_vector_ids
    assert vectorstore.stale_chroma is chroma.stale_chroma


class MyChroma(Chroma):
    """A user's own subclass of langchain_chroma.Chroma (its module is not langchain_chroma)."""


@pytest.mark.parametrize("store_class", [Chroma, MyChroma])
def test_a_chroma_store_is_recognised_the_same_way_for_its_vectors_ids_and_count(store_class):
    client = chromadb.EphemeralClient()
    store = store_class(collection_name=f"c{id(store_class)}", embedding_function=TrigramEmbedder(), client=client)
    backend = VectorBackend(store)
    backend.add([Document(page_content="the harbour exports tea", metadata={"chunk_id": "a:s:0"})],
                ids=["11111111-1111-1111-1111-111111111111"])
    assert backend.held_ids() == ["11111111-1111-1111-1111-111111111111"]
    assert backend.count() == 1
    stored = backend.stored_vectors(["11111111-1111-1111-1111-111111111111"])
    assert list(stored) == ["11111111-1111-1111-1111-111111111111"]
    vector, meta = stored["11111111-1111-1111-1111-111111111111"]
    assert vector == pytest.approx(TrigramEmbedder().embed_query("the harbour exports tea"), abs=1e-6)
    assert meta["chunk_id"] == "a:s:0"
    client.delete_collection(f"c{id(store_class)}")
