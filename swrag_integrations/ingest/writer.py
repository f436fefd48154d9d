"""Writing an index: add, replace, remove, prune and repair, under the writer lock.

The order of writes makes every crash recoverable and nothing half-written servable:

1. the previous version's record, if any, is marked ``pending`` and its vectors are
   deleted (their ids carry that version, `vector_ids`);
2. the source's record goes to the source store as ``pending`` (text, offsets; its
   ``id_span`` remembers every chunk id whose vector may exist) and its vectors are
   added;
3. it is marked ``complete`` (``id_span`` shrinks to its chunk count);
4. BM25 replays the store's change log and its snapshot is saved.

Removal marks the record ``deleting``, deletes its vectors, then removes the record.
Any later write first finishes what a dead writer left ``pending`` or ``deleting``
(`recover`) from the record the store holds now (never from a cached copy: the
store's record cache replays the change log first).

Every write is fenced: the source store refuses writes of a writer whose lease was
taken over (`LeaseLostError`), and right before every vector write
(after the batch's vectors are computed, so a stall while embedding is caught) the
writer checks its lease again; the lease renews itself while the lock is held, so
cutting a large document does not let it expire. A writer that stalls between its last
check and its vector write (a suspended process) still writes afterwards, but under the
ids of its own version, which no record references: nothing serves them, and
`index_status` reports them and `repair` deletes them.

There is one write path: `write_planned` takes records already cut by
`plan_source` (here, in worker processes or in Ray tasks), each with its
chunks' vectors when they were computed elsewhere, and does steps 1-4 in one writer;
`write_documents` plans in this process and calls it.
"""

from __future__ import annotations

import logging
import warnings
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, Sized

from swrag_integrations.engine.ids import batch_source_ids, chunk_id, member_id, vector_ids
from swrag_integrations.engine.health import garbage_vectors, missing_vectors
from swrag_integrations.engine.protocols import as_engine
from swrag_integrations.engine.records import (SourceRecord, SourceSegment, check_storable, join_offset_chunks, metadata_change,
                                               plan_checked)

if TYPE_CHECKING:
    from swrag_integrations.engine.protocols import EngineState

__all__ = ["IndexReport", "write_documents", "write_planned", "remove_sources", "recover", "repair", "chunk_documents"]

logger = logging.getLogger(__name__)


