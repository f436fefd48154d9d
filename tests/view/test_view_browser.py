"""The HTML views in a real browser (Debian's chromium driven by Playwright).

Checked in the DOM the browser built: every highlighted element's text equals the
source span (CR included: the pages write it as ``&#13;``, which the parser keeps);
clicking a window row, a hit, or a citation scrolls to its span and highlights exactly
it; the pages make no network request, trigger no dialog and no Content-Security-Policy
violation (a hostile document included); a 5 MB document opens and scrolls. Screenshots
are saved as artifacts (their folder is printed).

Needs ``apt-get install chromium`` and ``pip install playwright`` (Playwright's own
browser download is not used). Without them the tests are skipped with the reason
printed; with ``CI`` set they fail instead, naming what is missing. A chromium that is
installed but does not launch fails the tests everywhere.
"""

import os
import shutil
import time
from pathlib import Path

import pytest
from ci_switch import missing
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from test_view_answer import ANSWER, TEXTS, result
from test_view_html import HOSTILE
from test_view_split import CRLF, EMOJI, EN, ZH

from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.view import AnswerView, RetrievalView, WindowsView
from swrag_integrations.core.windows import WindowConfig

pytestmark = pytest.mark.browser

LAUNCH_ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run",
               "--disable-dev-shm-usage"]
MIXED = EN[:700] + ZH[:300] + EMOJI[:300] + CRLF[:400] + HOSTILE


