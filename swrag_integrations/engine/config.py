"""How an index cuts its sources: `IndexConfig` (recorded in the index, checked on reopen)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from swrag_integrations.core.windows import DEFAULT_ENCODING, STRATEGIES, WindowConfig, get_encoding

__all__ = ["IndexConfig", "DEFAULT_CHUNK_SIZE", "TUNABLE_INDEX_KEYS"]

DEFAULT_CHUNK_SIZE = 50
# The index keywords a tuned configuration may set (the rest are the index's own).
TUNABLE_INDEX_KEYS = ("chunk_size", "child", "strategy", "window_size", "step", "unit")


@dataclass(frozen=True)
class IndexConfig:
    """The chunking of an index.

    Args:
        chunk_size: small-chunk length in ``unit`` (small chunks tile the text).
        child: the shape of the small chunks: ``"fixed"`` (FFS pieces of ``chunk_size``
            units, step == size) or ``"sentence"`` (runs of whole delimiter units --
            sentences, clauses -- packed up to ``chunk_size`` units; a longer unit is cut
            at ``chunk_size``). Default ``"sentence"``: it raised context recall on four
            of the six dev sets and lowered it on two (docs/eval/ranking.md). Indexes
            built with ``"fixed"`` keep it.
        medium_size: small chunks per derived medium chunk.
        strategy: ``"chunks"`` (windows of ``window_size`` small chunks moving by
            ``step`` chunks) or ``"FFS"``/``"DFS"``/``"DDS"`` (windows from
            `iter_windows`, sizes in ``unit``).
        window_size: the windows' size (see ``strategy``).
        step: the windows' step (see ``strategy``).
        unit: ``"token"`` or ``"char"``.
        delimiters: DFS/DDS delimiters (``None``: the method's set).
        encoding_name: tiktoken encoding for token counts.
    """

    chunk_size: int = DEFAULT_CHUNK_SIZE
    child: str = "sentence"
    medium_size: int = 3
    strategy: str = "chunks"
    window_size: int = 6
    step: int = 3
    unit: str = "token"
    delimiters: tuple[str, ...] | None = None
    encoding_name: str = DEFAULT_ENCODING

    def __post_init__(self) -> None:
        for name in ("chunk_size", "medium_size", "window_size", "step"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        strategy = self.strategy.upper() if isinstance(self.strategy, str) else self.strategy
        if strategy == "CHUNKS":
            strategy = "chunks"
        if strategy not in ("chunks", *STRATEGIES):
            raise ValueError(
                f"unknown strategy {self.strategy!r}: use 'chunks' (windows of small chunks), 'FFS', 'DFS' or 'DDS'"
            )
        object.__setattr__(self, "strategy", strategy)
        if self.child not in ("fixed", "sentence"):
            raise ValueError(f"child must be 'fixed' or 'sentence', got {self.child!r}")
        if self.unit not in ("token", "char"):
            raise ValueError(f"unit must be 'token' or 'char', got {self.unit!r}")
        if strategy == "chunks" and self.step > self.window_size:
            raise ValueError(
                f"step ({self.step}) > window_size ({self.window_size}) would leave chunks outside every window"
            )
        if self.delimiters is not None:
            object.__setattr__(self, "delimiters", tuple(self.delimiters))
        if self.unit == "token":
            get_encoding(self.encoding_name)
        if self.child == "sentence":
            self.child_config()
        if strategy != "chunks":  # the window parameters are checked by the core, once
            self.window_config()

    def child_config(self) -> WindowConfig:
        """The DDS units the ``"sentence"`` children are packed from."""
        return WindowConfig(strategy="DDS", window_size=self.chunk_size, step=1, unit=self.unit,
                            delimiters=self.delimiters, encoding_name=self.encoding_name)

    def window_config(self) -> WindowConfig:
        """The `WindowConfig` of FFS/DFS/DDS windows."""
        if self.strategy == "chunks":
            raise ValueError("strategy 'chunks' has no window configuration")
        return WindowConfig(strategy=self.strategy, window_size=self.window_size, step=self.step, unit=self.unit,
                            delimiters=self.delimiters, encoding_name=self.encoding_name)

    @classmethod
    def resolve(cls, *, strategy: str | None = None, window_size: int | None = None, step: int | None = None,
                **kwargs: Any) -> "IndexConfig":
        """A config from optional parameters: ``None`` takes the default of the strategy
        (``chunks``: W=6/S=3 small chunks; FFS/DFS: 6/3 chunk sizes; DDS: 6 chunk sizes, 3
        delimiters)."""
        strategy = strategy or "chunks"
        chunk_size = kwargs.get("chunk_size") or DEFAULT_CHUNK_SIZE
        kind = strategy.upper() if isinstance(strategy, str) else strategy
        if kind == "CHUNKS":
            window_size = 6 if window_size is None else window_size
            step = 3 if step is None else step
        elif kind == "DDS":
            window_size = 6 * chunk_size if window_size is None else window_size
            step = 3 if step is None else step
        else:
            window_size = 6 * chunk_size if window_size is None else window_size
            step = 3 * chunk_size if step is None else step
        clean = {k: v for k, v in kwargs.items() if v is not None}
        return cls(strategy=strategy, window_size=window_size, step=step, **clean)

    def mismatches(self, requested: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """``{name: (requested, stored)}`` for the given (non-``None``) parameters that differ."""
        given = {k: v for k, v in requested.items() if v is not None}
        if given.get("strategy") is not None:
            given["strategy"] = IndexConfig.resolve(strategy=given["strategy"]).strategy
        if given.get("delimiters") is not None:
            given["delimiters"] = tuple(given["delimiters"])
        return {k: (v, getattr(self, k)) for k, v in given.items() if getattr(self, k) != v}

    def to_json(self) -> str:
        """The settings as JSON (sorted keys); `from_json` reads it back."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["delimiters"] = list(self.delimiters) if self.delimiters is not None else None
        return json.dumps(data, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "IndexConfig":
        """The settings `to_json` wrote (an index from before sentence children reads as ``child="fixed"``)."""
        data = json.loads(text)
        data.setdefault("child", "fixed")
        if data.get("delimiters") is not None:
            data["delimiters"] = tuple(data["delimiters"])
        return cls(**data)
