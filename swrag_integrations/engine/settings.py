"""The windowed parent retriever's settings and their defaults, defined once.

`RetrieverSettings` is the one definition behind the LangChain retriever
(`WindowedParentRetriever`), the LlamaIndex retriever
(`WindowedLlamaIndexRetriever`), the CLI's options, the tuning
search space and the tuned-configuration file (`tuned`): each takes its
defaults from here and checks its values here, so a bad value gets the same message
everywhere and a default changes in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

__all__ = ["RetrieverSettings", "DEFAULT_SETTINGS", "DEFAULT_K_CHILD", "DEFAULT_SEARCH_TYPE", "DEFAULT_BUDGET_TOKENS",
           "SEARCH_TYPES", "EXPAND_MODES", "FUSIONS", "TUNABLE_RETRIEVER_KEYS", "positive_int", "check_weights"]

# The retriever's first stage: small chunks fetched per query and the dense search.
# Measured on the six dev sets with sentence children (docs/eval/ranking.md): k_child 30
# kept document mode (15 lost 7 points on qasper), plain similarity matched MMR within
# noise and was 2-6x faster per query.
DEFAULT_K_CHILD = 30
DEFAULT_SEARCH_TYPE = "similarity"
DEFAULT_BUDGET_TOKENS = 1500
SEARCH_TYPES = ("similarity", "mmr")
EXPAND_MODES = ("window", "medium", "chunk")
# How stage 1 ranks its candidates: "rrf" (the default), "learned", or "auto" (the learned fusion
# for a hybrid search under a tight budget, else RRF; `swrag_integrations.engine.learned_fusion.fusion_for`).
FUSIONS = ("auto", "rrf", "learned")
# The settings the tuner searches (``k``, ``budget_tokens`` and ``rrf_c`` are the user's).
TUNABLE_RETRIEVER_KEYS = ("k_child", "search_type", "weights", "expand")


def positive_int(name: str, value: Any, *, optional: bool = False) -> Any:
    """``value`` if it is a positive int (or ``None`` when ``optional``), else a
    ``ValueError`` naming the parameter -- the one check behind the retrievers' fields."""
    if value is None and optional:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int{' or None' if optional else ''}, got {value!r}")
    return value


@dataclass(frozen=True)
class RetrieverSettings:
    """How the windowed parent retriever searches and assembles (checked on creation).

    Args:
        k: at most this many merged windows (``None``: the budget decides).
        k_child: small chunks fetched by the first stage per query (default 30; see
            docs/eval/ranking.md for the measurements behind it).
        budget_tokens: token budget of the whole returned context (``None``: no limit).
        search_type: ``"similarity"`` (default) or ``"mmr"`` for the dense part.
        weights: RRF weights of (BM25, dense): two non-negative numbers, not both 0.
        rrf_c: the RRF constant (positive).
        expand: ``"window"`` (default), ``"medium"`` or ``"chunk"`` (no widening).
        fusion: how stage 1 ranks BM25 and dense hits: ``"rrf"`` (default: weighted
            reciprocal-rank fusion), ``"learned"`` (the logistic model of
            `swrag_integrations.engine.learned_fusion`; needs a hybrid search) or ``"auto"``
            (learned when the search is hybrid and ``budget_tokens`` is at most
            `swrag_integrations.engine.learned_fusion.LEARNED_FUSION_MAX_BUDGET`, else RRF).
            Not the default: the model helps on the sets it was fitted beside but not on
            every other (docs/eval/levers.md).

    Raises:
        ValueError: a value out of range; the message names the parameter and what it accepts.
    """

    k: int | None = None
    k_child: int = DEFAULT_K_CHILD
    budget_tokens: int | None = DEFAULT_BUDGET_TOKENS
    search_type: str = DEFAULT_SEARCH_TYPE
    weights: tuple[float, float] = (0.5, 0.5)
    rrf_c: float = 60.0
    expand: str = "window"
    fusion: str = "rrf"

    def __post_init__(self) -> None:
        positive_int("k", self.k, optional=True)
        positive_int("k_child", self.k_child)
        positive_int("budget_tokens", self.budget_tokens, optional=True)
        if self.search_type not in SEARCH_TYPES:
            raise ValueError(f"search_type must be one of {SEARCH_TYPES}, got {self.search_type!r}")
        if self.expand not in EXPAND_MODES:
            raise ValueError(f"expand must be one of {EXPAND_MODES}, got {self.expand!r}")
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        object.__setattr__(self, "weights", check_weights(self.weights))
        if self.fusion == "learned" and not self.hybrid:
            raise ValueError(f"fusion='learned' needs a hybrid search (BM25 and dense weights both > 0), got "
                             f"weights={self.weights}; give both weights > 0 or use fusion='rrf' or 'auto'")
        rrf_c = self.rrf_c
        if isinstance(rrf_c, bool) or not isinstance(rrf_c, (int, float)) or not rrf_c > 0:
            raise ValueError(f"rrf_c must be a positive number, got {rrf_c!r}")

    @property
    def hybrid(self) -> bool:
        """Whether stage 1 fuses BM25 and dense hits (both ``weights`` > 0)."""
        return all(w > 0 for w in self.weights)

    @classmethod
    def from_kwargs(cls, values: Mapping[str, Any], *, where: str = "retriever") -> "RetrieverSettings":
        """Settings from keywords (missing ones take the defaults); an unknown keyword is a
        ``TypeError`` naming it and the known ones (a bad value: ``ValueError``)."""
        unknown = sorted(set(values) - set(cls.keys()))
        if unknown:
            raise TypeError(f"{where} got unexpected keyword(s) {unknown}; known: {', '.join(cls.keys())}")
        return cls(**values)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """Every setting's name."""
        return tuple(f.name for f in fields(cls))

    def with_(self, **changes: Any) -> "RetrieverSettings":
        """A copy with ``changes`` (checked)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The settings as keywords (``weights`` a tuple)."""
        return asdict(self)


def check_weights(weights: Any) -> tuple[float, float]:
    """``weights`` as a ``(bm25, dense)`` tuple of floats, or a ``ValueError``."""
    try:
        w = tuple(float(x) for x in weights)
    except (TypeError, ValueError):
        raise ValueError(f"weights must be two numbers (bm25, dense), got {weights!r}") from None
    if len(w) != 2 or any(x < 0 for x in w) or not any(x > 0 for x in w):
        raise ValueError(f"weights must be two non-negative numbers (bm25, dense), not both 0, got {weights!r}")
    return w  # type: ignore[return-value]


DEFAULT_SETTINGS = RetrieverSettings()
