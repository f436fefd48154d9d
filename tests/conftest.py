import os
import shutil
import tempfile
from pathlib import Path

import pytest
from ci_switch import check_needs, require_shared

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # Under pytest-xdist (make test: one worker per core) each worker gets its share of the
    # cores for torch/OpenMP; more threads than cores make torch's spinning workers fight
    # (generation several times slower). Set before any test module imports torch.
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))


def pytest_configure(config: pytest.Config) -> None:
    """One model cache for the whole run (``$SWRAG_TEST_CACHE``, a temporary folder removed at
    the end; never ``~/.cache/swrag``): the modules that load the bundled LLM or embedding,
    the README's examples and the notebooks' kernels share it, so the GGUF is read and the
    ONNX graph exported once per run instead of once per module. Made by the main process
    before pytest-xdist starts its workers, which inherit the variable."""
    config.addinivalue_line("markers", "needs_packages(*modules, how): set by ci_switch.needs(); the test skips "
                                       "(fails when CI is set) when one of the modules is missing")
    if hasattr(config, "workerinput") or os.environ.get("SWRAG_TEST_CACHE"):
        return
    path = tempfile.mkdtemp(prefix="swrag-test-cache-")
    os.environ["SWRAG_TEST_CACHE"] = path
    config.stash[_OWN_CACHE] = path


_OWN_CACHE = pytest.StashKey[str]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Optional packages a test's ``ci_switch.needs`` mark names: skip when missing, fail under CI."""
    check_needs(item)


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_OWN_CACHE, None)
    if path:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_cache() -> Path:
    """The run's shared model cache folder (see :func:`pytest_configure`)."""
    return Path(os.environ["SWRAG_TEST_CACHE"])


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's shared data folder (``../shared`` beside the repo); required when ``CI`` is set."""
    return require_shared()


@pytest.fixture
def fake_default_embeddings(monkeypatch):
    """The CLI's default embedding, replaced by a 384-d fake (no model load)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    import swrag_integrations.embeddings.minilm as embeddings

    monkeypatch.setattr(embeddings, "default_embeddings", lambda backend=None: DeterministicFakeEmbedding(size=384))
