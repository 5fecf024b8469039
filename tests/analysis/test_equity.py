"""The MG-NMG adaptation gap and its split into within-tenure and composition parts."""

from __future__ import annotations

import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.benchmarks import fit_to_benchmarks, load_benchmarks
from governed_broker.analysis.equity import adaptation_gap
from governed_broker.analysis.errors import AnalysisInputError


def _run():
    # owners: 4 NMG (3 adapted), 2 MG (1 adapted); renters: 2 NMG, 4 MG (none adapted)
    spec = ([("owner", False, True)] * 3 + [("owner", False, False)]
            + [("owner", True, True), ("owner", True, False)]
            + [("renter", False, False)] * 2 + [("renter", True, False)] * 4)
    rows = [{"year": 1, "agent_id": i, "tenure": tenure, "marginalised": mg,
             "insured_after": adapted}
            for i, (tenure, mg, adapted) in enumerate(spec, start=1)]
    return make_agents(rows)


def test_the_gap_splits_into_within_tenure_and_composition_by_hand():
    gap = adaptation_gap(_run()).set_index("group")
    assert gap.loc["all", "adapted_nmg"] == pytest.approx(3 / 6)
    assert gap.loc["all", "adapted_mg"] == pytest.approx(1 / 6)
    assert gap.loc["owner", "gap"] == pytest.approx(3 / 4 - 1 / 2)
    assert gap.loc["renter", "gap"] == pytest.approx(0.0)
    # weights: the MG households' tenure mix, 2 owners and 4 renters of 6
    assert gap.loc["within", "gap"] == pytest.approx(2 / 6 * 0.25)
    assert gap.loc["composition", "gap"] == pytest.approx(1 / 3 - 1 / 12)
    assert gap.loc["within", "gap"] + gap.loc["composition", "gap"] == pytest.approx(
        gap.loc["all", "gap"])


def test_b6_is_the_overall_gap():
    agents = _run()
    b6 = fit_to_benchmarks(agents, load_benchmarks()).table.set_index("id").loc["B6", "value"]
    assert b6 == pytest.approx(adaptation_gap(agents).set_index("group").loc["all", "gap"])


def test_no_gap_without_both_groups():
    agents = _run()
    agents["marginalised"] = False
    assert adaptation_gap(agents).empty
    agents["marginalised"] = None
    assert adaptation_gap(agents).empty


def test_a_partly_missing_mg_attribute_is_an_error_not_a_group():
    agents = _run()
    agents["marginalised"] = agents["marginalised"].astype("boolean")
    agents.loc[agents["agent_id"] == 1, "marginalised"] = None
    with pytest.raises(AnalysisInputError, match="1 of 12 households have no value"):
        adaptation_gap(agents)
    b6 = fit_to_benchmarks(agents, load_benchmarks()).table.set_index("id").loc["B6"]
    assert b6["status"] == "not_computable"
    assert "1 of 12 households have no 'marginalised' value" in b6["note"]
