"""Cards judged from exact distributions (validity.exact, ``validate --readout distribution``).

The statistics are checked against the sampled card's estimators on large samples drawn in
exact proportions, and whole cards are judged from toy models whose distributions are known.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats
from test_readout_battery import FLOODED, CharSource

from governed_broker.cli import main
from governed_broker.config import load_agent_types
from governed_broker.config.base import ConfigError
from governed_broker.llm import ScriptedBackend
from governed_broker.llm.readout import ReadoutSettings, ReplyPath, Token
from governed_broker.validity import stats
from governed_broker.validity.battery import load_battery
from governed_broker.validity.card import card_key
from governed_broker.validity.exact import (
    ExactReadout,
    VignetteLaw,
    account_interval,
    monotone,
    population_alpha,
    population_icc,
    population_spearman,
    total_variation,
    unread_bound,
)
from governed_broker.validity.plan import plan_battery
from governed_broker.validity.readout_card import readout_key, validate_distribution
from governed_broker.validity.store import cards_dir, find_card
from governed_broker.validity.validate import prepare

# ----------------------------------------------------------------------------- statistics


def _expanded(dist: dict, n: int) -> list:
    """``n`` values in the exact proportions of ``dist`` (rounded)."""
    return [v for v, p in dist.items() for _ in range(round(p * n))]


def test_population_spearman_is_the_limit_of_the_sampled_statistic():
    xs = [0.0, 0.6, 1.5]
    dists = [{0: 0.6, 1: 0.3, 2: 0.1}, {0: 0.3, 1: 0.4, 2: 0.3}, {0: 0.1, 1: 0.3, 2: 0.6}]
    x, y = [], []
    for level, d in zip(xs, dists, strict=True):
        values = _expanded(d, 10_000)
        x += [level] * len(values)
        y += values
    sampled = float(scipy_stats.spearmanr(x, y).statistic)
    assert population_spearman(xs, dists) == pytest.approx(sampled, abs=1e-3)
    assert 0.3 < sampled < 0.6


def test_population_spearman_of_no_response_is_zero_however_the_means_move():
    """The same distribution at every level: rho 0; a tiny shift: a tiny rho, not 1."""
    same = {0: 0.5, 1: 0.3, 3: 0.2}
    assert population_spearman([0, 1, 2], [same, same, same]) == pytest.approx(0.0)
    tiny = [{0: 0.5 - e, 1: 0.3, 3: 0.2 + e} for e in (0.0, 0.001, 0.002)]
    assert 0 < population_spearman([0, 1, 2], tiny) < 0.01
    assert population_spearman([0, 1], [{0: 1.0}, {0: 1.0}]) == 0.0


def test_population_icc_is_the_limit_of_the_sampled_icc():
    rng = np.random.default_rng(3)
    dists = [{0.0: 0.7, 2.0: 0.3}, {1.0: 0.5, 2.0: 0.5}, {2.0: 0.2, 4.0: 0.8},
             {0.0: 0.1, 3.0: 0.9}]
    table = [rng.choice(list(d), size=4000, p=list(d.values())) for d in dists]
    sampled = stats.icc_evidence(table, 0.3, 0.05)
    assert sampled is not None and sampled.estimate is not None
    assert population_icc(dists) == pytest.approx(sampled.estimate, abs=0.03)
    assert population_icc([{1.0: 1.0}, {1.0: 1.0}]) is None


def test_population_alpha_is_the_limit_of_krippendorffs_alpha():
    dists = [{"a": 0.8, "b": 0.2}, {"b": 0.6, "c": 0.4}, {"a": 0.1, "c": 0.9}]
    units = [_expanded(d, 5000) for d in dists]
    assert population_alpha(dists) == pytest.approx(stats.krippendorff_nominal(units), abs=1e-3)
    assert population_alpha([{"a": 1.0}, {"a": 1.0}]) is None
    # every unit the same mix: no agreement beyond chance
    assert population_alpha([{"a": 0.5, "b": 0.5}] * 3) == pytest.approx(0.0)


def test_total_variation_and_the_unread_bound():
    assert total_variation({"a": 0.7, "b": 0.3}, {"a": 0.2, "c": 0.8}) == pytest.approx(0.8)

    def mean_share(ds):
        return sum(d[1.0] for d in ds) / len(ds)

    dists = [{1.0: 0.4, 0.0: 0.6}, {1.0: 0.1, 0.0: 0.9}]
    assert unread_bound(mean_share, dists, [0.0, 0.0]) == 0.0
    # moving 0.02 of level 0 onto "1" or "0" moves the mean by at most 0.02 * 0.6 / 2
    assert unread_bound(mean_share, dists, [0.02, 0.0]) == pytest.approx(0.006)


# ----------------------------------------------------------------------------- cards

SAVINGS = re.compile(r"Your savings are now \$([\d,]+)")


def follower(field: str, values: Sequence[str], prompt: str) -> dict[str, float]:
    """Threat H when flooded (else VL), coping H with savings of $100,000 or more (else L).

    The action is the first one offered (a position bias).
    """
    if field == "threat_appraisal.label":
        favourite = "H" if FLOODED in prompt else "VL"
    elif field == "coping_appraisal.label":
        found = SAVINGS.search(prompt)
        rich = found is not None and int(found.group(1).replace(",", "")) >= 100_000
        favourite = "H" if rich else "L"
    else:
        favourite = values[0]
    return {v: 4.0 if v == favourite else 1.0 for v in values}


def deaf(field: str, values: Sequence[str], prompt: str) -> dict[str, float]:
    """The same distribution whatever the prompt says: M, and doing nothing, most probable."""
    favourite = "do_nothing" if field == "decision" else "M"
    return {v: 4.0 if v == favourite else 1.0 for v in values}


def _card(experiment, tmp_path, weigh, **kwargs):
    return validate_distribution(experiment, tmp_path / "card", backend=ScriptedBackend([]),
                                 token_source=CharSource(weigh), progress=False, **kwargs)


def _outcomes(validation) -> dict[str, str]:
    return {t["name"]: t["outcome"] for t in validation.card["tests"]}


def test_a_card_from_a_model_that_follows_the_facts(scripted_experiment, tmp_path):
    experiment = scripted_experiment()
    result = _card(experiment, tmp_path, follower)
    card, outcomes = result.card, _outcomes(result)
    assert card["readout"]["kind"] == "distribution"
    assert outcomes["threat_rises_with_depth"] == "pass"
    assert outcomes["coping_rises_with_savings"] == "pass"
    assert outcomes["threat_rises_with_damage"] == "not_informative" or \
        outcomes["threat_rises_with_damage"] == "fail"  # flooded at every level: no response
    # the favourite is the first action listed: reversing the list moves most of the choice
    assert outcomes["action_order_invariance"] == "fail"
    assert outcomes["governance_laundering"] == outcomes["reason_coherence"] == "not_measurable"
    assert card["passed"] is False
    for v in card["distributions"]:
        for measure in ("threat", "coping", "action"):
            assert sum(v[measure].values()) == pytest.approx(1.0, abs=1e-9)
    depth = next(t for t in card["tests"] if t["name"] == "threat_rises_with_depth")
    assert depth["lower"] == depth["upper"] == depth["statistic"]  # the toy reads everything
    assert depth["statistic"] > 0.2 and depth["p_value"] is None


def test_a_card_from_a_deaf_model_fails_the_directional_tests(scripted_experiment, tmp_path):
    outcomes = _outcomes(_card(scripted_experiment(), tmp_path, deaf))
    assert outcomes["threat_rises_with_depth"] == "fail"
    assert outcomes["coping_rises_with_savings"] == "fail"
    assert outcomes["action_order_invariance"] == "pass"  # the same in both arms: TV 0


def test_a_distribution_card_never_stands_for_a_sampled_one(scripted_experiment, tmp_path):
    experiment = scripted_experiment()
    result = _card(experiment, tmp_path, follower)
    prepared = prepare(experiment)
    sampled_key = card_key(experiment, prepared.plan)
    assert result.card["key"] != sampled_key
    assert result.card["readout"]["configuration_key"] == sampled_key
    assert result.stored is not None and result.stored.name == f"{result.card['key']}.json"
    assert find_card(cards_dir(experiment.config), sampled_key) is None
    # a distribution card put where the sampled one belongs is refused, never used
    (cards_dir(experiment.config) / f"{sampled_key}.json").write_text(
        json.dumps({**result.card, "key": sampled_key}))
    with pytest.raises(ConfigError, match="judged from distributions"):
        find_card(cards_dir(experiment.config), sampled_key)


def test_primary_only_reads_fewer_vignettes_and_leaves_the_rest_unmeasured(
        scripted_experiment, tmp_path):
    result = _card(scripted_experiment(), tmp_path, follower, primary_only=True)
    outcomes = _outcomes(result)
    assert outcomes["retest_threat"] == "not_measurable"
    assert outcomes["threat_rises_with_depth"] == "pass"
    assert result.card["readout"]["primary_only"] is True
    assert result.card["battery"]["vignettes"] < 20


def test_a_saved_readout_is_judged_again_only_for_its_configuration(scripted_experiment,
                                                                    tmp_path):
    experiment = scripted_experiment()
    first = _card(experiment, tmp_path, follower)
    saved = first.out_dir / "readout.json"
    again = validate_distribution(experiment, tmp_path / "again", saved=saved, progress=False)
    assert _outcomes(again) == _outcomes(first)
    assert again.card["key"] == first.card["key"]
    assert first.card["readout"]["view"] == "sampler"
    # a readout made before the sampler view existed was the model's view, and keeps its key
    older = json.loads(saved.read_text())
    del older["provenance"]["view"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    before = validate_distribution(experiment, tmp_path / "older", saved=tmp_path / "older.json",
                                   progress=False)
    assert before.card["key"] != first.card["key"]
    assert before.card["key"] == readout_key(prepare(experiment).key,
                                             ReadoutSettings(view="model"), False)
    other = scripted_experiment("governance.profile=disabled")
    with pytest.raises(ConfigError, match="made for configuration"):
        validate_distribution(other, tmp_path / "other", saved=saved, progress=False)
    data = json.loads(saved.read_text())
    data["vignettes"][0]["threat"]["VL"] += 0.1
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="sums to"):
        validate_distribution(experiment, tmp_path / "broken", saved=broken, progress=False)


def test_validate_readout_distribution_needs_token_probabilities(scripted_file, capsys):
    assert main(["validate", str(scripted_file), "--readout", "distribution",
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "scripted backend" in err and "llm.backend: embedded" in err
    assert main(["validate", str(scripted_file), "--readout", "distribution", "--quick"]) == 2
    assert main(["validate", str(scripted_file), "--primary-only"]) == 2
    assert main(["validate", str(scripted_file), "--accounts", "4"]) == 2
    assert main(["validate", str(scripted_file), "--view", "model"]) == 2
    assert main(["validate", str(scripted_file), "--whole-prompts"]) == 2
    assert "--whole-prompts" in capsys.readouterr().err
    for flag in (["--view", "model"], ["--whole-prompts"]):
        assert main(["validate", str(scripted_file), "--readout", "distribution", *flag,
                     "--distributions", "readout.json"]) == 2
        assert "judged as it was read" in capsys.readouterr().err
    assert main(["validate", str(scripted_file), "--readout", "distribution",
                 "--accounts", "-1"]) == 2
    assert "--accounts must be 0 or more, got -1" in capsys.readouterr().err
    assert main(["validate", str(scripted_file), "--readout", "distribution",
                 "--budget", "--accounts", "3"]) == 0
    shared = capsys.readouterr().out
    assert "readout budget (--readout distribution, --accounts 3)" in shared
    assert main(["validate", str(scripted_file), "--readout", "distribution",
                 "--budget", "--accounts", "3", "--whole-prompts"]) == 0
    whole = capsys.readouterr().out

    def counts(out: str) -> tuple[int, int, int]:
        found = re.search(r": (\d+) vignettes .*: (\d+) replies from (\d+) prompt evaluations",
                          out)
        assert found is not None, out
        return tuple(int(g) for g in found.groups())

    vignettes, replies, prompts = counts(shared)
    assert replies == 3 * vignettes and prompts == vignettes
    assert counts(whole) == (vignettes, replies, replies)


@pytest.mark.parametrize(("name", "passes"), [("rule", True), ("deaf", False)])
def test_reference_respondents_are_read_from_their_known_laws(scripted_experiment, tmp_path,
                                                             name, passes):
    from governed_broker.validity.reference import reference_experiment

    experiment = reference_experiment(scripted_experiment(), name)
    result = validate_distribution(experiment, tmp_path / name, progress=False, store=False)
    assert result.card["passed"] is passes and result.stored is None
    assert result.card["readout"]["source"] == f"reference {name} (exact)"


def test_a_noisy_rules_laws_mix_the_rule_with_uniform_choices():
    from governed_broker.llm.reference import ReferenceBackend, ReferenceSource

    schema = {"properties": {
        "threat_appraisal": {"properties": {"label": {"enum": ["VL", "L", "M", "H", "VH"]}}},
        "decision": {"enum": ["do_nothing", "buy_insurance"]}}}
    source = ReferenceSource(ReferenceBackend("random"))
    from governed_broker.llm.base import LLMRequest

    laws = source.laws(LLMRequest.of([{"role": "user", "content": "x"}], json_schema=schema))
    assert laws["threat_appraisal.label"] == pytest.approx(dict.fromkeys(
        ["VL", "L", "M", "H", "VH"], 0.2))
    assert sum(laws["decision"].values()) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- sampled accounts

def test_account_interval_brackets_the_mean_and_needs_accounts_that_differ():
    def share(ds):
        return sum(d[1.0] for d in ds) / len(ds)

    spread = [[{1.0: p, 0.0: 1 - p} for p in (0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.4, 0.6)]]
    low, high = account_interval(share, spread, 0.05, 2000)
    assert low < 0.5 < high and high - low > 0.1
    assert account_interval(share, spread, 0.05, 2000) == (low, high)  # a fixed stream
    same = [[{1.0: 0.5, 0.0: 0.5}] * 8]
    assert account_interval(share, same, 0.05, 2000) is not None  # 8 equal accounts: width 0
    assert account_interval(share, [[{1.0: 0.5, 0.0: 0.5}]], 0.05, 2000) is None
    with pytest.raises(ValueError, match="different numbers of accounts"):
        account_interval(share, [spread[0], spread[0][:4]], 0.05, 2000)


def test_accounts_are_resampled_together_across_vignettes():
    """Account k of every vignette shares a seed: two vignettes that answer alike stay alike."""
    accounts = [{"a": p, "b": 1 - p} for p in (0.1, 0.9, 0.3, 0.7)]
    low, high = account_interval(lambda ds: total_variation(ds[0], ds[1]),
                                 [accounts, accounts], 0.05, 500)
    assert low == high == 0.0  # resampled apart, the two means would differ


class AccountSource(CharSource):
    """The follower, whose sampled account k writes the reason "r<k mod 2>".

    After "r1" the first action listed gets weight 4 (a position bias), after "r0" the last one.
    """

    def __init__(self) -> None:
        super().__init__(follower)
        self.seeds: list[int] = []

    def path(self, request, reuse_prompt=False):
        reply = super().path(request)
        if request.temperature == 0:
            return reply
        self.seeds.append(request.seed)
        text = reply.text.replace('"reason": "r"', f'"reason": "r{request.seed % 2}"')
        return ReplyPath(text, tuple(Token(c.encode()) for c in text), reply.prompt)

    def top_tokens(self, reply, prefix, k):
        written = b"".join(t.text for t in prefix).decode()

        def weigh(field, values, prompt):
            if field != "decision" or not re.search(r'"r[01]"', written):  # the greedy path
                return follower(field, values, prompt)
            favourite = values[0] if '"r1"' in written else values[-1]
            return {v: 4.0 if v == favourite else 1.0 for v in values}

        self.weigh = weigh
        return super().top_tokens(reply, prefix, k)


def test_a_card_over_sampled_accounts_bounds_their_monte_carlo_error(scripted_experiment,
                                                                     tmp_path):
    from governed_broker.validity.plan import common_seed

    experiment = scripted_experiment()
    source = AccountSource()
    result = validate_distribution(experiment, tmp_path / "card", backend=ScriptedBackend([]),
                                   token_source=source, progress=False,
                                   settings=ReadoutSettings(accounts=4))
    tests = {t["name"]: t for t in result.card["tests"]}
    plan_seed = prepare(experiment).plan.battery.tests.seed
    assert source.seeds[:4] == [common_seed(plan_seed, k, 0) for k in range(4)]
    # every account writes the same text before the threat label: read once, exact
    depth = tests["threat_rises_with_depth"]
    assert "monte_carlo" not in depth["detail"] and depth["lower"] == depth["statistic"]
    # the action mixes the accounts' biases, and its bounds carry their spread
    order = tests["action_order_invariance"]
    mc = order["detail"]["monte_carlo"]
    assert mc["accounts"] == 4 and mc["alpha"] == pytest.approx(0.05 / 7)
    assert order["lower"] <= min(mc["lower"], order["statistic"]) + 1e-9  # the card rounds
    assert order["upper"] >= max(mc["upper"], order["statistic"]) - 1e-9
    # two accounts of each bias: the means of the arms agree (TV 0), four accounts cannot
    # show it within the tolerance
    assert order["statistic"] == 0.0 and mc["upper"] > 0.25
    assert order["outcome"] == "inconclusive"
    assert result.card["readout"]["accounts"] == 4
    greedy = validate_distribution(experiment, tmp_path / "greedy", backend=ScriptedBackend([]),
                                   token_source=AccountSource(), progress=False)
    assert greedy.card["key"] != result.card["key"]
    # judged again from the saved readout, with its own settings: the same card
    again = validate_distribution(experiment, tmp_path / "again",
                                  saved=result.out_dir / "readout.json", progress=False)
    assert again.card["key"] == result.card["key"] and _outcomes(again) == _outcomes(result)
    # a readout whose every account evaluated the prompt whole (as all did before the reuse
    # existed: their provenance has no prompt_reuse) keeps its own key
    assert result.card["readout"]["prompt_reuse"] is True
    older = json.loads((result.out_dir / "readout.json").read_text())
    del older["provenance"]["prompt_reuse"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    whole = validate_distribution(experiment, tmp_path / "older", saved=tmp_path / "older.json",
                                  progress=False)
    settings = ReadoutSettings(accounts=4, view="sampler", prompt_reuse=False)
    assert whole.card["key"] == readout_key(prepare(experiment).key, settings, False)
    assert whole.card["key"] != result.card["key"]


def test_an_exact_share_trend_in_an_action_no_vignette_offers_cannot_fail():
    domain = load_agent_types(Path(__file__).resolve().parents[2] / "agent_types.yaml")
    plan = plan_battery(load_battery(Path(__file__).resolve().parents[2] / "configs" / "validity",
                                     domain), domain, {"high": 0.02, "low": 0.002})
    test = next(t for t in plan.battery.tests.tests
                if t.name == "owner_elevation_falls_with_cost")
    keys = [level.vignette for level in plan.levels[test.name]]

    def laws(offers: tuple[str, ...]) -> dict[str, VignetteLaw]:
        return {k: VignetteLaw(k, {"threat": {"M": 1.0}, "coping": {"M": 1.0},
                                   "action": {"do_nothing": 1.0}},
                               {"threat": 0.0, "coping": 0.0, "action": 0.0}, offers)
                for k in keys}

    prompts = {k: k for k in keys}
    offers = ("do_nothing", "buy_insurance", "relocate")
    result = monotone(test, ExactReadout(plan, laws(offers), domain), prompts)
    assert result.outcome == "not_informative" and "cannot fail" in result.note, result
    offered = laws((*offers, "elevate_house"))
    assert monotone(test, ExactReadout(plan, offered, domain), prompts).outcome == "fail"
