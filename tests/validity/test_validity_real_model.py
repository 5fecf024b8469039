"""The battery on the real embedded model.

With a two-test battery of 4 decisions (CI: ``-m real_llm``). No statistic is asserted (a 0.5B
model's judgement is not under test): the card is complete, every reply came from the model through
the broker, and a second run is answered from the cache.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from governed_broker.config.loader import load_experiment
from governed_broker.config.resolved import resolve_experiment
from governed_broker.validity.validate import validate

pytestmark = pytest.mark.real_llm
REPO = Path(__file__).resolve().parents[2]


def test_small_battery_on_the_embedded_model(tmp_path: Path) -> None:
    battery = tmp_path / "battery"
    shutil.copytree(REPO / "configs" / "validity", battery)
    tests = yaml.safe_load((battery / "tests.yaml").read_text())
    tests["max_replicates"] = 2
    tests["tests"] = [t for t in tests["tests"]
                      if t["name"] in ("threat_rises_with_depth", "reason_coherence")]
    tests["tests"][0]["levels"] = [0.0, 1.5]
    (battery / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    llm = {"backend": "embedded", "cache": {"path": str(tmp_path / "cache.sqlite")}}
    config = load_experiment(REPO / "experiments" / "demo.yaml", [
        f"llm={json.dumps(llm)}", f"validity.battery_dir={battery}",
        f"validity.cards_dir={tmp_path / 'cards'}"])
    first = validate(resolve_experiment(config), tmp_path / "a", progress=False)
    card = first.card
    assert [t["name"] for t in card["tests"]] == ["threat_rises_with_depth", "reason_coherence"]
    assert card["battery"]["decisions"] == 4
    assert card["llm"]["backend"]["kind"] == "embedded"
    assert card["tests"][0]["n"] + card["battery"]["unreadable"] == 4
    assert card["tests"][0]["outcome"] in ("pass", "fail", "inconclusive")
    # the request seeds are the replicates' common ones: two distinct first-request seeds
    seeds = {r["attempts"][0]["llm"]["battery_seed"] for r in
             (json.loads(x) for x in (first.out_dir / "decisions.jsonl").read_text().splitlines())}
    assert len(seeds) == 2
    records = [json.loads(x) for x in (first.out_dir / "decisions.jsonl").read_text()
               .splitlines()]
    assert all(r["decision_maker"].startswith("llm:embedded/") for r in records)
    second = validate(resolve_experiment(config), tmp_path / "b", progress=False)
    assert second.card["tests"] == card["tests"]
    assert second.card["llm"]["stats"]["cache"]["misses"] == 0
