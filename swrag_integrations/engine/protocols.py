"""What the windowed parent retriever needs from an index (typed, framework-free).

`ChunkIndex` is satisfied by `SlidingWindowIndex` and by the
LlamaIndex adapter over a native ``VectorStoreIndex``
(`NodeChunkIndex`); `parents` and both frameworks'
retrievers only use these members.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, Sequence, runtime_checkable

__all__ = ["ChildHit", "ChunkRow", "ChunkIndex", "EngineState", "as_engine"]


class ChunkRow(NamedTuple):
    """One small chunk of a source: ``text == source_text[start:end]``."""

    index: int
    start: int
    end: int
    n_tokens: int
    text: str


@dataclass
class ChildHit:
    """A small chunk found by the first stage, with the window it widens to.

    ``lower``/``upper`` are the chunk indices of its window, ``window_start``/
    ``window_end`` its character offsets; ``score`` is the fused (RRF) score and
    ``rank`` its 1-based rank; ``metadata`` the chunk's metadata (the source's own keys
    plus ``source_id``, ``chunk_index``, ``start_index``, ``end_index``, per-ranker ranks).
    ``record``: the source's record as the search read it (a ``SourceRecord``), handed on
    to the later stages (`ChunkIndex.chunk_rows`, `ChunkIndex.medium_range`, the faces)
    so one search reads each record once and every stage sees the version its hits
    came from; ``None`` where the index keeps no records (a LlamaIndex ``VectorStoreIndex``).
    """

    source_id: str
    chunk_index: int
    score: float
    rank: int
    lower: int
    upper: int
    window_start: int
    window_end: int
    start: int
    end: int
    metadata: dict[str, Any] = field(default_factory=dict)
    record: Any = field(default=None, repr=False, compare=False)


@runtime_checkable
class ChunkIndex(Protocol):
    """The index interface of `WindowedParentRetriever`."""

    @property
    def encoding_name(self) -> str:
        """tiktoken encoding of the token counts and budgets."""
        ...

    def search_children(self, query: str, k: int, *, search_type: str = "similarity",
                        weights: Sequence[float] = (0.5, 0.5), rrf_c: float = 60.0) -> list[ChildHit]:
        """The ``k`` best small chunks for ``query`` (fused ranking), best first; only
        chunks of sources that are completely indexed. An index that can filter also
        takes ``filter=`` (a `MetadataFilter`); the retrievers pass it
        only when one is set."""
        ...

    def chunk_rows(self, ranges: Sequence[tuple[str, int, int]], *,
                   records: dict[str, Any] | None = None) -> dict[str, list[ChunkRow]]:
        """Rows of the chunk ranges ``(source_id, lower, upper)`` (inclusive), per source,
        sorted and de-duplicated; unknown sources map to ``[]``. ``records``: the
        sources' records the search read already (`ChildHit.record`, by source id),
        not read again; an index without records ignores it."""
        ...

    def medium_range(self, source_id: str, chunk_index: int, *,
                     record: Any = None) -> tuple[int, int, int, int] | None:
        """``(lower, upper, start, end)`` of the medium chunks whose windows cover a
        small chunk (``None`` when the index has none); ``record``: the source's record
        as the search read it (`ChildHit.record`), not read again."""
        ...


class EngineState(Protocol):
    """The index engine as the modules below it (writer, health, parallel, Ray ingestion,
    plain) see it: `IndexEngine` satisfies it. They take it as an argument and
    never import the engine, which calls them."""

    store: Any
    vectors: Any
    keyword: Any
    manifest: dict[str, Any]

    def writing(self) -> Any: ...

    def sync_vectors(self) -> None: ...


_ENGINE_MEMBERS = ("store", "vectors", "keyword", "manifest", "writing", "sync_vectors")


def as_engine(index: Any) -> EngineState:
    """The `IndexEngine` of a face (``index.engine``) or the engine itself.

    Recognised by its members (no import of the engine: the writer, health, parallel and Ray
    modules sit below it and take whatever engine they are given).

    Raises:
        TypeError: neither an engine nor an index over one.
    """
    engine = getattr(index, "engine", index)
    if not all(hasattr(engine, name) for name in _ENGINE_MEMBERS):
        raise TypeError(f"expected an IndexEngine or an index over one (SlidingWindowIndex...), "
                        f"got {type(index).__name__}")
    return engine
