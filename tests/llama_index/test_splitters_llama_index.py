"""The node parsers build their nodes directly (issue 21): the very nodes that LlamaIndex's
``build_nodes_from_splits`` followed by the field assignments of the previous version gave."""

import pytest
from llama_index.core import Document
from llama_index.core.node_parser.node_utils import build_nodes_from_splits
from llama_index.core.schema import MetadataMode, TextNode

from swrag_integrations.llama_index import DynamicStepNodeParser, DynamicWindowNodeParser, FixedWindowNodeParser
from swrag_integrations.core.windows import METADATA_KEYS, chunk_batches

TEXT = ("The cat sat. The cat sat. The cat sat, again!\n\n" * 6) + "猫坐着。猫坐着。猫坐着！" * 5


def ids(index, node):
    return f"{node.node_id}-{index}"


def previous_parse_nodes(parser, nodes):
    """The previous ``_parse_nodes``: build_nodes_from_splits, then assignments."""
    out = []
    for node in nodes:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        base = 0 if isinstance(node, Document) else (node.start_char_idx or 0)
        chunks = [(a, b, t) for batch in chunk_batches(parser._config, text) for a, b, t in zip(*batch)]
        built = build_nodes_from_splits([t for _, _, t in chunks], node, id_func=parser.id_func)
        for index, ((start, end, _), child) in enumerate(zip(chunks, built)):
            child.start_char_idx = base + start
            child.end_char_idx = base + end
            child.metadata.update(
                {"start_index": base + start, "end_index": base + end, "chunk_index": index,
                 "window_size": parser.window_size, "step": parser.step, "strategy": parser.strategy, "unit": parser.unit}
            )
            child.excluded_embed_metadata_keys = list(child.excluded_embed_metadata_keys) + [
                k for k in METADATA_KEYS if k not in child.excluded_embed_metadata_keys]
            child.excluded_llm_metadata_keys = list(child.excluded_llm_metadata_keys) + [
                k for k in METADATA_KEYS if k not in child.excluded_llm_metadata_keys]
        out.extend(built)
    return out


def dump(nodes, fields_set=True):
    return [(type(n).__name__, n.model_dump(), sorted(n.model_fields_set) if fields_set else None) for n in nodes]


@pytest.mark.parametrize("cls,step", [(FixedWindowNodeParser, 12), (DynamicWindowNodeParser, 12), (DynamicStepNodeParser, 2)])
@pytest.mark.parametrize("unit", ["char", "token"])
def test_nodes_equal_the_previous_build(cls, step, unit):
    parser = cls(window_size=24, step=step, unit=unit, id_func=ids)
    document = Document(
        text=TEXT, id_="doc", metadata={"source": "cats.txt"}, excluded_embed_metadata_keys=["source"],
        metadata_separator=" | ", text_template="{metadata_str}::{content}",
    )
    # (metadata is passed at construction now, not filled in afterwards: the same fields
    # once LlamaIndex's post-processing has assigned the merged metadata, checked below)
    assert dump(parser._parse_nodes([document]), False) == dump(previous_parse_nodes(parser, [document]), False)
    # a node re-split (offsets relative to its document), as in an IngestionPipeline
    child = TextNode(text=TEXT[50:200], id_="child", start_char_idx=50, end_char_idx=200, metadata={"k": [1]})
    assert dump(parser._parse_nodes([child]), False) == dump(previous_parse_nodes(parser, [child]), False)
    # the whole call: relationships, merged metadata, exact offsets on repeated text
    nodes = parser.get_nodes_from_documents([document])
    previous = cls(window_size=24, step=step, unit=unit, id_func=ids)
    object.__setattr__(previous, "_parse_nodes", lambda nodes, **kwargs: previous_parse_nodes(previous, nodes))
    assert dump(nodes) == dump(previous.get_nodes_from_documents([document]))
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == [
        (a, b) for batch in chunk_batches(parser._config, TEXT) for a, b in zip(batch.starts, batch.ends)
    ]
    for node in nodes:
        assert TEXT[node.start_char_idx : node.end_char_idx] == node.text
        assert node.metadata["source"] == "cats.txt" and node.metadata_separator == " | "
    assert nodes[1].excluded_embed_metadata_keys is not nodes[0].excluded_embed_metadata_keys
