"""Store backends' connection and repair, round 4 (issue 42): a repair that finds the
vector collection empty, Milvus Lite reachable by nobody else, TLS and tokens for
servers, and clear errors when a store cannot be opened."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fake_embeddings import TrigramEmbedder
from stores import MILVUS, STORES, store_kwargs
from swrag_integrations.engine.engine import IndexEngine

ROOT = Path(__file__).resolve().parents[2]

EN = ["The lighthouse keeper climbed the cliff at dawn to trim the lamp before the fog rolled in.",
      "Zebras crossed the quarry road while the surveyors waited with their instruments.",
      "A walrus rested on the ice floe, its tusks catching the low winter sun."]


def open_engine(path, store, **kw):
    return IndexEngine.open(path, embedding=TrigramEmbedder(), show_progress=False, **store_kwargs(store), **kw)


def _empty_the_collection(engine) -> None:
    """What a repair killed between dropping the collection and writing it again leaves:
    no vectors, every source complete."""
    vectors = engine.vectors
    if vectors.kind == "Milvus":
        vectors.client.drop_collection(vectors.collection_name)
    else:
        ids = vectors.collection.get(include=[])["ids"]
        vectors.collection.delete(ids=ids)


# ------------------------------------------------------------------ repair of an emptied collection


@pytest.mark.parametrize("store", STORES)
def test_repair_writes_the_vectors_again_when_the_collection_is_empty(tmp_path, store):
    engine = open_engine(tmp_path / "i", store)
    engine.index_texts(EN)
    chunks = engine.vectors.count()
    assert chunks
    _empty_the_collection(engine)
    engine.close()

    engine = open_engine(tmp_path / "i", store)
    assert engine.vectors.count() == 0
    assert not engine.status().healthy
    engine.repair()
    assert engine.vectors.count() == chunks
    assert engine.status().healthy
    hits = engine.dense_ids("lighthouse keeper on the cliff", 1, search_type="similarity")
    assert hits and engine.source_text(hits[0].split(":")[0]) == EN[0]
    engine.close()


# ------------------------------------------------------------------ Milvus Lite: reachable by this user only


def _listening_sockets() -> list[str]:
    """Every address this process listens on: ``tcp:HOST:PORT`` (IPv4 and IPv6) and
    ``unix:PATH`` (from ``/proc``, matched by the sockets' inodes)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    out.append(f"tcp:127.0.0.1:{int(cols[1].split(':')[1], 16)}")
    with open("/proc/net/unix") as fh:
        for line in list(fh)[1:]:
            cols = line.split()
            if len(cols) >= 8 and cols[6] in inodes and not cols[7].startswith("@"):
                out.append(f"unix:{cols[7]}")
    return out


INTRUDER = """
import os, sys
from pymilvus import MilvusClient
import pymilvus.client.grpc_handler, pymilvus.milvus_client.milvus_client  # noqa: F401 - loaded while still root
uid, gid = int(sys.argv[1]), int(sys.argv[2])
os.setgroups([])
os.setgid(gid)
os.setuid(uid)  # from here on: another local user (the interpreter lives in root's home, so loaded first)
assert os.getuid() == uid and os.geteuid() == uid
for address in sys.argv[3:]:
    uri = "http://" + address[4:] if address.startswith("tcp:") else address
    try:
        client = MilvusClient(uri=uri, timeout=5)
        for name in client.list_collections():
            rows = client.query(name, filter="", output_fields=["text"], limit=100)
            print("READ", address, name, [r.get("text") for r in rows], flush=True)
    except Exception as exc:
        print("REFUSED", address, type(exc).__name__, flush=True)
"""


@pytest.fixture
def other_user():
    """A throwaway local user ``(uid, gid)`` (made with useradd, removed afterwards)."""
    import pwd
    import shutil
    import subprocess
    import uuid

    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make a second local user")
    name = "swrag" + uuid.uuid4().hex[:8]
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.mark.integration
@pytest.mark.parametrize("store", [MILVUS])
def test_another_local_user_cannot_reach_an_open_milvus_lite_index(tmp_path, store, other_user):
    import subprocess

    before = set(_listening_sockets())  # servers other tests left open
    engine = open_engine(tmp_path / "i", store)
    engine.index_texts(EN)
    assert engine.bm25_search("walrus", 1)
    addresses = [a for a in _listening_sockets() if a not in before]
    assert addresses, "the Milvus Lite server listens nowhere this test can see"

    def intrude(uid: int, gid: int) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", INTRUDER, str(uid), str(gid), *addresses], capture_output=True,
                              text=True, timeout=300, cwd="/", env=dict(os.environ, HOME="/"))

    mine = intrude(os.getuid(), os.getgid())  # the control: the same client as this user reads the index
    assert "READ" in mine.stdout and "walrus" in mine.stdout, mine.stdout + mine.stderr[-2000:]
    proc = intrude(*other_user)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("REFUSED") == len(addresses), proc.stdout  # every address tried, none answered
    assert "READ" not in proc.stdout and "walrus" not in proc.stdout
    # the owner still reads and writes it
    engine.index_texts(["A second walrus surfaced beside the floe."])
    assert len(engine.bm25_search("walrus", 5)) == 2
    engine.close()
    assert not any(a.startswith("unix:") and os.path.exists(a[5:]) for a in addresses)  # the socket went with it


