"""Ingestion on Ray: a local Ray cluster (head + a worker node) writing to a `chroma run` server.

The cluster runs on 127.0.0.2 (loopback): Ray rewrites 127.0.0.1 and "localhost" to the
machine's network address, which would take its traffic off the loopback interface.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from ci_switch import importorskip, missing
from langchain_core.embeddings import DeterministicFakeEmbedding

importorskip("ray.data", how="pip install -e '.[ray]' (the [ray] extra)")

pytestmark = pytest.mark.ray

from swrag_integrations.langchain.index import SlidingWindowIndex  # noqa: E402
from swrag_integrations.cli.app import build_parser  # noqa: E402
from swrag_integrations.cli.common import ingest_from_args  # noqa: E402
from swrag_integrations.ingest.ray import index_with_ray  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RAY = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
CHROMA = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
NODE_IP = "127.0.0.2"


def _free_port(host="127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                RAY_USAGE_STATS_ENABLED="0", ANONYMIZED_TELEMETRY="False", RAY_AUTH_MODE="disabled",
                # no drain on SIGTERM: a node given SIGTERM otherwise waits up to 30 s for drain-aware
                # components (Ray Serve) before it stops its processes; this cluster serves nothing
                RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0")


def _start(args, log):
    """A process in its own group (`ray start --block` stops its node's processes on SIGTERM)."""
    return subprocess.Popen(args, stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=_env(),
                            start_new_session=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _stop(*procs, timeout=60):
    """Stop processes started by :func:`_start` and every process of their groups (a Ray
    node's raylet, workers...): SIGTERM to all of them at once, then wait until each group is
    empty, polled every 0.2 s; SIGKILL to what is left after 15 s. Stopping the nodes
    together makes the teardown as long as the slowest node's shutdown, not their sum."""
    procs = [proc for proc in procs if proc is not None]
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    groups = {proc.pid for proc in procs}
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    while any(_group_alive(pgid) for pgid in groups) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive_nodes(address) -> int:
    out = subprocess.run([RAY, "status", "--address", address], capture_output=True, text=True, env=_env(),
                         timeout=120).stdout
    active = out.split("Active:", 1)[-1].split("Pending:", 1)[0] if "Active:" in out else ""
    return sum(1 for line in active.splitlines() if "node_" in line)


@pytest.fixture
def ray_cluster():
    """Head (1 CPU) + one worker node (2 CPUs) on 127.0.0.2; everything stopped afterwards."""
    if not Path(RAY).exists():
        missing("the ray CLI", "pip install -e '.[ray]' (the [ray] extra)")
    port = _free_port(NODE_IP)
    address = f"{NODE_IP}:{port}"
    temp = Path(tempfile.mkdtemp(prefix="swr", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    procs = []
    auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # the driver (this process) too; the cluster listens on loopback only
    try:
        common = ["--block", "--node-ip-address", NODE_IP, "--object-store-memory", str(100 * 1024 * 1024),
                  "--disable-usage-stats"]
        procs.append(_start([RAY, "start", "--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard",
                             "false", "--temp-dir", str(temp / "head"), *common], temp / "head.log"))
        deadline = time.time() + 180
        while True:
            try:
                socket.create_connection((NODE_IP, port), timeout=2).close()
                break
            except OSError:
                if time.time() > deadline or procs[0].poll() is not None:
                    raise RuntimeError("ray head did not start: " + (temp / "head.log").read_text()[-3000:])
                time.sleep(1)
        procs.append(_start([RAY, "start", "--address", address, "--num-cpus", "2", "--temp-dir", str(temp / "node"),
                             *common], temp / "node.log"))
        while _alive_nodes(address) < 2:
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("ray worker node did not join: " + (temp / "node.log").read_text()[-3000:])
            time.sleep(2)
        yield address
    finally:
        _stop(*reversed(procs))
        shutil.rmtree(temp, ignore_errors=True)
        if auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth


@pytest.fixture
def chroma_server(tmp_path):
    if not Path(CHROMA).exists():
        missing("the chroma CLI", "pip install chromadb (a dependency of the package)")
    import chromadb
    from chromadb.config import Settings

    port = _free_port()
    log = tmp_path / "chroma.log"
    proc = subprocess.Popen([CHROMA, "run", "--path", str(tmp_path / "chroma-data"), "--host", "127.0.0.1", "--port",
                             str(port)], stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=_env(),
                            start_new_session=True)
    try:
        deadline = time.time() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"chroma server exited early: {log.read_text(errors='replace')[-2000:]}")
            try:
                chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False)).heartbeat()
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        yield port
    finally:
        _stop(proc, timeout=20)


def _files(tmp_path, shared=None) -> Path:
    root = tmp_path / "files"
    (root / "zh").mkdir(parents=True)
    corpus = Path(shared or "") / "data" / "corpus"
    if shared and (corpus / "en.txt").is_file():
        en = (corpus / "en.txt").read_text(encoding="utf-8")
        zh = (corpus / "zh.txt").read_text(encoding="utf-8")
        (root / "en_a.txt").write_text(en[20_000:26_000], encoding="utf-8")
        (root / "en_b.md").write_text(en[300_000:304_000], encoding="utf-8")
        (root / "zh" / "zh_a.txt").write_text(zh[10_000:12_500], encoding="utf-8")
    else:
        from swrag_integrations.cli import sample_path

        shutil.copy(sample_path(), root / "sample.md")
        (root / "en_b.md").write_text("The ferry leaves the harbour at dawn. " * 80, encoding="utf-8")
    (root / "ports.csv").write_text("port,export\nArden,copper\nBrill,wool\nCaddo,salt\n", encoding="utf-8")
    (root / "blob.txt").write_bytes(b"\x00\x01binary\x00" * 50)  # skipped: binary
    return root


def _state(idx):
    heads = idx.store.heads()
    records = idx.store.get_many(sorted(heads))
    sources = {sid: (h.content_hash, h.state, records[sid].arrays.tolist(), records[sid].text)
               for sid, h in heads.items()}
    got = idx.vectorstore._collection.get(include=["embeddings", "documents"])
    vectors = {vid: (np.asarray(v, dtype=np.float64), doc) for vid, v, doc in
               zip(got["ids"], got["embeddings"], got["documents"])}
    return sources, vectors, sorted(idx.keyword.bm25.ids)


# The Ray driver of the Python API runs in a child process, as `swrag index --ray` does: Ray's
# driver once died with a segmentation fault inside ray.shutdown() in a long-lived pytest-xdist
# worker (the kernel log: "worker.io ... general protection fault ... in _raylet.so" at the second
# the driver disconnected), taking the test runner with it. A child keeps Ray's C++ core worker out
# of pytest, and a crash there fails this test with its exit status and output.
_DRIVER = """
import json, sys, warnings
from swrag_integrations.embeddings.minilm import MiniLMEmbeddings
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.ingest.ray import index_with_ray
port, root, address, node_ip = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
embedding = MiniLMEmbeddings()
idx = SlidingWindowIndex(host="127.0.0.1", port=port, collection_name="rayed", embedding=embedding,
                         show_progress=False)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    report = index_with_ray(idx, root, address=address, actors=2, node_ip_address=node_ip)
print("SWRAG-RESULT " + json.dumps(dict(report=report.as_dict(), skipped=report.skipped_files, notes=report.notes,
      served=idx.vectorstore.embeddings.served, warnings=[str(w.message) for w in caught],
      driver_loaded_model=embedding._model is not None)), flush=True)
"""


def _index_with_ray_in_a_child(port: int, root: Path, address: str) -> dict:
    import json

    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _DRIVER, str(port), str(root), address,
                           NODE_IP], capture_output=True, text=True, env=_env(), timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SWRAG-RESULT ")]
    assert proc.returncode == 0 and lines, f"Ray driver exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("SWRAG-RESULT "):])


