"""The LangChain ``LLM`` over a `LocalLLM`: a thin adapter that maps
LangChain's call signature onto ``core.generate`` / ``core.stream``.

Imports LangChain only (``langchain_core``): a LangChain install without LlamaIndex
can use it (``load_llama3().as_langchain()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.llms import LLM
from langchain_core.outputs import GenerationChunk
from pydantic import ConfigDict, Field

from swrag_integrations.llm.generation import GenerationCore, call_options

__all__ = ["LangChainLLM"]


class LangChainLLM(LLM):
    """LangChain ``LLM`` over a `LocalLLM` (prompts go through the chat template).

    Kept beside ``langchain_huggingface.HuggingFacePipeline`` for the reasons given in
    `LocalChatModel` (IPEX-LLM low-bit, the GGUF cache, whole characters):
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
        return self.core.generate(prompt, stop=stop, **call_options(self._defaults(), kwargs))

    def _stream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[GenerationChunk]:
        for piece in self.core.stream(prompt, stop=stop, **call_options(self._defaults(), kwargs)):
            chunk = GenerationChunk(text=piece)
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