# ------------------------------------------------------------------ servers over TLS, tokens from the environment


@pytest.mark.parametrize("uri, kind, host, port, ssl, server", [
    ("chroma+https://db.example", "chroma", "db.example", 8000, True, "https://db.example:8000"),
    ("chroma+https://db.example:443", "chroma", "db.example", 443, True, "https://db.example:443"),
    ("chroma://db.example:9000", "chroma", "db.example", 9000, False, "http://db.example:9000"),
    ("milvus+https://m.example", "milvus", "m.example", 19530, True, "https://m.example:19530"),
    ("milvus://m.example:1", "milvus", "m.example", 1, False, "http://m.example:1"),
])
def test_server_uris_say_whether_they_use_tls(uri, kind, host, port, ssl, server):
    from swrag_integrations.stores.store_uri import parse_store_uri

    got = parse_store_uri(uri)
    assert (got.kind, got.host, got.port, got.ssl, got.server) == (kind, host, port, ssl, server)


def test_a_token_is_never_taken_from_the_uri():
    from swrag_integrations.stores.store_uri import parse_store_uri

    for uri in ("chroma+https://user:secret@db.example", "milvus+https://secret@m.example:19530"):
        with pytest.raises(ValueError, match="SWRAG_CHROMA_TOKEN or SWRAG_MILVUS_TOKEN") as info:
            parse_store_uri(uri)
        assert "secret" not in str(info.value)


class _Recorder:
    """A local HTTP server that records each request's path and headers and answers 500."""

    def __init__(self):
        import http.server
        import threading

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                seen.append((self.path, dict(self.headers)))
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.integration  # a local HTTP server records what the client sends
def test_the_chroma_token_comes_from_the_environment_as_chromadbs_bearer_header(tmp_path, monkeypatch, capsys):
    from swrag_integrations.cli import main as cli_main

    recorder = _Recorder()
    try:
        monkeypatch.setenv("SWRAG_CHROMA_TOKEN", "s3cret-token")
        assert cli_main(["status", "--store", f"chroma://127.0.0.1:{recorder.port}"]) == 3
        err = capsys.readouterr().err
        assert "Traceback" not in err and "s3cret-token" not in err
        assert recorder.seen, "the client sent nothing"
        assert all(headers.get("Authorization") == "Bearer s3cret-token" for _, headers in recorder.seen)
        monkeypatch.delenv("SWRAG_CHROMA_TOKEN")
        recorder.seen.clear()
        assert cli_main(["status", "--store", f"chroma://127.0.0.1:{recorder.port}"]) == 3
        assert recorder.seen and all("Authorization" not in headers for _, headers in recorder.seen)
    finally:
        recorder.close()


def test_chroma_https_opens_the_client_with_tls_and_the_token(tmp_path, monkeypatch):
    import chromadb

    from swrag_integrations.cli import main as cli_main

    made = []

    def client(**kwargs):
        made.append(kwargs)
        raise ConnectionError("no server in this test")

    monkeypatch.setattr(chromadb, "HttpClient", client)
    monkeypatch.setenv("SWRAG_CHROMA_TOKEN", "tls-token")
    assert cli_main(["status", "--store", "chroma+https://db.example"]) == 3
    with pytest.raises(ConnectionError, match="https://db.example:8000"):
        IndexEngine.open(storage="chroma+https://db.example", embedding=TrigramEmbedder(), show_progress=False)
    assert len(made) == 2
    for kwargs in made:
        assert kwargs["ssl"] is True and (kwargs["host"], kwargs["port"]) == ("db.example", 8000)
        settings = kwargs["settings"]
        assert settings.chroma_client_auth_credentials == "tls-token"
        assert settings.chroma_client_auth_provider == "chromadb.auth.token_authn.TokenAuthClientProvider"


