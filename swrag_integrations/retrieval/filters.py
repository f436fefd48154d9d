"""Metadata filters: one definition, pushed down to the vector store, applied everywhere else.

A filter is a LangChain-style dict over the documents' own metadata (the scalar values
:func:`~.records.clean_metadata` keeps, plus ``source_id``):

* ``{"topic": "sea"}`` -- equality; several keys in one dict must all hold;
* ``{"n": {"$eq": 1}}``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` (numbers),
  ``$in`` / ``$nin`` (a list of values);
* ``{"$and": [f, ...]}``, ``{"$or": [f, ...]}``.

A document without the key fails ``$eq``/``$in`` and the order comparisons and passes
``$ne``/``$nin`` (as in Chroma, Qdrant and MongoDB), the same in every store. :func:`parse_filter` checks a filter once (clear ``ValueError``s
naming the part that is wrong) and gives a :class:`MetadataFilter`, which

* evaluates itself on a metadata dict (:meth:`MetadataFilter.matches`): BM25 hits, the
  hits of every store and the plain search are checked against the source's record,
  so a result (and the window around it, which never leaves its source) is never from
  a source the filter excludes;
* translates itself for the stores that can filter while they search
  (:func:`native_filter`: Chroma ``where``, ``InMemoryVectorStore`` and FAISS
  callables, a Qdrant ``Filter``); other stores are searched unfiltered with a growing
  fetch and the results filtered here.

LlamaIndex ``MetadataFilters`` are converted with :func:`from_llama_index`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = ["MetadataFilter", "parse_filter", "native_filter", "from_llama_index", "to_llama_index", "SourceMatcher",
           "filter_from_pairs"]

_COMPARE = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
_SCALAR = (str, int, float, bool)
# metadata keys of a source a filter may use besides the user's own (the index sets the rest per chunk)
_ALLOWED_RESERVED = {"source_id"}


@dataclass(frozen=True)
class MetadataFilter:
    """A checked filter: ``op`` is ``"and"``/``"or"`` (``args``: sub-filters) or a
    comparison ``"$eq"``... (``key``, ``value``)."""

    op: str
    key: str | None = None
    value: Any = None
    args: tuple["MetadataFilter", ...] = ()

    def matches(self, metadata: dict[str, Any]) -> bool:
        """Whether a document with this metadata passes."""
        if self.op == "and":
            return all(f.matches(metadata) for f in self.args)
        if self.op == "or":
            return any(f.matches(metadata) for f in self.args)
        if self.key not in metadata:
            return self.op in ("$ne", "$nin")
        have, want = metadata[self.key], self.value
        try:
            if self.op == "$eq":
                return have == want
            if self.op == "$ne":
                return have != want
            if self.op == "$in":
                return have in want
            if self.op == "$nin":
                return have not in want
            if isinstance(have, bool) or not isinstance(have, (int, float)):
                return False  # order comparisons are for numbers
            return {"$gt": have > want, "$gte": have >= want, "$lt": have < want, "$lte": have <= want}[self.op]
        except TypeError:
            return False

    def to_dict(self) -> dict[str, Any]:
        """The filter as a LangChain-style dict (normalised: explicit operators)."""
        if self.op in ("and", "or"):
            return {f"${self.op}": [f.to_dict() for f in self.args]}
        return {self.key: {self.op: list(self.value) if self.op in ("$in", "$nin") else self.value}}

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    # ---------------------------------------------------------- translations
    def to_chroma(self) -> dict[str, Any]:
        """A Chroma ``where`` clause."""
        if self.op in ("and", "or"):
            parts = [f.to_chroma() for f in self.args]
            return parts[0] if len(parts) == 1 else {f"${self.op}": parts}
        if self.op in ("$in", "$nin"):  # Chroma wants one value type per list: one list per type
            groups: dict[type, list[Any]] = {}
            for v in self.value:
                groups.setdefault(type(v), []).append(v)
            parts = [{self.key: {self.op: vs}} for vs in groups.values()]
            return parts[0] if len(parts) == 1 else {"$or" if self.op == "$in" else "$and": parts}
        return {self.key: {self.op: self.value}}

    def to_qdrant(self, payload_key: str = "metadata") -> Any:
        """A ``qdrant_client.models.Filter`` over the payload under ``payload_key``;
        ``None`` when a part has no Qdrant form (a float equality): then the caller
        filters the results itself."""
        from qdrant_client import models

        def condition(f: MetadataFilter) -> Any:
            if f.op in ("and", "or"):
                subs = [condition(a) for a in f.args]
                if any(s is None for s in subs):
                    return None
                return models.Filter(must=subs) if f.op == "and" else models.Filter(should=subs)
            key = f"{payload_key}.{f.key}" if payload_key else f.key
            values = list(f.value) if f.op in ("$in", "$nin") else [f.value]
            if f.op in ("$eq", "$ne", "$in", "$nin") and any(isinstance(v, float) for v in values):
                return None  # Qdrant matches keywords, integers and booleans exactly, not floats
            if f.op == "$eq":
                return models.FieldCondition(key=key, match=models.MatchValue(value=f.value))
            if f.op == "$ne":  # documents without the key pass, as here
                return models.Filter(must_not=[models.FieldCondition(key=key, match=models.MatchValue(value=f.value))])
            if f.op == "$in":
                return models.FieldCondition(key=key, match=models.MatchAny(any=values))
            if f.op == "$nin":  # must_not (not MatchExcept): documents without the key pass, as here
                return models.Filter(must_not=[models.FieldCondition(key=key, match=models.MatchAny(any=values))])
            bound = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}[f.op]
            return models.FieldCondition(key=key, range=models.Range(**{bound: f.value}))

        cond = condition(self)
        if cond is None or isinstance(cond, models.Filter):
            return cond
        return models.Filter(must=[cond])


def parse_filter(spec: Any) -> MetadataFilter | None:
    """Check a filter (dict, :class:`MetadataFilter`, LlamaIndex ``MetadataFilters`` or
    ``None``) and return it as a :class:`MetadataFilter` (``None``: no filter).

    Raises:
        ValueError: an unknown operator, an empty ``$and``/``$or``/``$in`` list, a
            non-scalar value, or a key the index sets itself on chunks.
        TypeError: anything that is not a filter.
    """
    if spec is None or isinstance(spec, MetadataFilter):
        return spec
    if not isinstance(spec, dict):
        if type(spec).__name__ == "MetadataFilters":
            return from_llama_index(spec)
        raise TypeError(f"filter must be a dict such as {{'topic': 'sea'}} or {{'n': {{'$in': [1, 2]}}}}, "
                        f"got {type(spec).__name__}")
    if not spec:
        raise ValueError("filter must not be an empty dict (pass filter=None for no filter)")
    parts = [_parse_item(key, value) for key, value in spec.items()]
    return parts[0] if len(parts) == 1 else MetadataFilter("and", args=tuple(parts))


def _parse_item(key: Any, value: Any) -> MetadataFilter:
    if key in ("$and", "$or"):
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError(f"filter {key} takes a non-empty list of filters, got {value!r}")
        return MetadataFilter(key[1:], args=tuple(parse_filter(v) for v in value))  # type: ignore[misc]
    if not isinstance(key, str) or key.startswith("$"):
        raise ValueError(f"filter key {key!r}: use a metadata key, '$and' or '$or' "
                         f"(comparisons: {', '.join(_COMPARE)})")
    from .records import RESERVED

    if key in RESERVED and key not in _ALLOWED_RESERVED:
        raise ValueError(f"filter key {key!r} is set by the index on each chunk, not a document's own metadata; "
                         "filter on your documents' keys (or source_id)")
    if isinstance(value, dict):
        if len(value) != 1:
            raise ValueError(f"filter {{{key!r}: {value!r}}}: give one operator per key (combine with '$and')")
        (op, operand), = value.items()
        if op not in _COMPARE:
            raise ValueError(f"filter {{{key!r}: {value!r}}}: unknown operator {op!r}; use one of {', '.join(_COMPARE)}")
    else:
        op, operand = "$eq", value
    if op in ("$in", "$nin"):
        if not isinstance(operand, (list, tuple, set, frozenset)) or not operand:
            raise ValueError(f"filter {{{key!r}: {{{op!r}: ...}}}} takes a non-empty list, got {operand!r}")
        if not all(isinstance(v, _SCALAR) for v in operand):
            raise ValueError(f"filter {{{key!r}: {{{op!r}: ...}}}}: values must be str, int, float or bool")
        return MetadataFilter(op, key, tuple(operand))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(operand, bool) or not isinstance(operand, (int, float)):
            raise ValueError(f"filter {{{key!r}: {{{op!r}: {operand!r}}}}}: order comparisons take a number")
    elif not isinstance(operand, _SCALAR):
        raise ValueError(f"filter {{{key!r}: {operand!r}}}: the value must be str, int, float or bool")
    return MetadataFilter(op, key, operand)


_PAIR_OPS = {"=": "$eq", "==": "$eq", "!=": "$ne", ">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte"}
_PAIR = re.compile(r"^\s*([^=!<>]*?)\s*(==|!=|>=|<=|=|>|<)\s*(.*)$", re.S)


def _pair_values(raw: str) -> list[Any]:
    """What a command-line value matches: the text, and the number or boolean it reads as."""
    values: list[Any] = [raw]
    for convert in (int, float):
        try:
            number = convert(raw)
        except ValueError:
            continue
        if math.isfinite(number):
            values.append(number)
        break
    if raw.lower() in ("true", "false"):
        values.append(raw.lower() == "true")
    return values


def filter_from_pairs(pairs: Sequence[str], *, values: Callable[[str, str], str] | None = None
                      ) -> dict[str, Any] | None:
    """A filter from ``KEY OP VALUE`` strings (the command line's ``--filter``), OP one of
    ``=``/``==`` (equality), ``!=``, ``>``, ``>=``, ``<``, ``<=`` ($eq, $ne, $gt, $gte,
    $lt, $lte). Items on different keys must all hold; equalities repeated on one key
    match any of their values (``$in``). A value that reads as a number or
    ``true``/``false`` also matches that number or boolean (``page=3`` matches ``3`` and
    ``"3"``); the order comparisons need a number. ``values(key, value)``, when given,
    maps each value first (e.g. a relative ``source`` path to the absolute one indexed).

    Raises:
        ValueError: an item without an operator, with an empty key, or comparing to a
            value that is not a number.
    """
    if not pairs:
        return None
    equal: dict[str, list[Any]] = {}
    parts: list[dict[str, Any]] = []
    for item in pairs:
        match = _PAIR.match(str(item))
        if match is None or not match.group(1):
            raise ValueError(f"--filter {item!r}: write KEY=VALUE (or KEY!=, >, >=, <, <= VALUE), "
                             "e.g. --filter source=docs/a.md or --filter year>=2020")
        key, op, raw = match.groups()
        if values is not None:
            raw = values(key, raw)
        options = _pair_values(raw)
        if op in ("=", "=="):
            known = equal.setdefault(key, [])
            known.extend(v for v in options if (type(v), v) not in {(type(k), k) for k in known})
        elif op == "!=":
            parts.append({key: {"$nin": options} if len(options) > 1 else {"$ne": raw}})
        else:
            numbers = [v for v in options if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if not numbers:
                raise ValueError(f"--filter {item!r}: {op} compares numbers; {raw!r} is not a number")
            parts.append({key: {_PAIR_OPS[op]: numbers[0]}})
    parts = [{key: options[0] if len(options) == 1 else {"$in": options}} for key, options in equal.items()] + parts
    return parts[0] if len(parts) == 1 else {"$and": parts}


_LLAMA_OPS = {"==": "$eq", "!=": "$ne", ">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte", "in": "$in", "nin": "$nin"}


def from_llama_index(filters: Any) -> MetadataFilter:
    """A LlamaIndex ``MetadataFilters`` (``ExactMatchFilter``/``MetadataFilter`` items,
    nested ``MetadataFilters``, condition ``and``/``or``) as a :class:`MetadataFilter`.

    Raises:
        ValueError: an operator with no LangChain-style form (``text_match``,
            ``contains``, ``NOT`` conditions...).
    """
    parts = []
    for item in filters.filters:
        if type(item).__name__ == "MetadataFilters":
            parts.append(from_llama_index(item))
            continue
        op = getattr(getattr(item, "operator", None), "value", "==")
        if op not in _LLAMA_OPS:
            raise ValueError(f"LlamaIndex filter operator {op!r} on {item.key!r} is not supported; "
                             f"use one of {', '.join(_LLAMA_OPS)}")
        parts.append(_parse_item(item.key, {_LLAMA_OPS[op]: item.value}))
    if not parts:
        raise ValueError("MetadataFilters has no filters (pass None for no filter)")
    condition = str(getattr(getattr(filters, "condition", None), "value", "and") or "and").lower()
    if condition not in ("and", "or"):
        raise ValueError(f"LlamaIndex filter condition {condition!r} is not supported; use 'and' or 'or'")
    return parts[0] if len(parts) == 1 else MetadataFilter(condition, args=tuple(parts))


def to_llama_index(flt: MetadataFilter) -> Any:
    """The filter as LlamaIndex ``MetadataFilters`` (for a ``VectorStoreIndex`` retriever)."""
    from llama_index.core.vector_stores.types import FilterCondition, FilterOperator
    from llama_index.core.vector_stores.types import MetadataFilter as LlamaFilter
    from llama_index.core.vector_stores.types import MetadataFilters

    ops = {v: k for k, v in _LLAMA_OPS.items()}
    if flt.op in ("and", "or"):
        items = [to_llama_index(f) for f in flt.args]
        items = [i.filters[0] if len(i.filters) == 1 else i for i in items]
        return MetadataFilters(filters=items, condition=FilterCondition.AND if flt.op == "and" else FilterCondition.OR)
    value = list(flt.value) if flt.op in ("$in", "$nin") else flt.value
    return MetadataFilters(filters=[LlamaFilter(key=flt.key, value=value, operator=FilterOperator(ops[flt.op]))])


def native_filter(flt: MetadataFilter, store: Any) -> dict[str, Any] | None:
    """Keyword arguments that make ``store`` filter while it searches, or ``None`` for a
    store this module does not know (then the caller fetches more and filters)."""
    kind = type(store).__name__
    if kind == "Chroma":
        return {"filter": flt.to_chroma()}
    if kind == "InMemoryVectorStore":
        return {"filter": lambda doc: flt.matches(doc.metadata or {})}
    if kind == "FAISS":  # FAISS fetches fetch_k, then filters: fetch everything it holds
        return {"filter": lambda meta: flt.matches(meta or {}), "fetch_k": max(int(store.index.ntotal), 1)}
    if kind in ("QdrantVectorStore", "Qdrant"):
        qfilter = flt.to_qdrant(getattr(store, "metadata_payload_key", "metadata"))
        return None if qfilter is None else {"filter": qfilter}
    return None


class SourceMatcher:
    """Which sources of an index pass a filter, read from their records (cached per call).

    Args:
        flt: the filter.
        store: the index's :class:`~.sources.SourceStore`.
    """

    def __init__(self, flt: MetadataFilter, store: Any) -> None:
        self.flt = flt
        self.store = store
        self._known: dict[str, bool] = {}

    def passes(self, sids: Sequence[str]) -> list[bool]:
        """For each source id: complete and its metadata passes the filter."""
        todo = sorted({s for s in sids if s not in self._known})
        if todo:
            records = self.store.get_many(todo)
            for sid in todo:
                rec = records.get(sid)
                self._known[sid] = rec is not None and rec.complete and self.flt.matches(
                    {**rec.index_metadata, "source_id": sid})
        return [self._known[s] for s in sids]

    def chunk_ids(self) -> Callable[[Sequence[str]], list[bool]]:
        """A predicate over chunk ids ``<source_id>:s:<i>`` (for the keyword search)."""
        from .ids import parse_chunk_id

        def allow(cids: Sequence[str]) -> list[bool]:
            sids = [p.source_id if (p := parse_chunk_id(c)) is not None else "" for c in cids]
            return self.passes(sids)

        return allow