@dataclass
class IndexReport:
    """What a write did. Indexable like the dict earlier versions returned (``report["added"]``)."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped_empty: int = 0
    repaired: int = 0
    chunks: int = 0
    ids: list[str] = field(default_factory=list)
    skipped_files: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)  # segments this write joins into new ones or replaces

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("added", "replaced", "unchanged", "removed", "skipped_empty",
                                              "repaired", "chunks")}

    def __getitem__(self, key: str) -> int:
        return self.as_dict()[key]

    def summary(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.as_dict().items() if v or k in ("added", "unchanged", "chunks")]
        if self.skipped_files:
            parts.append(f"skipped files: {len(self.skipped_files)}")
        return ", ".join(parts)


def chunk_documents(rec: SourceRecord, index_id: str, start: int = 0, stop: int | None = None) -> list[Any]:
    """The vector-storage documents of chunks ``start..stop`` of a record (exact chunk text)."""
    from swrag_integrations.stores.storage import PlainDocument

    out = []
    a = rec.arrays
    for i in range(start, rec.n_chunks if stop is None else stop):
        meta = rec.index_metadata
        meta.update(source_id=rec.source_id, chunk_index=i, start_index=rec.base + int(a[0, i]),
                    end_index=rec.base + int(a[1, i]),
                    content_hash=rec.content_hash, chunk_id=chunk_id(rec.source_id, i), swrag_index=index_id)
        out.append(PlainDocument(page_content=rec.chunk_text(i), metadata=meta))
    return out


def _fence(index: "EngineState") -> None:
    """Before a vector write: raise `LeaseLostError` if this writer no
    longer holds the index's lease (its store's ``check_writer``; a store without one
    is not fenced)."""
    check = getattr(index.store, "check_writer", None)
    if check is not None:
        check()


def _rewrite_plans(index: "EngineState", sids: Sequence[str]) -> list["Plan"]:
    """Plans that write these stored sources again (recovery, lost vectors, repair): the
    records read from the store itself, not its cache (a key-value store's writer that died
    between a record and its change-log entry left no trace for the cache to see), copied
    so that a record served elsewhere is never changed."""
    uncached = getattr(index.store, "iter_records", None)
    records = ({rec.source_id: rec for rec in uncached(list(sids))} if uncached is not None
               else index.store.get_many(list(sids)))
    return [(replace(records[s], state="pending"), True, None) for s in sids if s in records]


Plan = tuple[SourceRecord, bool, Any]  # (record, an older version exists, its vectors or None)


def _write(index: "EngineState", plans: Iterable[Plan], desc: str,
           total: int | Callable[[], int] | None = None, lookahead: int = 0) -> int:
    """Steps 1-3 for each planned record, in batches of about ``batch_size`` chunks.

    ``lookahead``: once no more than this many chunks of the batch being written are
    left, the next batch is taken from ``plans`` (so a stream that computes vectors
    elsewhere starts on the next records while the last vectors of this batch are being
    computed, instead of leaving the workers idle at every batch boundary).

    A plan's vectors (rows ``vectors[lo:hi]`` for chunks ``lo..hi-1``; ``None``: embedded
    here with the store's own embedding) are primed into the store's
    `PrecomputedEmbeddings` right before the store adds those chunks, so
    the store writes them instead of embedding, and the lease is checked between the two
    (a store without ``PrecomputedEmbeddings`` embeds inside its ``add``, after the
    check). Returns the number of chunks written.
    """
    from tqdm.auto import tqdm

    if getattr(index.vectors, "transactional", False):
        return _write_whole(index, plans, desc, total)
    pre = index.vectors.precomputed
    if total is None and isinstance(plans, Sized):  # a list of plans: its chunks are the total
        total = sum(rec.n_chunks for rec, _, _ in plans)
    bar = None
    written = 0
    batches = _Ahead(_batches(plans, index.batch_size))
    try:
        for batch in batches:
            left = sum(rec.n_chunks for rec, _, _ in batch)  # chunks of this batch not written yet
            if bar is None:
                bar = tqdm(total=total() if callable(total) else total, desc=desc, unit="chunk",
                           disable=not index.show_progress)
            # the versions these records replace (as the store holds them now): marked pending,
            # so a crash before the new record is put completes them again, and their vectors
            # deleted while their content hash (part of their vector ids) is known
            olds = index.store.heads([rec.source_id for rec, had, _ in batch if had])
            if olds:
                index.store.set_state(list(olds), "pending")
                _fence(index)
                index.vectors.delete([v for sid, h in olds.items()
                                      for v in vector_ids(index.manifest, sid, h.content_hash, 0, h.id_span)])
            for rec, _, _ in batch:
                rec.state = "pending"
            index.store.put([rec for rec, _, _ in batch])
            for pieces in _slices(batch, index.batch_size):
                n = sum(hi - lo for _, lo, hi, _ in pieces)
                if left <= lookahead:
                    batches.fetch()  # decide the next records (their vectors start) before waiting
                left -= n
                docs = [d for rec, lo, hi, _ in pieces for d in chunk_documents(rec, index.index_id, lo, hi)]
                primed = pre is not None
                if primed:
                    # the vectors first (given, or embedded here), then the lease check, then
                    # the write: a writer that stalled while embedding cannot write afterwards
                    texts = [d.page_content for d in docs]
                    pre.prime(texts, _rows(pre.base, pieces, texts))
                try:
                    _fence(index)
                    index.vectors.add(docs, [v for rec, lo, hi, _ in pieces
                                             for v in vector_ids(index.manifest, rec.source_id, rec.content_hash, lo, hi)])
                except BaseException:
                    if primed:
                        pre.forget()
                    raise
                if callable(total):
                    bar.total = total()  # a stream: known so far
                bar.update(n)
                written += n
            index.store.set_state([rec.source_id for rec, _, _ in batch], "complete", id_span=-1)
    finally:
        if bar is not None:
            if callable(total):  # sources decided after the last batch (unchanged ones) come off it
                bar.total = total()
            bar.close()
    return written


Piece = tuple[SourceRecord, int, int, Any]  # (record, first chunk, end chunk, the record's vectors or None)


def _write_whole(index: "EngineState", plans: Iterable[Plan], desc: str,
                 total: int | Callable[[], int] | None = None) -> int:
    """`_write` for a transactional storage (``vectors.transactional``, e.g.
    `PostgresStorage`): each source's vectors computed first (given, or
    embedded here, one source per call as `_rows` does), then the record, its
    chunks and vectors handed over in one call (``vectors.write_source``), which commits
    them together and checks the writer's lease inside that transaction: no pending state."""
    from tqdm.auto import tqdm

    embedder = index.vectors.precomputed.base
    if total is None and isinstance(plans, Sized):  # a list of plans: its chunks are the total
        total = sum(rec.n_chunks for rec, _, _ in plans)
    written = 0
    with tqdm(total=None if callable(total) else total, desc=desc, unit="chunk",
              disable=not index.show_progress) as bar:
        for rec, _, vectors in plans:
            docs = chunk_documents(rec, index.index_id)
            texts = [d.page_content for d in docs]
            rows = _rows(embedder, [(rec, 0, rec.n_chunks, vectors)], texts) if docs else []
            ids = vector_ids(index.manifest, rec.source_id, rec.content_hash, 0, rec.n_chunks)
            index.vectors.write_source(rec, docs, ids, rows)
            if callable(total):
                bar.total = total()
            bar.update(rec.n_chunks)
            written += rec.n_chunks
    return written


