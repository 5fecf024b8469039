"""A policy change from a given year: one arm of a policy experiment.

``policy_change`` sets policy settings that are in force from the start of year ``from_year``
(1 January: that year's flood claims and aid, prices and decisions all use them). The years
before are simulated with the experiment's own settings, so the arms of a policy experiment
that differ only in their ``policy_change`` share every draw and every output row up to year
``from_year - 1`` byte for byte, and an LLM arm's calls in those years are answered from the
response cache of the first arm that made them (the cache key is the request, not the run).

Only settings that the world reads afresh every year are policy settings (``POLICY_SETTINGS``).
Settings drawn once at the start (who holds a mortgage that requires insurance, the population,
the hazard) or that shape the households' minds (memory, prompts, the decision maker) cannot
change from one year on, and are refused with the list of what can.

The aid certificates' terms (``finance.aid.group_policy``) may change field by field: from
``from_year`` on, ``zones`` and ``term_years`` apply to the certificates given from then on,
``coverage_usd`` to every claim paid by a certificate (those already given included), and
``keep_insured`` to every later aid decision (earlier recipients included). The programme as a
whole cannot start or end by a policy change: certificates in force would lose their terms.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from governed_broker.config.base import StrictModel

#: Settings a policy change may set, as dotted paths (section.field[.field]).
POLICY_SETTINGS: tuple[str, ...] = (
    "insurance.pricing",
    "insurance.rate_structure_per_1000_usd",
    "insurance.rate_contents_per_1000_usd",
    "insurance.loading",
    "insurance.fee_usd",
    "insurance.limit_structure_usd",
    "insurance.limit_contents_usd",
    "insurance.deductible_structure_usd",
    "insurance.deductible_contents_usd",
    "insurance.payout_share",
    "insurance.crs_discount",
    "elevation.subsidy_share",
    "elevation.subsidy_budget_usd",
    "elevation.subsidy_allocation",
    "relocation.buyout_share",
    "buyout",
    "buyout.min_floods",
    "buyout.substantial_damage_share",
    "buyout.price_share",
    "buyout.annual_budget_usd",
    "buyout.allocation",
    "buyout.offer_years",
    "finance.aid.probability",
    "finance.aid.max_grant_usd",
    # fields only: ending the programme would leave certificates in force without their terms
    "finance.aid.group_policy.zones",
    "finance.aid.group_policy.term_years",
    "finance.aid.group_policy.coverage_usd",
    "finance.aid.group_policy.keep_insured",
    "institutions.government.appropriation_per_household_usd",
    "institutions.government.post_disaster_share",
    "institutions.government.buyout_share_of_funds",
    "institutions.insurer.target_loss_ratio",
)


class PolicyChangeConfig(StrictModel):
    """Policy settings in force from year ``from_year`` on (docs/sweeps.md, "Policy arms").

    Attributes:
        description: What the policy is, for people (changes no output).
        from_year: First year (1-based) with the changed settings (arms share the years before).
        settings: Dotted policy setting -> value, e.g. ``{elevation.subsidy_share: 0.75}``.
    """

    description: str = ""
    from_year: int = Field(ge=2, le=1000)
    settings: dict[str, Any] = Field(min_length=1)

    @field_validator("settings")
    @classmethod
    def _policy_settings_only(cls, settings: dict[str, Any]) -> dict[str, Any]:
        for key in settings:
            if key not in POLICY_SETTINGS:
                raise ValueError(
                    f"{key!r} is not a policy setting (one the world reads afresh every year); "
                    f"allowed: {', '.join(POLICY_SETTINGS)}")
        return settings


def apply_settings(sections: dict[str, BaseModel | None], models: dict[str, type[BaseModel]],
                   settings: dict[str, Any]) -> dict[str, Any]:
    """The experiment sections that ``settings`` change, with the changes applied and validated.

    A setting may name a whole section (``buyout``: a programme that starts with the change,
    or ``null`` to end it) or a field inside one that the experiment has.

    Args:
        sections: The experiment's sections by name (``insurance``, ``buyout``...; None: unset).
        models: The model class of each of those sections.
        settings: Dotted setting -> value (already checked against ``POLICY_SETTINGS``).

    Returns:
        Section name -> the new, validated section model (or None).

    Raises:
        ValueError: a value the section does not accept, or a field of a section the
            experiment does not have (the message names the setting).
    """
    changed: dict[str, Any] = {}
    for key, value in sorted(settings.items(), key=lambda kv: kv[0].count(".")):
        section, *path = key.split(".")
        if not path:
            changed[section] = value
            continue
        if section not in changed:
            current = sections[section]
            if current is None:
                raise ValueError(
                    f"policy_change.settings: {key!r} changes a field of '{section}', which the "
                    f"experiment does not set; set the whole section ({section}: {{...}})")
            changed[section] = current.model_dump(mode="python")
        node = changed[section]
        for depth, part in enumerate(path[:-1], start=1):
            node = node[part]
            if node is None:
                unset = ".".join([section, *path[:depth]])
                raise ValueError(
                    f"policy_change.settings: {key!r} changes a field of '{unset}', which the "
                    "experiment does not set; set it in the experiment first")
        node[path[-1]] = value
    out: dict[str, Any] = {}
    for section, data in changed.items():
        if data is None:
            out[section] = None
            continue
        try:
            out[section] = models[section].model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join([section, *(str(p) for p in e['loc'])])}: {e['msg']}"
                for e in exc.errors())
            raise ValueError(f"policy_change.settings: {problems}") from None
    return out
