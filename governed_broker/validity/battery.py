"""The battery as data: ``vignettes.yaml`` (the base household) and ``tests.yaml`` (the tests).

A *vignette* is one household in one situation, written as a ``VignetteSpec`` (what a world
would know of it: tenure, zone, money, protection, this year's flood, earlier floods, the
neighbours, price factors). ``vignettes.yaml`` holds the base vignette with a source for its
numbers; every test of ``tests.yaml`` derives its vignettes from the base by changing fields
(``set``) and varying one of them over ``levels``. The world facts of a vignette (damage,
payout, prices, flood probability, memories) are worked out by ``validity.situations`` from the
experiment, and its prompt by the experiment's own context builder.

Files are read with ``read_yaml`` and validated by pydantic; every problem is a ``ConfigError``
naming the file, the test and the field (exit code 2).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.base import ConfigError, StrictModel, excerpt
from governed_broker.config.validation import format_validation_error, validate_model
from governed_broker.config.validity import BATTERY_FILES
from governed_broker.config.world import MAX_USD
from governed_broker.config.yamlsafe import read_yaml
from governed_broker.contracts.effects import EFFECTS

_NAME = r"^[a-z][a-z0-9_]{0,63}$"


class EarlierFlood(StrictModel):
    """A flood before this year: how many years ago and how deep (metres, before elevation)."""

    years_ago: int = Field(ge=1, le=100)
    depth_m: float = Field(gt=0, le=20)


class NeighbourShares(StrictModel):
    """Shares (0..1) of the neighbours insured, elevated and moved away at the end of last year."""

    insured: float = Field(ge=0, le=1)
    elevated: float = Field(ge=0, le=1)
    relocated: float = Field(ge=0, le=1)


class VignetteSpec(StrictModel):
    """One household in one situation (units in the field names).

    Attributes:
        tenure: ``owner`` or ``renter`` (renters have no structure value, as in the world).
        flood_zone: A zone of the experiment's hazard.
        income_usd / savings_usd: Annual income; savings now (after this year's flood).
        structure_value_usd / contents_value_usd: Replacement values.
        insured: A policy is in force this year. elevated: The home is elevated.
        trust_insurance / trust_neighbours: Trust levels 0..1.
        year: The simulation year the decision is taken in.
        flood_depth_m: Depth at the home this year, before elevation (0: no flood).
        damage_factor: Multiplies the damage the experiment's depth-damage table gives at that
            depth (1: the table's damage; capped at the home's value).
        earlier_floods: Floods of earlier years (each ``years_ago`` < ``year``).
        neighbours: What the neighbours did by the end of last year.
        cost_factor: Per effect name, a factor on the world's price of its actions.
        memory_fidelity: When set, every memory is shown at this fidelity instead of the one
            its age gives (so that a test varying how long ago a flood was changes only the
            years, not how much of it is remembered). None: as the memory engine recalls it.
        programme_state: By name, the household's state in the experiment's policy
            instruments (``insurance_required``, ``group_policy_years``, ``group_insured``,
            ``aid_requires_insurance``, ``flood_payments``, ``large_flood_payments``) and
            offers stated rather than made (``subsidy_offered``, ``buyout_offered``,
            ``buyout_price_usd``, ``certificate``, ``preferred``); what it does not name is
            that of a household new to the run, to which the programmes make their offers
            alone (``sim.world_of_one``).
    """

    tenure: Literal["owner", "renter"]
    flood_zone: str = Field(min_length=1, max_length=64)
    income_usd: float = Field(ge=0, le=MAX_USD)
    savings_usd: float = Field(ge=0, le=MAX_USD)
    structure_value_usd: float = Field(ge=0, le=MAX_USD)
    contents_value_usd: float = Field(ge=0, le=MAX_USD)
    insured: bool
    elevated: bool
    trust_insurance: float = Field(ge=0, le=1)
    trust_neighbours: float = Field(ge=0, le=1)
    year: int = Field(ge=1, le=1000)
    flood_depth_m: float = Field(ge=0, le=20)
    damage_factor: float = Field(1.0, ge=0, le=10)
    earlier_floods: list[EarlierFlood] = []
    neighbours: NeighbourShares
    cost_factor: dict[str, Annotated[float, Field(gt=0, le=100)]] = {}
    memory_fidelity: Literal["detailed", "summary", "gist"] | None = None
    programme_state: dict[str, bool | Annotated[float, Field(ge=0, le=MAX_USD)]] = {}

    @model_serializer(mode="wrap")
    def _without_empty_state(self, handler: Any) -> dict[str, Any]:
        # a vignette without programme state (or fixed memory fidelity) dumps, and so keys its
        # card, as before those fields existed
        data = handler(self)
        if not self.programme_state:
            data.pop("programme_state", None)
        if self.memory_fidelity is None:
            data.pop("memory_fidelity", None)
        return data

    @field_validator("cost_factor")
    @classmethod
    def _known_effects(cls, factors: dict[str, float]) -> dict[str, float]:
        unknown = [e for e in factors if e not in EFFECTS]
        if unknown:
            raise ValueError(f"unknown effect(s) {unknown}; known: {', '.join(EFFECTS)}")
        # a factor of 1 is the world's price: the same vignette as no factor at all
        return {e: f for e, f in sorted(factors.items()) if f != 1.0}

    @model_validator(mode="after")
    def _history_before_now(self) -> VignetteSpec:
        ago = [f.years_ago for f in self.earlier_floods]
        if any(a >= self.year for a in ago):
            raise ValueError(f"earlier_floods: years_ago must be below year ({self.year}), "
                             f"got {ago}")
        if len(set(ago)) != len(ago):
            raise ValueError(f"earlier_floods: two floods in one year: {ago}")
        if self.elevated and self.tenure == "renter":
            raise ValueError("a renter's home cannot be elevated by the renter (elevated: true)")
        return self


class VignettesFile(StrictModel):
    """``vignettes.yaml``: the base vignette, where its numbers come from, and synonyms.

    Attributes:
        source: Where the base household's numbers come from.
        base: The base vignette every test varies.
        synonyms: Per action id, another wording of its description (the synonym invariance
            test shows these instead of ``agent_types.yaml``'s descriptions).
        synonyms_source: Why these wordings are synonyms.
    """

    source: str = Field(min_length=1)
    base: VignetteSpec
    synonyms: dict[str, Annotated[str, Field(min_length=1, max_length=500)]] = {}
    synonyms_source: str = ""

    @model_validator(mode="after")
    def _synonyms_sourced(self) -> VignettesFile:
        if self.synonyms and not self.synonyms_source:
            raise ValueError("synonyms need a synonyms_source (why the wordings mean the same)")
        return self


#: What a test measures on a reply: an appraisal (its rank on the scale), the decision, or
#: whether the decision's action has an effect (``share:insure``).
Measure = Annotated[str, Field(pattern=r"^(threat|coping|decision|share:[a-z_]+)$")]
#: A correlation strictly inside (-1, 1).
Correlation = Annotated[float, Field(gt=-1, lt=1)]
#: A share strictly between 0 and 1.
OpenShare = Annotated[float, Field(gt=0, lt=1)]


class _Test(StrictModel):
    """What every test has: its name, family, whether it is primary, and why it is there.

    ``primary`` tests decide the card: it passes when every one of them passes, their p-values
    Holm-corrected together (docs/validity.md "The verdict"); the others are reported.
    """

    name: str = Field(pattern=_NAME)
    family: str = Field(pattern=_NAME)
    primary: bool = False
    rationale: str = Field(min_length=1)


class MonotoneTest(_Test):
    """Vary one field over ``levels``; ``measure`` must move as ``expect`` says.

    The statistic is Spearman's rho between the level (its value, or its position when the
    values are not numbers) and the measure over the replies. ``increase`` / ``decrease``: a
    directional test; it passes when the one-sided confidence bound of rho (in the expected
    direction) clears ``smallest_effect``, and fails when the opposite bound stays short of it.
    ``not_decrease`` / ``not_increase``: a guard (non-inferiority); it passes when the bound
    excludes a wrong-way effect as large as ``smallest_effect``, and fails when the data show
    one. ``design_effect`` is the rho (in the expected direction) of a respondent that follows
    the fact, at which the battery's power is computed (a guard's default: 0, no effect).
    """

    kind: Literal["monotone"]
    set: dict[str, Any] = {}
    vary: str = Field(min_length=1)
    levels: list[Any] = Field(min_length=2, max_length=10)
    measure: Measure
    expect: Literal["increase", "decrease", "not_decrease", "not_increase"]
    smallest_effect: Annotated[float, Field(gt=0, lt=1)]
    design_effect: Correlation | None = None

    @model_validator(mode="after")
    def _design_beyond_threshold(self) -> MonotoneTest:
        if self.design_effect is None and not self.guard:
            raise ValueError(f"{self.expect} needs a design_effect (the rho of a respondent "
                             "that follows the fact, at which power is computed)")
        if self.design <= self.floor:
            raise ValueError(f"design_effect {self.design} must exceed {self.floor:+g}, the "
                             "bound the test must clear (smallest_effect)")
        return self

    @property
    def design(self) -> float:
        """The design effect (a guard's default: 0)."""
        return 0.0 if self.design_effect is None else self.design_effect

    @property
    def floor(self) -> float:
        """What rho in the expected direction must exceed.

        The smallest effect of interest, or minus a guard's margin.
        """
        return -self.smallest_effect if self.guard else self.smallest_effect

    @property
    def guard(self) -> bool:
        """A non-inferiority test (``not_decrease`` / ``not_increase``)."""
        return self.expect.startswith("not_")


class ShareTest(_Test):
    """The share of replies whose first proposal has an effect stays below ``max_share``.

    Its one-sided upper bound must, over the vignettes that ``levels`` of ``vary`` give; its
    power is computed at ``design_share``. Not informative when no vignette offers an action
    with the effect: a reply held to the offered actions cannot propose it.
    """

    kind: Literal["share_at_most"]
    set: dict[str, Any] = {}
    vary: str = Field(min_length=1)
    levels: list[Any] = Field(min_length=1, max_length=10)
    measure: Annotated[str, Field(pattern=r"^share:[a-z_]+$")]
    max_share: OpenShare
    design_share: Annotated[float, Field(gt=0, lt=1)]

    @model_validator(mode="after")
    def _design_below(self) -> ShareTest:
        if self.design_share >= self.max_share:
            raise ValueError(f"design_share {self.design_share} must lie below max_share "
                             f"{self.max_share}")
        return self


class InvarianceTest(_Test):
    """Equivalence of the base vignette's first proposals in two arms.

    The second arm lists the actions in reverse order, or describes them with the ``synonyms``
    of ``vignettes.yaml``. It passes when the bootstrap upper bound of their total variation
    lies below ``tolerance``, and fails when the lower bound lies above it. Power is computed
    for a respondent whose choices follow ``design_shares`` in both arms.
    """

    kind: Literal["invariance"]
    variant: Literal["reversed_order", "synonyms"]
    tolerance: OpenShare
    design_shares: list[Annotated[float, Field(gt=0, le=1)]] = Field(min_length=2,
                                                                    max_length=20)


class RetestTest(_Test):
    """Agreement of the replicates of the vignettes of a factorial ``grid``.

    The grid is every combination of its fields' levels, on top of ``set``. The statistic is
    ICC(2,1) of the appraisal ranks, or Krippendorff's alpha (nominal) of the decisions. It
    passes when the one-sided lower bound exceeds ``smallest_effect`` and fails when the upper
    bound stays below it; the replicates per vignette give 80 % power at ``design_effect`` (a
    test without one reads the replicates the grid's other tests ask for). A within-vignette
    agreement index (rwg, or Bennett's S for decisions) is reported beside it.
    """

    kind: Literal["retest"]
    set: dict[str, Any] = {}
    grid: dict[str, list[Any]] = Field(min_length=1, max_length=4)
    measure: Literal["threat", "coping", "decision"]
    smallest_effect: OpenShare
    design_effect: OpenShare | None = None

    @field_validator("grid")
    @classmethod
    def _levels(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for field, levels in grid.items():
            if not 2 <= len(levels) <= 10:
                raise ValueError(f"{field}: a grid field needs 2 to 10 levels, got "
                                 f"{len(levels)}")
        return grid

    @model_validator(mode="after")
    def _design_above(self) -> RetestTest:
        if self.design_effect is not None and self.design_effect <= self.smallest_effect:
            raise ValueError(f"design_effect {self.design_effect} must exceed smallest_effect "
                             f"{self.smallest_effect}")
        return self


class TriggerReply(StrictModel):
    """The proposal a trigger vignette starts from (it breaks a coherence rule)."""

    threat: str = Field(min_length=1)
    coping: str = Field(min_length=1)
    effect: str
    threat_reason: str = Field(min_length=1, max_length=200)
    coping_reason: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=200)

    @field_validator("effect")
    @classmethod
    def _known(cls, effect: str) -> str:
        if effect not in EFFECTS:
            raise ValueError(f"unknown effect {excerpt(effect)}; known: {', '.join(EFFECTS)}")
        return effect


class Trigger(StrictModel):
    """A vignette (``set`` on the base) and the rule-breaking proposal it starts from."""

    set: dict[str, Any] = {}
    reply: TriggerReply


class _RateTest(_Test):
    """A share of cases that must stay below ``max_rate`` (its one-sided upper bound must).

    Power is computed at ``design_rate``.
    """

    max_rate: OpenShare
    design_rate: OpenShare

    @model_validator(mode="after")
    def _design_below(self) -> _RateTest:
        if self.design_rate >= self.max_rate:
            raise ValueError(f"design_rate {self.design_rate} must lie below max_rate "
                             f"{self.max_rate}")
        return self


class LaunderingTest(_RateTest):
    """Governance laundering.

    After a block, how often the accepted reply keeps the blocked action and changes an appraisal
    label instead. The triggers are asked as often as 80 % power at ``design_rate`` needs.
    """

    kind: Literal["laundering"]
    triggers: list[Trigger] = Field(min_length=1, max_length=20)


class CoherenceTest(_RateTest):
    """Reason coherence.

    The share of replies whose ``reason`` matches a pattern that contradicts the chosen action's
    effect (``contradicts``: effect -> regular expressions, case-insensitive). It reads the replies
    the other tests ask for.
    """

    kind: Literal["coherence"]
    contradicts: dict[str, list[Annotated[str, Field(min_length=1, max_length=300)]]]

    @field_validator("contradicts")
    @classmethod
    def _compiles(cls, patterns: dict[str, list[str]]) -> dict[str, list[str]]:
        for effect, regexes in patterns.items():
            if effect not in EFFECTS:
                raise ValueError(f"unknown effect {excerpt(effect)}; known: {', '.join(EFFECTS)}")
            for regex in regexes:
                try:
                    re.compile(regex)
                except re.error as exc:
                    raise ValueError(f"{effect}: pattern {excerpt(regex)} does not compile: "
                                     f"{exc}") from None
        return patterns


BatteryTest = Annotated[
    MonotoneTest | ShareTest | InvarianceTest | RetestTest | LaunderingTest | CoherenceTest,
    Field(discriminator="kind"),
]


class QuickSettings(StrictModel):
    """Replies of ``validate --quick`` (a smoke check; its card never opens a gate)."""

    replicates: int = Field(ge=1, le=50)
    laundering_replicates: int = Field(ge=1, le=50)


class TestsFile(StrictModel):
    """``tests.yaml``: battery settings and the tests.

    Attributes:
        source: What the tests and thresholds rest on.
        seed: Root of the battery's request seeds (cards do not depend on the experiment seed).
        alpha: One-sided error level of every pass and fail (primary passes Holm-corrected).
        power: The power each sized test gets at its design effect.
        resamples: Bootstrap resamples of the invariance and decision-retest bounds.
        max_replicates: The most replies asked of one vignette (power is reported when the cap
            binds).
        quick: Replicates of ``--quick``.
        tests: The tests.
    """

    __test__ = False  # not a pytest class

    source: str = Field(min_length=1)
    seed: int = Field(ge=0, le=2**63 - 1)
    alpha: float = Field(gt=0, lt=0.5)
    power: float = Field(gt=0.5, lt=1)
    resamples: int = Field(ge=200, le=100_000)
    max_replicates: int = Field(ge=2, le=1000)
    quick: QuickSettings
    tests: list[BatteryTest] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> TestsFile:
        names = [t.name for t in self.tests]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"test names must be unique; repeated: {doubled}")
        if not any(t.primary for t in self.tests):
            raise ValueError("no test is primary: the card passes when every primary test "
                             "passes, so mark the tests that decide it with primary: true")
        return self

    @property
    def primaries(self) -> list[str]:
        """The names of the primary tests."""
        return [t.name for t in self.tests if t.primary]


