"""Contextual chunk headers: prompts, exact chunks, cache hit/miss/resume, trimming, failures."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.language_models.llms import LLM

from swrag_integrations.methods.context import ContextualChunkHeaders
from swrag_integrations.methods.context.headers import ContextualEmbeddings, HeaderCache, clean_header, text_to_index
from swrag_integrations.engine.assemble import count_tokens

DOC = Document(
    page_content=(
        "ACME Corp annual report 2023. Revenue grew by 3% over the previous year. "
        "The growth came mostly from the European division. Costs fell slightly. "
        "The board proposes a dividend of 1.20 EUR per share."
    ),
    metadata={"source": "acme.txt"},
)
SPANS = [(0, 29), (30, 73), (74, 150), (150, len(DOC.page_content))]


class RecordingLLM(LLM):
    """Answers from a function of the prompt; records prompts; can raise."""

    answer: Any = None
    prompts: list = []

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _call(self, prompt: str, stop=None, run_manager=None, **kwargs: Any) -> str:
        self.prompts.append(prompt)
        return self.answer(prompt, len(self.prompts))


def recording(fn):
    return RecordingLLM(answer=fn, prompts=[])


def headers_for(llm, **kw):
    kw.setdefault("show_progress", False)
    return ContextualChunkHeaders(llm, model_name="fake", **kw)


def test_headers_in_metadata_text_and_offsets_unchanged():
    llm = FakeListLLM(responses=["Context: \"From ACME's 2023 report.\"", "About revenue.", "Costs.", "Dividend."])
    h = headers_for(llm)
    out = h.annotate(DOC, SPANS)
    assert [d.metadata["context_header"] for d in out] == ["From ACME's 2023 report.", "About revenue.", "Costs.", "Dividend."]
    for d, (a, b) in zip(out, SPANS):
        assert d.page_content == DOC.page_content[a:b]
        assert (d.metadata["start_index"], d.metadata["end_index"]) == (a, b)
    assert text_to_index(out[1]) == "About revenue.\n\n" + out[1].page_content
    r = h.last_report
    assert (r.chunks, r.generated, r.cached, r.llm_calls, r.failed, r.with_header) == (4, 4, 0, 4, 0, 4)


def test_prompt_holds_whole_document_and_chunk():
    llm = recording(lambda p, n: f"header {n}")
    headers_for(llm).annotate(DOC, SPANS[:2])
    assert len(llm.prompts) == 2
    for prompt, (a, b) in zip(llm.prompts, SPANS):
        assert DOC.page_content in prompt
        assert f"<passage>\n{DOC.page_content[a:b]}\n</passage>" in prompt
        assert prompt.index("<document>") < prompt.index("<passage>")  # shared prefix first


def test_split_matches_index_chunking_and_transform_documents():
    llm = recording(lambda p, n: "h")
    h = headers_for(llm, chunk_size=10)
    out = h.transform_documents([DOC, Document(page_content="   ")])
    assert len(out) > 3
    assert "".join(d.page_content for d in out) == DOC.page_content
    assert [d.metadata["chunk_index"] for d in out] == list(range(len(out)))
    assert all(d.metadata["context_header"] == "h" and d.metadata["source"] == "acme.txt" for d in out)
    assert h.last_report.documents == 1


def test_cache_hit_miss_and_keys(tmp_path):
    path = tmp_path / "headers.sqlite"
    first = headers_for(recording(lambda p, n: f"header {n}"), cache_path=path)
    first.annotate(DOC, SPANS)
    assert len(first.cache) == 4

    def boom(p, n):
        raise AssertionError("must not be called on a cache hit")

    again = headers_for(recording(boom), cache_path=path)
    out = again.annotate(DOC, SPANS)
    assert [d.metadata["context_header"] for d in out] == [f"header {i}" for i in range(1, 5)]
    assert (again.last_report.cached, again.last_report.llm_calls) == (4, 0)

    # other model, other prompt, other document text: misses
    for kw in ({"model_name": "other"}, {"chunk_prompt": "Chunk: {chunk} ({max_words} words)"}):
        llm = recording(lambda p, n: "new")
        h = ContextualChunkHeaders(llm, cache_path=path, show_progress=False, **{"model_name": "fake", **kw})
        h.annotate(DOC, SPANS[:1])
        assert h.last_report.generated == 1 and h.last_report.cached == 0
    llm = recording(lambda p, n: "new")
    h = headers_for(llm, cache_path=path)
    h.annotate(Document(page_content=DOC.page_content + " More."), SPANS[:1])
    assert h.last_report.cached == 0
    assert HeaderCache.key("d", 0, 1, "m", "p") != HeaderCache.key("d", 0, 2, "m", "p")


def test_interrupted_run_resumes(tmp_path):
    path = tmp_path / "headers.sqlite"

    def interrupt_third(p, n):
        if n == 3:
            raise KeyboardInterrupt
        return f"header {n}"

    with pytest.raises(KeyboardInterrupt):
        headers_for(recording(interrupt_third), cache_path=path).annotate(DOC, SPANS)
    llm = recording(lambda p, n: f"resumed {n}")
    h = headers_for(llm, cache_path=path)
    out = h.annotate(DOC, SPANS)
    assert (h.last_report.cached, h.last_report.generated, len(llm.prompts)) == (2, 2, 2)
    assert [d.metadata["context_header"] for d in out] == ["header 1", "header 2", "resumed 1", "resumed 2"]


def test_failures_are_counted_not_raised(tmp_path):
    def flaky(p, n):
        if n == 2:
            raise RuntimeError("server down")
        if n == 3:
            return "   "
        return "ok"

    h = headers_for(recording(flaky), cache_path=tmp_path / "c.sqlite")
    out = h.annotate(DOC, SPANS)
    r = h.last_report
    assert (r.failed, r.empty, r.generated, r.with_header, r.without_header) == (1, 1, 2, 2, 2)
    assert "context_header" not in out[1].metadata and "context_header" not in out[2].metadata
    assert "server down" in r.errors[0]
    assert [d.page_content for d in out] == [DOC.page_content[a:b] for a, b in SPANS]
    assert len(h.cache) == 2  # failures are not cached: a later run retries them
    h2 = headers_for(recording(lambda p, n: "fixed"), cache_path=tmp_path / "c.sqlite")
    h2.annotate(DOC, SPANS)
    assert (h2.last_report.cached, h2.last_report.generated) == (2, 2)


def test_long_answers_are_trimmed():
    long = "This passage is part of the ACME annual report. " + "word " * 400
    h = headers_for(FakeListLLM(responses=[long]), max_header_tokens=40)
    out = h.annotate(DOC, SPANS[:1])
    header = out[0].metadata["context_header"]
    assert count_tokens(header) <= 40
    assert header.startswith("This passage is part of the ACME annual report.")
    assert h.last_report.trimmed == 1


def test_clean_header():
    assert clean_header('Context: "In the 2023 report."') == "In the 2023 report."
    assert clean_header("Here is the context:\n  The  passage   covers revenue.") == "The passage covers revenue."
    assert clean_header("  \n ") == ""


def test_long_documents_are_cut_into_sections():
    text = " ".join(f"Paragraph {i} of a long manual." for i in range(200))
    llm = recording(lambda p, n: "h")
    h = headers_for(llm, max_document_tokens=300, chunk_size=50)
    out = h.transform_documents([Document(page_content=text)])
    assert all(d.metadata["context_header"] == "h" for d in out)
    for prompt, chunk in zip(llm.prompts, out):
        assert text not in prompt
        assert chunk.page_content in prompt.split("<passage>")[0]  # its section is in the document part
        assert count_tokens(prompt.split("</document>")[0]) < 400


def test_auto_context_one_call_per_document():
    llm = recording(lambda p, n: "Title: ACME Annual Report 2023\nSummary: Revenue, costs and the dividend of ACME.")
    h = headers_for(llm, mode="auto", chunk_size=10)
    out = h.transform_documents([DOC])
    assert len(llm.prompts) == 1
    assert {d.metadata["context_header"] for d in out} == {
        "Document: ACME Annual Report 2023. Revenue, costs and the dividend of ACME."}
    assert h.last_report.generated == len(out)
    failing = headers_for(recording(lambda p, n: (_ for _ in ()).throw(RuntimeError("x"))), mode="auto", chunk_size=10)
    out = failing.transform_documents([DOC])
    assert failing.last_report.failed == len(out) and all("context_header" not in d.metadata for d in out)


def test_annotate_chunks_checks_text_and_keeps_order():
    llm = recording(lambda p, n: f"h{n}")
    h = headers_for(llm)
    chunks = [Document(page_content=DOC.page_content[a:b], metadata={"source_id": "A", "start_index": a, "end_index": b})
              for a, b in SPANS]
    out = h.annotate_chunks(chunks[::-1], {"A": DOC.page_content})
    assert [d.page_content for d in out] == [c.page_content for c in chunks[::-1]]
    bad = Document(page_content="not in the text", metadata={"source_id": "A", "start_index": 0, "end_index": 15})
    with pytest.raises(ValueError, match="differs"):
        h.annotate_chunks([bad], {"A": DOC.page_content})
    with pytest.raises(ValueError, match="sources"):
        h.annotate_chunks(chunks, {"B": "x"})
    with pytest.raises(ValueError):
        ContextualChunkHeaders(llm, mode="fancy")


class Recorder(Embeddings):
    def __init__(self):
        self.seen = []

    def embed_documents(self, texts):
        self.seen.extend(texts)
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text):
        self.seen.append(text)
        return [1.0, 1.0]


def test_contextual_embeddings_embed_header_plus_chunk():
    h = headers_for(FakeListLLM(responses=["H1", "H2"]))
    out = h.annotate(DOC, SPANS[:2])
    base = Recorder()
    emb = ContextualEmbeddings(base, h.header_map(out))
    emb.embed_documents([out[0].page_content, "unrelated"])
    emb.embed_query("q")
    assert base.seen == ["H1\n\n" + out[0].page_content, "unrelated", "q"]
    assert text_to_index("chunk", None) == "chunk"
