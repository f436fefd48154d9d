"""Local Llama-family LLMs (IPEX-LLM low-bit, or plain transformers) for LangChain and LlamaIndex.

``load_llama3()`` returns a `LocalLLM`: one generation core with
``.as_chat_model()`` (a LangChain chat model, `LocalChatModel`; also
``.as_langchain(chat=True)``), ``.as_langchain()`` (a ``langchain_core`` ``LLM``) and
``.as_llamaindex()`` (a LlamaIndex ``CustomLLM``) as thin wrappers, and ``.prefix_cache()`` / ``.generate_with_prefix()`` for
many prompts sharing one long prefix (the prefix runs through the model once). The
framework wrappers live in `langchain_llm` and `llamaindex_llm`, each
importing only its own framework, and are imported lazily so that loading needs neither. Converted and low-bit models are cached on disk with checked,
content-keyed entries (`cache`).
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

# Imported on first use: the framework wrappers each import only their own framework.
_LAZY = {
    "CacheRebuildWarning": "cache",
    "LLMFallbackWarning": "loader",
    "LOW_BIT_FORMATS": "loader",
    "LangChainLLM": "langchain_llm",
    "LlamaIndexLLM": "llamaindex_llm",
    "LocalChatModel": "langchain_chat",
    "LocalLLM": "core",
    "load_llama3": "loader",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "END_OF_TURN_TOKENS": "core",
    "Generation": "core",
    "GenerationStream": "core",
    "LoadInfo": "core",
    "PrefixCache": "core",
    "bundled_gguf_path": "gguf_convert",
    "convert_gguf_to_hf": "gguf_convert",
    "default_cache_dir": "loader",
    "ensure_hf_checkpoint": "gguf_convert",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
