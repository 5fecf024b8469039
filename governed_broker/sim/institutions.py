"""Institutions in the world: the government's mitigation fund and the insurer's book.

Each year, after the flood and its claims and before the households look at their options, the
government and then the insurer decide their levers (``contracts.institutions``): the world
builds each one's frozen situation from what happened, its maker decides, the world checks the
decision against the domain's limits (``sim.institution_rules.limit_violations``, whatever the
maker and profile; a decision that breaks one is replaced by last year's levers brought within
the limits, status ``rejected``) and puts the levers in force as the year's settings
(``elevation.subsidy_share`` and budgets, ``buyout.annual_budget_usd``, ``insurance.loading``
and ``crs_discount``). The insurer sees what the government decided this year (phase order
government -> insurer -> households). After the households' decisions are executed, the
accounts are settled: grants and buyouts paid come out of the government's fund (they never
exceed the budgets: offers are made within them), premiums written and claims paid go through
the insurer's reserves. The premiums include those the aid programme pays for its insurance
certificates (``finance.aid.group_policy``), earned over each certificate's term, and the aid
paid includes them.

The fund receives each year ``appropriation_per_household_usd`` x the initial population and
``post_disaster_share`` of the disaster aid paid the year before (post-disaster mitigation
funding); what is not spent is carried over. The insurer's loss ratio of year t is the claims
paid in year t over the premiums written in year t - 1 (the premiums that bought that year's
cover); cover bought before the run has no premium in the run, so year 1 has no loss ratio.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, cast

import mesa
import numpy as np

from governed_broker.config.base import ConfigError
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.institutions import (
    INSTITUTIONS,
    LEVER_SETTINGS,
    GovernmentConfig,
    InstitutionDomain,
    InstitutionsConfig,
    InstitutionsDomain,
    InsurerConfig,
)
from governed_broker.config.registry import load_registered
from governed_broker.contracts.institutions import (
    InstitutionDecision,
    InstitutionMaker,
    InstitutionSituation,
    audit_levers,
    lever_value,
)
from governed_broker.sim.institution_makers import RuleGovernment, RuleInsurer
from governed_broker.sim.institution_rules import limit_violations, within_limits
from governed_broker.sim.instruments.base import Access, Instrument, World
from governed_broker.sim.instruments.buyouts import Buyouts
from governed_broker.sim.instruments.certificates import AidCertificates
from governed_broker.sim.quote import expected_payouts_usd


class FloodModel(World, Protocol):
    """What institutions read of the world (``sim.model.FloodModel`` satisfies it)."""

    n: int

    def instrument(self, name: str) -> Instrument:
        """The instrument registered as ``name``."""
        ...


def setting_value(config: ExperimentConfig, setting: str) -> float | None:
    """The value of a dotted setting (None: its section is absent or the value is unset)."""
    node: Any = config
    for part in setting.split("."):
        node = getattr(node, part, None)
        if node is None:
            return None
    return float(node)


def _present(config: ExperimentConfig, setting: str) -> bool:
    """Whether the section a setting belongs to exists this year (a buyout programme may not)."""
    return getattr(config, setting.split(".")[0]) is not None


class InstitutionAgent(mesa.Agent):
    """An institution of the world: its levers in force, its maker, its books.

    A registered institution (``config.institutions.INSTITUTIONS``) subclasses this with its
    ``name``, its ``rule_maker`` (the class built as ``rule_maker(config, domain)`` when its
    section says ``maker: rule``) and its hooks: ``open_year`` (before anyone decides),
    ``facts`` (its ``contracts.institutions.FACTS``), ``settle`` (after the households'
    decisions are executed), ``columns`` (its part of a row of ``institutions_yearly.csv``),
    ``state`` and ``restore`` (checkpoints).

    Args:
        model: The world.
        config: Its section of the experiment's ``institutions:``.
        domain: Its levers and rules.
        maker: Who decides for it.
    """

    #: Its name in ``config.institutions.INSTITUTIONS`` (and ``contracts.institutions.FACTS``).
    name: ClassVar[str] = ""
    #: The rule-based maker's class.
    rule_maker: ClassVar[Callable[[Any, InstitutionDomain], InstitutionMaker]]

    def __init__(self, model: FloodModel, config: Any, domain: InstitutionDomain,
                 maker: InstitutionMaker) -> None:
        super().__init__(model)
        self.config = config
        self.domain = domain
        self.maker = maker
        #: The levers in force (last year's, until this year's decision), by lever id.
        self.levers: dict[str, float] = {}
        #: This year's maker and the status of its decision (``rejected`` when the world
        #: refused it).
        self.decided: tuple[str, str] = ("", "")

    def levers_now(self, config: ExperimentConfig) -> dict[str, float]:
        """Last year's levers, for every lever the institution has this year.

        A lever whose section starts this year starts at the experiment's value, 0 when unset.
        """
        return {lever_id: self.levers.get(lever_id, setting_value(config, spec.setting) or 0.0)
                for lever_id, spec in self.domain.levers.items()
                if _present(config, spec.setting)}

    def settings(self) -> dict[str, float]:
        """The levers in force as world settings."""
        return {self.domain.levers[k].setting: v for k, v in self.levers.items()}

    def open_year(self, config: ExperimentConfig) -> None:
        """The year starts with ``config`` in force, before any institution decides."""

    def facts(self) -> dict[str, float | int | None]:  # pragma: no cover - abstract
        """What it observes this year (``contracts.institutions.FACTS[name]``)."""
        raise NotImplementedError

    def settle(self) -> None:
        """After the households' decisions: what this year paid and earned."""

    def columns(self, facts: Mapping[str, Any]) -> dict[str, Any]:
        """Its columns of this year's row of ``institutions_yearly.csv``.

        ``facts``: what it observed this year.
        """
        return {}

    def base_state(self) -> dict[str, Any]:
        """The levers in force (for checkpoints)."""
        return {"levers": dict(self.levers)}


