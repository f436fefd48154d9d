"""Unit tests: BM25 tokenisation/persistence, RRF fusion, multi-query parsing, span assembly."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import asyncio
from pathlib import Path

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.retrievers import BaseRetriever

from swrag_integrations.keyword.bm25 import BM25Index, tokenize
from swrag_integrations.langchain.search import CJKBM25Retriever, HybridRetriever
from swrag_integrations.engine.assemble import ContextSpan, assemble_context, count_tokens, merge_spans
from swrag_integrations.langchain.multi_query import MultiQueryFusionRetriever, generate_queries, parse_query_variants
from swrag_integrations.langchain.convert import spans_to_documents
from swrag_integrations.langchain.fusion import reciprocal_rank_fusion

# ----------------------------------------------------------------------- BM25


def test_tokenize_english_lowercase_words():
    # an apostrophe splits words as Milvus' analyser does; "it" and the clitic "s" are stop words
    assert tokenize("The Quick, brown FOX -- jumps! It's 2024.") == ["quick", "brown", "fox", "jumps", "2024"]
    assert tokenize("The the", stopwords=False) == ["the", "the"]


def test_tokenize_chinese_uses_jieba():
    tokens = tokenize("我们在北京大学学习自然语言处理。")
    assert "北京" in tokens and "大学" in tokens and "自然语言" in tokens
    assert "。" not in tokens and "在" not in tokens  # punctuation and stopwords dropped
    assert all(len(t) < 6 for t in tokens)  # not one whitespace-free blob like str.split


def test_tokenize_mixed_text():
    tokens = tokenize("GPT-4模型在2023年发布, OpenAI公司")
    assert {"gpt", "4", "模型", "2023", "发布", "openai", "公司"} <= set(tokens)


def test_bm25_chinese_retrieval_beats_str_split():
    texts = ["北京是中国的首都，有很多大学。", "上海是一个国际金融中心。", "广州的早茶非常有名。"]
    retriever = CJKBM25Retriever.from_texts(texts, ids=["bj", "sh", "gz"], k=1)
    assert [d.id for d in retriever.invoke("金融中心在哪里")] == ["sh"]
    assert [d.id for d in retriever.invoke("早茶")] == ["gz"]
    doc = retriever.invoke("首都")[0]
    assert doc.page_content == texts[0] and doc.metadata["bm25_score"] > 0


def test_bm25_index_upsert_delete_and_persist_without_pickle(tmp_path):
    index = BM25Index()
    index.upsert(["a", "b", "c"], ["apples and pears", "pears and plums", "cherries"])
    assert [i for i, _ in index.search("pears", 5)] in (["a", "b"], ["b", "a"])
    index.upsert(["a"], ["bananas"])  # replace
    assert [i for i, _ in index.search("pears", 5)] == ["b"]
    assert index.delete(["b", "zzz"]) == 1
    assert index.search("pears", 5) == []
    assert index.search("nothing matches", 3) == []
    index.save(tmp_path / "bm25")
    for npy in Path(tmp_path / "bm25").rglob("*.npy"):
        np.load(npy, allow_pickle=False)  # would raise for object arrays
    assert not list(Path(tmp_path / "bm25").rglob("*.pkl"))
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded.ids == index.ids
    assert loaded.search("bananas", 2) == index.search("bananas", 2)
    with pytest.raises(ValueError):
        index.search("x", 0)


def _rewrite_saved_matrix(raw: bytes, name: str, content: bytes) -> bytes:
    """``raw`` (:meth:`BM25Index.to_bytes`) with the saved bm25s file ``name`` replaced."""
    import io

    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["bm25s/" + name] = np.frombuffer(content, dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def test_bm25_saved_score_matrix_is_checked_at_load_and_recomputed_when_unreadable(caplog):
    """The saved score matrix is derived from the tokens: one that disagrees with them is
    refused at load, one that bm25s cannot read back is computed again (with a warning),
    never served broken."""
    index = BM25Index()
    index.upsert(["a", "b", "c"], ["apples and pears", "pears and plums", "cherries"])
    raw = index.to_bytes()
    wrong = _rewrite_saved_matrix(raw, "params.index.json", b'{"num_docs": 7}')
    with pytest.raises(ValueError, match="score matrix vs documents"):
        BM25Index.from_bytes(wrong)
    broken = BM25Index.from_bytes(_rewrite_saved_matrix(raw, "data.csc.index.npy", b"not an array"))
    with caplog.at_level("WARNING"):
        assert broken.search("pears plums", 3) == index.search("pears plums", 3)
    assert "computing it again" in caplog.text
    # an index loaded and saved again without a search keeps the matrix as it was
    again = BM25Index.from_bytes(BM25Index.from_bytes(raw).to_bytes())
    assert again.search("cherries", 2) == index.search("cherries", 2)


def test_bm25_retriever_validation():
    with pytest.raises(ValueError):
        CJKBM25Retriever.from_texts(["a"], k=0)
    retriever = CJKBM25Retriever.from_texts(["hello world"])
    with pytest.raises(ValueError):
        retriever.invoke("   ")


# --------------------------------------------------------------------- fusion


def _doc(text, id=None, **meta):
    return Document(page_content=text, metadata=meta, id=id)


def test_rrf_dedupes_by_id_and_keeps_metadata():
    a = [_doc("same text", "1", source="x", start_index=0), _doc("other", "2", source="x")]
    b = [_doc("same text", "3", source="y"), _doc("same text", "1", extra="from-b")]
    fused = reciprocal_rank_fusion([a, b], [1.0, 1.0], c=60, list_names=["bm25", "dense"])
    ids = [d.id for d in fused]
    assert sorted(ids) == ["1", "2", "3"]  # same text, different ids: not merged
    top = fused[0]
    assert top.id == "1"
    assert top.metadata["source"] == "x" and top.metadata["extra"] == "from-b" and top.metadata["start_index"] == 0
    assert top.metadata["bm25_rank"] == 1 and top.metadata["dense_rank"] == 2
    assert top.metadata["rrf_score"] == pytest.approx(1 / 61 + 1 / 62)
    assert [d.metadata["fused_rank"] for d in fused] == [1, 2, 3]
    assert a[0].metadata == {"source": "x", "start_index": 0}  # inputs untouched


def test_rrf_weights_and_k_and_span_keys():
    a = [_doc("A", source_id="s", start_index=0, end_index=1)]
    b = [_doc("B", source_id="s", start_index=5, end_index=6), _doc("A again", source_id="s", start_index=0, end_index=1)]
    fused = reciprocal_rank_fusion([a, b], [0.0, 1.0], k=1)
    assert len(fused) == 1 and fused[0].page_content == "B"
    fused = reciprocal_rank_fusion([a, b])
    assert fused[0].page_content == "A"  # span key merged the two A's
    no_ids = reciprocal_rank_fusion([[_doc("t")], [_doc("t")]])
    assert len(no_ids) == 2  # never merged by text
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([a], [1.0, 2.0])


class ListRetriever(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [d for d in self.docs if any(w in d.page_content for w in query.split())] or list(self.docs)


def test_hybrid_retriever_sync_async():
    r1 = ListRetriever(docs=[_doc("cat", "1"), _doc("dog", "2")])
    r2 = ListRetriever(docs=[_doc("dog", "2"), _doc("cow", "3")])
    hybrid = HybridRetriever(retrievers=[r1, r2], weights=[0.5, 0.5], k=2, names=["bm25", "dense"])
    docs = hybrid.invoke("dog")
    assert [d.id for d in docs] == ["2"]
    assert [d.id for d in asyncio.run(hybrid.ainvoke("dog"))] == [d.id for d in docs]
    with pytest.raises(ValueError):
        HybridRetriever(retrievers=[r1], k=0)


# ---------------------------------------------------------------- multi-query

Q = "What is the capital of France?"

MESSY = [
    ("1. Which city is France's capital?\n2. Name the capital city of France.\n3. France capital?", 3),
    ("Here are 3 alternative versions of your question:\n\n1) Which city is France's capital?\n\n2) Name the capital city of France.\n3) France capital?", 3),
    ("Sure! Here you go:\n- Which city is France's capital?\n* Name the capital city of France.\n• France capital?", 3),
    ("**1.** \"Which city is France's capital?\"\n**2.** Name the capital city of France.", 2),
    ("Q1: Which city is France's capital?\nQ2: Which city is France's capital?\nQ3: what is the capital of france", 1),
    ('["Which city is France\'s capital?", "Name the capital city of France."]', 2),
    ("1. Which city is France's capital? 2. Name the capital city of France. 3. France capital?", 3),
    ("以下是改写后的问题：\n1、法国的首都是哪座城市？\n2、法国首都叫什么？", 2),
    ("(1) Which city is France's capital?\n(2) Name the capital city of France.", 2),
]


@pytest.mark.parametrize("output,expected", MESSY)
def test_parse_messy_outputs(output, expected):
    queries = parse_query_variants(output, Q, 5)
    assert queries[0] == Q
    variants = queries[1:]
    assert len(variants) == expected, variants
    for v in variants:
        assert not v[0].isdigit() and not v.startswith(("-", "*", "•", "(", "Q1", "\"", "1、"))
        assert not v.lower().startswith(("here", "sure", "以下"))


def test_parse_echoed_prompt_and_limits():
    prompt = f"Rewrite the question below in 3 different ways.\nWrite one per line.\n\nQuestion: {Q}"
    output = prompt + "\nWhich city is France's capital?\nFrench capital city name?\nThird one?\nFourth?"
    queries = parse_query_variants(output, Q, 2, prompt=prompt)
    assert queries == [Q, "Which city is France's capital?", "French capital city name?"]
    assert parse_query_variants("", Q) == [Q]
    assert parse_query_variants("\n\n  \n1.\n-\n", Q) == [Q]
    with pytest.raises(ValueError):
        parse_query_variants("x", "  ")


class RaisingLLM(FakeListLLM):
    def _call(self, *args, **kwargs):
        raise RuntimeError("model crashed")

    async def _acall(self, *args, **kwargs):
        raise RuntimeError("model crashed")


def test_generate_queries_and_fallback():
    llm = FakeListLLM(responses=["Here are the questions:\n1. Which city is France's capital?\n2. Paris is the capital of which country?"])
    assert generate_queries(llm, Q, 3) == [Q, "Which city is France's capital?", "Paris is the capital of which country?"]
    assert generate_queries(RaisingLLM(responses=["x"]), Q, 3) == [Q]
    assert generate_queries(FakeListLLM(responses=["Sure!\n\n"]), Q, 3) == [Q]
    assert generate_queries(None, Q, 3) == [Q]


def test_multi_query_retriever_fuses_and_falls_back():
    docs = [_doc("paris is the capital", "p"), _doc("france is a country", "f"), _doc("berlin", "b")]
    base = ListRetriever(docs=docs)
    llm = FakeListLLM(responses=["1. paris\n2. country"])
    mq = MultiQueryFusionRetriever(retriever=base, llm=llm, n_variants=2)
    out = mq.invoke("capital")
    assert {d.id for d in out} >= {"p", "f"}
    assert out[0].metadata["queries"] == ["capital", "paris", "country"]
    assert len({d.id for d in out}) == len(out)
    fallback = MultiQueryFusionRetriever(retriever=base, llm=RaisingLLM(responses=["x"]), n_variants=2)
    assert [d.id for d in fallback.invoke("capital")] == ["p"]
    out_async = asyncio.run(MultiQueryFusionRetriever(retriever=base, llm=FakeListLLM(responses=["1. paris\n2. country"]), n_variants=2).ainvoke("capital"))
    assert [d.id for d in out_async] == [d.id for d in out]
    assert [d.id for d in asyncio.run(fallback.ainvoke("capital"))] == ["p"]
    with pytest.raises(ValueError):
        mq.invoke("")


# ------------------------------------------------------------------ assembly

TEXT = "".join(f"Sentence {i} says something. " for i in range(200))


def _span(a, b, source="s", **kw):
    return ContextSpan(source, a, b, TEXT[a:b], **kw)


def test_merge_overlapping_and_adjacent_spans():
    spans = merge_spans([_span(100, 300), _span(250, 400), _span(400, 450), _span(0, 50), _span(600, 700, "t")])
    got = [(s.source_id, s.start, s.end) for s in spans]
    assert got == [("s", 100, 450), ("s", 0, 50), ("t", 600, 700)]
    for s in spans[:2]:
        assert s.text == TEXT[s.start:s.end]  # no duplicated text
    assert spans[0].metadata["merged_ranks"] == [1, 2, 3]


def test_assemble_budget_in_rank_order():
    items = [_span(1000, 1600), _span(1300, 2200), _span(0, 900), _span(3000, 3600)]
    ctx = assemble_context(items, 200)
    assert ctx.n_tokens <= 200 and ctx.truncated
    first = ctx.spans[0]
    assert first.start == 1000 and first.text == TEXT[first.start:first.end]
    assert sum(count_tokens(s.text) for s in ctx.spans) <= 200
    unlimited = assemble_context(items, None)
    assert unlimited.n_tokens == sum(count_tokens(TEXT[a:b]) for a, b in [(1000, 2200), (0, 900), (3000, 3600)])
    assert "\n\n" in unlimited.text


def test_assemble_keeps_focus_when_trimming():
    ctx = assemble_context([_span(0, 3000, focus=(2500, 2600))], 40)
    span = ctx.spans[0]
    assert span.start <= 2500 < span.end and span.text == TEXT[span.start:span.end]


def test_assemble_documents_and_errors():
    docs = [Document(page_content=TEXT[10:50], metadata={"source_id": "s", "start_index": 10, "end_index": 50}),
            Document(page_content=TEXT[40:90], metadata={"source_id": "s", "start_index": 40, "end_index": 90})]
    ctx = assemble_context(docs, 1500)
    assert [(s.start, s.end) for s in ctx.spans] == [(10, 90)]
    assert spans_to_documents(ctx.spans)[0].page_content == TEXT[10:90]
    with pytest.raises(ValueError):
        assemble_context(docs, 0)
    with pytest.raises(ValueError):
        ContextSpan("s", 0, 10, "short")
    with pytest.raises(ValueError):
        assemble_context([Document(page_content="x")], 10)
    assert assemble_context([], 10).spans == []
    ctx = assemble_context([_span(0, 10), _span(100, 110), _span(200, 210)], None, max_spans=2)
    assert len(ctx.spans) == 2


def test_the_engine_fuses_plain_documents_without_a_framework():
    """The fusion itself is framework-free (issue 40): plain documents in, (document,
    metadata) pairs out; the LangChain face only wraps them as Documents."""
    from swrag_integrations.engine.fusion import fuse_documents
    from swrag_integrations.stores.storage import PlainDocument

    a = [PlainDocument(page_content="same text", metadata={"source": "x"}, id="1"),
         PlainDocument(page_content="other", metadata={}, id="2")]
    b = [PlainDocument(page_content="same text", metadata={"extra": "b"}, id="1")]
    fused = fuse_documents([a, b], list_names=["bm25", "dense"])
    assert [doc.id for doc, _ in fused] == ["1", "2"]
    assert fused[0][0] is a[0] and fused[0][1] == {"source": "x", "extra": "b", "bm25_rank": 1, "dense_rank": 1,
                                                    "rrf_score": pytest.approx(2 / 61), "fused_rank": 1}
    assert a[0].metadata == {"source": "x"}
    langchain_fused = reciprocal_rank_fusion([a, b], list_names=["bm25", "dense"])
    assert [(d.id, d.metadata) for d in langchain_fused] == [(doc.id, meta) for doc, meta in fused]


def test_a_span_becomes_a_langchain_document_in_the_face_and_reads_back_the_same():
    """ContextSpan builds no framework object (issue 40): its document metadata and id are
    its own, the LangChain face wraps them, and from_document reads the span back."""
    from swrag_integrations.engine.assemble import ContextSpan
    from swrag_integrations.langchain.convert import span_to_document

    span = ContextSpan("s", 10, 50, TEXT[10:50], score=0.5, rank=2, metadata={"topic": "sea"}, n_tokens=9)
    doc = span_to_document(span)
    assert isinstance(doc, Document) and doc.id == "s:10-50" == span.span_id
    assert doc.metadata == {"topic": "sea", "source_id": "s", "start_index": 10, "end_index": 50, "score": 0.5,
                            "rank": 2, "n_tokens": 9} == span.document_metadata()
    back = ContextSpan.from_document(doc)
    assert (back.source_id, back.start, back.end, back.text, back.score, back.rank) == ("s", 10, 50, TEXT[10:50], 0.5, 2)
    assert not hasattr(span, "to_document")
