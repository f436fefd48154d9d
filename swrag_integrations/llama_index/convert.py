"""The one conversion between LangChain ``Document`` s and LlamaIndex nodes.

Both directions keep the text unchanged and the exact offsets: ``start_index``/
``end_index`` metadata <-> ``start_char_idx``/``end_char_idx``, and the source
identity: ``metadata["source_id"]`` <-> the node's ``SOURCE`` relationship (its
``ref_doc_id``). Spans from the framework-free core (`ContextSpan`)
become nodes without passing through LangChain. Each framework is imported only when
its side of a conversion is used.

LlamaIndex ``MetadataFilters`` convert to and from the package's own filter
(`MetadataFilter`): `parse_llama_filter`
takes either kind (or a LangChain-style dict), `filter_to_llama_index` gives one to a
``VectorStoreIndex`` retriever.
"""

from __future__ import annotations

from typing import Any

__all__ = ["document_to_node", "node_to_document", "node_to_item", "span_to_node", "SCORE_KEYS",
           "filter_from_llama_index", "filter_to_llama_index", "parse_llama_filter"]

SCORE_KEYS = ("relevance_score", "relevance", "segment_value", "score", "rrf_score")


def _scalar_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None}


def _node(node_id: str, text: str, meta: dict[str, Any], start: Any, end: Any, source_id: Any) -> Any:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    node = TextNode(id_=node_id, text=text, metadata=meta,
                    start_char_idx=None if start is None else int(start),
                    end_char_idx=None if end is None else int(end))
    # the metadata describes the text; none of it is part of what gets embedded or read,
    # except a contextual header (embedded: header + "\n\n" + chunk) and the source name
    node.excluded_embed_metadata_keys = [k for k in meta if k != "context_header"]
    node.excluded_llm_metadata_keys = [k for k in meta if k not in ("source", "title")]
    if "context_header" in meta:
        node.metadata_template = "{value}"
    if source_id is not None:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=str(source_id))
    return node


def document_to_node(doc: Any, *, score: float | None = None, with_score: bool = False) -> Any:
    """A LangChain ``Document`` as a ``TextNode`` (or ``NodeWithScore`` with ``with_score``)."""
    meta = _scalar_metadata(dict(doc.metadata or {}))
    node_id = doc.id or f"{meta.get('source_id', 'doc')}:{meta.get('start_index', '')}-{meta.get('end_index', '')}"
    node = _node(str(node_id), doc.page_content, meta, meta.get("start_index"), meta.get("end_index"),
                 meta.get("source_id"))
    if not with_score:
        return node
    from llama_index.core.schema import NodeWithScore

    if score is None:
        score = next((float(meta[k]) for k in SCORE_KEYS if meta.get(k) is not None), None)
    return NodeWithScore(node=node, score=score)


def span_to_node(span: Any, ref_doc_id: str | None = None) -> Any:
    """A core `ContextSpan` as a ``NodeWithScore`` (exact offsets);
    its score is the span's ``relevance`` in [0, 1] where it has one (windows of
    `search_children` hits), else ``span.score``.

    Args:
        span: the span.
        ref_doc_id: the id of the document the span's source was added as (the node's
            ``ref_doc_id``); default the span's ``source_id``. ``metadata["doc_ids"]``
            lists the ids of the added documents the span overlaps, where the span has them.
    """
    from llama_index.core.schema import NodeWithScore

    meta = _scalar_metadata({**span.metadata, "source_id": span.source_id, "start_index": span.start,
                             "end_index": span.end, "score": span.score, "rank": span.rank})
    meta.update(hit_chunk_indices=",".join(map(str, span.metadata.get("hit_chunk_indices") or [])))
    if span.metadata.get("doc_ids"):
        meta["doc_ids"] = [str(d) for d in span.metadata["doc_ids"]]
    node = _node(f"{span.source_id}:{span.start}-{span.end}", span.text, meta, span.start, span.end,
                 ref_doc_id if ref_doc_id is not None else span.source_id)
    relevance = span.metadata.get("relevance")  # in [0, 1], comparable across queries (a cutoff means something)
    return NodeWithScore(node=node, score=float(relevance) if relevance is not None else span.score)


