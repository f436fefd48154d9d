"""Multi-query retrieval that survives the output of small local LLMs.

``langchain_classic``'s ``MultiQueryRetriever`` splits the LLM output on newlines and
uses every line, so "Here are three versions:", "1. ...", blank lines and echoed
prompts all become queries, and an LLM error fails the whole retrieval. Here the
output is cleaned (`parse_query_variants`), the original question is always
kept (first), retrieval runs for all queries concurrently and the results are fused
by reciprocal rank; if the LLM raises or gives nothing usable the original question
is used alone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator

from swrag_integrations.langchain.fusion import reciprocal_rank_fusion
from swrag_integrations.engine.parents import check_query
from swrag_integrations.langchain.search import call_options

__all__ = ["DEFAULT_PROMPT", "parse_query_variants", "generate_queries", "agenerate_queries", "MultiQueryFusionRetriever"]

logger = logging.getLogger(__name__)

DEFAULT_PROMPT = (
    "Rewrite the question below in {n} different ways, so that a search engine can find "
    "documents that answer it. Keep the language of the question. Write one rewritten "
    "question per line, with no numbering and no other text.\n\nQuestion: {question}"
)

# Leading list markers: "1.", "1)", "(1)", "1:", "1、", "a)", "-", "*", "•", "Q1:", "Query 2 -", "问题1：", "一、"
_MARKER = re.compile(
    r"^\s*(?:"
    r"[-*•·+>–—]+"
    r"|\(?\d{1,3}\s*[.)\]:：、．]"
    r"|\(\d{1,3}\)"
    r"|\(?[a-hA-H][.)]\s"
    r"|(?:q|query|question|variant|version|rewrite|alternative|问题|查询|版本)\s*#?\d*\s*[:：.)\-–]"
    r"|[一二三四五六七八九十]+\s*[、.．:：]"
    r")\s*",
    re.IGNORECASE,
)
_PREAMBLE = re.compile(
    r"^\s*(?:here\s+(?:are|is)|sure|certainly|of course|okay|ok[,.!]|alright|absolutely|below are|the following"
    r"|i\s+(?:can|will|have|'ve|'ll)|let me|these are|as an ai|note:|以下是|好的|当然|下面是|这里是|改写后的|生成的)",
    re.IGNORECASE,
)
_ORIGINAL_LABEL = re.compile(r"^\s*(?:original\s+question|question|原始问题|原问题|问题)\s*[:：]\s*", re.IGNORECASE)
_INLINE_NUMBER = re.compile(r"\s+(?=\(?\d{1,2}[.)]\s)")
_WORD = re.compile(r"\w", re.UNICODE)


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def _strip_markers(line: str) -> str:
    previous = None
    while previous != line:
        previous = line
        line = _MARKER.sub("", line, count=1)
        line = line.strip().strip("*_`").strip()
        if len(line) >= 2 and line[0] in "\"'“‘「『" and line[-1] in "\"'”’」』":
            line = line[1:-1].strip()
    return line


def parse_query_variants(
    text: Any, original: str, n: int | None = None, *, prompt: str | None = None
) -> list[str]:
    """Clean LLM output into query variants; returns ``[original, *variants]``.

    Handles numbering (``1.``, ``1)``, ``(1)``, ``Q1:``), bullets, blank lines,
    preambles ("Here are...", "Sure!", "以下是..."), trailing colons, quotes, a JSON
    list, several numbered items on one line, duplicates (case/punctuation
    insensitive, and of the original) and a model that echoes the prompt. At most
    ``n`` variants are kept.
    """
    if not isinstance(original, str) or not original.strip():
        raise ValueError("original question must be a non-empty string")
    original = original.strip()
    if hasattr(text, "content"):
        text = text.content
    if isinstance(text, list):  # chat content blocks or a list of strings
        text = "\n".join(
            block if isinstance(block, str) else str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in text
        )
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    lines: list[str] = []
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            data = json.loads(stripped)
            if isinstance(data, list):
                lines = [str(x) for x in data if isinstance(x, (str, int, float))]
        except ValueError:
            pass
    if not lines:
        for raw in stripped.splitlines():
            raw = raw.strip()
            if not raw:
                continue
            if re.match(r"^\(?1[.)]\s", raw) and re.search(r"\s\(?2[.)]\s", raw):
                lines.extend(p for p in _INLINE_NUMBER.split(raw) if p.strip())
            else:
                lines.append(raw)
    prompt_lines = set()
    if prompt:
        prompt_lines = {_norm(p) for p in prompt.splitlines() if _norm(p)}
    seen = {_norm(original)}
    out: list[str] = []
    limit = max(len(original) * 4, 300)
    for raw in lines:
        line = _strip_markers(raw)
        line = _ORIGINAL_LABEL.sub("", line).strip() if _ORIGINAL_LABEL.match(line) else line
        if not line or not _WORD.search(line):
            continue
        if _PREAMBLE.match(line) or (line.endswith((":", "：")) and len(line) < 200):
            continue
        key = _norm(line)
        if not key or key in seen or key in prompt_lines or len(line) > limit:
            continue
        seen.add(key)
        out.append(line)
        if n is not None and len(out) >= n:
            break
    return [original, *out]


def _format_prompt(prompt: str, question: str, n: int) -> str:
    return prompt.replace("{question}", question).replace("{n}", str(n))


def generate_queries(llm: Any, question: str, n: int = 3, *, prompt: str = DEFAULT_PROMPT) -> list[str]:
    """Ask ``llm`` (any LangChain LLM / chat model / runnable) for ``n`` variants.

    Always returns the original question first; falls back to ``[question]`` when the
    LLM raises or its output holds no usable line.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("query must be a non-empty string")
    if n <= 0 or llm is None:
        return [question.strip()]
    text = _format_prompt(prompt, question.strip(), n)
    try:
        output = llm.invoke(text)
    except Exception as exc:
        logger.warning("query generation failed (%s: %s); using the original question only", type(exc).__name__, exc)
        return [question.strip()]
    return parse_query_variants(output, question, n, prompt=text)


