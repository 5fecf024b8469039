"""Institutions: the domain file and the experiment's ``institutions:`` section.

``institutions.yaml``; docs/institutions.md.

The domain says, for each institution, which facts its prompt shows and in what words, which
levers it sets (each one a world setting, in a unit) and the rules that bind it: legal bounds
(``range``), a bounded change per year (``max_change``), steps of a scale (``multiple_of``),
money that must come out of what is available (``total_within``), and reasoning checks
(``direction``: a lever moved against a fact, e.g. rates lowered while claims exceed
premiums). Rules are data; ``sim.institution_rules`` knows the kinds, not any rule.

The experiment's section says who decides for each institution (``rule``: the sourced
counterfactual of ``sim.institution_makers``; ``llm``: the governed broker with the
experiment's ``llm:`` section) and the money it starts with and receives.
"""

from __future__ import annotations

import math
import string
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from governed_broker.config.base import StrictModel
from governed_broker.config.broker import NumericTest, RuleSeverity
from governed_broker.config.world import FilePath, Money, Share, Source
from governed_broker.contracts.institutions import FACTS, Unit

#: The institutions of the world, in the order they decide each year (before the households):
#: ``"name": "module:Class"`` of a ``governed_broker.sim.institutions.InstitutionAgent``. A new
#: institution is such a class plus one entry here, with its section in ``InstitutionsConfig``
#: and ``InstitutionsDomain``, its facts (``contracts.institutions.FACTS``), its levers
#: (``LEVER_SETTINGS``) and its columns (docs/ARCHITECTURE.md, "Add an institution").
INSTITUTIONS: dict[str, str] = {
    "government": "governed_broker.sim.institutions:GovernmentAgent",
    "insurer": "governed_broker.sim.institutions:InsurerAgent",
}

#: The world settings each institution may set, as dotted paths of the experiment. The world
#: implements these (the government's spending comes out of its fund, the insurer's rates go
#: into every premium); a lever of the domain names one of them.
LEVER_SETTINGS: dict[str, tuple[str, ...]] = {
    "government": ("elevation.subsidy_share", "elevation.subsidy_budget_usd",
                   "buyout.annual_budget_usd"),
    "insurer": ("insurance.loading", "insurance.crs_discount"),
}
#: Settings whose lever spends the government's fund (their sum is what it commits).
SPENDING_SETTINGS = ("elevation.subsidy_budget_usd", "buyout.annual_budget_usd")

RuleKind = Literal["range", "max_change", "multiple_of", "total_within", "direction"]
#: Rule kinds that are limits of the world: the world refuses a decision that breaks one
#: whatever the profile (as it never executes an action a household may not take).
LIMIT_KINDS = ("range", "max_change", "multiple_of", "total_within")

#: Relative tolerance of the limits: a value within it of a bound counts as on the bound (an
#: LLM writes 1.357 for 1.15 x 1.18, which floating point makes 1.3569999999999998).
TOLERANCE = 1e-9


def close(a: float, b: float) -> bool:
    """Whether two amounts are equal within ``TOLERANCE``.

    A non-finite amount is close only to itself: the tolerance scales with the amounts, so
    without this an infinite sum of budgets would count as "on" any limit and pass it.
    """
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


#: Placeholders a rule's message (feedback) and statement (shown in the prompt) may use.
RULE_PLACEHOLDERS = frozenset({
    "lever", "value", "previous", "min", "max", "max_increase", "max_decrease", "step",
    "total", "limit", "fact", "fact_value",
})


#: The institutions' prompt templates (``institutions.prompts``): key -> placeholders allowed.
INSTITUTION_TEMPLATES: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "reply_format"}),
    "user": frozenset({"year", "facts", "levers", "limits", "in_force"}),
    "fact_line": frozenset({"text", "value"}),
    "lever_line": frozenset({"id", "description", "unit", "value"}),
    "limit_line": frozenset({"text"}),
    "in_force_line": frozenset({"institution", "lever", "value"}),
    "in_force_none": frozenset(),
    "retry_governance": frozenset({"issues"}),
    "retry_issue": frozenset({"rule_id", "message"}),
    "retry_format": frozenset({"error"}),
}
#: Non-template entries of the prompt file: the words for each lever unit, and what the reply
#: format says to write in its text fields (``assessment``, ``reason``).
INSTITUTION_TEMPLATE_EXTRAS = frozenset({"unit_words", "reply_texts"})


class LeverSpec(StrictModel):
    """One lever of an institution.

    Attributes:
        setting: The world setting it sets (``LEVER_SETTINGS``).
        unit: How its values are read and shown (``usd``, ``share``, ``factor``...).
        description: What it is, for the prompt and the documentation.
    """

    setting: str
    unit: Unit
    description: str = Field(min_length=1)


