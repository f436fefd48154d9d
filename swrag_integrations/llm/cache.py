"""On-disk cache entries for converted and low-bit models: keys, atomic writes, checks.

A cache entry is a directory ``<root>/<kind>/<name>-<digest>`` where ``digest`` is a hash
of the entry's *key*: a JSON-able dict naming everything that changes the weights or the
tokenizer (source identity, converter version, low-bit format, library versions, loading
options). An entry is complete exactly when it holds `MANIFEST_NAME`, written last:

* entries are built in a temporary sibling directory (``.<name>.tmp-<pid>-<random>``) and
  renamed into place in one step (`staging_dir` + `publish`), so a crash never
  leaves a directory under the final name — and a directory without a manifest (an old
  layout, a hand copy) never counts as complete;
* the manifest records the key and the size and SHA-256 of every file; `check_entry`
  compares them with what is on disk and with the key the caller expects, and returns the
  reason when they differ (the caller then rebuilds the entry with a
  `CacheRebuildWarning`; a cache never silently serves a different model).

File hashes of *sources* (a GGUF file, the files of a model directory) are memoised under
``<root>/file-hashes`` by ``(path, size, mtime_ns, ctime_ns, inode, device)``: ctime
cannot be set from user space and changes on every write, so a memo entry can only be
reused for the very same file contents. Cache entries themselves are always re-hashed on
load (about 0.2 s for the 250 MB sym_int8 SmolLM2 entry).
"""

from __future__ import annotations

import errno
import hashlib
import importlib.metadata
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from swrag_integrations.core.paths import PRIVATE_DIR_MODE, private_dir

MANIFEST_NAME = "swrag-cache.json"
MANIFEST_FORMAT = 1
_CHUNK = 1 << 22


class CacheRebuildWarning(UserWarning):
    """A cache entry was stale, foreign, corrupted or incomplete and is being rebuilt."""


# --------------------------------------------------------------------------- hashing
def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's contents."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}|{st.st_dev}"


def memo_sha256(path: str | os.PathLike[str], memo_dir: str | os.PathLike[str] | None) -> str:
    """`sha256_file`, memoised under ``memo_dir`` by the file's full stat identity.

    Any write to the file changes its ctime (which cannot be set back), so a memoised
    hash is only ever reused for unchanged contents. ``memo_dir=None`` always hashes.
    """
    path = Path(path)
    if memo_dir is None:
        return sha256_file(path)
    memo = Path(memo_dir) / hashlib.sha256(_stat_key(path).encode()).hexdigest()[:32]
    try:
        cached = memo.read_text().strip()
        if re.fullmatch(r"[0-9a-f]{64}", cached):
            return cached
    except OSError:
        pass
    before = _stat_key(path)
    value = sha256_file(path)
    if _stat_key(path) == before:  # not modified while it was read
        try:
            private_dir(memo.parent)
            tmp = memo.with_name(f".{memo.name}.{os.getpid()}.{secrets.token_hex(4)}")
            tmp.write_text(value)
            os.replace(tmp, memo)
        except OSError:
            pass  # a read-only cache only costs re-hashing
    return value


