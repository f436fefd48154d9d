"""The tuner's output file: `TunedConfig` (defined in
`swrag_integrations.engine.tuned`, because an index reads it when it is built or
reopened with ``config=``; re-exported here where the tuner's users look for it)."""

from __future__ import annotations

from swrag_integrations.engine.tuned import FORMAT_VERSION, TunedConfig, check_writable, load_config

__all__ = ["TunedConfig", "load_config", "check_writable", "FORMAT_VERSION"]
