"""Files and folders loaded as LangChain ``Document`` s (:func:`~swrag_integrations.ingest.files.load_files`)."""

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
    """:func:`swrag_integrations.ingest.files.load_files` with the documents as LangChain
    ``Document`` s (same text, same metadata; the arguments, skips and warnings are its)."""
    result = load_plain_files(paths, encoding=encoding, errors=errors, recursive=recursive, on_skip=on_skip)
    result.documents = [Document(page_content=doc.page_content, metadata=doc.metadata) for doc in result.documents]
    return result
