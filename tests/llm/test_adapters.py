"""LangChain splitters and LlamaIndex node parsers: thin, exact wrappers of the core."""

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_text_splitters import TextSplitter as LCTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import NodeRelationship

import swrag_integrations
from swrag_integrations import DynamicStepTextSplitter, DynamicWindowTextSplitter, FixedWindowTextSplitter, iter_windows
from swrag_integrations.langchain.splitters import DDSTextSplitter, DFSTextSplitter, FFSTextSplitter
from swrag_integrations.llama_index import DynamicStepNodeParser, DynamicWindowNodeParser, FixedWindowNodeParser

# Repeated text: offsets guessed with str.find are wrong here.
TEXT = ("The cat sat. The cat sat. The cat sat, again!\n\n" * 6) + "猫坐着。猫坐着。猫坐着！" * 5

LC = [
    (FixedWindowTextSplitter, "FFS", 12),
    (DynamicWindowTextSplitter, "DFS", 12),
    (DynamicStepTextSplitter, "DDS", 2),
]
LI = [(FixedWindowNodeParser, "FFS", 12), (DynamicWindowNodeParser, "DFS", 12), (DynamicStepNodeParser, "DDS", 2)]


def test_exports_and_aliases():
    assert FFSTextSplitter is FixedWindowTextSplitter
    assert DFSTextSplitter is DynamicWindowTextSplitter
    assert DDSTextSplitter is DynamicStepTextSplitter
    from swrag_integrations.langchain import splitters as lc_module

    for name in ("FixedWindowTextSplitter", "DynamicWindowTextSplitter", "DynamicStepTextSplitter"):
        assert getattr(lc_module, name) is getattr(swrag_integrations, name)
    assert issubclass(FixedWindowTextSplitter, LCTextSplitter)
    assert issubclass(FixedWindowNodeParser, NodeParser)


@pytest.mark.parametrize("cls,strategy,step", LC)
@pytest.mark.parametrize("unit", ["char", "token"])
def test_langchain_documents_have_exact_metadata(cls, strategy, step, unit):
    splitter = cls(window_size=24, step=step, unit=unit)
    source = LCDocument(page_content=TEXT, metadata={"source": "cats.txt", "page": 3})
    docs = splitter.split_documents([source])
    spans = list(iter_windows(TEXT, strategy, 24, step, unit=unit))
    assert [(d.metadata["start_index"], d.metadata["end_index"]) for d in docs] == spans
    for i, doc in enumerate(docs):
        meta = doc.metadata
        assert TEXT[meta["start_index"] : meta["end_index"]] == doc.page_content
        assert meta["chunk_index"] == i
        assert (meta["window_size"], meta["step"], meta["strategy"], meta["unit"]) == (24, step, strategy, unit)
        assert meta["source"] == "cats.txt" and meta["page"] == 3
    assert splitter.split_text(TEXT) == [d.page_content for d in docs]
    assert list(splitter.lazy_split_documents([source])) == docs
    assert splitter.transform_documents([source]) == docs


def test_langchain_create_documents_and_strip_whitespace():
    splitter = DynamicStepTextSplitter(window_size=10, step=1, unit="char", strip_whitespace=True)
    docs = splitter.create_documents(["  Hello there. General Kenobi.  ", "x"], metadatas=[{"n": 1}, {"n": 2}])
    for doc in docs:
        text = "  Hello there. General Kenobi.  " if doc.metadata["n"] == 1 else "x"
        assert text[doc.metadata["start_index"] : doc.metadata["end_index"]] == doc.page_content
        assert doc.page_content == doc.page_content.strip()
    with pytest.raises(ValueError, match="metadatas has 1 items for 2 texts"):
        splitter.create_documents(["a", "b"], metadatas=[{}])


def test_langchain_rejects_derived_keywords_and_bad_values():
    # chunk_size is window_size under LangChain's name (issue 13): one of them, not both
    with pytest.raises(TypeError, match="pass window_size or chunk_size"):
        FixedWindowTextSplitter(window_size=10, step=5, chunk_size=3)
    with pytest.raises(TypeError, match="only len .characters. and"):
        FixedWindowTextSplitter(window_size=10, step=5, length_function=lambda text: len(text.split()))
    with pytest.raises(ValueError, match="window_size must be > 0"):
        FixedWindowTextSplitter(window_size=0)
    with pytest.raises(ValueError, match=r"step \(20\) > window_size \(10\)"):
        DynamicWindowTextSplitter(window_size=10, step=20)


def test_langchain_token_chinese_has_no_replacement_characters():
    zh = "红楼梦第一回甄士隐梦幻识通灵贾雨村风尘怀闺秀" * 30
    for cls, _, step in LC:
        pieces = cls(window_size=7, step=min(step, 7), unit="token").split_text(zh)
        assert pieces and not any("\ufffd" in p for p in pieces)
        assert "".join(p for p in pieces[:1]) and zh.startswith(pieces[0])


@pytest.mark.parametrize("cls,strategy,step", LI)
@pytest.mark.parametrize("unit", ["char", "token"])
def test_llama_index_nodes_exact_offsets_and_relationships(cls, strategy, step, unit):
    doc = LIDocument(text=TEXT, metadata={"source": "cats.txt"})
    parser = cls(window_size=24, step=step, unit=unit)
    nodes = parser.get_nodes_from_documents([doc])
    spans = list(iter_windows(TEXT, strategy, 24, step, unit=unit))
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == spans
    for i, node in enumerate(nodes):
        assert TEXT[node.start_char_idx : node.end_char_idx] == node.text
        assert node.metadata["chunk_index"] == i and node.metadata["strategy"] == strategy
        assert node.metadata["source"] == "cats.txt"
        assert node.relationships[NodeRelationship.SOURCE].node_id == doc.id_
        assert (NodeRelationship.PREVIOUS in node.relationships) == (i > 0)
        assert (NodeRelationship.NEXT in node.relationships) == (i < len(nodes) - 1)
        # window metadata does not leak into the embedded text
        assert "start_index" in node.excluded_embed_metadata_keys
    assert doc.excluded_embed_metadata_keys == []  # the document's own list is untouched


def test_llama_index_ingestion_pipeline_and_resplitting_keeps_document_offsets():
    doc = LIDocument(text=TEXT)
    pipeline = IngestionPipeline(
        transformations=[
            FixedWindowNodeParser(window_size=200, step=100, unit="char"),
            DynamicStepNodeParser(window_size=30, step=1, unit="char"),
        ]
    )
    nodes = pipeline.run(documents=[doc])
    assert nodes
    for node in nodes:
        assert TEXT[node.start_char_idx : node.end_char_idx] == node.text


def test_llama_index_defaults_and_bad_values():
    assert DynamicStepNodeParser().step == 3
    assert DynamicStepNodeParser.from_defaults(window_size=64).window_size == 64
    assert FixedWindowNodeParser.class_name() == "FixedWindowNodeParser"
    with pytest.raises(ValueError, match="window_size must be > 0"):
        FixedWindowNodeParser(window_size=0)
    with pytest.raises(ValueError, match="unit must be 'token' or 'char'"):
        DynamicStepNodeParser(unit="words")
