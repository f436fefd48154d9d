"""The model caches (swrag_integrations.llm.cache, gguf_convert, loader): keys, atomic
writes and checked loads.

Every test works in its own temporary cache root, never in ``~/.cache/swrag``. The entry
tests without a model build directories by hand; the loader tests use a tiny random
Llama (2 layers, hidden size 64) so that a rebuild costs about a second.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from ci_switch import importorskip

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from swrag_integrations.llm import CacheRebuildWarning, load_llama3  # noqa: E402
from swrag_integrations.llm.cache import (  # noqa: E402
    MANIFEST_NAME,
    check_entry,
    memo_sha256,
    publish,
    read_manifest,
    staging_dir,
    write_manifest,
)
from swrag_integrations.llm.gguf_convert import bundled_gguf_path, gguf_cache_key, hf_checkpoint_key  # noqa: E402

KEY = {"kind": "test", "source": {"sha256": "ab" * 32}, "versions": {"torch": "1"}}


def _entry(root: Path, key=KEY, name="entry") -> Path:
    """A complete entry with two files."""
    with staging_dir(root / name) as tmp:
        (tmp / "weights.bin").write_bytes(bytes(range(256)) * 64)
        (tmp / "config.json").write_text('{"a": 1}')
        write_manifest(tmp, key, fingerprint={"x": 1})
        publish(tmp, root / name)
    return root / name


# ----------------------------------------------------------------------- entries
def test_complete_entry_passes_and_staging_is_gone(tmp_path):
    entry = _entry(tmp_path)
    assert check_entry(entry, KEY) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]
    assert read_manifest(entry)["fingerprint"] == {"x": 1}


def test_foreign_or_stale_entry_is_refused(tmp_path):
    entry = _entry(tmp_path)
    other = {**KEY, "versions": {"torch": "2"}}
    problem = check_entry(entry, other)
    assert problem.startswith("written for a different model or setup") and "versions.torch" in problem


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda e: (e / "weights.bin").write_bytes(bytes(range(255, -1, -1)) * 64), "checksum"),  # same size
        (lambda e: (e / "weights.bin").write_bytes(b"\0" * 100), "size"),  # truncated
        (lambda e: (e / "extra.bin").write_bytes(b"x"), "files differ"),
        (lambda e: (e / "config.json").unlink(), "files differ"),
        (lambda e: (e / MANIFEST_NAME).unlink(), "no readable"),  # e.g. the old layout
        (lambda e: (e / MANIFEST_NAME).write_text("{trunc"), "no readable"),
    ],
)
def test_corrupted_or_half_written_entry_is_refused(tmp_path, damage, reason):
    entry = _entry(tmp_path)
    damage(entry)
    assert reason in check_entry(entry, KEY)


def test_failed_write_leaves_nothing_that_looks_complete(tmp_path):
    final = tmp_path / "entry"
    with pytest.raises(RuntimeError):
        with staging_dir(final) as tmp:
            (tmp / "weights.bin").write_bytes(b"half")
            raise RuntimeError("crash while saving")
    assert list(tmp_path.iterdir()) == []
    with staging_dir(final) as tmp:  # no manifest: refused
        with pytest.raises(ValueError, match="manifest"):
            publish(tmp, final)
    assert check_entry(final, KEY) == "missing"


def test_hard_crash_leaves_only_a_hidden_staging_dir_that_is_cleaned_up(tmp_path):
    code = (
        "import os, sys; from pathlib import Path; from swrag_integrations.llm.cache import staging_dir\n"
        "with staging_dir(Path(sys.argv[1]) / 'entry') as tmp:\n"
        "    (tmp / 'weights.bin').write_bytes(b'half')\n"
        "    os._exit(9)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, timeout=120)
    assert result.returncode == 9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".entry.tmp-")  # never the final name
    assert check_entry(tmp_path / "entry", KEY) == "missing"
    _entry(tmp_path)  # the next write of the entry removes the dead writer's leftovers
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


def test_publish_replaces_an_existing_entry(tmp_path):
    entry = _entry(tmp_path)
    new_key = {**KEY, "source": {"sha256": "cd" * 32}}
    _entry(tmp_path, key=new_key)
    assert check_entry(entry, new_key) is None and check_entry(entry, KEY) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


# ----------------------------------------------------------------------- keys
def test_file_hash_memo_never_survives_a_content_change(tmp_path):
    path, memo = tmp_path / "model.gguf", tmp_path / "memo"
    path.write_bytes(b"version one")
    first = memo_sha256(path, memo)
    assert memo_sha256(path, memo) == first and len(list(memo.iterdir())) == 1
    stat = path.stat()
    path.write_bytes(b"version two")  # same size ...
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... and the old mtime
    assert memo_sha256(path, memo) != first


def test_a_second_gguf_version_at_the_same_path_gets_its_own_key(tmp_path):
    """Another release of the GGUF with the same path, size and mtime (the old key was
    path + size + mtime) must not find the first one's checkpoint."""
    v1 = bundled_gguf_path()
    path = tmp_path / v1.name
    shutil.copyfile(v1, path)
    key1, name1 = hf_checkpoint_key(path, tmp_path / "memo"), gguf_cache_key(path, tmp_path / "memo")
    stat = path.stat()
    with open(path, "r+b") as handle:  # flip bytes in the tensor data, keep size and mtime
        handle.seek(stat.st_size - 4096)
        block = handle.read(64)
        handle.seek(stat.st_size - 4096)
        handle.write(bytes(b ^ 0xFF for b in block))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    key2, name2 = hf_checkpoint_key(path, tmp_path / "memo"), gguf_cache_key(path, tmp_path / "memo")
    assert key1["gguf"]["sha256"] != key2["gguf"]["sha256"] and name1 != name2
    assert key1["converter"] == key2["converter"] and set(key1["versions"]) >= {"gguf", "transformers", "tokenizers"}


