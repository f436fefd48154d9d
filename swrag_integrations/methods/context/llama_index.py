"""LlamaIndex faces of the context steps: thin node postprocessors over the framework-free cores.

`CompressorNodePostprocessor` runs a context step on ``NodeWithScore`` lists: nodes
become framework-free documents (`node_to_item`),
the step's core runs on them (a core's ``apply``; a LangChain face of this package gives its
``core()``), its results become nodes again. Only a foreign LangChain
``BaseDocumentCompressor`` (e.g. ``CrossEncoderReranker``) is run through LangChain
``Document`` s. Nodes whose text is returned unchanged come back as the *same* node objects
(reordered, score updated from ``relevance_score``/``segment_value`` when the step wrote
one); new texts (RSE segments) become new ``TextNode`` s with their metadata and character
offsets.

Named shortcuts build the core from keyword arguments:
`DiversityPostprocessor` (`DiversityOrder`),
`LostInTheMiddlePostprocessor` (`LostInTheMiddle`),
`RelevantSegmentPostprocessor` (`SegmentExtractor`),
`RerankPostprocessor` (any `Rescorer` or LangChain reranker).
`ContextualHeaderTransform` is the indexing side: a LlamaIndex ``TransformComponent``
turning documents into header-annotated chunk nodes whose ``context_header`` metadata is
part of the embedded text.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TransformComponent

from swrag_integrations.llama_index.convert import document_to_node, node_to_document, node_to_item
from swrag_integrations.methods.context.headers import ChunkHeaderWriter
from swrag_integrations.methods.context.ordering import DiversityOrder, LostInTheMiddle
from swrag_integrations.methods.context.rse import SegmentExtractor
from swrag_integrations.stores.storage import PlainDocument

__all__ = [
    "CompressorNodePostprocessor",
    "DiversityPostprocessor",
    "LostInTheMiddlePostprocessor",
    "RelevantSegmentPostprocessor",
    "RerankPostprocessor",
    "ContextualHeaderTransform",
    "node_to_document",
    "document_to_node",
]

_SCORE_KEYS = ("relevance_score", "segment_value")


def _score(doc: Any) -> float | None:
    for key in _SCORE_KEYS:
        value = (doc.metadata or {}).get(key)
        if value is not None:
            return float(value)
    return None


def run_step(step: Any, items: list[Any], query: str) -> list[Any]:
    """Run a context step on framework-free documents: a core (``apply``), a LangChain face
    of this package (its ``core()``), or a foreign LangChain compressor (``compress_documents``,
    the only case that goes through LangChain ``Document`` s)."""
    if hasattr(step, "core"):
        step = step.core()
    if hasattr(step, "apply"):
        return list(step.apply(items, query))
    if hasattr(step, "compress_documents"):
        from swrag_integrations.methods.context.langchain import to_documents

        return list(step.compress_documents(to_documents(items), query))
    raise TypeError(f"expected a context step (apply(documents, query)) or a LangChain document compressor, "
                    f"got {type(step).__name__}")


class CompressorNodePostprocessor(BaseNodePostprocessor):
    """Any context step as a LlamaIndex node postprocessor.

    Args:
        compressor: the step: a framework-free core (reranker, reorder, RSE...), one of
            this package's LangChain compressors, or any LangChain document compressor.
        require_query: raise ``ValueError`` when no query is given (rerankers need one).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    compressor: Any = Field(exclude=True)
    require_query: bool = False

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this postprocessor under: ``"CompressorNodePostprocessor"``."""
        return "CompressorNodePostprocessor"

    def _postprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        if not nodes:
            return []
        query = query_bundle.query_str if query_bundle is not None else ""
        if self.require_query and not (query or "").strip():
            raise ValueError(f"{type(self).__name__} needs a query (query_str or query_bundle)")
        by_id = {n.node.node_id: n for n in nodes}
        out = run_step(self.compressor, [node_to_item(n) for n in nodes], query)
        result: list[NodeWithScore] = []
        for doc in out:
            original = by_id.get(getattr(doc, "id", None) or "")
            score = _score(doc)
            if original is not None and original.node.get_content(metadata_mode=MetadataMode.NONE) == doc.page_content:
                result.append(NodeWithScore(node=original.node, score=score if score is not None else original.score))
            else:
                result.append(NodeWithScore(node=document_to_node(doc), score=score))
        return result


class DiversityPostprocessor(CompressorNodePostprocessor):
    """`DiversityOrder` for LlamaIndex (keywords go to it); it needs a query.

    Args:
        **kwargs: the keyword arguments of `DiversityOrder` (``embeddings``, ``strategy``,
            ``lambda_mult``, ``top_n``). ``embeddings`` may be a LlamaIndex embedding model;
            left out, ``Settings.embed_model`` is used when one is set.

    Raises:
        ValueError: If no ``embeddings`` is given and ``Settings.embed_model`` is not set
            (pass ``embeddings=``), or `DiversityOrder` refuses a keyword's value.
    """

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("embeddings") is None:
            from swrag_integrations.llama_index.settings import llama_index_default_embeddings

            kwargs["embeddings"] = llama_index_default_embeddings()
            if kwargs["embeddings"] is None:
                raise ValueError("DiversityPostprocessor needs embeddings= (LangChain or LlamaIndex) "
                                 "or llama_index.core.Settings.embed_model")
        super().__init__(compressor=DiversityOrder(**kwargs), require_query=True)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this postprocessor under: ``"DiversityPostprocessor"``."""
        return "DiversityPostprocessor"


