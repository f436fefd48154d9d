"""Script a real model's choices so generation tests do not depend on what it writes.

Holds no tests. :func:`scripted` wraps a :class:`~swrag_integrations.llm.LocalLLM`'s model for
the length of a ``with`` block so that ``model.generate`` runs with one extra logits
processor: at chosen steps it forces a chosen token, and it can forbid tokens at every step
(e.g. all end-of-turn ids, for a model that never stops). Everything else (the loader's
generation config, eos ids, stopping criteria, streaming, decoding) is the package's own
code, running on the real model; only the model's *choice* of token is fixed, so a test of
the stopping logic cannot fail because the stand-in chose to stop earlier or later.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Mapping


class _Script:
    """A transformers logits processor: force ``force[step]`` at that new-token step, and
    never allow the ids in ``forbid``."""

    def __init__(self, prompt_len: int, force: Mapping[int, int], forbid: Iterable[int]) -> None:
        self.prompt_len, self.force, self.forbid = prompt_len, dict(force), sorted(set(forbid))

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        step = input_ids.shape[1] - self.prompt_len  # how many new tokens exist already
        scores = scores.clone()
        if self.forbid:
            scores[:, self.forbid] = float("-inf")
        if step in self.force:
            keep = scores[:, self.force[step]].clone()
            scores[:] = float("-inf")
            scores[:, self.force[step]] = keep if bool(keep.isfinite().all()) else 0.0
        return scores


class _ScriptedModel:
    """The real model, with :class:`_Script` added to every ``generate`` call."""

    def __init__(self, model: Any, force: Mapping[int, int], forbid: Iterable[int]) -> None:
        self._model, self._force, self._forbid = model, force, list(forbid)
        self.generate_calls = 0

    def generate(self, **kwargs: Any) -> Any:
        from transformers import LogitsProcessorList

        self.generate_calls += 1
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(_Script(kwargs["input_ids"].shape[1], self._force, self._forbid))
        return self._model.generate(**kwargs, logits_processor=processors)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._model(*args, **kwargs)


@contextlib.contextmanager
def scripted(llm: Any, *, force: Mapping[int, int] | None = None,
             forbid: Iterable[int] = ()) -> Iterator[_ScriptedModel]:
    """Within the block, ``llm``'s generation forces ``force`` (new-token step -> id) and
    never emits ``forbid``; the model is restored afterwards."""
    original = llm.model
    wrapper = _ScriptedModel(original, force or {}, forbid)
    llm.model = wrapper
    try:
        yield wrapper
    finally:
        llm.model = original


def never_stops(llm: Any) -> contextlib.AbstractContextManager:
    """A model that never emits any of ``llm``'s end-of-turn ids: it runs to ``max_new_tokens``."""
    return scripted(llm, forbid=llm.eos_token_ids)


def stop_string_after(llm: Any, ids: list[int], n: int) -> str:
    """A stop string that the generated ``ids`` first complete after their ``n``-th token:
    up to two characters of text (no space) that the later tokens add (``ValueError`` if
    they add none)."""
    head, full = llm.decode(ids[:n]), llm.decode(ids)
    rest = full[len(head):] if full.startswith(head) else full
    for i, c in enumerate(rest):
        if not c.isspace() and c != "\ufffd":
            two = rest[i:i + 2]
            return two if len(two) == 2 and not two[1].isspace() and two[1] != "\ufffd" else c
    raise ValueError(f"the generated text has nothing after token {n} to stop at: {full!r}")
