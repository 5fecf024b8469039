"""Neighbour graph (networkx, seeded) and vectorised neighbour shares.

The graph is stored as two integer arrays (edge sources and targets, both directions), so the
share of a household's neighbours in some state is one ``np.bincount`` per state.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from governed_broker.config.world import NetworkConfig
from governed_broker.seeding import child_seed


def build_graph(config: NetworkConfig, n: int, seed: int) -> nx.Graph:
    """The neighbour graph over household indices 0..n-1."""
    if config.kind == "none" or n < 2:
        graph = nx.empty_graph(n)
    elif config.kind == "ring":
        k = min(config.k, n - 1)
        graph = nx.watts_strogatz_graph(n, k, 0.0, seed=child_seed(seed, "network"))
    elif config.kind == "small_world":
        k = min(config.k, n - 1)
        graph = nx.watts_strogatz_graph(n, k, config.p, seed=child_seed(seed, "network"))
    else:  # lattice: 2-D grid filled row by row, 4 neighbours
        width = math.ceil(math.sqrt(n))
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        for i in range(n):
            if (i + 1) % width and i + 1 < n:
                graph.add_edge(i, i + 1)
            if i + width < n:
                graph.add_edge(i, i + width)
    return graph


class NeighbourIndex:
    """Edge arrays of a graph for fast neighbour shares."""

    def __init__(self, graph: nx.Graph, n: int) -> None:
        edges = np.array(sorted(graph.edges()), dtype=np.int64).reshape(-1, 2)
        self.src = np.concatenate([edges[:, 0], edges[:, 1]])
        self.dst = np.concatenate([edges[:, 1], edges[:, 0]])
        self.n = n
        self.degree = np.bincount(self.src, minlength=n).astype(float)

    def share(self, state: np.ndarray) -> np.ndarray:
        """Share of each household's neighbours for which ``state`` is true (0 if isolated)."""
        counts = np.bincount(self.src, weights=state[self.dst].astype(float), minlength=self.n)
        return np.divide(counts, self.degree, out=np.zeros(self.n), where=self.degree > 0)
