"""Identities: of a source document, of its small chunks, and of their vectors.

One definition each, used everywhere:

* `source_key` -- what decides "same document, new version" (``Document.id``,
  else ``metadata["source"]`` plus ``page``/``row`` and a chunk's ``start_index``/
  ``end_index``, else the text);
* `batch_source_ids` -- the source id of every document of one write: several
  documents of one source in one call are parts of it, each kept (never one replacing
  another);
* `source_id_for` -- the 16-hex-digit id of a source (hash of its key);
* `chunk_id` / `parse_chunk_id` -- ``"<source_id>:s:<i>"`` for small
  chunk ``i`` (``"<source_id>:m:<j>"`` for the derived medium chunk ``j``);
* `vector_id` -- the id a chunk's vector has in the vector store: a UUID derived
  from the chunk id and the version (content hash) of the source's text it was cut
  from, because some stores (Qdrant) accept only UUIDs or integers;
* `vector_ids` -- the vector ids a source record references, under the id scheme
  its index's manifest records (`vector_id_scheme`): ``"v2"`` (with the
  version: a writer that resumes after another one wrote a newer version lands its
  vectors under ids no record references, never in the newer version's place) or
  ``"legacy"`` (indexes written before ``"v2"``: the chunk id alone).

Framework-free: a "document" is anything with ``id``, ``metadata`` and
``page_content`` attributes (a LangChain ``Document`` is one).
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from typing import Any, Mapping, NamedTuple, Sequence

__all__ = ["source_key", "source_id_for", "source_id_of_id", "origin_key", "member_id", "parse_member_id", "batch_source_ids", "chunk_id", "parse_chunk_id", "ChunkId", "vector_id",
           "vector_ids", "doc_vector_ids", "vector_id_scheme", "VECTOR_ID_SCHEME", "content_hash"]

# A fixed namespace: the same chunk id gives the same vector id in every process.
_VECTOR_NAMESPACE = uuid.UUID("6f2b1f5e-0c7d-4d8e-9a51-5a1e6f0d2c31")
LEVELS = {"s": "small", "m": "medium"}
# The vector id scheme new indexes record in their manifest (key ``vector_ids``); a
# manifest without the key was written with the legacy scheme (chunk id alone).
VECTOR_ID_SCHEME = "v2"
_SCHEMES = ("legacy", VECTOR_ID_SCHEME)


def source_key(doc: Any) -> str:
    """The identity of a source document.

    ``Document.id`` if set; else ``metadata["source"]`` (`origin_key`: plus
    ``page``/``row`` when present, so the pages of one PDF and the rows of one CSV stay
    apart; for a `SourceSegment` plus where it starts; else the integer
    ``start_index``/``end_index`` a document carries); else the text itself (then every
    edit makes a new source).
    """
    doc_id = getattr(doc, "id", None)
    if doc_id:
        return f"id:{doc_id}"
    meta = getattr(doc, "metadata", None) or {}
    key = origin_key(meta)
    if key is not None:
        base = getattr(doc, "base", None)  # a SourceSegment: one piece of the source
        if isinstance(base, int) and not isinstance(base, bool):
            return f"{key}#segment={base}"
        for offset in ("start_index", "end_index"):
            value = meta.get(offset)
            if isinstance(value, int) and not isinstance(value, bool):
                key += f"#{offset}={value}"
        return key
    return "text:" + _sha1(getattr(doc, "page_content", ""))


def origin_key(meta: dict[str, Any]) -> str | None:
    """``"source:<source>"`` plus ``#page=``/``#row=`` when the metadata has them: which
    text a document comes from (``None`` without a ``source``)."""
    if meta.get("source") in (None, ""):
        return None
    key = f"source:{meta['source']}"
    for extra in ("page", "row"):
        if extra in meta:
            key += f"#{extra}={meta[extra]}"
    return key


def source_id_for(doc_or_key: Any) -> str:
    """Stable 16-hex-digit id of a source: a document, or a key from `source_key`."""
    key = doc_or_key if isinstance(doc_or_key, str) else source_key(doc_or_key)
    return _sha1(key)[:16]


def source_id_of_id(given: Any, known: Any = ()) -> str:
    """The source id an id given at add time (``Document.id`` / ``ids=``) names: the id
    itself when it is a source id the index holds (``known``: a container of source ids,
    e.g. the store's heads), so the ids ``add_texts`` returned address their sources for
    reading, deleting *and* updating; else the hash of ``"id:<given>"``."""
    text = str(given)
    return text if text in known else source_id_for(f"id:{text}")


def batch_source_ids(documents: Sequence[Any], known: Any = ()) -> list[str]:
    """The source id of each document of one write (same order).

    ``known``: the source ids the index holds (a container); a document whose id is one
    of them is that source (`source_id_of_id`): adding it replaces the source.

    A document is its own source (`source_id_for`), with one exception: when
    several *different* documents of one call share a key (chunks of one file without
    offsets, say), each becomes a part of it -- key ``<key>#part=<j>``, ``j`` counting
    the distinct documents of that key in call order -- so no document replaces another
    one of the same call and re-adding the same batch gives the same ids. Identical
    documents (same text and metadata) share one id.

    Raises:
        ValueError: two different documents given the same id (``Document.id`` or
            ``ids=``) in one call: the index cannot keep both under one id.
    """
    keys = [source_key(doc) for doc in documents]
    named = {key: source_id_of_id(key[3:], known) for key in keys if key.startswith("id:")}
    shared = {key for key, n in Counter(keys).items() if n > 1}
    # a document alone under its key needs no content to tell it apart (its text is hashed
    # once per write, by the record's content hash)
    contents = [_content_of(doc) if key in shared else "" for key, doc in zip(keys, documents)]
    parts: dict[str, dict[str, int]] = {}  # key -> content -> part number
    for key, content in zip(keys, contents):
        seen = parts.setdefault(key, {})
        seen.setdefault(content, len(seen))
    out = []
    for key, content in zip(keys, contents):
        if len(parts[key]) == 1:
            out.append(named[key] if key in named else source_id_for(key))
        elif key.startswith("id:"):
            raise ValueError(f"two different documents have the id {key[3:]!r} in one call; give each document its "
                             "own id (or add the new version in a later call to replace the old one)")
        else:
            out.append(source_id_for(f"{key}#part={parts[key][content]}"))
    return out


def _content_of(doc: Any) -> str:
    """Text and metadata of a document as one comparable string."""
    import json

    meta = json.dumps(getattr(doc, "metadata", None) or {}, sort_keys=True, default=repr, ensure_ascii=False)
    return _sha1(meta + "\x00" + getattr(doc, "page_content", ""))


def content_hash(text: str, config_json: str) -> str:
    """Hash of a source's text under an index configuration (changes when either does)."""
    return _sha1(config_json + "\x00" + text)[:16]


def member_id(source_id: str, start: int, end: int) -> str:
    """The id of the offset chunk ``[start, end)`` (source coordinates) of a source segment
    (`SourceSegment`): ``"<source_id>@<start>:<end>"``, what
    ``add_documents`` returns for such a chunk."""
    return f"{source_id}@{int(start)}:{int(end)}"


def parse_member_id(value: Any) -> tuple[str, int, int] | None:
    """``(source_id, start, end)`` of a `member_id`, or ``None``."""
    sid, sep, rest = str(value).partition("@")
    start, sep2, end = rest.partition(":")
    if not (sid and sep and sep2) or not start.isdigit() or not end.isdigit():
        return None
    return sid, int(start), int(end)


def chunk_id(source_id: str, index: int, level: str = "s") -> str:
    """``"<source_id>:s:<index>"`` (small chunk) or ``":m:"`` (medium chunk)."""
    if level not in LEVELS:
        raise ValueError(f"level must be 's' or 'm', got {level!r}")
    return f"{source_id}:{level}:{int(index)}"


class ChunkId(NamedTuple):
    """A parsed chunk id."""

    source_id: str
    level: str  # "s" or "m"
    index: int


def parse_chunk_id(value: Any) -> ChunkId | None:
    """The parts of a chunk id, or ``None`` if ``value`` is not one."""
    sid, sep1, rest = str(value).partition(":")
    level, sep2, num = rest.partition(":")
    if not (sid and sep1 and sep2) or level not in LEVELS or not num.isdigit():
        return None
    return ChunkId(sid, level, int(num))


def vector_id(chunk: str, version: str | None = None) -> str:
    """The vector-store id of a chunk: ``uuid5`` of its chunk id and, when given, the
    version (content hash) of its source's text (valid in every store)."""
    return str(uuid.uuid5(_VECTOR_NAMESPACE, chunk if version is None else f"{chunk}@{version}"))


def vector_id_scheme(manifest: Mapping[str, Any]) -> str:
    """The vector id scheme an index manifest records (``"legacy"`` when it records none)."""
    scheme = manifest.get("vector_ids") or "legacy"
    if scheme not in _SCHEMES:
        raise ValueError(f"the index manifest records vector_ids={scheme!r}; this version knows {_SCHEMES}: "
                         "upgrade swrag-integrations or index the files again into a new directory")
    return scheme


def vector_ids(manifest: Mapping[str, Any], source_id: str, content_hash: str, start: int, stop: int) -> list[str]:
    """The vector ids of chunks ``start..stop-1`` of the version ``content_hash`` of a
    source, in the index whose manifest is ``manifest``: the ids that version's record
    references (only those: linear in the range)."""
    version = content_hash if vector_id_scheme(manifest) == VECTOR_ID_SCHEME else None
    return [vector_id(chunk_id(source_id, i), version) for i in range(start, stop)]


def doc_vector_ids(doc: Any) -> list[str]:
    """The ids a chunk document a store returned may have in that store: its own id
    (stores differ: some set ``Document.id``, Qdrant puts it in ``metadata["_id"]``)
    and those derived from the chunk id and content hash in its metadata under each
    id scheme (`vector_ids`; a document does not say which its index uses)."""
    meta = doc.metadata or {}
    out = []
    if meta.get("chunk_id"):
        if meta.get("content_hash"):
            out.append(vector_id(str(meta["chunk_id"]), str(meta["content_hash"])))
        out.append(vector_id(str(meta["chunk_id"])))
    value = doc.id if doc.id is not None else meta.get("_id", meta.get("id"))
    if value is not None:
        out.append(str(value))
    return out


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