@pytest.mark.integration
@pytest.mark.slow
def test_ray_cluster_into_a_chroma_server_equals_a_single_process_build(tmp_path, ray_cluster, chroma_server,
                                                                        shared_dir):
    from swrag_integrations.embeddings.minilm import MiniLMEmbeddings

    root = _files(tmp_path, shared_dir)
    single = SlidingWindowIndex(tmp_path / "single", embedding=MiniLMEmbeddings(), show_progress=False)
    with pytest.warns(UserWarning, match="blob.txt"):
        one = single.add_files(root)
    got = _index_with_ray_in_a_child(chroma_server, root, ray_cluster)
    report = got["report"]
    assert report == one.as_dict() and report["added"] == 6 and report["chunks"] > 50
    assert [tuple(s) for s in got["skipped"]] == one.skipped_files and not got["notes"]
    assert any("blob.txt" in w for w in got["warnings"])
    assert got["served"] == report["chunks"]  # every vector came from the actors
    assert not got["driver_loaded_model"]  # ... and the embedding check took its dimension from them
    remote = SlidingWindowIndex(host="127.0.0.1", port=chroma_server, collection_name="rayed",
                                embedding=MiniLMEmbeddings(), show_progress=False)
    s1, v1, b1 = _state(single)
    s2, v2, b2 = _state(remote)
    assert s1 == s2 and b1 == b2 and set(v1) == set(v2) and len(v1) == report["chunks"]
    assert max(float(np.abs(v1[k][0] - v2[k][0]).max()) for k in v1) <= 1e-5
    assert all(v1[k][1] == v2[k][1] for k in v1)
    # the sources live on the server: a second run embeds nothing
    second = _index_with_ray_in_a_child(chroma_server, root, ray_cluster)["report"]
    assert second["unchanged"] == 6 and second["chunks"] == 0 and second["added"] == 0
    again = remote
    # the command does the same against the cluster and the server
    swrag = shutil.which("swrag", path=str(Path(sys.executable).parent)) or shutil.which("swrag")
    if swrag:
        cli = subprocess.run([swrag, "index", str(root), "--ray", ray_cluster, "--ray-node-ip", NODE_IP, "--workers",
                              "2", "--host", "127.0.0.1", "--port", str(chroma_server), "--collection", "rayed"],
                             capture_output=True, text=True, env=_env(), timeout=600)
        assert cli.returncode == 0, cli.stderr
        assert "unchanged: 6" in cli.stdout and "added: 0" in cli.stdout and "skipped files: 1" in cli.stdout
        assert f"Ray at {ray_cluster}, 2 embedding actors" in cli.stdout
    assert again.status().healthy
    hits = again.as_retriever(k=3, weights=(1.0, 0.0)).invoke("Arden copper")
    assert hits and any("Arden" in d.page_content for d in hits)


