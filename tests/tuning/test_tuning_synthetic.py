"""The self-supervised question set: leakage guard, determinism, Chinese and English, LLM path."""

from __future__ import annotations

import re

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from swrag_integrations.evaluation.datasets import Source, build_corpus, load_examples
from swrag_integrations.evaluation.metrics import answer_tokens
from swrag_integrations.tuning.synthetic import (
    SyntheticSet,
    TooLittleTextError,
    _Grep,
    _words,
    build_synthetic_set,
    exact_match_leak,
)


@pytest.fixture(scope="module")
def en_sources(shared_dir):
    return build_corpus(load_examples(shared_dir / "data" / "eval" / "squad_v2_articles.jsonl"))[:4]


@pytest.fixture(scope="module")
def zh_sources(shared_dir):
    return build_corpus(load_examples(shared_dir / "data" / "eval" / "multifieldqa_zh.jsonl"))[:12]


def _sentence(sources, q):
    return {s.source_id: s.text for s in sources}[q.source_id][q.sentence_start:q.sentence_end]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_guarded_queries_do_not_leak(lang, en_sources, zh_sources):
    sources = en_sources if lang == "en" else zh_sources
    qset = build_synthetic_set(sources, 60, seed=1, verbatim_rate=0.0)
    assert len(qset) == 60
    grep = _Grep(s.text for s in sources)
    texts = {s.source_id: s.text for s in sources}
    for q in qset:
        assert q.kind == "cloze" and q.language == lang
        sentence = _sentence(sources, q)
        answer = q.answers[0]
        # the gold answer is a term of its sentence, at the recorded offsets, rare in the corpus
        assert texts[q.source_id][q.answer_start:q.answer_end] == answer
        assert q.sentence_start <= q.answer_start < q.answer_end <= q.sentence_end
        assert 1 <= grep.count(answer) <= 3
        # the query names neither the answer nor any run of words found only in the gold sentence
        assert answer.lower() not in q.query.lower()
        assert not set(answer_tokens(answer, lang)) <= set(answer_tokens(q.query, lang))
        assert not exact_match_leak(q.query, sentence, [s.text for s in sources])
        words = q.query.split(" ")
        for w in words:  # each word occurs outside the gold sentence too
            assert grep.count(w) > sentence.lower().count(w.lower())
        assert q.query.lower() not in sentence.lower()
        assert 3 <= len(words) <= 8
    assert qset.report["leak_rate"] == 0.0


def test_the_guard_is_needed(en_sources):
    """Without the guard (queries keep their sentence's words) string matching alone finds
    the gold sentence for most questions; the report measures both."""
    qset = build_synthetic_set(en_sources, 40, seed=2, verbatim_rate=1.0)
    assert {q.kind for q in qset} == {"verbatim"}
    assert qset.report["leak_rate"] > 0.5
    assert qset.report["leak_rate_raw_sentence"] > 0.9
    leaking = [q for q in qset if q.leak]
    q = leaking[0]
    assert exact_match_leak(q.query, _sentence(en_sources, q), [s.text for s in en_sources])


def test_verbatim_share_follows_the_rate(en_sources):
    qset = build_synthetic_set(en_sources, 80, seed=3, verbatim_rate=0.25)
    share = qset.report["kinds"]["verbatim"] / len(qset)
    assert 0.1 < share < 0.4
    assert qset.report["leak_rate_by_kind"]["cloze"] == 0.0


def test_deterministic_for_a_seed(zh_sources):
    a = build_synthetic_set(zh_sources, 30, seed=7)
    b = build_synthetic_set(zh_sources, 30, seed=7)
    c = build_synthetic_set(zh_sources, 30, seed=8)
    assert [q.to_dict() for q in a] == [q.to_dict() for q in b]
    assert [q.query for q in a] != [q.query for q in c]
    again = SyntheticSet.from_jsonl(a.to_jsonl())
    assert again.questions == a.questions and again.params == a.params


def test_mixed_languages():
    en = ("The harbour authority rebuilt the northern breakwater in 1887 after a winter storm. "
          "Local fishermen used the quay for loading herring and mackerel every autumn. ")
    zh = "港务局在一八八七年冬季风暴之后重建了北防波堤。当地渔民每年秋天都在码头装运鲱鱼和鲭鱼。"
    docs = [Source(f"d{i}", (en if i % 2 else zh) + f" Record {i}: the inspector visited station number {100 + i}. "
                   f"记录{i}：检查员访问了第{200 + i}号站点，并检查了灯塔的透镜。") for i in range(40)]
    qset = build_synthetic_set(docs, 30, seed=0, min_questions=5)
    langs = {q.language for q in qset}
    assert langs == {"en", "zh"}
    for q in qset:
        expect = "zh" if re.search("[\u4e00-\u9fff]", _sentence(docs, q)) else "en"
        assert q.language == expect


def test_too_little_text_is_a_clear_error():
    with pytest.raises(TooLittleTextError, match="too little text to tune"):
        build_synthetic_set([Source("a", "A short note. Nothing else here.")], 50)
    with pytest.raises(TooLittleTextError, match="0 usable question"):
        build_synthetic_set([], 50)


@pytest.mark.parametrize("bad", [{"n": 0}, {"verbatim_rate": 1.5}, {"min_terms": 0}, {"max_terms": 1}])
def test_bad_parameters(bad, en_sources):
    args = {"n": 10, **bad}
    with pytest.raises(ValueError):
        build_synthetic_set(en_sources, **args)


def test_llm_written_questions_are_checked(en_sources):
    base = build_synthetic_set(en_sources, 4, seed=5, verbatim_rate=0.0, min_questions=1)
    answers = [q.answers[0] for q in base]
    replies = [
        "Which kind of record did the museum keep?",  # a fine question
        f"Is it {answers[1]}?",  # names the answer: rejected
        "",  # empty: rejected
        "Question: what did the authors measure in that year?",  # prefix stripped
    ]
    llm = FakeListChatModel(responses=replies)
    qset = build_synthetic_set(en_sources, 4, seed=5, verbatim_rate=0.0, min_questions=1, llm=llm)
    kinds = [q.kind for q in qset]
    assert kinds == ["llm", "cloze", "cloze", "llm"]
    assert qset.questions[0].query == replies[0]
    assert qset.questions[3].query == "what did the authors measure in that year?"
    assert qset.questions[1].query == base.questions[1].query  # fell back to the guarded query
    assert qset.report["llm_rejected"] == 2
    assert [q.answers for q in qset] == [q.answers for q in base]


def test_words_keep_exact_offsets():
    text = "2019年，北京大学的张三发表了论文。"
    for word, a, b in _words(text):
        assert text[a:b] == word
    text = "Marrow Point's light was first lit in 1871."
    assert [w for w, _, _ in _words(text)] == ["Marrow", "Point's", "light", "was", "first", "lit", "in", "1871"]
