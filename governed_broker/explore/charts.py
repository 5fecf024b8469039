"""The explorer's figures as Apache ECharts options (plain dicts; drawn in the browser).

ECharts ships with Solara's offline assets, draws thousands of points on a canvas and reports
which household was clicked. Charts use fixed margins and axis ranges so that a household's
position on the page follows from its layout coordinates (``pixel_of`` gives it; the browser
test clicks there).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from governed_broker.analysis.trajectories import STATES, household_states
from governed_broker.explore.layout import Layout
from governed_broker.explore.run_view import RunView

#: Margin of the neighbourhood chart, pixels (fixed so that positions map to pixels).
MARGIN_PX = 30
#: What the neighbourhood can be coloured by.
COLOUR_BY = ("state", "status", "flooded")

_STATE_COLOURS = {"relocated": "#7f7f7f", "insured_and_elevated": "#6a3d9a",
                  "insured_only": "#1f78b4", "elevated_only": "#33a02c", "none": "#fdbf6f"}
_STATUS_COLOURS = {"baseline": "#999999", "approved": "#1b9e77", "retry_approved": "#7570b3",
                   "unresolved": "#e6ab02",
                   "rejected": "#d95f02", "parse_failed": "#e7298a", "relocated": "#dddddd"}
_FLOOD_COLOURS = {"flooded": "#2166ac", "dry": "#d1e5f0", "relocated": "#dddddd"}


def household_classes(view: RunView, year: int, colour_by: str) -> dict[int, str]:
    """The class of every household in ``year`` for colouring (``relocated`` once gone)."""
    if colour_by == "state":
        states = household_states(view.agents)
        year_states = states[states["year"] == year]
        return dict(zip(year_states["agent_id"].astype(int), year_states["state"], strict=True))
    rows = view.agents[view.agents["year"] == year]
    out = {a: "relocated" for a in view.household_ids()}
    if colour_by == "status":
        out.update(zip(rows["agent_id"].astype(int), rows["status"].astype(str), strict=True))
    elif colour_by == "flooded":
        flooded = rows["flooded"].fillna(False).astype(bool)
        out.update(zip(rows["agent_id"].astype(int),
                       flooded.map({True: "flooded", False: "dry"}), strict=True))
    else:
        raise ValueError(f"colour_by {colour_by!r}: allowed {COLOUR_BY}")
    return out


def _palette(colour_by: str, classes: set[str]) -> dict[str, str]:
    base = {"state": _STATE_COLOURS, "status": _STATUS_COLOURS,
            "flooded": _FLOOD_COLOURS}[colour_by]
    order = list(STATES) if colour_by == "state" else list(base)
    extra = sorted(classes - set(base))
    spare = ["#a6cee3", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99"]
    palette = {c: base[c] for c in order if c in classes}
    palette.update({c: spare[i % len(spare)] for i, c in enumerate(extra)})
    return palette


def neighbourhood_option(layout: Layout, classes: dict[int, str], colour_by: str,
                         selected: int | None = None) -> dict[str, Any]:
    """A graph on fixed [0, 1] axes.

    One node per household coloured by its class, the network's edges, the selected household
    ringed. A node's ``data`` carries ``agent_id``.
    """
    palette = _palette(colour_by, set(classes.values()))
    size = 14 if len(layout.positions) <= 100 else 8 if len(layout.positions) <= 1000 else 4
    nodes = []
    for agent, (x, y) in layout.positions.items():
        cls = classes.get(agent, "relocated")
        node = {"name": f"household {agent}", "agent_id": agent, "value": [x, y],
                "category": list(palette).index(cls) if cls in palette else 0,
                "tooltip": {"formatter": f"household {agent}: {cls.replace('_', ' ')}"}}
        if agent == selected:
            node["symbolSize"] = size * 1.8
            node["itemStyle"] = {"borderColor": "#000", "borderWidth": 3}
        nodes.append(node)
    axis = {"type": "value", "min": 0, "max": 1, "show": False}
    return {
        "animation": False,
        "tooltip": {},
        "legend": {"data": [c.replace("_", " ") for c in palette], "top": 0},
        "grid": {"left": MARGIN_PX, "right": MARGIN_PX, "top": MARGIN_PX, "bottom": MARGIN_PX},
        "xAxis": axis, "yAxis": dict(axis),
        "series": [{
            "type": "graph", "coordinateSystem": "cartesian2d", "symbolSize": size,
            "categories": [{"name": c.replace("_", " "), "itemStyle": {"color": col}}
                           for c, col in palette.items()],
            "data": nodes,
            "links": [{"source": f"household {a}", "target": f"household {b}"}
                      for a, b in layout.edges],
            "lineStyle": {"color": "#bbb", "width": 0.6, "opacity": 0.6},
        }],
    }


def pixel_of(position: tuple[float, float], width: float, height: float) -> tuple[float, float]:
    """Where a layout position is drawn in a neighbourhood chart of ``width`` x ``height`` px.

    Relative to the chart's top-left corner.
    """
    x, y = position
    return (MARGIN_PX + x * (width - 2 * MARGIN_PX),
            MARGIN_PX + (1 - y) * (height - 2 * MARGIN_PX))


def _lines(model: pd.DataFrame, columns: dict[str, str], year: int | None, title: str,
           percent: bool) -> dict[str, Any]:
    years = [int(y) for y in model["year"]]
    series = []
    for column, label in columns.items():
        values = [None if pd.isna(v) else round(float(v) * (100 if percent else 1), 2)
                  for v in model[column]]
        series.append({"name": label, "type": "line", "data": values, "showSymbol": True})
    if year is not None and series:
        series[0]["markLine"] = {"symbol": "none", "data": [{"xAxis": str(year)}],
                                 "lineStyle": {"color": "#000", "type": "dashed"}}
    return {
        "animation": False,
        "title": {"text": title, "textStyle": {"fontSize": 13}},
        "tooltip": {"trigger": "axis"},
        "legend": {"bottom": 0, "type": "scroll"},
        "grid": {"left": 70, "right": 20, "top": 50, "bottom": 60},
        "xAxis": {"type": "category", "data": [str(y) for y in years], "name": "year",
                  "nameLocation": "middle", "nameGap": 22},
        "yAxis": {"type": "value", "name": "% of households" if percent else "USD"},
        "series": series,
    }


def shares_option(view: RunView, year: int | None) -> dict[str, Any]:
    """Adaptation shares by year (``model_yearly.csv``), in percent of all households."""
    columns = {"share_insured": "insured", "share_elevated": "elevated",
               "share_relocated": "relocated", "share_no_measure": "no measure"}
    return _lines(view.model, columns, year, "Adaptation shares", percent=True)


def money_option(view: RunView, year: int | None) -> dict[str, Any]:
    """Damage, payouts and premiums by year (``model_yearly.csv``), USD."""
    columns = {"total_damage_usd": "damage", "total_payout_usd": "payouts",
               "total_premiums_usd": "premiums", "total_action_costs_usd": "action costs"}
    return _lines(view.model, columns, year, "Damage, payouts and costs", percent=False)
