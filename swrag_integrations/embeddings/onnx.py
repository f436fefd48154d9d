"""ONNX Runtime backend for a sentence-transformers folder (by default the bundled MiniLM).

The ONNX graph is written locally from the packaged weights on first use (the BERT
encoder of the Transformer module, stated with ``onnx.helper`` from ``model.safetensors``
by `onnx_bert`, no torch; the tokenizer, pooling and normalisation are not part of
the graph) and cached under ``$SWRAG_CACHE/onnx`` (``~/.cache/swrag/onnx``). Nothing comes
from a model hub.

Variants:

* ``"fp32"``: the exported graph as it is (cosine 1.0000 to sentence-transformers).
* ``"int8"``: dynamic int8 quantization of the weight matrices (``onnxruntime.quantization``,
  ``per_channel=True``, ``MatMul`` only: the embedding tables stay fp32, and so does the
  first layer's feed-forward output projection, the single most sensitive matrix), built
  from the cached fp32 export (both stay in the cache: 90 + 60 MB for MiniLM).
  See ``benchmarks/bench_embeddings.py`` for speed and cosine to the reference.

Cache layout and safety: one folder per ``(model files, variant, export code,
onnx/onnxruntime versions)`` key, written in a temporary folder and renamed into
place, with a ``manifest.json`` holding the key and the SHA-256 of ``model.onnx``. A
folder whose manifest is missing, names another key or does not match the file is
discarded and rebuilt.

Inference needs only ``onnxruntime``, ``tokenizers`` and ``numpy``; the export (once per
key) also needs ``onnx`` and ``safetensors`` -- never torch or transformers (the ``[onnx]``
extra: ``pip install 'swrag-integrations[onnx]'``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from swrag_integrations.core.paths import private_dir

__all__ = [
    "EXPORT_VERSION",
    "ONNX_VARIANTS",
    "OnnxSentenceEncoder",
    "SentenceModelConfig",
    "ensure_onnx_model",
    "model_fingerprint",
    "read_sentence_model_config",
]

#: Bump when the exported or quantized graph changes for the same inputs (part of the cache key).
#: 2: the graph is written from the safetensors weights (`onnx_bert`), not by torch.
EXPORT_VERSION = 2
ONNX_VARIANTS = ("fp32", "int8")
_OPSET = 17
_MANIFEST = "manifest.json"
_MODEL_FILE = "model.onnx"
_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Quantization recipe (part of the cache key). Measured on 1000 chunks of the shared
# corpus: quantizing every MatMul weight gives mean cosine 0.990 (min 0.968) to the fp32
# vectors; keeping layer 0's FFN output projection in fp32 gives 0.993 (min 0.982) for
# about 10% of the int8 speed. The embedding tables (Gather) are left in fp32 (quantizing
# them costs 0.001 of mean cosine and gains nothing in speed).
_INT8_RECIPE = {
    "per_channel": True,
    "weight_type": "QInt8",
    "op_types": ["MatMul"],
    "keep_fp32": ["/encoder/layer.0/output/dense/MatMul"],
}
# ONNX Runtime's SkipLayerNormalization kernel was slower than the Add + LayerNormalization
# it replaces: without that fusion the int8 model embeds 15-20% more chunks per CPU-second
# (fp32: no difference). The vectors are the same.
_DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)
_POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len")  # sentence-transformers' concat order
_SUPPORTED_MODULES = {
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
}
_lock = threading.RLock()  # one export at a time in this process (int8 builds fp32 inside it)


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _default_cache_dir() -> Path:
    from swrag_integrations.llm.loader import default_cache_dir

    return default_cache_dir()


@dataclass(frozen=True)
class SentenceModelConfig:
    """What the ONNX backend needs from a sentence-transformers folder.

    Attributes:
        path: the folder (``modules.json`` inside).
        transformer_path: folder of the Transformer module (``config.json``, tokenizer).
        max_seq_length: truncation length in word pieces (special tokens included).
        do_lower_case: lower-case texts before tokenizing (``sentence_bert_config.json``).
        pooling: pooling modes, in sentence-transformers' concatenation order.
        normalize: the folder ends with a ``Normalize`` module.
        dimension: output vector size.
    """

    path: Path
    transformer_path: Path
    max_seq_length: int
    do_lower_case: bool
    pooling: tuple[str, ...]
    normalize: bool
    dimension: int


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_sentence_model_config(path: str | os.PathLike) -> SentenceModelConfig:
    """Read ``modules.json`` and the module configs of a sentence-transformers folder.

    Raises:
        ValueError: the folder has modules the ONNX backend does not reproduce (e.g.
            ``Dense``) or a pooling mode other than cls/max/mean/mean_sqrt_len.
    """
    root = Path(path)
    modules = _read_json(root / "modules.json")
    types = [m["type"] for m in modules]
    unsupported = [t for t in types if t not in _SUPPORTED_MODULES]
    if unsupported or types[:1] != ["sentence_transformers.models.Transformer"]:
        raise ValueError(f"the ONNX backend supports Transformer + Pooling (+ Normalize) folders, got {types}")
    transformer = root / modules[0]["path"]
    st_config = {}
    for name in ("sentence_bert_config.json",):
        if (transformer / name).is_file():
            st_config = _read_json(transformer / name)
    hf_config = _read_json(transformer / "config.json")
    max_len = st_config.get("max_seq_length")
    if max_len is None:
        tok_config = _read_json(transformer / "tokenizer_config.json") if (transformer / "tokenizer_config.json").is_file() else {}
        max_len = min(hf_config.get("max_position_embeddings", 512), tok_config.get("model_max_length", 512))
    pooling: tuple[str, ...] = ("mean",)
    dimension = int(hf_config["hidden_size"])
    pool_module = next((m for m in modules if m["type"] == "sentence_transformers.models.Pooling"), None)
    if pool_module is not None:
        pool = _read_json(root / pool_module["path"] / "config.json")
        if pool.get("pooling_mode_weightedmean_tokens") or pool.get("pooling_mode_lasttoken"):
            raise ValueError("the ONNX backend does not implement weightedmean/lasttoken pooling")
        flags = {
            "cls": pool.get("pooling_mode_cls_token", False),
            "max": pool.get("pooling_mode_max_tokens", False),
            "mean": pool.get("pooling_mode_mean_tokens", False),
            "mean_sqrt_len": pool.get("pooling_mode_mean_sqrt_len_tokens", False),
        }
        pooling = tuple(m for m in _POOLING_MODES if flags[m])
        if not pooling:
            raise ValueError(f"no pooling mode set in {root / pool_module['path']}")
        dimension = int(pool.get("word_embedding_dimension", dimension)) * len(pooling)
    return SentenceModelConfig(
        path=root,
        transformer_path=transformer,
        max_seq_length=int(max_len),
        do_lower_case=bool(st_config.get("do_lower_case", False)),
        pooling=pooling,
        normalize="sentence_transformers.models.Normalize" in types,
        dimension=dimension,
    )


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def model_fingerprint(path: str | os.PathLike) -> str:
    """SHA-256 over the relative names and contents of the model folder's files.

    Hidden files and ``README*`` are skipped (they do not change the vectors).
    """
    root = Path(path)
    digest = hashlib.sha256()
    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and not p.name.upper().startswith("README")
    )
    for p in files:
        digest.update(p.relative_to(root).as_posix().encode() + b"\0")
        digest.update(_file_sha256(p).encode() + b"\n")
    return digest.hexdigest()


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


def _cache_key(model_hash: str, variant: str) -> dict[str, Any]:
    key: dict[str, Any] = {
        "model_sha256": model_hash,
        "variant": variant,
        "export_version": EXPORT_VERSION,
        "opset": _OPSET,
        "onnx": _version("onnx"),
        "onnxruntime": _version("onnxruntime"),
    }
    if variant == "int8":
        key["int8_recipe"] = _INT8_RECIPE
    return key


def _key_id(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def _valid_entry(folder: Path, key: dict[str, Any]) -> bool:
    try:
        manifest = _read_json(folder / _MANIFEST)
        model = folder / _MODEL_FILE
        return (
            manifest.get("key") == key
            and model.stat().st_size == manifest["size"]
            and _file_sha256(model) == manifest["sha256"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _discard(folder: Path) -> None:
    """Move a broken cache folder aside (atomic) and delete it."""
    if not folder.exists():
        return
    trash = folder.with_name(f"{folder.name}.broken-{uuid.uuid4().hex[:8]}")
    try:
        folder.rename(trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _export_fp32(config: SentenceModelConfig, out: Path) -> None:
    """The Transformer module as an fp32 ONNX graph: token ids in, token states out
    (`onnx_bert.build_bert_onnx`, from ``model.safetensors``; no torch)."""
    try:
        import onnx  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"writing the ONNX model needs onnx and safetensors ({exc.name} is missing): "
            "pip install 'swrag-integrations[onnx]'"
        ) from exc
    from swrag_integrations.embeddings.onnx_bert import build_bert_onnx

    build_bert_onnx(config.transformer_path, out, _OPSET)


def _quantize_int8(src: Path, out: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from swrag_integrations.core._logging import root_logging_kept

    graph = onnx.load(str(src), load_external_data=False).graph
    # BERT-style node names; another architecture gets every MatMul quantized
    keep = [n.name for n in graph.node if any(n.name.endswith(s) for s in _INT8_RECIPE["keep_fp32"])]
    root = logging.getLogger()
    hush = _DropMessage("pre-processing before quantization")  # onnxruntime logs it on the root logger,
    # through logging.warning, which gives a root logger without handlers a stderr handler for
    # good (then every library's records, bm25s's DEBUG ones, reach the user): both undone after
    root.addFilter(hush)
    try:
        with root_logging_kept():
            quantize_dynamic(
                str(src),
                str(out),
                per_channel=_INT8_RECIPE["per_channel"],
                weight_type=getattr(QuantType, _INT8_RECIPE["weight_type"]),
                op_types_to_quantize=list(_INT8_RECIPE["op_types"]),
                nodes_to_exclude=keep,
                # needed once the graph holds fused contrib ops; harmless otherwise
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    finally:
        root.removeFilter(hush)


class _DropMessage(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def ensure_onnx_model(
    model_path: str | os.PathLike,
    variant: str = "fp32",
    cache_dir: str | os.PathLike | None = None,
    *,
    model_hash: str | None = None,
) -> Path:
    """Path of the cached ``model.onnx`` for ``model_path``, exported (once) if needed.

    Args:
        model_path: a sentence-transformers folder.
        variant: ``"fp32"`` or ``"int8"`` (built from the cached fp32 export).
        cache_dir: cache root (default ``$SWRAG_CACHE`` or ``~/.cache/swrag``); entries
            go to ``<cache_dir>/onnx/<variant>-<key>``.
        model_hash: `model_fingerprint` of ``model_path`` if already computed.
    """
    if variant not in ONNX_VARIANTS:
        raise ValueError(f"variant must be one of {ONNX_VARIANTS}, got {variant!r}")
    config = read_sentence_model_config(model_path)
    model_hash = model_hash or model_fingerprint(model_path)
    root = Path(cache_dir).expanduser() if cache_dir is not None else _default_cache_dir()
    key = _cache_key(model_hash, variant)
    folder = root / "onnx" / f"{variant}-{_key_id(key)}"
    if _valid_entry(folder, key):
        return folder / _MODEL_FILE
    with _lock:
        if _valid_entry(folder, key):  # built by another thread meanwhile
            return folder / _MODEL_FILE
        private_dir(folder.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            model_file = tmp / _MODEL_FILE
            if variant == "fp32":
                _export_fp32(config, model_file)
            else:
                fp32 = ensure_onnx_model(model_path, "fp32", root, model_hash=model_hash)
                _quantize_int8(fp32, model_file)
            manifest = {
                "key": key,
                "model_path": str(Path(model_path).resolve()),
                "sha256": _file_sha256(model_file),
                "size": model_file.stat().st_size,
            }
            (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
            if folder.exists():
                if _valid_entry(folder, key):  # another process won the race
                    return folder / _MODEL_FILE
                _discard(folder)
            try:
                tmp.rename(folder)
            except OSError:
                if not _valid_entry(folder, key):
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return folder / _MODEL_FILE


def _load_tokenizer(config: SentenceModelConfig):
    """The folder's fast tokenizer, set up as sentence-transformers calls it.

    Reads ``tokenizer.json`` with the ``tokenizers`` library (no transformers import);
    for BERT-style normalisers the ``tokenizer_config.json`` options override the file,
    as ``transformers``' ``BertTokenizerFast`` does. Truncation at ``max_seq_length``
    (longest first, special tokens included), no padding (batches are padded here).
    """
    from tokenizers import Tokenizer, normalizers

    folder = config.transformer_path
    if not (folder / "tokenizer.json").is_file():
        raise ValueError(f"the ONNX backend needs a fast tokenizer (tokenizer.json) in {folder}")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok_config = _read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    state = json.loads(tokenizer.normalizer.__getstate__()) if tokenizer.normalizer is not None else {}
    if state.get("type") == "BertNormalizer":
        wanted = {
            "lowercase": tok_config.get("do_lower_case", state.get("lowercase")),
            "strip_accents": tok_config.get("strip_accents", state.get("strip_accents")),
            "handle_chinese_chars": tok_config.get("tokenize_chinese_chars", state.get("handle_chinese_chars")),
        }
        if any(state.get(k) != v for k, v in wanted.items()):
            tokenizer.normalizer = normalizers.BertNormalizer(clean_text=state.get("clean_text", True), **wanted)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=config.max_seq_length, strategy="longest_first", stride=0)
    pad_token = tok_config.get("pad_token")
    if isinstance(pad_token, dict):
        pad_token = pad_token.get("content")
    pad_id = tokenizer.token_to_id(pad_token) if isinstance(pad_token, str) else None
    return tokenizer, int(pad_id if pad_id is not None else 0)


class OnnxSentenceEncoder:
    """Sentence embeddings with ONNX Runtime, reproducing sentence-transformers' ``encode``.

    Texts are stripped (and lower-cased if the folder says so), tokenized with the
    folder's tokenizer, truncated at ``max_seq_length``, sorted by token length and run
    in batches padded to their longest text (order is restored), then pooled as the
    folder's ``Pooling`` module says and L2-normalised if it ends with ``Normalize`` or
    ``normalize`` is set.

    Loading is lazy and thread-safe; `encode` may be called from several threads
    (ONNX Runtime sessions and ``tokenizers`` encoders are safe to share).

    Args:
        model_path: a sentence-transformers folder.
        variant: ``"fp32"`` or ``"int8"``.
        threads: batches run at once, each on one thread (``None``: one per available
            CPU). Running whole batches in parallel on a single-threaded session used
            less CPU and gave more throughput than ONNX Runtime's intra-op threads for
            these small matrices (int8, 2 threads: 734 vs 633 chunks/s, 371 vs 319
            chunks per CPU-second); a single batch (e.g. one query) runs on one thread.
        cache_dir: export cache root (default ``$SWRAG_CACHE`` or ``~/.cache/swrag``).
        max_seq_length: override the folder's truncation length.
        normalize: L2-normalise even if the folder has no ``Normalize`` module.
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        *,
        variant: str = "fp32",
        threads: int | None = None,
        cache_dir: str | os.PathLike | None = None,
        max_seq_length: int | None = None,
        normalize: bool = True,
    ) -> None:
        if variant not in ONNX_VARIANTS:
            raise ValueError(f"variant must be one of {ONNX_VARIANTS}, got {variant!r}")
        if threads is not None and threads <= 0:
            raise ValueError(f"threads must be > 0, got {threads}")
        self.model_path = Path(model_path)
        self.variant = variant
        self.threads = threads
        self.cache_dir = cache_dir
        config = read_sentence_model_config(self.model_path)
        if max_seq_length is not None:
            if max_seq_length <= 0:
                raise ValueError(f"max_seq_length must be > 0, got {max_seq_length}")
            config = SentenceModelConfig(**{**config.__dict__, "max_seq_length": int(max_seq_length)})
        self.config = config
        self.normalize = normalize or config.normalize
        self.onnx_path: Path | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._pad_id = 0
        self._inputs: tuple[str, ...] = ()
        self._workers = threads or _cpu_count()
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.config.dimension

    def load(self) -> "OnnxSentenceEncoder":
        """Export (if not cached), then open the session and the tokenizer."""
        if self._session is None:
            with self._lock:
                if self._session is None:
                    import onnxruntime as ort

                    tokenizer, pad_id = _load_tokenizer(self.config)
                    path = ensure_onnx_model(self.model_path, self.variant, self.cache_dir)
                    options = ort.SessionOptions()
                    # one thread per run: batches run in parallel instead (see ``threads``)
                    options.intra_op_num_threads = 1
                    options.inter_op_num_threads = 1
                    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    options.log_severity_level = 3
                    session = ort.InferenceSession(
                        str(path), options, providers=["CPUExecutionProvider"],
                        disabled_optimizers=list(_DISABLED_OPTIMIZERS),
                    )
                    self._inputs = tuple(i.name for i in session.get_inputs())
                    self._tokenizer, self._pad_id, self.onnx_path = tokenizer, pad_id, path
                    self._session = session
        return self

    def tokenize(self, texts: Sequence[str]) -> list[Any]:
        """``tokenizers.Encoding`` per text, prepared as sentence-transformers does."""
        self.load()
        prepared = [str(t).strip() for t in texts]
        if self.config.do_lower_case:
            prepared = [t.lower() for t in prepared]
        return self._tokenizer.encode_batch(prepared)

    def encode(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """Embed ``texts``: a float32 array of shape ``(len(texts), dimension)``."""
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encodings = self.tokenize(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(-lengths, kind="stable")  # longest first: padding only within similar lengths
        out = np.empty((len(encodings), self.dimension), dtype=np.float32)
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

        def run(rows: np.ndarray) -> None:
            out[rows] = self._run([encodings[i] for i in rows], int(lengths[rows[0]]))

        if len(batches) == 1 or self._workers == 1:
            for rows in batches:
                run(rows)
        else:
            list(self._pool_executor().map(run, batches))
        return out

    def _pool_executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="swrag-onnx")
        return self._executor

    def _run(self, encodings: list[Any], width: int) -> np.ndarray:
        n = len(encodings)
        ids = np.full((n, width), self._pad_id, dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        types = np.zeros((n, width), dtype=np.int64)
        for r, e in enumerate(encodings):
            k = len(e.ids)
            ids[r, :k] = e.ids
            mask[r, :k] = e.attention_mask
            types[r, :k] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        states = self._session.run(None, {name: feed[name] for name in self._inputs})[0]
        return self._pool(states.astype(np.float32, copy=False), mask)

    def _pool(self, states: np.ndarray, mask: np.ndarray) -> np.ndarray:
        weights = mask[..., None].astype(np.float32)
        parts = []
        for mode in self.config.pooling:
            if mode == "cls":
                parts.append(states[:, 0])
            elif mode == "max":
                parts.append(np.where(weights > 0, states, np.float32(-1e9)).max(axis=1))
            else:
                summed = (states * weights).sum(axis=1)
                counts = np.clip(weights.sum(axis=1), 1e-9, None)
                parts.append(summed / (counts if mode == "mean" else np.sqrt(counts)))
        vectors = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        if self.normalize:
            vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors.astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"OnnxSentenceEncoder(model_path={str(self.model_path)!r}, variant={self.variant!r}, threads={self.threads})"
