"""The LlamaIndex ``CustomLLM`` over a `LocalLLM`: a thin adapter that maps
LlamaIndex's call signatures and response types onto ``core.generate`` / ``core.stream``.

Imports LlamaIndex only (``llama_index.core``): a LlamaIndex install without LangChain
can use it (``load_llama3().as_llamaindex()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

from swrag_integrations.llm.generation import GenerationCore, call_options

__all__ = ["LlamaIndexLLM"]


class LlamaIndexLLM(CustomLLM):
    """LlamaIndex ``CustomLLM`` over a `LocalLLM`.

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
        """LlamaIndex's name of this class."""
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
        options = call_options(defaults, overrides)
        options.setdefault("stop", self.stop)
        return options

    @staticmethod
    def _messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        return [{"role": m.role.value, "content": m.content or ""} for m in messages]

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Generate the completion of ``prompt`` (``formatted``: already in the chat template); ``kwargs`` override the decoding settings."""
        chat = False if formatted else None
        return CompletionResponse(text=self.core.generate(prompt, chat=chat, **self._kwargs(kwargs)))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        """`complete`, streamed: each response holds the text so far and its new ``delta``."""
        pieces = self.core.stream(prompt, chat=False if formatted else None, **self._kwargs(kwargs))

        def gen() -> CompletionResponseGen:
            text = ""
            for piece in pieces:
                text += piece
                yield CompletionResponse(text=text, delta=piece)

        return gen()

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """The assistant's reply to ``messages`` (through the model's chat template); ``kwargs`` override the decoding settings."""
        text = self.core.generate(self._messages(messages), chat=True, **self._kwargs(kwargs))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """`chat`, streamed: each response holds the reply so far and its new ``delta``."""
        pieces = self.core.stream(self._messages(messages), chat=True, **self._kwargs(kwargs))

        def gen() -> ChatResponseGen:
            text = ""
            for piece in pieces:
                text += piece
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=piece
                )

        return gen()
