"""LangChain's standard chat-model suites for ``LocalChatModel`` (the bundled SmolLM2-135M).

Both suites run against the real model, loaded once per session through the normal
loader into a private cache (``chat_shared.shared_core``), so every test here is
``slow``.

What is skipped, and why (each through the suite's own switches below):

* **Tool calling** (``has_tool_calling = False``): SmolLM2-135M-Instruct's chat template
  does not render tools, so ``bind_tools`` raises ``NotImplementedError`` naming the model.
  Skipped: ``test_tool_calling``, ``test_tool_calling_async``,
  ``test_bind_runnables_as_tools``, ``test_tool_message_histories_string_content``,
  ``test_tool_message_histories_list_content``, ``test_tool_choice``,
  ``test_tool_calling_with_no_arguments``, ``test_tool_message_error_status``,
  ``test_structured_few_shot_examples``, ``test_agent_loop``,
  ``test_unicode_tool_call_integration`` (and the unit ``test_bind_tool_pydantic`` returns
  early).
* **Structured output** runs only with lm-format-enforcer installed
  (``has_structured_output``): constrained decoding makes even the 135M model's replies
  valid JSON for the schema. Without it the parse-and-retry path depends on a 135M
  model writing the schema's JSON unaided, which it mostly does not, so the
  ``test_structured_output*`` tests are skipped there (the retry path has its own
  deterministic tests in ``test_chat_model.py``).
* **JSON mode** (``supports_json_mode = False``): ``method="json_mode"`` only forces *a*
  JSON object; ``test_json_mode`` then needs the model to pick the keys ``setup`` and
  ``punchline`` from the prompt text alone, which the 135M model does not do.
* **Multimodal inputs** (images, image URLs, PDFs, audio, video, image / PDF tool
  messages, Anthropic-format inputs): a text-only model; such content blocks raise
  ``ValueError`` instead of being dropped.
* **Model override** (``supports_model_override = False``): one chat model serves one
  loaded model; ``invoke(model="other")`` raises ``ValueError`` (``ls_model_name`` still
  follows a ``model`` kwarg, as ``test_standard_params_model_override`` checks).
* ``test_serdes`` (the model holds a loaded torch model, so it is not LangChain-
  serializable), ``test_init_from_env`` (no environment settings: nothing to read) and
  ``test_stream_time`` (VCR cassettes are for HTTP APIs) skip themselves.
* The unit suite's standard parameters are narrowed to ``temperature``, ``max_tokens``
  and ``stop``: a local model has no ``api_key``, network ``timeout`` or ``max_retries``
  to accept (they would be silently ignored).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests
from chat_shared import shared_core

from swrag_integrations.llm.langchain_chat import LocalChatModel, constrained_decoding_available

pytestmark = pytest.mark.slow


class _Settings:
    """The switches both suites share (see the module docstring for the reasons)."""

    @property
    def chat_model_class(self) -> type[LocalChatModel]:
        return LocalChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        # The shared core generates up to 64 new tokens by default: enough for the
        # suites' one-line jokes as closed JSON objects. (max_tokens is not set here:
        # the unit suite passes its own.)
        return {"core": shared_core()}

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_tool_choice(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return constrained_decoding_available()

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def supports_model_override(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True


class TestLocalChatModelUnit(_Settings, ChatModelUnitTests):
    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        return {"temperature": 0, "max_tokens": 100, "stop": []}


class TestLocalChatModelIntegration(_Settings, ChatModelIntegrationTests):
    pass
