"""Metadata filters: one definition, pushed down to the vector store, applied everywhere else.

A filter is a LangChain-style dict over the documents' own metadata (the scalar values
`clean_metadata` keeps, plus ``source_id``):

* ``{"topic": "sea"}`` -- equality; several keys in one dict must all hold;
* ``{"n": {"$eq": 1}}``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` (numbers),
  ``$in`` / ``$nin`` (a list of values);
* ``{"$and": [f, ...]}``, ``{"$or": [f, ...]}``.

A document without the key fails ``$eq``/``$in`` and the order comparisons and passes
``$ne``/``$nin`` (as in Chroma, Qdrant and MongoDB), the same in every store. Values
compare as Chroma compares them, in every store: a boolean equals only a boolean
(``{"n": 1}`` does not match ``n=True``, unlike Python's ``True == 1``), numbers by value
(``1`` matches ``1.0``), strings exactly; the order comparisons take numbers and skip
booleans. Refused with a ``ValueError``: NaN and infinite numbers, integers outside the
64-bit range (``-2**63 <= n < 2**63``) and filters nested deeper than
`MAX_DEPTH` levels. `parse_filter` checks a filter once (clear ``ValueError``s
naming the part that is wrong) and gives a `MetadataFilter`, which

* evaluates itself on a metadata dict (`MetadataFilter.matches`): BM25 hits, the
  hits of every store and the plain search are checked against the source's record,
  so a result (and the window around it, which never leaves its source) is never from
  a source the filter excludes;
* translates itself for the stores that can filter while they search
  (`native_filter`: Chroma ``where``, ``InMemoryVectorStore`` and FAISS
  callables, a Qdrant ``Filter``); other stores are searched unfiltered with a growing
  fetch and the results filtered here. What a store cannot do exactly is left out of
  its translation (never narrowed: e.g. Chroma gets no list longer than
  `MAX_PUSHED_VALUES` values in all, which its SQL cannot bind) and filtered here.

LlamaIndex ``MetadataFilters`` are converted in the LlamaIndex face
(`swrag_integrations.llama_index.convert.parse_llama_filter`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Sequence

__all__ = ["MetadataFilter", "parse_filter", "native_filter", "SourceMatcher",
           "filter_from_pairs", "values_equal", "MAX_DEPTH", "MAX_PUSHED_VALUES"]

_COMPARE = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
_SCALAR = (str, int, float, bool)
# metadata keys of a source a filter may use besides the user's own (the index sets the rest per chunk)
_ALLOWED_RESERVED = {"source_id"}
MAX_DEPTH = 32
"""The deepest nesting of ``$and``/``$or`` a filter may have (a deeper one is refused with a
``ValueError``, not left to overflow the stack)."""
MAX_PUSHED_VALUES = 1000
"""The most ``$in``/``$nin`` values a store's own filter is given (Chroma: in all, each is
one SQL variable, and 40,003 failed every search with "too many SQL variables"; Qdrant and
Milvus: per list); longer lists are checked here instead."""
_INT64 = (-2**63, 2**63)
_QDRANT_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _typed(value: Any) -> tuple[bool, Any]:
    """``value`` tagged so that equal tags are `values_equal` (and hash alike)."""
    return isinstance(value, bool), value


def values_equal(have: Any, want: Any) -> bool:
    """Equality of a metadata value and a filter value, the filters' one definition: a
    boolean equals only a boolean, numbers compare by value (``1 == 1.0``), anything else
    with ``==`` (strings exactly)."""
    return bool(_typed(have) == _typed(want))


@dataclass(frozen=True)
class MetadataFilter:
    """A checked metadata filter, built by `parse_filter` (not checked when built directly).

    Attributes:
        op: ``"and"``/``"or"`` (combining ``args``) or a comparison: ``"$eq"``, ``"$ne"``,
            ``"$gt"``, ``"$gte"``, ``"$lt"``, ``"$lte"``, ``"$in"`` or ``"$nin"``.
        key: The metadata key a comparison reads (``None`` for ``and``/``or``).
        value: The value a comparison compares with (a sequence for ``$in``/``$nin``).
        args: The sub-filters of ``and``/``or`` (empty for a comparison).
    """

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
                return values_equal(have, want)
            if self.op == "$ne":
                return not values_equal(have, want)
            if self.op == "$in":
                return _typed(have) in self._members
            if self.op == "$nin":
                return _typed(have) not in self._members
            if isinstance(have, bool) or not isinstance(have, (int, float)):
                return False  # order comparisons are for numbers
            return {"$gt": have > want, "$gte": have >= want, "$lt": have < want, "$lte": have <= want}[self.op]
        except TypeError:
            return False

    @cached_property
    def _members(self) -> frozenset[tuple[bool, Any]]:
        """The ``$in``/``$nin`` values as a set of `_typed` tags (a 40,000-value list
        is checked per document in constant time)."""
        return frozenset(_typed(v) for v in self.value)

    def to_dict(self) -> dict[str, Any]:
        """The filter as a LangChain-style dict (normalised: explicit operators)."""
        if self.op in ("and", "or"):
            return {f"${self.op}": [f.to_dict() for f in self.args]}
        return {self.key: {self.op: list(self.value) if self.op in ("$in", "$nin") else self.value}}

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    # ---------------------------------------------------------- translations
    def to_chroma(self) -> dict[str, Any] | None:
        """A Chroma ``where`` clause that every document passing this filter passes
        (``None``: no clause). Chroma compares values as `values_equal` does, so
        it is exact, except that ``$in``/``$nin`` lists beyond `MAX_PUSHED_VALUES`
        values in all are left out (an ``$or`` holding one: the whole ``$or``); the
        caller checks every hit against the filter itself."""
        return self._chroma([MAX_PUSHED_VALUES])

    def _chroma(self, budget: list[int]) -> dict[str, Any] | None:
        if self.op in ("and", "or"):
            parts = [f._chroma(budget) for f in self.args]
            if self.op == "or" and any(p is None for p in parts):
                return None
            kept = [p for p in parts if p is not None]
            if not kept:
                return None
            return kept[0] if len(kept) == 1 else {f"${self.op}": kept}
        if self.op in ("$in", "$nin"):  # Chroma wants one value type per list: one list per type
            if len(self.value) > budget[0]:
                return None
            budget[0] -= len(self.value)
            groups: dict[type, list[Any]] = {}
            for v in self.value:
                groups.setdefault(type(v), []).append(v)
            parts = [{self.key: {self.op: vs}} for vs in groups.values()]
            return parts[0] if len(parts) == 1 else {"$or" if self.op == "$in" else "$and": parts}
        return {self.key: {self.op: self.value}}

    def to_qdrant(self, payload_key: str = "metadata") -> Any:
        """A ``qdrant_client.models.Filter`` over the payload under ``payload_key`` that
        every document passing this filter passes, or ``None`` (no condition): the caller
        checks every hit against the filter itself. Numbers are matched by range
        (``gte=lte=value``: integer and float payloads alike, as `values_equal`),
        booleans and strings by value; parts Qdrant cannot do exactly are left out (an
        ``$or`` holding one: the whole ``$or``)."""
        from qdrant_client import models

        def condition(f: MetadataFilter) -> Any:
            if f.op in ("and", "or"):
                subs = [condition(a) for a in f.args]
                if f.op == "or" and any(s is None for s in subs):
                    return None
                subs = [s for s in subs if s is not None]
                if not subs:
                    return None
                return models.Filter(must=subs) if f.op == "and" else models.Filter(should=subs)
            if not _QDRANT_KEY.fullmatch(f.key):
                return None  # a key its payload paths cannot name (dots, brackets, control characters...)
            key = f"{payload_key}.{f.key}" if payload_key else f.key
            if f.op in ("$gt", "$gte", "$lt", "$lte"):
                bound = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}[f.op]
                return models.FieldCondition(key=key, range=models.Range(**{bound: f.value}))
            values = list(f.value) if f.op in ("$in", "$nin") else [f.value]
            negated = f.op in ("$ne", "$nin")
            numbers = [v for v in values if not isinstance(v, (str, bool))]
            if len(values) > MAX_PUSHED_VALUES or (negated and any(abs(v) > 2**53 for v in numbers)):
                return None  # too long, or a range that could hold other integers (excluding too much)
            strings = [v for v in values if isinstance(v, str)]
            parts: list[Any] = []
            if strings:
                parts.append(models.FieldCondition(key=key, match=models.MatchAny(any=strings)))
            parts += [models.FieldCondition(key=key, match=models.MatchValue(value=v))
                      for v in dict.fromkeys(v for v in values if isinstance(v, bool))]
            parts += [models.FieldCondition(key=key, range=models.Range(gte=v, lte=v)) for v in numbers]
            found = parts[0] if len(parts) == 1 else models.Filter(should=parts)
            return models.Filter(must_not=[found]) if negated else found  # must_not: documents without the key pass

        cond = condition(self)
        if cond is None or isinstance(cond, models.Filter):
            return cond
        return models.Filter(must=[cond])


def parse_filter(spec: Any) -> MetadataFilter | None:
    """Check a filter (dict, `MetadataFilter` or ``None``) and return it as a
    `MetadataFilter` (``None``: no filter). LlamaIndex ``MetadataFilters`` are
    converted by the LlamaIndex face (`parse_llama_filter`).

    Raises:
        ValueError: an unknown operator, an empty ``$and``/``$or``/``$in`` list, a
            non-scalar value, or a key the index sets itself on chunks.
        TypeError: anything that is not a filter.
    """
    return _parse(spec, 1)


def _parse(spec: Any, depth: int) -> MetadataFilter | None:
    if spec is None or isinstance(spec, MetadataFilter):
        return spec
    if depth > MAX_DEPTH:
        raise ValueError(f"filter is nested deeper than {MAX_DEPTH} levels of $and/$or; flatten it "
                         "(e.g. one $in list instead of nested $or)")
    if not isinstance(spec, dict):
        if type(spec).__name__ == "MetadataFilters":
            raise TypeError("filter is a LlamaIndex MetadataFilters: give it to the LlamaIndex retrievers "
                            "(filters=), or convert it with swrag_integrations.llama_index.convert."
                            "filter_from_llama_index")
        raise TypeError(f"filter must be a dict such as {{'topic': 'sea'}} or {{'n': {{'$in': [1, 2]}}}}, "
                        f"got {type(spec).__name__}")
    if not spec:
        raise ValueError("filter must not be an empty dict (pass filter=None for no filter)")
    parts = [_parse_item(key, value, depth) for key, value in spec.items()]
    return parts[0] if len(parts) == 1 else MetadataFilter("and", args=tuple(parts))


def _check_value(key: str, value: Any) -> None:
    """A scalar filter value every store compares exactly (``ValueError`` otherwise)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"filter {{{key!r}: ...}}: {value!r} is not a comparable number; use a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value < _INT64[1]:
        raise ValueError(f"filter {{{key!r}: ...}}: the integer {value} is outside the 64-bit range the stores "
                         "hold (-2**63 <= n < 2**63)")


