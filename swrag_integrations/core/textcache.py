"""A small persistent text cache (SQLite), shared by the context steps' contextual
headers and RAPTOR's LLM summaries."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from swrag_integrations.core.paths import private_file

__all__ = ["TextCache"]


class TextCache:
    """Texts on disk (sqlite; ``path=None``: in memory), keyed by a string: the LLM's
    contextual headers and RAPTOR summaries, each under a key its user derives. (The
    table is called ``headers`` for the caches written before it was shared.)"""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            private_file(self.path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path) if self.path is not None else ":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS headers (key TEXT PRIMARY KEY, header TEXT NOT NULL, "
            "model TEXT, created REAL)"
        )
        self._db.commit()

    def get(self, key: str) -> str | None:
        """The text kept under ``key``, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT header FROM headers WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, header: str, model: str = "") -> None:
        """Keep ``header`` (the text) under ``key``, with the ``model`` that wrote it."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO headers (key, header, model, created) VALUES (?, ?, ?, ?)",
                (key, header, model, time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM headers").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
