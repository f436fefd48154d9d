"""The ONNX graph of a BERT encoder, written from its ``model.safetensors`` without torch.

The bundled all-MiniLM-L6-v2 is a plain BERT encoder (6 layers, 384 wide, 12 heads).
Its graph is small enough to state directly with ``onnx.helper``: embeddings (word +
absolute position + token type) and LayerNorm, then per layer self-attention with the
additive padding mask, the output projection, residual and LayerNorm, the exact (erf)
GELU feed-forward, residual and LayerNorm. Inputs ``input_ids``, ``attention_mask``,
``token_type_ids`` (int64, ``[batch, sequence]``); output ``token_states`` (float32,
``[batch, sequence, hidden]``), as ``BertModel(...)[0]`` returns.

Why not ``torch.onnx.export``: the ONNX Runtime backend must run where torch is not
installed (the ``[onnx]`` extra), and exporting needed torch and transformers once per
cache key. The graph written here gives the vectors of the torch export (and of
sentence-transformers) to float rounding (see ``tests/embeddings/test_embeddings_onnx.py``).

Node names follow the torch exporter's (``/encoder/layer.0/output/dense/MatMul``), so
the int8 recipe of `onnx_embeddings` can name the matrices it keeps in fp32.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["build_bert_onnx"]

#: What the graph reproduces; other configurations are refused with the field named.
_SUPPORTED = {"model_type": ("bert",), "hidden_act": ("gelu",), "position_embedding_type": ("absolute", None)}


def _load_weights(folder: Path) -> dict[str, np.ndarray]:
    """The folder's ``model.safetensors`` as numpy arrays (a ``bert.`` prefix is dropped)."""
    path = folder / "model.safetensors"
    if not path.is_file():
        raise ValueError(f"the ONNX backend reads weights from model.safetensors, not found in {folder}")
    from safetensors.numpy import load_file

    weights = load_file(str(path))
    return {(k[5:] if k.startswith("bert.") else k): v for k, v in weights.items()}


