"""The RAG chain (LCEL) and the LlamaIndex query engine, with a fake LLM."""

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.retrievers import BaseRetriever

from swrag_integrations.methods.chain import PROMPT_EN, PROMPT_ZH, prompt_for
from swrag_integrations.methods.langchain_chain import build_rag_chain
from swrag_integrations.methods.llama_index_chain import build_query_engine

TEXT = "The tower is 31 metres tall. It was first lit on 14 October 1874."


class FixedRetriever(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager=None):
        return [Document(page_content=TEXT[29:], metadata={"source": "a.md", "source_id": "s1", "start_index": 29, "end_index": len(TEXT)})]


class RecordingLLM(FakeListLLM):
    prompts: list = []

    def _call(self, prompt, stop=None, run_manager=None, **kwargs):
        self.prompts.append(prompt)
        return super()._call(prompt, stop=stop, run_manager=run_manager, **kwargs)


def test_prompt_language():
    assert prompt_for("When was it lit?") == PROMPT_EN
    assert prompt_for("灯塔有多高？") == PROMPT_ZH


def test_chain_answers_with_sources_and_the_methods_prompt():
    llm = RecordingLLM(responses=["  14 October 1874 "], prompts=[])
    result = build_rag_chain(FixedRetriever(), llm).invoke("When was it first lit?")
    assert result["answer"] == "14 October 1874"
    assert result["sources"] == [
        {"source": "a.md", "source_id": "s1", "start_index": 29, "end_index": len(TEXT), "text": TEXT[29:]}
    ]
    assert llm.prompts == [
        "Answer the question based on the following context: It was first lit on 14 October 1874.; "
        "the question is When was it first lit?"
    ]


def test_chain_rejects_empty_question():
    with pytest.raises(ValueError, match="non-empty"):
        build_rag_chain(FixedRetriever(), FakeListLLM(responses=["x"])).invoke("  ")


def test_llama_index_query_engine_uses_the_prompt():
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.retrievers import BaseRetriever as LIRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    class Fixed(LIRetriever):
        def _retrieve(self, query_bundle):
            return [NodeWithScore(node=TextNode(text="It was first lit on 14 October 1874."), score=1.0)]

    engine = build_query_engine(Fixed(), MockLLM(max_tokens=5))
    response = engine.query("When was it first lit?")
    assert response.source_nodes[0].node.text.startswith("It was first lit")
    prompts = engine.get_prompts()
    key = next(k for k in prompts if k.endswith("response_synthesizer:text_qa_template"))
    assert "Answer the question based on the following context" in prompts[key].get_template()
    assert "grounding" in response.metadata  # every response is checked against its sources
    plain = build_query_engine(Fixed(), MockLLM(max_tokens=5), grounding=False)
    assert "grounding" not in (plain.query("When was it first lit?").metadata or {})


# ----------------------------------------------------------------------------- streaming contract
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402

HEAD_KEYS = {"question", "context", "sources"}


def _added(chunks):
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


def test_stream_sends_sources_first_then_answer_pieces_that_add_up_to_invoke():
    chain = build_rag_chain(FixedRetriever(), grounding=False, llm=FakeListChatModel(responses=["  14 October 1874 \n"]))
    result = chain.invoke("When was it first lit?")
    assert set(result) == {"question", "answer", "context", "sources"}
    assert result["answer"] == "14 October 1874"
    chunks = list(chain.stream("When was it first lit?"))
    assert set(chunks[0]) == HEAD_KEYS  # sources first, before any answer text
    assert chunks[0]["sources"] == result["sources"]
    answers = chunks[1:]
    assert len(answers) > 3 and all(set(c) == {"answer"} and c["answer"] for c in answers)  # incremental
    assert "".join(c["answer"] for c in answers) == "14 October 1874"  # surrounding whitespace held back
    assert _added(chunks) == result


async def test_astream_matches_stream():
    chain = build_rag_chain(FixedRetriever(), grounding=False, llm=FakeListChatModel(responses=["It was 1874.", "It was 1874."]))
    sync_chunks = list(chain.stream("When?"))
    async_chunks = [c async for c in chain.astream({"question": "When?"})]
    assert async_chunks == sync_chunks
    assert _added(async_chunks) == await chain.ainvoke("When?")


