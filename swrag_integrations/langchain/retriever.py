"""Windowed parent retrieval for LangChain: find small chunks precisely, return merged windows.

A thin adapter: stage 1 is `first_stage` (BM25 +
dense, weighted RRF, or the learned fusion when asked for), stages 2-3 are `parents` (parents ranked by their hits,
chunks chosen under the token budget, merged by offset). See `parents` for the
planner.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator, model_validator

from swrag_integrations.engine.engine import IndexEngine
from swrag_integrations.engine.learned_fusion import first_stage
from swrag_integrations.engine.parents import spans_for
from swrag_integrations.engine.protocols import ChunkIndex
from swrag_integrations.langchain.convert import spans_to_documents
from swrag_integrations.langchain.search import call_options
from swrag_integrations.engine.settings import DEFAULT_SETTINGS as _D
from swrag_integrations.engine.settings import RetrieverSettings
from swrag_integrations.engine.trace import check_relevance  # noqa: F401  (re-exported: defined beside above_floor, framework-free)

__all__ = ["WindowedParentRetriever", "check_relevance"]


class WindowedParentRetriever(BaseRetriever):
    """LangChain retriever over a `ChunkIndex` (an `IndexEngine`).

    Args:
        index: the index: an engine, any other ``ChunkIndex``, or a face over an engine (a
            `SlidingWindowIndex`), which stands for its engine
            (``retriever.index`` is then ``face.engine``).
        k: at most this many documents (merged windows) are returned, also under a
            budget; ``None`` (default): the budget decides how many fit (a fixed
            ``k=4`` left the budget a third empty on short sources, e.g. HotpotQA
            passages, and cut multi-source answers). Under a tight budget a parent
            whose hits lie apart may come back as several pieces, each its own
            document; with ``k`` they count against it.
        k_child: small chunks fetched by the first stage per query (default 30:
            about one budget of 1500 tokens in 50-token children; 15-25 helped corpus
            factoid sets but lost document mode, 40 let weak hits in; see
            docs/eval/ranking.md).
        budget_tokens: token budget of the whole returned context, i.e. of the
            documents' texts joined by blank lines (``None``: no limit). It is shared
            among queries (not among sources: the best source is not starved by weak
            ones), unused shares go to the other parents in rank order, and hit chunks
            are kept before any other chunk.
        search_type: ``"similarity"`` (default) or ``"mmr"`` for the dense part (with
            sentence children the two are within noise of each other on every dev set and
            similarity is faster per query: docs/eval/ranking.md).
        weights: RRF weights of (BM25, dense). The equal default is kept for Chinese
            queries too: although all-MiniLM-L6-v2 is an English model, dropping its
            half (``(1.0, 0.0)``) lowered multifieldqa_zh context recall (the BM25-only
            row of docs/eval/ranking.md).
        rrf_c: the RRF constant.
        expand: ``"window"`` (the window(s) around each hit, default), ``"medium"``
            (the medium chunks whose windows cover the hit) or ``"chunk"`` (no
            widening: plain small chunks, for comparison).
        fusion: how stage 1 ranks the BM25 and dense hits: ``"rrf"`` (default),
            ``"learned"`` (the learned fusion model, `swrag_integrations.engine.learned_fusion`)
            or ``"auto"`` (learned when both weights are > 0 and the call's ``budget_tokens``
            is at most `LEARNED_FUSION_MAX_BUDGET`, else RRF).
        min_relevance: a relevance floor in [0, 1] (``None``, default: none): small-chunk
            hits whose relevance is below it are dropped before they widen into windows,
            so a question about one source does not fill the budget with unrelated ones.
            Every returned document carries ``metadata["relevance"]``: the best cosine
            similarity of the query and a hit chunk inside it, clipped to [0, 1]
            (`search_children`; comparable across queries,
            unlike ``score``, the summed RRF values of about 0.01-0.15). It does not change
            the ranking. Also a call-time keyword, as are ``k``, ``k_child``,
            ``budget_tokens``, ``fusion`` and ``filter`` (which replaces the retriever's).
        filter: a metadata filter (``{"topic": "sea"}``, ``$eq/$ne/$in/$nin/$gt/$gte/
            $lt/$lte/$and/$or``; `.filters`): only sources whose metadata passes
            it are searched (BM25 and dense) and widened into windows.

    ``k``, ``k_child``, ``budget_tokens`` and ``fusion`` can also be given per call
    (``retriever.invoke(q, k=2)``; under ``fusion="auto"`` a call's ``budget_tokens``
    chooses that call's fusion); other keywords raise ``TypeError``.

    Returned documents: ``page_content == source_text[start_index:end_index]``, always
    starting and ending on small-chunk boundaries (except when the budget is smaller
    than the best hit chunk: then that chunk's middle), with metadata ``source_id``,
    ``start_index``, ``end_index``, ``score`` (best of the merged parents), ``rank``,
    ``n_tokens``, ``hit_chunk_indices`` (the hits inside the span),
    ``chunk_lower_bound``/``chunk_upper_bound`` (the chunks the span covers),
    ``hit_start_index``/``hit_end_index``, ``query_index``/``query_indices`` and the
    source document's own metadata. ``Document.id`` is ``"<source_id>:<start>-<end>"``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    index: ChunkIndex
    # defaults and checks: `RetrieverSettings`, the one definition
    k: int | None = _D.k
    k_child: int = _D.k_child
    budget_tokens: int | None = _D.budget_tokens
    search_type: Literal["mmr", "similarity"] = _D.search_type
    weights: tuple[float, float] = _D.weights
    rrf_c: float = _D.rrf_c
    expand: Literal["window", "medium", "chunk"] = _D.expand
    fusion: Literal["auto", "rrf", "learned"] = _D.fusion
    filter: Any = None
    min_relevance: float | None = None

    @field_validator("min_relevance", mode="before")
    @classmethod
    def _min_relevance(cls, value: Any) -> Any:
        return check_relevance(value)

    @model_validator(mode="before")
    @classmethod
    def _settings(cls, data: Any) -> Any:
        """Every setting checked by `RetrieverSettings` (the message every face gives)."""
        if isinstance(data, dict):
            RetrieverSettings(**{k: data[k] for k in RetrieverSettings.keys() if k in data})
        return data

    @property
    def settings(self) -> RetrieverSettings:
        """This retriever's settings as the framework-free `RetrieverSettings`."""
        return RetrieverSettings(**{name: getattr(self, name) for name in RetrieverSettings.keys()})

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: Any) -> Any:
        from swrag_integrations.engine.filters import parse_filter

        return parse_filter(value)

    @field_validator("index", mode="before")
    @classmethod
    def _index(cls, value: Any) -> Any:
        """A face over an engine (a `SlidingWindowIndex`) stands for its engine."""
        engine = getattr(value, "engine", None)
        if isinstance(engine, IndexEngine):
            return engine
        if not isinstance(value, ChunkIndex):
            raise TypeError(f"index must provide search_children/chunk_rows/medium_range/encoding_name "
                            f"(a SlidingWindowIndex), got {type(value).__name__}")
        return value

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call-time options (``invoke(q, k=..., k_child=..., budget_tokens=..., fusion=...,
        filter=...)``): each replaces this retriever's field for the call (a call's ``filter``
        replaces the retriever's, it does not narrow it); any other keyword raises ``TypeError``."""
        from swrag_integrations.engine.filters import parse_filter

        return call_options(kwargs, {"k": self.k, "k_child": self.k_child, "budget_tokens": self.budget_tokens,
                                     "fusion": self.fusion, "filter": self.filter, "min_relevance": self.min_relevance},
                            "WindowedParentRetriever.invoke()",
                            checks={"filter": parse_filter, "min_relevance": check_relevance,
                                    "fusion": lambda value: self.settings.with_(fusion=value).fusion})

    def find_chunks(self, query: str, k_child: int | None = None, *, filter: Any = None, **overrides: Any):
        """Stage 1: small-chunk hits for one query (`ChildHit`), by `first_stage`;
        ``filter``: this call's filter (default: the retriever's); ``overrides``: settings
        for this call (e.g. ``budget_tokens=300``, which under ``fusion="auto"`` chooses the fusion)."""
        settings = self.settings.with_(**overrides, **({"k_child": k_child} if k_child else {}))
        return first_stage(self.index, query, settings, filter=self.filter if filter is None else filter)

    def _documents(self, hits: Sequence[Sequence[Any]], options: dict[str, Any]) -> list[Document]:
        from swrag_integrations.engine.trace import above_floor

        # hits below the floor widen into no window (their budget goes unused)
        hits = [above_floor(group, options.get("min_relevance")) for group in hits]
        spans = spans_for(hits, self.index, budget_tokens=options["budget_tokens"], k=options["k"], expand=self.expand)
        return spans_to_documents(spans)

    def trace(self, query: str, **overrides: Any) -> Any:
        """Every step of retrieving ``query`` as a framework-free
        `RetrievalTrace` (hits, parents, kept spans, what each hit lost to
        the budget, the settings and filter used); keywords override this retriever's
        settings (e.g. ``budget_tokens=800``). Views render it (`explain`)."""
        from swrag_integrations.engine.trace import trace

        floor = check_relevance(overrides.pop("min_relevance", self.min_relevance))
        return trace(self.index, query, RetrieverSettings.from_kwargs({**self.settings.to_dict(), **overrides},
                                                                      where="trace()"), filter=self.filter,
                     min_relevance=floor)

    def explain(self, query: str, **overrides: Any) -> Any:
        """What this retriever does for ``query``, as an HTML view (shows itself in Jupyter;
        ``.save(path)``): the chunks that matched with their ranks, the windows they widened
        to, the spans merged under the budget and what was cut. Needs
        ``import swrag_integrations.view`` first (it registers the view)."""
        from swrag_integrations.core.display import make_view

        return make_view("retrieval", self, query, **overrides)

    def retrieve_many(self, queries: Sequence[str], config: dict | None = None, **kwargs: Any) -> list[Document]:
        """Retrieve for several phrasings of one question (budget shared among them)."""
        options = self._options(kwargs)
        queries = list(queries)  # each checked once, by the engine's search (search_children)
        if not queries:
            raise ValueError("queries must not be empty")
        return self._documents([self.find_chunks(q, options["k_child"], filter=options["filter"],
                                                 budget_tokens=options["budget_tokens"], fusion=options["fusion"])
                                for q in queries], options)

    async def aretrieve_many(self, queries: Sequence[str], config: dict | None = None, **kwargs: Any) -> list[Document]:
        """`retrieve_many`, asynchronously."""
        options = self._options(kwargs)
        queries = list(queries)  # each checked once, by the engine's search (search_children)
        if not queries:
            raise ValueError("queries must not be empty")
        hits = await asyncio.gather(*(asyncio.to_thread(self.find_chunks, q, options["k_child"], filter=options["filter"],
                                                        budget_tokens=options["budget_tokens"], fusion=options["fusion"])
                                      for q in queries))
        return await asyncio.to_thread(self._documents, hits, options)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return self.retrieve_many([query], **kwargs)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        return await self.aretrieve_many([query], **kwargs)
