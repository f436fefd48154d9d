"""Health of an index: every derived part checked against the source store.

`probe_vectors` is the self-retrieval probe: a few complete chunks, embedded
with the store's own embedding, must find themselves (or a chunk with the same text)
among their nearest neighbours. It catches a vector collection that lost its search
structure while still counting its vectors (e.g. Chroma with its HNSW files deleted
answers every query with nothing). `garbage_vectors` finds vectors no source
record references (a late write of a writer that lost its lease lands its vectors
under ids of its own version, `vector_ids`). `index_status` gathers counts, states and
probes into an `IndexStatus` for ``swrag status``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from swrag_integrations.engine.ids import doc_vector_ids, vector_ids

if TYPE_CHECKING:
    from swrag_integrations.engine.protocols import EngineState

__all__ = ["IndexStatus", "index_status", "probe_vectors", "stale_vectors", "garbage_vectors"]

PROBES = 8


def _sample(index: "EngineState", n: int) -> list[tuple[str, int]]:
    """Up to ``n`` chunks spread over the complete sources (deterministic)."""
    heads = sorted((sid, h) for sid, h in index.store.heads().items() if h.state == "complete" and h.n_chunks)
    if not heads:
        return []
    step = max(1, len(heads) // n)
    return [(sid, (j * 7) % h.n_chunks) for j, (sid, h) in enumerate(heads[::step][:n])]


def probe_vectors(index: "EngineState", n: int = PROBES) -> str | None:
    """``None`` when sampled chunks find themselves by vector search, else the problem."""
    sample = _sample(index, n)
    if not sample:
        return None
    held = index.vectors.count()
    if held == 0:
        return f"the vector store ({index.vectors.kind}) is empty but the index has complete sources"
    records = index.store.get_many(sorted({sid for sid, _ in sample}))
    texts = [records[sid].chunk_text(i) for sid, i in sample]
    vectors = index.vectors.embed_documents(texts)
    found = 0
    for (sid, i), text, vec in zip(sample, texts, vectors):
        docs = index.vectors.search(vec, 5)
        [want] = vector_ids(index.manifest, sid, records[sid].content_hash, i, i + 1)
        if any(want in doc_vector_ids(d) or d.page_content == text for d in docs):
            found += 1
    if found * 2 <= len(sample):  # allow near-duplicates crowding some out; not most
        return (f"only {found} of {len(sample)} sampled chunks find themselves in the vector store "
                f"({index.vectors.kind}): its search structure is damaged or holds other vectors")
    return None


def stale_vectors(index: "EngineState", n: int = PROBES) -> str | None:
    """``None`` when sampled chunks' vectors carry their source's current content hash,
    else the problem (vectors of another version written under the chunk ids of the
    current one, as a writer that kept writing after losing its lease did)."""
    if not index.vectors.can_get:
        return None
    sample = _sample(index, n)
    if not sample:
        return None
    heads = index.store.heads(sorted({sid for sid, _ in sample}))
    ids = {(sid, i): vector_ids(index.manifest, sid, heads[sid].content_hash, i, i + 1)[0]
           for sid, i in sample if sid in heads}
    found = index.vectors.present(list(ids.values()))
    stale = sorted({sid for (sid, _), vid in ids.items()
                    if (meta := found.get(vid)) is not None and meta.get("content_hash") != heads[sid].content_hash})
    if stale:
        return (f"{len(stale)} sampled source(s) have vectors of another version of their text (e.g. {stale[0]}); "
                f"`swrag repair --deep` writes them again")
    return None


def garbage_vectors(index: "EngineState", *, force: bool = False) -> list[str]:
    """The vector ids the store holds that no source record references (sorted): the
    vectors of a version a writer wrote after losing its lease, or of an old version an
    interrupted write left. Looked for only when the store holds more vectors than the
    records reference (``force``: always) and can list its ids (``held_ids``); else
    ``[]``. A pending or deleting record references every id of its ``id_span``."""
    held_ids = getattr(index.vectors, "held_ids", None)
    if held_ids is None:
        return []
    heads = index.store.heads()
    spans = {sid: (h.n_chunks if h.state == "complete" else max(h.n_chunks, h.id_span)) for sid, h in heads.items()}
    if not force:
        held = index.vectors.count()
        if held is None or held <= sum(spans.values()):
            return []
    listed = held_ids()
    if listed is None:
        return []
    referenced = {v for sid, h in heads.items() for v in vector_ids(index.manifest, sid, h.content_hash, 0, spans[sid])}
    return sorted(set(listed) - referenced)


@dataclass
class IndexStatus:
    """What ``swrag status`` prints; ``healthy`` is False when anything needs a repair.

    Attributes:
        location: The index's folder, server or store.
        index_id: The index's id.
        config: The index's settings (`IndexConfig` as a dict).
        vector_store: The kind of vector store.
        sources: Sources the index records.
        complete: Sources completely written.
        incomplete: The other sources (``source_id``, ``state``, ``origin``): a repair finishes
            or removes them.
        chunks: Small chunks of the complete sources.
        vectors: Vectors the store holds (``None`` if it cannot count them).
        vector_problems: Missing, unreferenced or stale vectors.
        keyword_documents: Documents of the keyword index.
        keyword_generation: The write generation the keyword index reflects.
        store_generation: The source store's write generation.
        keyword_problems: Where the keyword index disagrees with the sources.
        store_problems: Problems of the source store itself.
        embedding: The embedding the index was built with (from its manifest).
        vectors_probed: Whether stored vectors were compared with fresh embeddings.
    """

    location: str
    index_id: str
    config: dict[str, Any]
    vector_store: str
    sources: int = 0
    complete: int = 0
    incomplete: list[dict[str, Any]] = field(default_factory=list)
    chunks: int = 0
    vectors: int | None = None
    vector_problems: list[str] = field(default_factory=list)
    keyword_documents: int = 0
    keyword_generation: int = 0
    store_generation: int = 0
    keyword_problems: list[str] = field(default_factory=list)
    store_problems: list[str] = field(default_factory=list)
    embedding: dict[str, Any] = field(default_factory=dict)
    vectors_probed: bool = True

    @property
    def healthy(self) -> bool:
        return not (self.incomplete or self.vector_problems or self.keyword_problems or self.store_problems)

    def to_dict(self) -> dict[str, Any]:
        """The status as a JSON-ready dict (``healthy`` included)."""
        out = asdict(self)
        out["healthy"] = self.healthy
        return out

    def lines(self) -> list[str]:
        """The lines ``swrag status`` prints."""
        ok = "ok" if self.healthy else "NEEDS REPAIR (run `swrag repair`)"
        out = [f"index {self.location} ({self.index_id[:8]}): {ok}",
               f"  sources: {self.sources} ({self.complete} complete), small chunks: {self.chunks}",
               f"  vectors: {'unknown' if self.vectors is None else self.vectors} in {self.vector_store}",
               f"  keyword index: {self.keyword_documents} chunks at generation {self.keyword_generation} "
               f"(source store at {self.store_generation})",
               f"  embedding: {self.embedding.get('name')} ({self.embedding.get('dim')} dimensions)"]
        if not self.vectors_probed:
            out.append("  vectors not searched (the embedding model was not loaded; --deep checks them)")
        for item in self.incomplete:
            out.append(f"  incomplete: {item['source_id']} ({item['state']}) {item.get('origin') or ''}".rstrip())
        for problem in self.vector_problems + self.keyword_problems + self.store_problems:
            out.append(f"  problem: {problem}")
        return out


def index_status(index: "EngineState", *, deep: bool = False, probe: bool = True) -> IndexStatus:
    """Counts, states and checks of every part of ``index`` (reads only).

    ``probe=False`` leaves out every check that needs the embedding model (its dimension
    against the index's, sampled chunks finding themselves by vector search, and with
    ``deep`` every vector id): the counts, states, keyword index and source store are
    still checked, without loading the model.
    """
    from swrag_integrations.engine.protocols import as_engine

    index = as_engine(index)
    heads = index.store.heads()
    complete = {sid: h for sid, h in heads.items() if h.state == "complete"}
    status = IndexStatus(
        location=str(index.persist_directory or index.server or index.store), index_id=index.index_id,
        config=json.loads(index.config.to_json()), vector_store=index.vectors.kind,
        sources=len(heads), complete=len(complete),
        incomplete=[{"source_id": sid, "state": h.state, "origin": h.origin}
                    for sid, h in sorted(heads.items()) if h.state != "complete"],
        chunks=sum(h.n_chunks for h in complete.values()), vectors=index.vectors.count(),
        embedding=dict(index.manifest.get("embedding") or {}), vectors_probed=probe,
    )
    if status.vectors is not None and status.vectors != status.chunks + sum(
            h.n_chunks for h in heads.values() if h.state != "complete"):
        if status.vectors < status.chunks:
            status.vector_problems.append(f"{status.chunks - status.vectors} vector(s) missing "
                                          f"({status.vectors} held for {status.chunks} chunks)")
    garbage = garbage_vectors(index, force=deep)
    if garbage:
        status.vector_problems.append(f"{len(garbage)} vector(s) no source references (written by a writer that lost "
                                      "its lease, or left by an interrupted write); `swrag repair` deletes them")
    if not deep:  # stored vectors' content hashes: no embedding model needed
        problem = stale_vectors(index)
        if problem:
            status.vector_problems.append(problem)
    if probe:
        try:
            index.check_embedding()
        except ValueError as exc:
            status.vector_problems.append(str(exc))
        else:
            problem = probe_vectors(index)
            if problem:
                status.vector_problems.append(problem)
            if deep:
                lost = missing_vectors(index, sorted(complete), force=True)
                if lost:
                    status.vector_problems.append(f"{len(lost)} source(s) lack some of their vectors")
    status.store_generation = index.store.generation()
    index.keyword.refresh()
    status.keyword_generation = index.keyword.generation
    status.keyword_documents = len(index.keyword)
    if index.keyword.rebuilt:
        status.keyword_problems.append("the stored keyword index was missing, damaged or out of date "
                                       "(rebuilt in memory; `swrag repair` saves it)")
    if len(index.keyword) != status.chunks:
        status.keyword_problems.append(f"keyword index holds {len(index.keyword)} chunks, sources {status.chunks}")
    if deep:
        status.store_problems.extend(index.store.check())
    return status


def missing_vectors(index: "EngineState", sids: Sequence[str], *, force: bool = False) -> list[str]:
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
        ids = vector_ids(index.manifest, sid, head.content_hash, 0, head.n_chunks)
        found = index.vectors.present(ids)
        if len(found) < len(ids) or any(m.get("content_hash") != head.content_hash for m in found.values()):
            missing.append(sid)
    return missing
