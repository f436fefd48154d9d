"""A complete retrieval configuration (`Candidate`) and its file (`TunedConfig`).

Both belong to the retrieval layer: an index records the configuration it was built
with and reopens with it, so reading the file must not need the tuner (``swrag tune``,
`swrag_integrations.tuning`, writes it; the tuner's search space is made of
`Candidate` points). Every value is checked by the one definition of each part:
the chunking by `IndexConfig`, the retriever by
`RetrieverSettings`.

File layout (``swrag_tuned_config`` = format version)::

    {
      "swrag_tuned_config": 1,
      "index":     {"chunk_size": 50, "child": "sentence", "strategy": "chunks", ...},
      "retriever": {"k_child": 10, "search_type": "mmr", "weights": [0.5, 0.5], ...,
                    "budget_tokens": 1500},
      "chosen": "tuned" | "default",
      "evidence": {... scores per candidate with confidence intervals, the rungs,
                   the comparison with the default, the synthetic set's report ...}
    }

Round trip: ``SlidingWindowIndex(dir, config="CONFIG.json")`` builds the index with this chunking and records the
configuration in it (``index.tuned_config``, kept across reopening); its
``as_retriever()`` then starts from the retriever settings. The plain keywords work too:
``SlidingWindowIndex(dir, **config.index_kwargs)`` and
``index.as_retriever(**config.retriever_kwargs)``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from swrag_integrations.engine.config import TUNABLE_INDEX_KEYS, IndexConfig
from swrag_integrations.engine.settings import DEFAULT_SETTINGS, TUNABLE_RETRIEVER_KEYS, check_weights, positive_int

__all__ = ["Candidate", "TunedConfig", "load_config", "check_writable", "FORMAT_VERSION", "INDEX_KEYS",
           "RETRIEVER_KEYS"]

INDEX_KEYS = TUNABLE_INDEX_KEYS
RETRIEVER_KEYS = TUNABLE_RETRIEVER_KEYS


@dataclass(frozen=True)
class Candidate:
    """One configuration: index keywords + retriever keywords (complete and checked).

    Build with `make` (fills defaults and validates); ``index``/``retriever`` are
    sorted ``(name, value)`` tuples so candidates hash and compare by value.
    """

    index: tuple[tuple[str, Any], ...]
    retriever: tuple[tuple[str, Any], ...]

    @classmethod
    def make(cls, index: Mapping[str, Any] | None = None, retriever: Mapping[str, Any] | None = None) -> "Candidate":
        """A candidate from partial keywords; missing ones take the package defaults.

        Raises:
            ValueError/TypeError: an unknown keyword or a value the index or retriever refuses.
        """
        index = dict(index or {})
        retriever = dict(retriever or {})
        unknown = sorted(set(index) - set(INDEX_KEYS))
        if unknown:
            raise ValueError(f"unknown index parameter(s) {unknown}; tunable: {', '.join(INDEX_KEYS)}")
        unknown = sorted(set(retriever) - set(RETRIEVER_KEYS))
        if unknown:
            raise ValueError(f"unknown retriever parameter(s) {unknown}; tunable: {', '.join(RETRIEVER_KEYS)}")
        strategy = index.get("strategy")
        resolved = IndexConfig.resolve(strategy=strategy, window_size=index.get("window_size"), step=index.get("step"),
                                       **{k: index.get(k) for k in ("chunk_size", "child", "unit")})
        full_index = {k: getattr(resolved, k) for k in INDEX_KEYS}
        settings = DEFAULT_SETTINGS.with_(**retriever)  # checked; weights as a tuple of floats
        full_retriever = {k: getattr(settings, k) for k in RETRIEVER_KEYS}
        return cls(tuple(sorted(full_index.items())), tuple(sorted(full_retriever.items())))

    @property
    def index_kwargs(self) -> dict[str, Any]:
        """Keywords for ``SlidingWindowIndex(**index_kwargs)``."""
        return dict(self.index)

    @property
    def retriever_kwargs(self) -> dict[str, Any]:
        """Keywords for ``index.as_retriever(**retriever_kwargs)`` (``weights`` as a tuple)."""
        return dict(self.retriever)

    @property
    def index_key(self) -> str:
        """Identity of the index this candidate needs (candidates sharing it share a build)."""
        return json.dumps(dict(self.index), sort_keys=True)

    @property
    def key(self) -> str:
        """Stable identity of the whole candidate (JSON)."""
        return json.dumps({"index": dict(self.index), "retriever": {k: list(v) if isinstance(v, tuple) else v
                                                                     for k, v in self.retriever}}, sort_keys=True)

    @property
    def label(self) -> str:
        """A short human-readable description."""
        i, r = self.index_kwargs, self.retriever_kwargs
        if i["strategy"] == "chunks":
            win = f"W{i['window_size']}/S{i['step']}"
        else:
            win = f"{i['strategy']} {i['window_size']}/{i['step']}"
        unit = "" if i["unit"] == "token" else " char"
        w = r["weights"]
        return (f"{i['child']} {i['chunk_size']}{unit} {win} | k_child={r['k_child']} {r['search_type']} "
                f"w={w[0]:g}/{w[1]:g} expand={r['expand']}")

    def to_dict(self) -> dict[str, Any]:
        r = {k: list(v) if isinstance(v, tuple) else v for k, v in self.retriever}
        return {"index": dict(self.index), "retriever": r}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Candidate":
        if not isinstance(data, Mapping) or "index" not in data or "retriever" not in data:
            raise ValueError(f"a candidate needs 'index' and 'retriever' mappings, got {data!r}")
        return cls.make(data["index"], data["retriever"])


FORMAT_VERSION = 1


def check_writable(path: str | os.PathLike) -> Path:
    """Fail early (``ValueError`` naming the path) when ``path`` cannot be written: its
    folder cannot be created or written to, or it is a directory."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"output {str(path)!r} is a directory; give a file name such as {str(path / 'config.json')!r}")
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"output {str(path)!r} cannot be written: its folder cannot be created ({exc})") from exc
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"output {str(path)!r} cannot be written: no write permission in {str(parent)!r}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"output {str(path)!r} cannot be written: the file is read-only")
    return path


