"""Load files and folders as documents, skipping (never garbling) bad input.

`load_files` turns ``.txt``/``.md``/``.markdown`` (one document each), ``.pdf``
(one document, pages joined by a blank line) and ``.csv`` (one document per row) into
`PlainDocument` objects (``page_content``,
``metadata``: a LangChain ``Document``'s attribute names, taken by the engine and both
faces); `swrag_integrations.langchain.files.load_files` gives LangChain
``Document`` s. Its rule is that nothing is
indexed lossily without saying so: a file that cannot be read faithfully is *skipped*
with a reason and a hint (and one `LoadWarning`), and lossy decoding happens
only when the caller opts in with ``errors="replace"`` (and is then reported too).

Text decoding (``.txt``, ``.md``, ``.markdown`` and ``.csv``):

1. a byte-order mark decides: UTF-8 (the BOM is stripped), UTF-16 or UTF-32;
2. without one, NUL bytes in the first 8 KiB (or a known binary signature such as
   PNG, ZIP or ELF) mean a *binary file* (unless ``encoding`` is UTF-16/32);
3. strict UTF-8: valid UTF-8 is always read as UTF-8, so a given ``encoding`` never
   garbles the UTF-8 files of a folder;
4. the given ``encoding``, for the files that are not valid UTF-8 (then steps 5 and
   6 do not apply: a file it cannot decode is skipped as ``"not <encoding> text"``);
5. strict GB18030 (Chinese files in the national encoding are common), accepted
   only when the text looks like GB2312-range Chinese (at least 90 % of its two-byte
   characters); this keeps Latin-1 or Shift-JIS text, which often also decodes as
   GB18030, from turning into Chinese-looking garbage;
6. otherwise the file is skipped as ``"not UTF-8 text"`` with a hint that names
   the likely encoding (cp1252/latin-1 by a Western-European test, else
   charset-normalizer), e.g. ``looks like cp1252/latin-1: pass encoding='latin-1'
   (CLI: --encoding latin-1)``; when no encoding fits at all, the file is skipped
   as a ``"binary file"``.

No framework is needed; ``pypdf`` and ``charset_normalizer`` are imported when a PDF
is read or a hint is needed.
"""

from __future__ import annotations

import codecs
import contextvars
import csv
import io
import os
import re
import stat
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from swrag_integrations.stores.storage import PlainDocument as Document

__all__ = [
    "SUPPORTED_SUFFIXES",
    "TEXT_SUFFIXES",
    "CSV_EXTRA_LABEL",
    "LoadWarning",
    "SkippedFile",
    "LoadResult",
    "load_files",
    "list_files",
    "source_identity",
    "indexed_origins",
    "display_path",
]

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
"""Suffixes loaded as one plain-text document each."""

SUPPORTED_SUFFIXES = (*TEXT_SUFFIXES, ".pdf", ".csv")
"""Every suffix `load_files` reads (compared case-insensitively)."""

CSV_EXTRA_LABEL = "column {n}"
"""Label of a CSV field beyond the header; ``n`` is its 1-based column number."""

BINARY_SNIFF_BYTES = 8192
"""How many leading bytes are searched for NUL bytes (binary detection)."""

_GB_MIN_SHARE = 0.9  # share of GB2312-range two-byte characters for a GB18030 guess

_BOMS = (  # UTF-32 first: its little-endian BOM starts with the UTF-16 one
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)

_MAGIC = (  # signatures of common binary formats, for the hint of a "binary file"
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a ZIP archive (.docx/.xlsx/.odt are ZIP files)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"MZ", "a Windows executable"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Microsoft Office file (.doc/.xls)"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"%PDF-", "a PDF: rename it to .pdf"),
)

# Western-European punctuation and symbols that cp1252 text commonly holds.
_LATIN_EXTRAS = set("\u00a0’‘“”„–—…€•«»‹›°§©®™±·¿¡×÷²³¹½¼¾£¥¢¤¦¨ª¬¯´µ¶¸º†‡ˆ‰Š‹ŒŽšœžŸ")