def build_bert_onnx(transformer_path: str | Path, out: str | Path, opset: int) -> None:
    """Write the fp32 ONNX graph of the BERT encoder in ``transformer_path`` to ``out``.

    Args:
        transformer_path: folder with ``config.json`` and ``model.safetensors``.
        out: the ``.onnx`` file to write (weights inside: MiniLM is 90 MB).
        opset: ONNX opset (17 or later: ``LayerNormalization``).

    Raises:
        ValueError: the configuration is not a BERT encoder this graph reproduces (the
            field is named), or the weights are missing or misnamed.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder = Path(transformer_path)
    with open(folder / "config.json", encoding="utf-8") as f:
        config: dict[str, Any] = json.load(f)
    for field, allowed in _SUPPORTED.items():
        if config.get(field) not in allowed:
            raise ValueError(f"the ONNX backend builds BERT encoders only: {folder / 'config.json'} has "
                             f"{field}={config.get(field)!r} (supported: {[a for a in allowed if a]})")
    weights = _load_weights(folder)
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    if hidden % heads:
        raise ValueError(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    head_dim, eps = hidden // heads, float(config.get("layer_norm_eps", 1e-12))

    nodes: list[Any] = []
    inits: dict[str, Any] = {}

    def weight(name: str, transpose: bool = False) -> str:
        if name not in weights:
            raise ValueError(f"{folder / 'model.safetensors'} has no tensor {name!r}")
        if name not in inits:
            array = weights[name].astype(np.float32)
            inits[name] = numpy_helper.from_array(np.ascontiguousarray(array.T if transpose else array), name)
        return name

    def const(name: str, value: Any, dtype: Any = np.int64) -> str:
        if name not in inits:
            inits[name] = numpy_helper.from_array(np.asarray(value, dtype=dtype), name)
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [f"{name}_output_0"], name=name, **attrs))
        return f"{name}_output_0"

    def linear(x: str, prefix: str, module: str) -> str:
        """``x @ W.T + b`` of the torch ``Linear`` at ``module`` (``encoder.layer.0.output.dense``)."""
        product = node("MatMul", [x, weight(f"{module}.weight", transpose=True)], f"{prefix}/MatMul")
        return node("Add", [weight(f"{module}.bias"), product], f"{prefix}/Add")

    def layer_norm(x: str, prefix: str, module: str) -> str:
        return node("LayerNormalization", [x, weight(f"{module}.weight"), weight(f"{module}.bias")],
                    f"{prefix}/LayerNormalization", axis=-1, epsilon=eps)

    # embeddings: word + position (0..sequence-1) + token type, then LayerNorm
    shape = node("Shape", ["input_ids"], "/embeddings/Shape")
    length = node("Gather", [shape, const("one", 1)], "/embeddings/Gather_length", axis=0)
    positions = node("Range", [const("zero", 0), length, const("one", 1)], "/embeddings/Range")
    word = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "/embeddings/word_embeddings/Gather")
    pos = node("Gather", [weight("embeddings.position_embeddings.weight"), positions],
               "/embeddings/position_embeddings/Gather")
    types = node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"],
                 "/embeddings/token_type_embeddings/Gather")
    summed = node("Add", [node("Add", [word, types], "/embeddings/Add"), pos], "/embeddings/Add_1")
    x = layer_norm(summed, "/embeddings/LayerNorm", "embeddings.LayerNorm")

    # additive mask [batch, 1, 1, sequence]: 0 for tokens, the float32 minimum for padding (as transformers)
    mask = node("Cast", ["attention_mask"], "/mask/Cast", to=TensorProto.FLOAT)
    mask = node("Sub", [const("one_f", 1.0, np.float32), mask], "/mask/Sub")
    mask = node("Mul", [mask, const("min_f", np.finfo(np.float32).min, np.float32)], "/mask/Mul")
    mask = node("Unsqueeze", [mask, const("axes_1_2", [1, 2])], "/mask/Unsqueeze")
    split_heads = const("split_heads", [0, 0, heads, head_dim])
    merge_heads = const("merge_heads", [0, 0, hidden])
    scale = const("scale", 1.0 / math.sqrt(head_dim), np.float32)

    for i in range(int(config["num_hidden_layers"])):
        p, m = f"/encoder/layer.{i}", f"encoder.layer.{i}"

        def project(which: str, perm: list[int]) -> str:
            projected = linear(x, f"{p}/attention/self/{which}", f"{m}.attention.self.{which}")
            projected = node("Reshape", [projected, split_heads], f"{p}/attention/self/{which}/Reshape")
            return node("Transpose", [projected], f"{p}/attention/self/{which}/Transpose", perm=perm)

        q = project("query", [0, 2, 1, 3])   # [b, h, s, d]
        k = project("key", [0, 2, 3, 1])     # [b, h, d, s]
        v = project("value", [0, 2, 1, 3])   # [b, h, s, d]
        scores = node("MatMul", [q, k], f"{p}/attention/self/MatMul")
        scores = node("Mul", [scores, scale], f"{p}/attention/self/Mul")
        scores = node("Add", [scores, mask], f"{p}/attention/self/Add")
        probs = node("Softmax", [scores], f"{p}/attention/self/Softmax", axis=-1)
        context = node("MatMul", [probs, v], f"{p}/attention/self/MatMul_1")
        context = node("Transpose", [context], f"{p}/attention/self/Transpose", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, merge_heads], f"{p}/attention/self/Reshape")
        attended = linear(context, f"{p}/attention/output/dense", f"{m}.attention.output.dense")
        x = layer_norm(node("Add", [attended, x], f"{p}/attention/output/Add"),
                       f"{p}/attention/output/LayerNorm", f"{m}.attention.output.LayerNorm")
        inner = linear(x, f"{p}/intermediate/dense", f"{m}.intermediate.dense")
        # exact GELU: 0.5 x (1 + erf(x / sqrt 2))
        erf = node("Erf", [node("Div", [inner, const("sqrt2", math.sqrt(2.0), np.float32)],
                                f"{p}/intermediate/act/Div")], f"{p}/intermediate/act/Erf")
        erf = node("Add", [erf, const("one_f", 1.0, np.float32)], f"{p}/intermediate/act/Add")
        gelu = node("Mul", [node("Mul", [inner, erf], f"{p}/intermediate/act/Mul"), const("half", 0.5, np.float32)],
                    f"{p}/intermediate/act/Mul_1")
        down = linear(gelu, f"{p}/output/dense", f"{m}.output.dense")
        x = layer_norm(node("Add", [down, x], f"{p}/output/Add"), f"{p}/output/LayerNorm", f"{m}.output.LayerNorm")

    nodes.append(helper.make_node("Identity", [x], ["token_states"], name="/token_states"))
    ids = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes, "bert_encoder",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ids) for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("token_states", TensorProto.FLOAT, [*ids, hidden])],
        initializer=list(inits.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="swrag-integrations")
    model.ir_version = min(model.ir_version, 8)  # readable by every onnxruntime the extras allow
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
