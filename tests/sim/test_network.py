"""Neighbour graphs and vectorised neighbour shares."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from governed_broker.config.world import NetworkConfig
from governed_broker.sim.network import NeighbourIndex, build_graph


def test_ring_shares() -> None:
    g = build_graph(NetworkConfig(kind="ring", k=2), 5, seed=1)
    idx = NeighbourIndex(g, 5)
    state = np.array([True, False, False, False, False])
    np.testing.assert_allclose(idx.share(state), [0, 0.5, 0, 0, 0.5])


def test_shares_match_networkx_definition() -> None:
    g = build_graph(NetworkConfig(kind="small_world", k=4, p=0.3), 50, seed=3)
    idx = NeighbourIndex(g, 50)
    state = np.random.default_rng(0).random(50) < 0.4
    expected = [np.mean([state[j] for j in g.neighbors(i)]) if g.degree(i) else 0.0
                for i in range(50)]
    np.testing.assert_allclose(idx.share(state), expected)


def test_isolated_nodes_get_zero() -> None:
    idx = NeighbourIndex(build_graph(NetworkConfig(kind="none"), 4, seed=1), 4)
    assert idx.share(np.ones(4, dtype=bool)).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("kind", ["ring", "small_world", "lattice"])
def test_graphs_are_seeded(kind) -> None:
    a = build_graph(NetworkConfig(kind=kind, p=0.5), 30, seed=1)
    b = build_graph(NetworkConfig(kind=kind, p=0.5), 30, seed=1)
    assert nx.utils.graphs_equal(a, b) and a.number_of_nodes() == 30


def test_lattice_degree() -> None:
    g = build_graph(NetworkConfig(kind="lattice"), 16, seed=0)
    assert max(d for _, d in g.degree()) == 4 and g.degree(0) == 2