# ----------------------------------------------------------------------- loader
@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """A tiny random Llama with the bundled model's tokenizer, saved as a model directory."""
    import gguf
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from swrag_integrations.llm.gguf_convert import _build_tokenizer

    tokenizer = _build_tokenizer(gguf.GGUFReader(str(bundled_gguf_path())))
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _logits(llm):
    import torch

    with torch.no_grad():
        return llm.model(input_ids=torch.tensor([llm.encode("hello there")])).logits[0, -1].float()


def _load(model_dir, root, **kwargs):
    importorskip("ipex_llm")
    return load_llama3(model_dir, cache_dir=root, backend="ipex", max_new_tokens=4, **kwargs)


@pytest.fixture(scope="module")
def tiny_cached(tiny_dir, tmp_path_factory):
    """(cache root, cold-loaded model) for the tiny model; the entry is never modified."""
    root = tmp_path_factory.mktemp("tiny-cache")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheRebuildWarning)
        cold = _load(tiny_dir, root)
    assert cold.info.cache_status == "written"
    return root, cold


def _copy_root(root: Path, tmp_path: Path) -> tuple[Path, Path]:
    copy = tmp_path / "cache"
    shutil.copytree(root, copy)
    (entry,) = (copy / "low-bit").iterdir()
    return copy, entry


@pytest.mark.slow
def test_cached_load_is_checked_and_identical(tiny_dir, tiny_cached):
    root, cold = tiny_cached
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheRebuildWarning)
        warm = _load(tiny_dir, root)
    assert warm.info.cache_status == "hit" and warm.info.cache_path == cold.info.cache_path
    assert _logits(warm).equal(_logits(cold))
    assert warm.generate("hi") == cold.generate("hi")


def _set_manifest(entry: Path, change) -> None:
    manifest = json.loads((entry / MANIFEST_NAME).read_text())
    change(manifest)
    (entry / MANIFEST_NAME).write_text(json.dumps(manifest))


def _flip_weights(entry: Path) -> None:
    weights = entry / "pytorch_model.bin"
    data = bytearray(weights.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 256] = bytes(b ^ 0x5A for b in data[middle:middle + 256])
    weights.write_bytes(bytes(data))  # a new file: never write into a file a live model may map


