"""run_experiment: outputs, contract columns, determinism, atomic placement."""

from __future__ import annotations

import gc
import json

import pandas as pd
import pytest

from governed_broker.config.loader import load_agent_types
from governed_broker.runner import OutputExistsError, partial_dir, run_experiment
from governed_broker.sim import AGENT_COLUMNS, model_columns
from governed_broker.sim.model import FloodModel

CONTRACT_AGENT = (
    "year, agent_id, tenure, flood_zone, income_usd, marginalised, savings_before_usd, "
    "elevated_before, insured_before, flooded, depth_m, effective_depth_m, "
    "damage_structure_usd, damage_contents_usd, damage_usd, payout_usd, out_of_pocket_usd, "
    "aid_usd, aid_withheld, repaired_from_savings_usd, loan_usd, unrepaired_usd, "
    "years_since_flood, floods_experienced, neighbour_insured_share, neighbour_elevated_share, "
    "neighbour_relocated_share, trust_insurance, trust_neighbours, threat_score, coping_score, "
    "threat_label, coping_label, proposed_action, executed_action, status, retries, feasible, "
    "could_protect, subsidy_offered, subsidy_applied, subsidy_usd, buyout_offered, buyout_usd, "
    "action_cost_usd, premium_usd, elevated_after, insured_after, insurance_required, "
    "lender_placed, group_certificate, relocated_after, loan_payment_usd, debt_after_usd, "
    "savings_after_usd, forced_sale, decision_maker"
)
#: A small world where zone high floods every other year, every home at once, and half the
#: households live there: enough flooded households to see every kind of decision.
FLOODED_WORLD = ("population.generate.zone_shares={high: 0.5, low: 0.5}",
                 "hazard.zones.high.annual_probability=0.5", "hazard.zones.high.flooded_share=1")
CONTRACT_MODEL = (
    "year, n_households, n_active, n_flooded, flood_occurred, share_insured, share_elevated, "
    "share_relocated, share_insured_and_elevated, share_no_measure, total_damage_usd, "
    "total_payout_usd, total_premiums_usd, total_action_costs_usd, total_subsidy_usd, "
    "total_buyout_usd, total_aid_usd, total_loans_usd, total_unrepaired_usd, n_forced_sales, "
    "mean_depth_flooded_m, n_do_nothing, n_buy_insurance, n_elevate_house, "
    "n_elevate_and_insure, n_relocate, n_accept_buyout, n_rejected, n_retries, n_infeasible"
)


@pytest.fixture
def shipped_model_columns(repo_root) -> list[str]:
    """``model_yearly.csv`` headers with the shipped ``agent_types.yaml``."""
    return list(model_columns(list(load_agent_types(repo_root / "agent_types.yaml").actions)))


def test_columns_are_the_output_contract(shipped_model_columns) -> None:
    assert list(AGENT_COLUMNS) == CONTRACT_AGENT.split(", ")
    assert shipped_model_columns == CONTRACT_MODEL.split(", ")


def test_run_writes_every_output(experiments, tmp_path, shipped_model_columns) -> None:
    config = experiments.config(["outputs.plots=true", "years=6"])
    result = run_experiment(config, tmp_path / "run", progress=False)
    out = tmp_path / "run"
    assert sorted(p.name for p in out.iterdir()) == [
        "agents_yearly.csv", "config.yaml", "manifest.json", "model_yearly.csv", "summary.png"]
    assert not partial_dir(out).exists()
    agents = pd.read_csv(out / "agents_yearly.csv")
    model = pd.read_csv(out / "model_yearly.csv")
    assert list(agents.columns) == list(AGENT_COLUMNS)
    assert list(model.columns) == shipped_model_columns
    assert len(model) == 6 and result.n_agent_rows == len(agents)
    assert agents.equals(agents.sort_values(["year", "agent_id"]).reset_index(drop=True))
    assert set(agents["decision_maker"]) == {"baseline"}
    assert set(agents["feasible"]) <= {True, False}
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("config_hash", "seed", "packages", "git_commit", "started_at", "finished_at",
                "n_households", "n_agent_rows", "decision_maker"):
        assert key in manifest
    assert manifest["decision_maker"] == "baseline" and manifest["packages"]["mesa"]
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_seed_identical_other_seed_different(experiments, tmp_path) -> None:
    files = ("agents_yearly.csv", "model_yearly.csv")
    outs = []
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        run_experiment(experiments.config([f"seed={seed}", "years=8"]), tmp_path / name,
                       progress=False)
        outs.append([(tmp_path / name / f).read_bytes() for f in files])
    assert outs[0] == outs[1]
    assert outs[0][0] != outs[2][0] and outs[0][1] != outs[2][1]


