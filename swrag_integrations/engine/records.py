"""A source as the index keeps it: its text once, and per small chunk a row of offsets.

`SourceRecord` holds a source's exact text and an int array of shape
``(7, n_chunks)`` -- start, end, token count, window lower/upper chunk bound, window
start/end character offset -- so a chunk is ``text[start:end]`` and a window is a
range of chunks; nothing else about a chunk is stored. `plan_source` builds the
record of a document under an `IndexConfig`.

``windows`` lists the source's windows as chunk ranges ``(lower, upper)`` (inclusive),
e.g. the graph's ``"windows"`` passages.

A record has a *state*: ``"pending"`` while its vectors are being written,
``"complete"`` once every derived part holds it (only complete sources are served),
``"deleting"`` while it is being removed. ``id_span`` is the number of chunk ids whose
vectors may exist in the vector store (the largest chunk count written since the
record was last complete), so a crashed replace or delete knows what to clean up.
"""

from __future__ import annotations

import json
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from swrag_integrations.core.windows import get_encoding, iter_windows
from swrag_integrations.engine.config import IndexConfig
from swrag_integrations.engine.ids import chunk_id, content_hash, member_id, source_id_for

__all__ = ["SourceRecord", "SourceSegment", "join_offset_chunks", "offset_of", "plan_source", "clean_metadata", "doc_record_metadata", "metadata_change", "DOC_KEY", "STATES",
           "START", "END", "N_TOKENS", "WIN_LO", "WIN_HI", "WIN_START", "WIN_END"]

# rows of SourceRecord.arrays
START, END, N_TOKENS, WIN_LO, WIN_HI, WIN_START, WIN_END = range(7)
STATES = ("pending", "complete", "deleting")
MAX_OFFSET = 2**31 - 1  # arrays are stored as int32

# metadata keys the index sets itself on chunks (a source's own keys of these names are dropped)
RESERVED = frozenset({
    "source_id", "level", "chunk_index", "medium_index", "start_index", "end_index", "n_tokens",
    "window_lower_bound", "window_upper_bound", "window_start_index", "window_end_index",
    "first_chunk", "last_chunk", "n_chunks", "content_hash", "chunk_id", "swrag_index", "swrag_doc", "doc_ids",
})
# key of a record's metadata that keeps what the user added but the chunks do not carry: the
# document's own id and its metadata values that clean_metadata drops (see SourceRecord.doc_metadata)
DOC_KEY = "swrag_doc"
_MAGIC = b"SWRS1"


def clean_metadata(meta: dict[str, Any] | None) -> dict[str, Any]:
    """The user metadata an index keeps: str/int/float/bool values, reserved keys dropped."""
    out = {}
    for key, value in (meta or {}).items():
        if not isinstance(key, str) or key in RESERVED:
            continue
        if isinstance(value, (str, bool, int)) or (isinstance(value, float) and np.isfinite(value)):
            out[key] = value
    return out


