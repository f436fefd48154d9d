"""swrag_integrations.ingest.files: every input rule, with real files in tmp_path."""

from __future__ import annotations

import io
import os
import random
import warnings
from pathlib import Path

import pytest

from swrag_integrations.ingest import files as files_mod
from swrag_integrations.ingest.files import (
    SUPPORTED_SUFFIXES,
    LoadResult,
    LoadWarning,
    SkippedFile,
    load_files,
)


def load(paths, **kwargs) -> tuple[LoadResult, list[str]]:
    """``load_files`` plus the messages of the LoadWarnings it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = load_files(paths, **kwargs)
    assert all(issubclass(w.category, LoadWarning) for w in caught), [str(w.message) for w in caught]
    return result, [str(w.message) for w in caught]


def texts(result: LoadResult) -> list[str]:
    return [d.page_content for d in result.documents]


def skip_reasons(result: LoadResult) -> list[tuple[str, str]]:
    return [(s.path.name, s.reason) for s in result.skipped]


def _minimal_pdf(pages: list[str]) -> bytes:
    """A valid PDF (Helvetica, one text line per page; "" = a page without text), with an exact xref."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in pages:
        stream = (f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET" if text else "").encode("latin-1")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode('latin-1')}\nendstream")
        content_no = len(objects)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {content_no} 0 R >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for no, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{no} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def _encrypted_pdf(pages: list[str], user_password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_minimal_pdf(pages))))
    writer.encrypt(user_password, "owner-secret", algorithm="RC4-128")  # RC4 needs no extra package
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# --------------------------------------------------------------------------- text