@dataclass(frozen=True)
class Battery:
    """A loaded battery, checked against the experiment's domain.

    Attributes:
        directory: Where it was read from.
        vignettes: ``vignettes.yaml``.
        tests: ``tests.yaml``.
        quick: Whether this is the ``--quick`` variant (fewer replicates).
    """

    directory: Path
    vignettes: VignettesFile
    tests: TestsFile
    quick: bool = False

    def identity(self) -> dict[str, Any]:
        """The battery's content, for the card key."""
        return {"vignettes": self.vignettes.model_dump(mode="json"),
                "tests": self.tests.model_dump(mode="json"), "quick": self.quick}


def load_battery(directory: Path, domain: AgentTypesConfig, quick: bool = False) -> Battery:
    """Read and check ``vignettes.yaml`` and ``tests.yaml`` of ``directory``.

    Raises:
        ConfigError: A missing or invalid file, a vignette a test derives that does not
            validate, a label off the domain's scale, an effect no action has, an unknown
            action in ``synonyms``.
    """
    directory = Path(directory)
    files = {}
    for name, model in zip(BATTERY_FILES, (VignettesFile, TestsFile), strict=True):
        path = directory / name
        files[name] = validate_model(model, read_yaml(path, "validity battery file"), path,
                                     quote_values=True)
    battery = Battery(directory, files["vignettes.yaml"], files["tests.yaml"], quick)
    _check_against_domain(battery, domain)
    return battery


