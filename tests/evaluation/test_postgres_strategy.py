"""The ``default@postgres`` strategies (swrag_integrations/evaluation/postgres_pipelines.py): the
default pipeline with its index in a real PostgreSQL that ``pgserver`` starts (Unix socket only)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from fake_embeddings import TrigramEmbedder

pytestmark = pytest.mark.integration

pytest.importorskip("psycopg", reason="needs the [postgres] extra (psycopg, pgvector)")
pytest.importorskip("pgserver", reason="needs pgserver (the [test] extra) to start PostgreSQL")

from swrag_integrations.evaluation.datasets import Source  # noqa: E402
from swrag_integrations.evaluation.pipelines import PIPELINES, EvalConfig, build_pipeline  # noqa: E402

EN = " ".join(f"Paragraph {i} tells of the harbour town number {i} and its trade in copper and wool." for i in range(40))
ZH = "".join(f"第{i}段讲述港口城市{i}的茶叶与丝绸贸易。" for i in range(40)) + "北京大学的图书馆收藏了许多古籍善本。"
TEXTS = {"en": EN, "zh": ZH}


def _build(strategy: str):
    return build_pipeline(EvalConfig(strategy, 512), [Source("en", EN), Source("zh", ZH)],
                          embeddings=TrigramEmbedder(), budget=200)


def _databases() -> set[str]:
    import psycopg

    from swrag_integrations.evaluation.postgres_pipelines import EvalPostgres

    with psycopg.connect(EvalPostgres._server.uri(), autocommit=True) as con:
        return {r[0] for r in con.execute("SELECT datname FROM pg_database")}


@pytest.mark.parametrize("strategy, control, weights", [("default@postgres", "default", (0.5, 0.5)),
                                                     ("default@postgres+keyword-only", "default+keyword-only", (1.0, 0.0)),
                                                     ("default@postgres+dense-only", "default+dense-only", (0.0, 1.0))])
def test_postgres_strategy_is_its_control_on_postgres(strategy, control, weights):
    """The index is a PostgresStorage (keyword search in SQL) where the control's is Chroma
    with tantivy, the retriever settings are the control's, and the context is the same
    kind of result: exact spans of the sources within the budget, led by the span the
    control puts first when one passage alone matches."""
    assert PIPELINES[strategy].needs_embeddings and PIPELINES[control].needs_embeddings
    base, pipe = _build(control), _build(strategy)
    database = pipe._database
    try:
        assert type(pipe.index.engine.store).__name__ == "PostgresStorage"
        assert pipe.index.engine.keyword_mode == "store"
        assert base.index.engine.keyword_mode == "local" and base.index.engine.keyword.incremental  # tantivy
        assert pipe.retriever.settings == base.retriever.settings
        assert pipe.retriever.settings.weights == weights
        assert pipe.chunks == base.chunks > 0
        for question in ("copper trade of harbour town 17", "北京大学图书馆的古籍"):
            context, expected = pipe.context(question, budget=200), base.context(question, budget=200)
            assert type(context) is type(expected)
            assert context.spans and context.n_tokens <= 200
            assert all(sp.text == TEXTS[sp.source_id][sp.start:sp.end] for sp in context.spans)
        # the one passage that matches (jieba tokens in SQL for the SQL BM25, its own text for the
        # dense search) leads in both; questions that tie on many chunks may order the ties
        # differently (SQL breaks them by chunk id, HNSW by graph order)
        question = "北京大学的图书馆收藏了许多古籍善本"
        first = pipe.retrieve(question)[0]
        assert first == base.retrieve(question)[0] and "北京大学的图书馆" in ZH[first[1]:first[2]]
        assert database.rsplit("?", 1)[0].rsplit("/", 1)[-1] in _databases()
    finally:
        pipe.close()
        base.close()
    assert database.rsplit("?", 1)[0].rsplit("/", 1)[-1] not in _databases()  # close drops the database


def test_sql_bm25_ranks_and_scores_as_the_local_tantivy_index():
    """Keyword search alone: the SQL BM25 gives tantivy's scores (tantivy's carry the constant
    factor ``k1 + 1``, which changes no order) and breaks ties in document order as tantivy
    does, so a question that ties on many chunks gets the same ranked chunks and the same
    context from both stores."""
    from swrag_integrations.stores.postgres import BM25_K1

    base, pipe = _build("default+keyword-only"), _build("default@postgres+keyword-only")
    try:
        for question in ("copper trade of harbour town 17", "港口城市的茶叶与丝绸贸易"):
            local = base.index.engine.keyword.search(question, 20)
            sql = pipe.index.engine.keyword.search(question, 20)
            assert len(local) == len(sql) == 20
            assert [cid for cid, _ in sql] == [cid for cid, _ in local]
            assert [(1 + BM25_K1) * score for _, score in sql] == pytest.approx([score for _, score in local], rel=1e-3)
            assert pipe.retrieve(question) == base.retrieve(question)
    finally:
        pipe.close()
        base.close()