def _half_written(entry: Path) -> None:
    (entry / MANIFEST_NAME).unlink()
    (entry / "pytorch_model.bin").write_bytes(b"")


@pytest.mark.slow
@pytest.mark.parametrize(
    "tamper, reason",
    [
        (lambda e: _set_manifest(e, lambda m: m["key"]["versions"].update({"ipex-llm": "2.1.0"})),
         "different model or setup"),  # a cache written by another version of the stack
        (lambda e: _set_manifest(e, lambda m: m["key"]["source"].update({"path": "/elsewhere"})),
         "different model or setup"),  # a foreign entry copied under this name
        (_flip_weights, "checksum"),  # corrupted
        (_half_written, "no readable"),  # interrupted write of an older layout / by hand
        (lambda e: _set_manifest(e, lambda m: m["fingerprint"].update(
            {"top_logits": [v + 1.0 for v in m["fingerprint"]["top_logits"]]})),
         "fingerprint"),  # files intact, but the loaded model is not the one recorded
    ],
    ids=["other-versions", "foreign", "corrupted", "half-written", "fingerprint"],
)
def test_bad_entry_is_rebuilt_with_a_warning(tiny_dir, tiny_cached, tmp_path, tamper, reason):
    root, cold = tiny_cached
    copy, entry = _copy_root(root, tmp_path)
    tamper(entry)
    with pytest.warns(CacheRebuildWarning, match=reason):
        rebuilt = _load(tiny_dir, copy)
    assert rebuilt.info.cache_status == "rebuilt" and not rebuilt.info.from_cache
    assert rebuilt.info.cache_path == str(entry) and any(reason in n for n in rebuilt.info.notes)
    assert _logits(rebuilt).equal(_logits(cold))  # the right model, rebuilt from the source
    assert check_entry(entry, read_manifest(entry)["key"]) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheRebuildWarning)
        assert _load(tiny_dir, copy).info.cache_status == "hit"
    assert sorted(p.name for p in entry.parent.iterdir()) == [entry.name]


@pytest.mark.slow
def test_model_changed_in_place_is_not_served_from_the_cache(tiny_dir, tiny_cached, tmp_path):
    import torch
    from transformers import LlamaForCausalLM

    root, cold = tiny_cached
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_dir, model_dir)
    copy, old_entry = _copy_root(root, tmp_path)
    assert _load(model_dir, copy).info.cache_status == "written"  # a new path is a new source
    torch.manual_seed(1)
    retrained = LlamaForCausalLM(LlamaForCausalLM.config_class.from_pretrained(model_dir))
    retrained.save_pretrained(model_dir)  # same files, same sizes, new weights
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheRebuildWarning)
        changed = _load(model_dir, copy)
    assert changed.info.cache_status == "written" and not changed.info.from_cache
    assert not _logits(changed).equal(_logits(cold))
    assert len(list((copy / "low-bit").iterdir())) == 3


@pytest.mark.slow
def test_options_that_change_the_weights_are_part_of_the_key(tiny_dir, tiny_cached, tmp_path):
    root, cold = tiny_cached
    copy, entry = _copy_root(root, tmp_path)
    other = _load(tiny_dir, copy, low_bit="asym_int4")
    assert other.info.cache_status == "written" and other.info.cache_path != str(entry)
    assert _load(tiny_dir, copy).info.cache_path == str(entry)


@pytest.mark.slow
def test_unwritable_cache_still_returns_the_model(tiny_dir, tiny_cached, tmp_path, monkeypatch):
    from swrag_integrations.llm import loader

    root, cold = tiny_cached

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(loader, "write_manifest", full_disk)
    with pytest.warns(RuntimeWarning, match="not written"):
        llm = _load(tiny_dir, tmp_path / "cache")
    assert llm.info.cache_status == "not written" and llm.info.cache_path is None
    assert _logits(llm).equal(_logits(cold))
    assert list((tmp_path / "cache" / "low-bit").iterdir()) == []  # nothing half-written left