def _check_against_domain(battery: Battery, domain: AgentTypesConfig) -> None:
    source = battery.directory / "tests.yaml"
    unknown = [a for a in battery.vignettes.synonyms if a not in domain.actions]
    if unknown:
        raise ConfigError(f"{battery.directory / 'vignettes.yaml'}: synonyms name action(s) "
                          f"{unknown} that agent_types.yaml does not have "
                          f"({', '.join(domain.actions)})")
    for test in battery.tests.tests:
        for effect in _effects_used(test):
            if not domain.actions_with_effect(effect):
                raise ConfigError(f"{source}: test {test.name!r}: no action of agent_types.yaml "
                                  f"has the effect {effect!r}")
        if isinstance(test, MonotoneTest | ShareTest):
            for level in test.levels:
                derive(battery.vignettes.base, test.set, test.vary, level, source, test.name)
        if isinstance(test, RetestTest):
            for cell in grid_cells(test):
                derive(battery.vignettes.base, {**test.set, **cell}, None, None, source,
                       test.name)
        if isinstance(test, LaunderingTest):
            for i, trigger in enumerate(test.triggers):
                derive(battery.vignettes.base, trigger.set, None, None, source, test.name)
                off = [x for x in (trigger.reply.threat, trigger.reply.coping)
                       if x not in domain.pmt_labels.labels]
                if off:
                    raise ConfigError(f"{source}: test {test.name!r}: trigger {i}: label(s) "
                                      f"{off} are not on the scale {domain.pmt_labels.labels}")