class InstitutionRule(StrictModel):
    """One rule binding an institution's decision.

    Attributes:
        id: Stable identifier (audit, feedback).
        kind: ``range`` (each lever within ``min``..``max``), ``max_change`` (each lever moves
            at most ``max_increase`` up and ``max_decrease`` down from last year; shares of last
            year's value when ``relative``), ``multiple_of`` (each lever a multiple of
            ``step``), ``total_within`` (the levers' sum at most the value of ``fact``),
            ``direction`` (fires when ``fact`` passes ``test`` and the lever moves ``change``).
        levers: Lever ids it applies to.
        severity: Per-profile severity (``ERROR`` blocks and re-asks).
        message: Feedback when it fires; placeholders from ``RULE_PLACEHOLDERS``.
        statement: The limit as the prompt states it (optional; same placeholders, values of
            the situation).
        source: Where the limit comes from.
    """

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    kind: RuleKind
    levers: list[str] = Field(min_length=1)
    severity: RuleSeverity
    message: str = Field(min_length=1)
    statement: str | None = None
    source: str = Field(min_length=1)
    min: float | None = None
    max: float | None = None
    max_increase: float | None = Field(default=None, ge=0.0)
    max_decrease: float | None = Field(default=None, ge=0.0)
    relative: bool = False
    step: float | None = Field(default=None, gt=0.0)
    fact: str | None = None
    test: NumericTest | None = None
    change: Literal["rises", "falls"] | None = None

    @model_validator(mode="after")
    def _kind_fields(self) -> InstitutionRule:
        needs = {
            "range": self.min is not None or self.max is not None,
            "max_change": self.max_increase is not None or self.max_decrease is not None,
            "multiple_of": self.step is not None,
            "total_within": self.fact is not None,
            "direction": (self.fact is not None and self.test is not None
                          and self.change is not None and len(self.levers) == 1),
        }
        if not needs[self.kind]:
            raise ValueError(f"rule {self.id!r}: kind {self.kind!r} needs " + {
                "range": "min and/or max",
                "max_change": "max_increase and/or max_decrease",
                "multiple_of": "step",
                "total_within": "fact (the fact the levers' sum must stay within)",
                "direction": "fact, test and change, and exactly one lever",
            }[self.kind])
        for text in (self.message, self.statement or ""):
            template = string.Template(text)
            if not template.is_valid():
                raise ValueError(f"rule {self.id!r}: not a valid $-template: {text[:60]!r}")
            unknown = set(template.get_identifiers()) - RULE_PLACEHOLDERS
            if unknown:
                raise ValueError(f"rule {self.id!r}: unknown placeholder(s) {sorted(unknown)}; "
                                 f"allowed: {sorted(RULE_PLACEHOLDERS)}")
        return self

    @property
    def is_limit(self) -> bool:
        """Whether the world enforces the rule whatever the profile (``LIMIT_KINDS``)."""
        return self.kind in LIMIT_KINDS

    def bounds(self, previous: float) -> tuple[float, float]:
        """The interval a ``range`` or ``max_change`` rule allows a lever.

        Given the lever's value last year, ``previous``; infinite where unbounded.
        """
        if self.kind == "range":
            return (-math.inf if self.min is None else self.min,
                    math.inf if self.max is None else self.max)
        scale = abs(previous) if self.relative else 1.0
        up = math.inf if self.max_increase is None else previous + self.max_increase * scale
        down = -math.inf if self.max_decrease is None else previous - self.max_decrease * scale
        return down, up

    def allows(self, value: float, previous: float) -> bool:
        """Whether a ``range``.

        ``max_change`` or ``multiple_of`` rule lets one lever take ``value`` after ``previous``
        (True for the other kinds, which look at more than one lever or at facts).
        """
        if self.kind in ("range", "max_change"):
            low, high = self.bounds(previous)
            return (value >= low or close(value, low)) and (value <= high or close(value, high))
        if self.kind == "multiple_of":
            steps = value / self.step
            return close(steps, round(steps))
        return True


class InstitutionDomain(StrictModel):
    """One institution of ``institutions.yaml``.

    Attributes:
        description: Who the institution is, for the prompt.
        facts: The facts its prompt shows, in order, with their wording (fact names of
            ``contracts.institutions.FACTS``).
        levers: Its levers by id, in the order its reply gives them.
        rules: The rules binding it, evaluated in order.
    """

    description: str = Field(min_length=1)
    facts: dict[str, str] = Field(min_length=1)
    levers: dict[str, LeverSpec] = Field(min_length=1)
    rules: list[InstitutionRule] = []


