"""The vector stores the index tests run over: parametrize a test with ``STORES`` and
open its indexes with ``**store_kwargs(store)``.

Milvus (Lite, a gRPC server in the test process) needs the ``[milvus]`` extra; without it
those cases are skipped with the reason printed.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

HAVE_MILVUS = all(importlib.util.find_spec(m) is not None for m in ("pymilvus", "milvus_lite"))
MILVUS = pytest.param("milvus", marks=[pytest.mark.integration, pytest.mark.milvus,
                                       pytest.mark.skipif(not HAVE_MILVUS, reason="needs the [milvus] extra "
                                                                                  "(pymilvus, milvus-lite)")])
STORES = ["chroma", MILVUS]


def store_kwargs(store: str) -> dict[str, Any]:
    """Keywords of ``SlidingWindowIndex``/``IndexEngine.open`` for ``store``: Milvus Lite in
    the index folder (``storage="milvus"``), the test's own PostgreSQL database
    (:func:`test_database`), or the default embedded Chroma."""
    if store == "postgres":
        return {"storage": test_database()}
    return {} if store == "chroma" else {"storage": store}


def store_args(store: str) -> list[str]:
    """The ``swrag`` options for ``store``."""
    if store == "postgres":
        return ["--store", test_database()]
    return [] if store == "chroma" else ["--store", store]


def referenced_vector_ids(index: Any) -> list[str]:
    """The vector ids the index's complete source records reference, sorted."""
    from swrag_integrations.engine.ids import vector_ids as ids_of

    return sorted(v for sid, h in index.engine.store.heads().items() if h.state == "complete"
                  for v in ids_of(index.engine.manifest, sid, h.content_hash, 0, h.n_chunks))


def vector_ids(index: Any) -> list[str]:
    """Every vector id the index's store holds, sorted (whatever the store; a face or its engine)."""
    index = getattr(index, "engine", index)
    vectors = index.vectors
    if vectors.kind == "Milvus":
        return sorted(str(row["id"]) for row in vectors.rows())
    if vectors.kind == "PostgreSQL":
        return sorted(vectors.held_ids())
    return sorted(index.vectors.collection.get(include=[])["ids"])


# ---------------------------------------------------------------------------- PostgreSQL

HAVE_POSTGRES = all(importlib.util.find_spec(m) is not None for m in ("psycopg", "pgvector", "pgserver"))
POSTGRES = pytest.param("postgres", marks=[pytest.mark.integration,
                                           pytest.mark.skipif(not HAVE_POSTGRES, reason="needs the [postgres] extra "
                                                                                        "and pgserver ([test])")])
_PG: dict[str, Any] = {}


def postgres_database() -> str:
    """The URI of a new, empty database on this test process's PostgreSQL, which
    ``pgserver`` starts on first use in a private temporary folder (Unix socket only,
    `PrivatePostgres`) and stops at exit; skips the test with the reason when it cannot start."""
    if "server" not in _PG:
        from swrag_integrations.stores.private_postgres import PrivatePostgres

        try:
            _PG["server"] = PrivatePostgres()
        except RuntimeError as exc:
            pytest.skip(str(exc))
    return _PG["server"].create_database()


def test_database() -> str:
    """The PostgreSQL database of the running test (one per test, made on first use), so
    every index a test opens, reopens included, is the same one."""
    import os

    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    databases = _PG.setdefault("by_test", {})
    if test not in databases:
        databases[test] = postgres_database()
    return databases[test]


test_database.__test__ = False  # a helper, not a test
