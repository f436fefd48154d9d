"""The LlamaIndex hybrid peer (evaluation/peers/llama_index_hybrid.py): BM25Retriever + vector retriever over
sentence-window nodes, fused by QueryFusionRetriever; its CJK BM25 tokens, k, and a missing package."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from ci_switch import needs
from fake_embeddings import TrigramEmbedder

from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.cli import eval as eval_cli
from swrag_integrations.evaluation.datasets import Source
from swrag_integrations.evaluation.peers.llama_index_hybrid import CJK_TOKEN_PATTERN, LlamaIndexHybridPipeline
from swrag_integrations.evaluation.peers.peer_tuning import PEER_GRIDS, register_peer
from swrag_integrations.evaluation.peers.peer_tuning import main as tuning_main
from swrag_integrations.evaluation.pipelines import build_pipeline, missing_requirement



needs_bm25 = needs("llama_index.retrievers.bm25", how="pip install -e '.[eval]' (llama-index-retrievers-bm25)")

EN_SENTENCES = [f"The {thing} in room {i} was counted by {who} on day {i + 3}." for i, (thing, who) in enumerate(
    [("lighthouse lamp", "Alice"), ("copper kettle", "Bob"), ("blue bicycle", "Carol"), ("old piano", "Dave"),
     ("tall ladder", "Erin"), ("green lantern", "Frank"), ("silver spoon", "Grace"), ("wooden boat", "Heidi")])]
EN_TEXT = " ".join(EN_SENTENCES)
ZH_SENTENCES = ["灯塔管理员在第一天数了四十七艘船。", "厦门大学的会议在春天举办，来了很多学者。", "北京的天气在冬天很冷，常常下雪。",
                "西湖边的茶馆里有一把铜壶，已经用了一百年。", "长江上的渡船每天早上七点出发，船夫姓王。",
                "图书馆三楼收藏着一本清代的地图册。"]
ZH_TEXT = "".join(ZH_SENTENCES)
CJK = {"sentence_splitter": "cjk", "bm25_tokens": "cjk", "window_size": 1}


class ConstantEmbedder:
    """Every text the same vector: the dense ranking carries no information, so what a
    fused ranking finds comes from BM25."""

    def embed_documents(self, texts):
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text):
        return [1.0, 0.0, 0.0, 0.0]


@pytest.fixture()
def made():
    pipes = []

    def make(sources, embeddings=None, k=None, **options):
        name = register_peer("llamaindex-hybrid", options) if options else "llamaindex-hybrid"
        pipe = build_pipeline(EvalConfig(name, 64), sources, k=k, embeddings=embeddings or TrigramEmbedder(dim=32))
        pipes.append(pipe)
        return pipe

    yield make
    for pipe in pipes:
        pipe.close()


def _sentence(pipe, span) -> str:
    sid, a, b = span
    return pipe.texts[sid][a:b]


@needs_bm25
def test_hybrid_is_llamaindex_parts(made):
    pipe = made([Source("en", EN_TEXT)])
    assert isinstance(pipe, LlamaIndexHybridPipeline)
    fusion = pipe.retriever
    assert (type(fusion).__module__, type(fusion).__name__) == ("llama_index.core.retrievers.fusion_retriever",
                                                                "QueryFusionRetriever")
    assert fusion.mode == "reciprocal_rerank" and fusion.num_queries == 1 and fusion.similarity_top_k == 20
    bm25, dense = fusion._retrievers
    assert (type(bm25).__module__, type(bm25).__name__) == ("llama_index.retrievers.bm25.base", "BM25Retriever")
    assert type(dense).__name__ == "VectorIndexRetriever" and dense._similarity_top_k == 20
    assert bm25.token_pattern == r"(?u)\b\w\w+\b" and not bm25.skip_stemming  # as shipped by default
    assert type(fusion._llm).__name__ == "MockLLM"  # never called: num_queries=1
    assert pipe.parser.window_size == 3 and pipe.postprocessor.target_metadata_key == "window"
    assert pipe.chunks == len(EN_SENTENCES)
    # BM25 keeps its own statistics and node dicts: the index is larger than the sentence window's
    window = build_pipeline(EvalConfig("llamaindex-window", 64), [Source("en", EN_TEXT)], embeddings=TrigramEmbedder(32))
    assert pipe.index_bytes > window.index_bytes


@needs_bm25
def test_hybrid_finds_the_english_passage(made):
    pipe = made([Source("en", EN_TEXT)], **CJK)
    question = "Who counted the copper kettle?"
    assert "copper kettle" in pipe.bm25_retriever.retrieve(question)[0].node.text
    top = _sentence(pipe, pipe.retrieve(question)[0])
    assert "copper kettle" in top  # the window of the kettle sentence (window 1: its neighbours too)
    # with an uninformative dense ranking, relative-score fusion follows BM25
    flat = made([Source("en", EN_TEXT)], embeddings=ConstantEmbedder(), fusion="relative_score", weights=[0.5, 0.5],
                **CJK)
    assert "copper kettle" in flat.bm25_retriever.retrieve(question)[0].node.text
    assert "copper kettle" in _sentence(flat, flat.retrieve(question)[0])


@needs_bm25
def test_hybrid_finds_the_chinese_passage_with_cjk_tokens(made):
    question = "长江上的渡船几点出发？"
    pipe = made([Source("zh", ZH_TEXT)], embeddings=ConstantEmbedder(), fusion="relative_score", weights=[0.5, 0.5],
                **CJK)
    assert pipe.bm25_retriever.token_pattern == CJK_TOKEN_PATTERN
    assert pipe.chunks == len(ZH_SENTENCES)  # the CJK sentence splitter
    hits = pipe.bm25_retriever.retrieve(question)
    assert hits[0].node.text == ZH_SENTENCES[4] and hits[0].score > 0
    assert ZH_SENTENCES[4] in _sentence(pipe, pipe.retrieve(question)[0])
    # the shipped tokens: a run of Chinese characters is one token, so no sentence shares one with the question
    shipped = made([Source("zh", ZH_TEXT)], embeddings=ConstantEmbedder(), fusion="relative_score",
                   weights=[0.5, 0.5], sentence_splitter="cjk", bm25_tokens="default", window_size=1)
    assert all(hit.score == 0 for hit in shipped.bm25_retriever.retrieve(question))


@needs_bm25
@pytest.mark.parametrize("k", [1, 2, 5])
def test_k_is_honoured(made, k):
    pipe = made([Source("en", EN_TEXT), Source("zh", ZH_TEXT)], k=k, **CJK)
    assert pipe.fetch == k
    assert pipe.retriever.similarity_top_k == k and pipe.bm25_retriever.similarity_top_k == k
    assert pipe.vector_retriever._similarity_top_k == k
    for question in ("Who counted the copper kettle?", "长江上的渡船几点出发？"):
        spans = pipe.retrieve(question)
        assert len(spans) == k == len(set(spans))
        assert 1 <= len(pipe.retrieve(question, ["图书馆三楼"])) <= k  # multi-query: top k after fusion


@needs_bm25
def test_relative_score_weights_and_bad_options(made):
    pipe = made([Source("zh", ZH_TEXT)], fusion="relative_score", weights=[0.7, 0.3], **CJK)
    assert pipe.retriever.mode == "relative_score" and pipe.retriever._retriever_weights == [0.7, 0.3]
    config = EvalConfig("llamaindex-hybrid", 64)
    for options, match in [({"fusion": "simple"}, "fusion must be one of"),
                           ({"bm25_tokens": "jieba"}, "bm25_tokens must be one of"),
                           ({"weights": [0.7, 0.3]}, "reciprocal_rerank ignores"),
                           ({"fusion": "relative_score", "weights": [1.0]}, "weights must be two")]:
        with pytest.raises(ValueError, match=match):
            LlamaIndexHybridPipeline([Source("zh", ZH_TEXT)], config, embeddings=TrigramEmbedder(32), **options)


@needs_bm25
def test_every_grid_configuration_builds_and_retrieves(made):
    grid = PEER_GRIDS["llamaindex-hybrid"]
    assert grid[0] == {} and len(grid) <= 10
    for options in grid:
        pipe = made([Source("zh", ZH_TEXT), Source("en", EN_TEXT)], **options)
        assert pipe.retrieve("长江上的渡船几点出发？"), options


# ------------------------------------------------------------------ without the package


@pytest.fixture()
def no_bm25(monkeypatch):
    """As if llama-index-retrievers-bm25 were not installed."""
    monkeypatch.setitem(sys.modules, "llama_index.retrievers.bm25", None)


def test_missing_package_is_named(no_bm25):
    reason = missing_requirement("llamaindex-hybrid")
    assert reason and "llama-index-retrievers-bm25" in reason and "pip install" in reason
    assert missing_requirement("llamaindex-window") is None
    with pytest.raises(ImportError, match="llama-index-retrievers-bm25"):
        LlamaIndexHybridPipeline([Source("en", EN_TEXT)], EvalConfig("llamaindex-hybrid", 64),
                                 embeddings=TrigramEmbedder(32))


def test_eval_skips_the_peer_without_its_package(no_bm25, tmp_path, capsys):
    data = tmp_path / "tiny.jsonl"
    row = {"input": "What is the code?", "context": "The code is 4711. " * 20, "answers": ["4711"], "_id": "q1"}
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code = eval_cli.main(["--data", str(data), "--strategies", "llamaindex-hybrid,rcs", "--windows", "64",
                          "--retrieval-only", "--no-progress", "--no-plots", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "skipping llamaindex-hybrid" in err and "llama-index-retrievers-bm25" in err
    assert {r["strategy"] for r in json.loads((out / "results.json").read_text())} == {"rcs"}
    # nothing else to run: a usage error naming the reason, not a crash
    assert eval_cli.main(["--data", str(data), "--strategies", "llamaindex-hybrid", "--windows", "64",
                          "--retrieval-only", "--no-progress", "--no-plots", "--out", str(tmp_path / "o2")]) == 2
    assert "no strategy can run" in capsys.readouterr().err
    # peer tuning skips it too
    assert tuning_main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "t"), "--datasets", "qasper",
                        "--peers", "llamaindex-hybrid", "--write", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert "skipping llamaindex-hybrid" in err and "no peer can run" in err