def _slices(batch: Sequence[Plan], size: int) -> Iterator[list[Piece]]:
    """The chunks of a batch's records in runs of at most ``size`` chunks across records:
    each run is written in one store call, however many (small) sources it holds (400
    one-line sources were 400 store writes), its vectors computed just before
    (`_rows`). A run holds whole pieces -- a record's chunks ``[j*size, (j+1)*size)``
    -- the blocks a record's chunks are embedded in (as `parallel` does), and no
    chunk text of one piece is in another piece of its run: the store's
    `PrecomputedEmbeddings` serves a primed text's vector once, so a text
    repeated in another source of the run would be embedded again, apart."""
    group: list[Piece] = []
    room = size
    texts: set[str] = set()
    for rec, _, vectors in batch:
        for lo in range(0, rec.n_chunks, size):  # a record's blocks of ``size`` chunks stay whole
            hi = min(rec.n_chunks, lo + size)
            mine = {rec.chunk_text(i) for i in range(lo, hi)}
            if group and (hi - lo > room or not texts.isdisjoint(mine)):
                yield group
                group, room, texts = [], size, set()
            group.append((rec, lo, hi, vectors))
            room -= hi - lo
            texts |= mine
    if group:
        yield group


def _rows(embedding: Any, pieces: Sequence[Piece], texts: Sequence[str]) -> list[Any]:
    """The vectors of a run's chunks (``texts``, in piece order): rows given with a record
    as they are, the others embedded by ``embedding`` one piece (one source's block of
    chunks, `_slices`) per call. Not the whole run in one call: with the bundled int8 MiniLM a text's vector
    depends on the texts batched with it (dynamic quantisation per batch; up to 0.019
    apart), so a source's vectors would depend on what else the write held and differ
    from a parallel build's (`parallel` embeds each source's chunks apart). The
    store writes were the cost: 400 one-line sources took 4.3 s with one write per
    source, 1.7 s with one per run (``benchmarks/bench_adds.py``)."""
    rows: list[Any] = []
    at = 0
    for rec, lo, hi, vectors in pieces:
        at += hi - lo
        if vectors is None:
            rows.extend(embedding.embed_documents(list(texts[at - (hi - lo):at])))
            continue
        given = vectors[lo:hi]
        if len(given) != hi - lo:
            raise ValueError(f"source {rec.source_id}: got {len(given)} vectors for chunks {lo}..{hi - 1}")
        rows.extend(given)
    return rows


class _Ahead:
    """An iterator whose next item can be taken early (`fetch`); ``next()`` then
    returns that item. An error taking it early is raised by that ``next()``, so it
    surfaces where it did without the early take (after the current batch is written)."""

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = iter(items)
        self._next: Any = None
        self._held = False
        self._done = False
        self._error: Exception | None = None

    def fetch(self) -> None:
        """Take the next item now (once; nothing when it was taken or there is none)."""
        if not (self._held or self._done):
            try:
                self._next, self._held = next(self._items), True
            except StopIteration:
                self._done = True
            except Exception as exc:  # noqa: BLE001 - raised by __next__, in its place
                self._error, self._done = exc, True

    def __iter__(self) -> "_Ahead":
        return self

    def __next__(self) -> Any:
        self.fetch()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if not self._held:
            raise StopIteration
        item, self._next, self._held = self._next, None, False
        return item