def node_to_item(item: Any) -> Any:
    """A ``NodeWithScore`` (or a node) as a framework-free
    `PlainDocument`.

    The id is the node id; the score goes to ``metadata["score"]``; offsets to
    ``start_index``/``end_index``; the source to ``source_id`` (from the metadata, else
    the node's ``ref_doc_id``), so nodes from the package's node parsers work wherever
    a chunk needs its source (e.g. relevant segment extraction).
    """
    from llama_index.core.schema import MetadataMode

    from swrag_integrations.stores.storage import PlainDocument

    node = getattr(item, "node", item)
    score = getattr(item, "score", None) if item is not node else None
    meta = dict(node.metadata or {})
    if score is not None and "score" not in meta:
        meta["score"] = float(score)
    start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    if start is not None and "start_index" not in meta:
        meta["start_index"] = int(start)
    if end is not None and "end_index" not in meta:
        meta["end_index"] = int(end)
    if meta.get("source_id") is None and getattr(node, "ref_doc_id", None):
        meta["source_id"] = str(node.ref_doc_id)
    return PlainDocument(page_content=node.get_content(metadata_mode=MetadataMode.NONE), metadata=meta, id=node.node_id)


def node_to_document(item: Any) -> Any:
    """A ``NodeWithScore`` (or a node) as a LangChain ``Document`` (see `node_to_item`)."""
    from langchain_core.documents import Document

    plain = node_to_item(item)
    return Document(page_content=plain.page_content, metadata=plain.metadata, id=plain.id)


# ------------------------------------------------------------------ metadata filters

_LLAMA_OPS = {"==": "$eq", "!=": "$ne", ">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte", "in": "$in", "nin": "$nin"}


def _llama_filter_spec(filters: Any) -> dict[str, Any]:
    """A LlamaIndex ``MetadataFilters`` as the package's LangChain-style filter dict."""
    from llama_index.core.vector_stores.types import MetadataFilters

    parts: list[dict[str, Any]] = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            parts.append(_llama_filter_spec(item))
            continue
        op = getattr(getattr(item, "operator", None), "value", "==")
        if op not in _LLAMA_OPS:
            raise ValueError(f"LlamaIndex filter operator {op!r} on {item.key!r} is not supported; "
                             f"use one of {', '.join(_LLAMA_OPS)}")
        parts.append({item.key: {_LLAMA_OPS[op]: item.value}})
    if not parts:
        raise ValueError("MetadataFilters has no filters (pass None for no filter)")
    condition = str(getattr(getattr(filters, "condition", None), "value", "and") or "and").lower()
    if condition not in ("and", "or"):
        raise ValueError(f"LlamaIndex filter condition {condition!r} is not supported; use 'and' or 'or'")
    return parts[0] if len(parts) == 1 else {f"${condition}": parts}


def filter_from_llama_index(filters: Any) -> Any:
    """A LlamaIndex ``MetadataFilters`` (``ExactMatchFilter``/``MetadataFilter`` items,
    nested ``MetadataFilters``, condition ``and``/``or``) as a checked
    `MetadataFilter`.

    Raises:
        ValueError: an operator with no LangChain-style form (``text_match``,
            ``contains``, ``NOT`` conditions...), or a value the filters refuse.
    """
    from swrag_integrations.engine.filters import parse_filter

    return parse_filter(_llama_filter_spec(filters))


def parse_llama_filter(spec: Any) -> Any:
    """`parse_filter` that also takes LlamaIndex
    ``MetadataFilters`` (the filters of the LlamaIndex face)."""
    from swrag_integrations.engine.filters import parse_filter

    if type(spec).__name__ == "MetadataFilters":
        from llama_index.core.vector_stores.types import MetadataFilters

        if isinstance(spec, MetadataFilters):
            return filter_from_llama_index(spec)
    return parse_filter(spec)


def filter_to_llama_index(flt: Any) -> Any:
    """A `MetadataFilter` as LlamaIndex
    ``MetadataFilters`` (for a ``VectorStoreIndex`` retriever)."""
    from llama_index.core.vector_stores.types import FilterCondition, FilterOperator
    from llama_index.core.vector_stores.types import MetadataFilter as LlamaFilter
    from llama_index.core.vector_stores.types import MetadataFilters

    ops = {v: k for k, v in _LLAMA_OPS.items()}
    if flt.op in ("and", "or"):
        items = [filter_to_llama_index(f) for f in flt.args]
        items = [i.filters[0] if len(i.filters) == 1 else i for i in items]
        return MetadataFilters(filters=items, condition=FilterCondition.AND if flt.op == "and" else FilterCondition.OR)
    value = list(flt.value) if flt.op in ("$in", "$nin") else flt.value
    return MetadataFilters(filters=[LlamaFilter(key=flt.key, value=value, operator=FilterOperator(ops[flt.op]))])
