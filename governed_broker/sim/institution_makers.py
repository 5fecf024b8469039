"""The rule-based institutional makers: the counterfactual the LLM institutions are compared with.

Both keep within the domain's limits by construction (``sim.institution_rules.within_limits``)
and record what they saw and did, as an LLM maker's audit would.

``RuleGovernment`` keeps the grant share it has (the status quo of the programme's rules) and
commits every dollar it may this year, ``buyout_share_of_funds`` of it to buyouts when there is
a buyout programme and the rest to elevation grants; what is not taken up is carried over.

``RuleInsurer`` holds the community discount and rates by credibility-weighted experience
(limited-fluctuation credibility): with n claims over its experience window it moves the
loading by ``Z = min(1, sqrt(n / full_credibility_claims))`` of the way from 1 to the
experience loss ratio over the target, ``loading x (1 + Z (LR / target - 1))``, within the
limits (the 18 % yearly increase cap among them). A small community with few claims hardly
moves its rates; a large one with a long record follows its losses.
"""

from __future__ import annotations

import math
from typing import Any

from governed_broker.config.institutions import (
    SPENDING_SETTINGS,
    GovernmentConfig,
    InstitutionDomain,
    InsurerConfig,
)
from governed_broker.contracts.institutions import InstitutionDecision, InstitutionSituation
from governed_broker.sim.institution_rules import within_limits

#: Name of the rule makers in outputs.
RULE_MAKER = "rule"


def _lever_for(domain: InstitutionDomain, setting: str) -> str | None:
    """The lever id that sets ``setting`` (None: the domain has none)."""
    return next((k for k, v in domain.levers.items() if v.setting == setting), None)


def _decision(situation: InstitutionSituation, levers: dict[str, float], reason: str,
              inputs: dict[str, Any]) -> InstitutionDecision:
    return InstitutionDecision(
        institution=situation.institution, year=situation.year, levers=levers,
        status="rule", decision_maker=RULE_MAKER, proposed=levers, reason=reason,
        audit={"rule_inputs": inputs})


class _RuleMaker:
    """What both rule makers share: their settings, their domain, no model and nothing to close.

    Args:
        config: The institution's settings.
        domain: Its levers and limits.
    """

    name = RULE_MAKER

    def __init__(self, config: Any, domain: InstitutionDomain) -> None:
        self.config = config
        self.domain = domain

    def provenance(self) -> None:
        """A rule has no model behind it."""
        return None

    def close(self) -> None:
        """Nothing to release."""


class RuleGovernment(_RuleMaker):
    """The government's rule maker (module documentation); ``config``: its settings."""

    config: GovernmentConfig

    def decide(self, situation: InstitutionSituation) -> InstitutionDecision:
        """Keep the grant share; commit the available funds, split between the programmes."""
        levers = dict(situation.levers)
        funds = float(situation.facts["funds_available_usd"] or 0.0)
        grant = _lever_for(self.domain, SPENDING_SETTINGS[0])
        buyout = _lever_for(self.domain, SPENDING_SETTINGS[1])
        buyout_share = self.config.buyout_share_of_funds if buyout in levers else 0.0
        if buyout in levers:
            levers[buyout] = funds * buyout_share
        if grant in levers:
            levers[grant] = funds - levers.get(buyout, 0.0)
        levers = within_limits(self.domain, situation, levers)
        reason = (f"keeps the grant share and commits the ${round(funds):,} available, "
                  f"{buyout_share:.0%} to buyouts")
        return _decision(situation, levers, reason, {"funds_available_usd": funds,
                                                     "buyout_share_of_funds": buyout_share})


class RuleInsurer(_RuleMaker):
    """The insurer's rule maker (module documentation); ``config``: its settings."""

    config: InsurerConfig

    def decide(self, situation: InstitutionSituation) -> InstitutionDecision:
        """Hold the discount; move the loading by the credibility-weighted experience."""
        levers = dict(situation.levers)
        loading = _lever_for(self.domain, "insurance.loading")
        ratio = situation.facts.get("experience_loss_ratio")
        claims = int(situation.facts.get("experience_claims") or 0)
        credibility = min(1.0, math.sqrt(claims / self.config.full_credibility_claims))
        indicated = None
        if loading in levers and ratio is not None:
            indicated = 1.0 + credibility * (ratio / self.config.target_loss_ratio - 1.0)
            levers[loading] = levers[loading] * indicated
        levers = within_limits(self.domain, situation, levers)
        reason = ("no premium written yet: rates held" if indicated is None else
                  f"experience loss ratio {ratio:.3g} over {claims} claims, credibility "
                  f"{credibility:.3g}: loading x {indicated:.4g} within the limits")
        return _decision(situation, levers, reason, {
            "experience_loss_ratio": ratio, "experience_claims": claims,
            "credibility": credibility, "indicated_factor": indicated,
            "target_loss_ratio": self.config.target_loss_ratio})
