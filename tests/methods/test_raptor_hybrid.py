"""RAPTOR's collapsed tree ranks as the package's index does: BM25 (jieba for Chinese) fused
with cosine, so a question whose words the embedding does not know still finds its leaf."""

from __future__ import annotations

import re

import pytest
from langchain_core.embeddings import Embeddings

from swrag_integrations.methods.raptor import ClusterConfig, TreeConfig, build_tree
from swrag_integrations.methods.raptor.leaves import leaves_from_text
from swrag_integrations.methods.raptor.search import RaptorSearcher
from swrag_integrations.methods.raptor.search import collapsed_hits, hybrid_hits, node_keyword_index

PCA = TreeConfig(cluster=ClusterConfig(reduction="pca"))

# Six Chinese paragraphs; the answer to the question sits in the fourth only.
PARAGRAPHS = [
    "北京是中国的首都，有很多历史建筑和博物馆。游客每年春天都会去故宫参观。",
    "上海是一座港口城市，金融业非常发达。外滩的夜景吸引了大量游客。",
    "广州以美食闻名，早茶文化历史悠久。很多人周末会和家人一起喝早茶。",
    "冰岛的埃亚菲亚德拉冰盖火山在二零一零年喷发，火山灰让欧洲的航班停飞了好几天。",
    "成都的熊猫基地每天都有很多游客，大熊猫喜欢吃竹子。",
    "西安有兵马俑，是秦始皇陵的一部分，每年吸引世界各地的游客。",
]
TEXT = "\n\n".join(PARAGRAPHS)
QUESTION = "哪一座火山喷发让欧洲航班停飞？"
ANSWER = "埃亚菲亚德拉冰盖火山"


class EnglishWords(Embeddings):
    """Hashed bag of Latin words: like an English embedding model, it sees nothing in Chinese."""

    def _vec(self, text: str) -> list[float]:
        v = [0.0] * 32
        for w in re.findall(r"[a-z]+", text.lower()):
            v[sum(map(ord, w)) % 32] += 1.0
        v[len(text) % 32] += 0.5  # something per text, unrelated to its meaning
        v[0] += 0.01
        return v

    def embed_documents(self, texts):
        return [self._vec(t) for t in texts]

    def embed_query(self, text):
        return self._vec(text)


@pytest.fixture(scope="module")
def tree():
    leaves = leaves_from_text("zh", TEXT, strategy="DDS", size=60, step=1)
    return build_tree(leaves, EnglishWords(), sources={"zh": TEXT}, config=PCA, show_progress=False)


def _rank_of_answer(tree, hits) -> int:
    return next(r for r, h in enumerate(hits) if ANSWER in tree.nodes[h.index].text)


def test_hybrid_ranking_finds_a_chinese_answer_the_embedding_misses(tree):
    qvec = EnglishWords().embed_query(QUESTION)
    dense = collapsed_hits(tree, qvec)
    hybrid = hybrid_hits(tree, QUESTION, qvec)
    assert sorted(h.index for h in hybrid) == sorted(h.index for h in dense)  # every node, once
    assert _rank_of_answer(tree, hybrid) == 0
    assert _rank_of_answer(tree, dense) > 0  # the case this guards: cosine alone misses it


def test_searcher_defaults_to_hybrid_and_keeps_the_dense_ranking_on_request(tree):
    context = RaptorSearcher(tree, EnglishWords()).search(QUESTION, budget_tokens=60)
    assert ANSWER in context.items[0].text
    assert context.items[0].text == TEXT[context.spans[0].start:context.spans[0].end]  # exact offsets kept
    dense = RaptorSearcher(tree, EnglishWords(), ranking="dense").search(QUESTION, budget_tokens=60)
    assert ANSWER not in dense.items[0].text


def test_bad_ranking_and_weights_are_one_line_errors(tree):
    with pytest.raises(ValueError, match="ranking must be one of"):
        RaptorSearcher(tree, EnglishWords(), ranking="bm25")
    with pytest.raises(ValueError, match="weights"):
        RaptorSearcher(tree, EnglishWords(), weights=(1.0,))


def test_node_keyword_index_covers_every_node(tree):
    index = node_keyword_index(tree)
    assert len(index) == len(tree.nodes)
    assert index.search("熊猫", k=3)


def test_both_faces_take_the_ranking(tree):
    from swrag_integrations.methods.raptor import RaptorRetriever
    from swrag_integrations.methods.raptor.llama_index import RaptorLlamaIndexRetriever

    docs = RaptorRetriever(raptor=tree, embeddings=EnglishWords(), budget_tokens=60).invoke(QUESTION)
    assert ANSWER in docs[0].page_content
    dense = RaptorRetriever(raptor=tree, embeddings=EnglishWords(), budget_tokens=60, ranking="dense").invoke(QUESTION)
    assert ANSWER not in dense[0].page_content
    nodes = RaptorLlamaIndexRetriever(tree, EnglishWords(), budget_tokens=60).retrieve(QUESTION)
    assert ANSWER in nodes[0].node.get_content()
