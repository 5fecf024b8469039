"""Every action id a YAML file names is checked when the experiment is loaded.

Against ``agent_types.yaml``, with one message that names the file still using an old id.

Renaming an action in a copy of ``agent_types.yaml`` alone (its rules renamed with it) must not
drop a knowledge topic silently: loading fails naming ``rag_topics.yaml``, or the validity
battery's ``vignettes.yaml`` with the gate on; with those files renamed too, the run goes end to
end with the knowledge base on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from governed_broker.config import ConfigError, load_agent_types
from governed_broker.config.resolved import load_resolved
from governed_broker.runner import run_experiment

REPO = Path(__file__).resolve().parents[2]
OLD, NEW = "buy_insurance", "purchase_insurance"


def _renamed(source: Path, target: Path) -> Path:
    """``source`` copied to ``target`` with the action id ``OLD`` renamed ``NEW``."""
    target.write_text(source.read_text().replace(OLD, NEW))
    return target


def _experiment(experiments, tmp_path: Path, knowledge_dir: Path, gate: str = "off") -> Path:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"pattern": ".", "reply": {
        "threat_appraisal": {"label": "H", "reason": "floods here"},
        "coping_appraisal": {"label": "M", "reason": "some savings"},
        "decision": NEW, "reason": "insure"}}]))
    data = experiments.data()
    data.update(years=2, agent_types=str(_renamed(REPO / "agent_types.yaml",
                                                   tmp_path / "agent_types.yaml")))
    data["population"]["size"] = 4
    data["decision"]["maker"] = "llm"
    data["llm"] = {"backend": "scripted", "script": str(script), "cache": {"mode": "off"}}
    data["rag"] = {"enabled": True, "knowledge_dir": str(knowledge_dir)}
    data["validity"] = {"gate": gate, "battery_dir": str(REPO / "configs" / "validity")}
    return experiments.write(data)


def test_renamed_action_fails_at_load_naming_the_topics_file(experiments, tmp_path) -> None:
    path = _experiment(experiments, tmp_path, REPO / "configs" / "knowledge")
    topics = REPO / "configs" / "knowledge" / "rag_topics.yaml"
    with pytest.raises(ConfigError) as caught:
        load_resolved(path)
    message = str(caught.value)
    assert f"{topics}: topic 'insurance_uninsured' names ['{OLD}']" in message
    assert f"which {tmp_path / 'agent_types.yaml'} does not have" in message
    assert f"rename them in {topics} too" in message


def test_renamed_action_with_the_gate_on_names_the_vignettes(experiments, tmp_path) -> None:
    knowledge = tmp_path / "knowledge"
    shutil.copytree(REPO / "configs" / "knowledge", knowledge)
    _renamed(knowledge / "rag_topics.yaml", knowledge / "rag_topics.yaml")
    path = _experiment(experiments, tmp_path, knowledge, gate="warn")
    vignettes = REPO / "configs" / "validity" / "vignettes.yaml"
    with pytest.raises(ConfigError, match=f"{vignettes}: synonyms names \\['{OLD}'\\]"):
        load_resolved(path)


def test_renamed_everywhere_runs_end_to_end_with_the_knowledge_base(experiments,
                                                                     tmp_path) -> None:
    knowledge = tmp_path / "knowledge"
    shutil.copytree(REPO / "configs" / "knowledge", knowledge)
    _renamed(knowledge / "rag_topics.yaml", knowledge / "rag_topics.yaml")
    experiment = load_resolved(_experiment(experiments, tmp_path, knowledge))
    assert NEW in experiment.domain.actions
    out = run_experiment(experiment, tmp_path / "run", progress=False).out_dir
    agents = pd.read_csv(out / "agents_yearly.csv")
    assert set(agents["executed_action"]) <= {NEW, "do_nothing"} and NEW in set(
        agents["executed_action"])
    decisions = [json.loads(x) for x in (out / "decisions.jsonl").read_text().splitlines()]
    assert any(d["knowledge_sources"] for d in decisions), "the knowledge base was not used"
    assert f"n_{NEW}" in pd.read_csv(out / "model_yearly.csv").columns


def test_a_rule_testing_an_unknown_actions_cost_names_agent_types(tmp_path) -> None:
    data = yaml.safe_load((REPO / "agent_types.yaml").read_text())
    data["governance"]["rules"][0]["when"]["state"] = {"affordable.swim": True}
    path = tmp_path / "agent_types.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=f"(?s){path}.*names unknown action\\(s\\) \\['swim'\\]"):
        load_agent_types(path)
