"""LangChain chat model over the local generation core (`LocalLLM`).

``load_llama3().as_chat_model()`` (or ``.as_langchain(chat=True)``) gives a
`LocalChatModel`. Compared with the plain ``LLM`` of `langchain_llm`:

* **Messages** go through the model's own chat template with their roles (system, user,
  assistant, tool). A template without a system role (it raises on one or drops it) gets
  the system text merged into the first user turn (blank line between), and one that
  demands strict alternation gets consecutive same-role turns joined. Message ``name``
  fields are not rendered (chat templates have no place for them). Content must be
  text: image, audio, file or other non-text blocks raise ``ValueError`` rather than
  being dropped.
* **Streaming** has the core's guarantees: only new text, partial stop strings and partial
  UTF-8 characters held back, and the streamed chunks join to exactly what ``invoke``
  returns. The last chunk has ``chunk_position="last"`` and carries the usage.
* **Usage**: every ``AIMessage`` has ``usage_metadata`` (prompt tokens after the chat
  template, generated tokens) and ``response_metadata`` with ``model_name`` and
  ``finish_reason`` (``"stop"`` or ``"length"``).
* **Token counting** (``get_num_tokens``, ``get_token_ids``,
  ``get_num_tokens_from_messages``) uses the model's own tokenizer, offline.
  ``get_num_tokens_from_messages`` counts the whole rendered prompt (template tokens,
  default system prompt and the assistant header included), i.e. ``input_tokens``.
* **Structured output** (`LocalChatModel.with_structured_output`): constrained
  decoding with lm-format-enforcer when it is installed, else generate, parse, validate
  and retry.
* **Tools**: only for models whose chat template renders ``tools`` (Llama-3.1+, Qwen2.5,
  Hermes-style templates). The bundled SmolLM2-135M-Instruct template does not, so
  ``bind_tools`` raises ``NotImplementedError`` naming the model.

Async methods run the synchronous generation in a worker thread (one generation at a
time per loaded model; concurrent calls queue).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from langchain_core.utils.pydantic import is_basemodel_subclass
from pydantic import BaseModel, ConfigDict, Field

from swrag_integrations.llm.generation import Generation, GenerationCore

__all__ = ["LocalChatModel", "constrained_decoding_available", "parse_tool_calls"]

StructuredMethod = Literal["json_schema", "function_calling", "json_mode"]
_METHODS = ("json_schema", "function_calling", "json_mode")
_CALL_OPTIONS = ("max_tokens", "temperature", "repetition_penalty", "json_schema", "schema_prompt", "tools")
_DONE = object()


def constrained_decoding_available() -> bool:
    """Whether lm-format-enforcer (constrained JSON decoding) can be imported."""
    try:
        import lmformatenforcer  # noqa: F401
    except ImportError:
        return False
    return True


def _text_content(message: BaseMessage, model: str) -> str:
    """The text of a message; non-text content blocks raise (never silently dropped)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") in ("tool_call", "tool_call_chunk") and isinstance(
            message, AIMessage
        ):
            continue  # v1 content mirrors message.tool_calls, rendered from there
        else:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise ValueError(
                f"{model} takes text only: a {type(message).__name__} has a {kind!r} content block"
            )
    return "".join(parts)


def _template_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": call["name"], "arguments": call.get("args", {})},
    }


