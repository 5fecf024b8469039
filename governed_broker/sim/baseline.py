"""The rule-based PMT / expected-utility baseline decision maker (the non-LLM counterfactual).

For each household (vectorised over the batch; docs/decisions.md "Baseline decision maker"):

1. Risk perception (DYNAMO/GEB): ``beta = beta_max * beta_base**(beta_coef * t) + beta_min``
   with ``t`` the years since the last flood (never flooded: ``beta = beta_min``); perceived
   probability ``p = min(max_perceived_probability, flood_probability * beta * d)`` with ``d``
   the household's fixed perception factor, lognormal with median 1 and ``perception_sigma``
   (people misjudge flood losses widely: only 9 % of NYC floodplain residents estimated their
   damage within 25 % of the experts' figure).
2. Threat appraisal: ``threat = 1 - exp(-p * L0 / (threat_income_scale * income))`` with
   ``L0`` the loss of a typical flood if the household does nothing.
3. Coping appraisal (self-efficacy: can it do something?): the largest, over the protective
   actions it may take, of ``min(1, room / out-of-pocket cost)``, with ``room`` what the
   household can spend on protection this year (the world's ``spending_room_usd``: its
   protection budget from income plus the savings it can spare).
4. Value of each allowed, affordable action ``a`` over one year, with ``C_a`` the annualised
   cost (the premium, plus one-off costs times the annuity factor ``r / (1 - (1 + r)**-T)``)
   and ``L_a`` the out-of-pocket loss of a typical flood with the action's protection in place:
   ``utility: expected`` (default), expected log utility
   ``EU_a = p ln(W - C_a - L_a) + (1 - p) ln(W - C_a)``, ``W`` = income + savings + structure
   and contents value - debt; ``utility: prospect``, cumulative prospect theory with the
   household's current wealth as reference point, ``V_a = -(w(p) (C_a + L_a)**beta +
   (1 - w(p)) C_a**beta)``, ``w`` overweighting small chances (``config.world.ProspectParams``).
   "EU" below is whichever value the experiment uses.
5. PMT gate: a household takes a new measure only when ``threat >= threat_min`` and
   ``coping >= coping_min``; relocation only when ``threat >= relocation_threat_min``. It picks
   the best EU action; a new measure (anything but the default or renewing a policy in force)
   is implemented this year with probability ``implementation_probability`` (motivation-to-
   action delay). A household that takes no new measure (unmotivated or delayed) renews its
   policy in force when that beats doing nothing (habit), and otherwise lets it lapse.
6. Inertia: a household with a policy in force weighs renewing it only in a year it reviews
   its cover, with probability ``renewal_review_probability`` (1: every year); in the other
   years, where its choice is to do nothing, it renews instead (status-quo bias: Samuelson &
   Zeckhauser 1988; no measurement of the chance was found: docs/decisions.md).

Scores are mapped to labels by ``agent_types.yaml`` ``pmt_labels``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.world import BaselineParams
from governed_broker.contracts.decision import Decision, HouseholdSituation, ReflectionTarget
from governed_broker.contracts.effects import traits_of
from governed_broker.seeding import child_rng
from governed_broker.sim.fastbuild import build


class BaselineDecisionMaker:
    """PMT-gated expected-utility household rule with post-flood risk-perception decay.

    Args:
        params: The experiment's ``decision.baseline`` section.
        agent_types: Actions and PMT labels.
        seed: Experiment seed (implementation draws use ``child_rng(seed, "baseline", year)``).
    """

    name = "baseline"

    def __init__(self, params: BaselineParams, agent_types: AgentTypesConfig, seed: int) -> None:
        self.params = params
        self.agent_types = agent_types
        self.seed = int(seed)
        self.actions = list(agent_types.actions)
        traits = [traits_of(agent_types.actions[a].effect) for a in self.actions]
        self.protective = np.array([t.protective for t in traits])
        self.one_off = np.array([t.one_off for t in traits])
        self.leaves = np.array([t.leaves for t in traits])
        self.insures = np.array([t.insures for t in traits])
        # renewing a policy is an insuring action that changes nothing else
        self.renews = self.insures & ~self.one_off & ~self.leaves
        self.default = self.actions.index(agent_types.default_action)
        r, horizon = params.discount_rate, params.horizon_years
        self.annuity = 1.0 / horizon if r == 0 else r / (1.0 - (1.0 + r) ** -horizon)
        self._disposition: dict[int, float] = {}

    def disposition(self, agent_ids: Sequence[int]) -> np.ndarray:
        """Each household's fixed perception factor.

        ``exp(perception_sigma * z)`` with one standard normal ``z`` per household from
        ``child_rng(seed, "baseline", "perception", agent_id)`` (the same every year and after a
        resume).
        """
        missing = [a for a in agent_ids if a not in self._disposition]
        for agent_id in missing:
            z = child_rng(self.seed, "baseline", "perception", agent_id).standard_normal()
            self._disposition[agent_id] = float(np.exp(self.params.perception_sigma * z))
        return np.array([self._disposition[a] for a in agent_ids])

    def initial_policy_scores(self, agent_ids: Sequence[int]) -> np.ndarray | None:
        """Each household's perception factor, when policies start with the most worried.

        ``initial_policies: by_perception`` (``contracts.decision.RanksInitialPolicyholders``);
        None (as drawn) otherwise.
        """
        if self.params.initial_policies != "by_perception":
            return None
        return self.disposition(agent_ids)

    def perceived_probability(
        self, flood_probability: np.ndarray, years_since_flood: np.ndarray,
        disposition: np.ndarray | float = 1.0,
    ) -> np.ndarray:
        """DYNAMO/GEB perceived annual flood probability (NaN years: never flooded).

        Times the household's perception factor.
        """
        p = self.params
        beta = np.where(
            np.isnan(years_since_flood),
            p.beta_min,
            p.beta_max * p.beta_base ** (p.beta_coef * np.nan_to_num(years_since_flood))
            + p.beta_min,
        )
        return np.minimum(p.max_perceived_probability, flood_probability * beta * disposition)

    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        """One decision per situation, in order (see the module docstring for the rule)."""
        if not situations:
            return []
        n, acts = len(situations), self.actions
        income = np.fromiter((s.income_usd for s in situations), float, n)
        savings = np.fromiter((s.savings_usd for s in situations), float, n)
        wealth = income + np.maximum(savings, 0.0) + np.fromiter(
            (s.structure_value_usd + s.contents_value_usd - s.debt_usd for s in situations),
            float, n)
        prob = np.fromiter((s.flood_probability for s in situations), float, n)
        ysf = np.fromiter((np.nan if s.years_since_flood is None else s.years_since_flood
                           for s in situations), float, n)
        insured = np.fromiter((s.insured for s in situations), bool, n)
        pick = operator.itemgetter(*acts)
        cost = np.array([pick(s.action_costs_usd) for s in situations], dtype=float)
        loss = np.array([pick(s.facts.loss_if_flood_usd) for s in situations], dtype=float)
        premium = np.array([pick(s.facts.premium_usd) for s in situations], dtype=float)
        affordable = np.array([pick(s.affordable) for s in situations], dtype=bool)
        allowed = np.array([[a in s.allowed_actions for a in acts] for s in situations],
                           dtype=bool)
        ok = affordable & allowed

        p_perc = self.perceived_probability(prob, ysf,
                                            self.disposition([s.agent_id for s in situations]))
        threat = 1.0 - np.exp(-p_perc * loss[:, self.default]
                              / (self.params.threat_income_scale * np.maximum(income, 1.0)))
        room = np.fromiter((s.facts.spending_room_usd for s in situations), float, n)
        coping = self._coping(cost, room, allowed)
        choice = self._choose(cost, premium, loss, ok, wealth, p_perc, threat, coping, insured,
                              situations[0].year)
        return self._decisions(situations, choice, threat, coping)

    def _coping(self, cost: np.ndarray, room: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        protective = allowed & self.protective[None, :]
        ratio = np.minimum(1.0, np.maximum(room, 0.0)[:, None] / np.maximum(cost, 1e-9))
        ratio = np.where(cost <= 0, 1.0, ratio)
        return np.where(protective, ratio, 0.0).max(axis=1, initial=0.0)

    def _choose(self, cost, premium, loss, ok, wealth, p_perc, threat, coping, insured,
                year) -> np.ndarray:
        prm = self.params
        # a premium recurs every year the policy is held; a one-off cost is annualised
        once = cost - premium
        annual_cost = premium + np.where(self.one_off[None, :], once * self.annuity, once)
        eu = self._value(annual_cost, loss, wealth, p_perc)
        candidates = ok.copy()
        candidates[:, self.default] = True
        candidates &= ~self.leaves[None, :] | (threat >= prm.relocation_threat_min)[:, None]
        best = np.argmax(np.where(candidates, eu, -np.inf), axis=1)
        # Without a new measure (unmotivated, or delayed) a household renews a policy in force
        # when that beats doing nothing (habit: the PMT gate governs new measures).
        keep = candidates & ((np.arange(len(self.actions)) == self.default)[None, :]
                             | (self.renews[None, :] & insured[:, None]))
        fallback = np.argmax(np.where(keep, eu, -np.inf), axis=1)
        motivated = (threat >= prm.threat_min) & (coping >= prm.coping_min)
        best = np.where(motivated, best, fallback)
        renewal = self.renews[best] & insured
        new_measure = (best != self.default) & ~renewal
        rng = child_rng(self.seed, "baseline", year)
        go = rng.random(len(best)) < prm.implementation_probability
        self._delayed = new_measure & ~go
        choice = np.where(self._delayed, fallback, best)
        return self._inertia(choice, candidates, eu, insured, year)

    def _inertia(self, choice, candidates, eu, insured, year) -> np.ndarray:
        """Renewal by default where a household with a policy does not review it this year."""
        q = self.params.renewal_review_probability
        if q >= 1.0:
            return choice  # no draw: runs of the rule as before stay byte-identical
        review = child_rng(self.seed, "baseline", "review", year).random(len(choice)) < q
        renewal = np.where(candidates & self.renews[None, :] & insured[:, None], eu, -np.inf)
        can_renew = np.isfinite(renewal.max(axis=1, initial=-np.inf))
        stays = ~review & (choice == self.default) & can_renew
        return np.where(stays, np.argmax(renewal, axis=1), choice)

    def _value(self, annual_cost: np.ndarray, loss: np.ndarray, wealth: np.ndarray,
               p_perc: np.ndarray) -> np.ndarray:
        """Each action's value (households x actions) under ``params.utility``.

        The expected log utility of wealth, or the prospect value of the action's losses
        (``config.world.ProspectParams``).
        """
        p = p_perc[:, None]
        if self.params.utility == "prospect":
            pt = self.params.prospect
            beta, g = pt.loss_curvature, pt.probability_weighting
            weight = p**g / (p**g + (1.0 - p) ** g) ** (1.0 / g)
            # costs and losses are >= 0 by construction; a negative one would make a NaN
            cost, worst = np.maximum(annual_cost, 0.0), np.maximum(annual_cost + loss, 0.0)
            return -(weight * worst**beta + (1.0 - weight) * cost**beta)
        w = wealth[:, None]
        return (p * np.log(np.maximum(w - annual_cost - loss, 1.0))
                + (1.0 - p) * np.log(np.maximum(w - annual_cost, 1.0)))

    def _decisions(self, situations, choice, threat, coping) -> list[Decision]:
        labels = self.agent_types.pmt_labels
        t_lab, c_lab = labels.label_array(threat).tolist(), labels.label_array(coping).tolist()
        t_list, c_list = np.round(threat, 6).tolist(), np.round(coping, 6).tolist()
        delayed = self._delayed.tolist()
        names = [self.actions[k] for k in choice.tolist()]
        out = []
        for j, s in enumerate(situations):
            reason = "motivated, measure delayed this year" if delayed[j] else (
                f"threat {t_lab[j]}, coping {c_lab[j]}")
            out.append(build(Decision, {
                "agent_id": s.agent_id, "proposed_action": names[j], "action": names[j],
                "status": "baseline", "threat_label": t_lab[j], "coping_label": c_lab[j],
                "retries": 0, "reason": reason, "decision_maker": "baseline",
                "audit": {"threat_score": t_list[j], "coping_score": c_list[j]},
            }))
        return out

    def end_year(self, year: int, households: Sequence[ReflectionTarget]) -> None:
        """Nothing to consolidate: the rule is memoryless beyond the world's state."""

    def provenance(self) -> None:
        """Nothing beyond the name: the rule and its parameters are in the resolved config."""
        return None

    def close(self) -> None:
        """No resources to release."""