def _batches(plans: Iterable[Plan], size: int) -> Iterator[list[Plan]]:
    batch: list[Plan] = []
    chunks = 0
    for plan in plans:
        batch.append(plan)
        chunks += plan[0].n_chunks
        if chunks >= size:
            yield batch
            batch, chunks = [], 0
    if batch:
        yield batch


def _remove(index: "EngineState", sids: Sequence[str]) -> int:
    heads = index.store.heads(list(dict.fromkeys(sids)))
    if not heads:
        return 0
    if getattr(index.vectors, "transactional", False):  # record and vectors go in one transaction
        index.store.remove(list(heads))
        return len(heads)
    index.store.set_state(list(heads), "deleting")
    _fence(index)
    index.vectors.delete([v for sid, h in heads.items()
                          for v in vector_ids(index.manifest, sid, h.content_hash, 0, h.id_span)])
    index.store.remove(list(heads))
    return len(heads)


def recover(index: "EngineState") -> tuple[int, int]:
    """Finish what a dead writer left: ``(completed, removed)`` sources (lock held)."""
    heads = index.store.unfinished()  # not every head: this runs before every write
    pending = sorted(s for s, h in heads.items() if h.state == "pending")
    deleting = sorted(s for s, h in heads.items() if h.state == "deleting")
    removed = _remove(index, deleting) if deleting else 0
    if pending:
        logger.warning("completing %d source(s) an interrupted write left unfinished", len(pending))
        _write(index, _rewrite_plans(index, pending), "Completing interrupted sources")
    return len(pending), removed


def write_documents(index: "EngineState", documents: Sequence[Any], *, prune: bool | str = False,
                    remove_origins: Iterable[str] | None = None, join_stored: bool = True) -> IndexReport:
    """Index documents (see `index_documents`): plan
    them here and write them with `write_planned` (the store embeds).
    ``join_stored``: see `dedupe_documents`."""
    index = as_engine(index)
    prune = _check_prune(prune)
    by_sid, report = dedupe_documents(documents, index, join_stored=join_stored)
    if not by_sid and not remove_origins and prune != "all":
        raise ValueError("no documents to add")

    planned_chunks = [0]

    def planned() -> Iterator[tuple[SourceRecord, None]]:
        # planned under the lock, all before the first write, so the progress bar has its total
        records = [plan_checked(doc, index.config, sid) for sid, doc in by_sid.items()]
        planned_chunks[0] = sum(rec.n_chunks for rec in records)
        for rec in records:
            yield rec, None

    return write_planned(index, planned(), prune=prune, remove_origins=remove_origins, report=report,
                         total_chunks=lambda: planned_chunks[0])


def dedupe_documents(documents: Sequence[Any], index: Any = None, *,
                     join_stored: bool = True) -> tuple[dict[str, Any], IndexReport]:
    """Documents by source id (`batch_source_ids`: several different documents
    of one source are parts of it, each kept; identical ones are written once) and a
    report whose ``ids`` list every document's id in order (its source id; for an offset
    chunk, joined with the others of its source into a `SourceSegment`
    by `join_offset_chunks`, its `member_id`); objects without a
    text ``page_content`` (a LangChain ``Document``, a `PlainDocument`) raise.

    ``index``: the engine written to; a document whose id is one of its source ids (the
    ids ``add_texts`` returns) is that source, so adding it replaces it; with
    ``join_stored`` the offset chunks are joined with those the index holds of their
    sources (`_stored_pieces`; ``report.superseded`` lists the stored segments met)."""
    report = IndexReport()
    for doc in documents:  # the add path's one check of each document, before anything is planned or written
        if not isinstance(getattr(doc, "page_content", None), str):
            raise TypeError(f"expected Document objects (LangChain Document or PlainDocument, with a text "
                            f"page_content), got {type(doc).__name__}")
        check_storable(doc)
    given = sorted({str(d.id) for d in documents if getattr(d, "id", None)})
    known = index.store.heads(given) if index is not None and given else {}
    joined, placement = join_offset_chunks(documents)
    if index is not None and join_stored:
        stored, report.superseded = _stored_pieces(index, [d for d in joined if isinstance(d, SourceSegment)])
        if stored:  # join again, with the stored chunks the new ones meet
            joined, placement = join_offset_chunks(list(documents) + stored)
            placement = placement[:len(documents)]
    sids = batch_source_ids(joined, known)
    report.ids = [sids[j] if number is None else
                  member_id(sids[j], joined[j].members[number]["start"], joined[j].members[number]["end"])
                  for j, number in placement]
    by_sid = dict(zip(sids, joined))
    return by_sid, report