class LostInTheMiddlePostprocessor(CompressorNodePostprocessor):
    """`LostInTheMiddle` for LlamaIndex (no query needed).

    Args:
        **kwargs: the keyword arguments of `LostInTheMiddle` (``budget``, ``budget_unit``,
            ``top_n``, ``sort_by_score``).

    Raises:
        ValueError: If `LostInTheMiddle` refuses a keyword's value (e.g. ``budget <= 0``).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(compressor=LostInTheMiddle(**kwargs))

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this postprocessor under: ``"LostInTheMiddlePostprocessor"``."""
        return "LostInTheMiddlePostprocessor"


class RelevantSegmentPostprocessor(CompressorNodePostprocessor):
    """`SegmentExtractor` for LlamaIndex (chunk nodes in, segments out).

    Nodes from the package's node parsers work as they are (their source is their
    ``ref_doc_id``, their position ``chunk_index``; overlapping windows are merged by
    offset).

    Args:
        **kwargs: the keyword arguments of `SegmentExtractor` (``preset``, ``chunks``,
            ``budget_tokens``...). ``chunks`` may also be a LlamaIndex index or docstore
            holding the nodes: segments can then span nodes that were not retrieved.

    Raises:
        ValueError: If `SegmentExtractor` refuses a keyword's value (e.g. an unknown preset).
        TypeError: If ``chunks`` is neither a LlamaIndex index/docstore, an index with
            ``chunk_rows`` nor a callable ``(source_id, lo, hi)``.
    """

    def __init__(self, **kwargs: Any) -> None:
        chunks = kwargs.get("chunks")
        docstore = getattr(chunks, "docstore", chunks)
        if chunks is not None and hasattr(docstore, "get_ref_doc_info"):
            kwargs["chunks"] = _docstore_rows(docstore)
        super().__init__(compressor=SegmentExtractor(**kwargs))

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this postprocessor under: ``"RelevantSegmentPostprocessor"``."""
        return "RelevantSegmentPostprocessor"


def _docstore_rows(docstore: Any) -> Any:
    """``(source_id, lo, hi) -> [(chunk_index, start, end, text)]`` from a LlamaIndex docstore."""

    def rows(source_id: str, lo: int, hi: int) -> list[tuple[int, int, int, str]]:
        info = docstore.get_ref_doc_info(source_id)
        if info is None:
            return []
        out = []
        for node in docstore.get_nodes(list(info.node_ids), raise_error=False):
            index = (node.metadata or {}).get("chunk_index") if node is not None else None
            if index is not None and lo <= int(index) <= hi and node.start_char_idx is not None:
                out.append((int(index), node.start_char_idx, node.end_char_idx,
                            node.get_content(metadata_mode=MetadataMode.NONE)))
        return sorted(out)

    return rows


class RerankPostprocessor(CompressorNodePostprocessor):
    """Any reranker for LlamaIndex: a core `Rescorer`, a LangChain
    ``BaseReranker`` of this package (its core runs) or any LangChain compressor.

    Postprocessing without a query raises ``ValueError`` (rerankers need one).

    Args:
        reranker: the reranker; it is run as `CompressorNodePostprocessor`'s ``compressor``.
        **kwargs: further pydantic fields of the postprocessor (e.g. ``callback_manager``).
    """

    def __init__(self, reranker: Any, **kwargs: Any) -> None:
        super().__init__(compressor=reranker, require_query=True, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this postprocessor under: ``"RerankPostprocessor"``."""
        return "RerankPostprocessor"


class ContextualHeaderTransform(TransformComponent):
    """LlamaIndex ``TransformComponent``: documents → chunk nodes with context headers.

    Each input node's text is treated as a whole document and cut by
    `split`; the returned ``TextNode`` s carry the
    exact chunk text and offsets, with ``context_header`` in their metadata and
    included in the embedding text (``MetadataMode.EMBED``), other metadata excluded.

    Args:
        headers: the `ChunkHeaderWriter` that splits the documents and writes the headers
            (default: one built from ``kwargs``).
        **kwargs: the keyword arguments of `ChunkHeaderWriter`, used only when ``headers``
            is not given.

    Raises:
        ValueError: If `ChunkHeaderWriter` refuses a keyword's value (e.g. an unknown ``mode``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    headers: Any = Field(exclude=True)

    def __init__(self, headers: ChunkHeaderWriter | None = None, **kwargs: Any) -> None:
        super().__init__(headers=headers if headers is not None else ChunkHeaderWriter(**kwargs))

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[BaseNode]:
        docs = []
        for node in nodes:
            meta = dict(node.metadata or {})
            meta.setdefault("source_id", getattr(node, "ref_doc_id", None) or node.node_id)
            docs.append(PlainDocument(page_content=node.get_content(metadata_mode=MetadataMode.NONE), metadata=meta))
        chunks = self.headers.transform_documents(docs)
        return [document_to_node(c) for c in chunks]
