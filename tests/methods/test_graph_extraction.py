"""Phrase extraction: the rule extractor, the LLM-answer parser and the LLM extractor
(with scripted fake LLMs, garbage included)."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from swrag_integrations.methods.graph.extraction import (
    Extraction,
    LLMExtractor,
    RuleExtractor,
    normalize_phrase,
    parse_extraction,
)

PASSAGE = ("Kiss and Tell (1945 film)\nKiss and Tell is a 1945 American comedy film starring then 17-year-old "
           "Shirley Temple as Corliss Archer. Born in Hampshire in England on May 3, the director moved to "
           "Baltimore. Much of the story \"A Kiss for Corliss\" follows.")


def test_normalize_phrase():
    assert normalize_phrase("  The  University of\tCalifornia. ") == "university of california"
    assert normalize_phrase("Arthur’s Magazine") == "arthur's magazine"
    assert normalize_phrase("1945") == ""  # numbers alone are not phrases
    assert normalize_phrase("!!!") == ""
    assert normalize_phrase(None) == ""
    assert normalize_phrase("x " * 20) == ""  # implausibly long


def test_rule_extractor_english():
    got = RuleExtractor().extract(PASSAGE)
    assert got.status == "rule" and got.triples == []
    keys = {normalize_phrase(e) for e in got.entities}
    assert {"kiss and tell", "shirley temple", "corliss archer", "hampshire", "england", "baltimore",
            "kiss for corliss"} <= keys  # the quoted title, its article dropped
    # sentence-initial words, month names and connective-joined runs are not phrases
    assert not keys & {"born", "much", "may", "hampshire in england", "england on may"}


def test_rule_extractor_question_and_chinese():
    rule = RuleExtractor()
    assert rule.query_entities("Were Scott Derrickson and Ed Wood of the same nationality?") == [
        "Scott Derrickson", "Ed Wood"]
    zh = rule.extract("中华人民共和国主席习近平在北京大学发表讲话。").entities
    assert {"习近平", "北京大学", "中华人民共和国"} <= set(zh)
    assert "在" not in zh and "发表" not in zh  # verbs and particles are not phrases
    assert set(RuleExtractor(nouns=False).extract("他在北京大学发表讲话。").entities) == {"北京大学"}
    with pytest.raises(TypeError):
        rule.extract(b"bytes")
    with pytest.raises(ValueError, match="min_cjk_chars"):
        RuleExtractor(min_cjk_chars=0)


@pytest.mark.parametrize("answer, triples, entities, status", [
    ('{"entities": ["Ed Wood", "Tim Burton"], "triples": [["Ed Wood", "directed by", "Tim Burton"]]}',
     [("Ed Wood", "directed by", "Tim Burton")], ["Ed Wood", "Tim Burton"], "json"),
    ("Sure! Here it is:\n```json\n{'triples': [('Ed Wood', 'stars', 'Johnny Depp'),],}\n```",
     [("Ed Wood", "stars", "Johnny Depp")], [], "json"),
    ('[{"subject": "Ed Wood", "predicate": "stars", "object": "Johnny Depp"}]',
     [("Ed Wood", "stars", "Johnny Depp")], [], "json"),
    ("1. Ed Wood | directed by | Tim Burton\n2. (Ed Wood, stars, Johnny Depp)\n- Ed Wood -> released in -> 1994\n"
     "Entities: Ed Wood, Tim Burton",
     [("Ed Wood", "directed by", "Tim Burton"), ("Ed Wood", "stars", "Johnny Depp"), ("Ed Wood", "released in", "1994")],
     ["Ed Wood", "Tim Burton"], "list"),
    ("- Ed Wood\n- Tim Burton\n", [], ["Ed Wood", "Tim Burton"], "list"),
    # the block form the bundled 135M model tends to write, with labels that are not names
    ("Subject: Ed Wood,\nRelation: directed by\nObject: Tim Burton\nPersonality: Liar\nPerson: Johnny Depp",
     [("Ed Wood", "directed by", "Tim Burton")], ["Johnny Depp"], "list"),
    ("The passage talks about Ed Wood, a film by Tim Burton.", [], ["Ed Wood", "Tim Burton"], "prose"),
])
def test_parse_extraction_shapes(answer, triples, entities, status):
    got = parse_extraction(answer)
    assert got.status == status
    assert got.triples == triples
    assert got.entities == entities


@pytest.mark.parametrize("garbage", ["", "   ", "lorem ipsum dolor sit amet", "{{{[[[", "12345 !!! ???", None, 42])
def test_parse_extraction_garbage_fails_quietly(garbage):
    got = parse_extraction(garbage)
    assert got.status == "failed" and got.phrases() == []


def test_extraction_phrases_deduplicate():
    got = Extraction(entities=["Ed Wood", "ed wood"], triples=[("Ed Wood", "by", "Tim Burton")])
    assert got.phrases() == ["Ed Wood", "Tim Burton"]


def test_llm_extractor_grounds_counts_and_falls_back(tmp_path):
    answers = [
        # 1: good triples, one invented phrase (not in the passage) is dropped
        "Kiss and Tell | stars | Shirley Temple\nShirley Temple | plays | Corliss Archer\nEntities: Paris Hilton",
        # 2: garbage -> failure, rule phrases instead
        "I am a helpful assistant. ??? !!!",
        # 3: a JSON object whose names are all invented -> failure as well
        '{"entities": ["Napoleon", "Mars"]}',
    ]
    llm = FakeListLLM(responses=answers)
    ex = LLMExtractor(llm, cache_path=tmp_path / "cache.sqlite")
    first, second, third = ex.extract_many([PASSAGE, PASSAGE + " ", PASSAGE + "  "])
    assert first.status == "list"
    assert ("Kiss and Tell", "stars", "Shirley Temple") in first.triples
    assert "Paris Hilton" not in first.entities
    assert second.status == third.status == "failed"
    assert {"Shirley Temple", "Corliss Archer"} <= set(second.entities)  # the rule extractor's
    s = ex.stats
    assert (s.calls, s.failed, s.fallback, s.parsed) == (3, 2, 2, {"list": 1, "failed": 2})
    # the cache answers the same prompt again without a call
    again = LLMExtractor(FakeListLLM(responses=["never used"]), cache_path=tmp_path / "cache.sqlite")
    again._model = ex._model
    assert again.extract(PASSAGE).triples == first.triples
    assert (again.stats.calls, again.stats.cached) == (0, 1)
    ex.close()
    again.close()


def test_llm_extractor_survives_a_raising_llm_and_chat_models():
    class Broken:
        def invoke(self, prompt):
            raise RuntimeError("server down")

    ex = LLMExtractor(Broken(), fallback=None)
    got = ex.extract(PASSAGE)
    assert got.status == "error" and got.phrases() == []
    assert ex.stats.errors == 1
    chat = LLMExtractor(FakeListChatModel(responses=['{"triples": [["Shirley Temple", "born in", "Hampshire"]]}']))
    got = chat.extract(PASSAGE)
    assert got.status == "json" and got.triples == [("Shirley Temple", "born in", "Hampshire")]
    with pytest.raises(TypeError):
        LLMExtractor(object())
    with pytest.raises(ValueError, match="passage"):
        LLMExtractor(FakeListLLM(responses=["x"]), prompt="no placeholder")
