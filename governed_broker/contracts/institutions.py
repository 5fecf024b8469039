"""The decision interface of institutions (ground floor: no world types).

Institutions (a government's mitigation programme, a flood insurer) decide once a year, before
households, what their levers are (an elevation grant's share and budget, a buyout budget, the
premium loading, the community discount). As for households, the world builds a frozen
situation, hands it to a maker behind one small protocol (``InstitutionMaker``: the rule-based
counterfactual or the governed LLM broker) and puts in force only what the world's own limits
allow; the maker never touches the world.

The facts an institution observes are declared here once, by name, unit and meaning
(``GOVERNMENT_FACTS``, ``INSURER_FACTS``), as the output columns are in ``contracts.columns``:
the world computes exactly these, the domain file (``institutions.yaml``) words them for
prompts, and the documentation tables are generated from them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Unit = Literal["usd", "share", "ratio", "count", "factor"]

#: Statuses of an institution's decision, as written to ``institutions.jsonl`` and
#: ``institutions_yearly.csv``: ``rule`` (the rule-based maker), and the governed broker's
#: ``approved`` / ``retry_approved`` (after re-asks), ``rejected`` (a limit still broken after the
#: re-asks: the fallback is put in force) and ``parse_failed`` (no readable reply: fallback).
INSTITUTION_STATUSES = ("rule", "approved", "retry_approved", "rejected", "parse_failed")
#: Statuses in which the fallback levers, not the maker's proposal, were put in force.
INSTITUTION_FALLBACK_STATUSES = ("rejected", "parse_failed")


@dataclass(frozen=True)
class Fact:
    """One fact an institution observes at decision time.

    Attributes:
        name: Identifier (units in the name where they are money: ``_usd``).
        unit: ``usd`` (dollars), ``share`` (0..1), ``ratio`` (a quotient such as a loss
            ratio), ``count`` or ``factor`` (a multiplier).
        meaning: One line for the documentation.
        nullable: Whether the fact may be undefined (None: e.g. a loss ratio before any
            premium was written).
    """

    name: str
    unit: Unit
    meaning: str
    nullable: bool = False


#: What the government observes after the year's flood, before it sets this year's programme.
GOVERNMENT_FACTS: tuple[Fact, ...] = (
    Fact("funds_available_usd", "usd", "money it may commit this year: the fund balance "
         "carried over, this year's appropriation and post-disaster funds"),
    Fact("balance_usd", "usd", "fund balance carried over from last year"),
    Fact("appropriation_usd", "usd", "this year's appropriation to the fund"),
    Fact("post_disaster_funds_usd", "usd", "post-disaster mitigation funds received this year "
         "(a share of last year's disaster aid)"),
    Fact("households_active", "count", "households living in the community"),
    Fact("households_flooded", "count", "households whose home flooded this year"),
    Fact("damage_usd", "usd", "flood damage to homes and belongings this year"),
    Fact("aid_usd", "usd", "disaster aid paid this year"),
    Fact("unrepaired_damage_usd", "usd", "flood damage to homes still unrepaired"),
    Fact("share_elevated", "share", "share of homes elevated"),
    Fact("share_insured", "share", "share of households with flood insurance in force"),
    Fact("owners_may_elevate", "count", "owners whose home is not elevated yet"),
    Fact("elevation_cost_usd", "usd", "cost of elevating one home, before any grant"),
    Fact("buyout_eligible", "count", "owners the buyout programme's rules make eligible this "
         "year (0 without a programme)"),
    Fact("buyout_eligible_value_usd", "usd", "what buying out every eligible home would cost "
         "at the programme's price"),
    Fact("grants_paid_last_year", "count", "elevation grants paid last year"),
    Fact("grants_paid_last_year_usd", "usd", "money paid in elevation grants last year"),
    Fact("buyouts_last_year", "count", "homes bought out last year"),
    Fact("buyouts_last_year_usd", "usd", "money paid for buyouts last year"),
)

#: What the insurer observes after the year's claims, before it sets this year's rates.
INSURER_FACTS: tuple[Fact, ...] = (
    Fact("policies_in_force", "count", "policies in force during this year's flood"),
    Fact("share_insured", "share", "share of households with a policy in force"),
    Fact("claims_usd", "usd", "claims paid this year"),
    Fact("premiums_last_year_usd", "usd", "premiums written last year (for this year's cover)"),
    Fact("loss_ratio", "ratio", "claims paid this year over the premiums that bought this "
         "year's cover (empty before any premium was written)", nullable=True),
    Fact("experience_loss_ratio", "ratio", "claims over premiums over the experience window "
         "(empty before any premium was written)", nullable=True),
    Fact("experience_years", "count", "years in the experience window so far"),
    Fact("experience_claims", "count", "claims paid over the experience window"),
    Fact("expected_claims_usd", "usd", "expected annual claims of the policies in force by the "
         "hazard map (annual chance times the payout of a typical flood)"),
    Fact("reserves_usd", "usd", "reserves: premiums collected less claims paid so far"),
)

FACTS: dict[str, tuple[Fact, ...]] = {"government": GOVERNMENT_FACTS, "insurer": INSURER_FACTS}


def format_value(value: float | int | None, unit: Unit) -> str:
    """A fact or lever value as prompts, feedback and the audit show it.

    Dollars as ``$12,300``, counts as ``1,204``, shares, ratios and factors to four significant
    digits (``0.5``, ``1.357``); ``none yet`` for an undefined value (a loss ratio before any
    premium). Amounts beyond ``MAX_LEVER`` (a proposal's sum of huge budgets) are shown to four
    significant digits, and a non-finite one as ``inf`` or ``nan``, never as 300 digits.
    """
    if value is None:
        return "none yet"
    if not math.isfinite(value) or abs(value) >= MAX_LEVER:
        return ("$" if unit == "usd" else "") + f"{float(value):.4g}"
    if unit == "usd":
        return f"${round(value):,}"
    if unit == "count":
        return f"{round(value):,}"
    return f"{value:.4g}"


#: Largest magnitude a lever value may have: no lever of the world (a budget in dollars, a
#: share, a factor) comes near it, and sums of a few such values stay far from float overflow
#: (1e308); a proposal beyond it is refused as a number no lever takes.
MAX_LEVER = 1e15


def lever_value(lever: str, value: object) -> float:
    """A maker's value for ``lever`` as a finite float of at most ``MAX_LEVER`` in magnitude.

    Every number an institution's maker proposes goes through here before any rule or the
    world looks at it, so a reply such as ``1e308`` or a 400-digit integer is a refused
    proposal (the maker's fallback, or the world's: last year's levers within the limits),
    never an overflow.

    Raises:
        ValueError: naming the lever and, shortened, the value (not a number, a boolean, not
            finite, or beyond ``MAX_LEVER``).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"lever {lever!r} must be a number, got {shown_value(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if not math.isfinite(number) or abs(number) > MAX_LEVER:
        raise ValueError(f"lever {lever!r} must be a finite number of at most {MAX_LEVER:.0e} "
                         f"in magnitude, got {shown_value(value)}")
    return number


def shown_value(value: object) -> str:
    """A proposed value as messages and the audit quote it.

    Short and printable, never hundreds of digits (an integer beyond ``MAX_LEVER`` is given by
    its number of digits).
    """
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_LEVER:
        try:
            digits = f"{len(str(abs(value))):,}"
        except ValueError:  # beyond Python's limit on converting integers to text
            digits = "more than 4,300"
        return f"an integer of {digits} digits"
    text = repr(value)
    text = "".join(c if c.isprintable() else "?" for c in text[:61])
    return text if len(text) <= 60 else text[:57] + "..."


def audit_levers(levers: Mapping[str, object]) -> dict[str, float | str]:
    """A maker's levers as the audit records them.

    Each value that ``lever_value`` takes as that float, any other as its ``shown_value`` text
    (the line stays strict JSON).
    """
    out: dict[str, float | str] = {}
    for lever, value in levers.items():
        try:
            out[str(lever)] = lever_value(str(lever), value)
        except ValueError:
            out[str(lever)] = shown_value(value)
    return out


@dataclass(frozen=True)
class InstitutionSituation:
    """What one institution knows when it decides this year's levers.

    Attributes:
        institution: ``government`` or ``insurer``.
        year: Simulation year (1-based).
        facts: The institution's facts by name (``FACTS[institution]``; None where undefined).
        levers: Each lever's value in force last year (the starting values in year 1), by
            lever id of the domain (``institutions.yaml``).
        in_force: Levers set this year by the institutions that decided before it, as
            ``{institution: {lever: value}}`` (the phase order, made visible).
    """

    institution: str
    year: int
    facts: Mapping[str, float | int | None]
    levers: Mapping[str, float]
    in_force: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class InstitutionDecision:
    """An institution's levers for one year, as a maker returns them.

    Attributes:
        institution: ``government`` or ``insurer``.
        year: Simulation year.
        levers: The values to put in force, by lever id.
        status: One of ``INSTITUTION_STATUSES``.
        decision_maker: ``rule`` or the LLM maker's name.
        proposed: What the maker first proposed (LLM: its first readable reply; None when none
            was readable; the rule maker: its levers).
        retries: Re-asks after the first attempt.
        reason: Short free-text reason.
        audit: The decision's record for ``institutions.jsonl`` (JSON-serialisable).
    """

    institution: str
    year: int
    levers: Mapping[str, float]
    status: str
    decision_maker: str
    proposed: Mapping[str, float] | None = None
    retries: int = 0
    reason: str = ""
    audit: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class InstitutionMaker(Protocol):
    """Decides one institution's levers each year; must not mutate the world.

    ``decide`` gets the institution's frozen situation and returns its decision (the world
    checks the decision against the domain's limits again before anything takes effect);
    ``provenance`` is what the manifest records about the maker beyond its name (None for a
    rule); ``close`` releases resources.
    """

    name: str

    def decide(self, situation: InstitutionSituation) -> InstitutionDecision:
        """This year's levers of the institution."""
        ...

    def provenance(self) -> dict[str, Any] | None:
        """What the manifest records about the maker beyond its name (None: a rule)."""
        ...

    def close(self) -> None:
        """Release the maker's resources."""
        ...
