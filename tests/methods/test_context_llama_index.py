"""LlamaIndex wrappers: same implementation, nodes in and out."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM
from llama_index.core import Document as LIDocument
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from swrag_integrations.methods.context import (
    ContextualChunkHeaders,
    ContextualHeaderTransform,
    DiversityPostprocessor,
    LLMJudgeReranker,
    LostInTheMiddlePostprocessor,
    RelevantSegmentPostprocessor,
    RerankPostprocessor,
)

CHUNKS = ["Alpha one. ", "Beta two. ", "Gamma three. ", "Delta four. "]
OFFSETS = []
_p = 0
for _c in CHUNKS:
    OFFSETS.append((_p, _p + len(_c)))
    _p += len(_c)


def chunk_node(i, score=None):
    a, b = OFFSETS[i]
    node = TextNode(id_=f"S:s:{i}", text=CHUNKS[i], metadata={"source_id": "S", "chunk_index": i},
                    start_char_idx=a, end_char_idx=b)
    return NodeWithScore(node=node, score=score)


def test_lost_in_the_middle_postprocessor_keeps_node_objects():
    nodes = [NodeWithScore(node=TextNode(id_=str(i), text=f"doc {i}"), score=1.0 / i) for i in range(1, 6)]
    out = LostInTheMiddlePostprocessor().postprocess_nodes(nodes)
    assert [n.node.node_id for n in out] == ["1", "3", "5", "4", "2"]
    assert out[0].node is nodes[0].node and out[0].score == nodes[0].score
    assert LostInTheMiddlePostprocessor().postprocess_nodes([]) == []


def test_rse_postprocessor_returns_segment_nodes_with_offsets():
    def fetch(source_id, lo, hi):
        return [(i, *OFFSETS[i], CHUNKS[i]) for i in range(lo, hi + 1)]

    post = RelevantSegmentPostprocessor(chunks=fetch, budget_tokens=None, score_normalization="rank",
                                        irrelevant_chunk_penalty=0.2, decay_rate=1e9)
    out = post.postprocess_nodes([chunk_node(0, 0.9), chunk_node(2, 0.8)], query_str="q")
    assert len(out) == 1
    node = out[0].node
    assert node.get_content(metadata_mode=MetadataMode.NONE) == "".join(CHUNKS[:3])
    assert (node.start_char_idx, node.end_char_idx) == (0, OFFSETS[2][1])
    assert out[0].score == pytest.approx(1.4)
    with pytest.raises(ValueError, match="chunk_index"):
        post.postprocess_nodes([NodeWithScore(node=TextNode(text="x", metadata={"source_id": "S"}))], query_str="q")


def test_rerank_and_diversity_postprocessors():
    nodes = [NodeWithScore(node=TextNode(id_=str(i), text=f"text {i}")) for i in range(4)]
    judge = RerankPostprocessor(LLMJudgeReranker(llm=FakeListLLM(responses=["no", "no", "yes", "no"])))
    out = judge.postprocess_nodes(nodes, query_str="which?")
    assert out[0].node.node_id == "2" and out[0].score == 1.0
    assert out[0].node is nodes[2].node
    with pytest.raises(ValueError, match="query"):
        judge.postprocess_nodes(nodes)
    div = DiversityPostprocessor(embeddings=DeterministicFakeEmbedding(size=8), top_n=3)
    got = div.postprocess_nodes(nodes, query_str="q")
    assert len(got) == 3 and len({n.node.node_id for n in got}) == 3


def test_contextual_header_transform_embeds_the_header():
    headers = ContextualChunkHeaders(FakeListLLM(responses=["About the greek letters."]), chunk_size=4,
                                     model_name="fake", show_progress=False)
    doc = LIDocument(text="".join(CHUNKS), id_="doc-1", metadata={"source": "greek.txt"})
    nodes = ContextualHeaderTransform(headers)([doc])
    assert len(nodes) > 1
    assert "".join(n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes) == doc.text
    first = nodes[0]
    assert first.metadata["context_header"] == "About the greek letters."
    assert first.get_content(metadata_mode=MetadataMode.EMBED) == (
        "About the greek letters.\n\n" + first.get_content(metadata_mode=MetadataMode.NONE))
    assert first.metadata["source_id"] == "doc-1"
    assert (first.start_char_idx, first.end_char_idx) == (first.metadata["start_index"], first.metadata["end_index"])


def test_postprocessors_take_native_llama_index_nodes_and_embeddings():
    """Nodes straight from the package's node parsers (source = ref_doc_id, overlapping
    windows) and a LlamaIndex embedding model, without any LangChain object given."""
    from llama_index.core import Settings
    from llama_index.core.embeddings import MockEmbedding

    from swrag_integrations.llama_index import FixedWindowNodeParser

    text = " ".join(f"Sentence {i} is about harbour number {i}." for i in range(40))
    nodes = FixedWindowNodeParser(window_size=60, step=30, unit="char").get_nodes_from_documents(
        [LIDocument(text=text, id_="doc-7")])
    hits = [NodeWithScore(node=nodes[i], score=1.0 - i / 100) for i in (3, 4, 5, 9)]
    from llama_index.core.storage.docstore import SimpleDocumentStore

    docstore = SimpleDocumentStore()
    docstore.add_documents(nodes)
    out = RelevantSegmentPostprocessor(chunks=docstore, budget_tokens=None, score_normalization="rank").postprocess_nodes(
        hits, query_str="harbour")
    assert out
    for item in out:  # segments made of overlapping windows are merged by offset, exact text
        node = item.node
        assert node.get_content(metadata_mode=MetadataMode.NONE) == text[node.start_char_idx:node.end_char_idx]
    previous = getattr(Settings, "_embed_model", None)
    try:
        Settings.embed_model = MockEmbedding(embed_dim=8)
        got = DiversityPostprocessor(top_n=2).postprocess_nodes(hits, query_str="harbour")  # Settings.embed_model
        assert len(got) == 2
        got = DiversityPostprocessor(embeddings=MockEmbedding(embed_dim=8), top_n=3).postprocess_nodes(
            hits, query_str="harbour")
        assert len(got) == 3
    finally:
        Settings._embed_model = previous
