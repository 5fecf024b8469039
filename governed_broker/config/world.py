"""World sections of the experiment YAML: population, hazard, damage, money, network, trust.

Every monetary or behavioural section carries a required ``source:`` string saying where its
numbers come from (see ``shared/research/domain_defaults.md``); the default experiment files
fill them in. Units are in the field names (``_usd``, ``_m``, ``_share``).

Paths (population CSV, damage tables, hazard schedules) are written as given in the YAML and
checked for existence at load time; they are resolved against the directory of the experiment
file with ``ExperimentConfig.resolve_path``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from governed_broker.config.base import StrictModel, excerpt
from governed_broker.config.raster import RasterConfig

Share = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
Positive = Annotated[float, Field(gt=0.0)]

#: Largest amount of money a setting may hold (USD): above any single home, limit or cost; a
#: bound that keeps sums and products of money far from float overflow.
MAX_USD = 1e9
#: Deepest flood a setting may give (metres): above any riverine or coastal depth on record for
#: homes (Katrina and Sandy: 6-9 m); the depth-damage tables are flat well before it.
MAX_DEPTH_M = 20.0
#: Largest lognormal spread (sigma of ln x): exp(3) is a factor of 20 per standard deviation.
MAX_SIGMA = 3.0
#: Standard deviations above the median that a money lognormal must keep below ``MAX_USD``: a
#: draw beyond 6 sigma has a chance of about 1 in a billion, so drawn incomes and values stay
#: within the money bound for any population we run.
MONEY_TAIL_SIGMAS = 6.0
#: Standard deviations above the median that a drawn flood depth must keep below
#: ``MAX_DEPTH_M``: about 1 in 700 household-floods lies beyond 3 sigma, so depths beyond the
#: bound stay rare instead of typical (20 m x exp(2 x 4.2) would be 90 km of water).
DEPTH_TAIL_SIGMAS = 3.0
#: Latest year a setting may name: the longest run (``years`` <= 1000).
MAX_YEAR = 1000
#: Most neighbours of a household in the network (Dunbar's number, about 150 people one knows).
MAX_NEIGHBOURS = 150

Money = Annotated[float, Field(ge=0.0, le=MAX_USD, description="US dollars")]
Depth = Annotated[float, Field(ge=0.0, le=MAX_DEPTH_M, description="metres")]
Sigma = Annotated[float, Field(ge=0.0, le=MAX_SIGMA)]
#: A yearly increment of a quantity that lives in [0, 1] (trust).
UnitStep = Annotated[float, Field(ge=-1.0, le=1.0)]
Source = Annotated[str, Field(min_length=1, description="Where the numbers come from.")]


def _check_exists(value: Path, info: ValidationInfo) -> Path:
    """Fail validation when a referenced file does not exist (relative to the YAML's folder)."""
    base = (info.context or {}).get("base_dir") if info.context is not None else None
    if base is None:
        return value
    full = value if value.is_absolute() else Path(base) / value
    if not full.is_file():
        raise ValueError(f"file not found: {full} (relative paths are resolved against {base})")
    return value


#: A path to an existing file, written relative to the experiment YAML's directory.
FilePath = Annotated[Path, AfterValidator(_check_exists)]


class LognormalParams(StrictModel):
    """A lognormal distribution of an amount of money (USD).

    Given by the mean and standard deviation of ln(x).

    ``ln_mean + 6 * ln_sigma`` must not exceed ln(``MAX_USD``) (about 20.7): draws then stay
    below the money bound except with a chance of about 1 in a billion each, so a typo such as
    ``ln_mean: 200`` or ``ln_sigma: 30`` is refused instead of giving incomes of 1e80 USD.
    """

    ln_mean: float = Field(ge=0.0, le=20.0, description=(
        "mean of ln(x), x in USD; within [0, 20] so that the median, exp(ln_mean), lies "
        "between 1 USD and 485 million USD"))
    ln_sigma: Sigma

    @model_validator(mode="after")
    def _bounded_tail(self) -> LognormalParams:
        top = self.ln_mean + MONEY_TAIL_SIGMAS * self.ln_sigma
        if top > math.log(MAX_USD):
            raise ValueError(
                f"ln_mean + {MONEY_TAIL_SIGMAS:g} * ln_sigma = {top:.3g} exceeds ln({MAX_USD:g}) "
                f"= {math.log(MAX_USD):.3g}: draws would exceed the money bound of "
                f"{MAX_USD:g} USD; lower ln_mean or ln_sigma")
        return self


class UniformRange(StrictModel):
    """A uniform distribution on [low, high] of a ratio or share.

    Bounded by +-1,000: e.g. savings of up to 1,000 years of income.
    """

    low: float = Field(ge=-1000.0, le=1000.0)
    high: float = Field(ge=-1000.0, le=1000.0)

    @model_validator(mode="after")
    def _ordered(self) -> UniformRange:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self


class TenureShares(StrictModel):
    """A share per tenure (owner / renter)."""

    owner: Share = 0.0
    renter: Share = 0.0


class GeneratedPopulation(StrictModel):
    """Distributions to draw a synthetic population from (seeded by the experiment seed)."""

    owner_share: Share
    zone_shares: dict[str, Share] = Field(min_length=1)
    income_usd: LognormalParams = Field(description=(
        "households' annual income (owners' only when renter_income_usd is given)"))
    renter_income_usd: LognormalParams | None = Field(default=None, description=(
        "renters' annual income (null: renters' income follows income_usd, tenure-blind)"))
    structure_value_usd: LognormalParams = Field(description=(
        "owners' homes: replacement value of the structure (renters own none)"))
    contents_to_structure_ratio: float = Field(gt=0.0, le=10.0, description=(
        "owners' contents value as a share of their structure value"))
    renter_contents_usd: LognormalParams = Field(description=(
        "renters' contents value (their belongings; the building is the landlord's)"))
    savings_to_income: UniformRange
    initial_insured: dict[str, TenureShares] = {}
    initial_elevated: dict[str, TenureShares] = {}
    trust_insurance: UniformRange
    trust_neighbours: UniformRange

    @model_validator(mode="after")
    def _consistent(self) -> GeneratedPopulation:
        total = sum(self.zone_shares.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"zone_shares must sum to 1 (got {total:g})")
        for name, mapping in (("initial_insured", self.initial_insured),
                              ("initial_elevated", self.initial_elevated)):
            unknown = sorted(set(mapping) - set(self.zone_shares))
            if unknown:
                raise ValueError(
                    f"{name} names zones {unknown} that are not in zone_shares "
                    f"{sorted(self.zone_shares)}"
                )
        for name in ("trust_insurance", "trust_neighbours"):
            rng = getattr(self, name)
            if rng.low < 0 or rng.high > 1:
                raise ValueError(f"{name} must lie within [0, 1]")
        return self


class MarginalisedRule(StrictModel):
    """Which households belong to a marginalised group (MG).

    Those of the named tenures whose income is below ``income_below_usd``. The attribute is for
    analysis (the MG-NMG gap, benchmark B6); it is not stated to the decision makers, so that any
    gap comes from what differs in the world (income, savings, tenure), not from a label.
    """

    source: Source
    income_below_usd: Money = Field(description="annual income below which a household is MG")
    tenures: list[Literal["owner", "renter"]] = Field(
        default=["owner", "renter"], min_length=1, description="tenures the rule applies to")


class PopulationConfig(StrictModel):
    """Where the households come from: a CSV file or generated from distributions.

    ``file``: CSV in ``configs/populations/`` (columns documented in docs/configuration.md).
    ``generate``: distributions; ``size`` households are drawn. Exactly one must be given.
    ``marginalised``: the rule that marks marginalised households (or a ``marginalised``
    column of the CSV; with neither, the output column ``marginalised`` is empty).
    """

    source: Source
    size: int | None = Field(default=None, ge=1, le=10_000_000)
    file: FilePath | None = None
    generate: GeneratedPopulation | None = None
    marginalised: MarginalisedRule | None = None

    @model_validator(mode="after")
    def _one_source(self) -> PopulationConfig:
        if (self.file is None) == (self.generate is None):
            raise ValueError("give exactly one of 'file' (a CSV) or 'generate' (distributions)")
        if self.generate is not None and self.size is None:
            raise ValueError("'size' (number of households) is required with 'generate'")
        if self.file is not None and self.size is not None:
            raise ValueError("'size' applies to 'generate'; a CSV population has one household "
                             "per row (remove 'size')")
        return self


class FixedEvent(StrictModel):
    """One scheduled flood: the year and the depth (metres) per zone; unlisted zones stay dry."""

    year: int = Field(ge=1, le=MAX_YEAR, description=(
        "simulated year (1 = first); a year beyond the run's `years` never happens (a "
        "schedule may be longer than a run); at most 1000, the longest run"))
    depth_m: dict[str, Depth] = Field(min_length=1)


class HazardZone(StrictModel):
    """One zone of the hazard map: what households are told, and how events are drawn.

    ``annual_probability`` is the chance, in any year, that a flood reaches a home of the zone
    (the flood map's; an SFHA home has 1 % or more). An event reaches each home of its zone
    with probability ``flooded_share``; so in mode ``stochastic`` the zone has an event with
    probability ``annual_probability / flooded_share`` (at most 1). In a flood year the zone's
    depth is ``median_depth_m * exp(event_sigma * z)`` with one standard normal ``z`` per event,
    shared by the zones. Mode ``fixed`` takes the depths from its schedule and uses the map
    only for what households are told (and ``flooded_share``); in mode ``raster`` the fields
    are only the declared statement households are told (chance and typical depth).
    """

    annual_probability: Share
    median_depth_m: Depth
    event_sigma: Sigma = 0.0
    flooded_share: float = Field(default=1.0, gt=0.0, le=1.0, description=(
        "share of the zone's homes one event reaches (each home drawn independently); "
        "1 = every home"))

    @model_validator(mode="after")
    def _event_probability_below_one(self) -> HazardZone:
        if self.annual_probability > self.flooded_share:
            raise ValueError(
                f"annual_probability ({self.annual_probability:g}) exceeds flooded_share "
                f"({self.flooded_share:g}): even a flood every year would reach each home "
                "less often than that")
        return self

    @property
    def event_probability(self) -> float:
        """Annual chance of an event in the zone (``annual_probability / flooded_share``)."""
        return self.annual_probability / self.flooded_share


#: Hazard modes by name: the class that draws the floods, written as ``"module:Class"`` and
#: imported only when a run uses it (``governed_broker.sim.hazard.make_hazard``). A class is a
#: ``governed_broker.sim.hazard.Hazard`` built as ``Class(hazard_config, zones, seed, years,
#: events)``; a new mode is such a class plus one entry here.
HAZARD_MODES: dict[str, str] = {
    "fixed": "governed_broker.sim.hazard:FixedScheduleHazard",
    "stochastic": "governed_broker.sim.hazard:StochasticHazard",
    "raster": "governed_broker.sim.raster:RasterHazard",
}


#: The policy instruments the world composes (``governed_broker.sim.instruments.base``), by name,
#: in the order their hooks run in each phase: ``"name": "module:Class"`` of an ``Instrument``.
#: Every one is part of every run and acts while its section of the experiment is set; a new
#: instrument is such a class plus one entry here (docs/ARCHITECTURE.md, "Add a policy
#: instrument"). The lender's requirement comes before the certificates: a policy the lender
#: places ends a certificate, as one the household buys does.
INSTRUMENTS: dict[str, str] = {
    "premium_pricing": "governed_broker.sim.instruments.pricing:PremiumPricing",
    "mandatory_purchase": "governed_broker.sim.instruments.mandatory:MandatoryPurchase",
    "aid_certificates": "governed_broker.sim.instruments.certificates:AidCertificates",
    "elevation_grants": "governed_broker.sim.instruments.grants:ElevationGrants",
    "buyouts": "governed_broker.sim.instruments.buyouts:Buyouts",
}


def _one_of(names: list[str]) -> str:
    """Names for a message: ``'a', 'b' or 'c'``."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


class HazardConfig(StrictModel):
    """Which years flood, and how deep.

    ``zones``: the hazard map (``HazardZone`` per zone): what households are told about their
    zone, and how the shipped modes draw events. Both shipped modes need it.

    ``mode``: a name of ``HAZARD_MODES``; shipped are:

    ``fixed``: flood years listed in ``events`` (or in ``file``, a YAML with ``events:``);
    households are told the map's chance, never the schedule's frequency.
    ``stochastic``: one event draw per year, ``u ~ U(0,1)``; zone z has an event when
    ``u < annual_probability[z] / flooded_share[z]`` (a rarer event floods every more exposed
    zone too).
    ``raster``: each home gets its cell's depth in a yearly series of depth grids (``raster``,
    see ``governed_broker.config.raster``); ``zones`` is then the declared statement of what
    households are told (``annual_probability`` and ``median_depth_m`` as the typical depth
    per zone, from ``source``), never computed from the grids.

    ``household_sigma``: lognormal spread of each household's depth around its zone's depth.

    Drawn depths must stay physical: for every zone, ``median_depth_m * exp(3 * sqrt(
    event_sigma**2 + household_sigma**2))`` (a depth three standard deviations above the
    median) must not exceed ``MAX_DEPTH_M`` (20 m).
    """

    source: Source
    mode: str = Field(description="a name of HAZARD_MODES: fixed | stochastic | raster")
    events: list[FixedEvent] = []
    file: FilePath | None = None
    zones: dict[str, HazardZone] = {}
    household_sigma: Sigma = 0.0
    raster: RasterConfig | None = Field(default=None, description=(
        "mode raster: the depth grids, their calendar years and where homes stand"))

    @field_validator("mode")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in HAZARD_MODES:
            raise ValueError(f"unknown hazard mode {name!r}; registered: "
                             f"{_one_of(list(HAZARD_MODES))}")
        return name

    @model_validator(mode="after")
    def _mode_fields(self) -> HazardConfig:
        """Fields of the shipped modes (a registered mode's class checks what it reads)."""
        if self.mode in ("fixed", "stochastic") and not self.zones:
            raise ValueError(
                f"mode {self.mode!r} needs 'zones', the hazard map (per zone the annual chance "
                "a flood reaches a home, and its typical depth): what households are told")
        if self.mode == "fixed":
            if self.events and self.file is not None:
                raise ValueError("give 'events' or 'file', not both")
        elif self.mode == "stochastic":
            if self.events or self.file is not None:
                raise ValueError("'events'/'file' belong to mode 'fixed'")
        elif self.mode == "raster":
            self._check_raster()
        if self.mode != "raster" and self.raster is not None:
            raise ValueError("'raster' belongs to mode 'raster'")
        if self.mode != "raster":
            self._check_depth_tails()
        return self

    def _check_raster(self) -> None:
        if self.raster is None:
            raise ValueError("mode 'raster' needs 'raster' (the grids, start_year, placement)")
        if not self.zones:
            raise ValueError(
                "mode 'raster' needs 'zones': the declared annual chance and typical depth "
                "households are told per zone (e.g. the 1%-annual-chance SFHA), with 'source'")
        if self.events or self.file is not None:
            raise ValueError("'events'/'file' belong to mode 'fixed'")
        if self.household_sigma > 0:
            raise ValueError("mode 'raster' gives each home its cell's depth; household_sigma "
                             "must be 0")
        spread = sorted(z for z, spec in self.zones.items()
                        if spec.event_sigma > 0 or spec.flooded_share < 1)
        if spread:
            raise ValueError(f"zones {spread}: event_sigma and flooded_share have no meaning in "
                             "mode 'raster' (each home has its cell's depth; the zones only "
                             "state what households are told); remove them")

    def _check_depth_tails(self) -> None:
        for name, zone in self.zones.items():
            spread = math.hypot(zone.event_sigma, self.household_sigma)
            top = zone.median_depth_m * math.exp(DEPTH_TAIL_SIGMAS * spread)
            if top > MAX_DEPTH_M:
                raise ValueError(
                    f"zone {excerpt(name, 40)}: median_depth_m x exp({DEPTH_TAIL_SIGMAS:g} x "
                    f"sqrt(event_sigma^2 + household_sigma^2)) = {top:.3g} m exceeds "
                    f"{MAX_DEPTH_M:g} m: drawn floods deeper than any on record would not be rare; "
                    "lower the median depth or the spreads")


class DamageConfig(StrictModel):
    """Depth-damage table (YAML in ``configs/damage/``) used for structure and contents."""

    source: Source
    table: FilePath


class MandatoryPurchaseConfig(StrictModel):
    """The mandatory purchase requirement.

    Owners in the named zones (the SFHA) whose mortgage comes from a federally regulated or insured
    lender must hold flood insurance.

    Each owner of a named zone is drawn once (seeded): its mortgage requires insurance with
    probability ``mortgage_share``, and a required household's lender enforces the requirement
    while its second draw is below the year's compliance, ``compliance_share`` in the first
    year and ``compliance_change_per_year`` more each later year (within 0..1): a falling
    compliance releases households from the requirement one by one and never takes one back.
    An enforced household is insured every year it stays: when its own choice does not
    insure, the lender renews the policy and charges the premium (``lender_placed``), unless
    the household cannot pay it on top of its choice. A requirement that is not enforced
    changes nothing: that household insures by its own choice only.

    Households whose lender enforces the requirement in the first year start the run insured;
    the population's initial insured share of each zone and tenure is kept (the others keep
    their policies only as far as it leaves room), so ``population.generate.initial_insured``
    of an owner of these zones must be at least ``mortgage_share * compliance_share``
    (checked at load; ``sim.instruments.mandatory``).
    """

    source: Source
    zones: list[str] = Field(min_length=1, description=(
        "zones where the requirement applies (the Special Flood Hazard Area)"))
    mortgage_share: Share = Field(description=(
        "share of the zones' owners whose mortgage requires flood insurance"))
    compliance_share: Share = Field(description=(
        "share of required households whose lender enforces the requirement in the first "
        "year; the others may let the policy lapse"))
    compliance_change_per_year: UnitStep = Field(default=0.0, description=(
        "change of the enforced share each later year (negative: enforcement fades; 0, the "
        "default: constant, the requirement as it was first modelled)"))

    def compliance_in(self, year: int) -> float:
        """The share of required households whose lender enforces it in ``year`` (1-based)."""
        return min(1.0, max(0.0, self.compliance_share
                            + self.compliance_change_per_year * (year - 1)))


class PreferredBand(StrictModel):
    """One coverage combination of a preferred-risk table and its annual premium (dollars)."""

    building_usd: Money = 0.0
    contents_usd: Money
    premium_usd: Money


class PreferredLossHistory(StrictModel):
    """The flood loss history after which a home is no longer offered the banded premiums.

    The NFIP Preferred Risk Policy's eligibility rule; ``sim.money.preferred_ineligible``.

    A home becomes ineligible at ``large_payments`` flood payments of at least
    ``large_payment_usd`` each, or ``any_payments`` payments of any amount. A payment is an
    insurance claim payout, a disaster aid grant or a disaster loan: at most one of each per
    flood (federal disaster relief includes grants and loans). Payments are counted over the
    run; the model has no history before its first year. An ineligible home is rated like a
    home of any other zone (``rate_*_per_1000_usd``), for the rest of the run.
    """

    source: Source
    large_payment_usd: Money = Field(description=(
        "a payment of at least this counts towards large_payments (dollars)"))
    large_payments: int = Field(ge=1, le=100, description=(
        "this many payments of at least large_payment_usd end the eligibility"))
    any_payments: int = Field(ge=1, le=100, description=(
        "this many payments of any amount end the eligibility"))


class PreferredRiskConfig(StrictModel):
    """Fixed premiums by coverage band outside the SFHA.

    NFIP Preferred Risk Policy-style; ``sim.money.preferred_premium_usd``.

    Under ``pricing: legacy`` a household of the named zones pays, instead of the per-$1,000
    rates, the premium of the smallest band that covers what it insures up to the policy
    limits (the largest band when none does): an owner a ``building_contents`` band covering
    both its home and its contents, a renter a ``contents_only`` band. The premiums are the
    published ones, fees and assessments included, plus ``surcharge_usd``; neither ``loading``
    nor ``crs_discount`` applies to them (the insurer's levers move the rated premiums only).
    Under ``risk_based`` pricing the bands are not used: Risk Rating 2.0 replaced the
    Preferred Risk Policy. With ``loss_history`` a home with too many flood payments is
    rated instead (``PreferredLossHistory``). Payouts follow the section's limits and
    deductibles whatever the band, so the largest bands must reach the limits (checked at
    load).
    """

    source: Source
    zones: list[str] = Field(min_length=1, description=(
        "zones whose households are offered the banded premiums (outside the SFHA)"))
    building_contents: list[PreferredBand] = Field(min_length=1, description=(
        "owners' bands, by increasing coverage"))
    contents_only: list[PreferredBand] = Field(min_length=1, description=(
        "renters' contents-only bands, by increasing coverage"))
    surcharge_usd: Money = Field(default=0.0, description=(
        "added to every banded premium (dollars a year)"))
    loss_history: PreferredLossHistory | None = Field(default=None, description=(
        "flood payments after which a home is rated instead (null: never)"))

    @field_validator("building_contents", "contents_only")
    @classmethod
    def _increasing(cls, bands: list[PreferredBand], info: ValidationInfo
                    ) -> list[PreferredBand]:
        for lower, upper in zip(bands, bands[1:], strict=False):
            if (upper.building_usd < lower.building_usd or upper.contents_usd < lower.contents_usd
                    or (upper.building_usd, upper.contents_usd)
                    == (lower.building_usd, lower.contents_usd)):
                raise ValueError(f"{info.field_name}: bands must cover more and more (a band "
                                 f"of {upper.building_usd:g}/{upper.contents_usd:g} follows "
                                 f"{lower.building_usd:g}/{lower.contents_usd:g})")
        return bands


class PremiumPathConfig(StrictModel):
    """The NFIP's premiums over the years: a legacy index and the cap on a renewal's increase.

    ``sim.instruments.pricing``. ``legacy_index`` multiplies every legacy premium (rated and
    banded, fee included) from the year it names until the next year it names (1 before the
    first), as the NFIP's average premium per policy moved under Biggert-Waters 2012 and the
    Homeowner Flood Insurance Affordability Act 2014. Whatever the pricing, the premium of a
    policy renewed (the household's or its lender's, in force this year) rises at most
    ``max_increase_share`` over what it cost last year; a new policy, and a decrease, take
    the full premium at once (HFIAA section 5 caps an individual policy's yearly increase at
    18 %; Risk Rating 2.0 phases in its increases within that cap and gives its decreases at
    the first renewal).
    """

    source: Source
    legacy_index: dict[Annotated[int, Field(ge=1, le=MAX_YEAR)],
                       Annotated[float, Field(gt=0.0, le=100.0)]] = Field(
        default_factory=dict, description=(
            "simulated year -> factor on every legacy premium from that year on (1 before the "
            "first year listed)"))
    max_increase_share: NonNegative | None = Field(default=None, le=10.0, description=(
        "most a renewed policy's premium may rise over last year's, as a share (0.18: 18 %); "
        "null: no cap"))

    def legacy_factor(self, year: int) -> float:
        """The factor on legacy premiums in ``year`` (1-based)."""
        listed = [y for y in self.legacy_index if y <= year]
        return self.legacy_index[max(listed)] if listed else 1.0


class InsuranceConfig(StrictModel):
    """Flood insurance (NFIP-style).

    How premiums are rated, limits, deductibles, payout share; the mandatory purchase requirement
    (absent: no household is required to insure).

    ``pricing``: ``legacy`` rates every home alike per $1,000 of coverage
    (``rate_structure_per_1000_usd``, ``rate_contents_per_1000_usd``), as the NFIP's flat
    rates outside the rated zones did; ``risk_based`` rates each home by its own flood risk, in
    the manner of FEMA's Risk Rating 2.0: the expected annual claim, the annual chance of a
    flood in the home's zone times what the policy would pay for a typical flood of the zone
    at the home's first-floor height (raised by ``elevation.height_m`` when elevated). Either
    is multiplied by ``loading``, reduced by the community discount ``crs_discount`` and
    ``fee_usd`` is added; the rates stay in the file as the legacy arm of a comparison
    (``sim.money.premium_usd``). With ``preferred_risk``, legacy pricing charges the households
    of its zones banded premiums instead (``PreferredRiskConfig``). ``premium_path`` moves the
    premiums over the years (``PremiumPathConfig``): a policy change to ``risk_based`` pricing
    with the path's cap phases Risk Rating 2.0's increases in.
    """

    source: Source
    pricing: Literal["legacy", "risk_based"] = Field(default="legacy", description=(
        "legacy: rates per $1,000 of coverage, the same everywhere; risk_based: expected "
        "annual claim by zone and first-floor height (Risk Rating 2.0-style)"))
    rate_structure_per_1000_usd: float = Field(ge=0.0, le=1000.0, description=(
        "legacy pricing: dollars per $1,000 of structure coverage"))
    rate_contents_per_1000_usd: float = Field(ge=0.0, le=1000.0, description=(
        "legacy pricing: dollars per $1,000 of contents coverage"))
    loading: float = Field(default=1.0, gt=0.0, le=100.0, description=(
        "multiplies the rated premium (either pricing) before the fee"))
    crs_discount: Share = Field(default=0.0, description=(
        "community discount (Community Rating System-style) off the loaded premium, before "
        "the fee; 0.05 a class, at most 0.45 at class 1 (set each year by an insurer "
        "institution when there is one)"))
    fee_usd: Money = 0.0
    limit_structure_usd: Money
    limit_contents_usd: Money
    deductible_structure_usd: Money
    deductible_contents_usd: Money
    payout_share: Share = 1.0
    mandatory_purchase: MandatoryPurchaseConfig | None = None
    preferred_risk: PreferredRiskConfig | None = Field(default=None, description=(
        "legacy pricing: banded premiums in the named zones (Preferred Risk Policy-style)"))
    premium_path: PremiumPathConfig | None = Field(default=None, description=(
        "the premiums over the years: an index on legacy premiums, the cap on a renewal's "
        "increase (null: premiums as rated every year)"))

    @model_validator(mode="after")
    def _bands_reach_the_limits(self) -> InsuranceConfig:
        """Payouts follow the limits whatever the band, so the largest bands must cover the limits.

        Otherwise a household above the table would be paid more cover than it buys.
        """
        bands = self.preferred_risk
        if bands is None:
            return self
        top, renters = bands.building_contents[-1], bands.contents_only[-1]
        short = [f"{name} {got:g} < {limit_name} {limit:g}" for name, got, limit_name, limit in (
            ("building_contents[-1].building_usd", top.building_usd,
             "limit_structure_usd", self.limit_structure_usd),
            ("building_contents[-1].contents_usd", top.contents_usd,
             "limit_contents_usd", self.limit_contents_usd),
            ("contents_only[-1].contents_usd", renters.contents_usd,
             "limit_contents_usd", self.limit_contents_usd)) if got < limit]
        if short:
            raise ValueError(
                "preferred_risk's largest bands must cover the policy limits (payouts follow "
                f"the limits): {'; '.join(short)}; add bands up to the limits or lower them")
        return self


class ElevationConfig(StrictModel):
    """House elevation: height (metres), cost before subsidy, and the subsidy programme.

    The programme pays ``subsidy_share`` of the cost as a grant. With an annual
    ``subsidy_budget_usd`` it can fund ``floor(budget / grant)`` grants a year; they are
    offered before households decide (``sim.instruments.grants``), so every household is told
    the price it would really pay, and a grant not taken up is not passed on that year.
    """

    source: Source
    height_m: float = Field(gt=0.0, le=MAX_DEPTH_M)
    cost_usd: Money
    subsidy_share: Share = 0.0
    subsidy_budget_usd: Money | None = Field(default=None, description=(
        "the programme's budget a year (dollars); null: every household that may elevate is "
        "offered the grant"))
    subsidy_allocation: Literal["first_come", "by_need"] = Field(
        default="first_come", description=(
            "who is offered the grants a budget funds: first_come, in a seeded random order of "
            "application; by_need, lowest income first"))


class TenureAmounts(StrictModel):
    """A dollar amount per tenure (owner / renter)."""

    owner: Money
    renter: Money


class RelocationConfig(StrictModel):
    """Relocation: a moving cost per tenure.

    Owners additionally lose the part of the structure value that a buyout does not pay (``1 -
    buyout_share``).
    """

    source: Source
    moving_cost_usd: TenureAmounts
    buyout_share: Share = 1.0


class BuyoutConfig(StrictModel):
    """A buyout programme (FEMA HMGP / NJ Blue Acres-style; ``sim.instruments.buyouts``).

    After a flood and before households decide, the programme offers to buy the homes of owners
    whose home that flood left with a repetitive loss (``min_floods`` floods at the home) or
    substantial damage (structure damage of at least ``substantial_damage_share`` of the
    pre-flood structure value), at ``price_share`` of the pre-flood structure value. Accepting
    is an action whose effect is ``buyout`` (open only with an offer); the household leaves for
    good. With an annual budget, the year's new offers are made in the allocation order while
    their prices fit it, so the budget holds whatever the households choose. An offer stays
    open ``offer_years`` years at its price. With ``offer_delay_years`` the eligible owners apply
    in the flood's year (choosing the action whose effect is ``buyout`` is the application) and
    the programme makes its offers to the applicants that many years later.
    """

    source: Source
    min_floods: int = Field(default=2, ge=1, le=1000, description=(
        "floods at the home that make its owner eligible (repetitive loss)"))
    substantial_damage_share: Share | None = Field(default=0.5, description=(
        "also eligible when this year's structure damage reaches this share of the pre-flood "
        "structure value (null: not a criterion)"))
    price_share: Share = Field(description=(
        "share of the pre-flood structure value (today's value plus unrepaired damage) paid"))
    annual_budget_usd: Money | None = Field(default=None, description=(
        "the programme's budget a year (dollars); null: every eligible owner gets an offer"))
    allocation: Literal["first_come", "by_need"] = Field(default="first_come", description=(
        "order of the offers under a budget: first_come, a seeded random order; by_need, "
        "lowest income first"))
    offer_years: int = Field(default=1, ge=1, le=10, description=(
        "years an offer stays open at its price, the year it is made included (1, the "
        "default: it lapses with the year)"))
    offer_delay_years: int = Field(default=0, ge=0, le=5, description=(
        "years from an owner's application to the programme's offer (appraisal and funding); "
        "0, the default: owners do not apply, every eligible owner is offered in the flood's "
        "year"))


class GroupPolicyConfig(StrictModel):
    """Flood insurance that comes with disaster aid.

    FEMA Group Flood Insurance Policy-style; ``sim.instruments.certificates``.

    A household of the named zones (the SFHA) that receives an aid grant for a flood while
    uninsured, and has not received aid there before, is given a group certificate: it is
    insured for the floods of the next ``term_years`` years whatever it chooses, for up to
    ``coverage_usd`` of damage per flood (structure and contents together, after the insurance
    section's deductibles and payout share). The aid programme pays its premium
    (``premium_usd`` for the whole term, written by the insurer in the year of the grant),
    outside the household's accounts. Buying a policy of its own ends the certificate. With
    ``keep_insured``, every aid recipient of the zones must keep flood insurance from then on:
    one found uninsured at a later flood receives no grant.
    """

    source: Source
    zones: list[str] = Field(min_length=1, description=(
        "zones whose aid recipients get a certificate (the Special Flood Hazard Area)"))
    term_years: int = Field(ge=1, le=10, description=(
        "years of floods the certificate covers, from the year after the grant"))
    coverage_usd: Money = Field(description=(
        "most the certificate pays for one flood (structure and contents together)"))
    # default: run configurations written before this field existed stay loadable
    premium_usd: Money = Field(default=2400.0, description=(
        "premium the aid programme pays the insurer for one certificate's whole term "
        "(dollars, in the year of the grant; default $2,400 for 36 months, FEMA Other Needs "
        "Assistance, FEMA release reprinted by floydct.com, 27 Aug 2022)"))
    keep_insured: bool = Field(default=True, description=(
        "aid recipients of the zones must keep insurance to receive aid again"))


class AidConfig(StrictModel):
    """Disaster aid: a grant towards repairs that insurance did not pay (FEMA IHP-style).

    A flooded household with an uninsured repair need receives, with ``probability`` (one
    seeded draw per household and flood), a grant of at most ``max_grant_usd``; with a
    ``group_policy``, recipients of the named zones are insured by it for a few years and must
    then keep insurance to receive aid again.
    """

    source: Source
    probability: Share
    max_grant_usd: Money
    group_policy: GroupPolicyConfig | None = None


class LoanConfig(StrictModel):
    """Disaster loans (SBA-style) for repairs that insurance, aid and savings did not pay.

    A loan is an annuity at ``rate`` over ``term_years``; it is granted only while the
    payments of all the household's loans stay within ``max_payment_share`` of its income
    (repayment ability), up to ``max_structure_usd`` for the building and
    ``max_contents_usd`` for belongings per flood. Payments start the year after the loan.
    """

    source: Source
    rate: float = Field(ge=0.0, le=1.0, description="annual interest rate (0.04 = 4 %)")
    term_years: int = Field(ge=1, le=50)
    max_structure_usd: Money
    max_contents_usd: Money
    max_payment_share: Share = Field(description=(
        "largest share of income all loan payments together may take"))


class FinanceConfig(StrictModel):
    """How households pay: savings, the protection budget, repairs, loans and forced sales.

    Each year a household saves ``saving_share`` of its income. Premiums and measures are paid
    first from ``protection_budget_share`` of its income (spending instead of consuming), the
    rest from savings; a choice is affordable when its cost fits within both. Repairs of
    flood damage are financed in this order: insurance payout, disaster aid (``aid``),
    savings, a disaster loan (``loan``); what remains is left unrepaired and lowers the
    value of the home (or of the belongings). A household sells and leaves (a forced sale)
    when the structure damage it has left unrepaired reaches ``forced_sale_damage_share`` of
    its home's value, or when it cannot meet its loan payments from savings.
    """

    source: Source
    saving_share: Share = Field(description="share of income added to savings each year")
    protection_budget_share: Share = Field(description=(
        "share of income a household can spend on premiums and measures in a year without "
        "drawing on savings"))
    aid: AidConfig
    loan: LoanConfig
    forced_sale_damage_share: float = Field(gt=0.0, le=1.0, description=(
        "unrepaired structure damage, as a share of the home's undamaged value, at which the "
        "household sells and leaves"))


class NetworkConfig(StrictModel):
    """Neighbour graph (networkx, seeded).

    ``ring`` (each household linked to ``k`` nearest in id order), ``small_world`` (Watts-Strogatz,
    rewiring ``p``), ``lattice`` (2-D grid filled row by row, 4 neighbours) or ``none``.
    """

    kind: Literal["ring", "small_world", "lattice", "none"] = "small_world"
    k: int = Field(default=4, ge=2, le=MAX_NEIGHBOURS, description=(
        "neighbours per household (at most households - 1 are used); at most 150, about the "
        "number of people one knows (Dunbar), since the graph's memory grows with "
        "households x k"))
    p: Share = 0.1


class TrustConfig(StrictModel):
    """Yearly trust updates (added, then clamped to [0, 1]).

    Every step is a behavioural number of the experiment YAML (``experiments/baseline.yaml`` gives
    them with their source).
    """

    source: Source
    insurance_insured_flooded: UnitStep
    insurance_insured_safe: UnitStep
    insurance_uninsured_flooded: UnitStep
    insurance_uninsured_safe: UnitStep
    neighbours_high_action: UnitStep
    neighbours_flooded_low_action: UnitStep
    neighbours_otherwise: UnitStep
    high_action_rate: Share
    low_action_rate: Share


class ProspectParams(StrictModel):
    """Cumulative prospect theory for the baseline's choice among actions.

    ``utility: prospect``; ``sim.baseline``.

    Every outcome of a protective choice is a loss against the household's current wealth
    (a premium, a cost, a flood's damage), so an action's value is ``-(w(p) (C + L)**beta +
    (1 - w(p)) C**beta)`` with ``w(p) = p**g / (p**g + (1 - p)**g)**(1/g)`` the weight of
    the perceived chance ``p`` of a flood. Loss aversion multiplies every such value alike, so
    it does not change a choice and is not a parameter.
    """

    source: Source
    loss_curvature: float = Field(gt=0.0, le=1.0, description=(
        "beta of the value function for losses, v(-x) = -x**beta (1: linear)"))
    probability_weighting: float = Field(ge=0.28, le=1.0, description=(
        "gamma of the weighting function w(p) = p**g / (p**g + (1 - p)**g)**(1/g) (1: none; "
        "below about 0.28 w is not increasing)"))


class BaselineParams(StrictModel):
    """Parameters of the PMT / expected-utility baseline.

    All given in the experiment YAML with their source (``experiments/baseline.yaml``).

    ``utility`` is how the rule values the actions the PMT gate lets it choose among:
    ``expected`` is the expected log utility of wealth (subjective expected utility, as in
    DYNAMO/GEB), ``prospect`` cumulative prospect theory with the ``prospect`` parameters.
    See docs/decisions.md "Baseline decision maker".
    """

    source: Source
    # bounds: |beta| <= 100 keeps the perception decay's exponent far from overflow; a discount
    # rate above 100 % a year and horizons beyond two centuries mean no household planning
    beta_max: float = Field(ge=0.0, le=100.0)
    beta_coef: float = Field(ge=-100.0, le=100.0)
    beta_base: float = Field(ge=-100.0, le=100.0)
    beta_min: float = Field(ge=0.0, le=100.0)
    perception_sigma: Sigma = Field(description=(
        "spread (sigma of ln) of each household's fixed perception factor (median 1)"))
    max_perceived_probability: Share
    discount_rate: float = Field(ge=0.0, le=1.0)
    horizon_years: int = Field(ge=1, le=200)
    threat_income_scale: float = Field(gt=0.0, le=10.0)
    threat_min: Share
    coping_min: Share
    relocation_threat_min: Share
    implementation_probability: Share
    renewal_review_probability: Share = Field(default=1.0, description=(
        "yearly chance that a household with a policy in force weighs renewing it; otherwise "
        "it renews by default when doing nothing else (status-quo inertia). 1, the default: "
        "every year, the rule as before"))
    initial_policies: Literal["as_drawn", "by_perception"] = Field(
        default="as_drawn", description=(
            "who holds the voluntary policies at the start: as_drawn, the population's draw; "
            "by_perception, within each zone and tenure the same number of policies held by the "
            "households whose perception factor is highest (those the rule would keep insured)"))
    utility: Literal["expected", "prospect"] = Field(default="expected", description=(
        "how actions are valued: expected log utility of wealth, or prospect theory"))
    prospect: ProspectParams | None = Field(default=None, description=(
        "prospect theory's parameters (required with utility: prospect)"))

    @model_validator(mode="after")
    def _prospect_params(self) -> BaselineParams:
        if self.utility == "prospect" and self.prospect is None:
            raise ValueError("utility is prospect but prospect (its parameters) is missing; "
                             "copy the block from experiments/baseline_prospect.yaml")
        if self.utility == "expected" and self.prospect is not None:
            raise ValueError("prospect is set but utility is expected, so it would not be "
                             "used; set utility: prospect or remove the prospect block")
        return self


class DecisionConfig(StrictModel):
    """Who decides: the rule-based ``baseline`` or the governed ``llm`` broker.

    ``baseline`` holds the baseline rule's parameters; it is required when ``maker`` is
    ``baseline`` (an LLM experiment may leave it out).
    """

    maker: Literal["baseline", "llm"] = "baseline"
    baseline: BaselineParams | None = None

    @model_validator(mode="after")
    def _baseline_params(self) -> DecisionConfig:
        if self.maker == "baseline" and self.baseline is None:
            raise ValueError(
                "decision.maker is baseline but decision.baseline (the rule's parameters) is "
                "missing; copy the block from experiments/baseline.yaml"
            )
        return self


class OutputConfig(StrictModel):
    """What a run writes besides the CSVs."""

    plots: bool = True
    progress: bool = True
    memory_markdown: bool = True
