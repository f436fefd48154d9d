"""The context steps' framework-free cores and their LangChain / LlamaIndex faces give the
same results (texts, offsets, scores) on the same input; the LlamaIndex faces never build
LangChain documents; the old module paths of the LangChain classes still resolve."""

from __future__ import annotations

import importlib
import warnings

import pytest
from fake_embeddings import TrigramEmbedder
from langchain_core.documents import Document
from llama_index.core import Document as LIDocument
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from swrag_integrations.engine.assemble import ContextSpan
from swrag_integrations.methods import context
from swrag_integrations.methods.context import headers as headers_core
from swrag_integrations.methods.context import ordering as ordering_core
from swrag_integrations.methods.context import rerank as rerank_core
from swrag_integrations.methods.context import rse as rse_core
from swrag_integrations.methods.context import langchain as lc_face
from swrag_integrations.methods.context import llama_index as li_face
from swrag_integrations.stores.storage import PlainDocument

CHUNKS = ["The harbour opens at dawn. ", "Fishing boats leave early. ", "The market sells fish. ",
          "Prices rise in winter. ", "The lighthouse guides ships. ", "Storms close the harbour. "]
SOURCE = "".join(CHUNKS)
OFFSETS = []
_p = 0
for _c in CHUNKS:
    OFFSETS.append((_p, _p + len(_c)))
    _p += len(_c)
HITS = [(0, 0.9), (2, 0.8), (5, 0.5), (3, 0.4)]  # (chunk index, score), best first
QUERY = "when does the harbour open for fishing boats"


def chunk_meta(i, score):
    a, b = OFFSETS[i]
    return {"source_id": "S", "chunk_index": i, "start_index": a, "end_index": b, "score": score}


def plain_hits():
    return [PlainDocument(page_content=CHUNKS[i], metadata=chunk_meta(i, s), id=f"S:{i}") for i, s in HITS]


def lc_hits():
    return [Document(page_content=CHUNKS[i], metadata=chunk_meta(i, s), id=f"S:{i}") for i, s in HITS]


def li_hits():
    return [NodeWithScore(node=TextNode(id_=f"S:{i}", text=CHUNKS[i], metadata={"source_id": "S", "chunk_index": i},
                                        start_char_idx=OFFSETS[i][0], end_char_idx=OFFSETS[i][1]), score=s)
            for i, s in HITS]


def span_hits():
    return [ContextSpan("S", *OFFSETS[i], CHUNKS[i], score=s, metadata={"chunk_index": i}) for i, s in HITS]


def fetch(source_id, lo, hi):
    return [(i, *OFFSETS[i], CHUNKS[i]) for i in range(lo, hi + 1)]


def doc_view(docs, *keys):
    return [(d.page_content, d.metadata.get("start_index"), d.metadata.get("end_index"),
             *(pytest.approx(d.metadata.get(k)) for k in keys)) for d in docs]


def node_view(nodes, *keys):
    out = []
    for n in nodes:
        meta = n.node.metadata
        out.append((n.node.get_content(metadata_mode=MetadataMode.NONE), n.node.start_char_idx, n.node.end_char_idx,
                    *(pytest.approx(meta.get(k, n.score)) for k in keys)))
    return out


@pytest.fixture
def no_langchain_documents(monkeypatch):
    """The LlamaIndex faces must not convert nodes to LangChain documents."""
    def refuse(*args, **kwargs):
        raise AssertionError("a LlamaIndex face converted nodes to LangChain documents")

    monkeypatch.setattr(li_face, "node_to_document", refuse)


def test_rse_core_and_faces_give_the_same_segments(no_langchain_documents):
    kwargs = dict(chunks=fetch, budget_tokens=None, irrelevant_chunk_penalty=0.4, decay_rate=1e9)
    core = rse_core.SegmentExtractor(**kwargs).apply(plain_hits())
    assert [d.page_content for d in core] == [SOURCE[OFFSETS[0][0]:OFFSETS[3][1]]]  # 0..3: chunk 1 bridged
    lc = lc_face.RelevantSegmentExtractor(**kwargs).compress_documents(lc_hits(), QUERY)
    li = li_face.RelevantSegmentPostprocessor(**kwargs).postprocess_nodes(li_hits(), query_str=QUERY)
    expected = doc_view(core, "segment_value")
    assert all(isinstance(d, Document) for d in lc) and doc_view(lc, "segment_value") == expected
    assert node_view(li, "segment_value") == expected
    spans = rse_core.SegmentExtractor(**kwargs).extract(span_hits())  # the engine's spans work as input
    assert [(s.text, s.start, s.end) for s in spans] == [(d.page_content, d.metadata["start_index"],
                                                         d.metadata["end_index"]) for d in core]


def test_diversity_core_and_faces_give_the_same_order(no_langchain_documents):
    core = ordering_core.DiversityOrder(embeddings=TrigramEmbedder(), top_n=3).apply(plain_hits(), QUERY)
    lc = lc_face.DiversityReranker(embeddings=TrigramEmbedder(), top_n=3).compress_documents(lc_hits(), QUERY)
    li = li_face.DiversityPostprocessor(embeddings=TrigramEmbedder(), top_n=3).postprocess_nodes(
        li_hits(), query_str=QUERY)
    expected = doc_view(core, "relevance_score")
    assert len(expected) == 3
    assert doc_view(lc, "relevance_score") == expected and node_view(li, "relevance_score") == expected


