"""The peer anchors of ``swrag eval`` (evaluation/peers/anchors.py and its faces langchain_peers.py, llama_index_peers.py): shipped parts only, exact spans, budgets."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_text_splitters import RecursiveCharacterTextSplitter

from swrag_integrations.evaluation.context import count_tokens
from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.evaluation.peers.anchors import jieba_preprocess
from swrag_integrations.evaluation.peers.langchain_peers import LangChainEnsemblePipeline, LangChainParentDocumentPipeline
from swrag_integrations.evaluation.peers.llama_index_peers import LlamaIndexSentenceWindowPipeline
from swrag_integrations.evaluation.datasets import Source, build_corpus, load_examples
from swrag_integrations.evaluation.peers.llama_index_hybrid import LlamaIndexHybridPipeline
from swrag_integrations.evaluation.pipelines import build_pipeline
from swrag_integrations.core.windows import DEFAULT_ENCODING

ANCHORS = {
    "langchain-ensemble": LangChainEnsemblePipeline,
    "llamaindex-window": LlamaIndexSentenceWindowPipeline,
    "langchain-parent": LangChainParentDocumentPipeline,
}
try:  # the LlamaIndex hybrid needs llama-index-retrievers-bm25 ([eval]); its own tests say when it is skipped
    HAS_BM25 = importlib.util.find_spec("llama_index.retrievers.bm25") is not None
except ImportError:
    HAS_BM25 = False
if HAS_BM25:
    ANCHORS["llamaindex-hybrid"] = LlamaIndexHybridPipeline
LLAMAINDEX = ("llamaindex-window", "llamaindex-hybrid")  # sentence-window nodes, windows as units
WINDOW = 64  # tokens: RCS chunks / parents of 64, children of 16
EMB = DeterministicFakeEmbedding(size=16)

# English: plain sentences (no abbreviations), so punkt's sentences are known in advance
EN_SENTENCES = [
    f"The {thing} in room {i} was counted by {who} on day {i + 3}."
    for i, (thing, who) in enumerate(
        [("lighthouse lamp", "Alice"), ("copper kettle", "Bob"), ("blue bicycle", "Carol"), ("old piano", "Dave"),
         ("tall ladder", "Erin"), ("green lantern", "Frank"), ("silver spoon", "Grace"), ("wooden boat", "Heidi"),
         ("red umbrella", "Ivan"), ("paper kite", "Judy"), ("glass vase", "Mallory"), ("iron anchor", "Niaj"),
         ("brass compass", "Olivia"), ("stone bench", "Peggy"), ("linen sail", "Rupert"), ("clay pot", "Sybil")]
    )
]
EN_TEXT = " ".join(EN_SENTENCES)
ZH_TEXT = (
    "灯塔管理员在第一天数了四十七艘船。厦门大学的会议在春天举办，来了很多学者。"
    "北京的天气在冬天很冷，常常下雪。西湖边的茶馆里有一把铜壶，已经用了一百年。"
    "长江上的渡船每天早上七点出发，船夫姓王。图书馆三楼收藏着一本清代的地图册。"
) * 3


def en_sentence_bounds() -> list[tuple[int, int]]:
    """Punkt's sentences of EN_TEXT: each runs to the next one's start (its trailing space included)."""
    starts, pos = [], 0
    for s in EN_SENTENCES:
        starts.append(pos)
        pos += len(s) + 1
    return [(a, starts[i + 1] if i + 1 < len(starts) else len(EN_TEXT)) for i, a in enumerate(starts)]


def build(name: str, sources, *, window: int = WINDOW, **kwargs):
    return build_pipeline(EvalConfig(name, window), sources, embeddings=kwargs.pop("embeddings", EMB), **kwargs)


@pytest.fixture()
def closing():
    made = []

    def make(*args, **kwargs):
        pipe = build(*args, **kwargs)
        made.append(pipe)
        return pipe

    yield make
    for pipe in made:
        pipe.close()


def rcs_spans(text: str, size: int) -> list[tuple[int, int]]:
    """LangChain's RCS chunks of ``text`` (tiktoken, no overlap), as offsets."""
    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name=DEFAULT_ENCODING, chunk_size=size, chunk_overlap=0, add_start_index=True)
    return [(d.metadata["start_index"], d.metadata["start_index"] + len(d.page_content))
            for d in splitter.create_documents([text])]


