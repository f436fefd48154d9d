"""Contextual headers reach BM25 and the embedder through ``index_text``; stored text stays exact."""

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from swrag_integrations.methods.context.headers import text_to_index
from swrag_integrations.langchain.index import SlidingWindowIndex
from swrag_integrations.langchain.search import CJKBM25Retriever


class Recording(DeterministicFakeEmbedding):
    seen: list = []

    def embed_documents(self, texts):
        self.seen.extend(texts)
        return super().embed_documents(texts)


def test_headers_are_indexed_but_chunks_stay_exact(tmp_path):
    text = "The pump failed twice in March. " * 8 + "Engineers replaced the valve. " * 8
    headers = {}

    def index_text(chunk: str) -> str:
        return text_to_index(chunk, headers.setdefault(chunk, "Maintenance report of the Zebrafield plant"))

    embedder = Recording(size=16, seen=[])
    index = SlidingWindowIndex(tmp_path / "s", embedding=embedder, show_progress=False, index_text=index_text)
    index.add_documents([Document(page_content=text, metadata={"source": "report.txt"})])
    hits = CJKBM25Retriever.from_index(index, k=3).invoke("Zebrafield")
    assert hits, "the header word is searchable"
    for hit in hits:
        start, end = hit.metadata["start_index"], hit.metadata["end_index"]
        assert hit.page_content == text[start:end] and "Zebrafield" not in hit.page_content
    assert embedder.seen and all(t.startswith("Maintenance report of the Zebrafield plant\n\n") for t in embedder.seen)
    plain = SlidingWindowIndex(tmp_path / "p", embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    plain.add_documents([Document(page_content=text, metadata={"source": "report.txt"})])
    assert CJKBM25Retriever.from_index(plain, k=3).invoke("Zebrafield") == []
