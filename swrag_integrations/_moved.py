"""Old module paths, from before the package was arranged in rooms by role (0.3).

One table, `MOVED` (old dotted module -> new), and one import hook: importing an old
path (``swrag_integrations.retrieval.index``, ``swrag_integrations.windows``,
``swrag_integrations.raptor``...) gives the very module object of the new path and one
`DeprecationWarning` naming it. The old ``swrag_integrations.retrieval`` package is
served as a stand-in whose names (`RETRIEVAL_NAMES`) resolve, with the warning, to
the modules that define them now. Old module names that are packages now
(``swrag_integrations.langchain``, ``.llama_index``, ``.cli``, ``.evaluation.peers``) need no
hook: each re-exports the old module's names. Nothing here imports a framework.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from typing import Any

__all__ = ["MOVED", "MOVED_NAMES", "RETRIEVAL", "RETRIEVAL_NAMES", "install", "moved_names_getattr"]

REMOVED_IN = "0.4"
RETRIEVAL = "swrag_integrations.retrieval"

# old dotted module -> new dotted module
MOVED: dict[str, str] = {
    "swrag_integrations._lang": "swrag_integrations.core.lang",
    "swrag_integrations._lazy": "swrag_integrations.core._lazy",
    "swrag_integrations._logging": "swrag_integrations.core._logging",
    "swrag_integrations.chain": "swrag_integrations.methods.chain",
    "swrag_integrations.cli_common": "swrag_integrations.cli.common",
    "swrag_integrations.context": "swrag_integrations.methods.context",
    "swrag_integrations.context._common": "swrag_integrations.methods.context._common",
    "swrag_integrations.context.headers": "swrag_integrations.methods.context.headers",
    "swrag_integrations.context.llama_index": "swrag_integrations.methods.context.llama_index",
    "swrag_integrations.context.ordering": "swrag_integrations.methods.context.ordering",
    "swrag_integrations.context.rerank": "swrag_integrations.methods.context.rerank",
    "swrag_integrations.context.rse": "swrag_integrations.methods.context.rse",
    "swrag_integrations.convert": "swrag_integrations.llama_index.convert",
    "swrag_integrations.delimiters": "swrag_integrations.core.delimiters",
    "swrag_integrations.display": "swrag_integrations.core.display",
    "swrag_integrations.evaluation.anchors": "swrag_integrations.evaluation.peers.anchors",
    "swrag_integrations.evaluation.budgets": "swrag_integrations.evaluation.peers.budgets",
    "swrag_integrations.evaluation.cli": "swrag_integrations.cli.eval",
    "swrag_integrations.evaluation.hybrid_anchor": "swrag_integrations.evaluation.peers.llama_index_hybrid",
    "swrag_integrations.evaluation.levers": "swrag_integrations.evaluation.peers.levers",
    "swrag_integrations.evaluation.misses": "swrag_integrations.evaluation.peers.misses",
    "swrag_integrations.evaluation.peer_tuning": "swrag_integrations.evaluation.peers.peer_tuning",
    "swrag_integrations.evaluation.peers.hybrid_anchor": "swrag_integrations.evaluation.peers.llama_index_hybrid",
    "swrag_integrations.graph": "swrag_integrations.methods.graph",
    "swrag_integrations.graph.cli": "swrag_integrations.cli.graph",
    "swrag_integrations.graph.common": "swrag_integrations.methods.graph.common",
    "swrag_integrations.graph.communities": "swrag_integrations.methods.graph.communities",
    "swrag_integrations.graph.evaluation": "swrag_integrations.evaluation.methods.graph",
    "swrag_integrations.graph.extraction": "swrag_integrations.methods.graph.extraction",
    "swrag_integrations.graph.graph": "swrag_integrations.methods.graph.graph",
    "swrag_integrations.graph.graphrag": "swrag_integrations.methods.graph.graphrag",
    "swrag_integrations.graph.hipporag": "swrag_integrations.methods.graph.hipporag",
    "swrag_integrations.graph.llama_index": "swrag_integrations.methods.graph.llama_index",
    "swrag_integrations.graph.measure": "swrag_integrations.evaluation.methods.graph_measure",
    "swrag_integrations.graph.retrievers": "swrag_integrations.methods.graph.langchain",
    "swrag_integrations.grounding": "swrag_integrations.methods.grounding",
    "swrag_integrations.grounding.align": "swrag_integrations.methods.grounding.align",
    "swrag_integrations.grounding.claims": "swrag_integrations.methods.grounding.claims",
    "swrag_integrations.grounding.evaluate": "swrag_integrations.evaluation.methods.grounding",
    "swrag_integrations.grounding.judge": "swrag_integrations.methods.grounding.judge",
    "swrag_integrations.grounding.langchain": "swrag_integrations.methods.grounding.langchain",
    "swrag_integrations.grounding.llama_index": "swrag_integrations.methods.grounding.llama_index",
    "swrag_integrations.grounding.result": "swrag_integrations.methods.grounding.result",
    "swrag_integrations.grounding.sentences": "swrag_integrations.methods.grounding.sentences",
    "swrag_integrations.llm.chat": "swrag_integrations.llm.langchain_chat",
    "swrag_integrations.paths": "swrag_integrations.core.paths",
    "swrag_integrations.raptor": "swrag_integrations.methods.raptor",
    "swrag_integrations.raptor.build": "swrag_integrations.methods.raptor.build",
    "swrag_integrations.raptor.cli": "swrag_integrations.cli.raptor",
    "swrag_integrations.raptor.clustering": "swrag_integrations.methods.raptor.clustering",
    "swrag_integrations.raptor.evaluation": "swrag_integrations.evaluation.methods.raptor",
    "swrag_integrations.raptor.leaves": "swrag_integrations.methods.raptor.leaves",
    "swrag_integrations.raptor.llama_index": "swrag_integrations.methods.raptor.llama_index",
    "swrag_integrations.raptor.retrievers": "swrag_integrations.methods.raptor.langchain",
    "swrag_integrations.raptor.search": "swrag_integrations.methods.raptor.search",
    "swrag_integrations.raptor.store": "swrag_integrations.methods.raptor.store",
    "swrag_integrations.raptor.summarise": "swrag_integrations.methods.raptor.summarise",
    "swrag_integrations.raptor.tree": "swrag_integrations.methods.raptor.tree",
    "swrag_integrations.retrieval.assemble": "swrag_integrations.engine.assemble",
    "swrag_integrations.retrieval.bm25": "swrag_integrations.keyword.bm25",
    "swrag_integrations.retrieval.bm25_tantivy": "swrag_integrations.keyword.tantivy",
    "swrag_integrations.retrieval.chroma": "swrag_integrations.stores.chroma",
    "swrag_integrations.retrieval.config": "swrag_integrations.engine.config",
    "swrag_integrations.retrieval.embedding_backends": "swrag_integrations.embeddings.backends",
    "swrag_integrations.retrieval.embedding_base": "swrag_integrations.embeddings.base",
    "swrag_integrations.retrieval.embeddings": "swrag_integrations.embeddings.minilm",
    "swrag_integrations.retrieval.engine": "swrag_integrations.engine.engine",
    "swrag_integrations.retrieval.files": "swrag_integrations.ingest.files",
    "swrag_integrations.retrieval.filestore": "swrag_integrations.stores.filestore",
    "swrag_integrations.retrieval.filters": "swrag_integrations.engine.filters",
    "swrag_integrations.retrieval.fusion": "swrag_integrations.langchain.fusion",
    "swrag_integrations.retrieval.health": "swrag_integrations.engine.health",
    "swrag_integrations.retrieval.ids": "swrag_integrations.engine.ids",
    "swrag_integrations.retrieval.index": "swrag_integrations.langchain.index",
    "swrag_integrations.retrieval.keyword": "swrag_integrations.keyword.index",
    "swrag_integrations.retrieval.llama_index": "swrag_integrations.llama_index.index",
    "swrag_integrations.retrieval.migrate": "swrag_integrations.engine.migrate",
    "swrag_integrations.retrieval.milvus": "swrag_integrations.stores.milvus",
    "swrag_integrations.retrieval.multi_query": "swrag_integrations.langchain.multi_query",
    "swrag_integrations.retrieval.onnx_bert": "swrag_integrations.embeddings.onnx_bert",
    "swrag_integrations.retrieval.onnx_embeddings": "swrag_integrations.embeddings.onnx",
    "swrag_integrations.retrieval.parallel": "swrag_integrations.ingest.workers",
    "swrag_integrations.retrieval.parents": "swrag_integrations.engine.parents",
    "swrag_integrations.retrieval.plain": "swrag_integrations.langchain.plain",
    "swrag_integrations.retrieval.protocols": "swrag_integrations.engine.protocols",
    "swrag_integrations.retrieval.ray_ingest": "swrag_integrations.ingest.ray",
    "swrag_integrations.retrieval.records": "swrag_integrations.engine.records",
    "swrag_integrations.retrieval.retriever": "swrag_integrations.langchain.retriever",
    "swrag_integrations.retrieval.search": "swrag_integrations.langchain.search",
    "swrag_integrations.retrieval.settings": "swrag_integrations.engine.settings",
    "swrag_integrations.retrieval.sources": "swrag_integrations.stores.sources",
    "swrag_integrations.retrieval.storage": "swrag_integrations.stores.storage",
    "swrag_integrations.retrieval.store_uri": "swrag_integrations.stores.store_uri",
    "swrag_integrations.retrieval.trace": "swrag_integrations.engine.trace",
    "swrag_integrations.retrieval.tuned": "swrag_integrations.engine.tuned",
    "swrag_integrations.retrieval.vectors": "swrag_integrations.langchain.vectorstore",
    "swrag_integrations.retrieval.writer": "swrag_integrations.ingest.writer",
    "swrag_integrations.textcache": "swrag_integrations.core.textcache",
    "swrag_integrations.tuning.cli": "swrag_integrations.cli.tune",
    "swrag_integrations.view.cli": "swrag_integrations.cli.view",
    "swrag_integrations.windows": "swrag_integrations.core.windows",
}

# the old retrieval package's names -> the module that defines each now
RETRIEVAL_NAMES: dict[str, str] = {
    "AssembledContext": "swrag_integrations.engine.assemble",
    "BM25Index": "swrag_integrations.keyword.bm25",
    "CJKBM25Retriever": "swrag_integrations.langchain.search",
    "Candidate": "swrag_integrations.engine.parents",
    "ChildHit": "swrag_integrations.engine.protocols",
    "ChromaByteStore": "swrag_integrations.stores.sources",
    "ChromaStorage": "swrag_integrations.stores.chroma",
    "ChunkId": "swrag_integrations.engine.ids",
    "ChunkIndex": "swrag_integrations.engine.protocols",
    "ChunkRow": "swrag_integrations.engine.protocols",
    "ContextSpan": "swrag_integrations.engine.assemble",
    "DenseChunkRetriever": "swrag_integrations.langchain.search",
    "Embedder": "swrag_integrations.stores.storage",
    "HybridRetriever": "swrag_integrations.langchain.search",
    "IndexConfig": "swrag_integrations.engine.config",
    "IndexDamagedError": "swrag_integrations.engine.engine",
    "IndexEngine": "swrag_integrations.engine.engine",
    "IndexMismatchError": "swrag_integrations.engine.engine",
    "IndexReport": "swrag_integrations.ingest.writer",
    "IndexStatus": "swrag_integrations.engine.health",
    "IndexTextEmbeddings": "swrag_integrations.langchain.vectorstore",
    "KVSourceStore": "swrag_integrations.stores.sources",
    "KeywordIndex": "swrag_integrations.keyword.index",
    "LoadResult": "swrag_integrations.ingest.files",
    "LoadWarning": "swrag_integrations.ingest.files",
    "LockTimeout": "swrag_integrations.stores.sources",
    "MetadataFilter": "swrag_integrations.engine.filters",
    "MilvusStorage": "swrag_integrations.stores.milvus",
    "MiniLMEmbeddings": "swrag_integrations.embeddings.minilm",
    "MiniLMLlamaIndexEmbedding": "swrag_integrations.llama_index.index",
    "MultiQueryFusionRetriever": "swrag_integrations.langchain.multi_query",
    "NodeChunkIndex": "swrag_integrations.llama_index.index",
    "OnnxSentenceEncoder": "swrag_integrations.embeddings.onnx",
    "PlainDocument": "swrag_integrations.stores.storage",
    "PrecomputedEmbeddings": "swrag_integrations.langchain.vectorstore",
    "SlidingWindowIndex": "swrag_integrations.langchain.index",
    "SlidingWindowLlamaIndex": "swrag_integrations.llama_index.index",
    "SourceRecord": "swrag_integrations.engine.records",
    "SourceStore": "swrag_integrations.stores.sources",
    "SourceStoreError": "swrag_integrations.stores.sources",
    "SqliteSourceStore": "swrag_integrations.stores.sources",
    "VectorBackend": "swrag_integrations.langchain.vectorstore",
    "VectorStorage": "swrag_integrations.stores.storage",
    "VectorStoreError": "swrag_integrations.langchain.vectorstore",
    "WindowedLlamaIndexRetriever": "swrag_integrations.llama_index.index",
    "WindowedParentRetriever": "swrag_integrations.langchain.retriever",
    "assemble_context": "swrag_integrations.engine.assemble",
    "batch_source_ids": "swrag_integrations.engine.ids",
    "chunk_id": "swrag_integrations.engine.ids",
    "contains_cjk": "swrag_integrations.keyword.bm25",
    "count_tokens": "swrag_integrations.engine.assemble",
    "default_embeddings": "swrag_integrations.embeddings.minilm",
    "doc_key": "swrag_integrations.langchain.fusion",
    "ensure_onnx_model": "swrag_integrations.embeddings.onnx",
    "expand_parents": "swrag_integrations.engine.parents",
    "generate_queries": "swrag_integrations.langchain.multi_query",
    "index_in_parallel": "swrag_integrations.ingest.workers",
    "index_with_ray": "swrag_integrations.ingest.ray",
    "list_files": "swrag_integrations.ingest.files",
    "load_files": "swrag_integrations.ingest.files",
    "merge_spans": "swrag_integrations.engine.assemble",
    "minilm_model_path": "swrag_integrations.embeddings.minilm",
    "parse_chunk_id": "swrag_integrations.engine.ids",
    "parse_filter": "swrag_integrations.engine.filters",
    "parse_query_variants": "swrag_integrations.langchain.multi_query",
    "parse_store_uri": "swrag_integrations.stores.store_uri",
    "plan_source": "swrag_integrations.engine.records",
    "rank_parents": "swrag_integrations.engine.parents",
    "reciprocal_rank_fusion": "swrag_integrations.langchain.fusion",
    "rrf": "swrag_integrations.langchain.fusion",
    "source_id_for": "swrag_integrations.engine.ids",
    "source_key": "swrag_integrations.engine.ids",
    "tokenize": "swrag_integrations.keyword.bm25",
    "validate_collection_name": "swrag_integrations.engine.engine",
    "vector_id": "swrag_integrations.engine.ids",
    "write_planned": "swrag_integrations.ingest.writer",
}



# names that moved out of a module that still exists: old module -> {name: new module}
# (the old module sets ``__getattr__ = moved_names_getattr(__name__)``)
_CONTEXT_FACE = "swrag_integrations.methods.context.langchain"
MOVED_NAMES: dict[str, dict[str, str]] = {
    "swrag_integrations.methods.context.headers": dict.fromkeys(("ContextualChunkHeaders", "ContextualEmbeddings"), _CONTEXT_FACE),
    "swrag_integrations.methods.context.ordering": dict.fromkeys(("DiversityReranker", "LostInTheMiddleReorder"), _CONTEXT_FACE),
    "swrag_integrations.methods.context.rerank": dict.fromkeys(
        ("BaseReranker", "CompressorReranker", "EmbeddingReranker", "LLMJudgeReranker"), _CONTEXT_FACE),
    "swrag_integrations.methods.context.rse": dict.fromkeys(("RelevantSegmentExtractor",), _CONTEXT_FACE),
    "swrag_integrations.methods.chain": {"build_rag_chain": "swrag_integrations.methods.langchain_chain",
                                         "chat_model_for": "swrag_integrations.methods.langchain_chain",
                                         "build_query_engine": "swrag_integrations.methods.llama_index_chain"},
}


def _warn(old: str, new: str) -> None:
    # stacklevel 3: past this function and its caller here; the warnings module skips the
    # import system's own frames, so the warning points at the import or the name's use.
    warnings.warn(f"{old} moved to {new}; the old path will be removed in {REMOVED_IN}",
                  DeprecationWarning, stacklevel=3)


def _retrieval_getattr(name: str) -> Any:
    module = RETRIEVAL_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {RETRIEVAL!r} has no attribute {name!r}")
    _warn(f"{RETRIEVAL}.{name}", f"{module}.{name}")
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[RETRIEVAL], name, value)  # warned once: ``from ... import`` asks twice
    return value


class _Alias(importlib.abc.Loader):
    """Loads an old path as the new module itself (the same object in ``sys.modules``)."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self.spec: Any = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        _warn(self.old, self.new)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the old path's spec: keep the module's own


class _StandIn(importlib.abc.Loader):
    """The old ``swrag_integrations.retrieval`` package: a name resolves to its new module."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__doc__ = f"Moved: the names of {RETRIEVAL} are in the rooms engine, stores, keyword, embeddings, ingest, langchain and llama_index."
        module.__all__ = sorted(RETRIEVAL_NAMES)
        module.__getattr__ = _retrieval_getattr
        module.__dir__ = lambda: sorted(RETRIEVAL_NAMES)


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old module paths of `MOVED` and the old retrieval package."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == RETRIEVAL:
            return importlib.machinery.ModuleSpec(fullname, _StandIn(), is_package=True)
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, new))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once), so an old path never finds a stale folder."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())


def moved_names_getattr(module: str) -> Any:
    """The module ``__getattr__`` of ``module``, whose names of `MOVED_NAMES` moved
    elsewhere: each resolves to the new module's object, with one `DeprecationWarning`."""
    names = MOVED_NAMES[module]

    def __getattr__(name: str) -> Any:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        _warn(f"{module}.{name}", f"{new}.{name}")
        return getattr(importlib.import_module(new), name)

    return __getattr__
