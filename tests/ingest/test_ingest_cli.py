"""`swrag index --workers N` and `swrag index --ray ADDRESS` through the installed command."""

import hashlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ci_switch import importorskip, missing
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.langchain.index import SlidingWindowIndex

sys.path.insert(0, str(Path(__file__).parents[1]))
from test_ingest_parallel import assert_same  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SWRAG = shutil.which("swrag", path=str(Path(sys.executable).parent)) or shutil.which("swrag")
HAS_RAY = importlib.util.find_spec("ray") is not None


def run(*args, timeout=600):
    if SWRAG is None:
        missing("the swrag entry point", "pip install -e . (it installs the swrag command)")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0", ANONYMIZED_TELEMETRY="False")
    return subprocess.run([SWRAG, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _free_port(host="127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _folder(tmp_path):
    root = tmp_path / "files"
    (root / "sub").mkdir(parents=True)
    words = "lighthouse keeper fog signal harbour copper export island ferry storm tide".split()
    for i in range(3):
        text = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(120 + 50 * i)) + "."
        (root / ("sub" if i else ".") / f"f{i}.txt").write_text(text, encoding="utf-8")
    (root / "ports.csv").write_text("port,export\nArden,copper\nBrill,wool\n", encoding="utf-8")
    (root / "blob.txt").write_bytes(b"\x00\x01binary\x00" * 20)  # skipped with a warning
    return root


def _tree_digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def _open(path):
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

    return SlidingWindowIndex(path, embedding=MiniLMEmbeddings(), show_progress=False)


@pytest.mark.slow
@pytest.mark.integration
def test_index_with_workers_equals_a_single_process_build(tmp_path):
    root = _folder(tmp_path)
    one = run("index", str(root), "--persist-dir", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    two = run("index", str(root), "--persist-dir", str(tmp_path / "two"), "--workers", "2")
    assert two.returncode == 0, two.stderr
    for result in (one, two):  # the summary: added / chunks / skipped, and how it ran
        assert "added: 5" in result.stdout and "skipped files: 1" in result.stdout, result.stdout
        assert "blob.txt" in result.stderr  # the skip is named
    assert "2 worker processes" in two.stdout and "one process" in one.stdout
    assert one.stdout.split("chunks: ")[1].split(",")[0] == two.stdout.split("chunks: ")[1].split(",")[0]
    assert_same(_open(tmp_path / "one"), _open(tmp_path / "two"), tol=1e-5)
    # idempotent and mirroring, in parallel too
    (root / "sub" / "f2.txt").unlink()
    again = run("index", str(root), "--persist-dir", str(tmp_path / "two"), "--workers", "2")
    assert again.returncode == 0, again.stderr
    assert "unchanged: 4" in again.stdout and "removed: 1" in again.stdout and "added: 0" in again.stdout
    if HAS_RAY:  # the same folder through a Ray started by the command ("local"), one embedding actor
        rayed = run("index", str(root), "--persist-dir", str(tmp_path / "ray"), "--ray", "local", "--workers", "1")
        assert rayed.returncode == 0, rayed.stderr
        assert "added: 4" in rayed.stdout and "Ray at local, 1 embedding actors" in rayed.stdout
        assert_same(_open(tmp_path / "two"), _open(tmp_path / "ray"), tol=1e-5)


def test_index_refuses_a_bad_worker_count(tmp_path):
    root = _folder(tmp_path)
    for bad in ("0", "-2", "two"):
        result = run("index", str(root), "--persist-dir", str(tmp_path / "s"), "--workers", bad)
        assert result.returncode == 2 and "--workers" in result.stderr, result.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.ray
def test_index_with_a_bad_ray_address_exits_3_and_changes_nothing(tmp_path):
    importorskip("ray", how="pip install -e '.[ray]' (the [ray] extra)")
    root = _folder(tmp_path)
    store = tmp_path / "store"
    idx = SlidingWindowIndex(store, embedding=DeterministicFakeEmbedding(size=384), show_progress=False)
    idx.add_files(root / "f0.txt")
    idx.engine.store.close()  # its SQLite WAL checkpointed now, not whenever the object is collected
    before = _tree_digest(store)
    dead = f"127.0.0.1:{_free_port()}"
    for address, says in ((dead, "no Ray cluster answers"), (f"ray://{dead}", "no Ray cluster answers"),
                          ("not-an-address", "bad Ray address"), ("127.0.0.1:99999", "bad Ray address")):
        for persist in (store, tmp_path / "fresh"):
            result = run("index", str(root), "--persist-dir", str(persist), "--ray", address, timeout=120)
            assert result.returncode == 3, (address, result.stdout, result.stderr)
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("swrag: error:") and says in lines[0], result.stderr
            assert "Traceback" not in result.stderr + result.stdout
    assert _tree_digest(store) == before  # the existing index is untouched
    assert not (tmp_path / "fresh").exists()  # and nothing was created for a new one