def expected_units(name: str, sid: str, text: str) -> set[tuple[str, int, int]]:
    """Every span the anchor can return for a source (computed without the pipeline)."""
    if name in ("langchain-ensemble", "langchain-parent"):
        return {(sid, a, b) for a, b in rcs_spans(text, WINDOW)}
    assert text == EN_TEXT
    bounds = en_sentence_bounds()
    return {(sid, bounds[max(0, i - 3)][0], bounds[min(len(bounds) - 1, i + 3)][1]) for i in range(len(bounds))}


def assert_exact(pipe, spans) -> None:
    for sid, a, b in spans:
        assert sid in pipe.texts and 0 <= a < b <= len(pipe.texts[sid])


# ------------------------------------------------------------------ shipped parts


def _module(obj) -> str:
    return type(obj).__module__


def test_registry_builds_the_anchor_classes(closing):
    for name, cls in ANCHORS.items():
        assert type(closing(name, [Source("en", EN_TEXT)])) is cls


def test_ensemble_is_langchain_parts(closing):
    pipe = closing("langchain-ensemble", [Source("en", EN_TEXT)])
    ens = pipe.retriever
    assert (_module(ens), type(ens).__name__) == ("langchain_classic.retrievers.ensemble", "EnsembleRetriever")
    assert ens.weights == [0.5, 0.5]
    bm25, dense = ens.retrievers
    assert _module(bm25).startswith("langchain_community.retrievers") and type(bm25).__name__ == "BM25Retriever"
    assert bm25.preprocess_func is jieba_preprocess and bm25.k == 20
    assert _module(bm25.vectorizer).startswith("rank_bm25")
    assert type(dense).__name__ == "VectorStoreRetriever" and _module(dense).startswith("langchain_core")
    assert _module(dense.vectorstore).startswith("langchain_chroma") and dense.search_kwargs == {"k": 20}


