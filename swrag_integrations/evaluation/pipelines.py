"""Retrieval pipelines evaluated by the grid.

Every pipeline is built over a list of :class:`~.datasets.Source` s and answers
``retrieve(question) -> ranked [(source_id, start, end), ...]``; :meth:`Pipeline.context`
turns that into the budgeted context. Anything with this shape plugs into the runner.

* ``ffs`` / ``dfs`` / ``dds``: the document is split into sliding windows with
  :func:`swrag_integrations.core.windows.iter_windows`, windows are ranked with BM25 over
  language-aware tokens (jieba for Chinese, from
  :mod:`swrag_integrations.keyword.bm25`), and the ranked windows are assembled **by
  offset** (:func:`~.context.assemble_by_offset`).
* ``rcs``: LangChain's ``RecursiveCharacterTextSplitter`` (tiktoken length function in
  token unit, no overlap) as chunker, then the same BM25 ranking and assembly.
* ``parent``: :class:`swrag_integrations.langchain.retriever.WindowedParentRetriever`: small
  chunks (50 tokens) found by hybrid search (BM25 + MiniLM in Chroma), widened to their
  DDS windows (``window`` units, ``step`` delimiters), merged by offset in the budget.
  ``window``/``step`` only shape the parents (how far a hit is widened); how much of
  them is kept is decided by the budget planner, and the number of parents is not
  capped unless ``k`` is given (the retriever's default fills the budget).
* ``langchain-stock``: LangChain parts as shipped: ``RecursiveCharacterTextSplitter``
  (same settings as ``rcs``), ``BM25Retriever`` (``str.split`` tokens), Chroma with the
  MiniLM embedder, ``EnsembleRetriever`` (equal weights); chunk texts are concatenated
  in rank order (:func:`~.context.assemble_by_text`). Multi-query uses LangChain's
  ``MultiQueryRetriever``.

With multi-query, the question plus LLM-written variants are each retrieved and, for
the window pipelines, their rankings are fused by reciprocal rank (c = 60).
"""

from __future__ import annotations

import pickle
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterator, Mapping, Sequence


