"""Windowed retrieval: small chunks found precisely, widened to merged windows.

Layout (one concern per module; framework-free unless noted):

=================  ===================================================================
``ids``            source, chunk and vector ids (make + parse)
``config``         :class:`IndexConfig`: how an index cuts its sources
``records``        :class:`SourceRecord` (text + chunk offsets) and ``plan_source``
``sources``        source stores: SQLite, any LangChain byte store, a Chroma collection
``keyword``        BM25 kept in step with the source store (``bm25``: BM25 + tokenizer)
``storage``        :class:`VectorStorage`: what the engine needs from a vector store
``chroma``         :class:`ChromaStorage`: Chroma through ``chromadb`` (the engine's default)
``vectors``        :class:`VectorBackend`: the storage over any LangChain ``VectorStore`` (LangChain)
``engine``         :class:`IndexEngine`: sources, writer, keyword index, health, search (no framework)
``index``          :class:`SlidingWindowIndex`: the engine as a LangChain ``VectorStore`` (LangChain)
``plain``          its ``VectorStore`` face: the added documents, ranked by their best chunk
``filters``        metadata filters: one definition, pushed down to each store (:func:`parse_filter`)
``writer``         add / replace / remove / prune / repair under the writer lock (``write_planned``)
``parallel``       ingestion in N worker processes, one writer (``workers=N``)
``ray_ingest``     ingestion as a Ray Data pipeline (``index_with_ray``; the ``[ray]`` extra)
``health``         ``status`` and the self-retrieval probe
``files``          loading .txt/.md/.pdf/.csv without silent loss
``protocols``      :class:`ChunkIndex`: what the parent retriever needs
``parents``        hits -> parents -> budgeted spans (the planner)
``assemble``       merge spans by offset under a token budget
``fusion``         the one reciprocal-rank fusion
``search``         LangChain retrievers: BM25, dense, hybrid (LangChain)
``retriever``      :class:`WindowedParentRetriever` (LangChain)
``multi_query``    :class:`MultiQueryFusionRetriever` (LangChain)
``llama_index``    LlamaIndex-native retrievers and embeddings (LlamaIndex)
``embeddings``     the bundled MiniLM (sentence-transformers or ONNX Runtime; ``onnx_embeddings``)
=================  ===================================================================

Names are imported lazily, so ``from swrag_integrations.retrieval import assemble_context``
needs neither LangChain nor LlamaIndex.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_LAZY = {
    "AssembledContext": "assemble", "ContextSpan": "assemble", "assemble_context": "assemble",
    "count_tokens": "assemble", "merge_spans": "assemble",
    "BM25Index": "bm25", "contains_cjk": "bm25", "tokenize": "bm25",
    "IndexConfig": "config",
    "rrf": "fusion", "doc_key": "fusion", "reciprocal_rank_fusion": "fusion",
    "ChunkId": "ids", "chunk_id": "ids", "parse_chunk_id": "ids", "source_id_for": "ids", "source_key": "ids",
    "vector_id": "ids", "batch_source_ids": "ids",
    "MetadataFilter": "filters", "parse_filter": "filters",
    "SourceRecord": "records", "plan_source": "records",
    "SourceStore": "sources", "SqliteSourceStore": "sources", "KVSourceStore": "sources",
    "ChromaByteStore": "sources", "LockTimeout": "sources", "SourceStoreError": "sources",
    "KeywordIndex": "keyword",
    "VectorBackend": "vectors", "IndexTextEmbeddings": "vectors", "VectorStoreError": "vectors",
    "PrecomputedEmbeddings": "vectors",
    "write_planned": "writer", "index_in_parallel": "parallel", "index_with_ray": "ray_ingest",
    "list_files": "files",
    "SlidingWindowIndex": "index", "IndexMismatchError": "engine", "IndexDamagedError": "engine",
    "validate_collection_name": "engine", "IndexEngine": "engine",
    "VectorStorage": "storage", "PlainDocument": "storage", "Embedder": "storage", "ChromaStorage": "chroma",
    "IndexReport": "writer", "IndexStatus": "health",
    "load_files": "files", "LoadResult": "files", "LoadWarning": "files",
    "ChildHit": "protocols", "ChunkRow": "protocols", "ChunkIndex": "protocols",
    "Candidate": "parents", "rank_parents": "parents", "expand_parents": "parents",
    "CJKBM25Retriever": "search", "DenseChunkRetriever": "search", "HybridRetriever": "search",
    "WindowedParentRetriever": "retriever",
    "MultiQueryFusionRetriever": "multi_query", "generate_queries": "multi_query",
    "parse_query_variants": "multi_query",
    "WindowedLlamaIndexRetriever": "llama_index", "NodeChunkIndex": "llama_index",
    "MiniLMLlamaIndexEmbedding": "llama_index", "SlidingWindowLlamaIndex": "llama_index",
    "MiniLMEmbeddings": "embeddings", "default_embeddings": "embeddings", "minilm_model_path": "embeddings",
    "OnnxSentenceEncoder": "onnx_embeddings", "ensure_onnx_model": "onnx_embeddings",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