def test_text_files_give_one_document_each_with_the_resolved_source(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\nline two\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# Beta\n\nçà 中文", encoding="utf-8")
    (tmp_path / "c.MARKDOWN").write_text("gamma", encoding="utf-8")
    result, messages = load(tmp_path)
    assert texts(result) == ["alpha\nline two\n", "# Beta\n\nçà 中文", "gamma"]
    assert [d.metadata for d in result.documents] == [
        {"source": str((tmp_path / name).resolve())} for name in ("a.txt", "b.md", "c.MARKDOWN")
    ]
    assert result.skipped == [] and messages == []


def test_utf8_bom_is_stripped(tmp_path):
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    assert texts(load(tmp_path / "bom.txt")[0]) == ["hello"]


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
def test_utf16_and_utf32_with_bom(tmp_path, codec):
    text = "Grüße, 灯塔 \U0001F600"
    bom = {"utf-16-be": b"\xfe\xff", "utf-32-be": b"\x00\x00\xfe\xff"}.get(codec, b"")
    (tmp_path / "wide.txt").write_bytes(bom + text.encode(codec))  # utf-16/utf-32 write their own BOM
    result, messages = load(tmp_path / "wide.txt")
    assert texts(result) == [text] and messages == []


def test_gb18030_chinese_file(tmp_path):
    text = "马罗角灯塔于1871年首次点亮。灯塔有多高？三十二米。"
    (tmp_path / "zh.txt").write_bytes(text.encode("gb18030"))
    result, messages = load(tmp_path / "zh.txt")
    assert texts(result) == [text] and messages == []


def test_latin1_file_is_skipped_with_an_encoding_hint(tmp_path):
    path = tmp_path / "cafe.txt"
    path.write_bytes("café ça".encode("latin-1"))
    result, messages = load(path)
    assert result.documents == []
    assert result.skipped == [SkippedFile(
        path.resolve(), "not UTF-8 text", "looks like cp1252/latin-1: pass encoding='latin-1' (CLI: --encoding latin-1)")]
    assert result.files == [path.resolve()]
    assert len(messages) == 1 and str(path.resolve()) in messages[0] and "not UTF-8 text" in messages[0]


def test_latin1_text_that_also_decodes_as_gb18030_is_not_garbled(tmp_path):
    raw = "Ärger über Öl".encode("latin-1")
    raw.decode("gb18030")  # valid GB18030 bytes ("膔ger 黚er 謑"), yet not Chinese
    (tmp_path / "de.txt").write_bytes(raw)
    result, _ = load(tmp_path)
    assert result.documents == [] and skip_reasons(result) == [("de.txt", "not UTF-8 text")]
    assert "latin-1" in result.skipped[0].hint


def test_cp1252_punctuation_gets_a_cp1252_hint(tmp_path):
    (tmp_path / "quotes.txt").write_bytes("“Café” – 5 €".encode("cp1252"))
    result, _ = load(tmp_path)
    assert result.skipped[0].hint == "looks like cp1252: pass encoding='cp1252' (CLI: --encoding cp1252)"


def test_shift_jis_is_not_taken_for_gb18030(tmp_path):
    (tmp_path / "ja.txt").write_bytes("こんにちは世界、日本語のテキストです。".encode("shift_jis"))
    result, _ = load(tmp_path)
    assert skip_reasons(result) == [("ja.txt", "not UTF-8 text")] and "cp932" in result.skipped[0].hint


def test_encoding_forces_the_codec(tmp_path):
    path = tmp_path / "cafe.txt"
    path.write_bytes("café ça".encode("latin-1"))
    result, messages = load(path, encoding="latin-1")
    assert texts(result) == ["café ça"] and messages == []
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfok")
    assert texts(load(tmp_path / "bom.txt", encoding="utf-8")[0]) == ["ok"]  # utf-8 still strips a BOM
    result, messages = load(path, encoding="utf-8")  # forced and wrong: strict -> skipped
    assert skip_reasons(result) == [("cafe.txt", "not utf-8 text")] and "errors='replace'" in result.skipped[0].hint
    assert len(messages) == 1 and "cafe.txt" in messages[0]


def test_errors_replace_is_the_lossy_opt_in_and_says_how_much(tmp_path):
    path = tmp_path / "cafe.txt"
    path.write_bytes("café ça".encode("latin-1"))
    result, messages = load(path, errors="replace")
    assert texts(result) == ["caf\ufffd \ufffda"] and result.skipped == []
    assert len(messages) == 1 and "cafe.txt" in messages[0] and "2 replacement character(s)" in messages[0]
    valid = tmp_path / "valid.txt"
    valid.write_text("literal \ufffd is not counted", encoding="utf-8")
    result, messages = load(valid, errors="replace")
    assert texts(result) == ["literal \ufffd is not counted"] and messages == []


def test_invalid_encoding_or_errors_argument(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="unknown encoding 'klingon'"):
        load_files(tmp_path, encoding="klingon")
    with pytest.raises(ValueError, match="errors must be 'strict' or 'replace'"):
        load_files(tmp_path, errors="ignore")


# ------------------------------------------------------------------------- binary


def test_binary_file_with_nul_bytes_is_skipped_even_with_errors_replace(tmp_path):
    rng = random.Random(7)
    raw = bytes(rng.randrange(256) for _ in range(4000)) + b"\x00\x00"
    (tmp_path / "noise.txt").write_bytes(raw)
    for kwargs in ({}, {"errors": "replace"}, {"encoding": "latin-1"}):
        result, messages = load(tmp_path, **kwargs)
        assert result.documents == [] and skip_reasons(result) == [("noise.txt", "binary file")]
        assert len(messages) == 1 and "noise.txt" in messages[0] and "binary file" in messages[0]


def test_png_renamed_txt_is_a_binary_file(tmp_path):
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10")
    result, _ = load(tmp_path)
    assert result.skipped == [SkippedFile((tmp_path / "image.txt").resolve(), "binary file", "looks like a PNG image")]


def test_utf16_without_bom_is_binary_unless_the_encoding_is_given(tmp_path):
    (tmp_path / "le.txt").write_bytes("plain words".encode("utf-16-le"))
    result, _ = load(tmp_path)
    assert skip_reasons(result) == [("le.txt", "binary file")] and "utf-16-le" in result.skipped[0].hint
    assert texts(load(tmp_path, encoding="utf-16-le")[0]) == ["plain words"]


def test_bytes_no_encoding_fits_are_a_binary_file(tmp_path):
    (tmp_path / "junk.md").write_bytes(bytes(range(1, 256)) * 4)  # no NUL, but no text either
    result, _ = load(tmp_path)
    assert skip_reasons(result) == [("junk.md", "binary file")]


# -------------------------------------------------------------------------- empty


def test_empty_and_whitespace_files_give_empty_documents(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "spaces.md").write_text("  \n\t\n", encoding="utf-8")
    result, messages = load(tmp_path)
    assert texts(result) == ["", ""] and result.skipped == [] and messages == []
    assert [d.metadata["source"] for d in result.documents] == [
        str((tmp_path / "empty.txt").resolve()), str((tmp_path / "spaces.md").resolve())]


# ---------------------------------------------------------------------------- CSV


def test_csv_rows_keep_todays_format(tmp_path):
    path = tmp_path / "cities.csv"
    path.write_bytes("\ufeffcity,export,note\r\nLyon,silk,\"two\nlines\"\r\n\r\nKyoto,tea,\r\n".encode("utf-8"))
    result, messages = load(path)
    assert texts(result) == ["city: Lyon\nexport: silk\nnote: two\nlines", "city: Kyoto\nexport: tea\nnote: "]
    assert [d.metadata for d in result.documents] == [
        {"source": str(path.resolve()), "row": 0}, {"source": str(path.resolve()), "row": 1}]
    assert messages == []


def test_csv_keeps_duplicate_headers_short_rows_and_extra_fields(tmp_path):
    (tmp_path / "odd.csv").write_text("a,a,b\n1,2,3\n4\n5,6,7,8,9\n", encoding="utf-8")
    result, messages = load(tmp_path)
    assert texts(result) == [
        "a: 1\na: 2\nb: 3",
        "a: 4\na: \nb: ",
        "a: 5\na: 6\nb: 7\ncolumn 4: 8\ncolumn 5: 9",
    ]
    assert [d.metadata["row"] for d in result.documents] == [0, 1, 2]
    assert result.skipped == [] and messages == []


def test_csv_with_a_header_only_or_nothing_gives_no_rows_and_no_error(tmp_path):
    (tmp_path / "header.csv").write_text("a,b\n", encoding="utf-8")
    (tmp_path / "empty.csv").write_bytes(b"")
    result, messages = load(tmp_path)
    assert result.documents == [] and result.skipped == [] and messages == []
    assert result.files == [(tmp_path / "empty.csv").resolve(), (tmp_path / "header.csv").resolve()]


def test_csv_follows_the_encoding_rules(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("ville,plat\nMâcon,crêpe\n".encode("latin-1"))
    result, messages = load(path)
    assert result.documents == [] and skip_reasons(result) == [("latin.csv", "not UTF-8 text")]
    assert len(messages) == 1 and "latin.csv" in messages[0]
    assert texts(load(path, encoding="latin-1")[0]) == ["ville: Mâcon\nplat: crêpe"]
    (tmp_path / "zh.csv").write_bytes("城市,高度\n马罗角,三十二米\n".encode("gb18030"))
    assert texts(load(tmp_path / "zh.csv")[0]) == ["城市: 马罗角\n高度: 三十二米"]
    (tmp_path / "u16.csv").write_bytes("k,v\nx,ü\n".encode("utf-16"))
    assert texts(load(tmp_path / "u16.csv")[0]) == ["k: x\nv: ü"]


# ---------------------------------------------------------------------------- PDF


def test_real_pdf_gives_one_document_pages_joined_by_a_blank_line(tmp_path):
    path = tmp_path / "keepers.pdf"
    path.write_bytes(_minimal_pdf(["First page text.", "Second page text."]))
    result, messages = load(path)
    assert texts(result) == ["First page text.\n\nSecond page text."]
    assert result.documents[0].metadata == {"source": str(path.resolve()), "n_pages": 2}
    assert messages == []


def test_text_file_named_pdf_is_skipped(tmp_path):
    (tmp_path / "notes.pdf").write_text("just some notes", encoding="utf-8")
    result, messages = load(tmp_path)
    assert result.skipped == [SkippedFile(
        (tmp_path / "notes.pdf").resolve(), "not a PDF file", "it does not start with %PDF-; if it is text, rename it to .txt")]
    assert len(messages) == 1 and "notes.pdf" in messages[0]


def test_zero_byte_pdf_is_skipped(tmp_path):
    (tmp_path / "zero.pdf").write_bytes(b"")
    result, messages = load(tmp_path / "zero.pdf")
    assert skip_reasons(result) == [("zero.pdf", "empty PDF file (0 bytes)")]
    assert len(messages) == 1 and "zero.pdf" in messages[0]


def test_broken_pdf_is_skipped_with_the_pypdf_error_not_a_traceback(tmp_path):
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog")
    result, messages = load(tmp_path)
    assert len(result.skipped) == 1 and result.skipped[0].reason.startswith("unreadable PDF (")
    assert len(messages) == 1 and "broken.pdf" in messages[0]


def test_encrypted_pdf_needing_a_password_is_skipped(tmp_path):
    (tmp_path / "locked.pdf").write_bytes(_encrypted_pdf(["Secret minutes."], "hunter2"))
    result, messages = load(tmp_path)
    assert skip_reasons(result) == [("locked.pdf", "encrypted PDF that cannot be read")]
    assert "password" in result.skipped[0].hint
    assert len(messages) == 1 and "locked.pdf" in messages[0]


def test_encrypted_pdf_with_an_empty_user_password_is_read(tmp_path):
    (tmp_path / "open.pdf").write_bytes(_encrypted_pdf(["Public minutes."], ""))
    result, messages = load(tmp_path)
    assert texts(result) == ["Public minutes."] and messages == []


def test_pdf_without_extractable_text_is_skipped(tmp_path):
    (tmp_path / "scan.pdf").write_bytes(_minimal_pdf(["", ""]))
    result, messages = load(tmp_path)
    assert skip_reasons(result) == [("scan.pdf", "no extractable text (scanned PDF?)")]
    assert len(messages) == 1 and "scan.pdf" in messages[0]


def test_pdf_with_some_blank_pages_is_loaded_and_warned_about(tmp_path):
    (tmp_path / "mixed.pdf").write_bytes(_minimal_pdf(["Text here.", "", "More text."]))
    result, messages = load(tmp_path)
    assert texts(result) == ["Text here.\n\n\n\nMore text."] and result.skipped == []
    assert len(messages) == 1 and "mixed.pdf" in messages[0] and "page(s) 2 of 3" in messages[0]


# ------------------------------------------------------------------------ folders


def test_folders_are_walked_sorted_recursively_without_hidden_or_symlinked_folders(tmp_path):
    root = tmp_path / "docs"
    for rel in ("b.txt", "a/z.md", "a.txt", "a/sub/deep.txt", ".git/config.txt", "x/.venv/lib.txt",
                ".hidden.md", "image.png", "tool.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel, encoding="utf-8")
    (root / "loop").symlink_to(root, target_is_directory=True)  # would loop if followed
    result, messages = load(root)
    expected = ["a/sub/deep.txt", "a/z.md", "a.txt", "b.txt"]
    assert texts(result) == expected and messages == []
    assert result.files == [(root / rel).resolve() for rel in expected]
    assert result.roots == [root.resolve()]
    shallow, _ = load(root, recursive=False)
    assert texts(shallow) == ["a.txt", "b.txt"]


def test_hidden_and_symlinked_folders_given_explicitly_are_read(tmp_path):
    hidden = tmp_path / ".notes"
    hidden.mkdir()
    (hidden / "n.txt").write_text("note", encoding="utf-8")
    link = tmp_path / "link"
    link.symlink_to(hidden, target_is_directory=True)
    result, _ = load([hidden, link])  # the same file twice: loaded once
    assert texts(result) == ["note"]
    assert result.roots == [hidden, link]  # as given: links are not resolved
    assert result.documents[0].metadata["source"] == str(hidden / "n.txt")
    assert result.duplicates == [link / "n.txt"]


def test_symlinked_file_is_read_under_the_links_own_path(tmp_path):
    (tmp_path / "real.txt").write_text("real", encoding="utf-8")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "alias.txt").symlink_to(tmp_path / "real.txt")
    result, _ = load(sub)
    assert texts(result) == ["real"] and result.files == [sub / "alias.txt"]
    assert result.documents[0].metadata["source"] == str(sub / "alias.txt")


def test_a_link_beside_its_target_is_a_duplicate_whichever_sorts_first(tmp_path):
    (tmp_path / "b.txt").write_text("bee", encoding="utf-8")
    (tmp_path / "a-link.txt").symlink_to(tmp_path / "b.txt")  # sorts first
    result, _ = load(tmp_path)
    assert texts(result) == ["bee"] and result.files == [tmp_path / "b.txt"]
    assert result.duplicates == [tmp_path / "a-link.txt"]
    assert result.superseded([str(tmp_path / "a-link.txt"), str(tmp_path / "b.txt")]) == [str(tmp_path / "a-link.txt")]


def test_dangling_symlink_in_a_folder_is_skipped(tmp_path):
    (tmp_path / "ok.txt").write_text("ok", encoding="utf-8")
    (tmp_path / "gone.txt").symlink_to(tmp_path / "nowhere.txt")
    result, messages = load(tmp_path)
    assert texts(result) == ["ok"]
    assert skip_reasons(result) == [("gone.txt", "dangling symlink")]  # named by the link (its identity)
    assert str(tmp_path / "gone.txt") in result.skipped[0].hint
    assert len(messages) == 1 and "gone.txt" in messages[0] and "dangling symlink" in messages[0]


def test_unreadable_file_in_a_folder_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    locked = tmp_path / "locked.txt"
    locked.write_text("secret", encoding="utf-8")
    locked.chmod(0)
    try:
        real = files_mod._read_bytes

        def read_bytes(path: Path) -> bytes:  # root ignores the mode bits: refuse like the OS would
            if Path(path).name == "locked.txt":
                raise PermissionError(13, "Permission denied", str(path))
            return real(path)

        monkeypatch.setattr(files_mod, "_read_bytes", read_bytes)
        (tmp_path / "z.txt").write_text("z", encoding="utf-8")
        result, messages = load(tmp_path)
    finally:
        locked.chmod(0o644)
    assert texts(result) == ["a", "z"]
    assert result.skipped == [SkippedFile(locked.resolve(), "unreadable", "permission denied")]
    assert len(messages) == 1 and "locked.txt" in messages[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_special_file_in_a_folder_is_skipped_without_opening_it(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")  # opening it would block
    (tmp_path / "plain.txt").write_text("plain", encoding="utf-8")
    result, messages = load(tmp_path)
    assert texts(result) == ["plain"] and skip_reasons(result) == [("pipe.txt", "not a regular file")]
    assert len(messages) == 1 and "pipe.txt" in messages[0]


def test_missing_path_raises_file_not_found_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_files([tmp_path, tmp_path / "missing.txt"])
    (tmp_path / "dangling.md").symlink_to(tmp_path / "target.md")
    with pytest.raises(FileNotFoundError, match="dangling.md"):
        load_files(tmp_path / "dangling.md")


def test_unsupported_suffix_given_explicitly_is_a_value_error(tmp_path):
    (tmp_path / "report.docx").write_bytes(b"PK\x03\x04")
    with pytest.raises(ValueError, match="report.docx") as info:
        load_files(tmp_path / "report.docx")
    assert all(suffix in str(info.value) for suffix in SUPPORTED_SUFFIXES)
    result, messages = load(tmp_path)  # in a folder it is ignored silently
    assert result.documents == [] and result.skipped == [] and result.files == [] and messages == []


def test_on_skip_gets_each_skipped_file_and_can_abort(tmp_path):
    (tmp_path / "a.pdf").write_bytes(b"")
    (tmp_path / "b.txt").write_bytes(b"\x00\x01")
    (tmp_path / "c.txt").write_text("fine", encoding="utf-8")
    seen: list[SkippedFile] = []
    result, _ = load(tmp_path, on_skip=seen.append)
    assert seen == result.skipped and [s.path.name for s in seen] == ["a.pdf", "b.txt"]
    assert texts(result) == ["fine"]

    def abort(skipped: SkippedFile) -> None:
        raise RuntimeError(f"stop at {skipped.path.name}")

    with pytest.warns(LoadWarning), pytest.raises(RuntimeError, match="stop at a.pdf"):
        load_files(tmp_path, on_skip=abort)


def test_result_lists_files_and_roots_for_vanished_file_detection(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep", encoding="utf-8")
    (folder / "bad.txt").write_bytes(b"\x00")
    single = tmp_path / "single.md"
    single.write_text("single", encoding="utf-8")
    result, _ = load([str(folder), single, folder / "keep.txt"])
    assert result.roots == [folder.resolve(), single.resolve(), (folder / "keep.txt").resolve()]
    assert result.files == [(folder / "bad.txt").resolve(), (folder / "keep.txt").resolve(), single.resolve()]
    assert texts(result) == ["keep", "single"]  # keep.txt given twice: loaded once


def test_vanished_sources_are_those_gone_from_under_the_roots(tmp_path):
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / "keep.txt").write_text("keep", encoding="utf-8")
    (kb / "sub" / "deep.txt").write_text("deep", encoding="utf-8")
    (kb / ".hidden").mkdir()
    (kb / ".hidden" / "h.txt").write_text("h", encoding="utf-8")
    elsewhere = tmp_path / "other" / "gone.txt"
    indexed = [str((kb / name).resolve()) for name in ("keep.txt", "deleted.txt", "sub/deep.txt", ".hidden/h.txt",
                                                       "sub/renamed.md")] + [str(elsewhere)]
    result, _ = load(kb)
    assert result.vanished(indexed) == [indexed[1], indexed[4]]  # not under the roots: not judged
    shallow, _ = load(kb, recursive=False)
    assert shallow.vanished(indexed) == [indexed[1], indexed[4]]  # sub/deep.txt still exists


def test_gb18030_bytes_that_are_not_plausible_chinese_get_a_gb18030_hint(tmp_path):
    (tmp_path / "name.txt").write_bytes("张喆".encode("gb18030"))  # 喆 lies outside GB2312
    result, _ = load(tmp_path)
    assert skip_reasons(result) == [("name.txt", "not UTF-8 text")]
    assert result.skipped[0].hint.endswith("if it is Chinese, pass encoding='gb18030' (CLI: --encoding gb18030)")
    assert texts(load(tmp_path, encoding="gb18030")[0]) == ["张喆"]


def test_unreadable_sub_folder_is_skipped_and_its_files_do_not_look_vanished(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "inside.txt").write_text("inside", encoding="utf-8")
    real_scandir = os.scandir

    def scandir(path):  # root ignores the mode bits: refuse like the OS would
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(files_mod.os, "scandir", scandir)
    result, messages = load(tmp_path)
    assert texts(result) == ["a"]
    assert result.skipped == [SkippedFile(locked.resolve(), "unreadable folder", "permission denied")]
    assert len(messages) == 1 and "locked" in messages[0]
    assert result.vanished([str((locked / "inside.txt").resolve())]) == []