def _stored_pieces(index: "EngineState", segments: Sequence[SourceSegment]) -> tuple[list[Any], list[str]]:
    """What the index holds of the sources of this write's segments (offset chunks added
    in earlier calls): ``(chunks, superseded)``. A stored segment of the same source that
    overlaps or touches a new one and agrees with it on the text they share gives its
    chunks back (``chunks``, joined with the new ones into one segment, so the pieces of
    one source added in several calls never overlap); one that disagrees is an older
    version of that text and is replaced. Both are listed in ``superseded`` (the write
    removes those that are not written again)."""
    from swrag_integrations.engine.ids import origin_key
    from swrag_integrations.stores.storage import PlainDocument

    if not segments:
        return [], []
    origins = {str(seg.metadata.get("source")) for seg in segments}
    heads = index.store.heads()
    candidates = sorted(sid for sid, h in heads.items() if h.origin in origins and h.state == "complete")
    records = index.store.get_many(candidates) if candidates else {}
    new_by_key: dict[str, list[SourceSegment]] = {}
    for seg in segments:
        new_by_key.setdefault(origin_key(seg.metadata), []).append(seg)
    chunks: list[Any] = []
    superseded: list[str] = []
    for sid, rec in sorted(records.items()):
        if not rec.members:
            continue
        lo, hi = rec.base, rec.base + len(rec.text)
        met = [seg for seg in new_by_key.get(origin_key(rec.metadata), ())
               if seg.base <= hi and lo <= seg.base + len(seg.page_content)]
        if not met:
            continue
        superseded.append(sid)
        agrees = all(rec.span(a, b) == seg.page_content[a - seg.base:b - seg.base]
                     for seg in met for a, b in [(max(lo, seg.base), min(hi, seg.base + len(seg.page_content)))])
        if agrees:
            chunks.extend(PlainDocument(rec.span(m["start"], m["end"]), dict(m["metadata"])) for m in rec.members)
    return chunks, superseded


def _check_prune(prune: bool | str) -> str | bool:
    if prune is True:
        prune = "origins"
    if prune not in (False, "origins", "all"):
        raise ValueError(f"prune must be False, True/'origins' or 'all', got {prune!r}")
    return prune


def write_planned(index: "EngineState", planned: Iterable[tuple[SourceRecord, Any]], *,
                  prune: bool | str = False,
                  remove_origins: Iterable[str] | Callable[[], Iterable[str]] | None = None,
                  report: IndexReport | None = None, total_chunks: int | Callable[[], int] | None = None,
                  lookahead: int = 0,
                  desc: str = "Embedding chunks") -> IndexReport:
    """Write records planned elsewhere (`plan_source`), with their vectors.

    The one write path of the package, with the guarantees of the module docstring:
    under the writer lock it first finishes what a dead writer left, then takes each
    ``(record, vectors)`` of ``planned`` as it comes (a stream: records planned and
    embedded in other processes are written as they arrive) and compares its content
    hash with the source store's head: an unchanged source is not written (its vectors
    are checked afterwards and written again if lost), a new or changed one is
    written pending -> vectors (older version's deleted first) -> complete, a record
    of an empty document removes the previous version of its source. Then the
    sources the batch prunes are removed and BM25 catches up and is saved.

    Args:
        planned: ``(record, vectors)`` pairs, each source once (a repeated source id
            raises ``ValueError``). ``vectors``: ``None`` (the store embeds the chunk
            texts itself), rows indexable as ``vectors[lo:hi]`` (a ``(n_chunks, dim)``
            array: written as they are through the store's
            `PrecomputedEmbeddings`), or a callable ``record ->
            rows`` called only when the record has to be written (so unchanged
            sources are never embedded). A store without ``PrecomputedEmbeddings``
            embeds itself and the given vectors are not used (said in ``notes``).
        prune, remove_origins: as in `index_documents`;
            ``remove_origins`` may be a callable, called after ``planned`` is consumed
            (e.g. the files a streaming load skipped).
        report: a report to fill (e.g. with ``ids`` already set).
        total_chunks: for the progress bar (a callable: the total known so far); the
            chunks of unchanged sources, which are not written, are taken off it.
        lookahead: decide (and so start computing the vectors of) records up to this
            many chunks ahead of the one being written.

    Returns:
        The `IndexReport` (the same as `write_documents` gives).
    """
    index = as_engine(index)
    prune = _check_prune(prune)
    report = report if report is not None else IndexReport()
    with index.writing():
        report.repaired, report.removed = recover(index)
        stream = _Decisions(index, report, usable_vectors=index.vectors.precomputed is not None)
        def to_write() -> int:
            known = total_chunks() if callable(total_chunks) else total_chunks
            return max(0, (known or 0) - stream.skipped_chunks)

        report.chunks += _write(index, stream.plans(planned, lookahead), desc,
                                to_write if total_chunks is not None else None, lookahead=lookahead)
        lost = missing_vectors(index, stream.unchanged)
        if lost:
            report.chunks += _write(index, _rewrite_plans(index, lost), "Writing lost vectors")
            report.repaired += len(lost)
            report.notes.append(f"{len(lost)} unchanged source(s) had lost vectors: written again")
        report.unchanged = len(stream.unchanged) - len(lost)
        origins = remove_origins() if callable(remove_origins) else remove_origins
        removals = stream.removals + _prune_targets(index, stream.keep, stream.origins, prune,
                                                    {str(o) for o in (origins or ())})
        removals += [sid for sid in report.superseded if sid not in stream.keep]
        report.removed += _remove(index, removals)
        index.keyword.refresh()
        index.keyword.save()
    if report.skipped_empty:
        warnings.warn(f"skipped {report.skipped_empty} empty document(s) (nothing indexed under their ids)",
                      stacklevel=3)
    return report