class InstitutionsDomain(StrictModel):
    """The file ``institutions.yaml``: the government and the insurer."""

    government: InstitutionDomain
    insurer: InstitutionDomain

    @model_validator(mode="after")
    def _consistent(self) -> InstitutionsDomain:
        for name in INSTITUTIONS:
            domain: InstitutionDomain = getattr(self, name)
            known = {f.name for f in FACTS[name]}
            unknown = sorted(set(domain.facts) - known)
            if unknown:
                raise ValueError(f"{name}.facts: unknown fact(s) {unknown}; the world gives the "
                                 f"{name} {sorted(known)}")
            settings = [lever.setting for lever in domain.levers.values()]
            for lever_id, lever in domain.levers.items():
                if lever.setting not in LEVER_SETTINGS[name]:
                    raise ValueError(
                        f"{name}.levers.{lever_id}: setting {lever.setting!r} is not one the "
                        f"{name} may set; allowed: {', '.join(LEVER_SETTINGS[name])}")
            if len(set(settings)) != len(settings):
                raise ValueError(f"{name}.levers: two levers set the same setting")
            seen: set[str] = set()
            for rule in domain.rules:
                if rule.id in seen:
                    raise ValueError(f"{name}.rules: duplicate rule id {rule.id!r}")
                seen.add(rule.id)
                missing = [lv for lv in rule.levers if lv not in domain.levers]
                if missing:
                    raise ValueError(f"{name}.rules.{rule.id}: unknown lever(s) {missing}; "
                                     f"levers: {sorted(domain.levers)}")
                if rule.fact is not None and rule.fact not in known:
                    raise ValueError(f"{name}.rules.{rule.id}: unknown fact {rule.fact!r}")
        return self

    def of(self, institution: str) -> InstitutionDomain:
        """The domain of ``institution`` (a name of ``INSTITUTIONS``)."""
        return getattr(self, institution)

    def start_problems(self, values: dict[str, float]) -> list[str]:
        """What the starting values of the levers (by world setting) break.

        The ``range`` and ``multiple_of`` limits (a start has no change and spends nothing yet).
        """
        problems = []
        for name in INSTITUTIONS:
            domain = self.of(name)
            for rule in domain.rules:
                if rule.kind not in ("range", "multiple_of"):
                    continue
                for lever in rule.levers:
                    setting = domain.levers[lever].setting
                    if setting in values and not rule.allows(values[setting], values[setting]):
                        problems.append(f"{setting} = {values[setting]:g} breaks the "
                                        f"{name}'s rule {rule.id} ({rule.kind})")
        return problems


class GovernmentConfig(StrictModel):
    """The government's mitigation fund and who decides for it.

    Each year the fund receives ``appropriation_per_household_usd`` times the households of
    the initial population, plus ``post_disaster_share`` of the disaster aid paid the year
    before (post-disaster mitigation funding); the government commits what it chooses, within
    what is available, to elevation grants and buyouts; what is not spent is carried over.

    Attributes:
        source: Where the numbers come from.
        maker: ``rule`` (the counterfactual: the status-quo grant share, every available
            dollar committed, split by ``buyout_share_of_funds``) or ``llm``.
        initial_balance_usd: The fund at the start (dollars).
        appropriation_per_household_usd: Yearly appropriation per household of the initial
            population (dollars).
        post_disaster_share: Share of last year's disaster aid added to the fund.
        buyout_share_of_funds: The rule maker's share of the available money committed to
            buyouts when there is a buyout programme (the rest to elevation grants).
    """

    source: Source
    maker: Literal["rule", "llm"] = "rule"
    initial_balance_usd: Money = 0.0
    appropriation_per_household_usd: Money
    post_disaster_share: Share
    buyout_share_of_funds: Share = 0.5


class InsurerConfig(StrictModel):
    """The insurer's reserves, its rate-making rule and who decides for it.

    Attributes:
        source: Where the numbers come from.
        maker: ``rule`` (the counterfactual: credibility-weighted experience rating, the
            community discount held) or ``llm``.
        initial_reserves_usd: Reserves at the start (dollars).
        target_loss_ratio: The loss ratio the rule maker's rates aim at.
        experience_years: Years of claims and premiums the experience loss ratio covers.
        full_credibility_claims: Claims over the experience window at which the rule maker
            trusts its experience fully; with n claims it moves the loading by
            ``sqrt(n / full_credibility_claims)`` (at most 1) of the way the experience loss
            ratio indicates, within the domain's limits.
    """

    source: Source
    maker: Literal["rule", "llm"] = "rule"
    initial_reserves_usd: Money = 0.0
    target_loss_ratio: float = Field(gt=0.0, le=10.0)
    experience_years: int = Field(default=10, ge=1, le=100)
    full_credibility_claims: int = Field(default=1082, ge=1, le=10_000_000)


class InstitutionsConfig(StrictModel):
    """Institutions that decide before households each year (absent: policies are settings).

    Attributes:
        domain: The institutions' domain file (levers, facts, rules).
        prompts: The prompt templates of the institutions' LLM makers.
        profile: Which rule severities apply to the institutions' LLM makers (``strict``,
            ``relaxed``, ``disabled``); the world enforces the limits whatever the profile.
        government: The government's fund and maker.
        insurer: The insurer's reserves and maker.
    """

    domain: FilePath = Path("../institutions.yaml")
    prompts: FilePath = Path("../configs/institutions/prompts.yaml")
    profile: Literal["strict", "relaxed", "disabled"] = "strict"
    government: GovernmentConfig
    insurer: InsurerConfig

    @property
    def llm_makers(self) -> tuple[str, ...]:
        """The institutions an LLM decides for."""
        return tuple(n for n in INSTITUTIONS if getattr(self, n).maker == "llm")
