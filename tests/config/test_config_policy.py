"""policy_change: only policy settings, validated at load, in force from a later year."""

from __future__ import annotations

import pytest

from governed_broker.config import ConfigError
from governed_broker.config.policy import POLICY_SETTINGS


def _change(settings: str, from_year: int = 5) -> str:
    return f"policy_change={{from_year: {from_year}, settings: {{{settings}}}}}"


def test_the_changed_settings_apply_from_the_year_and_nothing_else_changes(experiments) -> None:
    config = experiments.config([_change(
        "elevation.subsidy_budget_usd: 80000, finance.aid.probability: 0.1, "
        "insurance.pricing: risk_based")])
    after = config.with_policy_change()
    assert after.elevation.subsidy_budget_usd == 80_000 and config.elevation.subsidy_budget_usd \
        is None
    assert after.finance.aid.probability == 0.1 != config.finance.aid.probability
    assert after.finance.aid.max_grant_usd == config.finance.aid.max_grant_usd
    assert after.insurance.pricing == "risk_based" and config.insurance.pricing == "legacy"
    assert after.base_dir == config.base_dir
    for section in ("population", "hazard", "relocation", "memory", "decision", "llm"):
        assert getattr(after, section) == getattr(config, section)
    assert experiments.config().with_policy_change().model_dump() == \
        experiments.config().model_dump()


@pytest.mark.parametrize(("override", "message"), [
    (_change("population.size: 10"), r"'population.size' is not a policy setting.*allowed: "
                                     r"insurance.pricing"),
    (_change("insurance.mandatory_purchase.compliance_share: 0.5"), "not a policy setting"),
    (_change("elevation.subsidy_share: 2"), r"elevation.subsidy_share: Input should be less"),
    (_change("insurance.pricing: flat"), r"insurance.pricing: Input should be"),
    (_change("elevation.subsidy_share: 0.2", from_year=11), r"from_year 11 is after the last "
                                                           r"year \(10\)"),
    (_change("elevation.subsidy_share: 0.2", from_year=1), "from_year"),
    ("policy_change={from_year: 3, settings: {}}", "at least 1 item"),
    # a check across the section's fields is reported under the section's name
    (_change("insurance.limit_structure_usd: 300000"),
     r"policy_change.settings: insurance: Value error, preferred_risk's largest bands"),
])
def test_a_change_that_is_not_a_valid_policy_is_a_configuration_error(
        experiments, override, message) -> None:
    with pytest.raises(ConfigError, match=message):
        experiments.config([override])


def test_the_aid_certificates_terms_change_field_by_field(experiments) -> None:
    config = experiments.config([_change(
        "finance.aid.group_policy.coverage_usd: 50000, finance.aid.group_policy.keep_insured: "
        "false")])
    before, after = config.finance.aid.group_policy, config.with_policy_change().finance.aid \
        .group_policy
    assert (after.coverage_usd, after.keep_insured) == (50_000, False)
    assert (after.zones, after.term_years) == (before.zones, before.term_years)
    with pytest.raises(ConfigError, match="'finance.aid.group_policy' is not a policy setting"):
        experiments.config([_change("finance.aid.group_policy: null")])
    with pytest.raises(ConfigError, match=r"policy_change.settings: finance.aid.group_policy"
                                          r".zones': zone\(s\) 'sfha'"):
        experiments.config([_change("finance.aid.group_policy.zones: [sfha]")])


def test_a_field_of_a_section_the_experiment_does_not_set_is_an_error(experiments) -> None:
    data = experiments.data()
    del data["finance"]["aid"]["group_policy"]
    with pytest.raises(ConfigError, match="'finance.aid.group_policy.term_years' changes a "
                                          "field of 'finance.aid.group_policy', which the "
                                          "experiment does not set"):
        experiments.config([_change("finance.aid.group_policy.term_years: 2")], data=data)


def test_every_policy_setting_exists() -> None:
    from governed_broker.config.experiment import ExperimentConfig, _section_model

    for key in POLICY_SETTINGS:
        section, *path = key.split(".")
        model = _section_model(ExperimentConfig.model_fields[section].annotation)
        for part in path:
            assert part in model.model_fields, key
            annotation = model.model_fields[part].annotation
            if part != path[-1]:
                model = _section_model(annotation)
