"""What the framework faces (``langchain_llm``, ``llamaindex_llm``, ``chat``) need of a generation core, without
importing it: the prompt type, the records a core returns (`Generation`,
`LoadInfo`) and `GenerationCore`, the protocol that
`LocalLLM` implements.

``core`` builds the faces (``LocalLLM.as_chat_model()`` and friends) and imports them
when asked; the faces import only this module, so the package's import graph has no
circle between the core and its faces.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Prompt", "LoadInfo", "Generation", "GenerationCore"]

Prompt = str | Sequence[Mapping[str, Any]]
"""A plain prompt, or chat messages ``[{"role": ..., "content": ...}, ...]`` (extra keys
such as ``tool_calls`` are passed to the chat template as they are)."""


@dataclass
class LoadInfo:
    """How a `LocalLLM` was loaded (for logs and benchmarks)."""

    source: str
    backend: str  # "ipex-llm" or "transformers"
    device: str
    low_bit: str | None = None
    load_seconds: float = 0.0
    from_cache: bool = False  # low-bit model read from an existing cache entry
    cache_path: str | None = None
    cache_status: str = ""  # "hit", "written", "rebuilt", "disabled", "not written" ("" without ipex-llm)
    converted_gguf: bool = False  # GGUF -> transformers conversion ran during this load
    notes: list[str] = field(default_factory=list)


@dataclass
class Generation:
    """One generation: the new text, its token counts and why it ended.

    ``finish_reason`` is ``"stop"`` (end-of-turn / eos token or a stop string) or
    ``"length"`` (``max_new_tokens`` reached). ``completion_tokens`` counts every token the
    model generated, including an end-of-turn token and tokens of a stop string.
    """

    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


@runtime_checkable
class GenerationCore(Protocol):
    """The generation core the LangChain and LlamaIndex faces wrap (see
    `LocalLLM` for the meaning of each member)."""

    info: LoadInfo
    max_new_tokens: int
    temperature: float

    @property
    def name(self) -> str: ...

    @property
    def has_chat_template(self) -> bool: ...

    @property
    def supports_tools(self) -> bool: ...

    @property
    def context_window(self) -> int: ...

    def encode(self, prompt: Prompt, *, chat: bool | None = None,
               tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]: ...

    def token_ids(self, text: str) -> list[int]: ...

    def generate(self, prompt: Prompt, *, stop: Sequence[str] | None = None, chat: bool | None = None,
                 json_schema: Mapping[str, Any] | None = None, **options: Any) -> str: ...

    def generate_result(self, prompt: Prompt, *, stop: Sequence[str] | None = None, chat: bool | None = None,
                        json_schema: Mapping[str, Any] | None = None,
                        tools: Sequence[Mapping[str, Any]] | None = None, **options: Any) -> Generation: ...

    def stream(self, prompt: Prompt, *, stop: Sequence[str] | None = None, chat: bool | None = None,
               json_schema: Mapping[str, Any] | None = None, tools: Sequence[Mapping[str, Any]] | None = None,
               **options: Any) -> Iterator[str]: ...


def call_options(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Per-call generation options of a framework face: its fields that are set
    (``defaults``), then the call's keywords (``overrides``); ``None`` means unset."""
    merged = {k: v for k, v in defaults.items() if v is not None}
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return merged
