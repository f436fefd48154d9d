"""The LangChain and LlamaIndex faces of grounding, and the CLI text format."""

import asyncio
import json

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.retrievers import BaseRetriever

from swrag_integrations.methods.langchain_chain import build_rag_chain
from swrag_integrations.methods.grounding import (
    GroundedQueryEngine,
    format_grounded_answer,
    ground_chain_output,
    ground_response,
    grounding_runnable,
)

TEXT = "The tower is 31 metres tall. It was first lit on 14 October 1874 by forty masons."
WINDOW = {"source": "/data/a.md", "source_id": "s1", "start_index": 29, "end_index": len(TEXT)}


class DuplicatingRetriever(BaseRetriever):
    """Returns the same window twice, as the demo's retriever did (issue 15)."""

    def _get_relevant_documents(self, query, *, run_manager=None):
        return [Document(page_content=TEXT[29:], metadata=dict(WINDOW)) for _ in range(2)]


def chain(answer):
    return build_rag_chain(DuplicatingRetriever(), FakeListLLM(responses=[answer])) | grounding_runnable()


def test_runnable_appended_to_the_rag_chain():
    out = chain("It was first lit on 14 October 1874. It was built by sixty masons.").invoke("When was it lit?")
    assert {"question", "answer", "context", "sources", "grounding"} <= set(out)
    g = out["grounding"]
    json.dumps(g)  # JSON-ready
    assert [s["supported"] for s in g["sentences"]] == [True, False]
    assert g["sentences"][1]["unsupported_claims"][0]["text"] == "sixty"
    cited = g["citations"]
    assert len(cited) == 1 and cited[0]["number"] == 1  # the window came twice, it is cited once
    assert TEXT[cited[0]["start_index"]:cited[0]["end_index"]] == cited[0]["text"]
    # the sentence quotes the window: the citation is exactly the quoted characters
    assert cited[0]["text"] == "It was first lit on 14 October 1874"


def test_ground_chain_output_inputs():
    out = ground_chain_output({"answer": "The tower is 31 metres tall.",
                               "documents": [Document(page_content=TEXT, metadata={"source_id": "s1", "start_index": 0})]})
    assert out["grounding"]["sentences"][0]["supported"] is True
    assert out["grounding"]["citations"][0]["start_index"] == 0
    assert ground_chain_output({"answer": None, "sources": []})["grounding"] is None  # retrieval only
    out = ground_chain_output({"answer": "", "sources": []})
    assert out["grounding"]["n_sentences"] == 0 and out["grounding"]["warnings"]
    with pytest.raises(ValueError, match="'answer'"):
        ground_chain_output({"sources": []})
    with pytest.raises(TypeError, match="dict"):
        ground_chain_output("answer")


def test_cli_format():
    out = chain("It was first lit on 14 October 1874. It was built by sixty masons.").invoke("When was it lit?")
    text = format_grounded_answer(out)
    assert text.splitlines() == [
        "Q: When was it lit?",
        "A: It was first lit on 14 October 1874. [1] It was built by sixty masons. [not supported] (unsupported: sixty)",
        "  [1] a.md 29-64: It was first lit on 14 October 1874",
        "  grounding: 1/2 sentences supported; unsupported claims: sixty",
        "  retrieved: a.md 29-81",
    ]
    # without a "grounding" key it grounds first; retrieval only lists distinct windows
    assert format_grounded_answer({k: v for k, v in out.items() if k != "grounding"}) == text
    only = format_grounded_answer({**out, "answer": None})
    assert only.splitlines() == ["Q: When was it lit?", "  [1] a.md 29-81: It was first lit on 14 October 1874 by forty masons."]


def _response(answer):
    from llama_index.core.base.response.schema import Response
    from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

    node = TextNode(text=TEXT[29:], start_char_idx=29, end_char_idx=len(TEXT), metadata={"source": "/data/a.md"})
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="s1")
    return Response(response=answer, source_nodes=[NodeWithScore(node=node, score=0.9)] * 2)


def test_llama_index_response_hook():
    response = _response("It was first lit on 14 October 1874. It was built by sixty masons.")
    grounded = ground_response(response)
    assert [s.supported for s in grounded.sentences] == [True, False]
    assert response.metadata["grounding"] == grounded.to_dict()
    c = grounded.citations[0]
    assert (c.source, c.source_id, c.start_index, c.end_index) == ("/data/a.md", "s1", 29, 64)
    with pytest.raises(TypeError, match="get_response"):
        ground_response("not a response")


def test_grounded_query_engine():
    from llama_index.core.base.base_query_engine import BaseQueryEngine

    class Fixed(BaseQueryEngine):
        def __init__(self):
            super().__init__(callback_manager=None)

        def _get_prompt_modules(self):
            return {}

        def _query(self, query_bundle):
            return _response("The tower is 31 metres tall.")

        async def _aquery(self, query_bundle):
            return _response("The tower is 50 metres tall.")

    engine = GroundedQueryEngine(Fixed())
    g = engine.query("How tall is the tower?").metadata["grounding"]
    assert g["sentences"][0]["supported"] is False  # the window does not hold the height
    assert g["sentences"][0]["reasons"] == ["low_support", "unsupported_claims"]
    g = asyncio.run(engine.aquery("How tall?")).metadata["grounding"]
    assert g["unsupported_claims"][0]["text"] == "50"
    with pytest.raises(TypeError, match="query engine"):
        GroundedQueryEngine(object())
