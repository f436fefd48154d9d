"""RAPTOR clustering on hand-made vectors whose clusters are known."""

from __future__ import annotations

import numpy as np
import pytest
from ci_switch import importorskip

from swrag_integrations.methods.raptor.clustering import ClusterConfig, cluster_embeddings, gmm_soft_clusters, reduce_embeddings


def _blobs(n_per: int, centers: np.ndarray, scale: float, seed: int = 0) -> tuple[np.ndarray, list[set[int]]]:
    rng = np.random.default_rng(seed)
    rows, truth = [], []
    for c, center in enumerate(centers):
        truth.append(set(range(c * n_per, (c + 1) * n_per)))
        rows.append(center + rng.normal(scale=scale, size=(n_per, centers.shape[1])))
    return np.vstack(rows), truth


def test_three_separated_topics_are_recovered_exactly_with_pca():
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(3, 48)) * 4.0
    x, truth = _blobs(15, centers, 0.3)
    clusters = cluster_embeddings(x, ClusterConfig(reduction="pca", dim=4))
    assert sorted(map(sorted, map(set, clusters))) == sorted(map(sorted, truth))


def test_order_of_rows_does_not_change_the_partition():
    rng = np.random.default_rng(2)
    x, truth = _blobs(12, rng.normal(size=(2, 32)) * 5.0, 0.2)
    perm = rng.permutation(len(x))
    clusters = cluster_embeddings(x[perm], ClusterConfig(reduction="pca", dim=3))
    mapped = {frozenset(int(perm[i]) for i in c) for c in clusters}
    assert mapped == {frozenset(t) for t in truth}


def test_a_point_between_two_clusters_belongs_to_both():
    # two overlapping 2-d blobs (5 sigma apart) and one point exactly between them
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal([-2.5, 0.0], 1.0, (30, 2)), rng.normal([2.5, 0.0], 1.0, (30, 2)), [[0.0, 0.0]]])
    clusters = gmm_soft_clusters(x, ClusterConfig(reduction="none", threshold=0.1))
    assert sorted(map(set, clusters), key=min) == [set(range(30)) | {60}, set(range(30, 60)) | {60}]


def test_one_tight_blob_stays_one_cluster():
    rng = np.random.default_rng(4)
    x = rng.normal(scale=0.01, size=(30, 16)) + 3.0
    assert cluster_embeddings(x, ClusterConfig(reduction="pca", dim=3)) == [list(range(30))]


def test_every_point_is_in_a_cluster_and_results_are_seeded():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(40, 24))
    a = cluster_embeddings(x, ClusterConfig(reduction="pca"))
    b = cluster_embeddings(x, ClusterConfig(reduction="pca"))
    assert a == b
    assert set().union(*map(set, a)) == set(range(40))


def test_small_and_bad_inputs():
    assert cluster_embeddings(np.zeros((0, 8))) == []
    assert cluster_embeddings(np.ones((2, 8)), ClusterConfig(reduction="pca")) == [[0, 1]]
    assert reduce_embeddings(np.ones((2, 50)), ClusterConfig(reduction="pca")).shape == (2, 50)
    with pytest.raises(ValueError, match="2-d"):
        cluster_embeddings(np.ones(5))
    bad = np.ones((5, 3))
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cluster_embeddings(bad, ClusterConfig(reduction="none"))
    with pytest.raises(ValueError, match="reduction"):
        ClusterConfig(reduction="tsne")
    with pytest.raises(ValueError, match="threshold"):
        ClusterConfig(threshold=1.5)
    with pytest.raises(ValueError, match="dim"):
        ClusterConfig(dim=0)


@pytest.mark.slow
def test_umap_recovers_the_topics_too():
    importorskip("umap")
    rng = np.random.default_rng(6)
    x, truth = _blobs(20, rng.normal(size=(3, 64)) * 4.0, 0.3)
    # the global pass finds the topics exactly
    clusters = cluster_embeddings(x, ClusterConfig(reduction="umap", local=False))
    assert {frozenset(c) for c in clusters} == {frozenset(t) for t in truth}
    # RAPTOR's local pass may split a topic further, but never mixes two
    local = cluster_embeddings(x, ClusterConfig(reduction="umap", local=True))
    assert all(any(set(c) <= t for t in truth) for c in local)
    assert set().union(*map(set, local)) == set(range(60))