def library_versions(*names: str) -> dict[str, str | None]:
    """Installed versions of the named distributions (``None`` when not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def canonical(value: Any) -> Any:
    """A JSON-able, order-independent form of ``value`` for cache keys."""
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value)  # torch.dtype, config objects, ...


def key_digest(key: Mapping[str, Any], length: int = 16) -> str:
    """Short stable hash of a cache key."""
    raw = json.dumps(canonical(key), sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:length]


def entry_name(label: str, key: Mapping[str, Any]) -> str:
    """``<label>-<digest>``: a readable, filesystem-safe directory name for a key."""
    safe = re.sub(r"[^\w.-]+", "_", label).strip("._")[-60:] or "model"
    return f"{safe}-{key_digest(key)}"


# ------------------------------------------------------------------------- entries
def _files(directory: Path) -> dict[str, Path]:
    return {
        p.relative_to(directory).as_posix(): p
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != MANIFEST_NAME
    }


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The entry's manifest, or ``None`` when it is missing or unreadable."""
    try:
        data = json.loads((Path(directory) / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_manifest(directory: str | os.PathLike[str], key: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """Record ``key``, every file's size and SHA-256 and ``extra`` in ``directory``.

    Written last (through a temporary file and ``os.replace``): its presence is what makes
    an entry complete.
    """
    directory = Path(directory)
    manifest = {
        "format": MANIFEST_FORMAT,
        "key": canonical(key),
        "files": {name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for name, p in _files(directory).items()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **canonical(extra),
    }
    tmp = directory / f".{MANIFEST_NAME}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, directory / MANIFEST_NAME)
    return manifest


def _key_differences(expected: Any, found: Any, path: str = "") -> list[str]:
    if isinstance(expected, dict) and isinstance(found, dict):
        out: list[str] = []
        for k in sorted(set(expected) | set(found)):
            out += _key_differences(expected.get(k), found.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if expected == found else [f"{path}: cached {found!r}, wanted {expected!r}"]


def check_entry(directory: str | os.PathLike[str], key: Mapping[str, Any], *, verify_files: bool = True) -> str | None:
    """Why the entry at ``directory`` cannot be used for ``key`` (``None``: it can).

    Checks, in order: a manifest is present (else the entry is half-written or foreign),
    its key equals ``key`` (else it was written for another source / version / option),
    the set of files, their sizes and (``verify_files``) their SHA-256 are as recorded.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return "missing"
    manifest = read_manifest(directory)
    if manifest is None:
        return f"no readable {MANIFEST_NAME} (an interrupted write or a directory from another tool)"
    if manifest.get("format") != MANIFEST_FORMAT:
        return f"manifest format {manifest.get('format')!r}, wanted {MANIFEST_FORMAT}"
    differences = _key_differences(canonical(key), manifest.get("key"))
    if differences:
        return "written for a different model or setup (" + "; ".join(differences[:4]) + ")"
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not recorded:
        return "the manifest lists no files"
    present = _files(directory)
    if set(present) != set(recorded):
        missing, extra = sorted(set(recorded) - set(present)), sorted(set(present) - set(recorded))
        return f"files differ from the manifest (missing {missing[:5]}, unexpected {extra[:5]})"
    for name, path in present.items():
        info = recorded[name]
        if path.stat().st_size != info.get("size"):
            return f"{name}: size {path.stat().st_size}, recorded {info.get('size')} (truncated or replaced)"
    if verify_files:
        for name, path in present.items():
            if sha256_file(path) != recorded[name].get("sha256"):
                return f"{name}: checksum differs from the manifest (corrupted or modified)"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: the process exists
        return True
    return True


def remove_stale_staging(parent: str | os.PathLike[str], name: str) -> None:
    """Delete staging / replaced copies of entry ``name`` left by dead processes."""
    parent = Path(parent)
    if not parent.is_dir():
        return
    pattern = re.compile(rf"^\.{re.escape(name)}\.(tmp|old)-(\d+)-[0-9a-f]+$")
    for path in parent.iterdir():
        match = pattern.match(path.name)
        if match and not _pid_alive(int(match.group(2))):
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def staging_dir(final: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh temporary sibling of ``final`` to build an entry in; removed afterwards.

    Publish it with `publish` inside the ``with`` block; whatever is left (an error,
    a ``KeyboardInterrupt``) is deleted on exit. A hard crash leaves only a hidden
    ``.<name>.tmp-<pid>-...`` directory, which the next write of the same entry removes.
    """
    final = Path(final)
    private_dir(final.parent)
    remove_stale_staging(final.parent, final.name)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir(mode=PRIVATE_DIR_MODE)
    try:
        yield tmp
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def publish(staged: str | os.PathLike[str], final: str | os.PathLike[str]) -> None:
    """Atomically put the complete entry ``staged`` at ``final`` (replacing what is there).

    An existing ``final`` is first renamed aside (one step), so at no moment does ``final``
    hold a partial entry; the old copy is deleted afterwards.
    """
    staged, final = Path(staged), Path(final)
    if read_manifest(staged) is None:
        raise ValueError(f"{staged} has no manifest; refusing to publish an incomplete entry")
    for _ in range(5):
        old = None
        if final.exists():
            old = final.parent / f".{final.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                final.rename(old)
            except FileNotFoundError:
                old = None  # another process moved it meanwhile
        try:
            staged.rename(final)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue  # another process published in between: replace that copy too
            raise
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        return
    raise OSError(f"could not publish cache entry {final} (concurrent writers)")


def discard(directory: str | os.PathLike[str]) -> None:
    """Remove an unusable entry: renamed aside first (atomic), then deleted."""
    directory = Path(directory)
    if not directory.exists():
        return
    trash = directory.parent / f".{directory.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        directory.rename(trash)
    except OSError:
        trash = directory
    shutil.rmtree(trash, ignore_errors=True)