def _effects_used(test: Any) -> list[str]:
    measure = getattr(test, "measure", "")
    effects = [measure.split(":", 1)[1]] if measure.startswith("share:") else []
    if isinstance(test, LaunderingTest):
        effects += [t.reply.effect for t in test.triggers]
    return effects


def grid_cells(test: RetestTest) -> list[dict[str, Any]]:
    """Every combination of a retest grid's levels, as path -> value (first field slowest)."""
    fields = list(test.grid)
    return [dict(zip(fields, values, strict=True))
            for values in itertools.product(*(test.grid[f] for f in fields))]


#: Fields whose keys are free (effect names), not fixed by ``VignetteSpec``.
_FREE_KEYS = frozenset({"cost_factor"})


def _set_path(data: dict[str, Any], path: str, value: Any, where: str) -> None:
    """Set ``a.b.0.c`` in the nested dicts and lists of a vignette.

    Every step must exist, except a new key of a free mapping (``cost_factor.insure``).
    """
    parts = path.split(".")
    node: Any = data
    for i, part in enumerate(parts):
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"{where}: {path!r}: no list position {part!r} (set the "
                                  "whole list first)")
            key: Any = int(part)
        elif isinstance(node, dict):
            free = i > 0 and parts[i - 1] in _FREE_KEYS and i == len(parts) - 1
            if part not in node and not free:
                raise ConfigError(f"{where}: {path!r}: no field {part!r} (fields: "
                                  f"{', '.join(map(str, node))})")
            key = part
        else:
            raise ConfigError(f"{where}: {path!r}: {parts[i - 1]!r} holds a value, not fields")
        if i == len(parts) - 1:
            node[key] = value
        else:
            node = node[key]