class GovernmentAgent(InstitutionAgent):
    """The government's mitigation fund (module documentation); ``config``: its section."""

    name = "government"
    rule_maker = RuleGovernment

    def __init__(self, model: FloodModel, config: GovernmentConfig, domain: InstitutionDomain,
                 maker: InstitutionMaker) -> None:
        super().__init__(model, config, domain, maker)
        self.balance_usd = float(config.initial_balance_usd)
        self.last_aid_usd = 0.0
        self.last_grants = (0, 0.0)
        self.last_buyouts = (0, 0.0)
        self.funds: dict[str, float] = {}
        self.paid: dict[str, float] = {}

    def open_year(self, config: ExperimentConfig) -> None:
        """This year's money: the balance carried over, the appropriation.

        Post-disaster funds from last year's aid.
        """
        gov = config.institutions.government
        appropriation = gov.appropriation_per_household_usd * self.model.n
        post = gov.post_disaster_share * self.last_aid_usd
        self.funds = {"balance_usd": self.balance_usd, "appropriation_usd": appropriation,
                      "post_disaster_funds_usd": post,
                      "funds_available_usd": self.balance_usd + appropriation + post}

    def facts(self) -> dict[str, float | int | None]:
        """The government's facts (``contracts.institutions.GOVERNMENT_FACTS``)."""
        m = self.model
        c, hh, idx = m.current, m.hh, m.current.idx
        owner_here = hh.is_owner[idx]
        buyouts = cast(Buyouts, m.instrument("buyouts"))
        eligible, price = buyouts.candidates(Access(m))
        return {
            **self.funds,
            "households_active": len(idx),
            "households_flooded": int(c.flooded.sum()),
            "damage_usd": float(c.damage_usd.sum()),
            "aid_usd": float(c.repairs.aid_usd.sum()),
            "unrepaired_damage_usd": float(hh.unrepaired_usd[idx].sum()),
            "share_elevated": _mean(c.elevated_before),
            "share_insured": _mean(c.insured_before),
            "owners_may_elevate": int((owner_here & ~c.elevated_before).sum()),
            "elevation_cost_usd": float(m.config.elevation.cost_usd),
            "buyout_eligible": int(eligible.sum()),
            "buyout_eligible_value_usd": float(price[eligible].sum()),
            "grants_paid_last_year": self.last_grants[0],
            "grants_paid_last_year_usd": self.last_grants[1],
            "buyouts_last_year": self.last_buyouts[0],
            "buyouts_last_year_usd": self.last_buyouts[1],
        }

    def settle(self) -> None:
        """Grants and buyouts paid this year come out of the fund.

        This year's aid sets next year's post-disaster funds.
        """
        c = self.model.current
        grants = (int((c.subsidy_usd > 0).sum()), float(c.subsidy_usd.sum()))
        buyouts = (int((c.buyout_usd > 0).sum()), float(c.buyout_usd.sum()))
        self.paid = {"grants_offered": int(c.subsidy_offered.sum()), "grants_paid": grants[0],
                     "grants_paid_usd": grants[1],
                     "buyouts_offered": int(c.buyout_offered.sum()),
                     "buyouts_accepted": buyouts[0], "buyouts_paid_usd": buyouts[1]}
        self.balance_usd = self.funds["funds_available_usd"] - grants[1] - buyouts[1]
        self.last_grants, self.last_buyouts = grants, buyouts
        # the aid programme also paid the premiums of the certificates it gave (FEMA's Other
        # Needs Assistance pays them from the same programme)
        self.last_aid_usd = float(c.repairs.aid_usd.sum() + c.certificate_premium_usd.sum())

    def columns(self, facts: Mapping[str, Any]) -> dict[str, Any]:
        """The fund's money this year, what it paid, and its balance at the end."""
        return {**{k: self.funds[k] for k in ("funds_available_usd", "appropriation_usd",
                                              "post_disaster_funds_usd")},
                **self.paid, "balance_end_usd": self.balance_usd}

    def state(self) -> dict[str, Any]:
        """Everything that carries from one year to the next (checkpoints)."""
        return {**self.base_state(), "balance_usd": self.balance_usd,
                "last_aid_usd": self.last_aid_usd, "last_grants": list(self.last_grants),
                "last_buyouts": list(self.last_buyouts)}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Undo ``state()``."""
        self.levers = dict(state["levers"])
        self.balance_usd = state["balance_usd"]
        self.last_aid_usd = state["last_aid_usd"]
        self.last_grants = tuple(state["last_grants"])
        self.last_buyouts = tuple(state["last_buyouts"])


class InsurerAgent(InstitutionAgent):
    """The insurer's book (module documentation); ``config``: its section."""

    name = "insurer"
    rule_maker = RuleInsurer

    def __init__(self, model: FloodModel, config: InsurerConfig, domain: InstitutionDomain,
                 maker: InstitutionMaker) -> None:
        super().__init__(model, config, domain, maker)
        self.reserves_usd = float(config.initial_reserves_usd)
        self.premiums_last_year_usd = 0.0
        #: Completed policy years with premiums written in the run: [claims, premiums, claims n].
        self.history: list[list[float]] = []
        self.year_claims: tuple[float, int] = (0.0, 0)
        self.written: dict[str, float] = {}

    def _window(self) -> list[list[float]]:
        """The experience window at decision time.

        This year's claims on last year's premiums (when they were written in the run) and the
        completed years before it.
        """
        claims, count = self.year_claims
        current = [[claims, self.premiums_last_year_usd, count]]
        years = self.history + (current if self.premiums_last_year_usd > 0 else [])
        return years[-self.config.experience_years:]

    def facts(self) -> dict[str, float | int | None]:
        """The insurer's facts (``contracts.institutions.INSURER_FACTS``)."""
        m = self.model
        c = m.current
        self.year_claims = (float(c.payout_usd.sum()), int((c.payout_usd > 0).sum()))
        window = self._window()
        premiums = sum(w[1] for w in window)
        last = self.premiums_last_year_usd
        insured = c.insured_before
        return {
            "policies_in_force": int(insured.sum()),
            "share_insured": _mean(insured),
            "claims_usd": self.year_claims[0],
            "premiums_last_year_usd": last,
            "loss_ratio": self.year_claims[0] / last if last > 0 else None,
            "experience_loss_ratio": sum(w[0] for w in window) / premiums if premiums > 0
            else None,
            "experience_years": len(window),
            "experience_claims": int(sum(w[2] for w in window)),
            "expected_claims_usd": float(expected_payouts_usd(m)[insured].sum()),
            "reserves_usd": self.reserves_usd,
        }

    def settle(self) -> None:
        """Premiums written this year and this year's claims go through the reserves."""
        c = self.model.current
        premiums = float(c.premium_usd.sum()) + self._certificate_premiums()
        claims, count = self.year_claims
        if self.premiums_last_year_usd > 0:
            self.history = (self.history + [[claims, self.premiums_last_year_usd, count]])[
                -self.config.experience_years:]
        self.written = {"premiums_written_usd": premiums,
                        "policies_written": int((c.premium_usd > 0).sum())}
        self.reserves_usd += premiums - claims
        self.premiums_last_year_usd = premiums

    def _certificate_premiums(self) -> float:
        """The aid programme's premiums for next year's cover by aid certificates.

        ``AidCertificates.premiums_earned_usd``.
        """
        certificates = cast(AidCertificates, self.model.instrument("aid_certificates"))
        return certificates.premiums_earned_usd()

    def columns(self, facts: Mapping[str, Any]) -> dict[str, Any]:
        """Policies, claims and premiums this year, its loss ratios, and its reserves."""
        return {"policies_in_force": facts["policies_in_force"],
                "claims_usd": facts["claims_usd"], "n_claims": self.year_claims[1],
                **self.written, "loss_ratio": _blank(facts["loss_ratio"]),
                "experience_loss_ratio": _blank(facts["experience_loss_ratio"]),
                "reserves_end_usd": self.reserves_usd}

    def state(self) -> dict[str, Any]:
        """Everything that carries from one year to the next (checkpoints)."""
        return {**self.base_state(), "reserves_usd": self.reserves_usd,
                "premiums_last_year_usd": self.premiums_last_year_usd,
                "history": [list(h) for h in self.history]}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Undo ``state()``."""
        self.levers = dict(state["levers"])
        self.reserves_usd = state["reserves_usd"]
        self.premiums_last_year_usd = state["premiums_last_year_usd"]
        self.history = [list(h) for h in state["history"]]


def _lever_problems(situation: InstitutionSituation, levers: Mapping[str, object]) -> list[str]:
    """Why a decision's levers cannot be checked against the limits.

    A lever missing or unknown, or a value that is not a finite number (``lever_value``).
    """
    if set(levers) != set(situation.levers):
        return [f"levers {sorted(map(str, levers))} are not {sorted(situation.levers)}"]
    problems = []
    for lever, value in levers.items():
        try:
            lever_value(lever, value)
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def _setting_problems(agent: InstitutionAgent, config: ExperimentConfig,
                      levers: Mapping[str, float]) -> list[str]:
    """The bounds of the world settings the levers would break.

    For example a budget above what a setting holds (``config.world.MAX_USD``): the domain's
    rules are data and need not repeat them, and a year must never fail on putting a decision
    in force.
    """
    settings = {agent.domain.levers[k].setting: v for k, v in levers.items()}
    try:
        config.with_settings(settings)
    except ValueError as exc:
        problem = str(exc).removeprefix("policy_change.settings: ")
        return [f"the world settings refuse these levers: {problem}"]
    return []


def _mean(mask: np.ndarray) -> float:
    return float(np.mean(mask)) if len(mask) else 0.0


def institution_class(name: str) -> type[InstitutionAgent]:
    """The institution registered as ``name`` in ``INSTITUTIONS``, imported now."""
    return load_registered(INSTITUTIONS, name, kind="institution", setting="institutions",
                           registry_name="INSTITUTIONS")


def rule_makers(config: InstitutionsConfig,
                domain: InstitutionsDomain) -> dict[str, InstitutionMaker]:
    """The rule-based makers of the institutions a rule decides for."""
    makers: dict[str, InstitutionMaker] = {}
    for name in INSTITUTIONS:
        section = getattr(config, name)
        if section.maker == "rule":
            makers[name] = institution_class(name).rule_maker(section, domain.of(name))
    return makers


class Institutions:
    """The institutions of a world and their yearly phases (module documentation).

    Args:
        model: The world (households are created before the institutions, so that their ids
            stay 1..N).
        domain: The institutions' domain.
        makers: A maker for each institution an LLM decides for (``broker.institutions``);
            the others get their rule maker.

    Raises:
        ConfigError: an institution is decided by ``llm`` and no maker was given for it
            (its starting levers were checked against the limits at load).
    """

    def __init__(self, model: FloodModel, domain: InstitutionsDomain,
                 makers: Mapping[str, InstitutionMaker] | None = None) -> None:
        config = model.config.institutions
        assert config is not None
        makers = {**rule_makers(config, domain), **dict(makers or {})}
        missing = [n for n in INSTITUTIONS if n not in makers]
        if missing:
            raise ConfigError(f"institutions {missing} are decided by 'llm' but no LLM maker "
                              "was built for them")
        self.model = model
        #: The institutions in decision order (``INSTITUTIONS``).
        self.agents: tuple[InstitutionAgent, ...] = tuple(
            institution_class(n)(model, getattr(config, n), domain.of(n), makers[n])
            for n in INSTITUTIONS)
        self.records: list[dict[str, Any]] = []

    def decide(self, config: ExperimentConfig) -> dict[str, float]:
        """This year's decisions, in order: the settings to put in force."""
        for agent in self.agents:
            agent.open_year(config)
        self.records = []
        in_force: dict[str, dict[str, float]] = {}
        settings: dict[str, float] = {}
        for order, agent in enumerate(self.agents, start=1):
            situation = InstitutionSituation(agent.name, self.model.year, agent.facts(),
                                             agent.levers_now(config), dict(in_force))
            decision = agent.maker.decide(situation)
            levers, backstop = self._checked(agent, situation, decision, config)
            record = _record(order, situation, decision, levers, backstop)
            agent.levers, agent.decided = levers, (decision.decision_maker, record["status"])
            in_force[agent.name] = dict(levers)
            settings.update(agent.settings())
            self.records.append(record)
        return settings

    @staticmethod
    def _checked(agent: InstitutionAgent, situation: InstitutionSituation,
                 decision: InstitutionDecision, config: ExperimentConfig,
                 ) -> tuple[dict[str, float], list[str] | None]:
        """The levers the world puts in force, and the messages of what the decision broke.

        The decision's levers, or last year's within the limits (the recorded fallback) when
        the decision lacks a lever, holds a value that is not a finite number
        (``lever_value``), breaks a limit of the domain or a bound of the setting it sets.
        """
        problems = _lever_problems(situation, decision.levers)
        levers = {} if problems else {k: lever_value(k, v) for k, v in decision.levers.items()}
        if not problems:
            problems = [b.message for b in limit_violations(agent.domain, situation, levers)]
        if not problems:
            problems = _setting_problems(agent, config, levers)
        if not problems:
            return levers, None
        return within_limits(agent.domain, situation, situation.levers), problems

    def settle(self) -> None:
        """After execution: the fund pays grants and buyouts.

        The reserves take premiums and claims.
        """
        for agent in self.agents:
            agent.settle()

    def row(self) -> dict[str, Any]:
        """This year's row of ``institutions_yearly.csv`` (``contracts.columns``)."""
        settings = {k: v for agent in self.agents for k, v in agent.settings().items()}
        facts = {r["institution"]: r["facts"] for r in self.records}
        row: dict[str, Any] = {"year": self.model.year}
        for agent in self.agents:
            row[f"{agent.name}_maker"], row[f"{agent.name}_status"] = agent.decided
        for setting in (s for name in INSTITUTIONS for s in LEVER_SETTINGS[name]):
            row[setting_column(setting)] = settings.get(setting, "")
        for agent in self.agents:
            row.update(agent.columns(facts[agent.name]))
        return row

    def state(self) -> dict[str, Any]:
        """JSON-able state of every institution (checkpoints)."""
        return {a.name: a.state() for a in self.agents}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Undo ``state()``."""
        for agent in self.agents:
            agent.restore(state[agent.name])

    def provenance(self) -> dict[str, Any]:
        """Who decided for each institution, for the manifest."""
        return {a.name: {"decision_maker": a.maker.name, "llm": a.maker.provenance()}
                for a in self.agents}

    def close(self) -> None:
        """Release the makers."""
        for agent in self.agents:
            agent.maker.close()


def setting_column(setting: str) -> str:
    """The ``institutions_yearly.csv`` column of a lever's setting.

    Its last part, with the programme's name for budgets: ``subsidy_share``, ``buyout_budget_usd``.
    """
    section, name = setting.split(".")[0], setting.split(".")[-1]
    return f"{section}_budget_usd" if name == "annual_budget_usd" else name


def _blank(value: float | None) -> float | str:
    return "" if value is None else value


def _record(order: int, situation: InstitutionSituation, decision: InstitutionDecision,
            levers: Mapping[str, float], backstop: list[str] | None) -> dict[str, Any]:
    """One decision's record for ``institutions.jsonl``."""
    status = decision.status if backstop is None else "rejected"
    return {
        "year": situation.year, "order": order, "institution": situation.institution,
        "decision_maker": decision.decision_maker, "status": status,
        "facts": dict(situation.facts), "in_force_before": dict(situation.in_force),
        "levers_before": dict(situation.levers),
        "proposed": None if decision.proposed is None else audit_levers(decision.proposed),
        "levers": dict(levers), "fallback": status in ("rejected", "parse_failed"),
        "backstop": backstop, "retries": decision.retries, "reason": decision.reason,
        **decision.audit,
    }

