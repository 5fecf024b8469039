"""A run's own domain reaches analysis: a renamed action and a fifth action run end to end.

A copy of ``agent_types.yaml`` renames ``buy_insurance`` (everywhere it is named, rules
included) and adds a fifth action with an existing effect; a baseline run with it is then
loaded, summarised and turned into the HTML report. Analysis takes the action ids and their
effects from the run's manifest, never from a fixed list.
"""

from __future__ import annotations

import json

import yaml

from governed_broker.analysis import load_run
from governed_broker.analysis.report import write_report
from governed_broker.analysis.summary import summarise_run
from governed_broker.runner import run_experiment

RENAMED = "purchase_flood_policy"
FIFTH = "wait_and_see"


def _domain_copy(repo_root, tmp_path):
    text = (repo_root / "agent_types.yaml").read_text().replace("buy_insurance", RENAMED)
    data = yaml.safe_load(text)
    data["actions"][FIFTH] = {"description": "Wait for more information before acting.",
                              "tenure": ["owner", "renter"], "duration": "annual",
                              "effect": "none"}
    path = tmp_path / "agent_types_renamed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_renamed_and_fifth_action_run_through_analysis_and_report(experiments, tmp_path,
                                                                  repo_root) -> None:
    data = experiments.data()
    data["agent_types"] = str(_domain_copy(repo_root, tmp_path))
    config = experiments.config(["years=6", "population.size=40",
                                 "hazard.zones.high.annual_probability=0.5"], data=data)
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["actions"][RENAMED] == "insure" and manifest["actions"][FIFTH] == "none"

    run = load_run(out)
    assert f"n_{RENAMED}" in run.model.columns and f"n_{FIFTH}" in run.model.columns
    assert RENAMED in set(run.agents["executed_action"])  # the baseline insures under the new id
    summary = summarise_run(run)
    assert {f"n_{RENAMED}", f"n_{FIFTH}"} <= set(summary.entropy.columns)
    assert 0.0 <= summary.entropy_overall <= 1.0

    report = write_report(out, tmp_path / "report.html")
    assert report.is_file() and "<img" in report.read_text()
