"""The one generation core shared by the LangChain and LlamaIndex wrappers.

`LocalLLM` owns a loaded causal LM and its tokenizer and knows how to

* turn a prompt (or a list of chat messages) into input ids, through the tokenizer's chat
  template when it has one;
* generate with the method's defaults (greedy, repetition penalty 1.1), stopping on the
  end-of-turn tokens (``<|eot_id|>`` for Llama-3, ``<|im_end|>`` for ChatML models) and
  on caller-supplied stop strings;
* return only the new text, either at once (`LocalLLM.generate`) or piece by piece
  (`LocalLLM.stream`); the streamed pieces always join to the non-streamed text;
* report token usage and why generation ended (`LocalLLM.generate_result`, the
  ``result`` of `LocalLLM.stream`), and constrain the output to a JSON schema
  (``json_schema=``, through lm-format-enforcer);
* answer many prompts that share a long prefix (a document + one chunk each, say) with
  the prefix run through the model once (`LocalLLM.prefix_cache`,
  `LocalLLM.generate_with_prefix`, `PrefixCache`).
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

from swrag_integrations.llm.generation import Generation, LoadInfo, Prompt

# End-of-turn tokens that chat models emit instead of (or besides) their eos token.
# Llama-3 instruct ends a turn with <|eot_id|> while eos is <|end_of_text|> (ipex-llm #10815).
END_OF_TURN_TOKENS = ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>")
_GENERATION_OPTIONS = ("max_new_tokens", "temperature", "repetition_penalty")


class GenerationStream(Iterator[str]):
    """The text pieces of `LocalLLM.stream`; `result` fills in as they arrive.

    Once the stream is exhausted ``result`` holds the joined text, the token counts and the
    finish reason. ``close()`` (or leaving a ``for`` loop over a ``with`` block) stops
    the generation.
    """

    def __init__(self, pieces: Iterator[str], result: Generation) -> None:
        self._pieces = pieces
        self.result = result

    def __next__(self) -> str:
        piece = next(self._pieces)
        self.result.text += piece
        return piece

    def close(self) -> None:
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> GenerationStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@lru_cache(maxsize=32)
def _template_facts(template: str) -> tuple[bool, bool]:
    """``(takes a system role, renders tools)`` for a chat template source.

    The system role is probed by rendering a system message with a marker: templates that
    raise on it (Gemma, Mistral v1) or drop it do not take one. Tool support is read from
    the template source: a template that never mentions ``tools`` cannot show them.
    """
    marker = "\u27e6SWRAG-SYSTEM\u27e7"
    try:
        text = _compile_template(template).render(
            messages=[{"role": "system", "content": marker}, {"role": "user", "content": "x"}],
            add_generation_prompt=True,
            bos_token="",
            eos_token="",
        )
        system = marker in text
    except Exception:  # noqa: BLE001 - any template error means "no system role"
        system = False
    return system, bool(re.search(r"\btools\b", template))


@lru_cache(maxsize=32)
def _compile_template(template: str) -> Any:
    """The chat template compiled the way transformers compiles it (sandboxed jinja2)."""
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def merge_system_into_user(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages without system turns: their text opens the first user turn.

    All system texts (joined by blank lines) go before the first user message's content,
    separated from it by a blank line; without a user message they become one.
    """
    system = [str(m["content"]) for m in messages if m["role"] == "system" and str(m["content"])]
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if not system:
        return rest
    text = "\n\n".join(system)
    for message in rest:
        if message["role"] == "user":
            message["content"] = f"{text}\n\n{message['content']}" if str(message["content"]) else text
            return rest
    return [{"role": "user", "content": text}, *rest]


