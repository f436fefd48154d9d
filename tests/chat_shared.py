"""One real chat model per test session, shared by the ``test_chat_*`` modules.

Holds no tests: :func:`shared_core` loads the bundled SmolLM2-135M-Instruct stand-in once
through the normal loader (``load_llama3``) into the run's shared cache (``$SWRAG_TEST_CACHE``,
made by tests/conftest.py; never ``~/.cache/swrag``), so the standard suites and the chat-model tests pay
the 5-40 s load once. Tests that call it are marked ``slow``.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@functools.lru_cache(maxsize=1)
def shared_core():
    """The session's :class:`~swrag_integrations.llm.LocalLLM` (bundled model; IPEX-LLM sym_int8 where
    ipex-llm is installed, else plain transformers)."""
    from swrag_integrations.llm import load_llama3

    cache = os.environ.get("SWRAG_TEST_CACHE")  # the run's shared cache (tests/conftest.py)
    if not cache:
        cache = tempfile.mkdtemp(prefix="swrag-chat-cache-")
        atexit.register(shutil.rmtree, cache, True)
    return load_llama3(cache_dir=cache, max_new_tokens=64, backend="auto")