def _worlds_alive() -> int:
    gc.collect()
    # type(), not isinstance: isinstance reads __class__, which some lazy module proxies warn on
    return sum(type(o) is FloodModel for o in gc.get_objects())


def test_a_finished_or_failed_run_leaves_no_world_alive(experiments, tmp_path) -> None:
    # Mesa 3.3's class-level agent counter kept every model of a process (mesa/mesa#3179)
    before = _worlds_alive()
    run_experiment(experiments.config(["years=2"]), tmp_path / "run", progress=False)
    assert _worlds_alive() == before
    with pytest.raises(RuntimeError, match="exploded"):
        run_experiment(experiments.config(["years=2"]), tmp_path / "failed", progress=False,
                       decision_maker=_Broken())
    assert _worlds_alive() == before


def test_refuses_existing_output_unless_overwrite(experiments, tmp_path) -> None:
    config = experiments.config(["years=2"])
    run_experiment(config, tmp_path / "run", progress=False)
    with pytest.raises(OutputExistsError):
        run_experiment(config, tmp_path / "run", progress=False)
    run_experiment(config, tmp_path / "run", progress=False, overwrite=True)


class _Broken:
    """A decision maker whose backend fails in year 1."""

    name = "broken"

    def decide(self, situations):
        raise RuntimeError("backend exploded")

    def end_year(self, year, households):
        pass

    def provenance(self):
        return None

    def close(self):
        pass


def test_failed_run_leaves_no_complete_directory(experiments, tmp_path) -> None:
    with pytest.raises(RuntimeError, match="exploded"):
        run_experiment(experiments.config(), tmp_path / "run", progress=False,
                       decision_maker=_Broken())
    assert not (tmp_path / "run").exists()


def test_manifest_records_llm_and_knowledge_base(experiments, tmp_path, repo_root) -> None:
    llm = {"backend": "scripted", "model": "resume",
           "script": str(repo_root / "tests" / "fixtures" / "scripted_resume.yaml"),
           "cache": {"mode": "off"}}
    config = experiments.config(["years=2", "population.size=4", "decision.maker=llm",
                                 f"llm={json.dumps(llm)}", "rag.enabled=true",
                                 "memory.engine=humancentric"])
    run_experiment(config, tmp_path / "run", progress=False)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["llm"]["backend"]["kind"] == "scripted"
    assert manifest["llm"]["stats"]["calls"]["calls"] >= 8  # 4 households x 2 years
    assert manifest["llm"]["knowledge_base"]["n_documents"] == 4
    assert manifest["resumed_from_year"] is None


def test_action_counts_follow_the_domain(experiments, tmp_path, repo_root) -> None:
    """``n_<action>`` columns come from agent_types.yaml, not from a fixed list."""
    text = (repo_root / "agent_types.yaml").read_text()
    domain = tmp_path / "agent_types.yaml"
    domain.write_text(text.replace("buy_insurance", "insure_home"))
    data = experiments.data()
    data["agent_types"] = str(domain)
    config = experiments.config(["years=4", *FLOODED_WORLD], data=data)
    run_experiment(config, tmp_path / "run", progress=False)
    model = pd.read_csv(tmp_path / "run" / "model_yearly.csv")
    agents = pd.read_csv(tmp_path / "run" / "agents_yearly.csv")
    assert "n_insure_home" in model.columns and "n_buy_insurance" not in model.columns
    per_year = agents[agents["executed_action"] == "insure_home"].groupby("year").size()
    assert model.set_index("year")["n_insure_home"].sum() == per_year.sum() > 0
