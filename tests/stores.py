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
    the index folder (``storage="milvus"``), or the default embedded Chroma."""
    return {} if store == "chroma" else {"storage": store}


def store_args(store: str) -> list[str]:
    """The ``swrag`` options for ``store``."""
    return [] if store == "chroma" else ["--store", store]


def referenced_vector_ids(index: Any) -> list[str]:
    """The vector ids the index's complete source records reference, sorted."""
    from swrag_integrations.engine.ids import vector_ids as ids_of

    return sorted(v for sid, h in index.engine.store.heads().items() if h.state == "complete"
                  for v in ids_of(index.engine.manifest, sid, h.content_hash, 0, h.n_chunks))


def vector_ids(index: Any) -> list[str]:
    """Every vector id the index's store holds, sorted (whatever the store)."""
    vectors = index.engine.vectors
    if vectors.kind == "Milvus":
        return sorted(str(row["id"]) for row in vectors.rows())
    return sorted(index.engine.vectors.store._collection.get(include=[])["ids"])
