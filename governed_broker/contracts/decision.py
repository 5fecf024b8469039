"""The decision interface between the world and whoever decides (ground floor: no world types).

The world builds one ``HouseholdSituation`` per active household (a frozen snapshot: nothing a
decision maker does can change the world), hands the whole batch to a ``DecisionMaker`` and gets
one ``Decision`` per household back. The world then validates feasibility once more and executes
the decisions in agent-id order. The rule-based baseline and the governed LLM broker both
implement this interface.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: Decision statuses, as written to ``agents_yearly.csv`` and ``decisions.jsonl``.
#: ``baseline``: taken by the non-LLM baseline rule. The others are the broker's: ``approved``
#: (first proposal), ``retry_approved`` (after re-asks), ``unresolved`` (the final proposal still
#: violates rules that declare ``on_exhausted: keep``; executed, violation recorded),
#: ``rejected`` (fallback action executed) and ``parse_failed`` (no readable reply; fallback).
DECISION_STATUSES = ("baseline", "approved", "retry_approved", "unresolved", "rejected",
                     "parse_failed")
#: The statuses in which the broker executed its fallback action, not the model's proposal.
FALLBACK_STATUSES = ("rejected", "parse_failed")


class Remembered(Protocol):
    """A memory as decision makers see it (``memory.item.MemoryItem`` satisfies it).

    Attributes:
        id: Unique within the household (e.g. ``"m000012"``).
        year: Simulation year in which it was formed (may be fractional).
        kind: ``event``, ``decision``, ``observation``, ``insight`` or ``seed``.
        importance: Encoding importance (insights: ``insight_importance``).
        fidelity: The version recalled now: ``detailed``, ``summary`` or ``gist``.
        content: The detailed text.
    """

    id: str
    year: float
    kind: str
    importance: float
    fidelity: str
    content: str

    def text(self, fidelity: str | None = None) -> str:
        """The text at a fidelity level (default: the memory's current one)."""
        ...


@dataclass(frozen=True)
class HouseholdSituation:
    """What one household knows at decision time in a given year (units in field names).

    Attributes:
        agent_id: Mesa unique id of the household.
        year: Simulation year (1-based).
        tenure: ``"owner"`` or ``"renter"``.
        flood_zone: Zone name (e.g. ``"high"``, ``"low"``) from the population.
        income_usd: Annual household income.
        savings_usd: Liquid savings after this year's damages and payouts.
        structure_value_usd: Replacement value of the building (owners; 0 for renters).
        contents_value_usd: Replacement value of the contents.
        elevated: Whether the home is already elevated.
        insured: Whether a policy is in force this year (bought last year, not yet lapsed).
        flooded: Whether this household's home flooded this year.
        depth_m: Flood depth at the home this year, before elevation (metres).
        damage_usd: Structure + contents damage this year.
        payout_usd: Insurance payout this year.
        years_since_flood: Years since the last flood at this home (None: never flooded).
        floods_experienced: Number of floods experienced in the simulation so far.
        flood_probability: Objective annual flood probability of the home's zone.
        neighbour_shares: Share of neighbours who were insured / elevated / relocated at the
            end of the previous year, keys ``insured``, ``elevated``, ``relocated``.
        action_costs_usd: Out-of-pocket cost this year of each action the household may take
            (after subsidies), keyed by action id.
        affordable: Whether each action's cost fits within savings, keyed by action id.
        allowed_actions: Action ids this household may take (identity/physical rules applied).
        trust_insurance: Trust in insurance, 0..1.
        trust_neighbours: Trust in neighbours, 0..1.
        debt_usd: Balance of disaster loans, this year's included (dollars).
        unrepaired_damage_usd: Structure damage left unrepaired so far (dollars).
        memories: Memories retrieved for this year (``Remembered``; empty without memory).
        extra: Additional world facts for prompts and the baseline (JSON-serialisable): the
            world puts ``loss_if_flood_usd`` and ``premium_usd`` per action id,
            ``typical_flood`` (``depth_m`` of the zone's typical flood, ``damage_usd`` it would
            do to the home as it stands) and ``spending_room_usd`` (what the household can spend
            on protection this year) there; with memory also ``knowledge_facts`` and
            ``heuristics``.
    """

    agent_id: int
    year: int
    tenure: str
    flood_zone: str
    income_usd: float
    savings_usd: float
    structure_value_usd: float
    contents_value_usd: float
    elevated: bool
    insured: bool
    flooded: bool
    depth_m: float
    damage_usd: float
    payout_usd: float
    years_since_flood: int | None
    floods_experienced: int
    flood_probability: float
    neighbour_shares: Mapping[str, float]
    action_costs_usd: Mapping[str, float]
    affordable: Mapping[str, bool]
    allowed_actions: tuple[str, ...]
    trust_insurance: float
    trust_neighbours: float
    debt_usd: float
    unrepaired_damage_usd: float
    memories: tuple[Remembered, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """One household's decision for one year, as returned by a ``DecisionMaker``.

    Attributes:
        agent_id: The household.
        proposed_action: What the decision maker first proposed (for the LLM: its first parsed
            proposal; ``None`` when nothing could be parsed).
        action: The action to execute (approved, or the default action after rejection).
        status: One of ``DECISION_STATUSES``.
        threat_label: Threat appraisal, a label of the domain's ``pmt_labels`` scale (None if
            the maker does not produce one).
        coping_label: Coping appraisal on the same scale (None if not produced).
        retries: Number of re-asks after the first attempt (0 for the baseline).
        reason: Short free-text reason.
        decision_maker: Name of the maker, e.g. ``"baseline"`` or ``"llm:embedded/qwen..."``.
        audit: Extra audit fields (attempts, rules fired, memory ids...), JSON-serialisable.
    """

    agent_id: int
    proposed_action: str | None
    action: str
    status: str
    threat_label: str | None = None
    coping_label: str | None = None
    retries: int = 0
    reason: str = ""
    decision_maker: str = "baseline"
    audit: Mapping[str, Any] = field(default_factory=dict)


class ReflectiveMemory(Protocol):
    """What year-end reflection needs of a household's memory engine."""

    def items(self) -> Iterable[Remembered]:
        """Every memory item held."""
        ...

    def add_insight(self, content: str, year: float, *, salience: float = 1.0,
                    sources: Sequence[str] = ()) -> Remembered:
        """Store an insight formed at the end of ``year`` from the memories ``sources``, at a
        ``salience`` (0..1, the highest importance among them) that scales its importance;
        returns the stored item."""
        ...


@dataclass(frozen=True)
class ReflectionTarget:
    """One active household with a memory, as the world hands it over at the end of a year.

    Attributes:
        agent_id: Mesa unique id of the household.
        tenure: ``"owner"`` or ``"renter"``.
        flood_zone: Zone name.
        engine: The household's memory engine.
    """

    agent_id: int
    tenure: str
    flood_zone: str
    engine: ReflectiveMemory


@runtime_checkable
class DecisionMaker(Protocol):
    """Decides for a batch of households; must not mutate the world.

    ``decide`` receives every active household of one year and returns exactly one
    ``Decision`` per situation, in the same order; the situations are all it sees of the world.
    ``end_year`` runs after execution with the active households that have a memory (in
    agent-id order; empty without memory), e.g. for reflection, before their memories
    consolidate; ``close`` releases resources (LLM backends, files). ``provenance`` is what the
    run's manifest records about the maker beyond its name (``manifest["llm"]``: for an LLM
    maker the model identity and call and cache statistics), or None; it is asked before
    ``close``.
    """

    name: str

    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]: ...

    def end_year(self, year: int, households: Sequence[ReflectionTarget]) -> None: ...

    def provenance(self) -> dict[str, Any] | None: ...

    def close(self) -> None: ...
