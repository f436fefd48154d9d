"""The tuner's in-memory index over LangChain parts (a framework face of `engine`).

`memory_index` is the package's `SlidingWindowIndex`
over a FAISS flat L2 index of normalised vectors (exact cosine, MMR supported;
langchain-community's ``FAISS``) and LangChain's ``InMemoryByteStore``; nothing touches
disk. `source_documents` turns the corpus's texts into the documents it indexes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from swrag_integrations.core.windows import DEFAULT_ENCODING

__all__ = ["memory_index", "source_documents"]


def source_documents(texts: Mapping[str, str], source_ids: Sequence[str]) -> list[Any]:
    """LangChain ``Document`` s of the sources ``source_ids`` (``texts``: source id -> text),
    each with its source id as ``id`` and in ``metadata["tune_source"]``."""
    from langchain_core.documents import Document

    return [Document(page_content=texts[sid], id=sid, metadata={"tune_source": sid}) for sid in source_ids]


def memory_index(documents: Sequence[Any], embeddings: Any, index_kwargs: Mapping[str, Any], *,
                 encoding_name: str = DEFAULT_ENCODING) -> Any:
    """A `SlidingWindowIndex` in memory (FAISS +
    ``InMemoryByteStore``) holding ``documents``."""
    import faiss
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS
    from langchain_core.stores import InMemoryByteStore

    from swrag_integrations.langchain.index import SlidingWindowIndex

    dim = len(embeddings.embed_query("dimension probe"))
    # L2 over L2-normalised vectors ranks exactly as cosine (the default Chroma's distance)
    store = FAISS(embedding_function=embeddings, index=faiss.IndexFlatL2(dim), docstore=InMemoryDocstore(),
                  index_to_docstore_id={}, normalize_L2=True)
    index = SlidingWindowIndex(vectorstore=store, source_store=InMemoryByteStore(), embedding=embeddings,
                               show_progress=False, encoding_name=encoding_name, **dict(index_kwargs))
    if documents:
        index.engine.index_documents(documents)
    return index
