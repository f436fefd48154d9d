"""AnswerView: sentences, unsupported claims and support spans at their exact offsets
(English, Chinese, emoji, CRLF), citations pointing at their spans, sources-only mode,
the accepted grounding shape, bad input and hostile text."""

import re

import pytest
from langchain_core.documents import Document
from test_view_html import ALLOWED_ATTRS, ALLOWED_TAGS, HOSTILE, structure
from test_view_split import CRLF, EMOJI, EN, ZH

from swrag_integrations.engine.assemble import ContextSpan
from swrag_integrations.view import AnswerView
from swrag_integrations.view.html import marked_regions, region_text

TEXTS = {"s-en": EN, "s-zh": ZH, "s-emoji": EMOJI, "s-crlf": CRLF}


def span(sid, a, b):
    return {"source": f"docs/{sid}.txt", "source_id": sid, "start_index": a, "end_index": b, "text": TEXTS[sid][a:b]}


def support(sid, piece, after=0, score=0.8, text=True):
    a = TEXTS[sid].index(piece, after)
    out = {"source": f"docs/{sid}.txt", "source_id": sid, "start_index": a, "end_index": a + len(piece),
           "score": score}
    if text:
        out["text"] = piece
    return out


ANSWER = ("The keeper lit the lamp. 灯塔于1874年首次点亮。 The family 👨‍👩‍👧‍👦 saw flags 🇳🇴! "
          "Second line! Third line?\r\nIt was painted blue in 1960.")
SENTENCES = ["The keeper lit the lamp.", "灯塔于1874年首次点亮。", "The family 👨‍👩‍👧‍👦 saw flags 🇳🇴!",
             "Second line! Third line?", "It was painted blue in 1960."]


def grounding():
    pos = [ANSWER.index(s) for s in SENTENCES]
    return {
        "answer": ANSWER,
        "sentences": [
            {"text": SENTENCES[0], "start": pos[0], "end": pos[0] + len(SENTENCES[0]), "supported": True, "score": 0.9,
             "supports": [support("s-en", "He lit the lamp"), support("s-en", "The keeper climbed the stairs")]},
            {"text": SENTENCES[1], "supported": True, "score": 0.7,  # no offsets: found in the answer
             "supports": [support("s-zh", "它于1874年首次点亮")]},
            {"text": SENTENCES[2], "supported": True, "score": 0.6,
             "supports": [support("s-emoji", "Family: 👨‍👩‍👧‍👦, flags 🇳🇴🇩🇪!")]},
            {"text": SENTENCES[3], "supported": True, "score": 0.95,
             "supports": [support("s-crlf", "Second line! Third line?\r\n\r\nNew")]},
            {"text": SENTENCES[4], "supported": False, "score": 0.1, "supports": [],
             "unsupported_claims": [{"text": "1960", "kind": "date", "start": ANSWER.index("1960"),
                                     "end": ANSWER.index("1960") + 4}],
             "reasons": ["low_score", "unsupported_claims"]},
        ],
    }


def result(**extra):
    sources = [span("s-en", 0, 300), span("s-zh", 0, 120), span("s-emoji", 0, 200), span("s-crlf", 0, 150)]
    return {"question": "What happened?", "answer": ANSWER, "sources": sources, "grounding": grounding(), **extra}


def docs_of(document):
    """source id -> doc id, from the headings' source ids."""
    out = {}
    for sid in TEXTS:
        m = re.search(rf'data-doc="(\d+)" data-goto="\d+:\d+" data-what="retrieved span 1">', document.split(
            f"source id {sid}")[1]) if f"source id {sid}" in document else None
        if m:
            out[sid] = m.group(1)
    return out