@dataclass
class SourceRecord:
    """One source: its text, content hash, per-chunk arrays, metadata and state."""

    source_id: str
    content_hash: str
    text: str
    arrays: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)
    state: str = "complete"
    id_span: int = 0
    windows: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {self.state!r}")
        self.id_span = max(int(self.id_span), self.n_chunks)
        if self.windows is None:  # one window per distinct child window range
            pairs = np.unique(np.stack([self.arrays[WIN_LO], self.arrays[WIN_HI]]), axis=1) if self.n_chunks else \
                np.zeros((2, 0), dtype=np.int64)
            self.windows = pairs.astype(np.int64)

    @property
    def n_chunks(self) -> int:
        return int(self.arrays.shape[1])

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def index_metadata(self) -> dict[str, Any]:
        """The scalar user metadata the chunks carry (in the vector store, on hits, for filters)."""
        return {k: v for k, v in self.metadata.items() if k != DOC_KEY}

    @property
    def doc_id(self) -> str | None:
        """The id the document was added under (``Document.id`` / ``ids=``), if any."""
        value = (self.metadata.get(DOC_KEY) or {}).get("id")
        return None if value is None else str(value)

    @property
    def doc_metadata(self) -> dict[str, Any]:
        """The document's metadata as it was added: `index_metadata` plus the values the
        chunks do not carry (reserved keys such as a chunk's own ``start_index``, lists...)."""
        return {**self.index_metadata, **((self.metadata.get(DOC_KEY) or {}).get("extra") or {})}

    @property
    def base(self) -> int:
        """Where the record's text starts in its source: 0 for a whole document; for a
        `SourceSegment` (offset chunks joined) the offset of its first character.
        Every offset the record gives out (chunk and medium metadata, `span`) is in
        source coordinates, ``text[k]`` being source character ``base + k``; the arrays
        hold offsets into `text`."""
        return int((self.metadata.get(DOC_KEY) or {}).get("base", 0))

    @property
    def members(self) -> list[dict[str, Any]]:
        """The offset chunks a segment was joined from (``{"start", "end",
        "metadata"}``, source coordinates; their ids: `member_id`); ``[]``
        for a whole document."""
        return list((self.metadata.get(DOC_KEY) or {}).get("members") or [])

    def doc_ids(self, start: int, end: int) -> list[str]:
        """The ids of the added documents whose text overlaps source range ``[start, end)``:
        the document's id (the one it was added under, else the source id) for a whole
        document; the overlapping offset chunks' `member_id` for a segment."""
        members = self.members
        if not members:
            return [self.doc_id or self.source_id]
        return [member_id(self.source_id, m["start"], m["end"]) for m in members if m["start"] < end and start < m["end"]]

    def span(self, start: int, end: int) -> str:
        """The exact source text ``[start, end)`` (source coordinates, see `base`).

        Raises:
            LookupError: the range is not inside the record.
        """
        base = self.base
        if end <= start:
            return ""
        if start < base or end > base + len(self.text):
            raise LookupError(f"source {self.source_id!r} holds characters {base}:{base + len(self.text)}, "
                              f"not {start}:{end}")
        return self.text[start - base:end - base]

    @property
    def origin(self) -> str | None:
        """The file (``metadata["source"]``) the record came from, if any."""
        value = self.metadata.get("source")
        return None if value in (None, "") else str(value)

    def chunk_ids(self, upto: int | None = None) -> list[str]:
        return [chunk_id(self.source_id, i) for i in range(self.n_chunks if upto is None else upto)]

    def chunk_text(self, i: int) -> str:
        return self.text[int(self.arrays[START, i]):int(self.arrays[END, i])]

    def chunk_metadata(self, i: int, medium_size: int) -> dict[str, Any]:
        """Metadata of small chunk ``i``: offsets in source coordinates (`base`), and
        ``doc_ids``: the ids of the added documents its window overlaps (`doc_ids`)."""
        a, b = self.arrays, self.base
        meta = self.index_metadata
        meta.update(
            source_id=self.source_id, level="small", chunk_index=int(i), start_index=b + int(a[START, i]),
            end_index=b + int(a[END, i]), n_tokens=int(a[N_TOKENS, i]), window_lower_bound=int(a[WIN_LO, i]),
            window_upper_bound=int(a[WIN_HI, i]), window_start_index=b + int(a[WIN_START, i]),
            window_end_index=b + int(a[WIN_END, i]), medium_index=int(i) // medium_size, n_chunks=self.n_chunks,
            content_hash=self.content_hash, chunk_id=chunk_id(self.source_id, i),
            doc_ids=self.doc_ids(b + int(a[WIN_START, i]), b + int(a[WIN_END, i])),
        )
        return meta

    def medium_metadata(self, j: int, medium_size: int) -> dict[str, Any]:
        a = self.arrays
        first = int(j) * medium_size
        last = min(first + medium_size, self.n_chunks) - 1
        sl = slice(first, last + 1)
        b = self.base
        meta = self.index_metadata
        meta.update(
            source_id=self.source_id, level="medium", medium_index=int(j), first_chunk=first, last_chunk=last,
            start_index=b + int(a[START, first]), end_index=b + int(a[END, last]),
            n_tokens=int(a[N_TOKENS, sl].sum()),
            window_lower_bound=int(a[WIN_LO, sl].min()), window_upper_bound=int(a[WIN_HI, sl].max()),
            window_start_index=b + int(a[WIN_START, sl].min()), window_end_index=b + int(a[WIN_END, sl].max()),
            n_chunks=self.n_chunks, content_hash=self.content_hash, chunk_id=chunk_id(self.source_id, j, "m"),
        )
        return meta

    def n_mediums(self, medium_size: int) -> int:
        return -(-self.n_chunks // medium_size)

    # ------------------------------------------------------------- packing
    def arrays_bytes(self) -> bytes:
        if self.arrays.size and int(self.arrays.max()) > MAX_OFFSET:
            raise ValueError(f"source {self.source_id!r} is too long for the index (offsets > {MAX_OFFSET})")
        return np.ascontiguousarray(self.arrays, dtype="<i4").tobytes()

    def windows_bytes(self) -> bytes:
        return np.ascontiguousarray(self.windows, dtype="<i4").tobytes()

    @staticmethod
    def windows_from_bytes(raw: bytes | None) -> np.ndarray | None:
        if raw is None:
            return None
        return np.frombuffer(raw, dtype="<i4").astype(np.int64).reshape(2, -1)

    @staticmethod
    def arrays_from_bytes(raw: bytes, n_chunks: int) -> np.ndarray:
        arr = np.frombuffer(raw, dtype="<i4").astype(np.int64)
        if arr.size != 7 * n_chunks:
            raise ValueError(f"chunk arrays hold {arr.size} values, expected {7 * n_chunks}")
        return arr.reshape(7, n_chunks)

    def header(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "content_hash": self.content_hash, "state": self.state,
                "id_span": self.id_span, "n_chunks": self.n_chunks, "metadata": self.metadata,
                "n_windows": int(self.windows.shape[1])}

    def to_bytes(self) -> bytes:
        """One self-describing blob (no pickle): magic, JSON header, int32 arrays, UTF-8 text."""
        head = json.dumps(self.header(), ensure_ascii=False).encode("utf-8")
        return b"".join((_MAGIC, struct.pack("<I", len(head)), head, self.arrays_bytes(), self.windows_bytes(),
                         self.text.encode("utf-8", "surrogatepass")))

    @classmethod
    def from_bytes(cls, raw: bytes) -> "SourceRecord":
        if raw[:5] != _MAGIC:
            raise ValueError("not a source record (bad magic)")
        (n,) = struct.unpack("<I", raw[5:9])
        head = json.loads(raw[9:9 + n].decode("utf-8"))
        pos = 9 + n
        size = 7 * 4 * int(head["n_chunks"])
        arrays = cls.arrays_from_bytes(raw[pos:pos + size], int(head["n_chunks"]))
        pos += size
        wsize = 2 * 4 * int(head.get("n_windows", 0))
        windows = cls.windows_from_bytes(raw[pos:pos + wsize]) if "n_windows" in head else None
        text = raw[pos + wsize:].decode("utf-8", "surrogatepass")
        return cls(head["source_id"], head["content_hash"], text, arrays, head.get("metadata") or {},
                   head.get("state", "complete"), int(head.get("id_span", 0)), windows)


def check_storable(doc: Any) -> None:
    """Raise ``ValueError`` when ``doc`` holds text no store can keep faithfully: a lone
    surrogate (U+D800-U+DFFF; what ``surrogateescape`` makes of undecodable bytes) in
    its text or metadata. The message names the document, the code point and its offset.

    Every source store refuses such text the same way (a ``LocalFileStore`` could keep
    it, SQLite and the vector stores cannot), before anything is written.
    """
    from swrag_integrations.ingest.files import display_path

    text = doc.page_content
    meta = getattr(doc, "metadata", None) or {}
    for where, value in (("text", text), ("metadata", json.dumps(meta, ensure_ascii=False))):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            char, start = exc.object[exc.start], exc.start
            break
    else:
        return
    name = meta.get("source") or getattr(doc, "id", None) or f"source {source_id_for(doc)}"
    offset = f" at offset {start}" if where == "text" else ""
    raise ValueError(
        f"document '{display_path(str(name))}': its {where} has a lone surrogate U+{ord(char):04X}{offset}, which is not "
        f"valid Unicode (undecodable bytes kept by errors='surrogateescape'?), so it cannot be stored faithfully: "
        f"decode the bytes with their real encoding, or replace them (errors='replace')")


def doc_record_metadata(doc: Any) -> dict[str, Any]:
    """The metadata a record keeps for ``doc``: `clean_metadata`, plus under
    `DOC_KEY` the document's id and the JSON values ``clean_metadata`` drops, so the
    document comes back as it was added (`SourceRecord.doc_metadata`).

    A value that JSON cannot hold (a ``datetime``, an object...) is left out with a
    warning naming its key.
    """
    given = dict(getattr(doc, "metadata", None) or {})
    meta = clean_metadata(given)
    extra = {}
    for key, value in given.items():
        if key in meta and meta[key] == value:
            continue
        try:
            json.dumps({key: value}, allow_nan=False)
        except (TypeError, ValueError) as exc:
            warnings.warn(f"metadata[{key!r}] ({type(value).__name__}) cannot be stored in the index and is left "
                          f"out ({exc}); give str/int/float/bool values or JSON lists/dicts", stacklevel=4)
            continue
        extra[key] = value
    doc_id = getattr(doc, "id", None)
    if doc_id is not None or extra:
        meta[DOC_KEY] = {"id": None if doc_id is None else str(doc_id), "extra": extra}
    return meta


def metadata_change(old: SourceRecord | None, new: SourceRecord) -> str | None:
    """How the metadata of ``new`` differs from the stored ``old`` version of a source with
    the same text: ``None`` (not at all), ``"doc"`` (only what `DOC_KEY` keeps: the
    document's id or metadata the chunks do not carry) or ``"index"`` (what the chunks,
    and so their vectors and filters, carry; also when ``old`` is missing)."""
    if old is None:
        return "index"

    def plain(value: Any) -> Any:
        return json.loads(json.dumps(value, ensure_ascii=False))

    if plain(old.index_metadata) != plain(new.index_metadata):
        return "index"
    return None if plain(old.metadata.get(DOC_KEY)) == plain(new.metadata.get(DOC_KEY)) else "doc"


def plan_source(doc: Any, config: IndexConfig, source_id: str | None = None) -> SourceRecord:
    """Cut one document into its small-chunk rows (no I/O); the record is ``pending``.

    ``source_id``: the record's id when the caller decided it for a batch
    (`batch_source_ids`); default `source_id_for` of ``doc``.

    Small chunks are FFS pieces of ``chunk_size`` units with step == size, so they tile
    the text exactly. Each chunk's window bounds are the union of the windows that hold
    it: windows of ``window_size`` chunks moving by ``step`` chunks (``"chunks"``), or
    the FFS/DFS/DDS windows of the text mapped onto the chunks they touch.

    Raises ``ValueError`` for text no store can keep (`check_storable`); the add
    path checks every document once at its door (`dedupe_documents`) and
    plans with `plan_checked`.
    """
    check_storable(doc)
    return plan_checked(doc, config, source_id)


def plan_checked(doc: Any, config: IndexConfig, source_id: str | None = None) -> SourceRecord:
    """`plan_source` of a document the caller already passed through
    `check_storable` (the add path's one check per document), without checking it again."""
    text = doc.page_content
    sid = source_id if source_id is not None else source_id_for(doc)
    cfg = config
    encoding = get_encoding(cfg.encoding_name)
    if cfg.child == "sentence":
        starts, ends = _sentence_children(text, cfg)
    else:
        spans = list(iter_windows(text, "FFS", cfg.chunk_size, cfg.chunk_size, unit=cfg.unit,
                                  encoding_name=cfg.encoding_name))
        starts = np.fromiter((s.start for s in spans), dtype=np.int64, count=len(spans))
        ends = np.fromiter((s.end for s in spans), dtype=np.int64, count=len(spans))
    n = int(starts.size)
    n_tokens = _token_counts(text, starts, ends, encoding)
    idx = np.arange(n, dtype=np.int64)
    if cfg.strategy == "chunks":
        w, s = cfg.window_size, cfg.step
        n_windows = 1 if n <= w else -(-(n - w) // s) + 1
        k_min = np.maximum(0, -(-(idx - w + 1) // s))
        k_max = np.minimum(idx // s, n_windows - 1)
        lower = k_min * s
        upper = np.minimum(k_max * s + w, n) - 1
        win_start, win_end = starts[lower], ends[upper]
        firsts = np.arange(n_windows, dtype=np.int64) * s
        windows = np.stack([firsts, np.minimum(firsts + w, n) - 1]) if n else np.zeros((2, 0), dtype=np.int64)
    else:
        win_start, win_end = starts.copy(), ends.copy()
        ranges = []
        for ws, we in cfg.window_config().spans(text):
            c_lo = int(np.searchsorted(starts, ws, side="right")) - 1
            c_hi = int(np.searchsorted(starts, we, side="left")) - 1
            if c_hi < c_lo:
                continue
            c_lo = max(c_lo, 0)
            ranges.append((c_lo, c_hi))
            sl = slice(c_lo, c_hi + 1)
            np.minimum(win_start[sl], ws, out=win_start[sl])
            np.maximum(win_end[sl], we, out=win_end[sl])
        lower = np.searchsorted(starts, win_start, side="right") - 1
        upper = np.searchsorted(starts, win_end, side="left") - 1
        windows = np.array(sorted(set(ranges)), dtype=np.int64).T.reshape(2, -1)
    arrays = np.stack([starts, ends, n_tokens, lower, upper, win_start, win_end]).astype(np.int64)
    meta = doc_record_metadata(doc)
    if isinstance(doc, SourceSegment):
        meta.setdefault(DOC_KEY, {"id": None, "extra": {}}).update(base=doc.base, members=doc.members)
    return SourceRecord(sid, content_hash(text, cfg.to_json()), text, arrays, meta, state="pending",
                        windows=windows.astype(np.int64))


def _token_counts(text: str, starts: np.ndarray, ends: np.ndarray, encoding: Any, block: int = 4096) -> np.ndarray:
    """The exact token count of each chunk on its own (used for budgets), encoded
    ``block`` chunks at a time: memory stays bounded however many chunks a text has
    (all token lists at once took about 2 KB per chunk)."""
    out = np.zeros(starts.size, dtype=np.int64)
    for lo in range(0, starts.size, block):
        pieces = [text[a:b] for a, b in zip(starts[lo:lo + block].tolist(), ends[lo:lo + block].tolist())]
        out[lo:lo + len(pieces)] = [len(t) for t in encoding.encode_ordinary_batch(pieces)]
    return out


def _sentence_children(text: str, cfg: IndexConfig) -> tuple[np.ndarray, np.ndarray]:
    """Runs of whole delimiter units packed up to ``chunk_size`` units (they tile the text)."""
    bounds = cfg.child_config().unit_bounds(text)
    if bounds.size < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if cfg.unit == "token":
        sizes = _token_counts(text, bounds[:-1], bounds[1:], get_encoding(cfg.encoding_name)).tolist()
    else:
        sizes = np.diff(bounds).tolist()
    starts, ends, used = [int(bounds[0])], [], 0
    for i, size in enumerate(sizes):
        if used and used + size > cfg.chunk_size:  # close the child before this unit
            ends.append(int(bounds[i]))
            starts.append(int(bounds[i]))
            used = 0
        used += size
    ends.append(int(bounds[-1]))
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


# ---------------------------------------------------------------- offset chunks
@dataclass
class SourceSegment:
    """One contiguous piece of a source, joined from the offset chunks of one write that
    cover it (`join_offset_chunks`); indexed as one source record whose
    `SourceRecord.base` is `base`, so every offset the index gives out for it
    is in the coordinates of the original source.

    ``page_content``: the source text ``[base, base + len)``, ``metadata``: the metadata
    every member has alike (without its offsets), ``members``: each chunk's ``start``,
    ``end`` and own metadata (``get_by_ids`` gives a chunk back as it was added).
    """

    page_content: str
    metadata: dict[str, Any]
    base: int
    members: list[dict[str, Any]]
    id: str | None = None


def offset_of(doc: Any) -> int | None:
    """The source offset of an *offset chunk*, else ``None``.

    An offset chunk is a document without an id whose metadata names its ``source`` and
    gives an int ``start_index`` (LangChain splitters with ``add_start_index=True``, the
    package's splitters, LlamaIndex nodes converted by
    `SlidingWindowLlamaIndex`): its text is
    ``source_text[start_index:start_index + len(text)]``. A document with an id keeps it
    as its identity and stays a source of its own.

    Raises:
        ValueError: ``end_index`` is given and is not ``start_index + len(text)``.
    """
    from swrag_integrations.engine.ids import origin_key

    meta = getattr(doc, "metadata", None) or {}
    start = meta.get("start_index")
    if getattr(doc, "id", None) or origin_key(meta) is None or isinstance(start, bool) or not isinstance(start, int):
        return None
    end = meta.get("end_index")
    n = len(doc.page_content)
    if isinstance(end, int) and not isinstance(end, bool) and end != start + n:
        raise ValueError(f"a chunk of source {meta['source']!r} has start_index={start} and end_index={end}, but "
                         f"{n} characters: end_index must be start_index + len(page_content) (or left out)")
    if start < 0:
        raise ValueError(f"a chunk of source {meta['source']!r} has start_index={start}: offsets start at 0")
    return start


def _jsonable(meta: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in meta.items():
        try:
            json.dumps({key: value}, allow_nan=False)
        except (TypeError, ValueError):
            continue
        out[key] = value
    return out


def join_offset_chunks(documents: Sequence[Any]) -> tuple[list[Any], list[tuple[int, int | None]]]:
    """Join the offset chunks (`offset_of`) of one write into source segments.

    Chunks of one source (same `origin_key`: ``source`` plus ``page``/``row``)
    are pieces of one source text: sorted by offset, each one must agree with the text
    the others give at the offsets they share, and chunks that overlap or touch join
    into one `SourceSegment`. A gap between chunks is never filled: the chunks on
    either side become separate segments (separate records, whose windows never cross
    the gap). Other documents pass through unchanged.

    Returns:
        ``(docs, placement)``: the documents to index, and for each input document the
        position of its document in ``docs`` and its member number in that segment
        (``None`` for a document that passed through).

    Raises:
        ValueError: two chunks give different text at the same offsets (naming the
            source and the characters), or a chunk's ``end_index`` disagrees with its text.
    """
    from swrag_integrations.engine.ids import origin_key

    out: list[Any] = []
    placement: list[tuple[int, int | None]] = [(-1, None)] * len(documents)
    groups: dict[str, list[tuple[int, int]]] = {}  # origin key -> (start, input position)
    for pos, doc in enumerate(documents):
        start = offset_of(doc)
        if start is None:
            placement[pos] = (len(out), None)
            out.append(doc)
        else:
            groups.setdefault(origin_key(doc.metadata), []).append((start, pos))
    for items in groups.values():
        items.sort(key=lambda it: (it[0], -len(documents[it[1]].page_content)))
        segments: list[tuple[int, str, list[int]]] = []
        for start, pos in items:
            text = documents[pos].page_content
            end = start + len(text)
            if segments and start <= segments[-1][0] + len(segments[-1][1]):
                base, joined, members = segments[-1]
                top = base + len(joined)
                shared = min(end, top)
                if joined[start - base:shared - base] != text[:shared - start]:
                    source = documents[pos].metadata.get("source")
                    raise ValueError(f"two chunks of source {source!r} give different text at characters "
                                     f"{start}:{shared}: chunks of one source must be pieces of one text (check "
                                     "their start_index, or give the chunks of different texts different sources)")
                if end > top:
                    joined += text[top - start:]
                members.append(pos)
                segments[-1] = (base, joined, members)
            else:
                segments.append((start, text, [pos]))
        for base, joined, members in segments:
            metas = [dict(documents[p].metadata or {}) for p in members]
            common = {k: v for k, v in metas[0].items() if k not in ("start_index", "end_index")
                      and all(k in m and m[k] == v for m in metas[1:])}
            rows = [{"start": offset_of(documents[p]), "end": offset_of(documents[p]) + len(documents[p].page_content),
                     "metadata": _jsonable(m)} for p, m in zip(members, metas)]
            for number, p in enumerate(members):
                placement[p] = (len(out), number)
            out.append(SourceSegment(joined, common, base, rows))
    return out, placement
