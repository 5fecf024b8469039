"""Marginalised households.

The income/tenure rule, the population CSV column, the output column, and benchmark B6 computed on a
run that has them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from governed_broker.analysis import load_run
from governed_broker.analysis.benchmarks import fit_to_benchmarks, load_benchmarks
from governed_broker.analysis.trajectories import household_states
from governed_broker.config import ConfigError
from governed_broker.config.world import MarginalisedRule
from governed_broker.runner import run_experiment
from governed_broker.sim.population import Population, marginalised_by_rule
from tests.sim.test_model import POP_HEADER


def _population(income, owner) -> Population:
    n = len(income)
    zeros = np.zeros(n)
    return Population(is_owner=np.asarray(owner), zone=np.full(n, "high", dtype=object),
                      income_usd=np.asarray(income, float), savings_usd=zeros,
                      structure_value_usd=zeros, contents_value_usd=zeros,
                      elevated=np.zeros(n, bool), insured=np.zeros(n, bool),
                      trust_insurance=zeros, trust_neighbours=zeros)


def test_the_rule_marks_low_incomes_of_its_tenures() -> None:
    pop = _population([38_729.99, 38_730.0, 20_000.0, 20_000.0], [True, True, True, False])
    both = MarginalisedRule(source="t", income_below_usd=38_730)
    assert marginalised_by_rule(both, pop).tolist() == [True, False, True, True]
    renters = MarginalisedRule(source="t", income_below_usd=38_730, tenures=["renter"])
    assert marginalised_by_rule(renters, pop).tolist() == [False, False, False, True]


def _csv_data(experiments, rows: list[str], column: bool) -> dict:
    header = POP_HEADER + (",marginalised" if column else "")
    (experiments.tmp_path / "pop.csv").write_text("# test\n" + header + "\n"
                                                  + "\n".join(rows) + "\n")
    data = experiments.data()
    data["population"] = {"source": "test", "file": "pop.csv"}
    data["years"] = 2
    return data


ROW = "owner,high,60000,100000,200000,100000,False,False,0.3,0.5"


def test_a_population_csv_may_carry_the_attribute(experiments, tmp_path) -> None:
    data = _csv_data(experiments, [ROW + ",True", ROW + ",False"], column=True)
    out = run_experiment(experiments.config(data=data), tmp_path / "run", progress=False).out_dir
    agents = load_run(out).agents
    assert agents.groupby("agent_id")["marginalised"].first().tolist() == [True, False]
    data["population"]["marginalised"] = {"source": "t", "income_below_usd": 1}
    with pytest.raises(ConfigError, match="population.marginalised.*not both"):
        experiments.config(data=data)


def test_without_a_rule_or_column_the_column_is_empty_and_b6_not_computable(
        experiments, tmp_path) -> None:
    data = _csv_data(experiments, [ROW, ROW], column=False)
    out = run_experiment(experiments.config(data=data), tmp_path / "run", progress=False).out_dir
    text = (out / "agents_yearly.csv").read_text().splitlines()
    position = text[0].split(",").index("marginalised")
    assert all(line.split(",")[position] == "" for line in text[1:])
    fit = fit_to_benchmarks(load_run(out).agents, load_benchmarks())
    assert fit.table.set_index("id").loc["B6", "status"] == "not_computable"


def test_b6_is_computed_on_a_run_with_marginalised_households(experiments, tmp_path) -> None:
    config = experiments.config(["population.size=300", "years=15",
                                 "hazard.zones.high.annual_probability=0.2"])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    agents = load_run(out).agents
    first = agents[agents["year"] == 1].set_index("agent_id")
    expected_mg = first["income_usd"] < 38_730  # the baseline's rule
    assert (first["marginalised"] == expected_mg).all() and 0 < expected_mg.sum() < 300
    row = fit_to_benchmarks(agents, load_benchmarks()).table.set_index("id").loc["B6"]
    assert row["status"] != "not_computable"
    # by hand: ever-adapted share of NMG minus that of MG, over households of the last year
    states = household_states(agents)
    last = states[states["year"] == states["year"].max()].set_index("agent_id")
    adapted = last["ever_insured"] | last["ever_elevated"] | last["ever_relocated"]
    mg = pd.Series(expected_mg).reindex(last.index)
    assert row["value"] == pytest.approx(adapted[~mg].mean() - adapted[mg].mean())
