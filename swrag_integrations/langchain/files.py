"""Files and folders loaded as LangChain ``Document`` s (`swrag_integrations.ingest.files.load_files`)."""

from __future__ import annotations

import os
from typing import Callable, Iterable

from langchain_core.documents import Document

from swrag_integrations.ingest.files import LoadResult, SkippedFile
from swrag_integrations.ingest.files import load_files as load_plain_files

__all__ = ["load_files"]


def load_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    encoding: str | None = None,
    errors: str = "strict",
    recursive: bool = True,
    on_skip: Callable[[SkippedFile], None] | None = None,
) -> LoadResult:
    """Load files and folders as LangChain ``Document`` s.

    `swrag_integrations.ingest.files.load_files` with the documents converted (same text,
    same metadata; the formats, skips and warnings are its).

    Args:
        paths: a file or folder, or several.
        encoding: the codec of the text and CSV files that are not UTF-8, e.g. ``"latin-1"``.
        errors: ``"strict"`` (skip undecodable files) or ``"replace"`` (lossy decoding, warned).
        recursive: walk sub-folders of the given folders.
        on_skip: called with each `SkippedFile` after its warning.

    Returns:
        A `LoadResult` whose ``documents`` are LangChain ``Document`` s.
    """
    result = load_plain_files(paths, encoding=encoding, errors=errors, recursive=recursive, on_skip=on_skip)
    result.documents = [Document(page_content=doc.page_content, metadata=doc.metadata) for doc in result.documents]
    return result
