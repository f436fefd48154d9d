"""The engine's spans as LangChain ``Document`` s (exact text, offsets in the metadata)."""

from __future__ import annotations

from typing import Iterable

from langchain_core.documents import Document

from swrag_integrations.engine.assemble import ContextSpan

__all__ = ["span_to_document", "spans_to_documents"]


def span_to_document(span: ContextSpan) -> Document:
    """A `ContextSpan` as a ``Document``: its exact
    text, `document_metadata` and id
    ``"<source_id>:<start>-<end>"`` (`span_id`)."""
    return Document(page_content=span.text, metadata=span.document_metadata(), id=span.span_id)


def spans_to_documents(spans: Iterable[ContextSpan]) -> list[Document]:
    """Each span as a ``Document`` (`span_to_document`), in order; an
    `AssembledContext`'s are ``ctx.spans``."""
    return [span_to_document(span) for span in spans]
