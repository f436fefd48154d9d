"""Scoring one candidate configuration on questions: build (or reuse) its index, retrieve,
assemble under the budget, measure context recall.

The index is the package's own `SlidingWindowIndex`
with the candidate's index keywords, over in-memory parts (`memory_index`,
the tuner's LangChain face): vectors in a FAISS flat
L2 index over normalised vectors (exact cosine search, MMR supported; langchain-community's
``FAISS``) and sources in LangChain's ``InMemoryByteStore``. Nothing touches disk, and a
rebuild with the same small chunks re-embeds nothing when ``embeddings`` is a
`CachedEmbeddings` (the tuner wraps the
given embeddings in one). LangChain's ``InMemoryVectorStore`` was not used: it converts
every stored vector to a new array on each query (0.2-0.5 s per query at 5,000 chunks).

The score of a question is exactly what ``swrag eval`` computes:
`assemble_by_offset` of the retrieved spans
under ``budget_tokens``, then
`context_recall` of the gold answers.

``scope="corpus"``: one index over all sources, every question searches all of them (a
user's folder). ``scope="document"``: one index per source, a question searches only its
own document (the eval's document mode, e.g. one PDF at a time).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Sequence

from swrag_integrations.evaluation.context import DEFAULT_BUDGET, assemble_by_offset
from swrag_integrations.evaluation.metrics import context_recall
from swrag_integrations.core.windows import DEFAULT_ENCODING
from swrag_integrations.tuning.langchain_index import memory_index, source_documents
from swrag_integrations.tuning.space import Candidate

__all__ = ["Evaluator", "memory_index", "SCOPES"]

SCOPES = ("corpus", "document")


class Evaluator:
    """Scores candidates on questions, reusing built indexes (an LRU of ``cache_size``).

    Args:
        sources: the corpus, objects with ``source_id`` and ``text``
            (`Source`).
        questions: objects with ``qid``, ``query``, ``answers``, ``language`` and
            ``source_id`` (`SyntheticQuestion` or an adapter of
            labelled examples).
        embeddings: LangChain ``Embeddings`` (wrap them in a cache: rebuilds re-embed).
        budget_tokens: the context budget every candidate gets.
        scope: ``"corpus"`` or ``"document"`` (see the module docstring).
        cache_size: index configurations kept built at once.

    Attributes:
        builds: index configurations built so far; ``build_seconds``/``query_seconds``:
            time spent building and answering.
    """

    def __init__(self, sources: Sequence[Any], questions: Sequence[Any], *, embeddings: Any,
                 budget_tokens: int = DEFAULT_BUDGET, scope: str = "corpus", cache_size: int = 3,
                 encoding_name: str = DEFAULT_ENCODING) -> None:
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens <= 0:
            raise ValueError(f"budget_tokens must be a positive int, got {budget_tokens!r}")
        self.sources = list(sources)
        self.texts = {s.source_id: s.text for s in self.sources}
        self.questions = {q.qid: q for q in questions}
        missing = sorted({q.source_id for q in self.questions.values()} - set(self.texts))
        if scope == "document" and missing:
            raise ValueError(f"questions refer to sources that are not in the corpus: {missing[:3]}")
        self.embeddings = embeddings
        self.budget_tokens = budget_tokens
        self.scope = scope
        self.cache_size = max(1, int(cache_size))
        self.encoding_name = encoding_name
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.builds = 0
        self.build_seconds = 0.0
        self.query_seconds = 0.0

    # ------------------------------------------------------------------ indexes
    def _documents(self, source_ids: Sequence[str]) -> list[Any]:
        return source_documents(self.texts, source_ids)

    def _build(self, candidate: Candidate, source_ids: Sequence[str]) -> Any:
        t0 = time.perf_counter()
        index = memory_index(self._documents(source_ids), self.embeddings, candidate.index_kwargs,
                             encoding_name=self.encoding_name)
        self.build_seconds += time.perf_counter() - t0
        return index

    def _indexes(self, candidate: Candidate) -> dict[str, Any]:
        key = candidate.index_key
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        while len(self._cache) >= self.cache_size:
            _, old = self._cache.popitem(last=False)
            self._close(old)
        self.builds += 1
        self._cache[key] = {}
        return self._cache[key]

    def _index_for(self, candidate: Candidate, source_id: str) -> tuple[Any, dict[str, str]]:
        built = self._indexes(candidate)
        slot = "*" if self.scope == "corpus" else source_id
        if slot not in built:
            ids = [s.source_id for s in self.sources] if slot == "*" else [source_id]
            index = self._build(candidate, ids)
            from swrag_integrations.engine.ids import source_id_for

            built[slot] = (index, {source_id_for(d): d.id for d in self._documents(ids)})
        return built[slot]

    @staticmethod
    def _close(built: dict[str, Any]) -> None:
        for index, _ in built.values():
            try:
                index.engine.store.close()
            except Exception:  # noqa: BLE001 - an in-memory store has nothing to release
                pass

    def close(self) -> None:
        """Drop every built index."""
        while self._cache:
            _, old = self._cache.popitem(last=False)
            self._close(old)

    # ------------------------------------------------------------------ scoring
    def context(self, candidate: Candidate, question: Any) -> Any:
        """The assembled context (`AssembledContext`)
        ``candidate`` retrieves for ``question``."""
        index, ids = self._index_for(candidate, question.source_id)
        retriever = index.as_retriever(budget_tokens=self.budget_tokens, **candidate.retriever_kwargs)
        docs = retriever.invoke(question.query)
        spans = [(ids.get(d.metadata["source_id"], d.metadata["source_id"]), int(d.metadata["start_index"]),
                  int(d.metadata["end_index"])) for d in docs]
        return assemble_by_offset(spans, self.texts, self.budget_tokens, encoding_name=self.encoding_name)

    def score(self, candidate: Candidate, qids: Sequence[str]) -> list[float]:
        """Context recall of ``candidate`` on each question of ``qids`` (in that order)."""
        out = []
        for qid in qids:
            question = self.questions[qid]
            self._index_for(candidate, question.source_id)  # build time is not query time
            t0 = time.perf_counter()
            ctx = self.context(candidate, question)
            out.append(float(context_recall(ctx.text, question.answers, question.language)))
            self.query_seconds += time.perf_counter() - t0
        return out

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
