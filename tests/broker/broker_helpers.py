"""Shared builders for broker and cognition tests.

Situations, scripted replies, brokers on the real agent_types.yaml and prompt templates of the
repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from governed_broker.broker.governed import GovernedBroker
from governed_broker.broker.rules import RuleSet
from governed_broker.broker.skills import SkillRegistry
from governed_broker.cognition.context import ContextBuilder
from governed_broker.config.agent_types import PMTLabels
from governed_broker.config.broker import GovernanceConfig, GovernanceRules
from governed_broker.contracts.decision import HouseholdSituation
from governed_broker.llm.scripted import ScriptedBackend

REPO = Path(__file__).resolve().parents[2]
AGENT_TYPES = yaml.safe_load((REPO / "agent_types.yaml").read_text())
PROMPTS = REPO / "configs" / "prompts"
#: The repository's appraisal scale (``pmt_labels``).
SCALE = PMTLabels.model_validate(AGENT_TYPES["pmt_labels"])
OWNER_ACTIONS = ("do_nothing", "buy_insurance", "elevate_house", "relocate")
RENTER_ACTIONS = ("do_nothing", "buy_insurance", "relocate")

#: Patterns that tell the scripted backend which turn it is answering.
FIRST = r"Reply with this JSON object"
GOV_RETRY = r"cannot be accepted"
FORMAT_RETRY = r"could not be read"


def make_situation(**overrides: Any) -> HouseholdSituation:
    """An owner in the high zone, everything affordable, unless overridden."""
    tenure = overrides.get("tenure", "owner")
    allowed = OWNER_ACTIONS if tenure == "owner" else RENTER_ACTIONS
    base: dict[str, Any] = dict(
        agent_id=7, year=3, tenure=tenure, flood_zone="high", income_usd=62000.0,
        savings_usd=40000.0, structure_value_usd=250000.0, contents_value_usd=60000.0,
        elevated=False, insured=False, flooded=True, depth_m=0.8, damage_usd=45000.0,
        payout_usd=0.0, years_since_flood=0, floods_experienced=1, flood_probability=0.01,
        neighbour_shares={"insured": 0.3, "elevated": 0.1, "relocated": 0.0},
        action_costs_usd={"do_nothing": 0.0, "buy_insurance": 1200.0,
                          "elevate_house": 30000.0, "relocate": 35000.0},
        affordable={a: True for a in OWNER_ACTIONS}, allowed_actions=allowed,
        trust_insurance=0.4, trust_neighbours=0.6, debt_usd=0.0, unrepaired_damage_usd=0.0,
    )
    base.update(overrides)
    return HouseholdSituation(**base)


def reply(threat: str, coping: str, action: str, reason: str = "my reason") -> dict:
    """A well-formed decision reply."""
    return {
        "threat_appraisal": {"label": threat, "reason": "threat reason"},
        "coping_appraisal": {"label": coping, "reason": "coping reason"},
        "decision": action,
        "reason": reason,
    }


def governance_rules(rules: dict | None = None) -> GovernanceRules:
    return GovernanceRules.model_validate(rules or AGENT_TYPES["governance"])


def registry() -> SkillRegistry:
    return SkillRegistry.from_actions(AGENT_TYPES["actions"])


def make_broker(
    script: list, profile: str = "strict", tmp_path: Path | None = None, seed: int = 11,
    concurrency: int | None = None, **governance: Any,
) -> tuple[GovernedBroker, ScriptedBackend]:
    """A broker over the repository's rule table and prompts with a scripted backend."""
    backend = ScriptedBackend(script, name="test")
    if concurrency is not None:
        backend.max_concurrency = concurrency
    reg = registry()
    gov = GovernanceConfig(profile=profile, **governance)
    context = ContextBuilder.from_dir(PROMPTS, reg.descriptions(), SCALE)
    broker = GovernedBroker(
        backend, context, reg, RuleSet(governance_rules(), profile, reg, SCALE.labels), gov,
        seed=seed,
        run_id="test-run", audit_path=(tmp_path / "decisions.jsonl") if tmp_path else None,
    )
    return broker, backend


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
