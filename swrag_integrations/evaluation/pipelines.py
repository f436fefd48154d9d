"""The strategies of ``swrag eval``: the registry, the grid point and the window pipelines.

Every pipeline is built over a list of `Source` s and answers
``retrieve(question) -> ranked [(source_id, start, end), ...]``; `Pipeline.context`
turns that into the budgeted context. Anything with this shape plugs into the runner.

`PIPELINES` maps a strategy name to its `PipelineSpec`, whose ``builder`` is
the pipeline class itself. Each module that defines pipelines registers them with
`register_pipeline` when it is imported, and `strategies` imports all those
modules in one place (the ``evaluation`` package imports it, so the registry is complete
whenever any evaluation module is in use). No module is imported by name.

Defined here (no framework): ``ffs`` / ``dfs`` / ``dds``: the document is split into
sliding windows with `swrag_integrations.core.windows.iter_windows`, windows are
ranked with BM25 over language-aware tokens (jieba for Chinese, from
`swrag_integrations.keyword.bm25`), and the ranked windows are assembled **by
offset** (`assemble_by_offset`). The LangChain-built strategies (``rcs``,
``parent``, ``default``, ``langchain-stock``...) are in `langchain_pipelines`.

With multi-query, the question plus LLM-written variants are each retrieved and, for
the window pipelines, their rankings are fused by reciprocal rank (c = 60).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterator, Mapping, Sequence


from swrag_integrations.core.windows import DEFAULT_ENCODING, iter_windows
from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext, assemble_by_offset
from swrag_integrations.evaluation.datasets import Source

__all__ = [
    "EVAL_STRATEGIES",
    "DEFAULT_STEPS",
    "PIPELINES",
    "PipelineSpec",
    "register_pipeline",
    "EvalConfig",
    "Pipeline",
    "SpanBM25Pipeline",
    "build_pipeline",
    "missing_requirement",
    "installed_strategies",
    "chunk_spans",
    "rrf_spans",
    "STOCK_DEFAULT_K",
    "shared_ranking",
]

@dataclass(frozen=True)
class PipelineSpec:
    """A strategy of ``swrag eval``: how to build it and what its step means.

    Args:
        builder: the pipeline class (or any callable returning a `Pipeline`), called
            as ``builder(sources, config, k=, embeddings=, budget=, encoding_name=, **options)``.
        step_kind: ``"fraction"`` (FFS/DFS: a fraction of the window, or ``=N`` units),
            ``"count"`` (delimiters, or another integer parameter) or ``None`` (no step).
        default_steps: the steps used when the grid gives none of this kind.
        needs_embeddings: the pipeline embeds (the runner then sets up the cached MiniLM).
        description: one line for ``swrag eval --help``.
        options: keyword arguments passed to ``builder`` on top of the common ones (a
            peer anchor's configuration, e.g. ``{"chunk_size": 256}``: one class, many
            configurations, see `peer_tuning`). A ``k`` here is used when the
            runner's ``k`` is ``None`` (the runner's ``--k`` wins).
        requires: ``(module, pip requirement)`` pairs of optional packages the strategy
            needs beyond the ``[eval]`` extra's core; without one, ``swrag eval`` skips the
            strategy with a message naming it (`missing_requirement`).
    """

    builder: Callable[..., "Pipeline"]
    step_kind: str | None = None
    default_steps: tuple[str, ...] = ()
    needs_embeddings: bool = False
    description: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    requires: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not callable(self.builder):
            raise TypeError(f"PipelineSpec builder must be a Pipeline class or a callable returning a pipeline, "
                            f"got {type(self.builder).__name__} {self.builder!r}")


# The strategies of ``swrag eval``, by name. Each module that defines pipelines registers
# its own with `register_pipeline` when imported; `strategies` imports every
# such module in one place (the package imports it, so the registry is full on first use).
PIPELINES: dict[str, PipelineSpec] = {}


def register_pipeline(name: str, spec: PipelineSpec) -> None:
    """Add a strategy to ``swrag eval`` (``name`` lower-case, no ``|``, ``,`` or space);
    registering a name again replaces its spec.

    Raises:
        ValueError: an invalid ``name``.
        TypeError: ``spec`` is not a `PipelineSpec`.
    """
    if not name or name != name.lower() or any(c in name for c in "|, "):
        raise ValueError(f"invalid strategy name {name!r}: lower-case, without '|', ',' or spaces")
    if not isinstance(spec, PipelineSpec):
        raise TypeError(f"register_pipeline spec must be a PipelineSpec, got {type(spec).__name__}")
    PIPELINES[name] = spec


def missing_requirement(strategy: str) -> str | None:
    """Why ``strategy`` cannot run here (one line naming the package and how to install it),
    or ``None`` when every module of its `PipelineSpec.requires` is importable."""
    import importlib.util
    import re

    for module, requirement in PIPELINES[strategy].requires:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package is missing, or a module without a spec
            found = False
        if not found:
            name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
            return (f"{strategy} needs {name} (module {module} is not installed): "
                    f"pip install '{requirement}' (part of the [eval] extra: pip install 'swrag-integrations[eval]')")
    return None


def installed_strategies(strategies: Sequence[str], prog: str, what: str = "strategy") -> list[str]:
    """``strategies`` without those whose optional packages are missing, each skipped with a
    line ``"<prog>: skipping <name>: <reason>"`` on stderr (`missing_requirement`).

    Raises:
        ValueError: ``strategies`` is not empty and none of them can run (``what`` names
            them in the message: ``"strategy"``, ``"peer"``).
    """
    import sys

    kept = []
    for name in strategies:
        reason = missing_requirement(name)
        if reason:
            print(f"{prog}: skipping {name}: {reason}", file=sys.stderr, flush=True)
        else:
            kept.append(name)
    if strategies and not kept:
        raise ValueError(f"no {what} can run: {', '.join(strategies)} need packages that are not installed "
                         "(see the lines above)")
    return kept


def __getattr__(name: str):  # EVAL_STRATEGIES / DEFAULT_STEPS follow the registry
    if name == "EVAL_STRATEGIES":
        return tuple(PIPELINES)
    if name == "DEFAULT_STEPS":
        return {k: v.default_steps for k, v in PIPELINES.items()}
    raise AttributeError(name)
STOCK_DEFAULT_K = 20  # candidates fetched by the stock retrievers when ``k`` is None


@dataclass(frozen=True)
class EvalConfig:
    """One point of the grid.

    Args:
        strategy: one of `EVAL_STRATEGIES`.
        window: window / chunk size in ``unit``.
        step: label: a fraction ``"1/4"`` of the window (ffs, dfs), a
            delimiter count ``"3"`` (dds, parent), an absolute ``"=128"`` step in units
            (ffs/dfs), or ``None`` (rcs, langchain-stock).
        unit: ``"token"`` or ``"char"``.
        multi_query: retrieve with LLM-written query variants too.
    """

    strategy: str
    window: int
    step: str | None = None
    unit: str = "token"
    multi_query: bool = False

    def __post_init__(self) -> None:
        if self.strategy not in PIPELINES:
            raise ValueError(f"strategy must be one of {', '.join(PIPELINES)}, got {self.strategy!r}")
        if self.unit not in ("token", "char"):
            raise ValueError(f"unit must be 'token' or 'char', got {self.unit!r}")
        if int(self.window) <= 0:
            raise ValueError(f"window must be > 0, got {self.window}")
        if PIPELINES[self.strategy].step_kind is None:
            object.__setattr__(self, "step", None)
        elif self.step is None:
            raise ValueError(f"strategy {self.strategy} needs a step")
        else:
            self.step_units  # validates

    @property
    def step_units(self) -> int | None:
        """The step in units (ffs/dfs) or delimiters (dds, parent)."""
        if self.step is None:
            return None
        label = str(self.step)
        if PIPELINES[self.strategy].step_kind == "count":
            value = int(label.lstrip("="))
        elif label.startswith("="):
            value = int(label[1:])
        else:
            frac = Fraction(label)
            if not 0 < frac <= 1:
                raise ValueError(f"step fraction must be in (0, 1], got {label}")
            value = max(1, int(round(self.window * frac)))
        if value <= 0:
            raise ValueError(f"step must be > 0, got {label}")
        return value

    @property
    def key(self) -> str:
        return f"{self.strategy}|{self.window}|{self.step or '-'}|{self.unit}|{'mq' if self.multi_query else 'sq'}"

    @property
    def label(self) -> str:
        step = f"/{self.step}" if self.step is not None else ""
        return f"{self.strategy} {self.window}{step}{' +MQ' if self.multi_query else ''}"


# ----------------------------------------------------------------------- chunking


def chunk_spans(text: str, config: EvalConfig, *, encoding_name: str = DEFAULT_ENCODING) -> list[tuple[int, int]]:
    """Character spans of the sliding windows of ``text`` for ``config``'s strategy, from
    `iter_windows`: FFS/DFS/DDS windows for ``ffs``/``dfs``/``dds``, the DDS parent
    windows for ``parent``. (``rcs`` chunks come from LangChain's splitter:
    `rcs_spans`.)

    Raises:
        ValueError: ``config.strategy`` is not a window strategy.
    """
    strategy = config.strategy
    if strategy in ("ffs", "dfs", "dds", "parent"):
        kind = "DDS" if strategy == "parent" else strategy.upper()
        return [
            (s.start, s.end)
            for s in iter_windows(text, kind, config.window, config.step_units, unit=config.unit, encoding_name=encoding_name)
        ]
    raise ValueError(f"chunk_spans needs a window strategy (ffs, dfs, dds, parent), got {strategy!r}: "
                     "rcs chunks come from swrag_integrations.evaluation.langchain_pipelines.rcs_spans")


def rrf_spans(lists: Sequence[Sequence[tuple[str, int, int]]], c: float = 60.0,
              weights: Sequence[float] | None = None) -> list[tuple[str, int, int]]:
    """Reciprocal-rank fusion of ranked span lists (identity = exact span; ``weights``
    one per list, equal by default), by `swrag_integrations.engine.fusion.rrf`."""
    from swrag_integrations.engine.fusion import rrf

    return [span for span, _score, _ranks in rrf(lists, weights, c=c)]


# ---------------------------------------------------------------------- pipelines


class Pipeline:
    """Base class: index sources, rank spans, assemble a context.

    Subclasses set ``chunks`` and ``index_bytes`` and implement `rank`.
    """

    assembly = "offset"
    #: whether `retrieve` depends on the budget (a budget planner inside the retriever);
    #: if not, one ranking per question serves every budget (`shared_ranking`)
    ranking_uses_budget = False

    def __init__(self, sources: Sequence[Source], config: EvalConfig, *, k: int | None = None,
                 encoding_name: str = DEFAULT_ENCODING, embeddings=None, budget: int = DEFAULT_BUDGET) -> None:
        self.sources = list(sources)
        self.texts = {s.source_id: s.text for s in self.sources}
        self.config = config
        self.k = k
        self.encoding_name = encoding_name
        self.embeddings = embeddings
        self.budget = budget
        self.chunks = 0
        self.index_bytes = 0

    def rank(self, query: str) -> list[tuple[str, int, int]]:
        raise NotImplementedError

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        """Ranked spans for ``question`` (fused with ``queries`` when given)."""
        if not queries:
            return self.rank(question)
        return rrf_spans([self.rank(q) for q in [question, *queries]])

    def context(self, question: str, budget: int = DEFAULT_BUDGET, queries: Sequence[str] = ()) -> AssembledContext:
        """The budgeted context for ``question``."""
        return assemble_by_offset(self.retrieve(question, queries), self.texts, budget, encoding_name=self.encoding_name)

    def set_budget(self, budget: int) -> None:
        """Answer later questions under ``budget`` tokens, on the same index (budget curves)."""
        self.budget = budget

    def close(self) -> None:
        """Release external resources (vector store collections)."""


def _bm25_index(texts: Sequence[str]):
    from swrag_integrations.keyword.bm25 import BM25Index

    index = BM25Index()
    index.upsert([str(i) for i in range(len(texts))], list(texts))
    return index


def _bm25_bytes(index) -> int:
    return index.token_bytes()


class SpanBM25Pipeline(Pipeline):
    """ffs / dfs / dds (rcs: `RCSPipeline`): chunks as offsets, BM25 ranking, offset assembly.

    Zero-score chunks follow the scored ones in document order, so the budget is
    always filled. ``k`` (if set) caps how many ranked chunks are assembled.
    """

    def __init__(self, sources, config, **kwargs) -> None:
        super().__init__(sources, config, **kwargs)
        self.spans: list[tuple[str, int, int]] = []
        for source in self.sources:
            self.spans.extend((source.source_id, a, b) for a, b in self.chunk(source.text))
        self.index = _bm25_index([self.texts[s][a:b] for s, a, b in self.spans]) if self.spans else None
        self.chunks = len(self.spans)
        # stored per chunk: source row (int32) + two int64 offsets; plus the BM25 data
        self.index_bytes = self.chunks * 20 + (_bm25_bytes(self.index) if self.index else 0)

    def chunk(self, text: str) -> list[tuple[int, int]]:
        """The chunks of ``text`` as character spans (the config's sliding windows; a
        subclass may chunk otherwise)."""
        return chunk_spans(text, self.config, encoding_name=self.encoding_name)

    def rank(self, query: str) -> list[tuple[str, int, int]]:
        if not self.spans:
            return []
        hits = self.index.search(query, k=len(self.spans)) if query.strip() else []
        order = [int(i) for i, _ in hits]
        seen = set(order)
        order += [i for i in range(len(self.spans)) if i not in seen]
        if self.k is not None:
            order = order[: self.k]
        return [self.spans[i] for i in order]


# The window strategies: FFS/DFS steps are fractions of the window, DDS steps count delimiters.
register_pipeline("ffs", PipelineSpec(SpanBM25Pipeline, "fraction", ("1/2", "1/4", "1/8"),
                                      description="FFS windows ranked by CJK BM25, merged by offset"))
register_pipeline("dfs", PipelineSpec(SpanBM25Pipeline, "fraction", ("1/2", "1/4", "1/8"),
                                      description="DFS windows ranked by CJK BM25, merged by offset"))
register_pipeline("dds", PipelineSpec(SpanBM25Pipeline, "count", ("2", "3", "5"),
                                      description="DDS windows ranked by CJK BM25, merged by offset"))


@contextmanager
def shared_ranking(pipeline: Pipeline) -> Iterator[None]:
    """Within the block, ``pipeline`` ranks each distinct question (and query variants) once.

    For a budget curve: the contexts of one question under several budgets then differ only
    in their assembly. A pipeline whose ranking depends on the budget
    (`Pipeline.ranking_uses_budget`) ranks as usual. Covers ``retrieve`` and the
    LangChain anchors' ``_docs`` (the two ranking entry points of the pipelines here).
    """
    if pipeline.ranking_uses_budget:
        yield
        return
    memo: dict[tuple, list] = {}
    patched = []
    for name in ("retrieve", "_docs"):
        method = getattr(pipeline, name, None)
        if method is None:
            continue

        def cached(question: str, queries: Sequence[str] = (), _method=method, _name=name) -> list:
            key = (_name, question, tuple(queries))
            if key not in memo:
                memo[key] = list(_method(question, queries))
            return list(memo[key])

        setattr(pipeline, name, cached)  # an instance attribute shadows the method
        patched.append(name)
    try:
        yield
    finally:
        for name in patched:
            delattr(pipeline, name)


def build_pipeline(
    config: EvalConfig,
    sources: Sequence[Source],
    *,
    k: int | None = None,
    embeddings=None,
    budget: int = DEFAULT_BUDGET,
    encoding_name: str = DEFAULT_ENCODING,
) -> Pipeline:
    """Index ``sources`` for ``config`` and return the pipeline (see `PIPELINES`).

    The spec's ``options`` are passed to its builder too; their ``k`` applies when ``k``
    is ``None``.
    """
    spec = PIPELINES[config.strategy]
    options = dict(spec.options)
    k = k if k is not None else options.pop("k", None)
    options.pop("k", None)
    return spec.builder(sources, config, k=k, embeddings=embeddings, budget=budget, encoding_name=encoding_name, **options)
