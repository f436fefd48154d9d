"""Make the README screenshots of the three views (docs/images/view-*.png).

    python docs/images/view_screenshots.py

Needs chromium (apt-get install chromium) and playwright (pip install playwright); the
retrieval view indexes the bundled sample with the bundled MiniLM embeddings. The
answer view uses a hand-written grounding result of the shape documented in
docs/view.md (its supports are exact spans of the sample).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(OUT.parents[1]))

from swrag_integrations.cli import sample_path  # noqa: E402
from swrag_integrations.view import AnswerView, RetrievalView, WindowsView  # noqa: E402
from swrag_integrations.core.windows import WindowConfig  # noqa: E402

QUESTION = "When was the Marrow Point Lighthouse first lit?"


def answer_view(text: str) -> AnswerView:
    def support(piece: str, score: float) -> dict:
        a = text.index(piece)
        return {"source": "sample.md", "source_id": "sample", "start_index": a, "end_index": a + len(piece),
                "score": score, "text": piece}

    answer = ("The lighthouse was first lit on 14 October 1874. It is 31 metres tall. "
              "It was painted blue in 1960.")
    s = ["The lighthouse was first lit on 14 October 1874.", "It is 31 metres tall.", "It was painted blue in 1960."]
    grounding = {"answer": answer, "sentences": [
        {"text": s[0], "supported": True, "score": 0.93,
         "supports": [support("first lit on 14 October 1874", 0.93), support("于1874年10月14日首次点亮", 0.61)]},
        {"text": s[1], "supported": True, "score": 0.82,
         "supports": [support("The tower is 31 metres tall", 0.82), support("灯塔高31米", 0.55)]},
        {"text": s[2], "supported": False, "score": 0.12, "supports": [],
         "unsupported_claims": [{"text": "1960", "kind": "date", "start": answer.index("1960"),
                                 "end": answer.index("1960") + 4}], "reasons": ["low_score", "unsupported_claims"]},
    ]}
    cut, resume = text.index("\n\nThe light flashes"), text.index("Today the lighthouse")
    sources = [{"source": "sample.md", "source_id": "sample", "start_index": 0, "end_index": cut, "text": text[:cut]},
               {"source": "sample.md", "source_id": "sample", "start_index": resume, "end_index": len(text),
                "text": text[resume:]}]
    return AnswerView({"question": "When was the lighthouse first lit, and how tall is it?", "answer": answer,
                       "sources": sources, "grounding": grounding})


def main() -> None:
    from playwright.sync_api import sync_playwright

    from swrag_integrations.langchain.index import SlidingWindowIndex
    from swrag_integrations.ingest.files import load_files

    text = sample_path().read_text(encoding="utf-8")
    work = Path(tempfile.mkdtemp(prefix="swrag-shots-"))
    index = SlidingWindowIndex(work / "index", show_progress=False)
    index.engine.index_documents(load_files([sample_path()]).documents)
    pages = {
        "split": (WindowsView(text, WindowConfig("DDS", 64, 2), WindowConfig("FFS", 64, 16), source="sample.md"),
                  ["document.querySelector('.vtbl[data-table=\"0\"] .row[data-i=\"3\"]').click()",
                   "document.querySelectorAll('.doc[data-doc=\"1\"] .s')[8].click()"], 900, False),
        "retrieval": (RetrievalView.from_index(index, QUESTION, k_child=10, budget_tokens=200),
                      ["document.querySelectorAll('.tbl.hits .row[data-goto]')[0].click()",
                       "window.scrollTo(0, 0)"], 1200, False),
        "answer": (answer_view(text), ["document.querySelector('.answer a.cite[data-n=\"3\"]').click()"], 820, False),
    }
    args = ["--disable-gpu", "--no-first-run"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=args)
        for name, (view, actions, height, full) in pages.items():
            path = view.save(work / f"{name}.html")
            page = browser.new_page(viewport={"width": 1400, "height": height}, device_scale_factor=1)
            page.goto(path.as_uri())
            for js in actions:
                page.evaluate(js)
                page.wait_for_timeout(300)
            page.wait_for_timeout(1000)  # the highlight's flash animation
            out = OUT / f"view-{name}.png"
            page.screenshot(path=str(out), full_page=full)
            print(f"wrote {out}")
            page.close()
        browser.close()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
