"""LangChain text splitters for the three sliding-window strategies.

Thin wrappers over :mod:`swrag_integrations.windows`: the window arithmetic lives there.
Every chunk gets exact metadata: ``start_index``/``end_index`` (character offsets into
the source text, so ``text[start_index:end_index] == page_content``), ``chunk_index``,
``window_size``, ``step``, ``strategy`` and ``unit``, on top of the source metadata.

Example:
    >>> from swrag_integrations import DynamicStepTextSplitter
    >>> splitter = DynamicStepTextSplitter(window_size=256, step=3)
    >>> docs = splitter.create_documents([long_text], metadatas=[{"source": "a.txt"}])
"""

from __future__ import annotations

import copy
import re
from typing import Any, ClassVar, Iterable, Iterator, Sequence

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from .windows import DEFAULT_ENCODING, WindowConfig, chunk_metadata, count_units, iter_chunks

__all__ = [
    "SlidingWindowTextSplitter",
    "FixedWindowTextSplitter",
    "DynamicWindowTextSplitter",
    "DynamicStepTextSplitter",
    "FFSTextSplitter",
    "DFSTextSplitter",
    "DDSTextSplitter",
]


class SlidingWindowTextSplitter(TextSplitter):
    """Base class: a LangChain ``TextSplitter`` producing sliding windows.

    Args:
        window_size: window size ``w`` in ``unit``.
        step: step ``s``; in ``unit`` for FFS/DFS, in delimiters for DDS.
        unit: ``"token"`` (tiktoken, default) or ``"char"``.
        delimiters: delimiter strings (regular expressions with
            ``is_delimiter_regex=True``); defaults to the method's set.
        is_delimiter_regex: treat ``delimiters`` as regular expressions.
        encoding_name: tiktoken encoding for ``unit="token"``.
        allow_gaps: allow FFS/DFS ``step > window_size`` (text is then skipped).
        strip_whitespace: strip chunks (offsets follow). Default ``False`` so that the
            chunks reproduce the source exactly.
        add_start_index: accepted for compatibility; offsets are always added.
        **kwargs: other ``TextSplitter`` keywords (``chunk_size``/``chunk_overlap``
            are derived from the window and must not be passed).
    """

    strategy: ClassVar[str] = ""
    default_step: ClassVar[int] = 256

    def __init__(
        self,
        window_size: int = 1024,
        step: int | None = None,
        *,
        unit: str = "token",
        delimiters: Sequence[str] | re.Pattern | None = None,
        is_delimiter_regex: bool = False,
        encoding_name: str = DEFAULT_ENCODING,
        allow_gaps: bool = False,
        strip_whitespace: bool = False,
        **kwargs: Any,
    ) -> None:
        for name in ("chunk_size", "chunk_overlap", "length_function"):
            if name in kwargs:
                raise TypeError(f"{name} is derived from window_size/step/unit; do not pass it")
        self.config = WindowConfig(
            strategy=self.strategy,
            window_size=window_size,
            step=self.default_step if step is None else step,
            unit=unit,
            delimiters=delimiters,
            is_delimiter_regex=is_delimiter_regex,
            encoding_name=encoding_name,
            allow_gaps=allow_gaps,
        )
        overlap = max(0, window_size - self.config.step) if self.strategy != "DDS" else 0
        super().__init__(
            chunk_size=window_size,
            chunk_overlap=min(overlap, window_size),
            length_function=lambda text: count_units(text, self.config.unit, self.config.encoding_name),  # type: ignore[arg-type]
            strip_whitespace=strip_whitespace,
            **kwargs,
        )

    @property
    def window_size(self) -> int:
        return self.config.window_size

    @property
    def step(self) -> int:
        return self.config.step

    def split_text(self, text: str) -> list[str]:
        """Split ``text`` into its windows (strings, in order)."""
        if not self._strip_whitespace:
            starts, ends = self.config.window_arrays(text)
            return [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
        return [chunk.text for chunk in iter_chunks(self.config, text, strip_whitespace=self._strip_whitespace)]

    def _documents_for(self, text: str, metadata: dict) -> Iterator[Document]:
        for chunk in iter_chunks(self.config, text, strip_whitespace=self._strip_whitespace):
            meta = copy.deepcopy(metadata)
            meta.update(chunk_metadata(self.config, chunk))
            yield Document(page_content=chunk.text, metadata=meta)

    def create_documents(self, texts: list[str], metadatas: list[dict] | None = None) -> list[Document]:
        """Create one ``Document`` per window, with exact offsets in the metadata."""
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValueError(f"metadatas has {len(metadatas)} items for {len(texts)} texts")
        metas = metadatas or [{}] * len(texts)
        return [doc for text, meta in zip(texts, metas) for doc in self._documents_for(text, meta)]

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Split documents; each chunk keeps its source's metadata."""
        return list(self.lazy_split_documents(documents))

    def lazy_split_documents(self, documents: Iterable[Document]) -> Iterator[Document]:
        """Like :meth:`split_documents`, but yields chunks one by one (large inputs)."""
        for document in documents:
            yield from self._documents_for(document.page_content, document.metadata)


class FixedWindowTextSplitter(SlidingWindowTextSplitter):
    """FFS: fixed window, fixed step (``step`` in units, default 256)."""

    strategy = "FFS"


class DynamicWindowTextSplitter(SlidingWindowTextSplitter):
    """DFS: fixed step, window extended to the next delimiter (sentences stay whole)."""

    strategy = "DFS"


class DynamicStepTextSplitter(SlidingWindowTextSplitter):
    """DDS: windows of whole delimiter-split units; ``step`` counts delimiters (default 3)."""

    strategy = "DDS"
    default_step = 3


FFSTextSplitter = FixedWindowTextSplitter
DFSTextSplitter = DynamicWindowTextSplitter
DDSTextSplitter = DynamicStepTextSplitter
