"""Figures draw the data they are given."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import make_agents

from governed_broker.analysis import (
    adaptation_trajectories,
    governance_workload,
    losses_by_year,
    summarise_replicates,
)
from governed_broker.analysis.plots import (
    figure_to_png,
    plot_governance,
    plot_group_bands,
    plot_label_distribution,
    plot_losses,
    plot_sobol,
    plot_trajectories,
)


def _agents():
    return make_agents(
        [
            {"year": 1, "agent_id": 1, "insured_after": True, "threat_label": "H",
             "damage_usd": 5000.0, "flooded": True},
            {"year": 1, "agent_id": 2, "threat_label": "VL", "status": "rejected", "retries": 3},
            {"year": 2, "agent_id": 1, "threat_label": "H", "elevated_after": True},
            {"year": 2, "agent_id": 2, "threat_label": "L"},
        ]
    )


def test_trajectory_stack_reaches_one():
    fig = plot_trajectories(adaptation_trajectories(_agents()))
    top = fig.axes[0].collections[-1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(1.0)
    assert figure_to_png(fig).startswith(b"\x89PNG")


def test_losses_bar_heights():
    fig = plot_losses(losses_by_year(_agents()))
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert 5.0 in heights  # 5,000 USD of damage in year 1, drawn in thousands


def test_label_distribution_shares():
    fig = plot_label_distribution(_agents())
    tp = [p.get_height() for p in fig.axes[0].patches if p.get_height() > 0]
    assert sorted(tp) == pytest.approx([0.5, 0.5, 0.5, 0.5])


def test_governance_and_bands_and_sobol_render():
    figure_to_png(plot_governance(governance_workload(_agents(), by="year")))
    long = pd.DataFrame({"group": ["a"] * 4, "year": [1, 1, 2, 2], "value": [0.1, 0.3, 0.2, 0.4]})
    fig = plot_group_bands(summarise_replicates(long), "share")
    assert len(fig.axes[0].collections) == 1  # one confidence band
    indices = pd.DataFrame({"parameter": ["a", "b"], "S1": [0.7, 0.1], "S1_conf": [np.nan] * 2,
                            "ST": [np.nan] * 2, "ST_conf": [np.nan] * 2, "method": "binned",
                            "output": "y", "n_points": 20})
    fig = plot_sobol(indices)
    assert sorted(p.get_width() for p in fig.axes[0].patches) == pytest.approx([0.1, 0.7])