from swrag_integrations.core.windows import DEFAULT_ENCODING, iter_windows
from swrag_integrations.evaluation.context import DEFAULT_BUDGET, AssembledContext, assemble_by_offset, assemble_by_text
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
    "ParentPipeline",
    "LangChainStockPipeline",
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
        builder: ``"module:Class"`` (relative to this package, or absolute) called as
            ``Class(sources, config, k=, embeddings=, budget=, encoding_name=, **extra)``.
        step_kind: ``"fraction"`` (FFS/DFS: a fraction of the window, or ``=N`` units),
            ``"count"`` (delimiters, or another integer parameter) or ``None`` (no step).
        default_steps: the steps used when the grid gives none of this kind.
        needs_embeddings: the pipeline embeds (the runner then sets up the cached MiniLM).
        description: one line for ``swrag eval --help``.
        options: keyword arguments passed to ``builder`` on top of the common ones (a
            peer anchor's configuration, e.g. ``{"chunk_size": 256}``: one class, many
            configurations, see :mod:`~.peer_tuning`). A ``k`` here is used when the
            runner's ``k`` is ``None`` (the runner's ``--k`` wins).
        requires: ``(module, pip requirement)`` pairs of optional packages the strategy
            needs beyond the ``[eval]`` extra's core; without one, ``swrag eval`` skips the
            strategy with a message naming it (:func:`missing_requirement`).
    """

    builder: str
    step_kind: str | None = None
    default_steps: tuple[str, ...] = ()
    needs_embeddings: bool = False
    description: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    requires: tuple[tuple[str, str], ...] = ()


# The method's defaults: FFS/DFS steps are fractions of the window, DDS steps count
# delimiters; ``parent`` windows are DDS windows (step in delimiters). Other modules add
# strategies with :func:`register_pipeline` (an entry here names them lazily).
PIPELINES: dict[str, PipelineSpec] = {
    "ffs": PipelineSpec(".pipelines:SpanBM25Pipeline", "fraction", ("1/2", "1/4", "1/8"),
                        description="FFS windows ranked by CJK BM25, merged by offset"),
    "dfs": PipelineSpec(".pipelines:SpanBM25Pipeline", "fraction", ("1/2", "1/4", "1/8"),
                        description="DFS windows ranked by CJK BM25, merged by offset"),
    "dds": PipelineSpec(".pipelines:SpanBM25Pipeline", "count", ("2", "3", "5"),
                        description="DDS windows ranked by CJK BM25, merged by offset"),
    "rcs": PipelineSpec(".pipelines:SpanBM25Pipeline", None,
                        description="RecursiveCharacterTextSplitter chunks ranked by CJK BM25, merged by offset"),
    "parent": PipelineSpec(".pipelines:ParentPipeline", "count", ("3",), needs_embeddings=True,
                           description="the windowed parent retriever (SlidingWindowIndex defaults)"),
    "default": PipelineSpec(".pipelines:DefaultPipeline", None, needs_embeddings=True,
                            description="the package's defaults: SlidingWindowIndex() + as_retriever() (--windows ignored)"),
    "default-milvus": PipelineSpec(".pipelines:DefaultMilvusPipeline", None, needs_embeddings=True,
                                   description="the defaults with the vectors and BM25 in Milvus Lite (the [milvus] "
                                               "extra): keyword search in the store instead of in process"),
    # levers on the default, measured before any enters the engine (evaluation/levers.py)
    "default+windows": PipelineSpec(".peers.levers:DefaultWindowsFusionPipeline", None, needs_embeddings=True,
                                    description="the default's spans RRF-fused with DDS 512/3 windows ranked by BM25"),
    "default+windows-lang": PipelineSpec(".peers.levers:DefaultWindowsLanguagePipeline", None, needs_embeddings=True,
                                         description="default+windows, windows weighted 2:1 for Chinese questions, "
                                                     "1:2 for others"),
    "default+zh-bm25-0.7": PipelineSpec(".peers.levers:DefaultChineseWeightsPipeline", None, needs_embeddings=True,
                                        description="the default; Chinese questions fuse (BM25, dense) 0.7/0.3"),
    "default+zh-bm25-0.85": PipelineSpec(".peers.levers:DefaultChineseWeights85Pipeline", None, needs_embeddings=True,
                                         description="the default; Chinese questions fuse (BM25, dense) 0.85/0.15"),
    "default+adaptive-k15": PipelineSpec(".peers.levers:DefaultAdaptiveKPipeline", None, needs_embeddings=True,
                                         description="the default; k_child 15 for a question whose hits spread over "
                                                     "4+ sources without a multi-hop cue"),
    "default+adaptive-k10": PipelineSpec(".peers.levers:DefaultAdaptiveK10Pipeline", None, needs_embeddings=True,
                                         description="the default; k_child 10 for a question whose hits spread over "
                                                     "4+ sources without a multi-hop cue"),
    "default-v1": PipelineSpec(".pipelines:DefaultV1Pipeline", None, needs_embeddings=True,
                               description="fixed 50-token children, k_child 30, MMR (the pre-issue-19 children and "
                                           "search) with parents by best hit: not the old summed-hit default"),
    "langchain-stock": PipelineSpec(".pipelines:LangChainStockPipeline", None, needs_embeddings=True,
                                    description="LangChain as shipped: RCS, str.split BM25 + Chroma, EnsembleRetriever"),
    # the strongest peers, built from the frameworks' shipped parts (evaluation/anchors.py)
    "langchain-ensemble": PipelineSpec(".peers.anchors:LangChainEnsemblePipeline", None, needs_embeddings=True,
                                       description="LangChain EnsembleRetriever: jieba-aware BM25Retriever + Chroma over RCS"),
    "llamaindex-window": PipelineSpec(".peers.anchors:LlamaIndexSentenceWindowPipeline", None, needs_embeddings=True,
                                      description="LlamaIndex sentence-window retrieval + metadata replacement"),
    "langchain-parent": PipelineSpec(".peers.anchors:LangChainParentDocumentPipeline", None, needs_embeddings=True,
                                     description="LangChain ParentDocumentRetriever (small chunks, parent chunks)"),
    "llamaindex-hybrid": PipelineSpec(".peers.hybrid_anchor:LlamaIndexHybridPipeline", None, needs_embeddings=True,
                                      description="LlamaIndex sentence windows: BM25Retriever + vector retriever fused "
                                                  "by QueryFusionRetriever, metadata replacement",
                                      requires=(("llama_index.retrievers.bm25", "llama-index-retrievers-bm25>=0.8"),)),
    # corpus-structure methods over the same windows
    "raptor": PipelineSpec("swrag_integrations.evaluation.methods.raptor:RaptorPipeline", None, needs_embeddings=True,
                           description="RAPTOR summary tree over the index's chunks (collapsed tree, hybrid ranking)"),
    "raptor-dense": PipelineSpec("swrag_integrations.evaluation.methods.raptor:RaptorDensePipeline", None,
                                 needs_embeddings=True,
                                 description="RAPTOR collapsed tree ranked by cosine alone (the paper's ranking)"),
    "raptor-llm": PipelineSpec("swrag_integrations.evaluation.methods.raptor:RaptorLLMPipeline", None, needs_embeddings=True,
                               description="RAPTOR collapsed tree with the local LLM's summaries (slow)"),
    "raptor-traverse": PipelineSpec("swrag_integrations.evaluation.methods.raptor:RaptorTraversePipeline", None,
                                    needs_embeddings=True, description="RAPTOR tree traversal, extractive summaries"),
    "hipporag": PipelineSpec("swrag_integrations.evaluation.methods.graph:HippoRAGPipeline", None, needs_embeddings=True,
                             description="HippoRAG: passage-phrase graph, personalized PageRank"),
    "graphrag-local": PipelineSpec("swrag_integrations.evaluation.methods.graph:GraphRAGLocalPipeline", None,
                                   needs_embeddings=True, description="GraphRAG local search over Leiden communities"),
    "hipporag-llm": PipelineSpec("swrag_integrations.evaluation.methods.graph:HippoRAGLLMPipeline", None, needs_embeddings=True,
                                 description="HippoRAG with the local LLM's triples (slow)"),
    "graphrag-local-llm": PipelineSpec("swrag_integrations.evaluation.methods.graph:GraphRAGLocalLLMPipeline", None,
                                       needs_embeddings=True,
                                       description="GraphRAG local search with the local LLM's triples (slow)"),
}


def register_pipeline(name: str, spec: PipelineSpec) -> None:
    """Add a strategy to ``swrag eval`` (``name`` lower-case, no ``|`` or ``,``)."""
    if not name or name != name.lower() or any(c in name for c in "|, "):
        raise ValueError(f"invalid strategy name {name!r}")
    PIPELINES[name] = spec


def missing_requirement(strategy: str) -> str | None:
    """Why ``strategy`` cannot run here (one line naming the package and how to install it),
    or ``None`` when every module of its :attr:`PipelineSpec.requires` is importable."""
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
    line ``"<prog>: skipping <name>: <reason>"`` on stderr (:func:`missing_requirement`).

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
PARENT_CHILD_SIZE = {"token": 50, "char": 200}  # small-chunk size of ``parent``


@dataclass(frozen=True)
class EvalConfig:
    """One point of the grid.

    Args:
        strategy: one of :data:`EVAL_STRATEGIES`.
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


