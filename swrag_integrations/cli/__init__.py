"""The ``swrag`` command and its subcommands (entry point ``swrag_integrations.cli:main``).

`app` holds the command and its core subcommands (index, status, repair, ask, demo,
split, bench); `common` the options they share; ``raptor``, ``graph``, ``tune``,
``view`` and ``eval`` one subcommand group each. Names are imported on first use.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    "main": "app",
    "sample_path": "app",
}

# No longer exported here (reachable by module path); importing them from the package
# still works for one release, with a DeprecationWarning naming the module.
_DEPRECATED = {
    "COMMANDS": "app",
    "DEMO_QUESTIONS": "app",
    "DiskFullError": "app",
    "EXIT_INPUT": "app",
    "EXIT_UNHEALTHY": "app",
    "EXIT_USAGE": "app",
    "build_parser": "app",
    "disk_full_message": "app",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _DEPRECATED)
