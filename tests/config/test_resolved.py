"""An experiment is resolved once per run: its domain parsed and its inputs hashed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.config import hashing, loader
from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.hashing import config_hash
from governed_broker.config.resolved import resolve_experiment
from governed_broker.runner import run_experiment


def test_the_resolved_experiment_carries_domain_hash_and_run_id(experiments) -> None:
    config = experiments.config(["population.size=5", "years=2"])
    experiment = resolve_experiment(config)
    assert experiment.config is config
    assert list(experiment.domain.actions) == ["do_nothing", "buy_insurance", "elevate_house",
                                               "elevate_and_insure", "relocate",
                                               "accept_buyout"]
    assert experiment.config_hash == config_hash(config)
    assert experiment.run_id == f"demo-{experiment.config_hash[:12]}"


@pytest.mark.parametrize("maker", ["baseline", "llm"])
def test_a_run_parses_its_domain_and_hashes_its_inputs_once(experiments, tmp_path: Path,
                                                            monkeypatch, maker: str) -> None:
    script = Path(__file__).resolve().parents[1] / "fixtures" / "scripted_governance.yaml"
    settings = ["population.size=5", "years=2", f"decision.maker={maker}"]
    if maker == "llm":
        settings.append(f"llm={{backend: scripted, script: {script}, model: governance-paths}}")
    config = experiments.config(settings)
    calls = {"domain": 0, "hash": 0}
    validate, sha256 = loader.validate_model, hashing._sha256
    domain_file = config.resolve_path(config.agent_types)

    def counting_validate(model, data, source, **kwargs):
        calls["domain"] += model is AgentTypesConfig
        return validate(model, data, source, **kwargs)

    def counting_sha256(path: Path) -> str:
        calls["hash"] += path == domain_file  # each config hash digests the domain file once
        return sha256(path)

    # module globals: every caller in the package goes through them, whoever imported what
    monkeypatch.setattr(loader, "validate_model", counting_validate)
    monkeypatch.setattr(hashing, "_sha256", counting_sha256)
    run_experiment(config, tmp_path / "run", progress=False)
    assert calls == {"domain": 1, "hash": 1}


def test_loading_and_running_parses_every_input_once(experiments, tmp_path: Path,
                                                     monkeypatch) -> None:
    from governed_broker.config import damage
    from governed_broker.config.damage import DamageTable
    from governed_broker.config.institutions import InstitutionsDomain
    from governed_broker.config.resolved import load_resolved

    data = experiments.data()
    data["institutions"] = _institutions()
    path = experiments.write(data)
    parsed = {AgentTypesConfig: 0, DamageTable: 0, InstitutionsDomain: 0}

    def counting(validate):
        def count(model, data, source, **kwargs):
            if model in parsed:
                parsed[model] += 1
            return validate(model, data, source, **kwargs)
        return count

    monkeypatch.setattr(loader, "validate_model", counting(loader.validate_model))
    monkeypatch.setattr(damage, "validate_model", counting(damage.validate_model))
    experiment = load_resolved(path, ["population.size=5", "years=2"])
    run_experiment(experiment, tmp_path / "run", progress=False)
    assert parsed == {AgentTypesConfig: 1, DamageTable: 1, InstitutionsDomain: 1}


def _institutions() -> dict:
    """``experiments/institutions.yaml``'s institutions, with absolute paths."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    section = yaml.safe_load((root / "experiments" / "institutions.yaml").read_text())[
        "institutions"]
    section.update(domain=str(root / "institutions.yaml"),
                   prompts=str(root / "configs" / "institutions" / "prompts.yaml"))
    return section