@pytest.mark.skipif(not __import__("stores").HAVE_MILVUS, reason="needs the [milvus] extra (pymilvus)")
def test_milvus_https_connects_with_tls_and_the_token_from_the_environment(tmp_path, monkeypatch):
    import pymilvus

    from swrag_integrations.cli import main as cli_main

    made = []

    def client(**kwargs):
        made.append(kwargs)
        raise ConnectionError("no server in this test")

    monkeypatch.setattr(pymilvus, "MilvusClient", client)
    monkeypatch.setenv("SWRAG_MILVUS_TOKEN", "root:Milvus")
    with pytest.raises(ConnectionError, match="https://m.example:19530"):
        IndexEngine.open(tmp_path / "i", storage="milvus+https://m.example", embedding=TrigramEmbedder(),
                         show_progress=False)
    sample = ROOT / "swrag_integrations" / "data" / "sample.md"
    assert cli_main(["index", str(sample), "--persist-dir", str(tmp_path / "c"), "--store",
                     "milvus+https://m.example:443"]) == 3
    assert [(m["uri"], m["token"]) for m in made] == [("https://m.example:19530", "root:Milvus"),
                                                      ("https://m.example:443", "root:Milvus")]


# ------------------------------------------------------------------ an installed module that fails to import


class _Broken:
    """A meta-path finder under which ``module`` is installed but fails to import (as
    with a missing shared library), whatever the real installation."""

    def __init__(self, module: str, why: str) -> None:
        self.module, self.why = module, why

    def find_spec(self, name, path=None, target=None):
        import importlib.machinery

        if name == self.module or name.startswith(self.module + "."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ImportError(self.why)


@pytest.mark.skipif(not __import__("stores").HAVE_MILVUS, reason="needs the [milvus] extra (pymilvus)")
def test_an_installed_milvus_lite_that_fails_to_import_is_reported_with_its_cause(tmp_path, monkeypatch, capsys):
    from swrag_integrations.cli import main as cli_main

    why = "libmilvus_core.so: cannot open shared object file: No such file or directory"
    for name in [m for m in sys.modules if m == "milvus_lite" or m.startswith("milvus_lite.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Broken("milvus_lite", why), *sys.meta_path])
    with pytest.raises(ImportError, match="installed but cannot be imported") as info:
        IndexEngine.open(tmp_path / "a", embedding=TrigramEmbedder(), storage="milvus", show_progress=False)
    assert why in str(info.value) and "needs milvus-lite" not in str(info.value)
    sample = ROOT / "swrag_integrations" / "data" / "sample.md"
    code = cli_main(["index", str(sample), "--persist-dir", str(tmp_path / "b"), "--store", "milvus"])
    err = capsys.readouterr().err
    assert code != 0 and why in err and "needs milvus-lite" not in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    # really missing: still the extra to install
    monkeypatch.setitem(sys.modules, "milvus_lite", None)
    with pytest.raises(ModuleNotFoundError, match=r"needs milvus-lite: pip install 'swrag-integrations\[milvus\]'"):
        IndexEngine.open(tmp_path / "c", embedding=TrigramEmbedder(), storage="milvus", show_progress=False)


def test_a_relative_index_path_opened_from_two_folders_is_two_indexes(tmp_path, monkeypatch):
    """chromadb caches one client per path string: a relative ``./idx`` opened from folder B
    after folder A must not reach A's database (it raised IndexMismatchError)."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from swrag_integrations.langchain import SlidingWindowIndex

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    first = SlidingWindowIndex("./idx", embedding=DeterministicFakeEmbedding(size=16))
    first.add_documents([Document(page_content="The walrus sleeps on the ice floe.", metadata={"source": "w"})])
    monkeypatch.chdir(tmp_path / "b")
    second = SlidingWindowIndex("./idx", embedding=DeterministicFakeEmbedding(size=16))
    assert second.similarity_search("walrus", k=2) == []
    assert first.similarity_search("walrus", k=1)
