"""Soft clustering of node embeddings for RAPTOR: reduce, fit Gaussian mixtures, pick k by BIC.

The recipe follows the RAPTOR paper (Sarthi et al., ICLR 2024, arXiv:2401.18059) and its
reference implementation's published settings: the embeddings are reduced to 10
dimensions with UMAP (``n_neighbors = sqrt(n - 1)`` for the *global* pass, 10 for the
*local* pass inside each global cluster), a Gaussian mixture is fitted for every
``k`` in ``1 .. min(max_clusters, n) - 1`` and the ``k`` with the lowest BIC is kept,
and a node belongs to **every** cluster whose posterior probability exceeds
``threshold`` (0.1), so a node may sit in several clusters.

Libraries, not hand-written maths: ``umap-learn`` (when installed; extra ``raptor``)
and scikit-learn's ``GaussianMixture``/``PCA``. Without ``umap-learn`` the reduction is
scikit-learn's PCA (``reduction="pca"``); ``"none"`` clusters the raw vectors (useful
for low-dimensional, hand-made data). UMAP compiles its numba kernels on first use
(about 20-50 s once per process on this 2-core machine); PCA needs no warm-up.

Everything is seeded (``random_state``), so the same vectors give the same clusters.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["ClusterConfig", "umap_available", "reduce_embeddings", "gmm_soft_clusters", "cluster_embeddings"]

REDUCTIONS = ("auto", "umap", "pca", "none")


def umap_available() -> bool:
    """Whether ``umap-learn`` can be imported here."""
    try:
        import umap  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken numba install is as good as none
        return False
    return True


@dataclass(frozen=True)
class ClusterConfig:
    """How a layer's nodes are clustered.

    Args:
        reduction: ``"umap"``, ``"pca"``, ``"none"`` or ``"auto"`` (UMAP when
            ``umap-learn`` is installed, else PCA).
        dim: dimensions after reduction (RAPTOR: 10).
        threshold: a node joins every cluster whose posterior probability is above
            this (RAPTOR: 0.1); it always joins its most probable one.
        max_clusters: largest ``k`` tried by BIC (RAPTOR: 50).
        local: also cluster inside each global cluster (RAPTOR's two passes).
        local_neighbors: UMAP ``n_neighbors`` of the local pass.
        random_state: seed of UMAP, PCA and the mixtures.
        metric: UMAP metric (``"cosine"``).
    """

    reduction: str = "auto"
    dim: int = 10
    threshold: float = 0.1
    max_clusters: int = 50
    local: bool = True
    local_neighbors: int = 10
    random_state: int = 224
    metric: str = "cosine"

    def __post_init__(self) -> None:
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {self.reduction!r}")
        for name in ("dim", "max_clusters", "local_neighbors"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not (isinstance(self.threshold, (int, float)) and 0.0 < float(self.threshold) < 1.0):
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold!r}")

    @property
    def resolved_reduction(self) -> str:
        """The reduction actually used (``"auto"`` resolved)."""
        if self.reduction == "auto":
            return "umap" if umap_available() else "pca"
        return self.reduction

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict, with the reduction actually used."""
        out = asdict(self)
        out["reduction"] = self.resolved_reduction
        return out


def reduce_embeddings(vectors: np.ndarray, config: ClusterConfig, *, n_neighbors: int | None = None) -> np.ndarray:
    """``vectors`` (n, d) reduced to at most ``config.dim`` dimensions.

    UMAP needs at least 3 points and at most ``n - 2`` output dimensions; PCA at most
    ``min(n, d)`` components. Too few points (or ``reduction="none"``) return the
    vectors unchanged.
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array, got shape {x.shape}")
    n, d = x.shape
    method = config.resolved_reduction
    if method == "none" or n < 3 or d <= config.dim:
        return x
    if method == "umap":
        import umap

        dim = min(config.dim, n - 2)
        neighbors = n_neighbors if n_neighbors is not None else max(2, int(math.sqrt(n - 1)))
        neighbors = max(2, min(neighbors, n - 1))
        with warnings.catch_warnings():  # "n_jobs overridden by random_state", spectral-init notes
            warnings.simplefilter("ignore")
            reducer = umap.UMAP(n_neighbors=neighbors, n_components=dim, metric=config.metric,
                                random_state=config.random_state, n_jobs=1)
            return np.asarray(reducer.fit_transform(x), dtype=np.float64)
    from sklearn.decomposition import PCA

    dim = min(config.dim, n - 1, d)
    # unit rows first: PCA of cosine geometry, like UMAP's cosine metric
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return PCA(n_components=dim, random_state=config.random_state).fit_transform(x / norms)


def _best_k(x: np.ndarray, config: ClusterConfig) -> tuple[int, Any]:
    """The mixture with the lowest BIC over ``k = 1 .. min(max_clusters, n) - 1``."""
    from sklearn.mixture import GaussianMixture

    n = x.shape[0]
    upper = max(1, min(config.max_clusters, n) - 1)
    best_k, best_bic, best_model = 1, math.inf, None
    for k in range(1, upper + 1):
        model = GaussianMixture(n_components=k, random_state=config.random_state, reg_covar=1e-5)
        with warnings.catch_warnings():  # ConvergenceWarning on tiny clusters
            warnings.simplefilter("ignore")
            model.fit(x)
        bic = float(model.bic(x))
        if bic < best_bic:
            best_k, best_bic, best_model = k, bic, model
    return best_k, best_model


def gmm_soft_clusters(points: np.ndarray, config: ClusterConfig) -> list[list[int]]:
    """Soft clusters of ``points`` (already reduced): ``k`` by BIC, membership by ``threshold``.

    Returns clusters as sorted member-index lists (a point may be in several; every
    point is in at least one; empty clusters are dropped).
    """
    x = np.asarray(points, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return []
    if n <= 2:
        return [list(range(n))]
    k, model = _best_k(x, config)
    if k == 1:
        return [list(range(n))]
    probs = model.predict_proba(x)
    member = probs > config.threshold
    member[np.arange(n), probs.argmax(axis=1)] = True  # never orphan a point
    clusters = [sorted(np.nonzero(member[:, j])[0].tolist()) for j in range(k)]
    return [c for c in clusters if c]


def cluster_embeddings(vectors: np.ndarray, config: ClusterConfig | None = None) -> list[list[int]]:
    """RAPTOR's two-pass soft clustering of ``vectors`` (n, d).

    A global pass (reduction with ``n_neighbors = sqrt(n - 1)``, BIC-chosen mixture),
    then, with ``config.local``, a local pass inside every global cluster larger than
    ``dim + 1`` nodes. Returns clusters as sorted lists of row indices; a row may be in
    several clusters, every row is in at least one, duplicates are removed, and the
    order is by first member.
    """
    config = config or ClusterConfig()
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array, got shape {x.shape}")
    n = x.shape[0]
    if n == 0:
        return []
    if not np.all(np.isfinite(x)):
        raise ValueError("vectors contain NaN or infinite values")
    global_clusters = gmm_soft_clusters(reduce_embeddings(x, config), config)
    out: list[list[int]] = []
    for members in global_clusters:
        if not config.local or len(members) <= config.dim + 1:
            out.append(members)
            continue
        sub = x[members]
        local = gmm_soft_clusters(reduce_embeddings(sub, config, n_neighbors=config.local_neighbors), config)
        out.extend(sorted(members[i] for i in c) for c in local)
    unique: dict[tuple[int, ...], None] = {}
    for c in out:
        unique.setdefault(tuple(c), None)
    return sorted((list(c) for c in unique), key=lambda c: (c[0], len(c)))