class _Decisions:
    """Turns a stream of planned records into write plans (lock held): unchanged
    sources are set aside, empty documents become removals, the rest is written."""

    def __init__(self, index: "EngineState", report: IndexReport, *, usable_vectors: bool) -> None:
        self.index = index
        self.report = report
        self.usable_vectors = usable_vectors
        self.unchanged: list[str] = []
        self.skipped_chunks = 0  # chunks of planned records that are not written (unchanged or empty)
        self.removals: list[str] = []
        self.keep: set[str] = set()
        self.origins: set[str] = set()
        self._embedding_recorded = False
        self._noted = False

    def plans(self, planned: Iterable[tuple[SourceRecord, Any]], lookahead: int) -> Iterator[Plan]:
        ahead: deque[Plan] = deque()
        chunks = 0
        for plan in self._decide(planned):
            ahead.append(plan)
            chunks += plan[0].n_chunks
            while ahead and chunks > lookahead:
                first = ahead.popleft()
                chunks -= first[0].n_chunks
                yield first
        yield from ahead

    def _decide(self, planned: Iterable[tuple[SourceRecord, Any]]) -> Iterator[Plan]:
        group: list[tuple[SourceRecord, Any]] = []
        chunks = 0
        for item in planned:
            group.append(item)
            chunks += item[0].n_chunks
            if len(group) >= 64 or chunks >= self.index.batch_size:
                yield from self._group(group)
                group, chunks = [], 0
        if group:
            yield from self._group(group)

    def _group(self, group: list[tuple[SourceRecord, Any]]) -> Iterator[Plan]:
        index, report = self.index, self.report
        heads = index.store.heads([rec.source_id for rec, _ in group])
        same_text = [rec.source_id for rec, _ in group if isinstance(rec, SourceRecord) and rec.source_id in heads
                     and heads[rec.source_id].content_hash == rec.content_hash]
        stored = index.store.get_many(same_text) if same_text else {}  # their metadata may have changed
        for rec, vectors in group:
            if not isinstance(rec, SourceRecord):
                raise TypeError(f"write_planned takes (SourceRecord, vectors) pairs, got {type(rec).__name__}")
            sid = rec.source_id
            if sid in self.keep:
                raise ValueError(f"source {sid} appears twice in one write; pass each source once (its last version)")
            self.keep.add(sid)
            if rec.origin is not None:
                self.origins.add(rec.origin)
            old = heads.get(sid)
            if not rec.text.strip():
                self.skipped_chunks += rec.n_chunks
                if old is not None:
                    self.removals.append(sid)  # the document became empty: forget its old text
                else:
                    report.skipped_empty += 1
                continue
            if not self._embedding_recorded:
                index.record_embedding()
                self._embedding_recorded = True
            if old is not None and old.state == "complete" and old.content_hash == rec.content_hash:
                change = metadata_change(stored.get(sid), rec)
                if change != "index":  # chunks and vectors stay; a new id/extra metadata is one record write
                    if change == "doc":
                        rec.state, rec.id_span = "complete", old.id_span
                        index.store.put([rec])
                    self.unchanged.append(sid)
                    self.skipped_chunks += rec.n_chunks
                    continue
            rec.state = "pending"
            rec.id_span = max(rec.n_chunks, old.id_span if old is not None else 0)
            if vectors is not None and not self.usable_vectors:
                vectors = None
                if not self._noted:
                    self._noted = True
                    report.notes.append(f"the vector store ({index.vectors.kind}) has no PrecomputedEmbeddings as its "
                                        "embedding: it embedded the chunks itself")
            elif callable(vectors):
                vectors = vectors(rec)
            report.added += old is None
            report.replaced += old is not None
            yield rec, old is not None, vectors


