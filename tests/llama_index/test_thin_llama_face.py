"""The LlamaIndex face is thin: framework conversion over the engine, no forwards.

``SlidingWindowLlamaIndex`` and ``WindowedLlamaIndexRetriever`` keep LlamaIndex's
contract; the index's state and logic are the engine's. A LangChain face given as
``index=`` stands for its engine (the retriever never goes through that face's
deprecated forwards).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import warnings

import pytest
from ci_switch import importorskip

importorskip("llama_index.core")

from fake_embeddings import TrigramEmbedder  # noqa: E402
from swrag_integrations.llama_index import index as llama_face  # noqa: E402
from swrag_integrations.llama_index.index import SlidingWindowLlamaIndex, WindowedLlamaIndexRetriever  # noqa: E402

TEXT = " ".join(f"The lighthouse keeper {i} counts gulls and writes about fog number {i}." for i in range(30))
QUERY = "lighthouse keeper fog"


def _methods(cls: type) -> list[ast.FunctionDef]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return [n for n in tree.body[0].body if isinstance(n, ast.FunctionDef)]  # type: ignore[attr-defined]


def _is_forward(fn: ast.FunctionDef) -> bool:
    """A method whose whole body (after its docstring) is ``return self.engine.<name>(...)``
    with the same name: a one-line forward to the engine."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return False
    func = body[0].value.func
    return (isinstance(func, ast.Attribute) and func.attr == fn.name and isinstance(func.value, ast.Attribute)
            and func.value.attr in ("engine", "_engine"))


@pytest.mark.parametrize("cls", [SlidingWindowLlamaIndex, WindowedLlamaIndexRetriever])
def test_llama_faces_are_thin(cls):
    methods = _methods(cls)
    assert len(methods) <= 20, [m.name for m in methods]
    assert not [m.name for m in methods if _is_forward(m)]
    for name, value in vars(cls).items():
        if isinstance(value, (staticmethod, classmethod, property)) or inspect.isfunction(value):
            continue
        assert not hasattr(type(value), "__get__") or name.startswith("__") or name.startswith("_abc"), name


def test_forward_detector_finds_forwards():
    """The detector above is not vacuous: it flags a forward."""
    src = "class A:\n    def count(self, level):\n        '''doc'''\n        return self.engine.count(level)\n"
    [fn] = ast.parse(src).body[0].body  # type: ignore[attr-defined]
    assert _is_forward(fn)


def test_langchain_face_given_to_the_llama_retriever_stands_for_its_engine(tmp_path):
    from swrag_integrations.langchain.index import SlidingWindowIndex

    class Embeddings(TrigramEmbedder):
        pass

    face = SlidingWindowIndex(tmp_path / "index", embedding=Embeddings(), batch_size=64)
    try:
        face.add_texts([TEXT], [{"source": "a.txt"}])
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=r"SlidingWindowIndex\.", category=DeprecationWarning)
            retriever = WindowedLlamaIndexRetriever(index=face, k=2, budget_tokens=120)
            assert retriever.chunk_index is face.engine
            nodes = retriever.retrieve(QUERY)
        assert nodes and all(TEXT[n.node.start_char_idx:n.node.end_char_idx] == n.node.get_content() for n in nodes)
    finally:
        face.close()


def test_llama_face_module_has_no_forwarding_descriptor_class():
    assert not [name for name, value in vars(llama_face).items()
                if inspect.isclass(value) and value.__module__ == llama_face.__name__
                and hasattr(value, "__get__") and hasattr(value, "__set_name__")]


def test_document_identity_logic_is_the_engines(tmp_path):
    """``refresh_ref_docs`` and ``delete_ref_doc`` run on :meth:`IndexEngine.held` and
    :meth:`IndexEngine.delete_document` (a document and the nodes joined under its id)."""
    from llama_index.core import Document
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    class Embeddings(TrigramEmbedder):
        pass

    index = SlidingWindowLlamaIndex(tmp_path / "index", embed_model=Embeddings())
    try:
        engine = index.engine
        assert engine.held("sea") is None
        index.insert(Document(text=TEXT, doc_id="sea", metadata={"topic": "sea"}))
        first = engine.held("sea")
        assert first is not None and '"topic": "sea"' in first[1]
        assert index.refresh_ref_docs([Document(text=TEXT, doc_id="sea", metadata={"topic": "sea"})]) == [False]
        index.insert(Document(text=TEXT, doc_id="sea", metadata={"topic": "harbour"}))
        assert engine.held("sea")[0] == first[0] and engine.held("sea") != first
        node = TextNode(text=TEXT[:80], start_char_idx=0, end_char_idx=80,
                        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="log")})
        index.insert_nodes([node])
        assert index.ref_doc_ids == ["log", "sea"]
        engine.delete_document("log")
        engine.delete_document("no-such-document")
        assert index.ref_doc_ids == ["sea"]
        index.delete_ref_doc("sea")
        assert index.ref_doc_ids == [] and engine.held("sea") is None
    finally:
        index.engine.close()
