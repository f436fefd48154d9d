"""Grounded answers: every answer sentence tied to exact source offsets, unsupported claims flagged.

Framework-free core:

* `split_sentences` - answer sentences (Chinese and English) with exact offsets;
* `GroundingChecker` / `ground_answer` - align each sentence to
  the retrieved spans (lexical, CJK-aware, optionally embeddings), supports as exact source
  sub-spans, unsupported numbers/dates/names (`claims`), optional LLM judge
  (`LLMJudge`);
* `GroundedAnswer` - the result: per sentence supports, score, claims;
  de-duplicated numbered citations; ``to_dict``/``to_json``/``render``;
* `groundedness` - the per-answer figures ``swrag eval`` records.

Framework faces (imported on first use): `ground_chain_output`,
`grounding_runnable`, `format_grounded_answer` (LangChain, ``.langchain``) and
`ground_response`, `GroundedQueryEngine` (LlamaIndex, ``.llama_index``).
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
