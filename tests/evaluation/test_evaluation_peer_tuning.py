"""Peer configurations and their tuning on the tuning half (evaluation/peer_tuning.py, issue 29)."""

from __future__ import annotations

import json
import re

import pytest
from fake_embeddings import TrigramEmbedder

from swrag_integrations.evaluation.pipelines import EvalConfig
from swrag_integrations.evaluation.langchain_pipelines import rcs_splitter
from swrag_integrations.evaluation.peers.langchain_peers import LangChainEnsemblePipeline, LangChainParentDocumentPipeline
from swrag_integrations.evaluation.peers.llama_index_peers import LlamaIndexSentenceWindowPipeline, cjk_sentence_splitter
from swrag_integrations.evaluation.datasets import Source
from swrag_integrations.evaluation.peers.peer_tuning import (
    PEER_GRIDS,
    _candidates,
    choose,
    load_peer_config,
    main,
    peer_strategy_name,
    register_peer,
    tune_peers,
    write_choices,
)
from swrag_integrations.evaluation.peers.peers import _tuned_strategies
from swrag_integrations.evaluation.pipelines import PIPELINES, build_pipeline
from swrag_integrations.core.windows import DEFAULT_ENCODING

EMB = TrigramEmbedder(dim=32)
ZH_SENTENCES = ["灯塔管理员在第一天数了四十七艘船。", "厦门大学的会议在春天举办，来了很多学者！", "北京的天气冷吗？",
                "西湖边的茶馆里有一把铜壶；", "他说：“已经用了一百年。”", "长江上的渡船每天早上七点出发……",
                "船夫姓王\n", "图书馆三楼收藏着一本清代的地图册。"]
ZH_TEXT = "".join(ZH_SENTENCES)


def zh_bounds(sentences=ZH_SENTENCES) -> list[tuple[int, int]]:
    """Offsets of each sentence of ZH_TEXT (known by construction)."""
    out, pos = [], 0
    for s in sentences:
        out.append((pos, pos + len(s)))
        pos += len(s)
    return out


@pytest.fixture()
def made():
    pipes = []
    yield pipes
    for pipe in pipes:
        pipe.close()


def build(name: str, sources, made, window: int = 64):
    pipe = build_pipeline(EvalConfig(name, window), sources, embeddings=EMB)
    made.append(pipe)
    return pipe


# ---------------------------------------------------------------- CJK splitters


def test_cjk_sentence_splitter_cuts_chinese_sentences_at_exact_offsets():
    pieces = cjk_sentence_splitter()(ZH_TEXT)
    assert pieces == ZH_SENTENCES  # after 。！？；… and newlines; the closing quote stays with its sentence
    assert "".join(pieces) == ZH_TEXT


def test_cjk_sentence_splitter_keeps_punkt_for_english():
    text = "The cat sat. The dog ran.\n\n猫坐下了。狗跑了。"
    assert cjk_sentence_splitter()(text) == ["The cat sat. ", "The dog ran.\n\n", "猫坐下了。", "狗跑了。"]


def test_sentence_window_with_cjk_splitter_has_exact_sentence_windows(made):
    register_peer("llamaindex-window", {"sentence_splitter": "cjk", "window_size": 1}, name="lw-test-cjk1")
    pipe = build("lw-test-cjk1", [Source("zh", ZH_TEXT)], made)
    assert isinstance(pipe, LlamaIndexSentenceWindowPipeline) and pipe.window_size == 1
    bounds = zh_bounds()
    assert pipe.chunks == len(bounds)
    expected = {("zh", bounds[max(0, i - 1)][0], bounds[min(len(bounds) - 1, i + 1)][1]) for i in range(len(bounds))}
    assert set(pipe.windows.values()) == expected
    spans = pipe.retrieve("厦门大学的会议")
    assert spans[0] == ("zh", bounds[0][0], bounds[2][1])  # sentence 1 and its neighbours


def test_rcs_with_cjk_separators_cuts_after_sentence_ends():
    # (RecursiveCharacterTextSplitter keeps a closing quote after 。 for the next piece and strips a
    # chunk's trailing newline: sentences without either here)
    sentences = [s for s in ZH_SENTENCES if "”" not in s and "\n" not in s]
    one = "".join(sentences)
    text = one * 6
    ends = {b + k * len(one) for k in range(6) for _, b in zh_bounds(sentences)}
    docs = rcs_splitter(40, "token", DEFAULT_ENCODING, "cjk").create_documents([text])
    assert len(docs) > 3
    for d in docs:
        start = d.metadata["start_index"]
        assert text[start:start + len(d.page_content)] == d.page_content
        assert start + len(d.page_content) in ends  # every chunk ends at a sentence end
    # as shipped, the splitter has no Chinese separator and cuts inside sentences
    shipped = rcs_splitter(40, "token", DEFAULT_ENCODING).create_documents([text])
    assert any(d.metadata["start_index"] + len(d.page_content) not in ends for d in shipped)
    with pytest.raises(ValueError, match="separators"):
        rcs_splitter(40, "token", DEFAULT_ENCODING, "zh")