def derive(base: VignetteSpec, changes: Mapping[str, Any], vary: str | None, level: Any,
           source: Path, test: str) -> VignetteSpec:
    """The base vignette with ``changes`` (path -> value) and ``vary`` set to ``level``.

    Raises:
        ConfigError: A path that names no field, or a vignette that does not validate.
    """
    where = f"{source}: test {test!r}"
    data = copy.deepcopy(base.model_dump(mode="json"))
    for name, info in VignetteSpec.model_fields.items():  # fields a dump leaves out when unset
        data.setdefault(name, info.get_default(call_default_factory=True))
    for path, value in changes.items():
        _set_path(data, path, copy.deepcopy(value), where)
    if vary is not None:
        _set_path(data, vary, copy.deepcopy(level), f"{where}, level {excerpt(str(level))}")
    try:
        return VignetteSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, Path(f"{where} (derived vignette)"),
                                                  VignetteSpec)) from exc


def coherence_patterns(directory: Path) -> dict[str, list[str]]:
    """The contradiction patterns of the first coherence test of ``<directory>/tests.yaml``.

    Effect -> regular expressions; for measuring a finished run's reasons.

    Raises:
        ConfigError: the file is missing or invalid, or has no coherence test.
    """
    path = Path(directory) / "tests.yaml"
    tests = validate_model(TestsFile, read_yaml(path, "validity battery file"), path,
                           quote_values=True)
    for test in tests.tests:
        if isinstance(test, CoherenceTest):
            return test.contradicts
    raise ConfigError(f"{path}: no test of kind 'coherence'")
