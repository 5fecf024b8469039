"""Loading the battery: the shipped files validate, and every mistake names file and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from governed_broker.config import load_agent_types
from governed_broker.config.base import ConfigError
from governed_broker.validity.battery import derive, load_battery
from governed_broker.validity.plan import plan_battery

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "configs" / "validity"
ZONES = {"high": 0.2, "low": 0.01}


@pytest.fixture
def domain():
    return load_agent_types(REPO / "agent_types.yaml")


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "battery"
    shutil.copytree(SHIPPED, target)
    return target


def _test(data: dict, name: str) -> dict:
    return next(t for t in data["tests"] if t["name"] == name)


def _edit(directory: Path, name: str, change) -> None:
    path = directory / name
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_shipped_battery_is_sized_for_its_power(domain) -> None:
    battery = load_battery(SHIPPED, domain)
    plan = plan_battery(battery, domain, ZONES)
    assert plan.decisions() == 950  # the budget docs/validity.md states
    primaries = len(battery.tests.primaries)
    for test in battery.tests.tests:
        size = plan.sizes[test.name]
        if size.power is not None:  # every sized test has the battery's power, none capped
            assert size.power >= battery.tests.power - 0.02, test.name
            assert size.per_vignette < battery.tests.max_replicates, test.name
        assert size.alpha == pytest.approx(battery.tests.alpha / (primaries if test.primary
                                                                    else 1))
    # the directional tests: 105 replies at alpha / 7 for rho 0.5 against 0.2, 35 per level
    assert plan.sizes["threat_rises_with_depth"].per_vignette == 35
    depth = plan.levels["threat_rises_with_depth"]
    assert all(plan.vignettes[lv.vignette].replicates >= 35 for lv in depth)
    # every test of the file is planned or computed from the main vignettes
    assert set(plan.levels) | set(plan.arms) | set(plan.grids) | set(plan.triggers) <= \
        {t.name for t in battery.tests.tests}


def test_quick_battery_is_smaller(domain) -> None:
    quick = plan_battery(load_battery(SHIPPED, domain, quick=True), domain, ZONES)
    assert quick.decisions() < 150
    assert all(v.replicates <= 2 for v in quick.vignettes.values())


def test_a_cap_on_replicates_is_kept_and_lowers_the_power(tmp_path, domain) -> None:
    battery = _copy(tmp_path)
    _edit(battery, "tests.yaml", lambda d: d.update(max_replicates=10))
    plan = plan_battery(load_battery(battery, domain), domain, ZONES)
    assert max(v.replicates for v in plan.vignettes.values()) == 10
    assert plan.sizes["threat_rises_with_depth"].power < 0.5


def test_shared_levels_are_one_vignette(domain) -> None:
    plan = plan_battery(load_battery(SHIPPED, domain), domain, ZONES)
    depth = {lv.label: lv.vignette for lv in plan.levels["threat_rises_with_depth"]}
    premium = {lv.label: lv.vignette for lv in plan.levels["insurance_falls_with_premium"]}
    # the 0.6 m level and the premium at the world's price are both the base vignette
    assert depth["flood_depth_m=0.6"] == premium["cost_factor.insure=1.0"]
    assert plan.arms["action_order_invariance"][0] == depth["flood_depth_m=0.6"]


@pytest.mark.parametrize(("name", "change", "message"), [
    ("vignettes.yaml", lambda d: d["synonyms"].update(buy_flood_cover="x"),
     "synonyms name action(s) ['buy_flood_cover']"),
    ("tests.yaml", lambda d: d["tests"][0].update(vary="flood_depth"),
     "no field 'flood_depth'"),
    ("tests.yaml", lambda d: d["tests"][0].update(levels=[0.0, -1.0]),
     "flood_depth_m"),
    ("tests.yaml", lambda d: d["tests"][2].update(levels=[1, 3, 6]),
     "years_ago must be below year"),
    ("tests.yaml", lambda d: d["tests"][3].update(measure="share:floodproof"),
     "no action of agent_types.yaml has the effect 'floodproof'"),
    ("tests.yaml", lambda d: _test(d, "governance_laundering")["triggers"][0]["reply"].update(
        threat="EXTREME"), "not on the scale"),
    ("tests.yaml", lambda d: _test(d, "reason_coherence")["contradicts"]["none"].append(
        "(unclosed"), "does not compile"),
    ("tests.yaml", lambda d: d["tests"][0].update(design_effect=0.1),
     "must exceed +0.2"),
    ("tests.yaml", lambda d: d["tests"][0].pop("design_effect"), "needs a design_effect"),
    ("tests.yaml", lambda d: [t.update(primary=False) for t in d["tests"]],
     "no test is primary"),
    ("tests.yaml", lambda d: _test(d, "retest_threat")["grid"].update(savings_usd=[1]),
     "a grid field needs 2 to 10 levels"),
    ("tests.yaml", lambda d: _test(d, "retest_threat")["grid"].update(wealth=[1, 2]),
     "no field 'wealth'"),
    ("tests.yaml", lambda d: d["tests"].append(dict(d["tests"][0])),
     "test names must be unique"),
    ("vignettes.yaml", lambda d: d["base"].update(wealth=1), "wealth"),
])
def test_mistakes_are_configuration_errors(tmp_path, domain, name, change, message) -> None:
    battery = _copy(tmp_path)
    _edit(battery, name, change)
    with pytest.raises(ConfigError) as err:
        load_battery(battery, domain)
    assert message in str(err.value)
    assert str(battery) in str(err.value)


def test_missing_file_is_named(tmp_path, domain) -> None:
    battery = _copy(tmp_path)
    (battery / "tests.yaml").unlink()
    with pytest.raises(ConfigError, match="tests.yaml: file not found"):
        load_battery(battery, domain)


def test_derive_sets_nested_paths_and_free_price_factors(domain) -> None:
    base = load_battery(SHIPPED, domain).vignettes.base
    spec = derive(base, {"earlier_floods": [{"years_ago": 2, "depth_m": 0.5}]},
                  "earlier_floods.0.years_ago", 4, Path("t.yaml"), "t")
    assert spec.earlier_floods[0].years_ago == 4
    assert derive(base, {}, "cost_factor.elevate", 2.0, Path("t"), "t").cost_factor == \
        {"elevate": 2.0}
    # a factor of 1 is the world's price: the same vignette as none
    assert derive(base, {}, "cost_factor.elevate", 1.0, Path("t"), "t") == base
    with pytest.raises(ConfigError, match="no list position"):
        derive(base, {}, "earlier_floods.0.years_ago", 1, Path("t"), "t")


def test_zone_aliases_resolve_by_exposure(domain) -> None:
    battery = load_battery(SHIPPED, domain)
    assert battery.vignettes.base.flood_zone == "most_exposed"
    plan = plan_battery(battery, domain, {"sfha": 0.01, "non_sfha": 0.002})
    assert {v.spec.flood_zone for v in plan.vignettes.values()} == {"sfha"}
    with pytest.raises(ConfigError, match="name a zone instead"):
        plan_battery(battery, domain, {})
