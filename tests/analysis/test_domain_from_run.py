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
                                 "population.generate.zone_shares={high: 0.5, low: 0.5}",
                                 "hazard.zones.high.annual_probability=0.5",
                                 "hazard.zones.high.flooded_share=1"], data=data)
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


#: A four-level scale in place of VL..VH; the rules' label tests are mapped onto it.
SCALE = {"thresholds": [0.25, 0.5, 0.75], "labels": ["NONE", "LOW", "HIGH", "EXTREME"],
         "words": {"NONE": ["none", "negligible"], "LOW": ["low"], "HIGH": ["high"],
                   "EXTREME": ["extreme", "severe"]}}
_ONTO = {"VL": "NONE", "L": "LOW", "M": "HIGH", "H": "HIGH", "VH": "EXTREME"}


def _appraisal(label: str, coping: str, action: str) -> dict:
    return {"threat_appraisal": {"label": label, "reason": "scripted"},
            "coping_appraisal": {"label": coping, "reason": "scripted"},
            "decision": action, "reason": "scripted"}


def _scale_copy(repo_root, tmp_path):
    data = yaml.safe_load((repo_root / "agent_types.yaml").read_text())
    data["pmt_labels"] = SCALE
    for rule in data["governance"]["rules"]:
        for part in ("threat", "coping"):
            if part in rule["when"]:
                rule["when"][part] = list(dict.fromkeys(_ONTO[x] for x in rule["when"][part]))
    path = tmp_path / "agent_types_scale.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    script = tmp_path / "script.yaml"  # "severe" is a word of EXTREME: a recorded repair
    script.write_text(yaml.safe_dump([
        {"pattern": "cannot be accepted", "reply": _appraisal("HIGH", "HIGH", "buy_insurance")},
        {"pattern": "A flood reached your home",
         "reply": _appraisal("severe", "HIGH", "do_nothing")},
        {"pattern": ".", "reply": _appraisal("NONE", "LOW", "do_nothing")},
    ]))
    return path, script


def test_another_appraisal_scale_drives_schema_rules_and_analysis(experiments, tmp_path,
                                                                   repo_root) -> None:
    domain, script = _scale_copy(repo_root, tmp_path)
    data = experiments.data()
    data["agent_types"] = str(domain)
    llm = {"backend": "scripted", "model": "scale", "script": str(script),
           "cache": {"mode": "off"}}
    config = experiments.config(["years=3", "population.size=6", "decision.maker=llm",
                                 f"llm={json.dumps(llm)}",
                                 "population.generate.zone_shares={high: 0.5, low: 0.5}",
                                 "hazard.zones.high.annual_probability=0.9",
                                 "hazard.zones.high.flooded_share=1"], data=data)
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    assert json.loads((out / "manifest.json").read_text())["pmt_labels"] == SCALE["labels"]

    records = [json.loads(x) for x in (out / "decisions.jsonl").read_text().splitlines()]
    flooded = [r for r in records if r["attempts"][0]["parsed"]["threat_appraisal"]["label"]
               == "EXTREME"]
    assert flooded, "no household was flooded; the test needs one"
    first = flooded[0]["attempts"][0]
    assert any("read as EXTREME" in x for x in first["repairs"])
    fired = next(r for r in first["rules"] if r["id"] == "very_high_threat_inaction")
    assert fired["fired"] and fired["severity"] == "ERROR"
    assert flooded[0]["status"] == "retry_approved"
    assert flooded[0]["executed_action"] == "buy_insurance"

    run = load_run(out)
    assert run.pmt_labels == tuple(SCALE["labels"])
    assert set(run.agents["threat_label"].dropna()) <= set(SCALE["labels"])
    summarise_run(run)
    report = write_report(out, tmp_path / "report.html")
    assert report.is_file() and "<img" in report.read_text()
