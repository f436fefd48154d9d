"""A tuned configuration as a strategy of ``swrag eval`` (``--config CONFIG.json``).

`register_config` loads a configuration file and registers a pipeline named
``config-<file stem>`` in `PIPELINES`: the
windowed parent retriever of `ParentPipeline`
(Chroma + the eval's cached MiniLM), with the configuration's index and retriever keywords.
The eval's ``--budget`` (and ``--k``) win over the file's ``budget_tokens``: every strategy
of a grid gets the same budget.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from swrag_integrations.evaluation.langchain_pipelines import ParentPipeline
from swrag_integrations.evaluation.pipelines import PipelineSpec, register_pipeline
from swrag_integrations.engine.settings import DEFAULT_BUDGET_TOKENS
from swrag_integrations.tuning.config import TunedConfig

__all__ = ["ConfigPipeline", "register_config", "config_strategy_name"]


class ConfigPipeline(ParentPipeline):
    """``ParentPipeline`` with a `TunedConfig`'s keywords (set ``CONFIG``
    on a subclass; `register_config` does)."""

    CONFIG: TunedConfig | None = None

    def __init__(self, sources, config, *, budget: int = DEFAULT_BUDGET_TOKENS, **kwargs: Any) -> None:
        if self.CONFIG is None:
            raise TypeError("ConfigPipeline needs a subclass with CONFIG set (use register_config)")
        super().__init__(sources, config, budget=budget, **kwargs)

    def make_retrievers(self) -> None:
        """The configuration's retriever at the pipeline's budget (rebuilt by ``set_budget``)."""
        options = {**self.CONFIG.retriever_kwargs, "budget_tokens": self.budget}
        if self.k is not None:
            options["k"] = self.k
        self.retriever = self.index.as_retriever(**options)

    def _index_options(self, config) -> dict:
        return self.CONFIG.index_kwargs


def config_strategy_name(path: str | os.PathLike) -> str:
    """``config-<stem>``: the file stem, lower-cased, other characters than ``[a-z0-9._-]`` as ``-``."""
    stem = re.sub(r"[^a-z0-9._-]+", "-", Path(path).stem.lower()).strip("-") or "tuned"
    return f"config-{stem}"


def register_config(path: str | os.PathLike, name: str | None = None) -> str:
    """Register the configuration file ``path`` as an eval strategy; returns its name.

    Raises:
        FileNotFoundError / ValueError: see `TunedConfig.load`.
    """
    loaded = TunedConfig.load(path)
    name = name or config_strategy_name(path)
    cls_name = "Config_" + re.sub(r"\W", "_", name)
    cls = type(cls_name, (ConfigPipeline,), {"CONFIG": loaded, "__module__": __name__})
    register_pipeline(name, PipelineSpec(cls, None, needs_embeddings=True,
                                         description=f"tuned configuration {path}: {loaded.candidate.label}"))
    return name
