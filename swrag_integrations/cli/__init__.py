"""The ``swrag`` command and its subcommands (entry point ``swrag_integrations.cli:main``).

:mod:`.app` holds the command and its core subcommands (index, status, repair, ask, demo,
split, bench); :mod:`.common` the options they share; ``raptor``, ``graph``, ``tune``,
``view`` and ``eval`` one subcommand group each. Names are imported on first use.
"""

from __future__ import annotations

from swrag_integrations.core._lazy import lazy_exports

_LAZY = {
    name: "app"
    for name in ("main", "build_parser", "sample_path", "DEMO_QUESTIONS", "COMMANDS", "DiskFullError",
                 "disk_full_message", "EXIT_USAGE", "EXIT_INPUT", "EXIT_UNHEALTHY")
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
