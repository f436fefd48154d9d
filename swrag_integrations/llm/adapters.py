"""LangChain and LlamaIndex LLM classes: thin adapters over :class:`~.core.LocalLLM`.

All prompt handling, stopping and decoding lives in the core; the adapters only map each
framework's call signature and response types onto ``core.generate`` / ``core.stream``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.llms import LLM
from langchain_core.outputs import GenerationChunk
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from pydantic import ConfigDict, Field

from .generation import GenerationCore


def _options(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Per-call generation options: wrapper fields that are set, then call kwargs."""
    merged = {k: v for k, v in defaults.items() if v is not None}
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return merged


class LangChainLLM(LLM):
    """LangChain ``LLM`` over a :class:`LocalLLM` (prompts go through the chat template).

    Kept beside ``langchain_huggingface.HuggingFacePipeline`` for the reasons given in
    :class:`~.chat.LocalChatModel` (IPEX-LLM low-bit, the GGUF cache, whole characters):
    it is the same loaded model as a plain ``LLM``, for chains that take one."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    core: GenerationCore = Field(exclude=True, repr=False)
    max_new_tokens: int | None = None
    temperature: float | None = None
    repetition_penalty: float | None = None

    @property
    def _llm_type(self) -> str:
        return "swrag-local-llm"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        info = self.core.info
        return {"source": info.source, "backend": info.backend, "low_bit": info.low_bit, **self._defaults()}

    def _defaults(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "repetition_penalty": self.repetition_penalty,
        }

    def get_token_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` with the model's own tokenizer (offline; LangChain's
        default would load the gpt2 tokenizer from the hub)."""
        return self.core.token_ids(text)

    def _call(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        return self.core.generate(prompt, stop=stop, **_options(self._defaults(), kwargs))

    def _stream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[GenerationChunk]:
        for piece in self.core.stream(prompt, stop=stop, **_options(self._defaults(), kwargs)):
            chunk = GenerationChunk(text=piece)
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk


class LlamaIndexLLM(CustomLLM):
    """LlamaIndex ``CustomLLM`` over a :class:`LocalLLM`.

    ``complete(prompt)`` wraps the prompt in the chat template; ``complete(prompt,
    formatted=True)`` sends it verbatim. ``chat`` passes the messages to the template.
    With a chat template the model reports ``is_chat_model=True`` so LlamaIndex query
    engines use ``chat`` and get proper role formatting.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    core: GenerationCore = Field(exclude=True, repr=False)
    max_new_tokens: int | None = None
    temperature: float | None = None
    repetition_penalty: float | None = None
    stop: list[str] | None = None

    @classmethod
    def class_name(cls) -> str:
        return "swrag_local_llm"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.core.context_window,
            num_output=self.max_new_tokens or self.core.max_new_tokens,
            is_chat_model=self.core.has_chat_template,
            model_name=self.core.info.source,
        )

    def _kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        defaults = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "repetition_penalty": self.repetition_penalty,
        }
        options = _options(defaults, overrides)
        options.setdefault("stop", self.stop)
        return options

    @staticmethod
    def _messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        return [{"role": m.role.value, "content": m.content or ""} for m in messages]

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        chat = False if formatted else None
        return CompletionResponse(text=self.core.generate(prompt, chat=chat, **self._kwargs(kwargs)))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        pieces = self.core.stream(prompt, chat=False if formatted else None, **self._kwargs(kwargs))

        def gen() -> CompletionResponseGen:
            text = ""
            for piece in pieces:
                text += piece
                yield CompletionResponse(text=text, delta=piece)

        return gen()

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = self.core.generate(self._messages(messages), chat=True, **self._kwargs(kwargs))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        pieces = self.core.stream(self._messages(messages), chat=True, **self._kwargs(kwargs))

        def gen() -> ChatResponseGen:
            text = ""
            for piece in pieces:
                text += piece
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=piece
                )

        return gen()
