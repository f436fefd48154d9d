"""A configuration tuned to the user's corpus, without labelled questions.

``tune(paths | documents, out="config.json")`` builds self-supervised questions from the
documents (:mod:`.synthetic`), searches index and retriever settings by successive halving
(:mod:`.search`, :mod:`.space`, :mod:`.engine`) on their context recall, and returns a
:class:`TunedConfig` (:mod:`.config`) whose ``index_kwargs`` / ``retriever_kwargs`` go to
``SlidingWindowIndex(...)`` / ``index.as_retriever(...)``. ``swrag tune`` is :mod:`.cli`.
Measured on the dev sets in ``docs/eval/tuning.md``.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "tune": "tune", "load_sources": "tune",
    "TunedConfig": "config", "load_config": "config",
    "SearchSpace": "space", "Candidate": "space", "DEFAULT_CANDIDATE": "space",
    "build_synthetic_set": "synthetic", "SyntheticQuestion": "synthetic", "SyntheticSet": "synthetic",
    "exact_match_leak": "synthetic", "TooLittleTextError": "synthetic",
    "successive_halving": "search", "SearchState": "search", "plan_rungs": "search",
    "Evaluator": "engine",
    "register_config": "evaluation",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
