"""Grounded answers: every answer sentence tied to exact source offsets, unsupported claims flagged.

Framework-free core:

* :func:`~.sentences.split_sentences` - answer sentences (Chinese and English) with exact offsets;
* :class:`~.align.GroundingChecker` / :func:`~.align.ground_answer` - align each sentence to
  the retrieved spans (lexical, CJK-aware, optionally embeddings), supports as exact source
  sub-spans, unsupported numbers/dates/names (:mod:`.claims`), optional LLM judge
  (:class:`~.judge.LLMJudge`);
* :class:`~.result.GroundedAnswer` - the result: per sentence supports, score, claims;
  de-duplicated numbered citations; ``to_dict``/``to_json``/``render``;
* :func:`~.align.groundedness` - the per-answer figures ``swrag eval`` records.

Framework faces (imported on first use): :func:`ground_chain_output`,
:func:`grounding_runnable`, :func:`format_grounded_answer` (LangChain, ``.langchain``) and
:func:`ground_response`, :class:`GroundedQueryEngine` (LlamaIndex, ``.llama_index``).
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

# Imported on first use (the framework faces import their framework).
_LAZY = {
    "GroundedAnswer": "result",
    "GroundedQueryEngine": "llama_index",
    "GroundingChecker": "align",
    "LLMJudge": "judge",
    "format_grounded_answer": "langchain",
    "ground_answer": "align",
    "ground_chain_output": "langchain",
    "ground_response": "llama_index",
    "grounding_runnable": "langchain",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "Citation": "result",
    "Claim": "claims",
    "ContextFacts": "claims",
    "Passage": "align",
    "Sentence": "sentences",
    "SentenceGrounding": "result",
    "Support": "result",
    "extract_claims": "claims",
    "groundedness": "align",
    "parse_verdict": "judge",
    "split_sentences": "sentences",
    "split_units": "sentences",
    "to_passages": "align",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
