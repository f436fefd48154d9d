"""LlamaIndex faces: node parsers for the three sliding-window strategies, and the index.

The index, its retriever and the bundled embedding (``[llama-index]`` extra, no
LangChain) are loaded on first use: `SlidingWindowLlamaIndex`,
`WindowedLlamaIndexRetriever`, `MiniLMLlamaIndexEmbedding`
(`swrag_integrations.llama_index.index`).

Thin wrappers over `swrag_integrations.core.windows`. Nodes carry exact
``start_char_idx``/``end_char_idx`` (LlamaIndex's own ``str.find`` guess in
``NodeParser._postprocess_parsed_nodes`` is overridden, it is wrong on repeated text),
the same metadata keys as the LangChain splitters, and SOURCE/PREVIOUS/NEXT
relationships. They work inside an ``IngestionPipeline``, pickle (for worker
processes), and take ``chunk_size``/``chunk_overlap`` as the LangChain splitters do
(`window_and_step`).

Example:
    >>> from swrag_integrations.llama_index import DynamicStepNodeParser
    >>> nodes = DynamicStepNodeParser(window_size=256, step=3).get_nodes_from_documents(docs)
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Dict, List, Optional, Sequence

from llama_index.core.node_parser.interface import TextSplitter
from llama_index.core.node_parser.node_utils import build_nodes_from_splits, default_id_func
from llama_index.core.schema import BaseNode, Document, ImageDocument, MetadataMode, NodeRelationship, TextNode
from llama_index.core.utils import get_tqdm_iterable
from pydantic import Field, PrivateAttr

from swrag_integrations.core.windows import DEFAULT_ENCODING, METADATA_KEYS, WindowConfig, check_parameter, chunk_batches, window_and_step

__all__ = [
    "SlidingWindowNodeParser",
    "FixedWindowNodeParser",
    "DynamicWindowNodeParser",
    "DynamicStepNodeParser",
    "SlidingWindowLlamaIndex",
    "WindowedLlamaIndexRetriever",
    "MiniLMLlamaIndexEmbedding",
]

_INDEX_NAMES = ("SlidingWindowLlamaIndex", "WindowedLlamaIndexRetriever", "MiniLMLlamaIndexEmbedding")


def __getattr__(name: str) -> Any:
    """The index names, imported on first use (they need the index's packages)."""
    if name in _INDEX_NAMES:
        from swrag_integrations.llama_index import index as faces

        return getattr(faces, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _with_keys(keys: List[str]) -> List[str]:
    return list(keys) + [k for k in METADATA_KEYS if k not in keys]


_WINDOW_FIELDS = ("window_size", "step", "unit", "delimiters", "is_delimiter_regex", "encoding_name", "allow_gaps")


def _checked(data: Dict[str, Any], strategy: str, default_step: int) -> Dict[str, Any]:
    """The window parameters in ``data`` validated by the core, before pydantic coerces them.

    Without this, pydantic would accept ``window_size="8"``, ``8.0`` or ``step=True``,
    which the core (and the LangChain splitters) reject: every entry point accepts the
    same values and raises the same errors (`check_parameter`).
    LangChain's ``chunk_size``/``chunk_overlap`` (also LlamaIndex's names) are mapped onto
    ``window_size``/``step`` by `window_and_step`.
    """
    data = dict(data)
    if "chunk_size" in data or "chunk_overlap" in data:
        data["window_size"], data["step"] = window_and_step(
            strategy,
            data.get("window_size"),
            data.get("step"),
            chunk_size=data.pop("chunk_size", None),
            chunk_overlap=data.pop("chunk_overlap", None),
            default_step=default_step,
            allow_gaps=data.get("allow_gaps", False),
        )
    for name in _WINDOW_FIELDS:
        if name in data:
            data[name] = check_parameter(name, data[name])
    delimiters = data.get("delimiters")
    if isinstance(delimiters, str):
        data["delimiters"] = [delimiters]
    elif isinstance(delimiters, re.Pattern):
        raise TypeError(
            "delimiters of a LlamaIndex node parser must be strings (the parser is serialised), "
            "got a compiled re.Pattern; pass its .pattern with is_delimiter_regex=True"
        )
    return data


class SlidingWindowNodeParser(TextSplitter):
    """Base node parser: one ``TextNode`` per sliding window (see subclasses).

    Args:
        **data: The fields below (``window_size``, ``step``, ``unit``, ``delimiters``,
            ``is_delimiter_regex``, ``encoding_name``, ``allow_gaps``), LlamaIndex's
            ``chunk_size``/``chunk_overlap`` (mapped as in the core), and the other
            ``NodeParser`` fields.

    Raises:
        ValueError: A window setting is invalid (raised by `WindowConfig`, naming it).
    """

    strategy: ClassVar[str] = ""

    window_size: int = Field(default=1024, description="Window size in `unit`.")
    step: int = Field(default=256, description="Step: units (FFS/DFS) or delimiters (DDS).")
    unit: str = Field(default="token", description="'token' (tiktoken) or 'char'.")
    delimiters: Optional[List[str]] = Field(default=None, description="Delimiters; None = the method's set.")
    is_delimiter_regex: bool = Field(default=False, description="Treat delimiters as regular expressions.")
    encoding_name: str = Field(default=DEFAULT_ENCODING, description="tiktoken encoding for unit='token'.")
    allow_gaps: bool = Field(default=False, description="Allow FFS/DFS step > window_size.")

    _config: WindowConfig = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**_checked(data, self.strategy, type(self).model_fields["step"].default))
        self._config = WindowConfig(
            strategy=self.strategy,
            window_size=self.window_size,
            step=self.step,
            unit=self.unit,
            delimiters=self.delimiters,
            is_delimiter_regex=self.is_delimiter_regex,
            encoding_name=self.encoding_name,
            allow_gaps=self.allow_gaps,
        )

    @classmethod
    def from_defaults(cls, window_size: Optional[int] = None, step: Optional[int] = None, **kwargs: Any) -> "SlidingWindowNodeParser":
        """Build the parser; ``window_size`` defaults to 1024 (or ``chunk_size``), ``step``
        to the strategy's default (or ``chunk_overlap``, mapped as in the core)."""
        if step is not None:
            kwargs["step"] = step
        if window_size is not None or "chunk_size" not in kwargs:
            kwargs["window_size"] = 1024 if window_size is None else window_size
        return cls(**kwargs)

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name of this class (the class's own name)."""
        return cls.__name__

    def split_text(self, text: str) -> List[str]:
        """The texts of ``text``'s windows, in order (without the nodes' offsets)."""
        texts: List[str] = []
        for batch in chunk_batches(self._config, text):
            texts += batch.texts
        return texts

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> List[BaseNode]:
        all_nodes: List[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Parsing nodes"):
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            # Offsets stay relative to the original document when re-splitting a node.
            base = 0 if isinstance(node, Document) else (getattr(node, "start_char_idx", None) or 0)
            starts: List[int] = []
            ends: List[int] = []
            texts: List[str] = []
            for batch in chunk_batches(self._config, text):
                starts += batch.starts
                ends += batch.ends
                texts += batch.texts
            all_nodes.extend(self._build_nodes(texts, starts, ends, node, base))
        return all_nodes

    def _build_nodes(self, texts: List[str], starts: List[int], ends: List[int], parent: BaseNode, base: int) -> List[BaseNode]:
        """LlamaIndex's ``build_nodes_from_splits``, with each node's offsets, window metadata
        and excluded keys given at construction.

        ``TextNode`` validates every assignment (a few µs each), so setting four fields
        after ``build_nodes_from_splits`` cost a third of the parser's time. The nodes are
        the same (``tests/llama_index/test_splitters_llama_index.py`` compares them); image documents
        still go through ``build_nodes_from_splits``.
        """
        config = self._config
        window_metadata = {"window_size": config.window_size, "step": config.step, "strategy": config.strategy, "unit": config.unit}
        # New lists per node: build_nodes_from_splits would share the parent's lists.
        embed_keys = _with_keys(parent.excluded_embed_metadata_keys)
        llm_keys = _with_keys(parent.excluded_llm_metadata_keys)

        def metadata(index: int) -> Dict[str, Any]:
            start, end = base + starts[index], base + ends[index]
            return {"start_index": start, "end_index": end, "chunk_index": index, **window_metadata}

        if isinstance(parent, ImageDocument) or not isinstance(parent, (Document, TextNode)):
            built = build_nodes_from_splits(texts, parent, id_func=self.id_func)
            for index, child in enumerate(built):
                child.start_char_idx, child.end_char_idx = base + starts[index], base + ends[index]
                child.metadata.update(metadata(index))
                child.excluded_embed_metadata_keys = list(embed_keys)
                child.excluded_llm_metadata_keys = list(llm_keys)
            return built  # type: ignore[return-value]
        relationships = {NodeRelationship.SOURCE: parent.as_related_node_info()}
        id_func = self.id_func or default_id_func
        return [
            TextNode(
                id_=id_func(index, parent),
                text=piece,
                embedding=parent.embedding,
                excluded_embed_metadata_keys=list(embed_keys),
                excluded_llm_metadata_keys=list(llm_keys),
                metadata_separator=parent.metadata_separator,
                metadata_template=parent.metadata_template,
                text_template=parent.text_template,
                relationships=relationships,
                start_char_idx=base + starts[index],
                end_char_idx=base + ends[index],
                metadata=metadata(index),
            )
            for index, piece in enumerate(texts)
        ]

    def _postprocess_parsed_nodes(self, nodes: List[BaseNode], parent_doc_map: Dict[str, Document]) -> List[BaseNode]:
        exact = [(n.start_char_idx, n.end_char_idx) if isinstance(n, TextNode) else None for n in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, offsets in zip(nodes, exact):
            # LlamaIndex re-derives the offsets with str.find (wrong on repeated text): put
            # the exact ones back where they differ (each assignment is validated).
            if offsets is not None and (node.start_char_idx, node.end_char_idx) != offsets:  # type: ignore[union-attr]
                node.start_char_idx, node.end_char_idx = offsets  # type: ignore[union-attr]
        return nodes


class FixedWindowNodeParser(SlidingWindowNodeParser):
    """FFS: fixed window, fixed step."""

    strategy = "FFS"


class DynamicWindowNodeParser(SlidingWindowNodeParser):
    """DFS: fixed step, window extended to the next delimiter."""

    strategy = "DFS"


class DynamicStepNodeParser(SlidingWindowNodeParser):
    """DDS: whole delimiter-split units; ``step`` counts delimiters (default 3)."""

    strategy = "DDS"
    step: int = Field(default=3, description="Step in delimiters (units of text).")
