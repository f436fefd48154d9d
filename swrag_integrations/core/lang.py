"""Language detection shared by the prompts, BM25 tokenisation and the evaluation."""

from __future__ import annotations

import re

# Han ideographs (CJK unified, extension A, compatibility, extensions B+).
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
HAN_RUN = re.compile(f"[{HAN}]+")


def contains_cjk(text: str) -> bool:
    """True if ``text`` holds at least one Han character."""
    return HAN_RUN.search(text) is not None