def _parse_item(key: Any, value: Any, depth: int = 1) -> MetadataFilter:
    if key in ("$and", "$or"):
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError(f"filter {key} takes a non-empty list of filters, got {value!r}")
        return MetadataFilter(key[1:], args=tuple(_parse(v, depth + 1) for v in value))  # type: ignore[misc]
    if not isinstance(key, str) or key.startswith("$"):
        raise ValueError(f"filter key {key!r}: use a metadata key, '$and' or '$or' "
                         f"(comparisons: {', '.join(_COMPARE)})")
    from swrag_integrations.engine.records import RESERVED

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
        for v in operand:
            _check_value(key, v)
        return MetadataFilter(op, key, tuple(operand))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(operand, bool) or not isinstance(operand, (int, float)):
            raise ValueError(f"filter {{{key!r}: {{{op!r}: {operand!r}}}}}: order comparisons take a number")
    elif not isinstance(operand, _SCALAR):
        raise ValueError(f"filter {{{key!r}: {operand!r}}}: the value must be str, int, float or bool")
    _check_value(key, operand)
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


def native_filter(flt: MetadataFilter, store: Any) -> dict[str, Any] | None:
    """Keyword arguments that make ``store`` filter while it searches, or ``None`` for a
    store this module does not know (then the caller fetches more and filters)."""
    kind = type(store).__name__
    if kind == "Chroma":
        where = flt.to_chroma()
        return None if where is None else {"filter": where}
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
        store: the index's `SourceStore`.
    """

    def __init__(self, flt: MetadataFilter, store: Any) -> None:
        self.flt = flt
        self.store = store
        self._known: dict[str, bool] = {}
        self.records: dict[str, Any] = {}  # the records read to decide: the search serves these, not a re-read

    def passes(self, sids: Sequence[str]) -> list[bool]:
        """For each source id: complete and its metadata passes the filter."""
        todo = sorted({s for s in sids if s not in self._known})
        if todo:
            records = self.store.get_many(todo)
            self.records.update(records)
            for sid in todo:
                rec = records.get(sid)
                self._known[sid] = rec is not None and rec.complete and self.flt.matches(
                    {**rec.index_metadata, "source_id": sid})
        return [self._known[s] for s in sids]

    def chunk_ids(self) -> Callable[[Sequence[str]], list[bool]]:
        """A predicate over chunk ids ``<source_id>:s:<i>`` (for the keyword search)."""
        from swrag_integrations.engine.ids import parse_chunk_id

        def allow(cids: Sequence[str]) -> list[bool]:
            sids = [p.source_id if (p := parse_chunk_id(c)) is not None else "" for c in cids]
            return self.passes(sids)

        return allow