def test_parent_is_langchain_parts(closing):
    pipe = closing("langchain-parent", [Source("en", EN_TEXT)], k=5)
    r = pipe.retriever
    assert (_module(r), type(r).__name__) == ("langchain_classic.retrievers.parent_document_retriever",
                                              "ParentDocumentRetriever")
    assert _module(r.vectorstore).startswith("langchain_chroma")
    assert type(r.docstore).__name__ == "InMemoryStore" and _module(r.docstore).startswith("langchain_core")
    for splitter, size in ((r.child_splitter, WINDOW // 4), (r.parent_splitter, WINDOW)):
        assert type(splitter) is RecursiveCharacterTextSplitter
        assert splitter._chunk_size == size and splitter._chunk_overlap == 0 and splitter._add_start_index
    assert r.search_kwargs == {"k": 5}


def test_sentence_window_is_llamaindex_parts(closing):
    pipe = closing("llamaindex-window", [Source("en", EN_TEXT)])
    parts = {
        "parser": (pipe.parser, "SentenceWindowNodeParser"),
        "index": (pipe.index, "VectorStoreIndex"),
        "retriever": (pipe.retriever, "VectorIndexRetriever"),
        "postprocessor": (pipe.postprocessor, "MetadataReplacementPostProcessor"),
    }
    for label, (obj, cls) in parts.items():
        assert _module(obj).startswith("llama_index.core") and type(obj).__name__ == cls, label
    assert pipe.parser.window_size == 3 and pipe.parser.window_metadata_key == "window"
    assert pipe.postprocessor.target_metadata_key == "window"
    assert pipe.retriever._similarity_top_k == 20
    # the embedding wrapper only hands the LangChain embeddings to LlamaIndex
    assert pipe.index._embed_model.langchain_embeddings is EMB


# what may run from the retrieval rooms (the old swrag_integrations/retrieval): the LlamaIndex
# embedding wrapper and the context types/token counter of the shared budgeted assembly
# (evaluation/context.py)
RETRIEVAL_ROOMS = ("engine", "stores", "keyword", "embeddings", "ingest", "langchain", "llama_index")
RETRIEVAL_ALLOWED = {
    "llama_index/index.py": ("MiniLMLlamaIndexEmbedding.",),
    "engine/assemble.py": ("ContextSpan.", "AssembledContext.", "count_tokens"),
}


def test_no_package_ranking_code_runs(closing):
    """Trace every Python call while the anchors index, retrieve and assemble: nothing in
    the retrieval rooms runs except the embedding wrapper, and none of the
    package's own eval ranking (BM25 spans, RRF, offset assembly)."""
    sources = [Source("en", EN_TEXT), Source("zh", ZH_TEXT)]
    for name in ANCHORS:  # import everything first: module bodies are not calls of interest
        closing(name, sources).context("lamp", 200, queries=["kettle"])
    package = Path(__import__("swrag_integrations").__file__).parent
    retrieval_dirs = tuple(str(package / room) + os.sep for room in RETRIEVAL_ROOMS)
    forbidden_eval = {"rrf_spans", "_bm25_index", "_bm25_bytes", "chunk_spans", "assemble_by_offset",
                      "SpanBM25Pipeline.rank", "ParentPipeline.retrieve"}
    seen: set[tuple[str, str]] = set()
    lock = threading.Lock()

    def tracer(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code.co_filename.startswith(str(package)):
                with lock:
                    seen.add((code.co_filename, code.co_qualname))

    sys.setprofile(tracer)
    threading.setprofile(tracer)
    try:
        for name in ANCHORS:
            pipe = closing(name, sources)
            for q, queries in (("lamp in room 0", ()), ("灯塔管理员", ("厦门大学",))):
                pipe.retrieve(q, queries)
                pipe.context(q, 300, queries)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    used = {(f, q) for f, q in seen if f.startswith(retrieval_dirs) and q != "<module>"}
    assert used, "the tracer saw nothing of the embedding wrapper"
    assert any(q.startswith("MiniLMLlamaIndexEmbedding._get_text_embeddings") for _, q in used)
    def room_path(f: str) -> str:
        return Path(f).relative_to(package).as_posix()

    bad = sorted((room_path(f), q) for f, q in used if not q.startswith(RETRIEVAL_ALLOWED.get(room_path(f), ("\0",))))
    assert not bad
    assert not {q for _, q in seen} & forbidden_eval


# --------------------------------------------------------------- document mode


@pytest.mark.parametrize("name", list(ANCHORS))
def test_document_mode_english_spans_are_the_peers_units(name, closing):
    pipe = closing(name, [Source("en", EN_TEXT)], k=1000)
    spans = pipe.retrieve("Who counted the copper kettle?")
    assert_exact(pipe, spans)
    assert len(spans) == len(set(spans))
    assert set(spans) == expected_units(name, "en", EN_TEXT)  # every unit reachable, nothing else
    if name in LLAMAINDEX:
        assert pipe.chunks == len(EN_SENTENCES)  # one node per sentence
    elif name == "langchain-ensemble":
        assert pipe.chunks == len(rcs_spans(EN_TEXT, WINDOW))
    else:  # children: the 16-token RCS pieces of every parent
        assert pipe.chunks == sum(len(rcs_spans(EN_TEXT[a:b], WINDOW // 4)) for a, b in rcs_spans(EN_TEXT, WINDOW))
        assert pipe.chunks > len(rcs_spans(EN_TEXT, WINDOW))


@pytest.mark.parametrize("name", list(ANCHORS))
@pytest.mark.parametrize("budget", [1, 25, 120, 1500])
def test_context_is_ranked_text_within_budget(name, budget, closing):
    pipe = closing(name, [Source("en", EN_TEXT), Source("zh", ZH_TEXT)])
    for question in ("Who counted the copper kettle?", "灯塔管理员数了多少艘船？"):
        ranked = pipe.retrieve(question)
        ctx = pipe.context(question, budget)
        assert ctx.text_tokens == count_tokens(ctx.text) <= budget
        assert ctx.text == "\n\n".join(s.text for s in ctx.spans)
        for s in ctx.spans:  # exact source text
            assert s.text == pipe.texts[s.source_id][s.start : s.end]
        # stock assembly: the ranked texts in order, the last one possibly cut
        got = [(s.source_id, s.start, s.end) for s in ctx.spans]
        if budget > 1:
            assert got, "nothing fitted"
        if got:
            assert got[:-1] == ranked[: len(got) - 1]
            sid, a, b = ranked[len(got) - 1]
            assert got[-1][:2] == (sid, a) and got[-1][2] <= b
        if budget == 1500 and name in LLAMAINDEX:  # overlapping windows are paid for twice
            spans = [(s.start, s.end) for s in ctx.spans if s.source_id == "en"]
            assert any(a1 < b2 and a2 < b1 for i, (a1, b1) in enumerate(spans) for a2, b2 in spans[i + 1:])


def test_chinese_text_is_one_sentence_for_the_sentence_window(closing):
    """Punkt finds no sentence end in Chinese (no space after 。): the whole document is
    one node whose window is the whole text -- the peer's real behaviour."""
    pipe = closing("llamaindex-window", [Source("zh", ZH_TEXT)])
    assert pipe.chunks == 1
    assert pipe.retrieve("厦门大学的会议") == [("zh", 0, len(ZH_TEXT))]
    ctx = pipe.context("厦门大学的会议", 50)
    assert ctx.text == ZH_TEXT[: len(ctx.text)] and count_tokens(ctx.text) <= 50


def test_jieba_preprocess_tokens():
    # lower-cased, search-mode jieba (厦门大学 also as 厦门 / 大学), punctuation and spaces dropped
    assert jieba_preprocess("厦门大学的会议, Hello World! 2024年") == [
        "厦门", "大学", "厦门大学", "的", "会议", "hello", "world", "2024", "年"]
    assert jieba_preprocess("。，！ ") == []


def test_ensemble_bm25_finds_chinese_terms(closing):
    pipe = closing("langchain-ensemble", [Source("zh", ZH_TEXT)], window=32)
    bm25 = pipe.retriever.retrievers[0]
    for term in ("灯塔管理员", "清代的地图册", "渡船"):
        top = bm25.invoke(f"{term}在哪里？")[0]
        assert term in top.page_content
    assert any("地图册" in d.page_content for d in pipe.retriever.invoke("清代的地图册"))


# ----------------------------------------------------------------- corpus mode


CORPUS = (
    [Source(f"en{i}", s) for i, s in enumerate(EN_SENTENCES[:6])]
    + [Source(f"zh{i}", p + "。") for i, p in enumerate(ZH_TEXT[:len(ZH_TEXT) // 3].split("。")[:-1])]
)


@pytest.mark.parametrize("name", list(ANCHORS))
def test_corpus_mode_many_sources(name, closing):
    pipe = closing(name, CORPUS, k=1000)
    spans = pipe.retrieve("Who counted the lighthouse lamp?")
    assert_exact(pipe, spans)
    # every source is a unit of its own here (short texts), and all are reachable
    assert sorted(spans) == sorted((s.source_id, 0, len(s.text)) for s in CORPUS)
    small = closing(name, CORPUS, k=2)
    ctx = small.context("灯塔管理员数了多少艘船？", 1500, queries=["Who counted the lamp?"])
    # at most k units per query (the ensemble: per query and retriever; LlamaIndex: k after fusion)
    most = {"langchain-ensemble": 2 * 2 * 2, "langchain-parent": 2 * 2, "llamaindex-window": 2,
            "llamaindex-hybrid": 2}[name]
    assert 1 <= len(ctx.spans) <= most
    for s in ctx.spans:
        assert s.text == small.texts[s.source_id][s.start : s.end]


@pytest.mark.parametrize("name", list(ANCHORS))
def test_multi_query_fuses_with_the_frameworks_retrievers(name, closing):
    pipe = closing(name, [Source("en", EN_TEXT), Source("zh", ZH_TEXT)] + CORPUS, k=3)
    q1, q2 = "Who counted the blue bicycle?", "长江上的渡船几点出发？"
    one, two = set(pipe.retrieve(q1)), set(pipe.retrieve(q2))
    fused = pipe.retrieve(q1, [q2])
    if name == "llamaindex-window":  # QueryFusionRetriever: reciprocal-rank top k of both lists
        assert len(fused) == len(set(fused))
        assert set(fused) <= one | two and len(fused) == min(3, len(one | two))
    elif name == "llamaindex-hybrid":  # QueryFusionRetriever: top k of the four lists (2 queries x BM25, dense)
        lists = {pipe.windows[n.node.node_id] for r in pipe._fusion_retrievers() for q in (q1, q2)
                 for n in r.retrieve(q)}
        assert len(fused) == len(set(fused)) == min(3, len(lists)) and set(fused) <= lists
    else:  # MultiQueryRetriever: the union of the queries' documents
        assert set(fused) == one | two
        if name == "langchain-parent":
            assert len(fused) == len(set(fused))
        # (the ensemble may repeat a chunk: MultiQueryRetriever de-duplicates by Document
        # equality, and Chroma's copy of a chunk carries an id that BM25's copy lacks)


# ------------------------------------------------------------------ costs, input


@pytest.mark.parametrize("name", list(ANCHORS))
def test_index_bytes_count_texts_and_vectors(name, closing):
    pipe = closing(name, [Source("en", EN_TEXT), Source("zh", ZH_TEXT)])
    text_bytes = len(EN_TEXT.encode()) + len(ZH_TEXT.encode())
    assert pipe.index_bytes >= text_bytes + pipe.chunks * 16 * 4
    if name in LLAMAINDEX:  # every node stores its window too
        assert pipe.index_bytes >= 3 * len(EN_TEXT.encode()) + pipe.chunks * 16 * 4


@pytest.mark.parametrize("name", list(ANCHORS))
def test_empty_input_gives_empty_results(name, closing):
    for sources in ([], [Source("e", "")]):
        pipe = closing(name, sources)
        assert pipe.retrieve("anything") == [] and pipe.context("anything", 100).text == ""
        assert pipe.chunks == 0


@pytest.mark.parametrize("name", list(ANCHORS))
def test_bad_input_clear_errors(name, closing):
    with pytest.raises(TypeError, match="Source"):
        build(name, ["just a string"])
    with pytest.raises(ValueError, match="source_id 'a'"):
        build(name, [Source("a", "one text"), Source("a", "another text")])
    with pytest.raises(ValueError, match="k must be"):
        build(name, [Source("a", EN_TEXT)], k=0)
    with pytest.raises(TypeError, match="embeddings"):
        build(name, [Source("a", EN_TEXT)], embeddings=object())
    pipe = closing(name, [Source("a", EN_TEXT), Source("a", EN_TEXT)])  # a repeated source is one source
    assert len(pipe.sources) == 1
    with pytest.raises(ValueError, match="question"):
        pipe.retrieve("   ")
    with pytest.raises(TypeError, match="question"):
        pipe.retrieve(None)
    with pytest.raises(ValueError, match="question"):
        pipe.context("lamp", 100, queries=[""])
    with pytest.raises(ValueError, match="budget"):
        pipe.context("lamp", -1)


def test_parent_needs_room_for_children():
    with pytest.raises(ValueError, match="window >= 4"):
        build("langchain-parent", [Source("a", EN_TEXT)], window=3)


@pytest.mark.parametrize("name", ["langchain-ensemble", "langchain-parent"])
def test_close_deletes_the_collection(name):
    pipe = build(name, [Source("en", EN_TEXT)])
    coll = pipe._collection
    assert coll.name in [c.name for c in coll.client.list_collections()]
    pipe.close()
    assert coll.name not in [c.name for c in coll.client.list_collections()]


# --------------------------------------------------------- real model, the CLI


@pytest.mark.slow
def test_cli_corpus_mode_real_minilm_on_cmrc(shared_dir, tmp_path, capsys):
    from swrag_integrations.cli import app as top_cli

    rows = (shared_dir / "data" / "eval" / "cmrc2018_corpus.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    data = tmp_path / "cmrc3.jsonl"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code = top_cli.main(["eval", "--data", str(data), "--strategies", ",".join(ANCHORS), "--windows", "512",
                         "--retrieval-only", "--corpus", "--no-progress", "--no-plots", "--bootstrap", "50",
                         "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    results = {r["strategy"]: r for r in json.loads((out / "results.json").read_text(encoding="utf-8"))}
    assert set(results) == set(ANCHORS)
    texts = {s.source_id: s.text for s in build_corpus(load_examples(data))}
    records = [json.loads(line) for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 3 * len(ANCHORS)
    for rec in records:
        assert rec["mode"] == "corpus" and rec["context_tokens"] <= 1500
        assert rec["source_recall"] is not None and rec["span_hit"] is not None
        for sid, a, b in rec["spans"]:
            assert sid in texts and 0 <= a < b <= len(texts[sid])
    for name, row in results.items():
        assert row["n"] == 3 and row["chunks"] > 0 and row["index_bytes"] > 0
        assert 0.0 < row["context_recall"] <= 1.0, name
    # the jieba-aware BM25 finds the gold paragraph of every question among three
    assert results["langchain-ensemble"]["source_recall"] == 1.0
