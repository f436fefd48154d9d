"""LocalChatModel: chat template, streaming, usage, token counts, structured output, tools.

Fast tests cover the pure helpers (template facts, message merging, tool-call parsing).
The rest use the bundled SmolLM2-135M-Instruct through the normal loader, one model per
session in a private cache (``chat_shared.shared_core``), and are ``slow``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ci_switch import needs
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.utils.function_calling import convert_to_json_schema
from pydantic import BaseModel, Field
from chat_shared import shared_core
from scripted_model import never_stops, stop_string_after

from swrag_integrations.llm.langchain_chat import LocalChatModel, constrained_decoding_available, parse_tool_calls
from swrag_integrations.llm.core import _template_facts, merge_consecutive_roles, merge_system_into_user

SMOL_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Gemma-style: no system role, strict alternation (raises otherwise).
NO_SYSTEM_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Hermes / Qwen2.5-style tool template.
TOOLS_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>system\nYou may call these tools:\n' }}"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    "{{ 'Reply with <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>.<|im_end|>\n' }}{% endif %}"
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] }}"
    "{% if message.tool_calls %}{% for call in message.tool_calls %}"
    "{{ '<tool_call>' + (call.function | tojson) + '</tool_call>' }}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

QUESTION = "What is the capital of France?"


class Joke(BaseModel):
    """Joke to tell user."""

    setup: str = Field(description="question to set up a joke")
    punchline: str = Field(description="answer to resolve the joke")


# ----------------------------------------------------------------------------- fast tests
def test_template_facts():
    assert _template_facts(SMOL_TEMPLATE) == (True, False)
    assert _template_facts(NO_SYSTEM_TEMPLATE) == (False, False)
    assert _template_facts(TOOLS_TEMPLATE) == (True, True)
    # a template that silently drops system messages has no system role either
    drops = "{% for m in messages %}{% if m['role'] != 'system' %}{{ m['content'] }}{% endif %}{% endfor %}"
    assert _template_facts(drops) == (False, False)


def test_system_text_opens_the_first_user_turn():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Capital?"},
    ]
    assert merge_system_into_user(messages) == [
        {"role": "user", "content": "Be brief.\n\nAnswer in English.\n\nHi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Capital?"},
    ]
    assert merge_system_into_user([{"role": "system", "content": "S"}]) == [{"role": "user", "content": "S"}]


def test_consecutive_roles_are_joined_but_tool_turns_are_not():
    messages = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"},
        {"role": "tool", "content": "1", "tool_call_id": "x"},
        {"role": "tool", "content": "2", "tool_call_id": "y"},
    ]
    merged = merge_consecutive_roles(messages)
    assert merged[0] == {"role": "user", "content": "a\n\nb"}
    assert [m["role"] for m in merged] == ["user", "assistant", "tool", "tool"]


def test_parse_tool_calls_formats():
    text, calls = parse_tool_calls('Sure. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>', ["add"])
    assert text == "Sure." and [(c["name"], c["args"]) for c in calls] == [("add", {"a": 1, "b": 2})]
    text, calls = parse_tool_calls('{"name": "add", "parameters": {"a": 1}}', ["add"])  # Llama-3.1
    assert text == "" and calls[0]["args"] == {"a": 1} and calls[0]["id"].startswith("call_")
    text, calls = parse_tool_calls('[{"name": "add", "arguments": "{\\"a\\": 2}"}]', ["add"])  # Mistral, string args
    assert calls[0]["args"] == {"a": 2}
    assert parse_tool_calls('{"name": "other", "arguments": {}}', ["add"]) == ('{"name": "other", "arguments": {}}', [])
    assert parse_tool_calls("Paris.", ["add"]) == ("Paris.", [])


# ----------------------------------------------------------------------------- the real model
@pytest.fixture(scope="module")
def core():
    return shared_core()


@pytest.fixture()
def chat(core):
    return core.as_chat_model(max_tokens=24)


class _Swap:
    """Use another chat template on the shared tokenizer for one block."""

    def __init__(self, core: Any, template: str) -> None:
        self.tokenizer, self.template = core.tokenizer, template

    def __enter__(self) -> None:
        self.saved = self.tokenizer.chat_template
        self.tokenizer.chat_template = self.template

    def __exit__(self, *exc: Any) -> None:
        self.tokenizer.chat_template = self.saved


class _Starts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.calls = 0

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1


@pytest.mark.slow
def test_factories(core):
    assert isinstance(core.as_chat_model(), LocalChatModel)
    assert isinstance(core.as_langchain(chat=True, max_tokens=5), LocalChatModel)
    assert core.as_langchain(chat=True, max_tokens=5).max_tokens == 5
    assert not isinstance(core.as_langchain(), LocalChatModel)  # the plain LLM stays


@pytest.mark.slow
def test_messages_go_through_the_models_own_chat_template_with_roles(core, chat):
    messages = [SystemMessage("Answer in one word."), HumanMessage(QUESTION)]
    as_dicts = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": QUESTION}]
    rendered, _ = core.render(as_dicts, chat=True)
    assert rendered == (
        "<|im_start|>system\nAnswer in one word.<|im_end|>\n<|im_start|>user\n"
        f"{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    )
    reply = chat.invoke(messages)
    assert isinstance(reply, AIMessage)
    assert reply.content == core.generate(as_dicts, chat=True, max_new_tokens=24)
    assert reply.usage_metadata["input_tokens"] == len(core.encode(as_dicts, chat=True))
    # a ChatPromptTemplate keeps its roles (the plain LLM would flatten them into one user turn)
    prompt = ChatPromptTemplate.from_messages([("system", "Answer in one word."), ("human", "{q}")])
    assert (prompt | chat).invoke({"q": QUESTION}).content == reply.content


@pytest.mark.slow
def test_history_roles_and_names(core, chat):
    history = [HumanMessage("Hi", name="ann"), AIMessage("Hello!"), HumanMessage("Capital of France?")]
    n = chat.get_num_tokens_from_messages(history)
    rendered, _ = core.render([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                               {"role": "user", "content": "Capital of France?"}], chat=True)
    assert "<|im_start|>assistant\nHello!<|im_end|>" in rendered
    assert n == len(core.tokenizer(rendered, add_special_tokens=False)["input_ids"])


@pytest.mark.slow
def test_template_without_system_role_gets_system_text_in_the_first_user_turn(core, chat):
    with _Swap(core, NO_SYSTEM_TEMPLATE):
        assert not core.supports_system_role
        merged = core.render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], chat=True)
        assert merged == core.render([{"role": "user", "content": "Be brief.\n\nHi"}], chat=True)
        # double messages that strict alternation rejects are joined instead of failing
        n = chat.get_num_tokens_from_messages(
            [SystemMessage("S"), HumanMessage("a"), HumanMessage("b"), AIMessage("c"), HumanMessage("d")]
        )
        assert n == len(core.encode([{"role": "user", "content": "S\n\na\n\nb"}, {"role": "assistant", "content": "c"},
                                     {"role": "user", "content": "d"}], chat=True))
    assert core.supports_system_role


@pytest.mark.slow
def test_stream_joins_to_invoke_with_usage_on_the_last_chunk_only(core, chat):
    with never_stops(core):  # runs to max_tokens (24) whatever the stand-in would write
        _stream_joins_to_invoke(core, chat)


def _stream_joins_to_invoke(core, chat):
    reply = chat.invoke("Write a short paragraph about the sea.")
    chunks = list(chat.stream("Write a short paragraph about the sea."))
    assert len(chunks) > 5  # incremental
    assert "".join(c.content for c in chunks) == reply.content
    assert chunks[-1].chunk_position == "last" and chunks[-1].content == ""
    assert all(c.usage_metadata is None for c in chunks[:-1])
    assert chunks[-1].usage_metadata == reply.usage_metadata
    assert chunks[-1].response_metadata["finish_reason"] == reply.response_metadata["finish_reason"] == "length"
    assert reply.usage_metadata["output_tokens"] == 24
    # a stop string taken from the reply: cut there, in both paths, never streamed past
    word = stop_string_after(core, core.token_ids(reply.content), 4)
    stopped = chat.invoke("Write a short paragraph about the sea.", stop=[word])
    assert stopped.content == reply.content[: reply.content.index(word)]
    assert stopped.response_metadata["finish_reason"] == "stop"
    assert "".join(c.content for c in chat.stream("Write a short paragraph about the sea.", stop=[word])) == stopped.content


@pytest.mark.slow
def test_chinese_stream_has_no_partial_characters(chat):
    chunks = [c.content for c in chat.stream("用中文写一句关于大海的话。", max_tokens=20)]
    assert all("\ufffd" not in c for c in chunks)
    assert "".join(chunks) == chat.invoke("用中文写一句关于大海的话。", max_tokens=20).content


@pytest.mark.slow
def test_async_paths_equal_sync_and_leaving_a_stream_early_stops_generation(core, chat):
    reply = chat.invoke("Hello")

    async def run() -> tuple[Any, list[str]]:
        areply = await chat.ainvoke("Hello")
        pieces = [c.content async for c in chat.astream("Hello")]
        stream = chat.astream("Write a long story about a dragon.", max_tokens=64)
        async for _ in stream:
            break
        await stream.aclose()
        return areply, pieces

    areply, pieces = asyncio.run(run())
    assert areply.content == reply.content == "".join(pieces)
    assert core._lock.acquire(timeout=10)  # the abandoned generation was stopped, not left running
    core._lock.release()


@pytest.mark.slow
def test_token_counts_use_the_models_tokenizer_offline(core, chat):
    text = "Sliding windows keep exact offsets. 滑动窗口。"
    expected = core.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert chat.get_token_ids(text) == expected
    assert chat.get_num_tokens(text) == len(expected)
    assert core.as_langchain().get_num_tokens(text) == len(expected)  # the plain LLM too (was gpt2 + hub)


@pytest.mark.slow
def test_call_options_and_bad_input(chat):
    assert chat.invoke(QUESTION, max_tokens=3).usage_metadata["output_tokens"] == 3
    with pytest.raises(ValueError, match="unknown option"):
        chat.invoke(QUESTION, top_k=3)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        chat.invoke(QUESTION, max_tokens=0)
    with pytest.raises(ValueError, match="max_tokens"):
        chat.core.as_chat_model(max_tokens=0)
    with pytest.raises(ValueError, match="serves the loaded"):
        chat.invoke(QUESTION, model="gpt-4o")
    with pytest.raises(ValueError, match="'image_url' content block"):
        chat.invoke([HumanMessage(content=[{"type": "text", "text": "What is this?"},
                                           {"type": "image_url", "image_url": {"url": "http://x/y.png"}}])])


@pytest.mark.slow
def test_tools_need_a_template_that_renders_them(core, chat):
    with pytest.raises(NotImplementedError, match="SmolLM2-135M-Instruct.*has no tool calling"):
        chat.bind_tools([Joke])
    with pytest.raises(NotImplementedError, match="has no tool calling"):
        chat.invoke([HumanMessage("hi"), AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "1"}]),
                     ToolMessage("3", tool_call_id="1")])
    with _Swap(core, TOOLS_TEMPLATE):
        assert core.supports_tools
        bound = chat.bind_tools([Joke])
        tools = bound.kwargs["tools"]
        assert tools[0]["function"]["name"] == "Joke"
        with_tools = chat.get_num_tokens_from_messages([HumanMessage("hi")], tools=[Joke])
        assert with_tools > chat.get_num_tokens_from_messages([HumanMessage("hi")]) + 20
        rendered, _ = core.render([{"role": "user", "content": "hi"}], chat=True, tools=tools)
        assert json.dumps(tools[0]["function"]["name"]) in rendered
        reply = bound.invoke("Tell me a joke.", max_tokens=8)  # the 135M model may or may not call it
        assert isinstance(reply, AIMessage) and reply.usage_metadata["output_tokens"] <= 8
        with pytest.raises(NotImplementedError, match="tool_choice"):
            chat.bind_tools([Joke], tool_choice="any")


# ----------------------------------------------------------------------------- structured output
needs_lmfe = needs("lmformatenforcer", how="pip install -e '.[all]' (lm-format-enforcer)")


@pytest.mark.slow
@needs_lmfe
def test_structured_output_is_constrained_to_the_schema(core):
    chat = core.as_chat_model(max_tokens=80)
    starts = _Starts()
    joke = chat.with_structured_output(Joke).invoke("Tell me a joke about cats.", config={"callbacks": [starts]})
    assert isinstance(joke, Joke) and joke.setup and joke.punchline
    assert starts.calls == 1  # one model call, no retries
    schema = convert_to_json_schema(Joke)  # the schema the class stands for: same prompt, same decode
    as_dict = chat.with_structured_output(schema).invoke("Tell me a joke about cats.")
    assert as_dict == joke.model_dump()
    # streaming gives growing partial objects ending in the full one
    parts = list(chat.with_structured_output(schema).stream("Tell me a joke about cats."))
    assert len(parts) > 3 and parts[-1] == as_dict
    raw = chat.with_structured_output(Joke, include_raw=True).invoke("Tell me a joke about cats.")
    assert raw["parsing_error"] is None and raw["parsed"] == joke
    assert json.loads(raw["raw"].content) == as_dict


@pytest.mark.slow
@needs_lmfe
def test_json_mode_gives_an_object_and_a_cut_reply_raises(core):
    chat = core.as_chat_model(max_tokens=60)
    out = chat.with_structured_output({"title": "Any", "type": "object"}, method="json_mode").invoke("Describe a cat as JSON.")
    assert isinstance(out, dict)
    with pytest.raises(OutputParserException):
        core.as_chat_model(max_tokens=4).with_structured_output(Joke).invoke("Tell me a joke about cats.")
    with pytest.raises(ValueError, match="method must be one of"):
        chat.with_structured_output(Joke, method="xml")


@pytest.mark.slow
def test_parse_and_retry_fails_clearly_after_the_allowed_attempts(core):
    # 3 new tokens can never close a Joke object: every attempt fails, deterministically.
    chat = core.as_chat_model(max_tokens=3, constrained_decoding=False, structured_output_retries=2)
    starts = _Starts()
    with pytest.raises(OutputParserException, match="no valid JSON for the schema in 3 attempt"):
        chat.with_structured_output(Joke).invoke("Tell me a joke about cats.", config={"callbacks": [starts]})
    assert starts.calls == 3
    raw = chat.with_structured_output(Joke, include_raw=True).invoke("Tell me a joke about cats.")
    assert raw["parsed"] is None and isinstance(raw["parsing_error"], OutputParserException)


@pytest.mark.slow
def test_parse_and_retry_feeds_the_error_back_and_validates(core):
    chat = core.as_chat_model(constrained_decoding=False, structured_output_retries=1)
    fake = FakeListChatModel(responses=['{"setup": "Why?"}', '{"setup": "Why?", "punchline": "Because."}'])
    seen: list = []

    class Recording(FakeListChatModel):
        def _call(self, messages, stop=None, run_manager=None, **kwargs):
            seen.append(messages)
            return super()._call(messages, stop, run_manager, **kwargs)

    fake = Recording(responses=fake.responses)
    joke = chat._retrying(fake, PydanticOutputParser(pydantic_object=Joke), Joke.model_json_schema(), False).invoke("joke")
    assert joke == Joke(setup="Why?", punchline="Because.")
    assert len(seen) == 2 and "not valid" in seen[1][-1].content and seen[1][-2].content == '{"setup": "Why?"}'
    # dict schemas: a JSON object with the required keys
    fake = Recording(responses=['["x"]', '{"setup": "a", "punchline": "b"}'])
    out = chat._retrying(fake, JsonOutputParser(), Joke.model_json_schema(), True).ainvoke("joke")
    out = asyncio.run(out)
    assert out["parsed"] == {"setup": "a", "punchline": "b"} and out["parsing_error"] is None