def test_lost_in_the_middle_core_and_faces_give_the_same_order(no_langchain_documents):
    core = ordering_core.LostInTheMiddle(sort_by_score=True).apply(plain_hits()[::-1])
    assert [d.page_content for d in core] == [CHUNKS[0], CHUNKS[5], CHUNKS[3], CHUNKS[2]]
    lc = lc_face.LostInTheMiddleReorder(sort_by_score=True).transform_documents(lc_hits()[::-1])
    li = li_face.LostInTheMiddlePostprocessor(sort_by_score=True).postprocess_nodes(li_hits()[::-1])
    assert doc_view(lc) == doc_view(core) == node_view(li)
    assert [d.page_content for d in ordering_core.LostInTheMiddle().reorder(span_hits())] == [
        CHUNKS[0], CHUNKS[5], CHUNKS[3], CHUNKS[2]]


def test_embedding_rerank_core_and_faces_give_the_same_ranking(no_langchain_documents):
    core = rerank_core.EmbeddingRescorer(embeddings=TrigramEmbedder()).rerank(QUERY, plain_hits())
    lc = lc_face.EmbeddingReranker(embeddings=TrigramEmbedder()).compress_documents(lc_hits(), QUERY)
    li_of_face = li_face.RerankPostprocessor(lc_face.EmbeddingReranker(embeddings=TrigramEmbedder()))
    li_of_core = li_face.RerankPostprocessor(rerank_core.EmbeddingRescorer(embeddings=TrigramEmbedder()))
    expected = doc_view(core, "relevance_score")
    assert [d.page_content for d in core] != [CHUNKS[i] for i, _ in HITS]  # the ranking changed something
    assert doc_view(lc, "relevance_score") == expected
    assert node_view(li_of_face.postprocess_nodes(li_hits(), query_str=QUERY), "relevance_score") == expected
    assert node_view(li_of_core.postprocess_nodes(li_hits(), query_str=QUERY), "relevance_score") == expected


class EchoLLM:
    """A plain object with ``invoke`` (no framework): the header names the passage's first word."""

    def invoke(self, prompt):
        passage = prompt.split("<passage>\n", 1)[1]
        return f"About {passage.split()[0]}."


def test_headers_core_and_faces_give_the_same_chunks(no_langchain_documents):
    kwargs = dict(chunk_size=6, model_name="echo", show_progress=False)
    core = headers_core.ChunkHeaderWriter(EchoLLM(), **kwargs).transform_documents(
        [PlainDocument(page_content=SOURCE, metadata={"source_id": "S"})])
    lc = lc_face.ContextualChunkHeaders(EchoLLM(), **kwargs).transform_documents(
        [Document(page_content=SOURCE, metadata={"source_id": "S"})])
    li = li_face.ContextualHeaderTransform(headers_core.ChunkHeaderWriter(EchoLLM(), **kwargs))(
        [LIDocument(text=SOURCE, id_="S")])
    expected = [(d.page_content, d.metadata["start_index"], d.metadata["end_index"], d.metadata["context_header"])
                for d in core]
    assert len(expected) > 2 and "".join(e[0] for e in expected) == SOURCE
    assert all(isinstance(d, PlainDocument) for d in core) and all(isinstance(d, Document) for d in lc)
    assert [(d.page_content, d.metadata["start_index"], d.metadata["end_index"], d.metadata["context_header"])
            for d in lc] == expected
    assert [(n.get_content(metadata_mode=MetadataMode.NONE), n.start_char_idx, n.end_char_idx,
             n.metadata["context_header"]) for n in li] == expected


@pytest.mark.parametrize("module,name", [
    ("rse", "RelevantSegmentExtractor"), ("ordering", "DiversityReranker"), ("ordering", "LostInTheMiddleReorder"),
    ("rerank", "BaseReranker"), ("rerank", "EmbeddingReranker"), ("rerank", "LLMJudgeReranker"),
    ("rerank", "CompressorReranker"), ("headers", "ContextualChunkHeaders"), ("headers", "ContextualEmbeddings"),
])
def test_old_module_paths_of_the_langchain_classes_warn_and_resolve(module, name):
    old = importlib.import_module(f"swrag_integrations.methods.context.{module}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(old, name)
    assert value is getattr(lc_face, name) is getattr(context, name)
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == [
        f"swrag_integrations.methods.context.{module}.{name} moved to "
        f"swrag_integrations.methods.context.langchain.{name}; the old path will be removed in 0.4"]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        old.Nope


def test_core_results_are_plain_documents_and_bad_items_name_the_problem():
    out = ordering_core.LostInTheMiddle().apply(span_hits())
    assert all(type(d) is PlainDocument for d in out)
    assert out[0].metadata["source_id"] == "S" and out[0].metadata["start_index"] == OFFSETS[0][0]
    with pytest.raises(TypeError, match="item 0: expected a document"):
        ordering_core.LostInTheMiddle().apply(["just text"])
