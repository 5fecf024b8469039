"""Irrational-behaviour rate on executed and on proposed actions, by hand."""

from __future__ import annotations

import math

import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.behaviour import incoherent_flags, irrational_behaviour_rate
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.config.agent_types import scale_halves


def _table():
    rows = [
        # high threat, proposed elevate, rejected: the broker's fallback do_nothing is not judged
        {"threat_label": "H", "proposed_action": "elevate_house", "executed_action": "do_nothing",
         "status": "rejected"},
        # very high threat doing nothing, proposed and executed: incoherent both
        {"threat_label": "VH", "proposed_action": "do_nothing", "executed_action": "do_nothing"},
        # low threat proposing relocation, rejected -> do_nothing executed: proposed only
        {"threat_label": "L", "proposed_action": "relocate", "executed_action": "do_nothing",
         "status": "rejected"},
        # very low threat elevating and insuring (an elevating combination): incoherent both
        {"threat_label": "VL", "proposed_action": "elevate_and_insure",
         "executed_action": "elevate_and_insure"},
        # medium threat doing nothing: coherent
        {"threat_label": "M", "proposed_action": "do_nothing", "executed_action": "do_nothing"},
        # low threat buying insurance: coherent
        {"threat_label": "L", "proposed_action": "buy_insurance",
         "executed_action": "buy_insurance"},
        # no label (not evaluable), parse failure without a proposal
        {"threat_label": None, "proposed_action": None, "executed_action": "do_nothing",
         "status": "parse_failed"},
        # high threat doing nothing, kept after re-asks (unresolved): the household's choice
        {"threat_label": "H", "proposed_action": "do_nothing", "executed_action": "do_nothing",
         "status": "unresolved"},
        # high threat, low coping, doing nothing: fatalistic (PMT allows it), apart
        {"threat_label": "VH", "coping_label": "L", "proposed_action": "do_nothing",
         "executed_action": "do_nothing"},
        # high threat doing nothing but already elevated: not judged
        {"threat_label": "H", "proposed_action": "do_nothing", "executed_action": "do_nothing",
         "elevated_before": True},
        # high threat doing nothing with no protective action it could take or pay for
        {"threat_label": "VH", "proposed_action": "do_nothing", "executed_action": "do_nothing",
         "could_protect": False},
    ]
    return make_agents(
        [{"year": 1 + i // 4, "agent_id": i, **row} for i, row in enumerate(rows)]
    )


def test_executed_rate_by_hand():
    out = irrational_behaviour_rate(_table(), on="executed").iloc[0]
    # fallbacks (rows 0, 2, 6) left out: evaluable rows 1, 3, 4, 5, 7, 8, 9, 10 (8 rows);
    # incoherent: 1, 7 (high-threat inaction), 3 (low-threat elevation)
    assert out["n_fallback"] == 3
    assert out["n_evaluated"] == 8
    assert out["n_high_threat_inaction"] == 2
    assert out["n_low_threat_extreme"] == 1
    assert out["n_fatalistic_inaction"] == 1  # row 8, apart
    assert out["rate"] == pytest.approx(3 / 8)


def test_proposed_rate_by_hand():
    out = irrational_behaviour_rate(_table(), on="proposed").iloc[0]
    # evaluable: every row with a label and a proposal (10 rows; row 6 has neither);
    # incoherent: 1, 7 (inaction), 2 (relocation), 3 (elevation); row 0 proposed elevating
    assert out["n_evaluated"] == 10 and out["n_fallback"] == 0
    assert out["n_irrational"] == 4
    assert out["rate"] == pytest.approx(0.4)


def test_by_year():
    out = irrational_behaviour_rate(_table(), on="executed", by="year").set_index("year")
    assert out.loc[1, "rate"] == pytest.approx(2 / 2)  # rows 1 and 3 (0 and 2 fell back)
    assert out.loc[2, "rate"] == pytest.approx(1 / 3)  # row 7 of rows 4, 5, 7


def test_no_labels_gives_nan():
    table = make_agents([{"year": 1, "agent_id": 1, "threat_label": None}])
    assert math.isnan(irrational_behaviour_rate(table).iloc[0]["rate"])


def test_bad_on():
    with pytest.raises(ValueError, match="executed"):
        irrational_behaviour_rate(_table(), on="approved")


def _attempt(label, action):
    return {"parsed": {"threat_appraisal": {"label": label}, "decision": action}}


def test_proposed_rate_uses_labels_of_the_first_proposal():
    # The agent table holds the final reply's label (H, after a governance retry) next to the
    # first proposal; the audit says the first proposal came with label L.
    agents = make_agents(
        [
            {"year": 1, "agent_id": 1, "threat_label": "H", "proposed_action": "relocate",
             "executed_action": "buy_insurance"},
            {"year": 1, "agent_id": 2, "threat_label": "VH", "proposed_action": "do_nothing",
             "executed_action": "do_nothing"},
            {"year": 1, "agent_id": 3, "threat_label": None, "proposed_action": None},
        ]
    )
    decisions = [
        {"year": 1, "agent_id": 1,
         "attempts": [_attempt("L", "relocate"), _attempt("H", "buy_insurance")]},
        {"year": 1, "agent_id": 2, "attempts": [{"parsed": None}, _attempt("VH", "do_nothing")]},
        {"year": 1, "agent_id": 3, "attempts": [{"parsed": None}, {"parsed": None}]},
    ]
    plain = irrational_behaviour_rate(agents, on="proposed").iloc[0]
    assert plain["n_irrational"] == 1 and plain["labels"] == "agents_yearly.csv"  # only agent 2
    audited = irrational_behaviour_rate(agents, on="proposed", decisions=decisions).iloc[0]
    # agent 1: L + relocate (incoherent); agent 2: VH + do_nothing; agent 3: nothing parsed
    assert audited["n_evaluated"] == 2
    assert audited["n_irrational"] == 2
    assert audited["labels"] == "decisions.jsonl:first_parsed"


def test_audit_missing_a_decision_is_an_error():
    agents = make_agents([{"year": 1, "agent_id": 1}, {"year": 1, "agent_id": 2}])
    with pytest.raises(AnalysisInputError, match="household 2 in year 1"):
        irrational_behaviour_rate(
            agents, on="proposed",
            decisions=[{"year": 1, "agent_id": 1, "attempts": [_attempt("M", "do_nothing")]}],
        )


def test_high_and_low_threat_follow_the_runs_scale():
    """On a four-level scale the halves are its lower and upper two labels (no middle)."""
    agents = make_agents([
        {"year": 1, "agent_id": 1, "threat_label": "HIGH", "proposed_action": "do_nothing",
         "executed_action": "do_nothing"},
        {"year": 1, "agent_id": 2, "threat_label": "LOW", "proposed_action": "relocate",
         "executed_action": "relocate"},
        {"year": 1, "agent_id": 3, "threat_label": "H", "proposed_action": "do_nothing",
         "executed_action": "do_nothing"},  # not on this scale: never incoherent
    ])
    agents.attrs["pmt_labels"] = ("NONE", "LOW", "HIGH", "EXTREME")
    flags = incoherent_flags(agents, "executed")
    assert flags["high_threat_inaction"].tolist() == [True, False, False]
    assert flags["low_threat_extreme"].tolist() == [False, True, False]


@pytest.mark.parametrize(("labels", "low", "high"), [
    (("VL", "L", "M", "H", "VH"), {"VL", "L"}, {"H", "VH"}),
    (("A", "B", "C", "D"), {"A", "B"}, {"C", "D"}),
    (("LOW", "HIGH"), {"LOW"}, {"HIGH"}),
    (("A", "B", "C"), {"A"}, {"C"}),
])
def test_scale_halves(labels, low, high):
    assert scale_halves(labels) == (low, high)
