"""A configuration tuned to the user's corpus, without labelled questions.

``tune(paths | documents, out="config.json")`` builds self-supervised questions from the
documents (`synthetic`), searches index and retriever settings by successive halving
(`search`, `space`, `engine`) on their context recall, and returns a
`TunedConfig` (`config`) whose ``index_kwargs`` / ``retriever_kwargs`` go to
``SlidingWindowIndex(...)`` / ``index.as_retriever(...)``. ``swrag tune`` is `cli`.
Measured on the dev sets in ``docs/eval/tuning.md``.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "TunedConfig": "config",
    "load_config": "config",
    "tune": "tune",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "Candidate": "space",
    "DEFAULT_CANDIDATE": "space",
    "Evaluator": "engine",
    "SearchSpace": "space",
    "SearchState": "search",
    "SyntheticQuestion": "synthetic",
    "SyntheticSet": "synthetic",
    "TooLittleTextError": "synthetic",
    "build_synthetic_set": "synthetic",
    "exact_match_leak": "synthetic",
    "load_sources": "tune",
    "plan_rungs": "search",
    "register_config": "evaluation",
    "successive_halving": "search",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
