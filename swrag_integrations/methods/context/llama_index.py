"""LlamaIndex faces of the context techniques: thin wrappers, same implementation.

:class:`CompressorNodePostprocessor` runs any LangChain ``BaseDocumentCompressor`` on
``NodeWithScore`` lists (nodes → ``Document`` → compressor → nodes). Nodes whose text is
returned unchanged come back as the *same* node objects (reordered, score updated from
``relevance_score``/``segment_value`` when the compressor wrote one); new texts (RSE
segments) become new ``TextNode`` s with their metadata and character offsets.

Named shortcuts build the compressor from keyword arguments:
:class:`DiversityPostprocessor`, :class:`LostInTheMiddlePostprocessor`,
:class:`RelevantSegmentPostprocessor`, :class:`RerankPostprocessor` (any
:class:`~.rerank.BaseReranker`). :class:`ContextualHeaderTransform` is the indexing
side: a LlamaIndex ``TransformComponent`` turning documents into header-annotated chunk
nodes whose ``context_header`` metadata is part of the embedded text.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
    TransformComponent,
)

from swrag_integrations.llama_index.convert import document_to_node, node_to_document
from swrag_integrations.methods.context.headers import ContextualChunkHeaders
from swrag_integrations.methods.context.ordering import DiversityReranker, LostInTheMiddleReorder
from swrag_integrations.methods.context.rerank import BaseReranker
from swrag_integrations.methods.context.rse import RelevantSegmentExtractor

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


def _score(doc: Document) -> float | None:
    for key in _SCORE_KEYS:
        value = (doc.metadata or {}).get(key)
        if value is not None:
            return float(value)
    return None


class CompressorNodePostprocessor(BaseNodePostprocessor):
    """Any LangChain document compressor as a LlamaIndex node postprocessor.

    Args:
        compressor: the compressor (reranker, reorder, RSE...).
        require_query: raise ``ValueError`` when no query is given (rerankers need one).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    compressor: Any = Field(exclude=True)
    require_query: bool = False

    @classmethod
    def class_name(cls) -> str:
        return "CompressorNodePostprocessor"

    def _postprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        if not nodes:
            return []
        query = query_bundle.query_str if query_bundle is not None else ""
        if self.require_query and not (query or "").strip():
            raise ValueError(f"{type(self).__name__} needs a query (query_str or query_bundle)")
        docs = [node_to_document(n) for n in nodes]
        by_id = {n.node.node_id: n for n in nodes}
        out = self.compressor.compress_documents(docs, query)
        result: list[NodeWithScore] = []
        for doc in out:
            original = by_id.get(doc.id or "")
            score = _score(doc)
            if original is not None and original.node.get_content(metadata_mode=MetadataMode.NONE) == doc.page_content:
                result.append(NodeWithScore(node=original.node, score=score if score is not None else original.score))
            else:
                result.append(NodeWithScore(node=document_to_node(doc), score=score))
        return result


class DiversityPostprocessor(CompressorNodePostprocessor):
    """`DiversityReranker` for LlamaIndex (keywords go to it).

    ``embeddings`` may be a LlamaIndex embedding model; left out, ``Settings.embed_model``
    is used when one is set.
    """

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("embeddings") is None:
            from swrag_integrations.methods.context._common import llama_index_default_embeddings

            kwargs["embeddings"] = llama_index_default_embeddings()
            if kwargs["embeddings"] is None:
                raise ValueError("DiversityPostprocessor needs embeddings= (LangChain or LlamaIndex) "
                                 "or llama_index.core.Settings.embed_model")
        super().__init__(compressor=DiversityReranker(**kwargs), require_query=True)

    @classmethod
    def class_name(cls) -> str:
        return "DiversityPostprocessor"


class LostInTheMiddlePostprocessor(CompressorNodePostprocessor):
    """`LostInTheMiddleReorder` for LlamaIndex (no query needed)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(compressor=LostInTheMiddleReorder(**kwargs))

    @classmethod
    def class_name(cls) -> str:
        return "LostInTheMiddlePostprocessor"


class RelevantSegmentPostprocessor(CompressorNodePostprocessor):
    """`RelevantSegmentExtractor` for LlamaIndex (chunk nodes in, segments out).

    Nodes from the package's node parsers work as they are (their source is their
    ``ref_doc_id``, their position ``chunk_index``; overlapping windows are merged by
    offset). ``chunks`` may also be a LlamaIndex index or docstore holding the nodes:
    segments can then span nodes that were not retrieved.
    """

    def __init__(self, **kwargs: Any) -> None:
        chunks = kwargs.get("chunks")
        docstore = getattr(chunks, "docstore", chunks)
        if chunks is not None and hasattr(docstore, "get_ref_doc_info"):
            kwargs["chunks"] = _docstore_rows(docstore)
        super().__init__(compressor=RelevantSegmentExtractor(**kwargs))

    @classmethod
    def class_name(cls) -> str:
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
    """Any `BaseReranker` (or LangChain compressor) for LlamaIndex."""

    def __init__(self, reranker: BaseReranker | BaseDocumentCompressor, **kwargs: Any) -> None:
        super().__init__(compressor=reranker, require_query=True, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "RerankPostprocessor"


class ContextualHeaderTransform(TransformComponent):
    """LlamaIndex ``TransformComponent``: documents → chunk nodes with context headers.

    Each input node's text is treated as a whole document and cut by
    `split`; the returned ``TextNode`` s carry the
    exact chunk text and offsets, with ``context_header`` in their metadata and
    included in the embedding text (``MetadataMode.EMBED``), other metadata excluded.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    headers: Any = Field(exclude=True)

    def __init__(self, headers: ContextualChunkHeaders | None = None, **kwargs: Any) -> None:
        super().__init__(headers=headers if headers is not None else ContextualChunkHeaders(**kwargs))

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[BaseNode]:
        docs = []
        for node in nodes:
            meta = dict(node.metadata or {})
            meta.setdefault("source_id", getattr(node, "ref_doc_id", None) or node.node_id)
            docs.append(Document(page_content=node.get_content(metadata_mode=MetadataMode.NONE), metadata=meta))
        chunks = self.headers.transform_documents(docs)
        return [document_to_node(c) for c in chunks]