@dataclass
class TunedConfig:
    """A configuration for `SlidingWindowIndex` and
    its retriever, with the evidence that chose it.

    Attributes:
        index_kwargs: index keywords (``chunk_size``, ``child``, ``strategy``,
            ``window_size``, ``step``, ``unit``): ``SlidingWindowIndex(dir, **index_kwargs)``.
        retriever_kwargs: retriever keywords (``k_child``, ``search_type``, ``weights``,
            ``expand``, ``budget_tokens``):
            ``index.as_retriever(**retriever_kwargs)``.
        chosen: ``"tuned"`` (the search's winner) or ``"default"`` (the winner did not
            beat today's defaults on the synthetic questions, so they are kept).
        evidence: what the search measured (see `tune`).
    """

    index_kwargs: dict[str, Any]
    retriever_kwargs: dict[str, Any]
    chosen: str = "tuned"
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index_kwargs = dict(self.index_kwargs)
        self.retriever_kwargs = dict(self.retriever_kwargs)
        unknown = sorted(set(self.index_kwargs) - set(INDEX_KEYS))
        if unknown:
            raise ValueError(f"unknown index parameter(s) {unknown} in the configuration; known: {', '.join(INDEX_KEYS)}")
        unknown = sorted(set(self.retriever_kwargs) - set(RETRIEVER_KEYS) - {"budget_tokens", "k"})
        if unknown:
            raise ValueError(f"unknown retriever parameter(s) {unknown} in the configuration; known: "
                             f"{', '.join(RETRIEVER_KEYS + ('budget_tokens', 'k'))}")
        if "weights" in self.retriever_kwargs:
            self.retriever_kwargs["weights"] = check_weights(self.retriever_kwargs["weights"])
        self.candidate  # validates every value (ValueError naming the parameter)
        from swrag_integrations.engine.settings import positive_int

        for name in ("k", "budget_tokens"):  # the retriever keys the search space does not hold
            positive_int(name, self.retriever_kwargs.get(name), optional=True)
        if self.chosen not in ("tuned", "default"):
            raise ValueError(f"chosen must be 'tuned' or 'default', got {self.chosen!r}")

    @classmethod
    def from_candidate(cls, candidate: Candidate, *, budget_tokens: int | None = 1500, chosen: str = "tuned",
                       evidence: Mapping[str, Any] | None = None) -> "TunedConfig":
        """The configuration of a searched ``candidate``, with its retriever's ``budget_tokens``,
        how it was ``chosen`` and the ``evidence`` that chose it."""
        return cls(candidate.index_kwargs, {**candidate.retriever_kwargs, "budget_tokens": budget_tokens}, chosen,
                   dict(evidence or {}))

    @property
    def candidate(self) -> Candidate:
        """The configuration as a search `Candidate` (without the budget)."""
        return Candidate.make(self.index_kwargs, {k: v for k, v in self.retriever_kwargs.items() if k in RETRIEVER_KEYS})

    @property
    def index_config(self) -> Any:
        """The index part as the index's own `IndexConfig`
        (the one definition of the chunking)."""
        return IndexConfig.resolve(**self.index_kwargs)

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict[str, Any]:
        """The configuration as the JSON-ready dict `from_dict` reads (with its format version)."""
        retriever = dict(self.retriever_kwargs)
        if "weights" in retriever:
            retriever["weights"] = list(retriever["weights"])
        return {"swrag_tuned_config": FORMAT_VERSION, "index": dict(self.index_kwargs), "retriever": retriever,
                "chosen": self.chosen, "evidence": self.evidence}

    def to_json(self) -> str:
        """`to_dict` as JSON text (what `save` writes)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the JSON file atomically (temp file + rename); returns the path.

        Raises:
            ValueError: the path cannot be written (the message names it).
        """
        path = check_writable(path)
        text = self.to_json() + "\n"
        try:
            fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=str(path.parent))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except OSError as exc:
            raise ValueError(f"output {str(path)!r} cannot be written: {exc}") from exc
        return path

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "configuration") -> "TunedConfig":
        """The configuration `to_dict` wrote; raises ``ValueError`` (naming ``where``) for anything else."""
        if not isinstance(data, Mapping) or data.get("swrag_tuned_config") != FORMAT_VERSION:
            raise ValueError(f"{where} is not a tuned configuration (format {FORMAT_VERSION}, written by `swrag tune`)")
        for part in ("index", "retriever"):
            if not isinstance(data.get(part), Mapping):
                raise ValueError(f"{where} has no {part!r} section")
        return cls(dict(data["index"]), dict(data["retriever"]), data.get("chosen", "tuned"),
                   dict(data.get("evidence") or {}))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TunedConfig":
        """Read a file written by `save`.

        Raises:
            FileNotFoundError: no such file.
            ValueError: not JSON, or not a tuned configuration.
        """
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no such configuration file: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path} is not a JSON configuration ({exc})") from exc
        return cls.from_dict(data, where=str(path))

    def summary(self) -> str:
        """A few lines for the terminal."""
        ev = self.evidence
        lines = [f"chosen: {self.chosen}: {self.candidate.label} (budget {self.retriever_kwargs.get('budget_tokens')})"]
        best, default = ev.get("best"), ev.get("default")
        if best and default and best.get("mean") is not None and default.get("mean") is not None:
            lines.append(f"synthetic context recall {100 * best['mean']:.1f} [{100 * best['ci_low']:.1f}, "
                         f"{100 * best['ci_high']:.1f}] vs default {100 * default['mean']:.1f} "
                         f"[{100 * default['ci_low']:.1f}, {100 * default['ci_high']:.1f}] on {best['n']} "
                         f"{'held-out ' if ev.get('holdout') else ''}questions")
        cmp_ = ev.get("versus_default")
        if cmp_ and cmp_.get("diff") is not None:
            lines.append(f"difference {100 * cmp_['diff']:+.1f} points [{100 * cmp_['ci_low']:+.1f}, "
                         f"{100 * cmp_['ci_high']:+.1f}] (paired bootstrap, "
                         f"{'significant' if cmp_['significant'] else 'not significant'})")
        search = ev.get("search") or {}
        if search:
            lines.append(f"searched {search.get('candidates')} of {search.get('space_size')} configurations in "
                         f"{search.get('seconds', 0):.0f} s ({search.get('stopped')}), {search.get('index_builds')} "
                         "index builds")
        return "\n".join(lines)


def load_config(path: str | os.PathLike) -> TunedConfig:
    """The tuned configuration in the JSON file at ``path`` (`TunedConfig.load`).

    Args:
        path: A file written by ``swrag tune`` or `TunedConfig.save`.

    Raises:
        FileNotFoundError: There is no such file.
        ValueError: The file is not JSON, or not a tuned configuration.
    """
    return TunedConfig.load(path)