def merge_consecutive_roles(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive text messages of one role joined into one (blank line between)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        plain = set(message) <= {"role", "content"}
        if out and plain and set(out[-1]) <= {"role", "content"} and out[-1]["role"] == message["role"]:
            out[-1]["content"] = f"{out[-1]['content']}\n\n{message['content']}"
        else:
            out.append(dict(message))
    return out


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string; also say whether one was found."""
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    return (text[: min(hits)], True) if hits else (text, False)


def _held_back(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that could still grow into a stop string."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:size]):
                longest = size
                break
    return longest


def _stopping_criteria(check: Any) -> Any:
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Criterion(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
            return bool(check(input_ids))

    return StoppingCriteriaList([_Criterion()])


def whole_chars(text: str) -> str:
    """``text`` without the U+FFFD that a byte-level detokeniser puts for bytes that are
    not (yet) a whole character.

    A model writes a multi-byte character (CJK, emoji) as several byte tokens; until the
    last one arrives, and for ever if it never does (a garbled answer such as bytes of
    one character followed by ``lovely``; generation cut at ``max_new_tokens``), the
    tokenizer decodes the stray bytes to U+FFFD. They are not text the model wrote, so
    they are dropped wherever they are; a partial character at the end reappears whole
    once its last byte arrives. Generated text therefore never contains U+FFFD.
    """
    return text.replace("\ufffd", "")


class _QueueStreamer:
    """transformers streamer that forwards the generated token ids to a queue."""

    def __init__(self) -> None:
        self.queue: queue.Queue[list[int] | None] = queue.Queue()
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:  # generate() first pushes the prompt itself
            self._prompt_seen = True
            return
        self.queue.put(value.reshape(-1).tolist())

    def end(self) -> None:
        self.queue.put(None)


class LocalLLM:
    """A loaded local causal LM with greedy-by-default, stop-aware generation.

    Use `generate` / `stream` directly, or get framework objects with
    `as_langchain` and `as_llamaindex` (thin wrappers around this object).
    `load_llama3` builds one; construct it directly only around a model already loaded.

    Args:
        model: A loaded transformers (or IPEX-LLM) causal LM.
        tokenizer: Its tokenizer.
        device: Where the model runs (``"cpu"`` or ``"xpu"``).
        max_new_tokens: Default number of new tokens per call.
        temperature: Default sampling temperature (0: greedy).
        repetition_penalty: Default repetition penalty.
        system_prompt: System message added to chat-templated prompts.
        stop: Stop strings applied to every call (besides the end-of-turn tokens).
        info: How the model was loaded (`LoadInfo`); ``None`` when unknown.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str = "cpu",
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        repetition_penalty: float = 1.1,
        system_prompt: str | None = None,
        stop: Sequence[str] | None = None,
        info: LoadInfo | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.repetition_penalty = repetition_penalty
        self.system_prompt = system_prompt
        self.stop = list(stop or [])
        self.info = info or LoadInfo(source="<in-memory>", backend="transformers", device=device)
        self._vocab: dict[str, int] = tokenizer.get_vocab()
        self.eos_token_ids = self._collect_eos_ids()
        # One generation at a time per model: concurrent callers (abatch, threads) queue here.
        self._lock = threading.Lock()
        self._json_tokenizer_data: Any = None

    # ----------------------------------------------------------------- prompt handling
    @property
    def has_chat_template(self) -> bool:
        """Whether the tokenizer ships a chat template (instruct / chat models)."""
        return bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def supports_system_role(self) -> bool:
        """Whether the chat template renders system messages (see `render`)."""
        return not self.has_chat_template or _template_facts(self.tokenizer.chat_template)[0]

    @property
    def supports_tools(self) -> bool:
        """Whether the chat template renders tool definitions (it uses a ``tools`` variable)."""
        return self.has_chat_template and _template_facts(self.tokenizer.chat_template)[1]

    @property
    def name(self) -> str:
        """The model's source (path or hub id), used as its name in errors and metadata."""
        return self.info.source

    @property
    def context_window(self) -> int:
        config = getattr(self.model, "config", None)
        return int(getattr(config, "max_position_embeddings", 0) or 2048)

    def _token_id(self, token: str) -> int | None:
        token_id = self._vocab.get(token)
        return None if token_id is None else int(token_id)

    def _collect_eos_ids(self) -> list[int]:
        ids: list[int] = []
        sources = [
            self.tokenizer.eos_token_id,
            getattr(getattr(self.model, "generation_config", None), "eos_token_id", None),
            getattr(getattr(self.model, "config", None), "eos_token_id", None),
            *(self._token_id(t) for t in END_OF_TURN_TOKENS),
        ]
        for value in sources:
            for token_id in value if isinstance(value, (list, tuple)) else [value]:
                if token_id is not None and int(token_id) not in ids:
                    ids.append(int(token_id))
        return ids

    def _messages(self, prompt: Prompt) -> list[dict[str, Any]]:
        if isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}]
        else:
            messages = []
            for m in prompt:
                message = dict(m)
                message["role"] = str(m["role"])
                message["content"] = "" if m.get("content") is None else str(m["content"])
                messages.append(message)
        if self.system_prompt and not any(m["role"] == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        if self.has_chat_template and not self.supports_system_role:
            messages = merge_system_into_user(messages)
        return messages

    def _apply_template(self, messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> str:
        if not tools:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if not self.supports_tools:
            raise ValueError(f"the chat template of {self.name} does not render tools")
        # transformers 4.37's apply_chat_template cannot pass tools to the template.
        return _compile_template(self.tokenizer.chat_template).render(
            messages=messages, tools=list(tools), add_generation_prompt=True, **self.tokenizer.special_tokens_map
        )

    def render(
        self, prompt: Prompt, *, chat: bool | None = None, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> tuple[str, bool]:
        """The prompt as text, and whether the tokenizer must add its special tokens.

        ``chat=None`` applies the chat template when the tokenizer has one, ``chat=True``
        always formats as chat, ``chat=False`` takes the text as is. Without a chat
        template, messages are rendered as ``role: content`` lines.

        With a chat template that has no system role (it raises on one or drops it), the
        system text opens the first user turn instead (`merge_system_into_user`);
        a template that rejects consecutive turns of one role (strict alternation) gets
        them joined (`merge_consecutive_roles`). ``tools`` (OpenAI-style function
        definitions) are passed to templates that render them.
        """
        if chat is None:
            chat = self.has_chat_template or not isinstance(prompt, str)
        if not chat:
            if not isinstance(prompt, str):
                raise ValueError("chat=False needs a plain string prompt")
            return prompt, True
        messages = self._messages(prompt)
        if self.has_chat_template:
            from jinja2.exceptions import TemplateError

            try:
                return self._apply_template(messages, tools), False
            except TemplateError:
                merged = merge_consecutive_roles(messages)
                if len(merged) == len(messages):
                    raise
                return self._apply_template(merged, tools), False
        if tools:
            raise ValueError(f"{self.name} has no chat template, so it cannot be given tools")
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: ", True

    def encode(
        self, prompt: Prompt, *, chat: bool | None = None, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> list[int]:
        """Token ids for ``prompt`` (rendered as `render` says)."""
        text, special = self.render(prompt, chat=chat, tools=tools)
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def token_ids(self, text: str) -> list[int]:
        """The model's own token ids of ``text`` (no special tokens, no template)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of generated ids: whole characters only (`whole_chars`), special
        tokens dropped, spacing left untouched."""
        return whole_chars(self.tokenizer.decode(
            list(token_ids), skip_special_tokens=True, clean_up_tokenization_spaces=False
        ))

    # ----------------------------------------------------------------- generation
    def _split_stops(self, stop: Sequence[str] | None) -> tuple[list[int], list[str]]:
        """Stop strings that are single special tokens become extra eos ids."""
        token_ids, strings = list(self.eos_token_ids), []
        for item in [*self.stop, *(stop or [])]:
            token_id = self._token_id(item)
            tok = self.tokenizer
            if token_id is not None and (item in tok.all_special_tokens or item in tok.added_tokens_encoder):
                token_ids.append(token_id)
            elif item:
                strings.append(item)
        return token_ids, strings

    def _generation_config(self, stop: Sequence[str] | None, options: Mapping[str, Any]) -> tuple[Any, list[str]]:
        """``GenerationConfig`` for one call, and the stop strings checked on the text."""
        from transformers import GenerationConfig

        unknown = set(options) - set(_GENERATION_OPTIONS)
        if unknown:
            raise ValueError(f"unknown generation option(s) {sorted(unknown)}; use {_GENERATION_OPTIONS}")
        max_new_tokens = int(options.get("max_new_tokens") or self.max_new_tokens)
        temperature = float(options.get("temperature", self.temperature) or 0.0)
        penalty = float(options.get("repetition_penalty") or self.repetition_penalty)
        eos_ids, stop_strings = self._split_stops(stop)
        pad_id = self.tokenizer.pad_token_id
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=temperature > 0,
            repetition_penalty=penalty,
            eos_token_id=eos_ids,
            pad_token_id=eos_ids[0] if pad_id is None and eos_ids else pad_id,
            **({"temperature": temperature} if temperature > 0 else {}),
        )
        return config, stop_strings

    def _ids_kwargs(self, ids: Sequence[int], config: Any) -> dict[str, Any]:
        import torch

        input_ids = torch.tensor([list(ids)], device=self.device)
        return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "generation_config": config}

    def _json_constraint(self, schema: Mapping[str, Any]) -> Any:
        """``prefix_allowed_tokens_fn`` that only lets tokens through that keep the output a
        prefix of a JSON value valid for ``schema`` (lm-format-enforcer's ``TokenEnforcer``)."""
        try:
            from lmformatenforcer import JsonSchemaParser, TokenEnforcer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "json_schema= needs lm-format-enforcer (pip install lm-format-enforcer)"
            ) from exc
        if not isinstance(schema, Mapping):
            raise TypeError(f"json_schema must be a JSON schema dict, got {type(schema).__name__}")
        if self._json_tokenizer_data is None:  # ~4 s for a 49k vocabulary; once per model
            self._json_tokenizer_data = self._enforcer_tokenizer_data()
        enforcer = TokenEnforcer(self._json_tokenizer_data, JsonSchemaParser(dict(schema)))

        def allowed(batch_id: int, ids: Any) -> list[int]:
            return list(enforcer.get_allowed_tokens(ids.tolist()).allowed_tokens)

        return allowed

    def _enforcer_tokenizer_data(self) -> Any:
        """The tokenizer as lm-format-enforcer's ``TokenEnforcerTokenizerData`` sees it: each
        regular token's text as it reads after another token (a word-initial token keeps
        its leading space, which it loses when decoded alone) and whether it starts a word.

        Built here through lm-format-enforcer's extension API rather than its
        ``integrations.transformers`` module: that module (0.11.3, the latest release)
        imports ``transformers.tokenization_utils.PreTrainedTokenizerBase``, which
        transformers 5 no longer has, so it fails to import there.
        """
        from lmformatenforcer import TokenEnforcerTokenizerData

        tok = self.tokenizer
        anchor = tok.encode("0", add_special_tokens=False)[-1]  # decodes to one character
        special = set(tok.all_special_ids)
        size = len(tok)
        regular = []
        for token_id in range(size):
            if token_id in special:
                continue
            after = tok.decode([anchor, token_id])[1:]
            regular.append((token_id, after, len(after) > len(tok.decode([token_id]))))
        return TokenEnforcerTokenizerData(regular, lambda ids: tok.decode(ids).rstrip("\ufffd"), tok.eos_token_id,
                                          False, size)

    def _generate_kwargs(
        self,
        prompt: Prompt,
        stop: Sequence[str] | None,
        chat: bool | None,
        options: Mapping[str, Any],
        *,
        json_schema: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[dict[str, Any], list[str]]:
        config, stop_strings = self._generation_config(stop, options)
        kwargs = self._ids_kwargs(self.encode(prompt, chat=chat, tools=tools), config)
        if json_schema is not None:
            kwargs["prefix_allowed_tokens_fn"] = self._json_constraint(json_schema)
        return kwargs, stop_strings

    def _run_generate(self, kwargs: dict[str, Any], stops: list[str]) -> list[int]:
        """New token ids of one ``model.generate`` call (halts once a stop string appears)."""
        import torch

        start = kwargs["input_ids"].shape[1]
        if stops:
            kwargs["stopping_criteria"] = _stopping_criteria(
                lambda ids: cut_at_stop(self.decode(ids[0, start:]), stops)[1]
            )
        with self._lock, torch.no_grad():
            output = self.model.generate(**kwargs)
        return output[0, start:].tolist()

    def _finish_reason(self, ids: Sequence[int], stopped: bool, max_new_tokens: int) -> str:
        if stopped or (ids and int(ids[-1]) in self.eos_token_ids):
            return "stop"
        return "length" if len(ids) >= max_new_tokens else "stop"

    def _finish_text(self, ids: Sequence[int], stops: list[str]) -> str:
        return cut_at_stop(self.decode(ids), stops)[0]

    def generate_ids(
        self, prompt: Prompt, *, stop: Sequence[str] | None = None, chat: bool | None = None, **options: Any
    ) -> list[int]:
        """New token ids for ``prompt`` (generation halts once a stop string appears)."""
        kwargs, stops = self._generate_kwargs(prompt, stop, chat, options)
        return self._run_generate(kwargs, stops)

    def generate(
        self,
        prompt: Prompt,
        *,
        stop: Sequence[str] | None = None,
        chat: bool | None = None,
        json_schema: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """Generated text only (never the prompt), cut before the first stop string.

        ``options``: ``max_new_tokens``, ``temperature`` (0 = greedy), ``repetition_penalty``.
        ``json_schema``: constrain the output to JSON valid for this schema (see
        `generate_result`).
        """
        return self.generate_result(prompt, stop=stop, chat=chat, json_schema=json_schema, **options).text

    def generate_result(
        self,
        prompt: Prompt,
        *,
        stop: Sequence[str] | None = None,
        chat: bool | None = None,
        json_schema: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> Generation:
        """As `generate`, with the prompt / completion token counts and finish reason.

        ``json_schema`` (a JSON schema dict; ``{"type": "object"}`` for any object) makes
        decoding constrained by lm-format-enforcer: at every step only tokens that keep
        the text a prefix of a valid JSON value are allowed, so the output is valid JSON
        for the schema unless ``max_new_tokens`` cuts it (``finish_reason == "length"``).
        ``tools``: OpenAI-style function definitions rendered by a template that supports
        them (`supports_tools`).
        """
        kwargs, stops = self._generate_kwargs(prompt, stop, chat, options, json_schema=json_schema, tools=tools)
        ids = self._run_generate(kwargs, stops)
        text, stopped = cut_at_stop(self.decode(ids), stops)
        return Generation(
            text=text,
            prompt_tokens=int(kwargs["input_ids"].shape[1]),
            completion_tokens=len(ids),
            finish_reason=self._finish_reason(ids, stopped, kwargs["generation_config"].max_new_tokens),
        )

    # ----------------------------------------------------------------- shared prefixes
    def prefix_cache(self, prefix: Prompt, *, chat: bool | None = None) -> PrefixCache:
        """Run ``prefix`` through the model once and keep its KV cache for many suffixes.

        ``cache.generate(suffix)`` then equals ``self.generate(prefix + suffix)`` (for chat
        messages: the suffix extends the last message's content) while only the suffix part
        of the prompt goes through the model. See `PrefixCache`.
        """
        return PrefixCache(self, prefix, chat=chat)

    def generate_with_prefix(
        self,
        prefix: Prompt,
        suffixes: Sequence[str],
        *,
        stop: Sequence[str] | None = None,
        chat: bool | None = None,
        **options: Any,
    ) -> list[str]:
        """One answer per suffix for the prompts ``prefix + suffix``, the prefix run once.

        Same result as ``[self.generate(prefix + s, stop=stop, chat=chat, **options) for s
        in suffixes]`` (same prompt ids, stop strings, eos / end-of-turn tokens, repetition
        penalty and options), but the shared prefix is computed once and its KV cache copied
        for every suffix. With IPEX-LLM low-bit weights the logits of a prompt computed in
        two passes differ from one pass (its kernels are not batch-invariant; the measured
        difference is in docs/how-to/local-llm.md), so answers may differ in wording; with
        plain transformers the greedy answers are identical.
        """
        cache = self.prefix_cache(prefix, chat=chat)
        return [cache.generate(suffix, stop=stop, **options) for suffix in suffixes]

    def stream(
        self,
        prompt: Prompt,
        *,
        stop: Sequence[str] | None = None,
        chat: bool | None = None,
        json_schema: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> GenerationStream:
        """Yield the generated text piece by piece as tokens arrive.

        Text that might be the start of a stop string, or an incomplete UTF-8 character,
        is held back until it is resolved, so the pieces join exactly to `generate`.
        Bad options raise here, before iteration starts. The returned
        `GenerationStream` carries the token counts and finish reason in
        ``.result`` once exhausted; ``json_schema`` / ``tools`` as in `generate_result`.
        """
        kwargs, stops = self._generate_kwargs(prompt, stop, chat, options, json_schema=json_schema, tools=tools)
        result = Generation(prompt_tokens=int(kwargs["input_ids"].shape[1]))
        return GenerationStream(self._stream_pieces(kwargs, stops, result), result)

    def _stream_pieces(self, kwargs: dict[str, Any], stops: list[str], result: Generation) -> Iterator[str]:
        streamer = _QueueStreamer()
        cancelled = threading.Event()
        failure: list[BaseException] = []
        kwargs["streamer"] = streamer
        kwargs["stopping_criteria"] = _stopping_criteria(lambda ids: cancelled.is_set())
        max_new_tokens = kwargs["generation_config"].max_new_tokens

        def run() -> None:
            try:
                with self._lock:
                    self.model.generate(**kwargs)
            except BaseException as exc:  # re-raised in the consuming thread
                failure.append(exc)
                streamer.end()

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        ids: list[int] = []
        emitted = 0
        try:
            while (chunk := streamer.queue.get()) is not None:
                ids.extend(chunk)
                result.completion_tokens = len(ids)
                text, stopped = cut_at_stop(self.decode(ids), stops)
                # decode() holds a partial multi-byte character back (whole_chars); a
                # possible start of a stop string is held back here.
                end = len(text) if stopped else len(text) - _held_back(text, stops)
                if end > emitted:
                    yield text[emitted:end]
                    emitted = end
                if stopped:
                    result.finish_reason = "stop"
                    return
            if failure:
                raise failure[0]
            result.finish_reason = self._finish_reason(ids, False, max_new_tokens)
            text = cut_at_stop(self.decode(ids), stops)[0]
            if len(text) > emitted:
                yield text[emitted:]
        finally:
            cancelled.set()
            worker.join()

    # ----------------------------------------------------------------- framework wrappers
    def as_langchain(self, *, chat: bool = False, **kwargs: Any) -> Any:
        """A LangChain ``LLM`` (see `swrag_integrations.llm.langchain_llm.LangChainLLM`;
        needs LangChain only),
        or with ``chat=True`` the chat model (`as_chat_model`)."""
        if chat:
            return self.as_chat_model(**kwargs)
        from swrag_integrations.llm.langchain_llm import LangChainLLM

        return LangChainLLM(core=self, **kwargs)

    def as_chat_model(self, **kwargs: Any) -> Any:
        """A LangChain chat model (see `swrag_integrations.llm.langchain_chat.LocalChatModel`):
        messages through the model's chat template, streaming, usage metadata, token
        counting with the model's tokenizer and ``with_structured_output``."""
        from swrag_integrations.llm.langchain_chat import LocalChatModel

        return LocalChatModel(core=self, **kwargs)

    def as_llamaindex(self, **kwargs: Any) -> Any:
        """A LlamaIndex ``CustomLLM`` (see `swrag_integrations.llm.llamaindex_llm.LlamaIndexLLM`;
        needs LlamaIndex only)."""
        from swrag_integrations.llm.llamaindex_llm import LlamaIndexLLM

        return LlamaIndexLLM(core=self, **kwargs)

    def __repr__(self) -> str:
        i = self.info
        return f"LocalLLM(source={i.source!r}, backend={i.backend!r}, device={i.device!r}, low_bit={i.low_bit!r})"


_SENTINEL = "\u27e6SWRAG-SUFFIX\u27e7"


def _copy_cache(cache: Any, length: int | None = None) -> Any:
    """An independent copy of ``past_key_values`` (legacy tuple or ``DynamicCache``-like),
    cut to its first ``length`` positions when given.

    IPEX-LLM's caches pre-allocate storage and append in place, so the copy gets fresh
    contiguous tensors (the next append then reallocates instead of writing into the
    shared prefix). Keys and values of a causal model at position ``i`` depend only on
    tokens ``<= i``, so a cut cache equals the cache of the shorter prefix.
    """
    import copy

    import torch

    def clone(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if length is not None:
            if t.dim() != 4:
                raise ValueError(f"cannot cut a KV tensor of shape {tuple(t.shape)}")
            t = t[:, :, :length]
        return t.clone(memory_format=torch.contiguous_format)

    if isinstance(cache, tuple):
        return tuple(tuple(clone(t) for t in layer) for layer in cache)
    if hasattr(cache, "layers") and hasattr(cache, "crop") and hasattr(cache, "get_seq_length"):
        # transformers >= 4.56 (5.x): a Cache of layers, cut with its own crop(-tokens_to_remove)
        new = copy.deepcopy(cache)
        if length is not None:
            extra = new.get_seq_length() - length
            if extra < 0:
                raise ValueError(f"cannot cut a cache of {new.get_seq_length()} positions to {length}")
            if extra:
                new.crop(-extra)
        return new
    if hasattr(cache, "key_cache") and hasattr(cache, "value_cache"):
        new = copy.copy(cache)
        new.key_cache = [clone(t) for t in cache.key_cache]
        new.value_cache = [clone(t) for t in cache.value_cache]
        if length is not None:
            for attr in ("seen_tokens", "_seen_tokens"):  # transformers 4.37 / >= 4.39
                if isinstance(getattr(cache, attr, None), int):
                    setattr(new, attr, length)
        return new
    if length is not None:
        raise ValueError(f"cannot cut a {type(cache).__name__}")
    return copy.deepcopy(cache)


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PrefixCache:
    """The KV cache of a prompt prefix, reused by many prompts that start with it.

    Made by `LocalLLM.prefix_cache`. The prompt of ``generate(suffix)`` is exactly
    the one ``llm.generate(prefix + suffix)`` would use: it is rendered and tokenized as a
    whole (chat template, system prompt and all), and the cached prefix is the longest run
    of leading tokens it shares with the prefix alone. Where tokenization merges the last
    prefix characters with the suffix (``"\\n" + "\\n"`` becomes one token), the cache is
    cut before the merge and the rest is run with the suffix, so the input ids — and with
    batch-invariant kernels the output — never differ from the plain call.

    The prefix is run through the model once, when the object is made (``passes == 1``);
    every `generate` call works on its own copy of the cache (generation appends
    to it). ``reused`` counts calls that used the cache, ``uncached`` calls that could
    not (a prompt sharing no token with the prefix).

    Attributes:
        prefix_ids: token ids of the prompt up to where the suffix goes.
        suffix_template: rendered text that follows the suffix (e.g. the end of the user
            turn and the assistant header of a chat template).
    """

    def __init__(self, llm: LocalLLM, prefix: Prompt, *, chat: bool | None = None) -> None:
        if not isinstance(prefix, str) and not prefix:
            raise ValueError("prefix messages must not be empty")
        self.llm = llm
        self.prefix = prefix
        self.chat = chat
        self.prefix_ids, self.suffix_template = self._split()
        self.passes = 0
        self.reused = 0
        self.uncached = 0
        self._past: Any = None
        if self.prefix_ids:
            self._past = self._run_prefix()
            self.passes = 1

    # -------------------------------------------------------------- prompts
    def full_prompt(self, suffix: str) -> Prompt:
        """The whole prompt of ``suffix``: the prefix text (or last message) extended by it."""
        if isinstance(self.prefix, str):
            return self.prefix + suffix
        messages = [dict(m) for m in self.prefix]
        messages[-1]["content"] = str(messages[-1]["content"]) + suffix
        return messages

    def prompt_ids(self, suffix: str) -> list[int]:
        """Token ids of the whole prompt (identical to ``llm.encode(prefix + suffix)``)."""
        return self.llm.encode(self.full_prompt(suffix), chat=self.chat)

    def _split(self) -> tuple[list[int], str]:
        """Ids of the prompt before the suffix position, and the rendered text after it."""
        text, special = self.llm.render(self.full_prompt(_SENTINEL), chat=self.chat)
        if text.count(_SENTINEL) != 1:
            raise ValueError("could not locate the suffix position in the rendered prompt")
        before, after = text.split(_SENTINEL)
        return list(self.llm.tokenizer(before, add_special_tokens=special)["input_ids"]), after

    def _run_prefix(self) -> Any:
        import torch

        with self.llm._lock, torch.no_grad():
            out = self.llm.model(input_ids=torch.tensor([self.prefix_ids], device=self.llm.device), use_cache=True)
        if out.past_key_values is None:
            raise ValueError("the model returned no past_key_values")
        return out.past_key_values

    # -------------------------------------------------------------- generation
    def generate_ids(self, suffix: str, *, stop: Sequence[str] | None = None, **options: Any) -> list[int]:
        """New token ids for ``prefix + suffix`` (as `LocalLLM.generate_ids`)."""
        llm = self.llm
        config, stops = llm._generation_config(stop, options)
        ids = self.prompt_ids(suffix)
        kwargs = llm._ids_kwargs(ids, config)
        shared = min(_common_length(self.prefix_ids, ids), len(ids) - 1)
        past = None
        if self._past is not None and shared > 0:
            try:
                past = _copy_cache(self._past, None if shared == len(self.prefix_ids) else shared)
            except ValueError:
                past = None  # a cache type that cannot be cut: run this prompt whole
        if past is not None:
            kwargs["past_key_values"] = past
            self.reused += 1
        else:
            self.uncached += 1
        return llm._run_generate(kwargs, stops)

    def generate(self, suffix: str, *, stop: Sequence[str] | None = None, **options: Any) -> str:
        """Generated text for ``prefix + suffix`` (as `LocalLLM.generate`)."""
        _, stops = self.llm._split_stops(stop)
        return self.llm._finish_text(self.generate_ids(suffix, stop=stop, **options), stops)

    def __repr__(self) -> str:
        return f"PrefixCache({len(self.prefix_ids)} prefix tokens, passes={self.passes}, reused={self.reused})"
