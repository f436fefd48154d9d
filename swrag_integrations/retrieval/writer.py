"""Writing an index: add, replace, remove, prune and repair, under the writer lock.

The order of writes makes every crash recoverable and nothing half-written servable:

1. the source's record goes to the source store as ``pending`` (text, offsets; its
   ``id_span`` remembers every chunk id whose vector may exist);
2. the vectors of its previous version are deleted and the new ones added;
3. it is marked ``complete`` (``id_span`` shrinks to its chunk count);
4. BM25 replays the store's change log and its snapshot is saved.

Removal marks the record ``deleting``, deletes its vectors, then removes the record.
Any later write first finishes what a dead writer left ``pending`` or ``deleting``
(:func:`recover`) from the stored record alone.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from .ids import chunk_id, source_id_for, vector_id
from .records import SourceRecord, plan_source

if TYPE_CHECKING:
    from .index import SlidingWindowIndex

__all__ = ["IndexReport", "write_documents", "remove_sources", "recover", "repair", "chunk_documents"]

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
    """The vector-store documents of chunks ``start..stop`` of a record (exact chunk text)."""
    from langchain_core.documents import Document

    out = []
    a = rec.arrays
    for i in range(start, rec.n_chunks if stop is None else stop):
        meta = dict(rec.metadata)
        meta.update(source_id=rec.source_id, chunk_index=i, start_index=int(a[0, i]), end_index=int(a[1, i]),
                    content_hash=rec.content_hash, chunk_id=chunk_id(rec.source_id, i), swrag_index=index_id)
        out.append(Document(page_content=rec.chunk_text(i), metadata=meta))
    return out


def _vector_ids(sid: str, upto: int) -> list[str]:
    return [vector_id(chunk_id(sid, i)) for i in range(upto)]


def _renew(index: "SlidingWindowIndex") -> None:
    renew = getattr(index.store, "renew_lock", None)
    if renew is not None:
        renew()


def _write(index: "SlidingWindowIndex", plans: Sequence[tuple[SourceRecord, bool]], desc: str) -> None:
    """Steps 1-3 for each planned record, in batches of about ``batch_size`` chunks."""
    from tqdm.auto import tqdm

    if not plans:
        return
    total = sum(rec.n_chunks for rec, _ in plans)
    with tqdm(total=total, desc=desc, unit="chunk", disable=not index.show_progress) as bar:
        for batch in _batches(plans, index.batch_size):
            for rec, _ in batch:
                rec.state = "pending"
            index.store.put([rec for rec, _ in batch])
            stale = [v for rec, had in batch if had for v in _vector_ids(rec.source_id, rec.id_span)]
            index.vectors.delete(stale)
            for rec, _ in batch:
                for lo in range(0, rec.n_chunks, index.batch_size):
                    hi = min(rec.n_chunks, lo + index.batch_size)
                    index.vectors.add(chunk_documents(rec, index.index_id, lo, hi),
                                      _vector_ids(rec.source_id, hi)[lo:])
                    bar.update(hi - lo)
                    _renew(index)
            index.store.set_state([rec.source_id for rec, _ in batch], "complete", id_span=-1)


def _batches(plans: Sequence[tuple[SourceRecord, bool]], size: int) -> Iterator[list[tuple[SourceRecord, bool]]]:
    batch: list[tuple[SourceRecord, bool]] = []
    chunks = 0
    for plan in plans:
        batch.append(plan)
        chunks += plan[0].n_chunks
        if chunks >= size:
            yield batch
            batch, chunks = [], 0
    if batch:
        yield batch


def _remove(index: "SlidingWindowIndex", sids: Sequence[str]) -> int:
    heads = index.store.heads(list(dict.fromkeys(sids)))
    if not heads:
        return 0
    index.store.set_state(list(heads), "deleting")
    index.vectors.delete([v for sid, h in heads.items() for v in _vector_ids(sid, h.id_span)])
    index.store.remove(list(heads))
    return len(heads)


def recover(index: "SlidingWindowIndex") -> tuple[int, int]:
    """Finish what a dead writer left: ``(completed, removed)`` sources (lock held)."""
    heads = index.store.heads()
    pending = sorted(s for s, h in heads.items() if h.state == "pending")
    deleting = sorted(s for s, h in heads.items() if h.state == "deleting")
    removed = _remove(index, deleting) if deleting else 0
    if pending:
        logger.warning("completing %d source(s) an interrupted write left unfinished", len(pending))
        records = index.store.get_many(pending)
        _write(index, [(records[s], True) for s in pending if s in records], "Completing interrupted sources")
    return len(pending), removed


def _missing_vectors(index: "SlidingWindowIndex", sids: Sequence[str], *, force: bool = False) -> list[str]:
    """Complete sources among ``sids`` whose vectors are not all in the vector store."""
    if not sids or not index.vectors.can_get:
        return []
    if not force:
        held = index.vectors.count()
        heads = index.store.heads()
        expected = sum(h.n_chunks for h in heads.values() if h.state == "complete")
        if held is not None and held == expected:
            return []
    heads = index.store.heads(list(sids))
    missing = []
    for sid in sids:
        head = heads.get(sid)
        if head is None or head.state != "complete":
            continue
        ids = _vector_ids(sid, head.n_chunks)
        found = index.vectors.present(ids)
        if len(found) < len(ids) or any(m.get("content_hash") != head.content_hash for m in found.values()):
            missing.append(sid)
    return missing


def write_documents(index: "SlidingWindowIndex", documents: Sequence[Any], *, prune: bool | str = False,
                    remove_origins: Iterable[str] | None = None) -> IndexReport:
    """Index documents (see :meth:`~.index.SlidingWindowIndex.index_documents`)."""
    from langchain_core.documents import Document

    if prune is True:
        prune = "origins"
    if prune not in (False, "origins", "all"):
        raise ValueError(f"prune must be False, True/'origins' or 'all', got {prune!r}")
    for doc in documents:
        if not isinstance(doc, Document):
            raise TypeError(f"expected LangChain Document objects, got {type(doc).__name__}")
    remove_origins = {str(o) for o in (remove_origins or ())}
    if not documents and not remove_origins and prune != "all":
        raise ValueError("no documents to add")
    report = IndexReport()
    by_sid: dict[str, Any] = {}
    for doc in documents:  # the same source twice in one call: the last one wins
        sid = source_id_for(doc)
        by_sid[sid] = doc
        report.ids.append(sid)
    with index._writing():
        report.repaired, report.removed = recover(index)
        if any(doc.page_content.strip() for doc in by_sid.values()):
            index._record_embedding()
        heads = index.store.heads(list(by_sid))
        plans: list[tuple[SourceRecord, bool]] = []
        unchanged: list[str] = []
        removals: list[str] = []
        for sid, doc in by_sid.items():
            old = heads.get(sid)
            if not doc.page_content.strip():
                if old is not None:
                    removals.append(sid)  # the document became empty: forget its old text
                else:
                    report.skipped_empty += 1
                continue
            rec = plan_source(doc, index.config)
            if old is not None and old.state == "complete" and old.content_hash == rec.content_hash:
                unchanged.append(sid)
                continue
            rec.id_span = max(rec.n_chunks, old.id_span if old is not None else 0)
            plans.append((rec, old is not None))
            report.added += old is None
            report.replaced += old is not None
        lost = _missing_vectors(index, unchanged)
        if lost:
            records = index.store.get_many(lost)
            plans.extend((records[s], True) for s in lost if s in records)
            report.repaired += len(lost)
            report.notes.append(f"{len(lost)} unchanged source(s) had lost vectors: written again")
        report.unchanged = len(unchanged) - len(lost)
        removals.extend(_prune_targets(index, by_sid, prune, remove_origins))
        report.chunks = sum(rec.n_chunks for rec, _ in plans)
        _write(index, plans, "Embedding chunks")
        report.removed += _remove(index, removals)
        index.keyword.refresh()
        index.keyword.save()
    if report.skipped_empty:
        warnings.warn(f"skipped {report.skipped_empty} empty document(s) (nothing indexed under their ids)",
                      stacklevel=3)
    return report


def _prune_targets(index: "SlidingWindowIndex", by_sid: dict[str, Any], prune: bool | str,
                   remove_origins: set[str]) -> list[str]:
    """Sources not in this batch that the batch says are gone: the other rows/pages of
    its files (``prune="origins"``), every other source (``"all"``), or those of the
    ``remove_origins`` files."""
    if not prune and not remove_origins:
        return []
    heads = index.store.heads()
    keep = set(by_sid)
    if prune == "all":
        return sorted(set(heads) - keep)
    origins = set(remove_origins)
    if prune:
        origins |= {str(doc.metadata.get("source")) for doc in by_sid.values()
                    if doc.metadata.get("source") not in (None, "")}
    return sorted(sid for sid, head in heads.items() if sid not in keep and head.origin in origins)


def remove_sources(index: "SlidingWindowIndex", sids: Sequence[str]) -> int:
    """Remove sources by source id (unknown ids are ignored); returns how many went."""
    with index._writing():
        recover(index)
        n = _remove(index, list(sids))
        index.keyword.refresh()
        index.keyword.save()
    return n


def repair(index: "SlidingWindowIndex", *, deep: bool = False) -> IndexReport:
    """Make every derived part agree with the source store again (lock held)."""
    from .health import probe_vectors

    report = IndexReport()
    with index._writing():
        report.repaired, report.removed = recover(index)
        complete = sorted(s for s, h in index.store.heads().items() if h.state == "complete")
        if complete:
            index._record_embedding()
        index._probed = False
        problem = probe_vectors(index) if complete else None
        if problem:
            report.notes.append(f"vector search was damaged ({problem}): rebuilt")
            _rebuild_vectors(index, complete)
            report.repaired += len(complete)
        else:
            lost = _missing_vectors(index, complete, force=deep)
            if lost:
                records = index.store.get_many(lost)
                _write(index, [(records[s], True) for s in lost if s in records], "Writing missing vectors")
                report.repaired += len(lost)
                report.notes.append(f"{len(lost)} source(s) had missing vectors: written again")
        index.keyword.rebuild()
        index.keyword.save()
        index._probed = False
    return report


def _rebuild_vectors(index: "SlidingWindowIndex", sids: Sequence[str]) -> None:
    """A vector collection that no longer finds its own vectors: start it afresh.

    The default Chroma store keeps every vector in its SQLite log even when its HNSW
    files are damaged, so they are copied into a new collection (no re-embedding);
    any other store gets every complete source's vectors deleted and written again.
    """
    collection = getattr(index.vectorstore, "_collection", None)
    if index._client is not None and collection is not None:
        try:
            _copy_chroma(index, collection)
            return
        except Exception as exc:  # noqa: BLE001 - fall back to re-embedding
            logger.warning("copying the stored vectors failed (%s); embedding every chunk again", exc)
    records = index.store.get_many(list(sids))
    _write(index, [(records[s], True) for s in sids if s in records], "Rebuilding vectors")


def _copy_chroma(index: "SlidingWindowIndex", collection: Any) -> None:
    from .vectors import VectorBackend, default_chroma

    rows: dict[str, list] = {"ids": [], "embeddings": [], "documents": [], "metadatas": []}
    offset = 0
    while True:
        got = collection.get(include=["embeddings", "documents", "metadatas"], limit=1000, offset=offset)
        if not got["ids"]:
            break
        rows["ids"].extend(got["ids"])
        rows["embeddings"].extend(got["embeddings"])
        rows["documents"].extend(got["documents"])
        rows["metadatas"].extend(got["metadatas"])
        offset += len(got["ids"])
    index._client.delete_collection(index.collection_name)
    store = default_chroma(index._client, index.collection_name, index.vectorstore.embeddings)
    fresh = store._collection
    for b in range(0, len(rows["ids"]), 1000):
        fresh.upsert(ids=rows["ids"][b:b + 1000], embeddings=rows["embeddings"][b:b + 1000],
                     documents=rows["documents"][b:b + 1000], metadatas=rows["metadatas"][b:b + 1000])
    index.vectorstore = store
    index.vectors = VectorBackend(store, index.vectors.embedding)
