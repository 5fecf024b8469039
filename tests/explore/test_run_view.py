"""A run as the explorer reads it: finished, running (``.partial``), with a validity card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from governed_broker.explore.files import resolve_target
from governed_broker.explore.layout import household_layout
from governed_broker.explore.run_view import load_view

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EMBEDDED = FIXTURES / "embedded_llm_run"


def test_a_running_run_is_read_up_to_its_last_complete_year(tmp_path: Path,
                                                            partial_run) -> None:
    partial_run(tmp_path / "out", years=2)
    location, live = resolve_target(tmp_path / "out").run_location()
    view = load_view(location, live)
    assert live and view.live and view.name == "out" and view.manifest == {}
    assert view.last_year == 2 and view.planned_years is None
    assert set(view.agents["year"]) == {1, 2}
    assert {year for _, year in view.decisions} == {1, 2}
    assert list(view.actions) == ["do_nothing", "buy_insurance", "elevate_house",
                                  "elevate_and_insure", "relocate", "accept_buyout"]
    layout = household_layout(view)  # no config.yaml yet: drawn by zone
    assert layout.kind == "zones" and set(layout.positions) == set(range(1, 9))
    assert view.current_stamp() == view.stamp
    with open(location / "model_yearly.csv", "a") as f:
        f.write("more")
    assert view.current_stamp() != view.stamp  # the explorer reads it again


def test_a_finished_run_has_its_network_fit_and_memories() -> None:
    view = load_view(EMBEDDED, live=False)
    assert not view.live and view.last_year == 4 == view.planned_years
    assert len(view.decisions) == 32 and len(view.reflections) == 32
    layout = household_layout(view)
    assert layout.kind == "network" and len(layout.edges) == 16  # 8 households, k = 4
    assert view.fit is not None and view.fit_problem is None
    assert view.card is None and view.card_problem is None
    memories = view.memories(1)
    assert memories and all(m.id.startswith("m") for m in memories)
    insight = next(m for m in memories if m.kind == "insight")
    # the engine's importance (insight_importance 10 times its sources' salience), not the
    # store's scaled one
    source = next(r for r in view.reflections.values() if insight.id in r["insight_ids"])
    assert insight.importance == pytest.approx(10.0 * source["salience"])


def test_the_validity_card_is_read_or_its_problem_shown(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "baseline_run", run)
    card = {"verdict": "passed", "version": "v1", "tests": [
        {"name": "placebo", "statistic": 0.01, "threshold": 0.05, "passed": True, "n": 40}]}
    (run / "validity_card.json").write_text(json.dumps(card))
    view = load_view(run, live=False)
    assert view.card.verdict == "passed" and view.card.other == {"version": "v1"}
    assert view.card.tests[0].name == "placebo" and view.card.tests[0].n == 40
    (run / "validity_card.json").write_text(json.dumps({"tests": [{"name": "x", "n": 1.5}]}))
    view = load_view(run, live=False)
    assert view.card is None and "tests[0].n must be an integer" in view.card_problem


def test_a_run_with_institutions_has_their_table_and_decisions(institutions_run) -> None:
    view = load_view(institutions_run, live=False)
    assert list(view.institutions["year"]) == [1, 2, 3]
    assert view.institutions["government_status"].eq("retry_approved").all()
    decided = [(r["year"], r["institution"]) for r in view.institution_decisions]
    assert decided == [(y, i) for y in (1, 2, 3) for i in ("government", "insurer")]
    in_force = view.institution_decisions[-1]["levers"]
    assert in_force["loading"] == view.institutions["loading"].iloc[-1]


def test_a_running_run_shows_the_institutions_of_its_complete_years(institutions_run,
                                                                    tmp_path) -> None:
    partial = tmp_path / "run.partial"
    shutil.copytree(institutions_run, partial)
    (partial / "manifest.json").unlink()
    model = (partial / "model_yearly.csv").read_text().splitlines(keepends=True)
    (partial / "model_yearly.csv").write_text("".join(model[:3]))  # header and years 1-2
    view = load_view(partial, live=True)
    assert view.last_year == 2
    assert list(view.institutions["year"]) == [1, 2]
    assert {r["year"] for r in view.institution_decisions} == {1, 2}


def test_a_run_without_institutions_has_none() -> None:
    view = load_view(FIXTURES / "baseline_run", live=False)
    assert view.institutions is None and view.institution_decisions == []
