"""Upgrade a local index written by swrag-integrations 0.1 (format 2) in place.

Format 2 kept chunk vectors in Chroma *without* their texts (ids ``<sid>:s:<i>``), the
sources in a SQLite table with a ``complete`` flag, and BM25 as files in
``<dir>/bm25/<collection>``. Format 3 stores each chunk's text with its vector (so the
collection is a normal LangChain store), UUID vector ids, source states and a change
log, and keeps BM25 in the source store. The vectors are copied, not re-embedded.

Crash-safe: the new collection is written first (it is derived and rewritten on a
rerun), then the source tables are converted in one SQLite transaction, and only then
is the old collection dropped; an interrupted upgrade is redone on the next open.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import uuid
import warnings
from pathlib import Path
from typing import Any

from swrag_integrations.engine.ids import VECTOR_ID_SCHEME, chunk_id, vector_ids
from swrag_integrations.engine.records import SourceRecord

__all__ = ["migrate_if_needed"]

logger = logging.getLogger(__name__)


def _columns(con: sqlite3.Connection) -> set[str]:
    return {row[1] for row in con.execute("PRAGMA table_info(sources)")}


def _collection(client: Any, name: str) -> Any:
    try:
        return client.get_collection(name, embedding_function=None)
    except Exception:  # noqa: BLE001 - chromadb raises NotFoundError / ValueError
        return None


def migrate_if_needed(root: Path, name: str, client: Any) -> bool:
    """Upgrade ``root`` (collection ``name``) from format 2; True when it did."""
    path = root / "sources" / f"{name}.sqlite3"
    old_name = f"{name}-v2"
    if not path.is_file() or client is None:
        return False
    try:
        con = sqlite3.connect(str(path))
        try:
            columns = _columns(con)
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return False  # the store reports its own damage
    if "complete" not in columns or "state" in columns:
        leftover = _collection(client, old_name)
        if leftover is not None and (leftover.metadata or {}).get("swrag_format") == 2:
            client.delete_collection(old_name)  # an upgrade that stopped after its last transaction
        return False
    from filelock import FileLock

    with FileLock(str(path) + ".lock", timeout=600):
        con = sqlite3.connect(str(path), isolation_level=None)
        try:
            if "complete" not in _columns(con):
                return False  # another process upgraded it meanwhile
            _upgrade(root, name, old_name, client, con)
        finally:
            con.close()
    return True


def _upgrade(root: Path, name: str, old_name: str, client: Any, con: sqlite3.Connection) -> None:
    old = _collection(client, name)
    if old is not None and (old.metadata or {}).get("swrag_format") == 2:
        old.modify(name=old_name)
    old = _collection(client, old_name)
    if old is None:
        raise ValueError(f"cannot upgrade the index in {root}: its format-2 vector collection {name!r} is missing; "
                         "move the folder away and index the files again")
    meta = old.metadata or {}
    config_json = meta["swrag_config"]
    index_id = uuid.uuid4().hex
    rows = con.execute("SELECT source_id, content_hash, complete, n_chunks, metadata, arrays, text FROM sources").fetchall()
    records = {sid: SourceRecord(sid, h, text, SourceRecord.arrays_from_bytes(raw, n), json.loads(m),
                                 "complete" if done else "pending", n)
               for sid, h, done, n, m, raw, text in rows}
    if _collection(client, name) is not None:
        client.delete_collection(name)  # a partial new collection from an interrupted upgrade
    new = client.create_collection(name, configuration={"hnsw": {"space": "cosine"}},
                                   metadata={"swrag_role": "vectors"}, embedding_function=None)
    manifest = {"format": 3, "index_id": index_id, "config": config_json,
                "embedding": {"name": "migrated from format 2", "dim": None},
                "vectors": {"kind": "Chroma", "collection": name}, "vector_ids": VECTOR_ID_SCHEME}
    dim, copied, offset = None, 0, 0
    while True:
        got = old.get(include=["embeddings", "metadatas"], limit=1000, offset=offset)
        if not got["ids"]:
            break
        offset += len(got["ids"])
        ids, vecs, docs, metas = [], [], [], []
        for vec, m in zip(got["embeddings"], got["metadatas"]):
            rec = records.get(m.get("source_id"))
            i = int(m.get("chunk_index", -1))
            if rec is None or not 0 <= i < rec.n_chunks:
                continue
            dim = len(vec)
            ids.extend(vector_ids(manifest, rec.source_id, rec.content_hash, i, i + 1))
            vecs.append(vec)
            docs.append(rec.chunk_text(i))
            metas.append({**rec.index_metadata, "source_id": rec.source_id, "chunk_index": i,
                          "start_index": int(rec.arrays[0, i]), "end_index": int(rec.arrays[1, i]),
                          "content_hash": rec.content_hash, "chunk_id": chunk_id(rec.source_id, i),
                          "swrag_index": index_id})
        if ids:
            new.upsert(ids=ids, embeddings=vecs, documents=docs, metadatas=metas)
            copied += len(ids)
    manifest["embedding"]["dim"] = dim
    from swrag_integrations.stores.sources import SqliteSourceStore

    con.execute("BEGIN IMMEDIATE")
    try:
        con.execute("ALTER TABLE sources RENAME TO sources_v2")
        for sql in SqliteSourceStore._SCHEMA:
            con.execute(sql)
        con.executemany("INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            (r.source_id, r.content_hash, r.state, r.id_span, r.n_chunks, r.origin,
             json.dumps(r.metadata, ensure_ascii=False), r.arrays_bytes(), r.windows_bytes(), r.text)
            for r in records.values()])
        con.execute("INSERT OR REPLACE INTO meta VALUES ('manifest', ?)", (json.dumps(manifest, sort_keys=True),))
        con.execute("INSERT OR REPLACE INTO meta VALUES ('generation', '1')")
        con.execute("DROP TABLE sources_v2")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    client.delete_collection(old_name)
    shutil.rmtree(root / "bm25" / name, ignore_errors=True)
    for leftover in (root / "bm25").glob(f".{name}.*"):  # crashed saves of format 2
        shutil.rmtree(leftover, ignore_errors=True)
    message = (f"upgraded the index in {root} from format 2 to 3: {len(records)} sources, {copied} vectors copied "
               "(chunk texts now stored with their vectors)")
    logger.warning(message)
    warnings.warn(message, stacklevel=4)
