"""Local Llama-family LLMs (IPEX-LLM low-bit, or plain transformers) for LangChain and LlamaIndex.

``load_llama3()`` returns a :class:`LocalLLM`: one generation core with
``.as_chat_model()`` (a LangChain chat model, :class:`~.chat.LocalChatModel`; also
``.as_langchain(chat=True)``), ``.as_langchain()`` (a ``langchain_core`` ``LLM``) and
``.as_llamaindex()`` (a LlamaIndex ``CustomLLM``) as thin wrappers, and ``.prefix_cache()`` / ``.generate_with_prefix()`` for
many prompts sharing one long prefix (the prefix runs through the model once). The
framework wrappers live in :mod:`.langchain_llm` and :mod:`.llamaindex_llm`, each
importing only its own framework, and are imported lazily so that loading needs neither. Converted and low-bit models are cached on disk with checked,
content-keyed entries (:mod:`.cache`).
"""

from swrag_integrations.llm.cache import CacheRebuildWarning
from swrag_integrations.llm.core import END_OF_TURN_TOKENS, Generation, GenerationStream, LoadInfo, LocalLLM, PrefixCache
from swrag_integrations.llm.gguf_convert import bundled_gguf_path, convert_gguf_to_hf, ensure_hf_checkpoint
from swrag_integrations.llm.loader import LLMFallbackWarning, LOW_BIT_FORMATS, default_cache_dir, load_llama3

__all__ = [
    "CacheRebuildWarning",
    "END_OF_TURN_TOKENS",
    "Generation",
    "GenerationStream",
    "LLMFallbackWarning",
    "LOW_BIT_FORMATS",
    "LangChainLLM",
    "LlamaIndexLLM",
    "LoadInfo",
    "LocalChatModel",
    "LocalLLM",
    "PrefixCache",
    "bundled_gguf_path",
    "convert_gguf_to_hf",
    "default_cache_dir",
    "ensure_hf_checkpoint",
    "load_llama3",
]


def __getattr__(name: str):  # lazy: langchain / llama-index are imported only when asked for
    if name == "LangChainLLM":  # each adapter imports only its own framework
        from swrag_integrations.llm.langchain_llm import LangChainLLM

        return LangChainLLM
    if name == "LlamaIndexLLM":
        from swrag_integrations.llm.llamaindex_llm import LlamaIndexLLM

        return LlamaIndexLLM
    if name == "LocalChatModel":
        from swrag_integrations.llm.langchain_chat import LocalChatModel

        return LocalChatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
