"""The framework-free grounding core: sentences, claims, alignment, citations, JSON, rendering, bad input."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swrag_integrations.methods.grounding import GroundedAnswer, GroundingChecker, ground_answer
from swrag_integrations.methods.grounding.align import groundedness
from swrag_integrations.methods.grounding.claims import ContextFacts, extract_claims
from swrag_integrations.methods.grounding.sentences import split_sentences, split_units
from swrag_integrations.methods.grounding.claims import Claim, chinese_numeral_value, number_values

# A source document; the "retrieved" spans below are exact slices of it.
DOC = (
    "# The Marrow Point Lighthouse\n\n"
    "The Marrow Point Lighthouse stands on a granite headland at the northern end of Kessel Bay. "
    "It was designed by the engineer Ada Vance and first lit on 14 October 1874, after three winters "
    "of work by a crew of forty masons. The tower is 31 metres tall.\n\n"
    "A fog signal was added in 1899. It was silenced in 2003, because the horn disturbed a colony of "
    "puffins that nests on the cliffs.\n\n"
    "马罗角灯塔位于凯塞尔湾北端的花岗岩岬角上，由工程师艾达·万斯设计，于1874年10月14日首次点亮。"
    "灯塔高31米，用当地的灰色花岗岩建成。"
)


def span(start_text: str, end_text: str, source: str = "docs/lighthouse.md") -> dict:
    """The chain's source dict for DOC[start:end] from the first occurrence of start_text to end_text's end."""
    start = DOC.index(start_text)
    end = DOC.index(end_text, start) + len(end_text)
    return {"source": source, "source_id": "lh", "start_index": start, "end_index": end, "text": DOC[start:end]}


EN = span("The Marrow Point Lighthouse stands", "puffins that nests on the cliffs.")
ZH = span("马罗角灯塔位于", "灰色花岗岩建成。")


def check(answer, sources=(EN, ZH), **kw):
    return GroundingChecker(**kw).check(answer, list(sources))


def assert_exact(result):
    for s in result.sentences:
        assert result.answer[s.start:s.end] == s.text
        for sup in s.supports:
            assert DOC[sup.start_index:sup.end_index] == sup.text
    for c in result.unsupported_claims:
        assert result.answer[c.start:c.end] == c.text


# ------------------------------------------------------------------ sentences


def test_sentences_english_chinese_and_lists():
    text = (
        "It was lit by Dr. Vance in 1874, e.g. in autumn. It cost $3.5 million! Was it U.S. made?\n"
        "1. First item.\n- second item\n灯塔高31米。它是谁设计的？“艾达。”他说。See Smith et al. for more..."
    )
    got = [s.text for s in split_sentences(text)]
    assert got == [
        "It was lit by Dr. Vance in 1874, e.g. in autumn.", "It cost $3.5 million!", "Was it U.S. made?",
        "First item.", "second item", "灯塔高31米。", "它是谁设计的？", "“艾达。”", "他说。",
        "See Smith et al. for more...",
    ]
    for s in split_sentences(text):
        assert text[s.start:s.end] == s.text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("ab .。!?？\n,，1-中文\"”") + ["Dr. ", "e.g. ", "A. "]), max_size=40))
def test_sentences_are_exact_ordered_and_stripped(pieces):
    text = "".join(pieces)
    prev = 0
    for s in split_sentences(text):
        assert text[s.start:s.end] == s.text
        assert s.start >= prev and s.text == s.text.strip() and s.text
        prev = s.end


def test_split_units_cuts_long_sentences_at_clauses():
    text = "这是一个很长的句子，" * 40 + "结束。"
    units = split_units(text, max_chars=100)
    assert all(len(u.text) <= 100 for u in units) and len(units) > 1
    assert all(text[u.start:u.end] == u.text for u in units)
    assert "".join(u.text for u in units) == text
    with pytest.raises(ValueError, match="max_chars"):
        split_units(text, max_chars=0)


def test_split_sentences_rejects_non_str():
    with pytest.raises(TypeError, match="text must be a str"):
        split_sentences(b"bytes")


# --------------------------------------------------------------------- claims


def test_claims_english():
    text = "On March 5, 1889 the Marrow Point Lighthouse hired 60 masons and forty-two keepers; BERT got 92.5%."
    claims = extract_claims(text)
    assert [(c.text, c.kind) for c in claims] == [
        ("March 5, 1889", "date"), ("Marrow Point Lighthouse", "name"), ("60", "number"),
        ("forty-two", "number"), ("BERT", "name"), ("92.5", "number"),
    ]
    assert all(text[c.start:c.end] == c.text for c in claims)
    # a capitalised word that only starts the sentence is not a name
    assert extract_claims("However, it was lit.") == []


def test_claims_chinese():
    text = "马可波罗灯塔于1889年3月5日首次点亮，由四十名石匠建造，一些人说它在一九八九年关闭，十分可惜。张伟在北京大学工作。"
    claims = extract_claims(text)
    got = [(c.text, c.kind) for c in claims]
    assert ("1889年3月5日", "date") in got and ("四十", "number") in got and ("一九八九年", "date") in got
    assert ("张伟", "name") in got and ("北京大学", "name") in got
    assert not any(t in ("一些", "十分", "十") for t, _ in got)  # idioms are not numbers
    assert all(text[c.start:c.end] == c.text for c in claims)


def test_numbers_match_across_notations():
    facts = ContextFacts(["a crew of forty masons", "灯塔高三十一米", "in 1,200 cases"])
    assert facts.supports(Claim("40", "number", 0, 2))
    assert facts.supports(Claim("四十", "number", 0, 2))
    assert facts.supports(Claim("31", "number", 0, 2))
    assert facts.supports(Claim("1200", "number", 0, 4))
    assert not facts.supports(Claim("60", "number", 0, 2))
    assert not ContextFacts(["silenced in 2003"]).supports(Claim("20", "number", 0, 2))  # not a piece of 2003
    assert ContextFacts(["silenced in 2003."]).supports(Claim("2003", "date", 0, 4))
    assert chinese_numeral_value("三万五千") == 35000 and chinese_numeral_value("一九八九") == 1989
    assert chinese_numeral_value("十五") == 15 and chinese_numeral_value("abc") is None
    assert chinese_numeral_value("万") == 10000 and chinese_numeral_value("两万") == 20000
    assert number_values("sixty-two and 3.5") == {62.0, 3.5}


def test_names_and_dates_against_context():
    facts = ContextFacts(["It was designed by the engineer Ada Vance and first lit on 14 October 1874."])
    assert facts.supports(Claim("Ada Vance", "name", 0, 9))
    assert facts.supports(Claim("Vance", "name", 0, 5))
    assert not facts.supports(Claim("John Smith", "name", 0, 10))
    assert facts.supports(Claim("October 1874", "date", 0, 12))
    assert not facts.supports(Claim("March 1874", "date", 0, 10))


# ------------------------------------------------------------------ alignment


def test_supported_english_paraphrase_with_exact_offsets():
    r = check("The lighthouse was first lit on 14 October 1874, after three winters of work.")
    s = r.sentences[0]
    assert s.supported is True and s.score >= 0.6 and s.reasons == []
    assert len(s.supports) == 1 and "first lit on 14 October 1874" in s.supports[0].text
    assert EN["start_index"] <= s.supports[0].start_index < s.supports[0].end_index <= EN["end_index"]
    assert s.citations == [1] and r.citations[0].start_index == s.supports[0].start_index
    assert_exact(r)


def test_a_sentence_supported_by_two_context_sentences_cites_both():
    r = check("The fog signal was added in 1899 and silenced in 2003 because of the puffins.")
    s = r.sentences[0]
    assert s.supported is True
    assert len(s.supports) == 2 and s.citations == [1, 2]
    assert_exact(r)


def test_partly_supported_answer():
    r = check("The tower is 31 metres tall. It was painted by pirates from Atlantis with golden dragons.")
    assert [s.supported for s in r.sentences] == [True, False]
    assert "low_support" in r.sentences[1].reasons and r.sentences[1].citations == []
    assert r.supported_share == 0.5
    assert [c.text for c in r.unsupported_claims] == ["Atlantis"]
    assert_exact(r)


def test_invented_number_is_flagged_even_when_the_words_match():
    r = check("It was first lit after three winters of work by a crew of sixty masons.")
    s = r.sentences[0]
    assert s.score >= 0.6  # the words are there ...
    assert s.supported is False and s.reasons == ["unsupported_claims"]  # ... the number is not
    assert [(c.text, c.kind) for c in s.unsupported_claims] == [("sixty", "number")]
    assert s.citations == [1]  # what does support it is still cited
    assert_exact(r)


def test_invented_name_is_flagged():
    r = check("The lighthouse was designed by the engineer John Smith.")
    s = r.sentences[0]
    assert s.supported is False and [c.text for c in s.unsupported_claims] == ["John Smith"]
    r = check("The lighthouse was designed by the engineer Ada Vance.")
    assert r.sentences[0].supported is True


def test_chinese_answer():
    r = check("马罗角灯塔高31米，由艾达·万斯设计。它于1990年由张伟重建。")
    first, second = r.sentences
    assert first.supported is True and ZH["start_index"] <= first.supports[0].start_index
    assert second.supported is False
    assert {c.text for c in second.unsupported_claims} == {"1990年", "张伟"}
    assert_exact(r)


def test_answer_quoting_the_context_exactly():
    quote = "It was silenced in 2003, because the horn disturbed a colony of puffins that nests on the cliffs."
    r = check(quote)
    s = r.sentences[0]
    assert s.supported is True and s.score == 1.0 and len(s.supports) == 1
    start = DOC.index(quote)
    assert (s.supports[0].start_index, s.supports[0].end_index) == (start, start + len(quote))
    # a quote whose final punctuation differs is found without it
    r = check(quote[:-1] + "!")
    assert (r.sentences[0].supports[0].start_index, r.sentences[0].supports[0].end_index) == (start, start + len(quote) - 1)
    assert_exact(r)


def test_question_counts_as_given():
    answer = "The Kessel Bay lighthouse has a tower of 31 metres."
    assert check(answer, [ZH]).sentences[0].unsupported_claims  # Kessel Bay is not in the Chinese span
    r = GroundingChecker().check(answer, [ZH], question="How tall is the Kessel Bay lighthouse?")
    assert r.sentences[0].unsupported_claims == []


def test_nothing_to_check():
    r = check("Yes. The tower is 31 metres tall.")
    assert r.sentences[0].supported is None and r.sentences[0].reasons == ["nothing to check"]
    assert r.supported_share == 1.0 and len(r.checked) == 1


# ---------------------------------------------------------- duplicate citations


def test_duplicate_spans_give_one_citation():
    from langchain_core.documents import Document

    as_doc = Document(page_content=EN["text"], metadata={k: EN[k] for k in ("source", "source_id", "start_index", "end_index")})
    answer = "The tower is 31 metres tall. Indeed the tower is 31 metres tall."
    r = check(answer, [EN, EN, as_doc])
    assert len(r.citations) == 1 and [c.number for c in r.citations] == [1]
    assert [s.citations for s in r.sentences] == [[1], [1]]


def test_overlapping_windows_are_aligned_once():
    a = span("The Marrow Point Lighthouse stands", "forty masons.")
    b = span("It was designed", "31 metres tall.")
    r = check("It was designed by the engineer Ada Vance.", [a, b])
    assert len(r.sentences[0].supports) == 1 and len(r.citations) == 1


def test_citations_numbered_in_first_use_order():
    r = check("The fog signal was silenced in 2003 because of puffins. The tower is 31 metres tall.")
    assert [c.number for c in r.citations] == list(range(1, len(r.citations) + 1))
    first_use = [n for s in r.sentences for n in s.citations]
    assert first_use[0] == 1 and sorted(set(first_use)) == [c.number for c in r.citations]
    assert r.sentences[0].citations == [1, 2] and r.sentences[1].citations == [3]
    assert r.citations[1].text.startswith("It was silenced in 2003")  # within a sentence: source order
    assert r.citations[2].text == "The tower is 31 metres tall."


# --------------------------------------------------------------- JSON, render


def test_json_output_round_trips():
    r = check("It was first lit after three winters of work by a crew of sixty masons. 灯塔高31米。")
    data = json.loads(r.to_json())
    assert data["n_sentences"] == 2 and data["n_supported"] == 1 and data["supported_share"] == 0.5
    assert data["sentences"][0]["unsupported_claims"] == [
        {"text": "sixty", "kind": "number", "start": r.answer.index("sixty"), "end": r.answer.index("sixty") + 5}
    ]
    sup = data["sentences"][0]["supports"][0]
    assert set(sup) == {"source", "source_id", "start_index", "end_index", "score", "text"}
    assert DOC[sup["start_index"]:sup["end_index"]] == sup["text"]
    assert "灯塔" in r.to_json()  # not \u-escaped
    again = GroundedAnswer.from_dict(data)
    assert again.render() == r.render() and again.to_dict()["sentences"] == data["sentences"]
    with pytest.raises(ValueError, match="to_dict"):
        GroundedAnswer.from_dict({"answer": "x"})


def test_text_rendering():
    r = check("The tower is 31 metres tall. It was first lit after three winters of work by sixty masons. 它于1990年重建。")
    lines = r.render().splitlines()
    assert lines[0] == (
        "The tower is 31 metres tall. [1] It was first lit after three winters of work by sixty masons. [2] "
        "[not supported] (unsupported: sixty) "
        "它于1990年重建。[not supported] (unsupported: 1990年)"
    )
    assert lines[1].startswith("  [1] lighthouse.md ") and "The tower is 31 metres tall." in lines[1]
    assert lines[3] == "  grounding: 1/3 sentences supported; unsupported claims: sixty, 1990年"
    assert r.render(sources=False) == lines[0]


# ------------------------------------------------------------------ bad input


def test_empty_answer():
    for answer in ("", "   \n", None):
        r = check(answer)
        assert r.sentences == [] and r.supported_share is None and r.citations == []
        assert any("empty" in w for w in r.warnings)
        assert "(empty answer)" in r.render()


def test_no_context():
    for sources in ([], None, [{"text": "  ", "source": "x"}]):
        r = GroundingChecker().check("The tower is 31 metres tall.", sources)
        s = r.sentences[0]
        assert s.supported is False and s.reasons[0] == "no context" and s.supports == []
        assert any("no context" in w for w in r.warnings)
        assert [c.text for c in s.unsupported_claims] == ["31"]


def test_context_without_offsets():
    r = GroundingChecker().check("The tower is 31 metres tall.", ["The tower is 31 metres tall, they say."])
    s = r.sentences[0]
    assert s.supported is True and s.supports[0].start_index is None
    assert r.citations[0].label() == "passage 1 (no offsets)"
    assert any("no start_index" in w for w in r.warnings)
    # offsets that do not match the text are not trusted
    bad = dict(EN, end_index=EN["end_index"] + 5)
    r = GroundingChecker().check("The tower is 31 metres tall.", [bad])
    assert r.sentences[0].supports[0].start_index is None and any("do not match" in w for w in r.warnings)


def test_bad_types_and_parameters():
    with pytest.raises(TypeError, match="answer must be a str"):
        check(42)
    with pytest.raises(TypeError, match="passage 1"):
        check("x", [3.5])
    with pytest.raises(TypeError, match="its text must be a str"):
        check("x", [{"text": 7}])
    with pytest.raises(ValueError, match="threshold"):
        GroundingChecker(threshold=1.5)
    with pytest.raises(ValueError, match="max_supports"):
        GroundingChecker(max_supports=0)
    with pytest.raises(TypeError, match="embeddings"):
        GroundingChecker(embeddings="minilm")
    with pytest.raises(TypeError, match="judge"):
        GroundingChecker(judge="yes")


def test_accepts_context_spans_documents_and_tuples():
    from swrag_integrations.engine.assemble import ContextSpan

    s, e = EN["start_index"], EN["end_index"]
    for src in (ContextSpan("lh", s, e, DOC[s:e]), ("lh", s, e, DOC[s:e])):
        r = GroundingChecker().check("The tower is 31 metres tall.", [src])
        assert r.sentences[0].supported and DOC[r.citations[0].start_index:r.citations[0].end_index] == r.citations[0].text


# ----------------------------------------------------------------- embeddings


class TableEmbeddings:
    """Fixed vectors: texts mentioning 'tower' point one way, everything else the other."""

    def embed_documents(self, texts):
        return [[1.0, 0.0] if "tower" in t or "塔" in t else [0.0, 1.0] for t in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def test_embeddings_mix_into_the_score():
    answer = "The tower rises high."
    lexical = check(answer).sentences[0].score
    mixed = check(answer, embeddings=TableEmbeddings(), embedding_weight=0.5)
    assert mixed.method == "lexical+embeddings"
    assert mixed.sentences[0].score == pytest.approx(0.5 * lexical + 0.5 * 1.0)


# -------------------------------------------------------------------- judge


def test_llm_judge_with_scripted_fake_llm():
    from langchain_core.language_models.fake import FakeListLLM

    from swrag_integrations.methods.grounding import LLMJudge

    answer = "The tower is 31 metres tall. It was built by sixty masons. The fog signal was added in 1899."
    llm = FakeListLLM(responses=["No, that is not supported.", "Yes.", "#### %%% lorem"])
    judge = LLMJudge(llm)
    r = check(answer, judge=judge)
    assert r.method == "lexical+llm-judge"
    assert [s.judge for s in r.sentences] == ["no", "yes", None]
    assert [s.supported for s in r.sentences] == [False, True, True]  # garbage: the lexical verdict stays
    assert "llm_judge" in r.sentences[0].reasons
    assert (r.judge_calls, r.judge_failures) == (3, 1) and (judge.calls, judge.failures) == (3, 1)
    assert "LLM judge 3 calls, 1 unparsed" in r.render()


def test_llm_judge_failures_are_never_fatal():
    from swrag_integrations.methods.grounding import LLMJudge

    class Broken:
        def invoke(self, prompt):
            raise RuntimeError("server down")

    r = check("The tower is 31 metres tall.", judge=LLMJudge(Broken()))
    assert r.sentences[0].supported is True and r.judge_failures == 1
    r = check("The tower is 31 metres tall.", judge=lambda s, c: 1 / 0)
    assert r.sentences[0].supported is True and r.judge_failures == 1


def test_llm_judge_prompt_and_chat_model():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from swrag_integrations.methods.grounding import LLMJudge
    from swrag_integrations.methods.grounding.judge import parse_verdict

    seen = []

    class Recording(FakeListChatModel):
        def _call(self, messages, stop=None, run_manager=None, **kwargs):
            seen.append(messages[0].content)
            return super()._call(messages, stop=stop, run_manager=run_manager, **kwargs)

    judge = LLMJudge(Recording(responses=["<think>maybe yes</think> 否"]))
    assert judge("灯塔高40米。", "灯塔高31米。") is False
    assert "陈述：灯塔高40米。" in seen[0] and "灯塔高31米。" in seen[0]
    for text, verdict in [("Yes.", True), ("no", False), ("The statement is not supported.", False),
                          ("是的", True), ("不是", False), ("I cannot tell", None), ("", None), (None, None)]:
        assert parse_verdict(text) is verdict
    with pytest.raises(TypeError, match="llm"):
        LLMJudge("gpt")
    with pytest.raises(ValueError, match="prompt_en"):
        LLMJudge(Recording(responses=["x"]), prompt_en="no placeholders")


# --------------------------------------------------------------- groundedness


def test_groundedness_figures():
    g = groundedness("The tower is 31 metres tall. It was built by sixty masons for John Smith.", [EN])
    assert g["sentences"] == 2 and g["checked"] == 2 and g["supported"] == 1 and g["supported_share"] == 0.5
    assert g["flagged"] == 1 and g["unsupported_numbers"] == 1 and g["unsupported_names"] == 1
    assert g["unsupported_claims"] == ["sixty", "John Smith"] and g["seconds"] >= 0
    assert groundedness("", [EN])["supported_share"] is None
    assert ground_answer("The tower is 31 metres tall.", [EN], threshold=0.9).threshold == 0.9