def _prune_targets(index: "EngineState", keep: set[str], batch_origins: set[str], prune: bool | str,
                   remove_origins: set[str]) -> list[str]:
    """Sources not in this batch that the batch says are gone: the other rows/pages of
    its files (``prune="origins"``), every other source (``"all"``), or those of the
    ``remove_origins`` files."""
    if not prune and not remove_origins:
        return []
    heads = index.store.heads()
    if prune == "all":
        return sorted(set(heads) - keep)
    origins = set(remove_origins)
    if prune:
        origins |= batch_origins
    return sorted(sid for sid, head in heads.items() if sid not in keep and head.origin in origins)


def remove_sources(index: "EngineState", sids: Sequence[str]) -> int:
    """Remove sources by source id (unknown ids are ignored); returns how many went."""
    index = as_engine(index)
    with index.writing():
        recover(index)
        n = _remove(index, list(sids))
        index.keyword.refresh()
        index.keyword.save()
    return n


def repair(index: "EngineState", *, deep: bool = False) -> IndexReport:
    """Make every derived part agree with the source store again (lock held): whatever
    `index_status` reports, ``deep`` or not (``deep`` also checks every
    source's vectors when nothing was reported, and lists every vector id for ones no
    record references). Vectors no record references are deleted first."""
    from swrag_integrations.engine.health import probe_vectors, stale_vectors

    index = as_engine(index)
    report = IndexReport()
    with index.writing():
        report.repaired, report.removed = recover(index)
        garbage = garbage_vectors(index, force=deep)
        if garbage:
            _fence(index)
            index.vectors.delete(garbage)
            report.notes.append(f"{len(garbage)} vector(s) no source referenced: deleted")
        restore = getattr(index.vectors, "restore_indexes", None)  # PostgreSQL: after an interrupted bulk load
        built = restore() if restore is not None else []
        if built:
            report.notes.append(f"search index(es) {', '.join(built)} were missing: built")
        complete = sorted(s for s, h in index.store.heads().items() if h.state == "complete")
        if complete:
            index.record_embedding()
        index.probed = False
        problem = probe_vectors(index) if complete else None
        if problem:
            report.notes.append(f"vector search was damaged ({problem}): rebuilt")
            _rebuild_vectors(index, complete)
            report.repaired += len(complete)
        else:
            # what status reports (sampled vectors of another version) forces the full check
            lost = missing_vectors(index, complete, force=deep or stale_vectors(index) is not None)
            if lost:
                _write(index, _rewrite_plans(index, lost), "Writing missing vectors")
                report.repaired += len(lost)
                report.notes.append(f"{len(lost)} source(s) had missing vectors: written again")
        index.keyword.rebuild()
        index.keyword.save()
        index.probed = False
    return report


def _rebuild_vectors(index: "EngineState", sids: Sequence[str]) -> None:
    """A vector collection that no longer finds its own vectors: start it afresh.

    The default Chroma store keeps every vector in its SQLite log even when its HNSW
    files are damaged, so the storage copies them into a new collection (no
    re-embedding, `rebuild`); any other store gets every
    complete source's vectors deleted and written again.
    """
    try:
        if index.vectors.rebuild(fence=lambda: _fence(index)):
            return
    except Exception as exc:  # noqa: BLE001 - fall back to re-embedding
        from swrag_integrations.stores.sources import LeaseLostError

        if isinstance(exc, LeaseLostError):
            raise
        logger.warning("copying the stored vectors failed (%s); embedding every chunk again", exc)
    _write(index, _rewrite_plans(index, sids), "Rebuilding vectors")