def test_a_bad_ray_address_is_a_clear_error_and_writes_nothing(tmp_path):
    root = tmp_path / "files"
    root.mkdir()
    (root / "a.txt").write_text("Kestrels nest on the north tower. " * 20, encoding="utf-8")
    idx = SlidingWindowIndex(tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    idx.add_files(root)
    before = (sorted(idx.store.heads().items()), idx.store.generation(), idx.count(None))
    dead = f"127.0.0.2:{_free_port('127.0.0.2')}"
    for address in (dead, f"ray://{dead}", "not-an-address", "127.0.0.2:99999"):
        with pytest.raises(ConnectionError, match="Ray"):
            index_with_ray(idx, root, address=address)
    (root / "b.txt").write_text("Ospreys fish in the bay. " * 20, encoding="utf-8")
    with pytest.raises(ConnectionError, match="no Ray cluster answers"):
        ingest_from_args(idx, build_parser().parse_args(["index", str(root), "--ray", dead]))
    from swrag_integrations.cli import main
    from swrag_integrations.cli.app import EXIT_INPUT

    assert main(["index", str(root), "--persist-dir", str(tmp_path / "other"), "--host", "127.0.0.1", "--port",
                 str(_free_port())]) == EXIT_INPUT  # an unreachable Chroma server: exit 3
    again = SlidingWindowIndex(tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    assert (sorted(again.store.heads().items()), again.store.generation(), again.count(None)) == before