_GB_CHARS = re.compile(rb"[\x81-\xfe][\x30-\x39][\x81-\xfe][\x30-\x39]|[\x81-\xfe][\x40-\xfe]")
_GB2312 = re.compile(rb"[\xa1-\xf7][\xa1-\xfe]")


class LoadWarning(UserWarning):
    """A file was skipped, or decoded lossily on request (``errors="replace"``)."""


@dataclass(frozen=True)
class SkippedFile:
    """A file `load_files` did not load.

    Attributes:
        path: the file's identity, the absolute path it was reached by (the same
            string as a loaded document's ``source``; see `load_files`).
        reason: short and stable, e.g. ``"not UTF-8 text"``, ``"binary file"``,
            ``"no extractable text (scanned PDF?)"``.
        hint: what to do about it (may be empty).
    """

    path: Path
    reason: str
    hint: str = ""

    def message(self) -> str:
        """One line naming the file (bytes that are not UTF-8 escaped: ``caf\\xe9.txt``),
        the reason and the hint (the warning's text)."""
        return f"skipped {display_path(self.path)}: {self.reason}" + (f"; {self.hint}" if self.hint else "")


def display_path(path: str | os.PathLike[str]) -> str:
    """``path`` as printable text: bytes of a file name that are not UTF-8 (which Python
    keeps as lone surrogates) are shown escaped, e.g. ``caf\\xe9.txt``."""
    text = os.fspath(path)
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no byte stands for
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


@dataclass
class LoadResult:
    """What `load_files` found.

    Attributes:
        documents: the loaded documents, in file order (CSV rows in row order).
        skipped: the files (and unreadable folders) that were not loaded.
        files: every file with a supported suffix that was considered, loaded or
            skipped, by identity (absolute, symlinks not resolved) and without
            duplicates. An indexed source that is not in ``files`` may have vanished
            (deleted or renamed); `vanished` makes that test safely. A skipped
            file *is* in ``files``, so a file that failed to load this time (say, it is
            briefly unreadable) does not look deleted.
        roots: the given paths, absolute (symlinks not resolved), in the given order.
        duplicates: files reached again by another path (through a symlink, or a
            folder given twice) and so not loaded again: their content is indexed under
            the path in ``files`` that reaches the same file.
    """

    documents: list[Document] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    roots: list[Path] = field(default_factory=list)
    duplicates: list[Path] = field(default_factory=list)

    # A LoadResult reads like the list of documents earlier versions returned.
    def __iter__(self):
        return iter(self.documents)

    def __len__(self) -> int:
        return len(self.documents)

    def __getitem__(self, item):
        return self.documents[item]

    def vanished(self, sources: Iterable[str | os.PathLike[str]]) -> list[str]:
        """The ``sources`` (e.g. of an index) whose file is gone.

        A source counts as vanished when it was not considered in this load (not in
        `files`), no longer exists (not even as a dangling link), and either
        lies under one of `roots` (as given, or with its links resolved: an
        index that stored resolved paths), or is a file path elsewhere whose folder
        still exists (a file indexed from another folder, or the target of a link
        an earlier version stored, deleted since). The existence check keeps what
        this load could not see: files in an unreadable, hidden or symlinked folder,
        or below a folder walked with ``recursive=False``; the folder check keeps
        the sources of an index moved to another machine, or of an unmounted disk,
        and anything that is not an absolute path of a supported file type (a URL,
        a name given to ``add_texts``).

        Args:
            sources: ``metadata["source"]`` values (path strings).

        Returns:
            The vanished sources as strings, in the given order.
        """
        considered = {str(path) for path in self.files}
        roots = list(dict.fromkeys([*self.roots, *(_resolve(root) for root in self.roots)]))
        gone = []
        for source in sources:
            path = Path(source)
            if str(path) in considered or os.path.lexists(path):
                continue
            if any(path == root or path.is_relative_to(root) for root in roots):
                gone.append(os.fspath(source))
            elif path.is_absolute() and _supported(path) and os.path.isdir(path.parent):
                gone.append(os.fspath(source))
        return gone

    def superseded(self, sources: Iterable[str | os.PathLike[str]]) -> list[str]:
        """The ``sources`` that name a considered file by another path: its resolved
        path (what indexes written before file identity kept the path given stored,
        e.g. the target of a symlink), or a path that is in `duplicates`. The
        file's content is indexed under its path in `files` now.
        """
        considered = {str(path) for path in self.files}
        other = {str(path) for path in self.duplicates}
        other.update(str(_resolve(path)) for path in self.files)
        return [os.fspath(source) for source in sources
                if str(Path(source)) in other and str(Path(source)) not in considered]

    def stale(self, indexed: Iterable[str | os.PathLike[str]], loaded: Iterable[str | os.PathLike[str]],
              skipped: Iterable[str | os.PathLike[str]] = ()) -> list[str]:
        """The origins a re-index of these paths must remove (unless told to keep them).

        That is: the ``indexed`` sources that `vanished`; those
        `superseded` by another path to the same file; every ``skipped`` file
        (it can no longer be read faithfully, so its old text must not be served); and
        every considered file that gave no document, neither ``loaded`` nor skipped
        (a CSV emptied to its header or to 0 bytes: its old rows are gone).

        Args:
            indexed: the origins (``metadata["source"]``) the index holds.
            loaded: the sources of the documents this load gave (for a load spread
                over processes: of the records they planned).
            skipped: the files skipped (here or in the processes that loaded them).

        Returns:
            Origin strings, each once, in a stable order.
        """
        loaded = {os.fspath(source) for source in loaded}
        skipped = [os.fspath(path) for path in skipped]
        empty = [str(path) for path in self.files if str(path) not in loaded]
        indexed = list(indexed)
        return list(dict.fromkeys([*self.vanished(indexed), *self.superseded(indexed), *skipped, *empty]))