# ---------------------------------------------------------------- configurations


def test_tuned_config_round_trips_into_the_pipelines(tmp_path, made):
    chosen = {
        "langchain-ensemble": {"separators": "cjk", "chunk_size": 32, "weights": [0.7, 0.3], "k": 7},
        "llamaindex-window": {"sentence_splitter": "cjk", "window_size": 2, "k": 9},
        "langchain-parent": {"separators": "cjk", "child_size": 16, "parent_size": 48, "k": 5},
    }
    results = {"multifieldqa_zh": {p: {"chosen": {"options": o, "context_recall": 0.5, "n": 2, "index_bytes": 1},
                                       "candidates": []} for p, o in chosen.items()}}
    path = tmp_path / "peers_tuned.json"
    write_choices(path, results)
    doc = json.loads(path.read_text())
    assert doc["half"] == "tune" and "multifieldqa_zh" not in doc["not_tuned"] and "qasper" in doc["not_tuned"]
    loaded = load_peer_config(path)
    assert loaded == {"multifieldqa_zh": chosen}
    names = _tuned_strategies(list(chosen) + ["default"], loaded["multifieldqa_zh"], tmp_path / "run")
    assert names == [f"{p}-tuned" for p in chosen] + ["default"]
    assert json.loads((tmp_path / "run" / "peer_config.json").read_text()) == chosen
    sources = [Source("zh", ZH_TEXT * 4)]
    ens = build("langchain-ensemble-tuned", sources, made)
    assert isinstance(ens, LangChainEnsemblePipeline)
    assert (ens.chunk_size, ens.weights, ens.k) == (32, [0.7, 0.3], 7)
    bm25, dense = ens.retriever.retrievers
    assert bm25.k == 7 and dense.search_kwargs == {"k": 7}
    assert ens.retriever.weights == [0.7, 0.3]
    win = build("llamaindex-window-tuned", sources, made)
    assert (win.window_size, win.fetch) == (2, 9) and win.chunks == 4 * len(ZH_SENTENCES)
    par = build("langchain-parent-tuned", sources, made)
    assert isinstance(par, LangChainParentDocumentPipeline)
    assert (par.child_size, par.parent_size, par.k) == (16, 48, 5)
    # the runner's --k wins over the file's
    assert build_pipeline(EvalConfig("langchain-ensemble-tuned", 64), sources, k=3, embeddings=EMB).k == 3
    # a resumed run with other configurations is refused
    with pytest.raises(ValueError, match="other peer configurations"):
        _tuned_strategies(["langchain-ensemble"], {"langchain-ensemble": {"chunk_size": 64}}, tmp_path / "run")


def test_a_new_peer_joins_a_run_folder_but_a_changed_configuration_is_refused(tmp_path):
    """A peer tuned later (llamaindex-hybrid) runs into the folder of the others' test-half runs:
    its configuration is added to the folder's record; another configuration of a peer already
    run there is refused."""
    folder = tmp_path / "run"
    first = {"langchain-ensemble": {"chunk_size": 32}}
    assert _tuned_strategies(["langchain-ensemble"], first, folder) == ["langchain-ensemble-tuned"]
    later = {"langchain-parent": {"child_size": 16, "parent_size": 48}}
    assert _tuned_strategies(["langchain-parent"], {**first, **later}, folder) == ["langchain-parent-tuned"]
    assert json.loads((folder / "peer_config.json").read_text()) == {**first, **later}
    with pytest.raises(ValueError, match="other peer configurations of langchain-ensemble"):
        _tuned_strategies(["langchain-ensemble"], {"langchain-ensemble": {"chunk_size": 64}}, folder)
    assert json.loads((folder / "peer_config.json").read_text()) == {**first, **later}


def test_grid_names_are_distinct_and_start_with_the_untuned_anchor():
    for peer, grid in PEER_GRIDS.items():
        names = [peer_strategy_name(peer, o) for o in grid]
        assert len(set(names)) == len(names)
        assert grid[0] == {} and names[0] == f"{peer}@default"
        assert all(re.fullmatch(r"[a-z0-9@.\-_]+", n) for n in names)