def test_sentences_claims_and_supports_are_drawn_exactly():
    view = AnswerView(result())
    document = view.to_html()
    regions = marked_regions(document)
    docs = docs_of(document)
    assert set(docs) == set(TEXTS)
    for r in regions:
        text = ANSWER if r.doc == "answer" else TEXTS[next(s for s, d in docs.items() if d == r.doc)]
        assert r.text == text[r.start:r.end]
    sents = [r for r in regions if r.doc == "answer" and "sent" in r.classes]
    assert [r.text for r in sorted(sents, key=lambda r: r.start)] == SENTENCES
    claims = [r for r in regions if "claim" in r.classes]
    assert [(c.text, c.start) for c in claims] == [("1960", ANSWER.index("1960"))]
    for s in grounding()["sentences"]:
        for sup in s["supports"]:
            a, b = sup["start_index"], sup["end_index"]
            assert region_text(regions, docs[sup["source_id"]], a, b) == TEXTS[sup["source_id"]][a:b] == sup["text"]
            segs = [r for r in regions if r.doc == docs[sup["source_id"]] and a <= r.start and r.end <= b]
            assert segs and all("sup" in r.classes for r in segs)
    for src in result()["sources"]:
        assert region_text(regions, docs[src["source_id"]], src["start_index"], src["end_index"]) == src["text"]
    states = {r.text: r.classes for r in sents}
    assert "ok" in states[SENTENCES[0]] and "bad" in states[SENTENCES[4]]
    assert "1/1" not in document and "<b>4/5</b> sentences supported" in document
    assert "unsupported claims: 1960" in document


def test_citations_point_at_their_spans_and_keep_the_grounding_numbers():
    data = result()
    sups = [sup for s in data["grounding"]["sentences"] for sup in s["supports"]]
    # the grounding module numbers citations; the view must use its numbers
    data["grounding"]["citations"] = [
        {"number": n, **{k: sup[k] for k in ("source", "source_id", "start_index", "end_index")}}
        for n, sup in zip([5, 3, 1, 2, 4, 6][:len(sups)], sups)]
    document = AnswerView(data).to_html()
    docs = docs_of(document)
    answer_part = document.split('data-doc="answer"')[1].split("</section>")[0]
    cites = re.findall(r'<a class="cite" tabindex="0" data-doc="(\d+)" data-goto="(\d+):(\d+)" data-n="(\d+)"',
                       answer_part)
    assert len(cites) == len(sups)
    for (doc, a, b, n), sup, want in zip(cites, sups, [5, 3, 1, 2, 4, 6]):
        assert (doc, int(a), int(b), int(n)) == (docs[sup["source_id"]], sup["start_index"], sup["end_index"], want)
        assert f">[{want}]</a>" in answer_part


def test_first_use_numbering_without_citations_list():
    view = AnswerView(result())
    assert sorted(view.citation_numbers.values()) == list(range(1, 6))
    first = grounding()["sentences"][0]["supports"][0]
    assert view.citation_numbers[("s-en", first["start_index"], first["end_index"])] == 1


def test_sources_only():
    data = result()
    del data["grounding"]
    view = AnswerView(data)
    document = view.to_html()
    regions = marked_regions(document)
    assert [r.text for r in regions if r.doc == "answer"] == [ANSWER]
    assert "sources only" in document and "sent ok" not in document
    assert document.count('data-what="source [') == 4
    retrieval_only = AnswerView({"question": "q", "answer": None, "sources": data["sources"]}).to_html()
    assert "no answer: retrieval only" in retrieval_only


def test_other_source_and_result_types():
    docs = [Document(page_content=EN[10:90], metadata={"source": "en.txt", "source_id": "s-en", "start_index": 10,
                                                       "end_index": 90}),
            ContextSpan("s-zh", 5, 40, ZH[5:40], metadata={"source": "zh.txt"})]

    class Grounded:  # the grounding module's result: an object with to_dict() and sentences
        sentences = ()

        def to_dict(self):
            return {"answer": "It was lit.", "sentences": [
                {"text": "It was lit.", "start": 0, "end": 11, "supported": True, "score": 0.5,
                 "supports": [{"source": "en.txt", "source_id": "s-en", "start_index": 40, "end_index": 50,
                               "score": 0.5}]}]}

    view = AnswerView(Grounded(), docs)
    regions = marked_regions(view.to_html())
    assert region_text(regions, "0", 40, 50) == EN[40:50]
    assert region_text(regions, "1", 5, 40) == ZH[5:40]