class _Skip(Exception):
    """Raised by the readers: skip this file for ``reason`` (with ``hint``)."""

    def __init__(self, reason: str, hint: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


# ------------------------------------------------------------------------ decoding

_REPLACED: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("_REPLACED", default=None)


def _count_replace(exc: UnicodeError) -> tuple[str, int]:
    """``errors="replace"`` that also counts the replacement characters it inserts."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    box = _REPLACED.get()
    if box is not None:
        box[0] += 1
    return "\ufffd", exc.end


_COUNT_REPLACE = "swrag_integrations.count_replace"
codecs.register_error(_COUNT_REPLACE, _count_replace)


def _decode_counting(raw: bytes, encoding: str) -> tuple[str, int]:
    """Decode with U+FFFD for bad bytes; returns the text and how many were replaced."""
    box = [0]
    token = _REPLACED.set(box)
    try:
        text = raw.decode(encoding, _COUNT_REPLACE)
    finally:
        _REPLACED.reset(token)
    return text, box[0]


def _codec_name(encoding: str) -> str:
    return codecs.lookup(encoding).name


def _is_wide_unicode(encoding: str) -> bool:
    return _codec_name(encoding).startswith(("utf-16", "utf-32"))


def _bom(raw: bytes) -> tuple[str, str] | None:
    for bom, codec, label in _BOMS:
        if raw.startswith(bom):
            return codec, label
    return None


def _binary_hint(raw: bytes) -> str:
    for magic, what in _MAGIC:
        if raw.startswith(magic):
            return f"looks like {what}"
    return ("NUL bytes in the first 8 KiB; if it is UTF-16 text without a byte-order mark, "
            "pass encoding='utf-16-le' (CLI: --encoding utf-16-le)")


def _looks_binary(raw: bytes) -> bool:
    return b"\x00" in raw[:BINARY_SNIFF_BYTES] or any(raw.startswith(m) for m, _ in _MAGIC)


def _plausible_gb(raw: bytes) -> bool:
    """Whether bytes that decode as GB18030 look like Chinese rather than an accident.

    Latin-1 text ("\u00c4rger" = C4 72) and Shift-JIS text often form valid GB18030
    byte pairs too, but outside the GB2312 block (lead and trail 0xA1-0xFE) where
    nearly all characters of real simplified-Chinese text lie.
    """
    chars = _GB_CHARS.findall(raw)
    pairs = [c for c in chars if len(c) == 2]
    if not pairs:
        return bool(chars) or not raw  # 4-byte sequences only (or ASCII): no evidence against
    gb2312 = sum(1 for c in pairs if _GB2312.fullmatch(c))
    return gb2312 >= _GB_MIN_SHARE * len(pairs)


def _latin_guess(raw: bytes) -> str | None:
    """``"cp1252"`` / ``"latin-1"`` when the bytes read as Western-European text."""
    try:
        text = raw.decode("cp1252")
    except UnicodeDecodeError:
        return None
    high = [c for c in text if ord(c) > 127]
    if not high:
        return None
    for char in high:
        if char in _LATIN_EXTRAS:
            continue
        if not (char.isalpha() and unicodedata.name(char, "").startswith("LATIN")):
            return None
    return "cp1252" if re.search(rb"[\x80-\x9f]", raw) else "latin-1"


def _encoding_hint(raw: bytes) -> str | None:
    """A hint naming the likely encoding of non-UTF-8 bytes; ``None``: looks binary."""
    latin = _latin_guess(raw)
    if latin == "latin-1":
        return "looks like cp1252/latin-1: pass encoding='latin-1' (CLI: --encoding latin-1)"
    if latin:
        return f"looks like {latin}: pass encoding='{latin}' (CLI: --encoding {latin})"
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - charset-normalizer ships with requests
        return "pass the file's encoding, e.g. encoding='latin-1' (CLI: --encoding latin-1), or errors='replace'"
    best = from_bytes(raw).best()
    if best is None:
        return None
    name = best.encoding
    if _codec_name(name) in ("utf-8", "gb18030"):  # already failed strictly
        return None
    language = f", {best.language}" if best.language and best.language != "Unknown" else ""
    return f"looks like {name}{language}: pass encoding='{name}' (CLI: --encoding {name})"


def _decode(raw: bytes, path: Path, encoding: str | None, errors: str) -> str:
    """Bytes of a text file -> text, by the rules in the module docstring.

    Raises:
        _Skip: binary or undecodable (under ``errors="strict"``).
    """
    bom = _bom(raw)
    if bom is not None:  # a byte-order mark decides, whatever ``encoding`` says
        if bom[1] == "UTF-8" and _looks_binary(raw):
            raise _Skip("binary file", _binary_hint(raw))
        candidates, label, lossy = [bom[0]], bom[1], bom[0]
    else:
        binary = _looks_binary(raw)
        if binary and not (encoding is not None and _is_wide_unicode(encoding)):
            raise _Skip("binary file", _binary_hint(raw))
        if not binary:  # valid UTF-8 is UTF-8: ``encoding`` is the fallback for files that are not
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
        if encoding is not None:
            candidates, label, lossy = [encoding], encoding, encoding
        else:
            candidates, label, lossy = ["gb18030"], "UTF-8", "utf-8"
    gb_possible = False
    for codec in candidates:
        try:
            text = raw.decode(codec)
        except UnicodeDecodeError:
            continue
        if encoding is None and codec == "gb18030" and not _plausible_gb(raw):
            gb_possible = True
            continue
        return text

    if errors == "replace":
        text, n = _decode_counting(raw, lossy)
        if n:
            warnings.warn(
                f"{path}: decoded as {label} with {n} replacement character(s) (U+FFFD) for undecodable "
                "bytes (errors='replace')",
                LoadWarning,
                stacklevel=4,
            )
        return text
    if encoding is not None:
        raise _Skip(f"not {label} text",
                    "check the encoding, or pass errors='replace' to replace undecodable bytes")
    if bom is not None:
        raise _Skip("binary file", f"starts with a {label} byte-order mark but is not valid {label}")
    hint = _encoding_hint(raw)
    if gb_possible:
        gb_hint = "if it is Chinese, pass encoding='gb18030' (CLI: --encoding gb18030)"
        hint = f"{hint}; {gb_hint}" if hint else gb_hint
    if hint is None:
        raise _Skip("binary file", "no text encoding fits")
    raise _Skip("not UTF-8 text", hint)


def read_text(path: str | os.PathLike[str], *, encoding: str | None = None, errors: str = "strict") -> str:
    """One text file exactly as the index reads it (the decoding rules above; line ends
    kept, so ``CRLF`` stays ``CRLF`` and offsets are the index's offsets).

    Raises:
        FileNotFoundError / IsADirectoryError: no such file, or a folder.
        ValueError: binary or undecodable, with the reason and the hint.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"expected a file, got a directory: {path}")
    try:
        return _decode(_read_bytes(path), path, encoding, errors)
    except _Skip as skip:
        raise ValueError(f"{path}: {skip.reason}" + (f"; {skip.hint}" if skip.hint else "")) from None


# ------------------------------------------------------------------------- readers


def _read_bytes(path: Path) -> bytes:
    """All bytes of ``path`` (a seam for tests)."""
    with open(path, "rb") as handle:
        return handle.read()


def _read_text_file(raw: bytes, path: Path, source: str, encoding: str | None, errors: str) -> list[Document]:
    text = _decode(raw, path, encoding, errors)
    if not text.strip():
        text = ""
    return [Document(page_content=text, metadata={"source": source})]


def _csv_row_text(header: list[str], row: list[str]) -> str:
    lines = []
    for i in range(max(len(header), len(row))):
        label = header[i] if i < len(header) else CSV_EXTRA_LABEL.format(n=i + 1)
        value = row[i] if i < len(row) else ""
        lines.append(f"{label}: {value}")
    return "\n".join(lines)


def _read_csv(raw: bytes, path: Path, source: str, encoding: str | None, errors: str) -> list[Document]:
    text = _decode(raw, path, encoding, errors)
    reader = csv.reader(io.StringIO(text, newline=""))
    docs: list[Document] = []
    try:
        header: list[str] | None = None
        for row in reader:
            if not row:  # blank line (csv.DictReader skips them too)
                continue
            if header is None:
                header = row
                continue
            docs.append(Document(page_content=_csv_row_text(header, row),
                                 metadata={"source": source, "row": len(docs)}))
    except csv.Error as exc:
        raise _Skip(f"malformed CSV (line {reader.line_num}: {exc})") from None
    return docs


def _read_pdf(raw: bytes, path: Path, source: str, encoding: str | None, errors: str) -> list[Document]:
    if not raw:
        raise _Skip("empty PDF file (0 bytes)")
    if b"%PDF-" not in raw[:1024]:
        hint = "it does not start with %PDF-"
        if not _looks_binary(raw):
            hint += "; if it is text, rename it to .txt"
        else:
            for magic, what in _MAGIC:
                if raw.startswith(magic):
                    hint = f"looks like {what}"
        raise _Skip("not a PDF file", hint)
    try:
        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # e.g. AES without the cryptography package
                raise _Skip("encrypted PDF that cannot be read", f"{type(exc).__name__}: {exc}") from None
            if not opened:
                raise _Skip("encrypted PDF that cannot be read", "it needs a password; decrypt it first")
        pages = [page.extract_text() or "" for page in reader.pages]
    except _Skip:
        raise
    except Exception as exc:  # any pypdf failure: skip with the reason, never a traceback
        raise _Skip(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    if not pages:
        raise _Skip("PDF without pages")
    if not any(page.strip() for page in pages):
        raise _Skip("no extractable text (scanned PDF?)", "run OCR on it first (e.g. ocrmypdf)")
    blank = [str(i + 1) for i, page in enumerate(pages) if not page.strip()]
    if blank:
        warnings.warn(f"{path}: page(s) {', '.join(blank)} of {len(pages)} have no extractable text "
                      "(images?); indexed the other pages", LoadWarning, stacklevel=3)
    return [Document(page_content="\n\n".join(pages), metadata={"source": source, "n_pages": len(pages)})]


_READERS: dict[str, Callable[[bytes, Path, str, str | None, str], list[Document]]] = {
    **{suffix: _read_text_file for suffix in TEXT_SUFFIXES},
    ".csv": _read_csv,
    ".pdf": _read_pdf,
}


# --------------------------------------------------------------------------- walk


def _supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def _resolve(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _identity(path: Path) -> Path:
    """A file's identity: the absolute path it was reached by, symlinks *not* resolved
    (links are resolved for reading only), so deleting a link forgets its source."""
    return Path(os.path.abspath(path))


def indexed_origins(store: Any) -> list[str]:
    """The files (``metadata["source"]`` origins) a source store holds sources of, sorted:
    what a re-index of paths compares with the files it finds (`LoadResult.stale`)."""
    return sorted({h.origin for h in store.heads().values() if h.origin})


def source_identity(path: str | os.PathLike[str]) -> str:
    """The ``metadata["source"]`` a file at ``path`` is indexed under (the absolute path
    it is reached by from the working folder, ``~`` expanded, symlinks not resolved): how
    a path typed by the user names an indexed file, e.g. in ``--filter source=docs/a.md``."""
    return str(_identity(Path(path).expanduser()))


def _unique(candidates: list[tuple[Path, _Skip | None]]) -> tuple[list[tuple[Path, Path, _Skip | None]], list[Path]]:
    """Each file once: ``(path, identity, problem)`` in walk order, and the identities of
    the other paths to a file already listed (duplicates).

    Paths reaching the same file (same resolved path) are one file; its identity is
    the path that is the file itself (no link on the way) when one of them is, else
    the first, so a link beside its target never takes the target's place.
    """
    real_of = [_resolve(path) for path, _ in candidates]
    chosen: dict[Path, int] = {}
    for i, ((path, _), real) in enumerate(zip(candidates, real_of)):
        if real not in chosen or (_identity(path) == real and _identity(candidates[chosen[real]][0]) != real):
            chosen[real] = i
    unique, duplicates, listed = [], [], set()
    for i, ((path, problem), real) in enumerate(zip(candidates, real_of)):
        identity = _identity(path)
        if chosen[real] == i:
            unique.append((path, identity, problem))
            listed.add(identity)
        elif identity not in listed and identity != _identity(candidates[chosen[real]][0]):
            duplicates.append(identity)
            listed.add(identity)
    return unique, duplicates


def _walk(folder: Path, recursive: bool) -> Iterator[tuple[Path, _Skip | None]]:
    """Candidate files under ``folder`` in sorted order, each with a reason to skip it.

    Hidden entries (names starting with ``"."``) and symlinked folders are left out;
    an unreadable sub-folder is yielded as a skip.
    """
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as exc:
        yield folder, _Skip("unreadable folder", _os_error(exc))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            if _supported(path):
                yield path, _Skip("unreadable", _os_error(exc))
            continue
        if is_dir:
            if recursive:
                yield from _walk(path, recursive)
            continue
        if is_link:
            try:
                target_is_dir = os.path.isdir(path)
            except OSError:
                target_is_dir = False
            if target_is_dir:
                continue  # symlinked folders are not followed (loops)
        if not _supported(path):
            continue
        yield path, _check_file(path)


def _os_error(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def _check_file(path: Path) -> _Skip | None:
    """Why ``path`` (an existing entry) cannot be read as a regular file or indexed under
    its name, if it cannot."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in the name: no store can keep it as the source
        return _Skip("file name is not valid UTF-8",
                     "rename it to UTF-8 (e.g. convmv -f latin1 -t utf8 --notest FILE)")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        target = os.readlink(path) if os.path.islink(path) else "?"
        return _Skip("dangling symlink", f"{path} points to {target}, which does not exist")
    except OSError as exc:
        return _Skip("unreadable", _os_error(exc))
    if not stat.S_ISREG(mode):
        return _Skip("not a regular file", "a FIFO, socket or device")
    return None


def _as_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def load_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    encoding: str | None = None,
    errors: str = "strict",
    recursive: bool = True,
    on_skip: Callable[[SkippedFile], None] | None = None,
) -> LoadResult:
    """Load files and folders as documents; skip, with a reason, what cannot be read faithfully.

    Formats (suffixes compared case-insensitively):

    * ``.txt``, ``.md``, ``.markdown``: one document, the decoded text.
    * ``.pdf``: one document, the pages' text (pypdf) joined by a blank line;
      metadata ``n_pages``. Pages without text are warned about; a PDF without any
      extractable text is skipped (``"no extractable text (scanned PDF?)"``), as is
      a file that is not a PDF, a 0-byte file, an encrypted PDF that cannot be
      opened without a password, or any pypdf error.
    * ``.csv``: one document per row, metadata ``row`` (0-based, blank lines not
      counted). The first non-blank row is the header; a row's text is one
      ``"<header>: <value>"`` line per field, in column order. Every field is kept:
      duplicate header names each keep their own line (``"a: 1\\na: 2"``), a short
      row gives empty values (``"b: "``), and fields beyond the header are labelled
      ``"column <n>"`` (`CSV_EXTRA_LABEL`, ``n`` = 1-based column number). A
      CSV with only a header gives no documents (and no error).

    Every document has metadata ``source``: the file's identity, the absolute path
    it was reached by (``os.path.abspath``: symlinks are followed for reading, not
    resolved for identity), as a string.

    Empty or whitespace-only text files are *not* skipped: each gives a document
    with empty ``page_content``, so a caller can drop the previous version of that
    file from an index. (An empty CSV simply gives no rows; use
    `LoadResult.files` to tell it still exists.)

    Text decoding follows the rules of this module's docstring: UTF-8 (BOM
    stripped), UTF-16/32 by BOM, ``encoding`` for files that are not UTF-8, else
    plausible GB18030, else the file is skipped as
    ``"not UTF-8 text"`` with a hint naming the likely encoding; files with NUL
    bytes in the first 8 KiB (and no UTF-16/32 BOM) are skipped as ``"binary
    file"``. CSV files are decoded the same way.

    Folders are walked in sorted (deterministic) order, recursively unless
    ``recursive=False``, for the supported suffixes; other files are ignored
    silently. Entries whose name starts with ``"."`` (hidden files and folders
    such as ``.git`` or ``.venv``) are not walked into, and symlinked folders are
    not followed (no loops); symlinked files are read (``source`` is the link's
    path, so deleting the link forgets the file). A dangling symlink, an unreadable file or folder, a FIFO/socket/device, or
    a file whose path is not valid UTF-8 (``"file name is not valid UTF-8"``: no store
    can keep such a name as the source; the warning shows its bytes escaped, e.g.
    ``caf\\xe9.txt``) inside a folder is skipped with a warning: one bad entry never
    aborts a folder.
    A file reached twice (given twice, or through a symlink) is loaded once, under
    the path that is the file itself if one is, else the first path
    (`LoadResult.duplicates` lists the others). Paths
    given explicitly are read even when hidden or a symlinked folder; a given file
    that exists but cannot be read (binary, unreadable, a FIFO...) is skipped like
    one found in a folder, not raised.

    Each skipped file gives one `LoadWarning` naming the file and the reason,
    is listed in `LoadResult.skipped`, and is passed to ``on_skip``.

    Args:
        paths: a file or folder, or several.
        encoding: the codec of the text and CSV files that are not UTF-8 (strictly
            unless ``errors="replace"``), e.g. ``"latin-1"``; files with a byte-order
            mark or valid UTF-8 are read as such whatever it says.
        errors: ``"strict"`` (skip undecodable files) or ``"replace"`` (the explicit
            opt-in to lossy decoding: undecodable bytes become U+FFFD, with one
            `LoadWarning` per file saying how many were replaced). Binary files
            are skipped either way.
        recursive: walk sub-folders of the given folders.
        on_skip: called with each `SkippedFile` after its warning (an exception
            it raises propagates, so it can also abort the load).

    Returns:
        A `LoadResult` with the documents, the skipped files, every file
        considered, the roots and the duplicates.

    Raises:
        FileNotFoundError: a given path does not exist (or is a dangling symlink).
        ValueError: a given file has an unsupported suffix (the message lists the
            supported ones), or ``encoding``/``errors`` is invalid.
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    if encoding is not None:
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise ValueError(f"unknown encoding {encoding!r}") from None

    result = LoadResult()
    unique, result.duplicates = _unique(_candidates(paths, recursive, result.roots))
    for path, identity, problem in unique:
        if path.is_dir() and problem is not None:  # an unreadable folder: not a file
            _skip(result, SkippedFile(identity, problem.reason, problem.hint), on_skip)
            continue
        result.files.append(identity)
        if problem is None:
            try:
                raw = _read_bytes(path)
                result.documents.extend(_READERS[path.suffix.lower()](raw, path, str(identity), encoding, errors))
                continue
            except _Skip as skip:
                problem = skip
            except OSError as exc:
                problem = _Skip("unreadable", _os_error(exc))
        _skip(result, SkippedFile(identity, problem.reason, problem.hint), on_skip)
    return result


def _candidates(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], recursive: bool,
                roots: list[Path]) -> list[tuple[Path, _Skip | None]]:
    """The entries to consider under ``paths`` (walk order), each with a reason to skip
    it; appends the roots (absolute, links not resolved) to ``roots``."""
    candidates: list[tuple[Path, _Skip | None]] = []
    for path in _as_paths(paths):
        if not path.exists():
            if path.is_symlink():
                raise FileNotFoundError(f"no such file or directory: {path} (a symlink to the missing "
                                        f"{os.readlink(path)})")
            raise FileNotFoundError(f"no such file or directory: {path}")
        roots.append(_identity(path))
        if path.is_dir():
            candidates.extend(_walk(path, recursive))
            continue
        if not _supported(path):
            raise ValueError(f"unsupported file type {path.suffix or '(no suffix)'!r}: {path}; "
                             f"supported: {', '.join(SUPPORTED_SUFFIXES)}")
        candidates.append((path, _check_file(path)))
    return candidates


def list_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    recursive: bool = True,
    on_skip: Callable[[SkippedFile], None] | None = None,
) -> LoadResult:
    """The files `load_files` would read, without reading them.

    The same walk and rules as `load_files` (same ``files``, ``roots`` and
    ``vanished``); ``skipped`` holds the entries that cannot be read at all (dangling
    symlinks, unreadable folders, FIFOs...) and ``documents`` stays empty. For loading
    in other processes or machines: ``load_files([path])`` for each path of ``files``
    not in ``skipped`` gives the same documents.
    """
    result = LoadResult()
    unique, result.duplicates = _unique(_candidates(paths, recursive, result.roots))
    for path, identity, problem in unique:
        if not (path.is_dir() and problem is not None):
            result.files.append(identity)
        if problem is not None:
            _skip(result, SkippedFile(identity, problem.reason, problem.hint), on_skip)
    return result


def _skip(result: LoadResult, skipped: SkippedFile, on_skip: Callable[[SkippedFile], None] | None) -> None:
    result.skipped.append(skipped)
    warnings.warn(skipped.message(), LoadWarning, stacklevel=3)
    if on_skip is not None:
        on_skip(skipped)
