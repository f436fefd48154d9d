"""Split, then add: chunks of one source are all kept (issue: split chunks were taken as
versions of one document and collapsed into the last one); chunks with offsets are joined
into their source's text (tests/engine/test_write_offsets.py), each still readable by its id."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations import DynamicStepTextSplitter
from swrag_integrations.cli import sample_path
from swrag_integrations.langchain.index import SlidingWindowIndex


@pytest.fixture()
def index(tmp_path):
    idx = SlidingWindowIndex(tmp_path / "idx", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    yield idx
    idx.engine.store.close()


def sample_chunks() -> tuple[str, list[Document]]:
    text = sample_path().read_text(encoding="utf-8")
    return text, DynamicStepTextSplitter(window_size=128, step=2).create_documents(
        [text], metadatas=[{"source": "sample.md"}])


def test_sample_chunks_are_all_kept_with_their_offsets(index):
    text, chunks = sample_chunks()
    assert len(chunks) == 21
    ids = index.add_documents(chunks)
    assert len(set(ids)) == 21 and len(index.engine.source_ids()) == 1  # one source, joined from its 21 chunks
    assert index.engine.source_text(index.engine.source_ids()[0]) == text
    back = index.get_by_ids(ids)
    assert [d.page_content for d in back] == [c.page_content for c in chunks]
    assert [d.metadata for d in back] == [c.metadata for c in chunks]  # start_index/end_index as given
    covered = set()
    for d in back:
        assert text[d.metadata["start_index"]:d.metadata["end_index"]] == d.page_content
        covered.update(range(d.metadata["start_index"], d.metadata["end_index"]))
    assert covered == set(range(len(text)))  # all 2,085 characters retrievable
    assert index.engine.index_documents(chunks)["unchanged"] == 1  # re-adding is idempotent
    assert index.add_documents(chunks) == ids and len(index.engine.source_ids()) == 1


def test_chunks_without_offsets_in_one_batch_are_parts(index):
    _, chunks = sample_chunks()
    bare = [Document(page_content=c.page_content, metadata={"source": "sample.md"}) for c in chunks]
    ids = index.add_documents(bare)
    assert len(set(ids)) == 21 and len(index.engine.source_ids()) == 21
    assert sorted(index.engine.source_text(s) for s in ids) == sorted(c.page_content for c in bare)
    assert index.add_documents(bare) == ids and len(index.engine.source_ids()) == 21  # idempotent
    one = Document(page_content="A new whole version of the file.", metadata={"source": "sample.md"})
    twice = index.add_documents([one, one])  # identical twice: one record, one id
    assert twice == index.add_documents([one]) * 2 and index.engine.source_text(twice[0]) == one.page_content


def test_one_id_for_two_different_documents_is_refused(index):
    with pytest.raises(ValueError, match="'a'"):
        index.add_documents([Document(page_content="first", id="a"), Document(page_content="second", id="a")])
    assert index.engine.source_ids() == []
    with pytest.raises(ValueError, match="'x'"):
        index.add_documents([Document(page_content="one"), Document(page_content="two")], ids=["x", "x"])


def test_a_later_call_still_replaces_a_version(index):
    first = index.add_documents([Document(page_content="Version one of the notes.", metadata={"source": "n.txt"})])
    second = index.add_documents([Document(page_content="Version two of the notes.", metadata={"source": "n.txt"})])
    assert first == second and index.engine.source_text(first[0]) == "Version two of the notes."


def test_re_adding_with_new_metadata_updates_it(index):
    """Same text, new metadata: the document comes back (and filters) with the new metadata."""
    first = Document(id="n1", page_content="The lighthouse keeper logged fog and ships.", metadata={"topic": "sea"})
    index.add_documents([first])
    moved = Document(id="n1", page_content=first.page_content, metadata={"topic": "town", "tags": ["a", "b"]})
    report = index.engine.index_documents([moved])
    assert report["replaced"] == 1  # the chunks carry "topic": their vectors are written again
    assert index.get_by_ids(["n1"]) == [moved]
    assert index.similarity_search("lighthouse fog", k=1, filter={"topic": "town"}) == [moved]
    assert index.similarity_search("lighthouse fog", k=1, filter={"topic": "sea"}) == []
    retagged = Document(id="n1", page_content=first.page_content, metadata={"topic": "town", "tags": ["c"]})
    report = index.engine.index_documents([retagged])
    assert report["unchanged"] == 1 and report["chunks"] == 0  # only what chunks do not carry: no re-embedding
    assert index.get_by_ids(["n1"]) == [retagged]