def test_supports_outside_the_retrieved_spans():
    data = result()
    outside = support("s-en", "A second paragraph follows", after=300, text=False)
    data["grounding"]["sentences"][0]["supports"].append(outside)
    with pytest.raises(ValueError, match="outside the retrieved spans"):
        AnswerView(data)
    view = AnswerView(data, source_texts={"s-en": EN})  # the full text: the support is shown in its own excerpt
    regions = marked_regions(view.to_html())
    a, b = outside["start_index"], outside["end_index"]
    docs = docs_of(view.to_html())
    assert region_text(regions, docs["s-en"], a, b) == EN[a:b]
    with_text = result()
    with_text["grounding"]["sentences"][0]["supports"].append({**outside, "text": EN[a:b]})
    assert AnswerView(with_text)._pieces["s-en"][-1] == (a, EN[a:b])


def test_bad_input_is_refused():
    data = result()
    data["grounding"]["sentences"][0]["supports"][0]["end_index"] += 1
    with pytest.raises(ValueError, match="characters but its text"):
        AnswerView(data)
    data = result()
    data["grounding"]["sentences"][0]["supports"][0]["text"] = "X" * len(
        data["grounding"]["sentences"][0]["supports"][0]["text"])
    with pytest.raises(ValueError, match="not the retrieved text"):
        AnswerView(data)
    data = result()
    far = {"source": "docs/s-en.txt", "source_id": "s-en", "start_index": len(EN) - 2, "end_index": len(EN) + 3,
           "score": 1.0}
    data["grounding"]["sentences"][0]["supports"].append(far)
    with pytest.raises(ValueError, match="outside the text"):
        AnswerView(data, source_texts={"s-en": EN})
    data = result()
    data["grounding"]["sentences"][1]["text"] = "not in the answer"
    with pytest.raises(ValueError, match="does not occur in the answer"):
        AnswerView(data)
    data = result()
    data["grounding"]["answer"] = "another answer"
    with pytest.raises(ValueError, match="not the answer"):
        AnswerView(data)
    data = result()
    data["sources"][0]["end_index"] = 999
    with pytest.raises(ValueError, match="characters but its text"):
        AnswerView(data)
    data = result()
    data["grounding"]["sentences"][4]["unsupported_claims"][0]["start"] = 0
    with pytest.raises(ValueError, match="is not '1960'"):
        AnswerView(data)
    with pytest.raises(ValueError, match="sentences"):
        AnswerView("x", [], grounding={"no": "sentences"})


def test_top_level_claims_are_placed_in_their_sentence():
    data = result()
    data["grounding"]["sentences"][4]["unsupported_claims"] = []
    data["grounding"]["unsupported_claims"] = [{"text": "1960", "kind": "date"}]
    regions = marked_regions(AnswerView(data).to_html())
    assert [(r.text, r.start) for r in regions if "claim" in r.classes] == [("1960", ANSWER.index("1960"))]


def test_hostile_answer_sources_and_names_are_inert():
    text = HOSTILE
    answer = HOSTILE[:120]
    sources = [{"source": "<img src=x onerror=alert(1)>.txt", "source_id": "<b>id</b>", "start_index": 0,
                "end_index": len(text), "text": text}]
    g = {"sentences": [{"text": answer, "start": 0, "end": len(answer), "supported": False, "score": 0.0,
                        "supports": [{"source": "<img src=x onerror=alert(1)>.txt", "source_id": "<b>id</b>",
                                      "start_index": 5, "end_index": 40, "score": 0.1}],
                        "unsupported_claims": [{"text": answer[8:20], "kind": "<script>", "start": 8, "end": 20}],
                        "reasons": ["</style>"]}]}
    view = AnswerView(answer, sources, grounding=g, question="<script>alert(9)</script>")
    document = view.to_html()
    tags = structure(document)
    assert tags.tags <= ALLOWED_TAGS and tags.attrs <= ALLOWED_ATTRS and tags.scripts == ["text/javascript"]
    assert "<script>alert" not in document and "<img" not in document and "<b>id" not in document
    regions = marked_regions(document)
    assert region_text(regions, "0", 0, len(text)) == text
    assert [r.text for r in regions if r.doc == "answer" and "sent" in r.classes] == [answer]
