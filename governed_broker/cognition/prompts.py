"""The prompt templates of ``configs/prompts/*.yaml``: the placeholders each key may use.

Loading and checking is ``governed_broker.config.templates`` (a typo in a template is an error
at start-up that names the file and key).
"""

from __future__ import annotations

#: The sections of a decision prompt's user message; ``household.yaml``'s ``section_order``
#: lists each once, in the order they are joined.
PROMPT_SECTIONS: tuple[str, ...] = (
    "identity", "memories", "situation", "social", "knowledge", "choice", "response")

#: Placeholders each key of ``household.yaml`` may use.
HOUSEHOLD_TEMPLATES: dict[str, frozenset[str]] = {
    "system": frozenset({"pmt_scale", "appraisal_format"}),
    "appraisal_label_first": frozenset({"pmt_labels"}),
    "appraisal_reason_first": frozenset({"pmt_labels"}),
    "identity_owner": frozenset({"flood_zone", "flood_chance", "income"}),
    "identity_renter": frozenset({"flood_zone", "flood_chance", "income"}),
    "memories_header": frozenset(),
    "memory_line": frozenset({"year", "fidelity_note", "content"}),
    "insight_line": frozenset({"year", "content"}),
    "memory_fidelity_detailed": frozenset(),
    "memory_fidelity_summary": frozenset(),
    "memory_fidelity_gist": frozenset(),
    "memories_none": frozenset(),
    "situation_header": frozenset({"year"}),
    "situation_flood": frozenset({"depth", "damage", "damage_income_share"}),
    "payout_line": frozenset({"payout"}),
    "situation_no_flood": frozenset(),
    "home_values_owner": frozenset({"structure", "contents"}),
    "home_values_renter": frozenset({"contents"}),
    "typical_flood": frozenset({"depth", "damage"}),
    "savings_line": frozenset({"savings"}),
    "spending_room_line": frozenset({"room"}),
    "debt_line": frozenset({"debt"}),
    "unrepaired_line": frozenset({"unrepaired"}),
    "insured_yes": frozenset(),
    "insured_no": frozenset(),
    "insurance_required_line": frozenset(),
    "group_policy_line": frozenset({"years", "coverage"}),
    "aid_requires_insurance_line": frozenset(),
    "buyout_offer_line": frozenset({"price"}),
    "elevated_yes": frozenset(),
    "elevated_no": frozenset(),
    "social": frozenset({"insured", "elevated", "relocated"}),
    "trust": frozenset({"trust_insurance", "trust_neighbours"}),
    "knowledge_header": frozenset(),
    "knowledge_fact": frozenset({"text"}),
    "knowledge_heuristic": frozenset({"description", "success"}),
    "knowledge_chunk": frozenset({"text", "source"}),
    "choice_header": frozenset(),
    "action_line": frozenset({"id", "description", "cost", "affordability", "flood_cost",
                              "flood_cost_share"}),
    "action_free": frozenset(),
    "affordable_no": frozenset(),
    "affordable_yes": frozenset(),
    "response": frozenset({"actions"}),
    "retry_governance": frozenset({"issues"}),
    "retry_issue": frozenset({"rule_id", "message"}),
    "retry_format": frozenset({"error"}),
}

#: Placeholders each key of ``reflection.yaml`` may use.
REFLECTION_TEMPLATES: dict[str, frozenset[str]] = {
    "system": frozenset(),
    "user": frozenset({"tenure_phrase", "flood_zone", "year", "memories", "n_insights"}),
    "memory_line": frozenset({"content"}),
    "tenure_owner": frozenset(),
    "tenure_renter": frozenset(),
    "retry_format": frozenset({"error", "n_insights"}),
}
