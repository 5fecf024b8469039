"""The worked decision example of ``docs/decisions.md``, produced by the real broker.

One owner in the high flood zone in year 3, just after a 0.8 m flood, decides through the
``GovernedBroker`` with the repository's prompt templates (``configs/prompts/``), action table
and rule table (``agent_types.yaml``, strict profile). A *scripted* backend plays the model: its
two replies are written here, not by a language model. The first reply breaks a strict-profile
rule, the second is accepted. Everything else in the example (the prompts, the feedback, the
audit record) is what the code produces, so the page changes whenever the prompts, rules or
audit format change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from governed_broker.broker.governed import GovernedBroker
from governed_broker.broker.rules import RuleSet
from governed_broker.broker.skills import SkillRegistry
from governed_broker.cognition.context import ContextBuilder
from governed_broker.config.broker import GovernanceConfig
from governed_broker.config.loader import load_agent_types
from governed_broker.contracts.decision import (
    Decision,
    HouseholdSituation,
    SituationFacts,
    TypicalFlood,
)
from governed_broker.llm.base import LLMRequest
from governed_broker.llm.scripted import ScriptedBackend
from governed_broker.memory.item import MemoryItem

FIRST_REPLY = {
    "threat_appraisal": {"label": "H",
                         "reason": "Our home flooded this year and floods here are frequent."},
    "coping_appraisal": {"label": "M",
                         "reason": "We have some savings but elevation is expensive."},
    "decision": "do_nothing",
    "reason": "We will wait and see.",
}
SECOND_REPLY = {
    "threat_appraisal": FIRST_REPLY["threat_appraisal"],
    "coping_appraisal": {"label": "M", "reason": "Insurance is affordable from our savings."},
    "decision": "buy_insurance",
    "reason": "Insurance covers the next flood at a cost we can pay.",
}


def _memories() -> list[MemoryItem]:
    common: dict[str, Any] = {"agent_id": "7", "emotion": "fear", "source": "personal"}
    return [
        MemoryItem(id="m000002", year=1, importance=0.6, fidelity="summary",
                   content="I saw water in the street outside my home during the spring storm.",
                   **common),
        MemoryItem(id="m000009", year=2, importance=0.5,
                   content="I lost my insurance because I did not renew it.", **common),
        MemoryItem(id="m000011", year=2, importance=0.8, kind="insight",
                   content="I live where floods reach my home.", **common),
    ]


def situation() -> HouseholdSituation:
    """The household of the example.

    An owner in the high zone, year 3, flooded 0.8 m; it cannot pay for elevating and insuring
    together this year.
    """
    actions = ("do_nothing", "buy_insurance", "elevate_house", "elevate_and_insure", "relocate")
    return HouseholdSituation(
        agent_id=7, year=3, tenure="owner", flood_zone="high", income_usd=62_000.0,
        savings_usd=52_000.0, structure_value_usd=250_000.0, contents_value_usd=60_000.0,
        elevated=False, insured=False, flooded=True, depth_m=0.8, damage_usd=45_000.0,
        payout_usd=0.0, years_since_flood=0, floods_experienced=1, flood_probability=0.02,
        neighbour_shares={"insured": 0.3, "elevated": 0.1, "relocated": 0.0},
        action_costs_usd={"do_nothing": 0.0, "buy_insurance": 1_210.0, "elevate_house": 40_000.0,
                          "elevate_and_insure": 41_210.0, "relocate": 10_000.0},
        affordable={a: a != "elevate_and_insure" for a in actions}, allowed_actions=actions,
        trust_insurance=0.3, trust_neighbours=0.5, debt_usd=0.0, unrepaired_damage_usd=0.0,
        memories=tuple(_memories()),
        facts=SituationFacts(
            loss_if_flood_usd={"do_nothing": 52_000.0, "buy_insurance": 2_000.0,
                               "elevate_house": 0.0, "elevate_and_insure": 0.0, "relocate": 0.0},
            premium_usd={"do_nothing": 0.0, "buy_insurance": 1_210.0, "elevate_house": 0.0,
                         "elevate_and_insure": 1_210.0, "relocate": 0.0},
            typical_flood=TypicalFlood(depth_m=0.3, damage_usd=52_000.0),
            spending_room_usd=40_200.0),
    )


def run_example(repo_root: Path) -> tuple[Decision, list[LLMRequest]]:
    """Decide the example household through the broker; the decision and the model's requests.

    The example names the shipped action ids, so it runs on the repository's
    ``agent_types.yaml``; a copy with other ids needs its own example.
    """
    domain = load_agent_types(repo_root / "agent_types.yaml")
    registry = SkillRegistry.from_actions(
        {k: v.model_dump() for k, v in domain.actions.items()})
    backend = ScriptedBackend([(r"cannot be accepted", SECOND_REPLY), (r".", FIRST_REPLY)],
                              name="example")
    context = ContextBuilder.from_dir(repo_root / "configs" / "prompts", registry.descriptions(),
                                      domain.pmt_labels)
    rules = RuleSet(domain.governance, "strict", registry, domain.pmt_labels.labels)
    broker = GovernedBroker(backend, context, registry, rules, GovernanceConfig(profile="strict"),
                            seed=42, run_id="example-seed42")
    try:
        (decision,) = broker.decide([situation()])
    finally:
        broker.close()
    return decision, backend.calls


def _fence(kind: str, text: str) -> str:
    return f"```{kind}\n{text.rstrip()}\n```\n"


def _audit_without_timings(audit: Any) -> Any:
    """The audit record with every ``latency_s`` set to 0 (the one field that varies)."""
    if isinstance(audit, dict):
        return {k: 0.0 if k == "latency_s" else _audit_without_timings(v)
                for k, v in audit.items()}
    if isinstance(audit, list):
        return [_audit_without_timings(v) for v in audit]
    return audit


def worked_example(repo_root: Path) -> str:
    """The Markdown of the example: prompts, replies, feedback, audit record, CSV row."""
    decision, calls = run_example(repo_root)
    first, second = calls[0].messages, calls[1].messages
    system, user = first[0]["content"], first[1]["content"]
    feedback = second[-1]["content"]
    rules = decision.audit["attempts"][0]["rules"]
    if decision.status != "retry_approved" or len(calls) != 2:
        # the page tells the story of one rejected and one accepted reply; say so, never
        # publish a different story under that text
        raise RuntimeError(
            f"worked example: expected a rejected first reply and an accepted second one, got "
            f"status {decision.status!r} after {len(calls)} calls; adjust FIRST_REPLY / "
            "SECOND_REPLY in governed_broker/docgen/worked_example.py to the current rules")
    fired = ", ".join(f"`{r['id']}` ({r['severity']})" for r in rules if r["fired"])
    quiet = ", ".join(f"`{r['id']}`" for r in rules if not r["fired"]) or "none"
    audit = json.dumps(_audit_without_timings(dict(decision.audit)), indent=1,
                       ensure_ascii=False)
    return "\n".join([
        "**System message** (identical for every household):\n",
        _fence("text", system),
        "**User message:**\n",
        _fence("text", user),
        "**First reply**, which parses cleanly:\n",
        _fence("json", json.dumps(FIRST_REPLY)),
        f"**Validation** (strict profile). Fired: {fired}. Evaluated and not fired: {quiet}. "
        "An ERROR makes the broker re-ask, adding the rejected reply and this message to the "
        "conversation:\n",
        _fence("text", feedback),
        f"**Second reply**, accepted with status `{decision.status}`:\n",
        _fence("json", json.dumps(SECOND_REPLY)),
        "**Audit record** (one line of `decisions.jsonl`, pretty-printed here; every "
        "`latency_s` is shown as 0.0, since timings are the only field that changes between "
        "identical runs and the CSVs never contain them):\n",
        _fence("json", audit),
        f"The matching row of `agents_yearly.csv` has `threat_label={decision.threat_label}, "
        f"coping_label={decision.coping_label}, proposed_action={decision.proposed_action}, "
        f"executed_action={decision.action}, status={decision.status}, "
        f"retries={decision.retries}`.",
    ]) + "\n"
