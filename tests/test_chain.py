"""The RAG chain (LCEL) and the LlamaIndex query engine, with a fake LLM."""

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.retrievers import BaseRetriever

from swrag_integrations.chain import PROMPT_EN, PROMPT_ZH, build_query_engine, build_rag_chain, prompt_for

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
    assert "Answer the question based on the following context" in prompts["response_synthesizer:text_qa_template"].get_template()
