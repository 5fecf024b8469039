"""The decision interface between the world and whoever decides (ground floor: no world types).

The world builds one ``HouseholdSituation`` per active household (a frozen snapshot: nothing a
decision maker does can change the world), hands the whole batch to a ``DecisionMaker`` and gets
one ``Decision`` per household back. The world then validates feasibility once more and executes
the decisions in agent-id order. The rule-based baseline and the governed LLM broker both
implement this interface.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
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
class TypicalFlood:
    """A typical flood of the household's zone (the hazard map's) at the home as it stands.

    Attributes:
        depth_m: Its depth (metres, before elevation).
        damage_usd: The damage it would do to the home as it stands (dollars, before any
            payout).
    """

    depth_m: float
    damage_usd: float


@dataclass(frozen=True)
class AidCertificate:
    """An aid certificate that insures the household (``sim.instruments.certificates``).

    Attributes:
        years: Years of floods it still covers after this year's.
        coverage_usd: What it pays at most per flood (dollars).
    """

    years: int
    coverage_usd: float


@dataclass(frozen=True)
class Heuristic:
    """A heuristic the household learned that matches its situation (procedural memory).

    Attributes:
        description: The heuristic in words.
        success_rate: How often it worked, 0..1.
    """

    description: str
    success_rate: float


@dataclass(frozen=True)
class SituationFacts:
    """What the world tells a household beyond its own state.

    The terms of its choices, what each policy instrument tells it, and what it knows (units in the
    names). A new fact the world states is a new field here, so that every fact a prompt or a rule
    may read is declared once.

    Attributes:
        loss_if_flood_usd: Per action id, the out-of-pocket loss of a typical flood next year
            if the household takes the action.
        premium_usd: Per action id, the part of its cost that is a premium.
        typical_flood: The zone's typical flood at the home (None: not stated).
        spending_room_usd: What the household can spend on protection this year without its
            savings falling below zero (None: not stated).
        insurance_required: Its mortgage lender requires flood insurance (the lender renews a
            lapsed policy; ``sim.instruments.mandatory``).
        group_policy: The aid certificate that insures it (None: none).
        aid_requires_insurance: It received aid in the group policy's zones, so it must be
            insured at a later flood to receive aid again.
        buyout_offer_usd: The buyout programme's offer for its home (None: no offer).
        knowledge_facts: What it knows about the measures open to it (semantic memory).
        heuristics: Its learned heuristics that match its situation (procedural memory).
    """

    loss_if_flood_usd: Mapping[str, float] = field(default_factory=dict)
    premium_usd: Mapping[str, float] = field(default_factory=dict)
    typical_flood: TypicalFlood | None = None
    spending_room_usd: float | None = None
    insurance_required: bool = False
    group_policy: AidCertificate | None = None
    aid_requires_insurance: bool = False
    buyout_offer_usd: float | None = None
    knowledge_facts: tuple[str, ...] = ()
    heuristics: tuple[Heuristic, ...] = ()


#: ``HouseholdSituation`` fields whose parts a rule or a topic condition may name as
#: ``<field>.<key>`` (a mapping's key, or a fact of ``facts``).
MAPPING_FIELDS = ("neighbour_shares", "action_costs_usd", "affordable", "facts")
#: A part a situation does not have (``situation_value``).
MISSING: Any = object()


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
        facts: What the world tells it beyond its own state (``SituationFacts``).
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
    facts: SituationFacts = field(default_factory=SituationFacts)


_SITUATION_FIELDS = frozenset(f.name for f in fields(HouseholdSituation))
_FACTS = frozenset(f.name for f in fields(SituationFacts))


def situation_path_problem(path: str) -> str | None:
    """What is wrong with ``path`` as the name of a part of a situation (None: nothing).

    ``<field>``, ``<mapping field>.<key>`` or ``facts.<fact>``.
    """
    head, dot, key = path.partition(".")
    if head not in _SITUATION_FIELDS:
        return f"unknown situation field {head!r}; fields: {', '.join(sorted(_SITUATION_FIELDS))}"
    if dot and head not in MAPPING_FIELDS:
        return (f"{head!r} is not a mapping, so {path!r} names nothing (parts may be named "
                f"of {', '.join(MAPPING_FIELDS)})")
    if head == "facts" and dot and key not in _FACTS:
        return f"unknown fact {key!r}; facts: {', '.join(sorted(_FACTS))}"
    return None


def action_in_path(path: str) -> str | None:
    """The action id a path names a part of, else None.

    ``action_costs_usd.<action>``, ``affordable.<action>``.
    """
    head, dot, key = path.partition(".")
    return key if dot and head in ("action_costs_usd", "affordable") else None


def situation_value(situation: HouseholdSituation, path: str) -> Any:
    """The part of ``situation`` that ``path`` names (``situation_path_problem``).

    Or ``MISSING`` where a mapping has no such key.
    """
    head, _, key = path.partition(".")
    value = getattr(situation, head)
    if not key:
        return value
    if head == "facts":
        return getattr(value, key)
    return value.get(key, MISSING) if isinstance(value, Mapping) else MISSING


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
        """Store an insight formed at the end of ``year`` from the memories ``sources``.

        At a ``salience`` (0..1, the highest importance among them) that scales its importance;
        returns the stored item.
        """
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
class RanksInitialPolicyholders(Protocol):
    """A decision maker that says who of a zone would hold the voluntary policies at the start.

    So that the run starts where the maker would keep it, not with policies drawn independently
    of how the households see the risk (``sim.model``).
    """

    def initial_policy_scores(self, agent_ids: Sequence[int]) -> Sequence[float] | None:
        """A score per household (higher: keeps a policy first), or None: as drawn."""
        ...


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

    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        """One decision per situation, in the same order."""
        ...

    def end_year(self, year: int, households: Sequence[ReflectionTarget]) -> None:
        """The end of ``year``, with the active households that have a memory."""
        ...

    def provenance(self) -> dict[str, Any] | None:
        """What the manifest records about the maker beyond its name (None: nothing)."""
        ...

    def close(self) -> None:
        """Release the maker's resources."""
        ...