# RecursiveCharacterTextSplitter separators a careful user gives it for Chinese text: paragraphs, lines,
# then sentence ends (kept at the end of their sentence), clauses, then the library's last resorts (space, character)
CJK_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", "。", "！", "？", "；", "…", "，", " ", "")


def _rcs_splitter(window: int, unit: str, encoding_name: str, separators: str = "default"):
    """LangChain's ``RecursiveCharacterTextSplitter`` (no overlap, ``add_start_index``).

    ``separators="default"`` is the splitter as shipped (``["\\n\\n", "\\n", " ", ""]``,
    separators kept at the start of the next piece); ``"cjk"`` uses
    :data:`CJK_SEPARATORS` with ``keep_separator="end"`` (a ``。`` stays with its sentence).
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if separators == "default":
        extra: dict = {}
    elif separators == "cjk":
        extra = {"separators": list(CJK_SEPARATORS), "keep_separator": "end"}
    else:
        raise ValueError(f"separators must be 'default' or 'cjk', got {separators!r}")
    if unit == "token":
        return RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name=encoding_name, chunk_size=window, chunk_overlap=0, add_start_index=True, **extra
        )
    return RecursiveCharacterTextSplitter(chunk_size=window, chunk_overlap=0, add_start_index=True, **extra)


def chunk_spans(text: str, config: EvalConfig, *, encoding_name: str = DEFAULT_ENCODING) -> list[tuple[int, int]]:
    """Character spans of the chunks of ``text`` for ``config``'s strategy.

    ffs/dfs/dds come from :func:`iter_windows`; rcs/langchain-stock from LangChain's
    ``RecursiveCharacterTextSplitter`` (``start_index`` metadata, chunks are exact
    substrings). ``parent`` returns its parent windows.
    """
    strategy = config.strategy
    if strategy in ("ffs", "dfs", "dds"):
        return [
            (s.start, s.end)
            for s in iter_windows(
                text, strategy.upper(), config.window, config.step_units, unit=config.unit, encoding_name=encoding_name
            )
        ]
    if strategy == "parent":
        return [
            (s.start, s.end)
            for s in iter_windows(text, "DDS", config.window, config.step_units, unit=config.unit, encoding_name=encoding_name)
        ]
    splitter = _rcs_splitter(config.window, config.unit, encoding_name)
    spans = []
    for doc in splitter.create_documents([text]):
        start = doc.metadata["start_index"]
        if start < 0:  # the splitter could not locate the chunk; should not happen
            start = text.find(doc.page_content)
        spans.append((start, start + len(doc.page_content)))
    return spans


def rrf_spans(lists: Sequence[Sequence[tuple[str, int, int]]], c: float = 60.0,
              weights: Sequence[float] | None = None) -> list[tuple[str, int, int]]:
    """Reciprocal-rank fusion of ranked span lists (identity = exact span; ``weights``
    one per list, equal by default), by :func:`swrag_integrations.engine.fusion.rrf`."""
    from swrag_integrations.engine.fusion import rrf

    return [span for span, _score, _ranks in rrf(lists, weights, c=c)]


# ---------------------------------------------------------------------- pipelines


class Pipeline:
    """Base class: index sources, rank spans, assemble a context.

    Subclasses set ``chunks`` and ``index_bytes`` and implement :meth:`rank`.
    """

    assembly = "offset"
    #: whether :meth:`retrieve` depends on the budget (a budget planner inside the retriever);
    #: if not, one ranking per question serves every budget (:func:`shared_ranking`)
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
    """ffs / dfs / dds / rcs: chunks as offsets, BM25 ranking, offset assembly.

    Zero-score chunks follow the scored ones in document order, so the budget is
    always filled. ``k`` (if set) caps how many ranked chunks are assembled.
    """

    def __init__(self, sources, config, **kwargs) -> None:
        super().__init__(sources, config, **kwargs)
        self.spans: list[tuple[str, int, int]] = []
        for source in self.sources:
            self.spans.extend((source.source_id, a, b) for a, b in chunk_spans(source.text, config, encoding_name=self.encoding_name))
        self.index = _bm25_index([self.texts[s][a:b] for s, a, b in self.spans]) if self.spans else None
        self.chunks = len(self.spans)
        # stored per chunk: source row (int32) + two int64 offsets; plus the BM25 data
        self.index_bytes = self.chunks * 20 + (_bm25_bytes(self.index) if self.index else 0)

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


class ParentPipeline(Pipeline):
    """Windowed parent-child retrieval with :class:`~swrag_integrations.langchain.retriever.WindowedParentRetriever`.

    The sources go into an in-memory :class:`~swrag_integrations.langchain.index.SlidingWindowIndex`
    (small chunks of :data:`PARENT_CHILD_SIZE` units, embedded with the MiniLM model,
    plus BM25; parent windows are DDS windows of ``window`` units and ``step``
    delimiters); the retriever finds small chunks by hybrid search, widens them to
    their windows and assembles them by offset within the budget. ``k`` (if set) caps
    the number of parents; otherwise the retriever's default (``k=None``: as many
    parents as the budget holds; a fixed 4 left it a third empty on HotpotQA passages).
    """

    RETRIEVER_OPTIONS: dict = {}
    ranking_uses_budget = True  # the retriever's planner chooses parents for its budget

    def __init__(self, sources, config, *, embeddings=None, budget: int = DEFAULT_BUDGET, **kwargs) -> None:
        super().__init__(sources, config, embeddings=embeddings, budget=budget, **kwargs)
        import tempfile

        import chromadb
        from chromadb.config import Settings
        from langchain_core.documents import Document

        from swrag_integrations.langchain.index import SlidingWindowIndex
        from swrag_integrations.engine.ids import source_id_for

        if embeddings is None:
            from swrag_integrations.embeddings.minilm import default_embeddings

            embeddings = default_embeddings()
        self._client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        self._name = f"swrag-eval-parent-{uuid.uuid4().hex[:12]}"
        self._dir = tempfile.TemporaryDirectory(prefix="swrag-eval-")
        self.index = SlidingWindowIndex(
            self._dir.name,
            **self._store_options(),
            collection_name=self._name,
            embedding=embeddings,
            encoding_name=self.encoding_name,
            show_progress=False,
            **self._index_options(config),
        )
        docs = [Document(page_content=s.text, id=s.source_id, metadata={"eval_source": s.source_id}) for s in self.sources]
        self._ids = {source_id_for(d): d.id for d in docs}
        if docs:
            self.index.engine.index_documents(docs)
        self.chunks = self.index.engine.count("small")
        self.budget = budget
        self.make_retrievers()
        dim = len(embeddings.embed_query("dimension probe"))
        self.index_bytes = (
            # the source texts (source store) and the small-chunk texts beside their vectors (they tile the sources)
            2 * sum(len(s.text.encode("utf-8")) for s in self.sources)
            + self.index.engine.count(None) * dim * 4
            + (_bm25_bytes(self.index.engine.keyword.bm25) if hasattr(self.index.engine.keyword, "bm25") else 0)
        )

    def _store_options(self) -> dict:
        """Where the index keeps its vectors: an in-memory Chroma collection."""
        return dict(client=self._client)

    def _index_options(self, config) -> dict:
        return dict(chunk_size=PARENT_CHILD_SIZE[config.unit], strategy="DDS", window_size=config.window,
                    step=config.step_units, unit=config.unit)

    def make_retriever(self, **overrides: Any):
        """A retriever over this pipeline's index: ``RETRIEVER_OPTIONS``, the budget and
        ``k``, then ``overrides``."""
        options = {**self.RETRIEVER_OPTIONS, "budget_tokens": self.budget}
        if self.k is not None:
            options["k"] = self.k
        return self.index.as_retriever(**{**options, **overrides})

    def make_retrievers(self) -> None:
        """(Re)build every retriever that depends on the budget (subclasses with more extend it)."""
        self.retriever = self.make_retriever()

    def set_budget(self, budget: int) -> None:
        """Answer later questions under ``budget`` tokens: the same index, retrievers rebuilt."""
        self.budget = budget
        self.make_retrievers()

    def retriever_for(self, question: str):
        """The retriever that answers ``question`` (one for all; a lever may choose per question)."""
        return self.retriever

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        if not self.sources:
            return []
        docs = self.retriever_for(question).retrieve_many([question, *queries])
        return [
            (self._ids.get(d.metadata["source_id"], d.metadata["source_id"]), int(d.metadata["start_index"]),
             int(d.metadata["end_index"]))
            for d in docs
        ]

    def close(self) -> None:
        try:
            self._client.delete_collection(self._name)
        except Exception:  # already gone
            pass
        self.index.close()
        self._dir.cleanup()


class DefaultPipeline(ParentPipeline):
    """The package as a user gets it: ``SlidingWindowIndex`` and ``as_retriever()`` with
    their defaults (the grid's window and step are not used)."""

    INDEX_OPTIONS: dict = {}

    def _index_options(self, config) -> dict:
        return dict(self.INDEX_OPTIONS)


class DefaultMilvusPipeline(DefaultPipeline):
    """:class:`DefaultPipeline` with the vectors in Milvus Lite (a file in the pipeline's
    temporary folder), so keyword search runs in Milvus (its BM25 over the jieba
    analyser) instead of the in-process BM25; everything else is the same."""

    def _store_options(self) -> dict:
        return dict(storage="milvus")


class DefaultV1Pipeline(DefaultPipeline):
    """The children and search of the defaults before issue 19 -- fixed 50-token FFS
    children, ``k_child=30``, dense MMR -- kept to measure the new defaults against. Not
    the old default itself: parents are ranked by their best hit here as in ``default``
    (the old default summed hits per parent, and that order is gone)."""

    INDEX_OPTIONS = {"child": "fixed"}
    RETRIEVER_OPTIONS = {"k_child": 30, "search_type": "mmr"}


class LangChainStockPipeline(Pipeline):
    """Stock LangChain: RCS chunks, BM25Retriever + Chroma, EnsembleRetriever."""

    assembly = "text"

    def __init__(self, sources, config, *, embeddings=None, **kwargs) -> None:
        super().__init__(sources, config, embeddings=embeddings, **kwargs)
        import chromadb
        from chromadb.config import Settings
        from langchain_chroma import Chroma
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.documents import Document

        if embeddings is None:
            from swrag_integrations.evaluation.embeddings import default_embeddings

            embeddings = default_embeddings()
        fetch = self.k if self.k is not None else STOCK_DEFAULT_K
        splitter = _rcs_splitter(config.window, config.unit, self.encoding_name)
        docs = splitter.create_documents(
            [s.text for s in self.sources], metadatas=[{"source_id": s.source_id} for s in self.sources]
        )
        docs = [Document(page_content=d.page_content, metadata=d.metadata) for d in docs if d.page_content]
        self.chunks = len(docs)
        self._client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        self._name = f"swrag-eval-{uuid.uuid4().hex[:12]}"
        self.store = Chroma(collection_name=self._name, embedding_function=embeddings, client=self._client)
        if docs:
            self.store.add_documents(docs)
            bm25 = BM25Retriever.from_documents(docs, k=fetch)
            dense = self.store.as_retriever(search_kwargs={"k": fetch})
            self.retriever = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])
            text_bytes = sum(len(d.page_content.encode("utf-8")) for d in docs)
            dim = len(embeddings.embed_query("dimension probe"))
            self.index_bytes = text_bytes + len(pickle.dumps(bm25.vectorizer)) + self.chunks * dim * 4
        else:
            self.retriever = None

    def _docs(self, question: str, queries: Sequence[str]):
        if self.retriever is None:
            return []
        if not queries:
            return self.retriever.invoke(question)
        from langchain_classic.retrievers import MultiQueryRetriever
        from langchain_core.runnables import RunnableLambda

        fixed = list(queries)
        mq = MultiQueryRetriever(
            retriever=self.retriever, llm_chain=RunnableLambda(lambda _: list(fixed)), include_original=True, verbose=False
        )
        return mq.invoke(question)

    def retrieve(self, question: str, queries: Sequence[str] = ()) -> list[tuple[str, int, int]]:
        out = []
        for doc in self._docs(question, queries):
            start = int(doc.metadata.get("start_index", -1))
            out.append((doc.metadata.get("source_id", ""), start, start + len(doc.page_content)))
        return out

    def context(self, question: str, budget: int = DEFAULT_BUDGET, queries: Sequence[str] = ()) -> AssembledContext:
        docs = self._docs(question, queries)
        spans = []
        for doc in docs:
            start = int(doc.metadata.get("start_index", -1))
            spans.append((doc.metadata.get("source_id", ""), start, start + len(doc.page_content)))
        return assemble_by_text([d.page_content for d in docs], budget, spans=spans, encoding_name=self.encoding_name)

    def close(self) -> None:
        try:
            self._client.delete_collection(self._name)
        except Exception:  # already gone
            pass


@contextmanager
def shared_ranking(pipeline: Pipeline) -> Iterator[None]:
    """Within the block, ``pipeline`` ranks each distinct question (and query variants) once.

    For a budget curve: the contexts of one question under several budgets then differ only
    in their assembly. A pipeline whose ranking depends on the budget
    (:attr:`Pipeline.ranking_uses_budget`) ranks as usual. Covers ``retrieve`` and the
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
    """Index ``sources`` for ``config`` and return the pipeline (see :data:`PIPELINES`).

    The spec's ``options`` are passed to its builder too; their ``k`` applies when ``k``
    is ``None``.
    """
    import importlib

    spec = PIPELINES[config.strategy]
    module, _, cls = spec.builder.partition(":")
    target = getattr(importlib.import_module(module, package=__package__), cls)
    options = dict(spec.options)
    k = k if k is not None else options.pop("k", None)
    options.pop("k", None)
    return target(sources, config, k=k, embeddings=embeddings, budget=budget, encoding_name=encoding_name, **options)