def test_bad_options_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown option.*chunk_sise"):
        register_peer("langchain-ensemble", {"chunk_sise": 3})
    with pytest.raises(ValueError, match="unknown peer"):
        register_peer("langchain-stock", {})
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"half": "test", "sets": {}}))
    with pytest.raises(ValueError, match="tuning half"):
        load_peer_config(path)
    with pytest.raises(FileNotFoundError):
        load_peer_config(tmp_path / "missing.json")
    for kwargs, match in [({"weights": [1.0]}, "weights"), ({"chunk_size": 0}, "chunk_size")]:
        with pytest.raises(ValueError, match=match):
            LangChainEnsemblePipeline([Source("zh", ZH_TEXT)], EvalConfig("langchain-ensemble", 64), embeddings=EMB,
                                      **kwargs)
    with pytest.raises(ValueError, match="sentence_splitter"):
        LlamaIndexSentenceWindowPipeline([Source("zh", ZH_TEXT)], EvalConfig("llamaindex-window", 64), embeddings=EMB,
                                         sentence_splitter="jieba")
    with pytest.raises(ValueError, match="must not exceed parent_size"):
        LangChainParentDocumentPipeline([Source("zh", ZH_TEXT)], EvalConfig("langchain-parent", 64), embeddings=EMB,
                                        child_size=64, parent_size=32)


# ---------------------------------------------------------------- choice rule


def test_choice_rule_highest_recall_then_cheaper_then_grid_order():
    a = {"name": "a", "context_recall": 0.80, "index_bytes": 100}
    b = {"name": "b", "context_recall": 0.85, "index_bytes": 900}
    c = {"name": "c", "context_recall": 0.85, "index_bytes": 500}
    d = {"name": "d", "context_recall": 0.85, "index_bytes": 500}
    assert choose([a, b])["name"] == "b"  # higher recall wins whatever it costs
    assert choose([a, b, c, d])["name"] == "c"  # tie: the smaller index, then the earlier in the grid
    assert choose([a, d, c])["name"] == "d"
    # means equal up to float noise count as a tie
    e = {"name": "e", "context_recall": 0.1 + 0.2, "index_bytes": 9}
    f = {"name": "f", "context_recall": 0.3, "index_bytes": 1}
    assert choose([e, f])["name"] == "f"
    with pytest.raises(ValueError):
        choose([])


def _rec(strategy, qid, recall, half="tune", index_id="i1", index_bytes=100):
    return {"strategy": strategy, "qid": qid, "context_recall": recall, "half": half, "index_id": index_id,
            "index_bytes": index_bytes}


def test_candidates_from_records_and_the_choice():
    peer = "langchain-parent"
    base, tuned = (peer_strategy_name(peer, o) for o in PEER_GRIDS[peer][:2])
    records = {base: {f"q{i}": _rec(base, f"q{i}", 0.5, index_id=f"d{i}") for i in range(4)},
               tuned: {f"q{i}": _rec(tuned, f"q{i}", 0.75, index_id=f"d{i}", index_bytes=300) for i in range(4)}}
    cands = _candidates(records, peer)
    assert [c["options"] for c in cands] == [PEER_GRIDS[peer][0], PEER_GRIDS[peer][1]]
    assert cands[0]["index_bytes"] == 400 and cands[1]["context_recall"] == 0.75 and cands[1]["n"] == 4
    assert choose(cands)["options"] == PEER_GRIDS[peer][1]
    records[tuned]["q0"] = _rec(tuned, "q0", 1.0, half="test")
    with pytest.raises(ValueError, match="tuning half"):
        _candidates(records, peer)


# ---------------------------------------------------------------- no tuning on the test half


def test_tuning_refuses_the_test_half(tmp_path, capsys):
    with pytest.raises(ValueError, match="tuning half only"):
        tune_peers(tmp_path, tmp_path / "out", ["qasper"], ["langchain-parent"], half="test")
    with pytest.raises(ValueError, match="tuning half only"):
        tune_peers(tmp_path, tmp_path / "out", ["qasper"], ["langchain-parent"], half=None)
    assert main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--half", "test",
                 "--write", str(tmp_path / "p.json")]) == 2
    assert "tuning half only" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and not (tmp_path / "p.json").exists()
    assert main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--datasets", "qasper",
                 "--write", str(tmp_path / "p.json")]) == 3  # the tuning half itself still needs its file
    assert "no such dataset file" in capsys.readouterr().err
    assert "langchain-ensemble" in PIPELINES


def test_parent_retriever_indexes_more_children_than_one_chroma_batch(made):
    """ParentDocumentRetriever upserts a call's children in one Chroma batch; a corpus with more
    children than Chroma's max batch size (5461) must still index (it failed on cmrc2018_corpus)."""
    sources = [Source(f"s{i}", " ".join(f"w{i}x{j}" for j in range(40))) for i in range(160)]
    register_peer("langchain-parent", {"child_size": 2, "parent_size": 64}, name="lp-test-many-children")
    pipe = build("lp-test-many-children", sources, made)
    assert pipe.chunks > pipe._collection.client.get_max_batch_size()
    store = pipe.retriever.docstore
    assert {d.metadata["source_id"] for d in store.mget(list(store.yield_keys()))} == {s.source_id for s in sources}
    assert pipe.retrieve("w7x3")