def _say(request, line: str) -> None:
    """Print past pytest's output capture (skip reasons, artifact paths, timings)."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is None or reporter is None:  # pragma: no cover
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


@pytest.fixture(scope="module")
def browser(request):
    """A headless chromium; without Playwright or chromium a skip that says why (a failure when ``CI`` is set).

    A browser that is there but does not launch is a failure, never a skip.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _say(request, f"\nbrowser tests cannot run: playwright is not installed ({exc})")
        missing("playwright", "pip install playwright (the [test] extra; Playwright's own browser download is not used)")
    exe = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if exe is None:
        _say(request, "\nbrowser tests cannot run: no chromium on PATH")
        missing("chromium (no chromium, chromium-browser or google-chrome on PATH)", "apt-get install chromium")
    args = LAUNCH_ARGS + (["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])
    pw = sync_playwright().start()
    try:
        chromium = pw.chromium.launch(executable_path=exe, args=args)
    except Exception as exc:  # noqa: BLE001 - a browser that is there but does not start is a failure
        pw.stop()
        pytest.fail(f"chromium ({exe}) is installed but could not be launched: {str(exc).splitlines()[0]}",
                    pytrace=False)
    yield chromium
    chromium.close()
    pw.stop()


@pytest.fixture(scope="module")
def artifacts(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("view-browser")
    yield folder
    shots = sorted(folder.glob("*.png"))
    if shots:
        _say(request, f"\nview screenshots: {folder} ({', '.join(p.name for p in shots)})")


class Opened:
    """A page opened from a file, with everything it tried recorded."""

    def __init__(self, browser, path: Path, width: int = 1400, height: int = 900):
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.context.on("request", lambda r: self.requests.append(r.url))
        self.context.route(lambda url: not url.startswith("file:"), lambda route: route.abort())
        self.page = self.context.new_page()
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation', "
                                  "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
        started = time.perf_counter()
        self.page.goto(self.url, wait_until="load", timeout=180_000)
        self.load_seconds = time.perf_counter() - started

    def js(self, code: str, arg=None):
        return self.page.evaluate(code, arg)

    def assert_clean(self) -> None:
        """No request but the page itself, no dialog, no script error, no CSP violation."""
        assert [u for u in self.requests if u != self.url] == []
        assert self.dialogs == []
        assert self.errors == []
        assert self.js("window.__csp") == []

    def highlighted(self) -> str:
        return self.js("Array.from(document.querySelectorAll('.hl')).map(e => e.textContent).join('')")

    def first_highlight_visible(self) -> bool:
        """The first highlighted element comes into the window and into its scrolling pane
        (within two seconds: pages rendered on the way may change size)."""
        check = """() => {
            const el = document.querySelector('.hl-first');
            if (!el) return null;
            const r = el.getBoundingClientRect(), p = el.closest('.doc').getBoundingClientRect();
            const visible = r.bottom > 0 && r.top < innerHeight && r.bottom > p.top && r.top < p.bottom;
            return visible ? true : {top: r.top, bottom: r.bottom, pane_top: p.top, pane_bottom: p.bottom};
        }"""
        # polled from here: wait_for_function would evaluate a string, which the page's CSP forbids
        deadline = time.perf_counter() + 2.0
        where = self.js(check)
        while where is not True and time.perf_counter() < deadline:
            self.page.wait_for_timeout(50)
            where = self.js(check)
        assert where is True, f"the highlighted span is not in view: {where}"
        return True

    def segments(self):
        return self.js("Array.from(document.querySelectorAll('.doc .s')).map(e => "
                       "[e.closest('.doc').dataset.doc, +e.dataset.start, +e.dataset.end, e.textContent])")

    def close(self) -> None:
        self.context.close()


def test_windows_page(browser, tmp_path, artifacts):
    text = MIXED
    configs = [WindowConfig("DDS", 24, 2), WindowConfig("FFS", 32, 8)]
    path = WindowsView(text, *configs, source="mixed.txt").save(tmp_path / "windows.html")
    page = Opened(browser, path)
    try:
        segs = page.segments()
        assert len(segs) > 50
        for doc, a, b, shown in segs:  # the DOM text of every segment: CR, NUL and surrogates included
            assert shown == text[a:b], (doc, a, b)
        for doc, config in (("0", configs[0]), ("1", configs[1])):
            spans = list(config.spans(text))
            for i in (0, len(spans) // 2, len(spans) - 1):
                a, b = spans[i]
                page.js("([doc, i]) => swrag.tables[+doc].scrollTo(i)", [doc, i])
                page.page.locator(f'.vtbl[data-table="{doc}"] .row[data-i="{i}"]').click()
                assert page.highlighted() == text[a:b]
                assert page.first_highlight_visible()
            # clicking the text lists the windows that hold it
            off = spans[len(spans) // 2][0] + 1
            seg = page.page.locator(f'.doc[data-doc="{doc}"] .s').filter(
                has=None).nth([s for s in segs if s[0] == doc].index(
                    next(s for s in segs if s[0] == doc and s[1] <= off < s[2])))
            seg.click()
            want = [j for j, (a, b) in enumerate(spans) if a <= off < b]
            shown = page.js("doc => Array.from(document.querySelectorAll("
                            "`.vtbl[data-table='${doc}'] .row.sel`)).map(r => +r.dataset.i)", doc)
            assert shown == want
        page.page.locator('.panel[data-panel="0"] input[data-toggle="bands"]').uncheck()
        assert page.js("document.querySelector('.panel[data-panel=\"0\"]').classList.contains('no-bands')")
        page.page.screenshot(path=str(artifacts / "windows.png"))
        page.assert_clean()
    finally:
        page.close()


def test_linked_scrolling_follows_the_offset(browser, tmp_path):
    text = EN * 4
    path = WindowsView(text, WindowConfig("DDS", 32, 2), WindowConfig("FFS", 48, 12)).save(tmp_path / "linked.html")
    page = Opened(browser, path)
    try:
        page.js("document.querySelector('.doc[data-doc=\"0\"]').scrollTop = 2500")
        page.page.wait_for_timeout(400)
        tops = page.js("""() => Array.from(document.querySelectorAll('.doc.linked')).map(pane => {
            const p = pane.getBoundingClientRect();
            const segs = Array.from(pane.querySelectorAll('.s')).filter(s => {
                const r = s.getBoundingClientRect(); return r.bottom > p.top + 4 && r.height > 0; });
            return [+segs[0].dataset.start, +segs[0].dataset.end, pane.scrollTop];
        })""")
        (a0, b0, top0), (a1, b1, top1) = tops
        assert top0 > 0 and top1 > 0
        assert a1 <= b0 and a0 <= b1 + 400  # the other pane shows the same part of the text
    finally:
        page.close()


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    idx = SlidingWindowIndex(tmp_path_factory.mktemp("browser-index"), embedding=DeterministicFakeEmbedding(size=16),
                             show_progress=False)
    docs = {"en.txt": EN * 3, "zh.txt": ZH * 3, "crlf.txt": CRLF * 3, "hostile.txt": HOSTILE.replace("\ud800", "")}
    idx.add_documents([Document(page_content=t, metadata={"source": n}) for n, t in docs.items()])
    return idx


def test_retrieval_page(browser, tmp_path, artifacts, index):
    view = RetrievalView.from_index(index, "Did the ships see the beam? Second line", k_child=12, budget_tokens=150)
    path = view.save(tmp_path / "retrieval.html")
    docs = {sid: str(i) for i, sid in enumerate(view._source_order())}
    page = Opened(browser, path, height=1000)
    try:
        for doc, a, b, shown in page.segments():
            sid = next(s for s, d in docs.items() if d == doc)
            assert shown == view.sources[sid][a:b]
        for hit in view.hits:
            text = view.sources[hit.source_id]
            row = page.page.locator(f'.tbl.hits .row[data-what="hit {hit.rank}, chunk {hit.chunk_index}"]')
            row.locator("span").first.click()
            assert page.highlighted() == text[hit.start:hit.end]
            assert page.first_highlight_visible()
            row.locator("a.go").click()
            assert page.highlighted() == text[hit.window_start:hit.window_end]
        for i, span in enumerate(view.spans, 1):
            page.page.locator(f'.tbl.spans .row[data-what="context span {i}"]').click()
            assert page.highlighted() == span.text
        page.page.locator(".tbl.hits .row").nth(1).click()
        page.page.screenshot(path=str(artifacts / "retrieval.png"), full_page=True)
        page.assert_clean()
    finally:
        page.close()


def test_answer_citations_scroll_to_and_highlight_their_spans(browser, tmp_path, artifacts):
    data = result()
    data["sources"][0] = {**data["sources"][0], "end_index": len(TEXTS["s-en"]), "text": TEXTS["s-en"]}
    path = AnswerView(data).save(tmp_path / "answer.html")
    page = Opened(browser, path, height=700)
    try:
        answer = page.js("Array.from(document.querySelectorAll('[data-doc=answer] .sent')).map(e => "
                         "[+e.dataset.start, +e.dataset.end, e.textContent])")
        assert [t for _, _, t in answer] == [ANSWER[a:b] for a, b, _ in answer]
        cites = page.page.locator(".answer a.cite")
        sups = [s for sent in data["grounding"]["sentences"] for s in sent["supports"]]
        assert cites.count() == len(sups)
        for i, sup in enumerate(sups):
            page.js("window.scrollTo(0, document.body.scrollHeight)")
            cites.nth(i).click()
            page.page.wait_for_timeout(50)
            assert page.highlighted() == TEXTS[sup["source_id"]][sup["start_index"]:sup["end_index"]]
            assert page.first_highlight_visible()
            assert "on" in cites.nth(i).get_attribute("class")
        cites.nth(3).click()
        page.page.screenshot(path=str(artifacts / "answer.png"))
        page.assert_clean()
    finally:
        page.close()


def test_hostile_documents_run_nothing(browser, tmp_path, artifacts, index):
    answer = "<script>alert('a')</script> " + HOSTILE[:200]
    pages = [
        WindowsView(HOSTILE, WindowConfig("DDS", 16, 1), labels=[HOSTILE[:90]], source=HOSTILE[:50]),
        AnswerView(answer, [{"source": "<img src=x onerror=alert(1)>", "source_id": "<i>", "start_index": 0,
                             "end_index": len(HOSTILE), "text": HOSTILE}], question="<script>alert(2)</script>",
                   grounding={"sentences": [{"text": answer, "start": 0, "end": len(answer), "supported": False,
                                             "score": 0, "supports": [{"source": "x", "source_id": "<i>",
                                                                       "start_index": 3, "end_index": 90}]}]}),
        RetrievalView.from_index(index, "<script>alert(3)</script> javascript: onerror", k_child=30,
                                 budget_tokens=4000),
    ]
    for n, view in enumerate(pages):
        path = view.save(tmp_path / f"hostile{n}.html")
        page = Opened(browser, path)
        try:
            for link in page.page.locator("[data-goto]").all()[:40]:
                link.click()
            counts = page.js("""() => ({scripts: document.scripts.length, imgs: document.images.length,
                frames: document.querySelectorAll('iframe, object, embed, form').length,
                hrefs: document.querySelectorAll('[href], [src], [onerror], [onclick]').length,
                styles: document.querySelectorAll('style').length,
                body: getComputedStyle(document.body).display})""")
            assert counts == {"scripts": 1 + (n == 0), "imgs": 0, "frames": 0, "hrefs": 0, "styles": 1,
                              "body": "block"}
            assert "<script>alert(" in page.js("document.body.textContent")  # shown as text
            if n == 0:
                page.page.screenshot(path=str(artifacts / "hostile.png"))
            page.assert_clean()
        finally:
            page.close()


def test_five_megabyte_document_opens_and_scrolls(browser, tmp_path, artifacts, request):
    paragraph = (EN[:400] + ZH[:120] + "\n\n")
    text = (paragraph * (5_000_000 // len(paragraph) + 1))[:5_000_000]
    config = WindowConfig("FFS", 4000, 2000, unit="char")
    started = time.perf_counter()
    path = WindowsView(text, config, source="5 MB").save(tmp_path / "big.html")
    built = time.perf_counter() - started
    page = Opened(browser, path)
    try:
        pane = ".doc[data-doc=\"0\"]"
        started = time.perf_counter()
        for frac in (0.25, 0.5, 0.75, 1.0):
            page.js(f"(() => {{ const d = document.querySelector('{pane}'); d.scrollTop = d.scrollHeight * {frac}; }})()")
            page.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        scrolled = time.perf_counter() - started
        last = page.js(f"(() => {{ const s = document.querySelectorAll('{pane} .s'); const e = s[s.length - 1]; "
                       "return [+e.dataset.start, +e.dataset.end, e.textContent]; })()")
        assert last[1] == len(text) and last[2] == text[last[0]:last[1]]
        spans = list(config.spans(text))
        n = len(spans) - 1
        page.js("i => swrag.tables[0].scrollTo(i)", n)
        page.page.locator(f'.vtbl .row[data-i="{n}"]').click()
        assert page.highlighted() == text[spans[n][0]:spans[n][1]]
        page.page.screenshot(path=str(artifacts / "big.png"))
        page.assert_clean()
        _say(request, f"\n5 MB document: page built in {built:.1f} s ({path.stat().st_size / 1e6:.1f} MB), "
                      f"opened in {page.load_seconds:.1f} s, scrolled to 4 places in {scrolled:.2f} s")
    finally:
        page.close()
