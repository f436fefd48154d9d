"""The configuration space the tuner searches: index parameters x retriever parameters.

A `Candidate` is one point: ``index`` (keywords of
`SlidingWindowIndex`, i.e. of
`IndexConfig`) and ``retriever`` (keywords of
`SlidingWindowIndex.as_retriever`, i.e. of
`WindowedParentRetriever`). Index
parameters need a rebuild; retriever parameters reuse one index, so the search evaluates
candidates grouped by `Candidate.index_key`.

`DEFAULT_CANDIDATE` is read from the code's own defaults (``IndexConfig()`` and the
retriever's field defaults), so "today's default" always means the current package.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from swrag_integrations.engine.config import IndexConfig
from swrag_integrations.engine.settings import DEFAULT_SETTINGS
from swrag_integrations.engine.tuned import INDEX_KEYS, RETRIEVER_KEYS, Candidate

__all__ = [
    "INDEX_KEYS",
    "RETRIEVER_KEYS",
    "Candidate",
    "SearchSpace",
    "default_candidate",
    "DEFAULT_CANDIDATE",
]

def default_candidate() -> Candidate:
    """Today's defaults: ``SlidingWindowIndex()`` + ``as_retriever()`` (``IndexConfig()`` and
    `DEFAULT_SETTINGS`)."""
    cfg = IndexConfig()
    return Candidate.make({k: getattr(cfg, k) for k in INDEX_KEYS},
                          {k: getattr(DEFAULT_SETTINGS, k) for k in RETRIEVER_KEYS})


DEFAULT_CANDIDATE = default_candidate()


# Window shapes per unit. "chunks" sizes count small chunks; FFS/DFS/DDS sizes are in the
# unit (DDS steps count delimiters). Chosen around the package's measured range: windows of
# 3-10 children, DDS 256-1024 tokens (512/3 is the eval's `parent`), FFS/DFS 512 with a
# quarter step (the method's best document-mode rows).
_TOKEN_WINDOWS = (
    {"strategy": "chunks", "window_size": 6, "step": 3},
    {"strategy": "chunks", "window_size": 4, "step": 2},
    {"strategy": "chunks", "window_size": 10, "step": 5},
    {"strategy": "DDS", "window_size": 256, "step": 3},
    {"strategy": "DDS", "window_size": 512, "step": 3},
    {"strategy": "DDS", "window_size": 1024, "step": 3},
    {"strategy": "FFS", "window_size": 512, "step": 128},
    {"strategy": "DFS", "window_size": 512, "step": 128},
)
_CHAR_WINDOWS = (
    {"strategy": "chunks", "window_size": 6, "step": 3},
    {"strategy": "DDS", "window_size": 1024, "step": 3},
    {"strategy": "FFS", "window_size": 2048, "step": 512},
)
_RETRIEVER = {
    "k_child": (10, 15, 30),
    "search_type": ("mmr", "similarity"),
    "weights": ((0.5, 0.5), (0.75, 0.25), (0.25, 0.75)),
    "expand": ("window", "medium", "chunk"),
}


@dataclass(frozen=True)
class SearchSpace:
    """The grid the tuner samples from.

    Args:
        children: small-chunk settings, each ``{"child", "chunk_size", "unit"}``; every
            distinct one is embedded once (the expensive part of a rebuild).
        windows: per unit, the window shapes ``{"strategy", "window_size", "step"}``
            combined with every child of that unit.
        retriever: retriever parameter -> values (the product is taken).

    Presets: `default` (token unit, 50-token fixed and sentence children, 8
    window shapes, 54 retriever settings: 864 candidates), `small` (for tests
    and quick looks) and `full` (adds 100-token and 200-character children).
    """

    children: tuple[Mapping[str, Any], ...]
    windows: Mapping[str, tuple[Mapping[str, Any], ...]]
    retriever: Mapping[str, tuple[Any, ...]] = field(default_factory=lambda: dict(_RETRIEVER))

    def __post_init__(self) -> None:
        if not self.children:
            raise ValueError("children must list at least one small-chunk setting")
        for child in self.children:
            unit = child.get("unit", "token")
            if not self.windows.get(unit):
                raise ValueError(f"no window shapes for unit {unit!r} (children {dict(child)!r})")
        unknown = sorted(set(self.retriever) - set(RETRIEVER_KEYS))
        if unknown:
            raise ValueError(f"unknown retriever parameter(s) {unknown}; tunable: {', '.join(RETRIEVER_KEYS)}")
        for name, values in self.retriever.items():
            if not values:
                raise ValueError(f"retriever parameter {name!r} has no values")

    @classmethod
    def default(cls) -> "SearchSpace":
        return cls(children=({"child": "fixed", "chunk_size": 50, "unit": "token"},
                             {"child": "sentence", "chunk_size": 50, "unit": "token"}),
                   windows={"token": _TOKEN_WINDOWS})

    @classmethod
    def small(cls) -> "SearchSpace":
        return cls(children=({"child": "fixed", "chunk_size": 50, "unit": "token"},
                             {"child": "sentence", "chunk_size": 50, "unit": "token"}),
                   windows={"token": (_TOKEN_WINDOWS[0], _TOKEN_WINDOWS[4])},
                   retriever={"k_child": (10, 30), "search_type": ("mmr", "similarity"),
                              "weights": ((0.5, 0.5),), "expand": ("window",)})

    @classmethod
    def full(cls) -> "SearchSpace":
        return cls(children=({"child": "fixed", "chunk_size": 50, "unit": "token"},
                             {"child": "sentence", "chunk_size": 50, "unit": "token"},
                             {"child": "fixed", "chunk_size": 100, "unit": "token"},
                             {"child": "sentence", "chunk_size": 100, "unit": "token"},
                             {"child": "sentence", "chunk_size": 200, "unit": "char"}),
                   windows={"token": _TOKEN_WINDOWS, "char": _CHAR_WINDOWS})

    def index_options(self) -> list[dict[str, Any]]:
        """Every index configuration of the space (children x their unit's windows)."""
        out = []
        for child in self.children:
            unit = child.get("unit", "token")
            for win in self.windows[unit]:
                out.append({**dict(child), "unit": unit, **dict(win)})
        return out

    def retriever_options(self) -> list[dict[str, Any]]:
        names = sorted(self.retriever)
        return [dict(zip(names, values)) for values in itertools.product(*(self.retriever[n] for n in names))]

    def size(self) -> int:
        return len(self.index_options()) * len(self.retriever_options())

    def candidates(self) -> list[Candidate]:
        """The whole grid, in a fixed order (index-major)."""
        out = []
        for ix in self.index_options():
            for rt in self.retriever_options():
                out.append(Candidate.make(ix, rt))
        return list(dict.fromkeys(out))

    def sample(self, n: int, *, seed: int = 0, include: Iterable[Candidate] = ()) -> list[Candidate]:
        """``n`` distinct candidates, deterministic for ``seed``.

        Stratified by index configuration: every index configuration gets
        ``n // n_index`` retriever settings (drawn without replacement), the rest are
        drawn at random, so the first rung sees every index shape even when ``n`` is much
        smaller than the grid. ``include`` (e.g. the default) is always part of the
        sample and counts towards ``n``.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"the number of candidates must be a positive int, got {n!r}")
        rng = random.Random(seed)
        chosen: list[Candidate] = list(dict.fromkeys(include))
        index_opts = self.index_options()
        retr_opts = self.retriever_options()
        if n >= len(index_opts) * len(retr_opts) + len(chosen):
            return list(dict.fromkeys(chosen + self.candidates()))
        per_index = max(0, (n - len(chosen)) // len(index_opts))
        seen = set(chosen)
        for ix in index_opts:
            picks = rng.sample(range(len(retr_opts)), min(per_index, len(retr_opts)))
            for p in picks:
                cand = Candidate.make(ix, retr_opts[p])
                if cand not in seen and len(chosen) < n:
                    chosen.append(cand)
                    seen.add(cand)
        pool = [(i, r) for i in range(len(index_opts)) for r in range(len(retr_opts))]
        rng.shuffle(pool)
        for i, r in pool:
            if len(chosen) >= n:
                break
            cand = Candidate.make(index_opts[i], retr_opts[r])
            if cand not in seen:
                chosen.append(cand)
                seen.add(cand)
        return chosen

    def to_dict(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            return [plain(x) for x in v] if isinstance(v, (list, tuple)) else v

        return {"children": [dict(c) for c in self.children],
                "windows": {u: [dict(w) for w in ws] for u, ws in self.windows.items()},
                "retriever": {k: plain(v) for k, v in sorted(self.retriever.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SearchSpace":
        retriever = {k: tuple(tuple(x) if isinstance(x, list) else x for x in v) for k, v in data["retriever"].items()}
        return cls(children=tuple(dict(c) for c in data["children"]),
                   windows={u: tuple(dict(w) for w in ws) for u, ws in data["windows"].items()},
                   retriever=retriever)


def group_by_index(candidates: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """Candidates grouped by the index they need, groups in first-seen order."""
    groups: dict[str, list[Candidate]] = {}
    for cand in candidates:
        groups.setdefault(cand.index_key, []).append(cand)
    return groups