def parse_tool_calls(text: str, tool_names: Sequence[str]) -> tuple[str, list[dict[str, Any]]]:
    """Tool calls in a model's text, and the text left over.

    Understands the two formats chat templates ask for: ``<tool_call>{json}</tool_call>``
    blocks (Hermes / Qwen2.5) and a reply that is only a JSON object or list of objects
    with ``name`` and ``arguments`` or ``parameters`` (Llama-3.1/3.2, Mistral). Calls to
    names outside ``tool_names`` are left as text.
    """

    def as_call(data: Any) -> dict[str, Any] | None:
        if not isinstance(data, dict) or data.get("name") not in tool_names:
            return None
        args = data.get("arguments", data.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return None
        if not isinstance(args, dict):
            return None
        return {"name": data["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:24]}", "type": "tool_call"}

    calls: list[dict[str, Any]] = []
    blocks = list(re.finditer(r"<tool_call>\s*(.*?)\s*</tool_call>", text, flags=re.S))
    if blocks:
        rest = text
        for match in blocks:
            try:
                call = as_call(json.loads(match.group(1)))
            except ValueError:
                call = None
            if call is not None:
                calls.append(call)
                rest = rest.replace(match.group(0), "", 1)
        return rest.strip(), calls
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(stripped)
        except ValueError:
            return text, []
        items = data if isinstance(data, list) else [data]
        parsed = [as_call(item) for item in items]
        if items and all(p is not None for p in parsed):
            return "", [p for p in parsed if p is not None]
    return text, []


def _schema_instruction(schema: Mapping[str, Any]) -> str:
    return (
        "Reply with one JSON object, and nothing else, that conforms to this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False)
    )


class LocalChatModel(BaseChatModel):
    """LangChain chat model over a loaded `LocalLLM`.

    Made by ``LocalLLM.as_chat_model(**fields)`` or ``LocalChatModel(core=llm, ...)``;
    one loaded model can back any number of chat models with different settings. See
    the module docstring for what it renders, streams and reports.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> chat = load_llama3().as_chat_model(max_tokens=64)
        >>> reply = chat.invoke([SystemMessage("Answer in one word."), HumanMessage("Capital of France?")])
        >>> reply.content, reply.usage_metadata["input_tokens"]

    Fields (``None`` = the core's default):
        max_tokens: new tokens per call (the core's ``max_new_tokens``).
        temperature: 0 is greedy decoding (the method's setting).
        repetition_penalty: the method uses 1.1.
        stop: stop strings for every call (besides the end-of-turn tokens).
        streaming: ``invoke`` streams internally (callbacks get tokens).
        structured_output_retries: extra attempts of the parse-and-retry fallback of
            `with_structured_output` (used without lm-format-enforcer).
        constrained_decoding: ``None`` uses lm-format-enforcer when installed, ``True``
            requires it, ``False`` always uses parse-and-retry.

    Per-call keyword arguments: ``max_tokens``, ``temperature``, ``repetition_penalty``
    and ``stop``; anything else raises ``ValueError``.

    Why our own class and not ``langchain_huggingface.ChatHuggingFace`` over a local
    ``HuggingFacePipeline`` (read in langchain-huggingface 1.2.3, the current release): its
    async generation raises ``NotImplementedError`` for a local pipeline (LangChain's
    chat-model standard suite, which this class passes, calls ``ainvoke``/``astream``);
    ``HuggingFacePipeline.from_model_id(backend="ipex")`` is no longer supported (it falls
    back to plain transformers), while the method runs Llama-3 through IPEX-LLM low-bit;
    and it has no shared-prefix KV cache (`LocalLLM.generate_with_prefix`, used by the
    contextual headers), no GGUF read cached across loads, and no whole-character streaming
    guarantee for CJK text and emoji.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    core: GenerationCore = Field(exclude=True, repr=False)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    repetition_penalty: float | None = None
    stop: list[str] | None = None
    streaming: bool = False
    structured_output_retries: int = Field(default=2, ge=0)
    constrained_decoding: bool | None = None

    # ------------------------------------------------------------------ identity
    @property
    def _llm_type(self) -> str:
        return "swrag-local-chat"

    @property
    def model_name(self) -> str:
        """The loaded model's source (path or hub id)."""
        return self.core.name

    @property
    def _identifying_params(self) -> dict[str, Any]:
        info = self.core.info
        return {
            "model_name": info.source,
            "backend": info.backend,
            "low_bit": info.low_bit,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "repetition_penalty": self.repetition_penalty,
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        temperature = next(t for t in (kwargs.get("temperature"), self.temperature, self.core.temperature) if t is not None)
        params = LangSmithParams(
            ls_provider="swrag-local",
            ls_model_name=kwargs["model"] if isinstance(kwargs.get("model"), str) else self.model_name,
            ls_model_type="chat",
            ls_temperature=float(temperature),
            ls_max_tokens=int(kwargs.get("max_tokens") or self.max_tokens or self.core.max_new_tokens),
        )
        stops = stop or self.stop
        if stops:
            params["ls_stop"] = list(stops)
        return params

    # ------------------------------------------------------------------ messages
    def _template_messages(self, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
        """LangChain messages as chat-template dicts (``role``, ``content``, tool fields)."""
        out: list[dict[str, Any]] = []
        for message in messages:
            content = _text_content(message, self.model_name)
            if isinstance(message, SystemMessage):
                out.append({"role": "system", "content": content})
            elif isinstance(message, HumanMessage):
                out.append({"role": "user", "content": content})
            elif isinstance(message, AIMessage):
                item: dict[str, Any] = {"role": "assistant", "content": content}
                if message.tool_calls:
                    self._require_tools()
                    item["tool_calls"] = [_template_tool_call(c) for c in message.tool_calls]
                out.append(item)
            elif isinstance(message, ToolMessage):
                self._require_tools()
                item = {"role": "tool", "content": content, "tool_call_id": message.tool_call_id}
                if message.name:
                    item["name"] = message.name
                out.append(item)
            elif isinstance(message, ChatMessage):
                out.append({"role": message.role, "content": content})
            else:
                raise TypeError(f"unsupported message type {type(message).__name__}")
        if not out:
            raise ValueError("messages must not be empty")
        return out

    def _require_tools(self) -> None:
        if not self.core.supports_tools:
            raise NotImplementedError(
                f"{self.model_name} has no tool calling: its chat template does not render tools. "
                "Load a model whose template does (e.g. Llama-3.1-Instruct, Qwen2.5-Instruct), "
                "or use with_structured_output() for JSON answers."
            )

    # ------------------------------------------------------------------ calls
    def _call_plan(
        self, messages: Sequence[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Template messages and the core's keyword arguments for one call."""
        kwargs = dict(kwargs)
        kwargs.pop("stream", None)
        model = kwargs.pop("model", None)
        if model is not None and model != self.model_name:
            raise ValueError(
                f"model={model!r}: this chat model serves the loaded {self.model_name!r}; "
                "load another model with load_llama3() for a different one"
            )
        unknown = set(kwargs) - set(_CALL_OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) {sorted(unknown)}; use {list(_CALL_OPTIONS[:3])} or stop")
        prompt = self._template_messages(messages)
        json_schema = kwargs.pop("json_schema", None)
        described = kwargs.pop("schema_prompt", None)
        if described is not None:
            instruction = _schema_instruction(described)
            systems = [m for m in prompt if m["role"] == "system"]
            if systems:
                systems[-1]["content"] = f"{systems[-1]['content']}\n\n{instruction}"
            else:
                prompt.insert(0, {"role": "system", "content": instruction})
        max_tokens = kwargs.pop("max_tokens", None)
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        options: dict[str, Any] = {
            "max_new_tokens": max_tokens or self.max_tokens,
            "temperature": kwargs.pop("temperature", self.temperature),
            "repetition_penalty": kwargs.pop("repetition_penalty", self.repetition_penalty),
        }
        options = {k: v for k, v in options.items() if v is not None}
        stops = [*(self.stop or []), *(stop or [])]
        tools = kwargs.pop("tools", None)
        if tools:
            self._require_tools()
        return prompt, {"stop": stops or None, "json_schema": json_schema, "tools": tools or None, **options}

    def _message_metadata(self, result: Generation) -> tuple[UsageMetadata, dict[str, Any]]:
        usage = UsageMetadata(
            input_tokens=result.prompt_tokens,
            output_tokens=result.completion_tokens,
            total_tokens=result.prompt_tokens + result.completion_tokens,
        )
        meta = {"model_name": self.model_name, "finish_reason": result.finish_reason, "model_provider": "swrag-local"}
        return usage, meta

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt, call = self._call_plan(messages, stop, kwargs)
        result = self.core.generate_result(prompt, chat=True, **call)
        usage, meta = self._message_metadata(result)
        content, tool_calls = result.text, []
        if call["tools"]:
            content, tool_calls = parse_tool_calls(result.text, [t["function"]["name"] for t in call["tools"]])
        message = AIMessage(content=content, tool_calls=tool_calls, usage_metadata=usage, response_metadata=meta)
        return ChatResult(generations=[ChatGeneration(message=message, generation_info={"finish_reason": result.finish_reason})])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        prompt, call = self._call_plan(messages, stop, kwargs)
        if call["tools"]:  # tool calls are known only at the end: one chunk
            result = self._generate(messages, stop, None, **kwargs).generations[0]
            message = result.message
            chunk = ChatGenerationChunk(
                message=AIMessageChunk(
                    content=message.content,
                    tool_call_chunks=[
                        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
                        for i, c in enumerate(message.tool_calls)
                    ],
                    usage_metadata=message.usage_metadata,
                    response_metadata=message.response_metadata,
                    chunk_position="last",
                ),
                generation_info=result.generation_info,
            )
            if run_manager is not None and chunk.text:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
            return
        pieces = self.core.stream(prompt, chat=True, **call)
        with pieces:
            for piece in pieces:
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
                if run_manager is not None:
                    run_manager.on_llm_new_token(piece, chunk=chunk)
                yield chunk
        usage, meta = self._message_metadata(pieces.result)
        yield ChatGenerationChunk(
            message=AIMessageChunk(content="", usage_metadata=usage, response_metadata=meta, chunk_position="last"),
            generation_info={"finish_reason": pieces.result.finish_reason},
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """`_generate` in a worker thread."""
        return await run_in_executor(None, self._generate, messages, stop, None, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """`_stream` stepped in a worker thread; leaving early stops the generation."""
        chunks = self._stream(messages, stop, None, **kwargs)
        try:
            while (chunk := await run_in_executor(None, next, chunks, _DONE)) is not _DONE:
                if run_manager is not None and chunk.text:
                    await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk
        finally:
            await run_in_executor(None, chunks.close)

    # ------------------------------------------------------------------ tokens
    def get_token_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` with the model's own tokenizer (offline)."""
        return self.core.token_ids(text)

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """Tokens of the prompt these messages make: chat template, default system prompt
        and assistant header included (equals ``usage_metadata["input_tokens"]``)."""
        openai_tools = [convert_to_openai_tool(t) for t in tools] if tools else None
        if openai_tools:
            self._require_tools()
        return len(self.core.encode(self._template_messages(messages), chat=True, tools=openai_tools))

    # ------------------------------------------------------------------ tools
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Tools for models whose chat template renders them; otherwise ``NotImplementedError``.

        The tools are rendered by the template and calls are parsed from the reply
        (`parse_tool_calls`). ``tool_choice``: ``None`` / ``"auto"`` lets the model
        decide, ``"none"`` sends no tools; forcing a call (``"any"``, ``"required"``, a
        name) is not implemented and raises ``NotImplementedError``.
        """
        self._require_tools()
        if tool_choice not in (None, "auto", "none"):
            raise NotImplementedError(f"tool_choice={tool_choice!r} (forcing a tool call) is not implemented")
        if tool_choice == "none":
            return self.bind(**kwargs)
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    # ------------------------------------------------------------------ structured output
    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        method: StructuredMethod = "json_schema",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Answers as JSON for ``schema`` (pydantic class, TypedDict or JSON schema dict).

        With lm-format-enforcer installed (and ``constrained_decoding`` not ``False``)
        decoding is **constrained**: at each step only tokens that keep the reply a
        prefix of JSON valid for the schema are allowed, in one model call, and the
        result streams as growing partial objects. The schema is also put into the
        system prompt (the model cannot see field descriptions otherwise). A reply cut
        by ``max_tokens`` cannot close its JSON and raises ``OutputParserException``:
        raise ``max_tokens``.

        Without it, **parse-and-retry**: the schema goes into the system prompt, the reply
        is parsed and validated (pydantic classes fully; dict / TypedDict schemas: a JSON
        object with the required keys), and on failure the model is asked again with
        the error, up to ``structured_output_retries`` more times; then
        ``OutputParserException`` says how many attempts failed and why.

        ``method``: ``"json_schema"`` (default) and ``"function_calling"`` (this model
        has no tool calling, so it is served the same way) follow the schema;
        ``"json_mode"`` only forces a JSON object and adds no prompt text (describe the
        keys in your prompt). ``strict`` is accepted for compatibility: constrained
        output always follows the schema. Pydantic classes give instances, other
        schemas dicts; ``include_raw=True`` gives ``{"raw", "parsed", "parsing_error"}``.
        """
        if kwargs:
            raise ValueError(f"unsupported argument(s) {sorted(kwargs)}")
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if schema is None:
            raise ValueError("schema is required")
        pydantic_schema = isinstance(schema, type) and is_basemodel_subclass(schema)
        json_schema = {"type": "object"} if method == "json_mode" else convert_to_json_schema(schema)
        parser: JsonOutputParser = PydanticOutputParser(pydantic_object=schema) if pydantic_schema else JsonOutputParser()
        constrained = self._use_constrained_decoding()
        bound = self.bind(
            json_schema=json_schema if constrained else None,
            schema_prompt=None if method == "json_mode" else json_schema,
            ls_structured_output_format={"kwargs": {"method": method, "strict": strict}, "schema": schema},
        )
        if not constrained:
            return self._retrying(bound, parser, json_schema, include_raw)
        if include_raw:
            parse = RunnablePassthrough.assign(parsed=lambda x: parser.invoke(x["raw"]), parsing_error=lambda _: None)
            fallback = RunnablePassthrough.assign(parsed=lambda _: None)
            return RunnableMap(raw=bound) | parse.with_fallbacks([fallback], exception_key="parsing_error")
        return bound | parser

    def _use_constrained_decoding(self) -> bool:
        available = constrained_decoding_available()
        if self.constrained_decoding and not available:
            raise ImportError("constrained_decoding=True needs lm-format-enforcer (pip install lm-format-enforcer)")
        return available if self.constrained_decoding is None else bool(self.constrained_decoding)

    def _retrying(
        self, bound: Runnable, parser: JsonOutputParser, json_schema: Mapping[str, Any], include_raw: bool
    ) -> Runnable:
        """Parse-and-retry structured output (the path without constrained decoding)."""
        from langchain_core.prompt_values import ChatPromptValue, StringPromptValue
        from langchain_core.messages import convert_to_messages

        attempts = self.structured_output_retries + 1
        required = [k for k in json_schema.get("required", []) if isinstance(k, str)]

        def to_messages(value: Any) -> list[BaseMessage]:
            if isinstance(value, (ChatPromptValue, StringPromptValue)):
                return value.to_messages()
            if isinstance(value, str):
                return [HumanMessage(value)]
            return convert_to_messages(value)

        def check(reply: AIMessage) -> Any:
            parsed = parser.invoke(reply)
            if not isinstance(parser, PydanticOutputParser):
                if not isinstance(parsed, dict):
                    raise OutputParserException(f"expected a JSON object, got {type(parsed).__name__}")
                missing = [k for k in required if k not in parsed]
                if missing:
                    raise OutputParserException(f"the JSON object lacks the required key(s) {missing}")
            return parsed

        def feedback(error: Exception) -> HumanMessage:
            return HumanMessage(
                f"That reply is not valid: {error}. Answer again with only the JSON object for the schema."
            )

        def finish(reply: AIMessage | None, parsed: Any, errors: list[Exception]) -> Any:
            if errors and parsed is None:
                error = OutputParserException(
                    f"{self.model_name} gave no valid JSON for the schema in {attempts} attempt(s); "
                    f"last error: {errors[-1]}",
                    llm_output=reply.text if reply is not None else None,
                )
                if not include_raw:
                    raise error
                return {"raw": reply, "parsed": None, "parsing_error": error}
            return {"raw": reply, "parsed": parsed, "parsing_error": None} if include_raw else parsed

        def run(value: Any, config: Any = None) -> Any:
            messages = to_messages(value)
            reply, errors = None, []
            for _ in range(attempts):
                reply = bound.invoke(messages, config)
                try:
                    return finish(reply, check(reply), [])
                except OutputParserException as error:
                    errors.append(error)
                    messages = [*messages, reply, feedback(error)]
            return finish(reply, None, errors)

        async def arun(value: Any, config: Any = None) -> Any:
            messages = to_messages(value)
            reply, errors = None, []
            for _ in range(attempts):
                reply = await bound.ainvoke(messages, config)
                try:
                    return finish(reply, check(reply), [])
                except OutputParserException as error:
                    errors.append(error)
                    messages = [*messages, reply, feedback(error)]
            return finish(reply, None, errors)

        return RunnableLambda(run, afunc=arun, name="structured_output_with_retries")