async def agenerate_queries(llm: Any, question: str, n: int = 3, *, prompt: str = DEFAULT_PROMPT) -> list[str]:
    """Async `generate_queries`."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("query must be a non-empty string")
    if n <= 0 or llm is None:
        return [question.strip()]
    text = _format_prompt(prompt, question.strip(), n)
    try:
        output = await llm.ainvoke(text)
    except Exception as exc:
        logger.warning("query generation failed (%s: %s); using the original question only", type(exc).__name__, exc)
        return [question.strip()]
    return parse_query_variants(output, question, n, prompt=text)


class MultiQueryFusionRetriever(BaseRetriever):
    """Retrieve with the question and LLM-written variants, fused by reciprocal rank.

    Args:
        retriever: any LangChain retriever. A
            `WindowedParentRetriever` gets all
            queries at once (``retrieve_many``), so its token budget is shared among
            them and the windows are merged by offset.
        llm: any LangChain LLM or chat model (``invoke``/``ainvoke``).
        n_variants: variants to ask for (the original question is always used too).
        prompt: template with ``{question}`` and ``{n}``.
        k: keep at most ``k`` fused documents (``None``: all).
        rrf_c: the RRF constant.
        max_workers: threads for the synchronous path.

    Documents carry ``metadata["queries"]`` (the queries used) when fused here.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retriever: BaseRetriever
    llm: Any
    n_variants: int = 3
    prompt: str = DEFAULT_PROMPT
    k: int | None = None
    rrf_c: float = 60.0
    max_workers: int = 4

    @field_validator("k")
    @classmethod
    def _check_k(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError(f"k must be > 0, got {value}")
        return value

    @field_validator("n_variants")
    @classmethod
    def _check_n(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"n_variants must be >= 0, got {value}")
        return value

    def generate_queries(self, question: str) -> list[str]:
        """``question`` and the LLM's variants of it (`generate_queries` with this retriever's settings)."""
        return generate_queries(self.llm, question, self.n_variants, prompt=self.prompt)

    def _fuse(self, queries: Sequence[str], lists: Sequence[Sequence[Document]], k: int | None) -> list[Document]:
        fused = reciprocal_rank_fusion(
            lists, c=self.rrf_c, k=k, list_names=[f"query{i}" for i in range(len(lists))]
        )
        for doc in fused:
            doc.metadata["queries"] = list(queries)
        return fused

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        k = call_options(kwargs, {"k": self.k}, "MultiQueryFusionRetriever.invoke()")["k"]
        check_query(query)
        queries = self.generate_queries(query)
        config = {"callbacks": run_manager.get_child()}
        if hasattr(self.retriever, "retrieve_many"):  # one budget shared by all queries, k counted once
            docs = self.retriever.retrieve_many(queries, config=config, **({"k": k} if k else {}))
            for doc in docs:
                doc.metadata["queries"] = list(queries)
            return docs[:k] if k else docs
        if len(queries) == 1:
            lists = [self.retriever.invoke(queries[0], config=config)]
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(queries))) as pool:
                lists = list(pool.map(lambda q: self.retriever.invoke(q, config=config), queries))
        return self._fuse(queries, lists, k)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        k = call_options(kwargs, {"k": self.k}, "MultiQueryFusionRetriever.ainvoke()")["k"]
        check_query(query)
        queries = await agenerate_queries(self.llm, query, self.n_variants, prompt=self.prompt)
        config = {"callbacks": run_manager.get_child()}
        if hasattr(self.retriever, "aretrieve_many"):
            docs = await self.retriever.aretrieve_many(queries, config=config, **({"k": k} if k else {}))
            for doc in docs:
                doc.metadata["queries"] = list(queries)
            return docs[:k] if k else docs
        lists = await asyncio.gather(*(self.retriever.ainvoke(q, config=config) for q in queries))
        return self._fuse(queries, lists, k)