def test_whitespace_inside_the_answer_is_kept_and_an_empty_answer_still_has_its_key():
    chain = build_rag_chain(FixedRetriever(), grounding=False, llm=FakeListChatModel(responses=[" a  \n b ", "   "]))
    chunks = list(chain.stream("q?"))
    assert _added(chunks)["answer"] == "a  \n b"
    empty = list(chain.stream("q?"))
    assert empty[1:] == [{"answer": ""}]
    assert _added(empty)["answer"] == ""


def test_chain_accepts_a_question_dict_and_rejects_other_shapes():
    chain = build_rag_chain(FixedRetriever(), grounding=False, llm=FakeListChatModel(responses=["x"] * 3))
    assert chain.invoke({"question": "When?"})["question"] == "When?"
    with pytest.raises(ValueError, match="only the key 'question'"):
        chain.invoke({"question": "When?", "k": 3})
    with pytest.raises(ValueError, match="'question' key"):
        chain.invoke({"query": "When?"})
    with pytest.raises(ValueError, match="non-empty"):
        chain.invoke({"question": 3})


def test_plain_llms_still_work_and_stream_their_answer():
    chain = build_rag_chain(FixedRetriever(), grounding=False, llm=FakeListLLM(responses=[" 1874 ", " 1874 "]))
    chunks = list(chain.stream("When?"))
    assert set(chunks[0]) == HEAD_KEYS and chunks[1:] == [{"answer": "1874"}]
    assert chain.invoke("When?")["answer"] == "1874"


def test_chat_model_for_leaves_other_models_alone():
    from swrag_integrations.methods.langchain_chain import chat_model_for

    llm = FakeListLLM(responses=["x"])
    assert chat_model_for(llm) is llm


def test_grounding_comes_last_and_flags_what_the_sources_do_not_say():
    chain = build_rag_chain(FixedRetriever(), FakeListChatModel(responses=["It was first lit in 1874 by 60 masons."] * 2))
    result = chain.invoke("When was it first lit?")
    grounding = result["grounding"]
    assert grounding["sentences"] and grounding["citations"]
    assert "60" in " ".join(grounding["unsupported_claims"] if isinstance(grounding["unsupported_claims"][0], str)
                            else [c["text"] for c in grounding["unsupported_claims"]])
    chunks = list(chain.stream("When was it first lit?"))
    assert set(chunks[0]) == HEAD_KEYS and set(chunks[-1]) == {"grounding"}  # sources first, grounding last
    strip = lambda g: {k: v for k, v in g.items() if k != "seconds"}  # noqa: E731 - timing differs per run
    assert strip(chunks[-1]["grounding"]) == strip(grounding)


def test_the_answer_core_is_framework_free_and_the_faces_use_its_prompt():
    """methods.chain builds the prompt, the sources and the stream chunks without LangChain;
    the LCEL chain sends exactly the core's prompt; the old names warn and resolve."""
    import importlib
    import warnings

    from swrag_integrations.methods import chain as core
    from swrag_integrations.methods import langchain_chain, llama_index_chain
    from swrag_integrations.stores.storage import PlainDocument

    docs = [PlainDocument(TEXT[29:], {"source": "a.md", "source_id": "s1", "start_index": 29, "end_index": len(TEXT)})]
    llm = RecordingLLM(responses=["14 October 1874"], prompts=[])
    build_rag_chain(FixedRetriever(), llm).invoke("When was it first lit?")
    assert llm.prompts == [core.answer_prompt("When was it first lit?", docs)]
    assert core.llama_index_template("zh") == PROMPT_ZH.replace("{context}", "{context_str}").replace(
        "{question}", "{query_str}")
    state = core.AnswerChunks()  # plain dicts by default
    head = state.feed({"question": "q?", "docs": docs})
    assert head == [{"question": "q?", "context": TEXT[29:], "sources": [
        {"source": "a.md", "source_id": "s1", "start_index": 29, "end_index": len(TEXT), "text": TEXT[29:]}]}]
    assert state.feed({"answer": " 14 "}) == [{"answer": "14"}] and state.close() == []
    assert core.grounding_checker(False) is None and core.grounding_checker(None) is None
    for name, face in (("build_rag_chain", langchain_chain), ("chat_model_for", langchain_chain),
                       ("build_query_engine", llama_index_chain)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(importlib.import_module("swrag_integrations.methods.chain"), name) is getattr(face, name)
        assert [str(w.message) for w in caught] == [
            f"swrag_integrations.methods.chain.{name} moved to {face.__name__}.{name}; the old path will be removed in 0.4"]
