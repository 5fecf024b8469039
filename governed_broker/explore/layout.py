"""Where each household is drawn: on its neighbour network, or grouped by flood zone.

The network is the run's own: rebuilt from the ``network`` section of its ``config.yaml`` and
its seed with the model's ``build_graph`` (the same seeded graph, so the edges drawn are the
neighbours the households saw). Ring and small-world graphs are drawn on a circle in id order
(Watts-Strogatz starts from that ring), a lattice on its grid. A run without ``config.yaml``
(still running) or with ``network.kind: none`` is drawn by zone: one block of households per
zone. Coordinates lie in [0, 1] x [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.config.world import NetworkConfig
from governed_broker.explore.run_view import RunView
from governed_broker.sim.network import build_graph

#: Largest run whose network edges are drawn (more would hide the households).
MAX_EDGES_DRAWN = 20_000


@dataclass
class Layout:
    """Household positions and the edges between them.

    Attributes:
        kind: ``network`` or ``zones``.
        positions: Agent id -> (x, y) in [0, 1].
        edges: Pairs of agent ids (empty when not drawn).
        note: What the picture shows, for the page.
    """

    kind: str
    positions: dict[int, tuple[float, float]]
    edges: list[tuple[int, int]] = field(default_factory=list)
    note: str = ""


def household_layout(view: RunView) -> Layout:
    """The network layout when the run's network can be rebuilt, else the zone layout."""
    network = (view.config or {}).get("network")
    n = int(view.manifest.get("n_households") or len(view.household_ids()))
    seed = view.manifest.get("seed", (view.config or {}).get("seed"))
    if not isinstance(network, dict) or seed is None:
        return zone_layout(view, "network unknown until the run has written config.yaml; "
                                 "households grouped by flood zone")
    try:
        config = NetworkConfig.model_validate(network)
    except ValueError as exc:
        raise AnalysisInputError(f"{view.path / 'config.yaml'}: network: {exc}") from exc
    if config.kind == "none":
        return zone_layout(view, "no neighbour network (network.kind: none); households "
                                 "grouped by flood zone")
    graph = build_graph(config, n, int(seed))
    if config.kind == "lattice":
        width = math.ceil(math.sqrt(n))
        positions = {i + 1: _cell(i % width, i // width, width, math.ceil(n / width))
                     for i in range(n)}
    else:
        positions = {i + 1: (0.5 + 0.5 * math.sin(2 * math.pi * i / n),
                             0.5 + 0.5 * math.cos(2 * math.pi * i / n)) for i in range(n)}
    edges = [(a + 1, b + 1) for a, b in graph.edges()]
    drawn = edges if len(edges) <= MAX_EDGES_DRAWN else []
    note = f"{config.kind} neighbour network (k={config.k}" + (
        f", p={config.p})" if config.kind == "small_world" else ")")
    if not drawn:
        note += f"; {len(edges)} edges, too many to draw"
    return Layout("network", positions, drawn, note)


def zone_layout(view: RunView, note: str = "households grouped by flood zone") -> Layout:
    """One block per zone (in order of first appearance), households in id order within it."""
    first = view.agents.sort_values(["agent_id", "year"]).drop_duplicates("agent_id")
    zones = list(dict.fromkeys(first["flood_zone"].astype(str)))
    positions: dict[int, tuple[float, float]] = {}
    for z, zone in enumerate(zones):
        ids = first.loc[first["flood_zone"] == zone, "agent_id"].astype(int).tolist()
        width = max(1, math.ceil(math.sqrt(len(ids))))
        rows = math.ceil(len(ids) / width)
        for k, agent in enumerate(ids):
            x, y = _cell(k % width, k // width, width, rows)
            positions[agent] = ((z + 0.1 + 0.8 * x) / len(zones), y)
    return Layout("zones", positions, [], note + " (left to right: " + ", ".join(zones) + ")")


def _cell(col: int, row: int, width: int, rows: int) -> tuple[float, float]:
    return ((col + 0.5) / width, 1 - (row + 0.5) / max(rows, 1))
