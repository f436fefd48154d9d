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

from swrag_integrations.methods.grounding.align import GroundingChecker, Passage, ground_answer, groundedness, to_passages
from swrag_integrations.methods.grounding.claims import Claim, ContextFacts, extract_claims
from swrag_integrations.methods.grounding.judge import LLMJudge, parse_verdict
from swrag_integrations.methods.grounding.result import Citation, GroundedAnswer, SentenceGrounding, Support
from swrag_integrations.methods.grounding.sentences import Sentence, split_sentences, split_units

_LAZY = {
    "ground_chain_output": ".langchain",
    "grounding_runnable": ".langchain",
    "format_grounded_answer": ".langchain",
    "ground_response": ".llama_index",
    "GroundedQueryEngine": ".llama_index",
}

__all__ = [
    "GroundingChecker", "ground_answer", "groundedness", "Passage", "to_passages",
    "Claim", "ContextFacts", "extract_claims", "LLMJudge", "parse_verdict",
    "Citation", "GroundedAnswer", "SentenceGrounding", "Support", "Sentence", "split_sentences", "split_units",
    *_LAZY,
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
