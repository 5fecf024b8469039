"""Institutions come from a name registry (``config.institutions.INSTITUTIONS``).

Each entry is an ``InstitutionAgent`` subclass, built in the registry's order with its rule maker.

``SteadyInsurer`` below (here, in this test file) is the insurer's book with another rule
maker, one that holds its rates whatever the experience; registering it in the insurer's place
runs the institutions' experiment with it, nothing else of the package changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from governed_broker.config import load_experiment
from governed_broker.config.base import ConfigError
from governed_broker.config.institutions import INSTITUTIONS
from governed_broker.contracts.institutions import InstitutionDecision, InstitutionSituation
from governed_broker.runner import run_experiment
from governed_broker.sim.institutions import InsurerAgent

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "institutions.yaml"
SETTINGS = ["population.size=30", "years=4", "hazard.zones.high.annual_probability=0.25",
            "outputs.plots=false", "outputs.progress=false"]


class HoldRates:
    """Keeps every lever as it is."""

    name = "hold"

    def __init__(self, config, domain) -> None:
        self.domain = domain

    def decide(self, situation: InstitutionSituation) -> InstitutionDecision:
        return InstitutionDecision(situation.institution, situation.year,
                                   dict(situation.levers), "rule", self.name,
                                   proposed=dict(situation.levers), reason="rates held")

    def provenance(self) -> None:
        return None

    def close(self) -> None:
        pass


class SteadyInsurer(InsurerAgent):
    """The insurer's book, decided by ``HoldRates`` when a rule decides."""

    rule_maker = HoldRates


def test_a_registered_institution_takes_part_in_a_run(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(INSTITUTIONS, "insurer", f"{__name__}:SteadyInsurer")
    out = run_experiment(load_experiment(EXPERIMENT, SETTINGS), tmp_path / "run",
                         progress=False).out_dir
    rows = pd.read_csv(out / "institutions_yearly.csv")
    assert rows["insurer_maker"].tolist() == ["hold"] * 4
    assert rows["loading"].nunique() == 1 and rows["government_maker"].iloc[0] == "rule"
    records = [json.loads(x) for x in (out / "institutions.jsonl").read_text().splitlines()]
    assert [r["institution"] for r in records[:2]] == ["government", "insurer"]
    assert {r["reason"] for r in records if r["institution"] == "insurer"} == {"rates held"}


def test_a_broken_registry_entry_says_so(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(INSTITUTIONS, "insurer", "no_such_module:Insurer")
    with pytest.raises(ConfigError, match="institutions 'insurer': cannot load its class "
                                          "'no_such_module:Insurer'"):
        run_experiment(load_experiment(EXPERIMENT, SETTINGS), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
