"""Cohort mode: one set of governed conversations per cohort of alike households.

For populations too large to ask one by one (``cohort.enabled``; docs/running.md, "Cohort
mode"). Each year the households are grouped by ``cohort_key``: the categorical facts of their
situation (tenure, zone, flooded, insured, elevated, allowed actions and whether each is
affordable) and the bin of every numeric field named in ``cohort.bins``. For each cohort the
representative (its first household, the lowest agent id) goes through ``min(samples, size)``
full governed conversations, each with its own seeds (seed, "cohort", agent, year, sample,
attempt). Every member then draws one of them with its own seeded draw
(``child_seed(seed, "cohort-draw", agent, year) % samples``) and takes its outcome; an approved
action the member cannot take or afford is refused for it and the fallback executed, as in a
full run. Each member's ``decisions.jsonl`` record is the drawn conversation's record with the
member's own situation, outcome and a ``cohort`` entry; ``cohorts.jsonl`` records each cohort
once a year (key, size, members, the samples' outcomes, how often each was drawn).

Reflection, when on, is asked once per cohort (its representative's memories of the year) and
its insights are stored in every member still active. The error this makes is measured by
``governed-broker cohort-check``, never assumed.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from governed_broker import progress
from governed_broker.broker.governed import GovernedBroker, state_before
from governed_broker.config.cohort import CohortConfig
from governed_broker.contracts.decision import Decision, HouseholdSituation, ReflectionTarget
from governed_broker.contracts.jsonl import JsonlWriter
from governed_broker.seeding import child_seed

#: Facts of a situation that always split cohorts.
CATEGORICAL = ("tenure", "flood_zone", "flooded", "insured", "elevated")


def _value(situation: HouseholdSituation, field: str) -> Any:
    if field.startswith("neighbour_shares."):
        return situation.neighbour_shares.get(field.partition(".")[2], 0.0)
    return getattr(situation, field)


def cohort_key(situation: HouseholdSituation, bins: dict[str, list[float]]) -> tuple[Any, ...]:
    """The cohort a household belongs to this year (equal keys: one cohort)."""
    parts: list[Any] = [getattr(situation, f) for f in CATEGORICAL]
    parts.append(situation.allowed_actions)
    parts.append(tuple(bool(situation.affordable.get(a, True))
                       for a in situation.allowed_actions))
    for field, edges in bins.items():
        value = _value(situation, field)
        parts.append(None if value is None else bisect_right(edges, value))
    return tuple(parts)


def describe_key(key: tuple[Any, ...], bins: dict[str, list[float]]) -> dict[str, Any]:
    """A cohort key in words, for ``cohorts.jsonl``: facts, and each bin as ``[low, high)``."""
    out: dict[str, Any] = dict(zip(CATEGORICAL, key, strict=False))
    allowed, affordable = key[len(CATEGORICAL)], key[len(CATEGORICAL) + 1]
    out["allowed_actions"] = list(allowed)
    out["affordable"] = dict(zip(allowed, affordable, strict=True))
    for (field, edges), index in zip(bins.items(), key[len(CATEGORICAL) + 2:], strict=True):
        if index is None:
            out[field] = None
        else:
            low = edges[index - 1] if index > 0 else None
            high = edges[index] if index < len(edges) else None
            out[field] = [low, high]
    return out


class CohortBroker(GovernedBroker):
    """The governed broker deciding by cohort (see the module documentation).

    Args:
        *args: ``GovernedBroker``'s arguments.
        cohort: The ``cohort:`` settings.
        cohort_log_path: Where to stream ``cohorts.jsonl`` (None: not written).
        **kwargs: ``GovernedBroker``'s keyword arguments.
    """

    def __init__(self, *args: Any, cohort: CohortConfig, cohort_log_path: Path | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cohort = cohort
        self.name = f"{self.name} cohort k={cohort.samples}"
        self._cohort_log = JsonlWriter(cohort_log_path) if cohort_log_path is not None else None
        self._cohort_of: dict[int, int] = {}  # agent id -> cohort of this year's decisions
        self.stats = {"cohort_years": 0, "household_years": 0, "conversations": 0,
                      "largest": 0, "singletons": 0}

    # -- DecisionMaker API ------------------------------------------------------------------
    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        """Decide for every household of one year by cohort; results in input order."""
        cohorts = self._group(situations)
        samples = self._loop.run(self._asample(situations, cohorts))
        self.backend.flush()
        decisions: list[Decision | None] = [None] * len(situations)
        records = []
        self._cohort_of = {}
        for number, (key, members) in enumerate(cohorts):
            drawn = [0] * len(samples[number])
            for index in members:
                situation = situations[index]
                pick = child_seed(self.seed, "cohort-draw", situation.agent_id,
                                  situation.year) % len(samples[number])
                drawn[pick] += 1
                info = {"id": number, "size": len(members), "samples": len(samples[number]),
                        "sample": pick, "representative": situations[members[0]].agent_id}
                decisions[index] = self._member(samples[number][pick], situation, info)
                self._cohort_of[situation.agent_id] = number
            records.append(self._cohort_record(number, key, members, situations,
                                               samples[number], drawn))
            self._count(len(members), len(samples[number]))
        if self._audit is not None:
            self._audit.write_many(d.audit for d in decisions)
        if self._cohort_log is not None:
            self._cohort_log.write_many(records)
        return decisions

    def end_year(self, year: int, households: Sequence[ReflectionTarget]) -> None:
        """Reflection once per cohort of this year's decisions (when configured and due)."""
        if self.reflection is None or not self.reflection.due(year):
            return
        groups: dict[int, list[ReflectionTarget]] = {}
        for target in households:  # a household without a cohort this year reflects alone
            key = self._cohort_of.get(target.agent_id, -target.agent_id)
            groups.setdefault(key, []).append(target)
        self._loop.run(self.reflection.areflect_shared(list(groups.values()), year))
        self.backend.flush()

    def provenance(self) -> dict[str, Any]:
        """The broker's provenance plus the cohort statistics of the run (this process)."""
        stats = dict(self.stats)
        years = stats["cohort_years"]
        stats["mean_size"] = round(stats["household_years"] / years, 3) if years else None
        return {**super().provenance(), "cohort": {
            "samples": self.cohort.samples, "bins": self.cohort.bins, **stats}}

    def close(self) -> None:
        """Close ``cohorts.jsonl`` and the broker."""
        if self._cohort_log is not None:
            self._cohort_log.close()
        super().close()

    # -- internals --------------------------------------------------------------------------
    def _group(self, situations: Sequence[HouseholdSituation]) -> list[tuple[tuple, list[int]]]:
        """Cohorts as (key, member indices), in the order of their first member."""
        found: dict[tuple, list[int]] = {}
        for index, situation in enumerate(situations):
            found.setdefault(cohort_key(situation, self.cohort.bins), []).append(index)
        return list(found.items())

    async def _asample(self, situations: Sequence[HouseholdSituation],
                       cohorts: list[tuple[tuple, list[int]]]) -> list[list[Decision]]:
        """Each cohort's conversations, concurrently (``backend.max_concurrency`` at once)."""
        semaphore = asyncio.Semaphore(max(1, int(self.backend.max_concurrency)))

        async def one(situation: HouseholdSituation, sample: int) -> Decision:
            async with semaphore:
                decision = await self.decide_one(situation, sample=sample)
            progress.advance()
            return decision

        jobs = [(n, situations[members[0]], i) for n, (_, members) in enumerate(cohorts)
                for i in range(min(self.cohort.samples, len(members)))]
        progress.phase("decisions", len(jobs), label="cohort conversations")
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(s, i)) for _, s, i in jobs]
        except ExceptionGroup as eg:  # the first failure is the one to report
            raise eg.exceptions[0] from None
        out: list[list[Decision]] = [[] for _ in cohorts]
        for (n, _, _), task in zip(jobs, tasks, strict=True):
            out[n].append(task.result())
        return out

    def _member(self, sample: Decision, situation: HouseholdSituation,
                info: dict[str, Any]) -> Decision:
        """The drawn conversation's outcome for one member, refused if it cannot take it."""
        action, status, reason, backstop = sample.action, sample.status, sample.reason, None
        if status in ("approved", "retry_approved"):
            backstop = self._infeasibility(situation, action)
            if backstop:
                action, status = self.fallback_action, "rejected"
                reason = f"rejected: {backstop}; executed {self.fallback_action}"
        audit = dict(sample.audit)
        audit.update(
            agent_id=situation.agent_id, decision_maker=self.name,
            state_before=state_before(situation),
            allowed_actions=list(situation.allowed_actions),
            action_costs_usd=dict(situation.action_costs_usd),
            affordable=dict(situation.affordable), executed_action=action, status=status,
            fallback=status in ("rejected", "parse_failed"),
            backstop=backstop if backstop else audit.get("backstop"), reason=reason,
            cohort=info)
        return Decision(agent_id=situation.agent_id, proposed_action=sample.proposed_action,
                        action=action, status=status, threat_label=sample.threat_label,
                        coping_label=sample.coping_label, retries=sample.retries,
                        reason=reason, decision_maker=self.name, audit=audit)

    def _cohort_record(self, number: int, key: tuple, members: list[int],
                       situations: Sequence[HouseholdSituation], samples: list[Decision],
                       drawn: list[int]) -> dict[str, Any]:
        first = situations[members[0]]
        return {
            "run_id": self.run_id, "year": first.year, "cohort": number,
            "key": describe_key(key, self.cohort.bins), "size": len(members),
            "representative": first.agent_id,
            "members": [situations[i].agent_id for i in members],
            "samples": [{"sample": i, "status": d.status, "action": d.action,
                         "proposed_action": d.proposed_action, "threat_label": d.threat_label,
                         "coping_label": d.coping_label, "retries": d.retries,
                         "context_hash": d.audit.get("context_hash"), "drawn": drawn[i]}
                        for i, d in enumerate(samples)],
        }

    def _count(self, size: int, conversations: int) -> None:
        stats = self.stats
        stats["cohort_years"] += 1
        stats["household_years"] += size
        stats["conversations"] += conversations
        stats["largest"] = max(stats["largest"], size)
        stats["singletons"] += size == 1
