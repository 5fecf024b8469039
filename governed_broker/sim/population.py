"""Household populations: read from a CSV or drawn from the YAML distributions (seeded).

Generation (docs/configuration.md): tenure ~ Bernoulli(owner_share); zone ~ Categorical
(zone_shares); income ~ lognormal (renters' own lognormal when renter_income_usd is given);
owners: structure value ~ lognormal and contents value = contents_to_structure_ratio *
structure value; renters: no structure (the building is the landlord's) and contents value ~
its own lognormal; savings = U(low, high) * income; initial insurance and elevation ~
Bernoulli(share per zone and tenure); trust ~ uniform ranges.

Marginalised households (``population.marginalised``): income below the rule's threshold and
tenure among its tenures; or the CSV's ``marginalised`` column; otherwise unknown (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from governed_broker.config.world import GeneratedPopulation, MarginalisedRule, PopulationConfig
from governed_broker.seeding import child_rng


@dataclass
class Population:
    """Initial household attributes, one array entry per household (index = agent id - 1)."""

    is_owner: np.ndarray
    zone: np.ndarray  # zone names (object array)
    income_usd: np.ndarray
    savings_usd: np.ndarray
    structure_value_usd: np.ndarray
    contents_value_usd: np.ndarray
    elevated: np.ndarray
    insured: np.ndarray
    trust_insurance: np.ndarray
    trust_neighbours: np.ndarray
    #: Where each home stands in the hazard grids' coordinates (None: not given).
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    #: Belongs to a marginalised group (None: the population does not say).
    marginalised: np.ndarray | None = None

    @property
    def size(self) -> int:
        """Number of households."""
        return len(self.is_owner)


def load_population(config: PopulationConfig, seed: int, resolve=lambda p: Path(p)) -> Population:
    """The experiment's initial population (CSV file or generated).

    Marginalised households marked by the rule when one is given.
    """
    pop = _initial_population(config, seed, resolve)
    if config.marginalised is not None:
        pop.marginalised = marginalised_by_rule(config.marginalised, pop)
    return pop


def marginalised_by_rule(rule: MarginalisedRule, pop: Population) -> np.ndarray:
    """Households of the rule's tenures with income below its threshold."""
    tenure_ok = np.where(pop.is_owner, "owner" in rule.tenures, "renter" in rule.tenures)
    return tenure_ok & (pop.income_usd < rule.income_below_usd)


def _initial_population(config: PopulationConfig, seed: int, resolve) -> Population:
    if config.file is not None:
        from governed_broker.config.loader import read_population_csv

        frame = read_population_csv(resolve(config.file))
        return Population(
            is_owner=(frame["tenure"] == "owner").to_numpy(),
            zone=frame["flood_zone"].to_numpy(dtype=object),
            income_usd=frame["income_usd"].to_numpy(float),
            savings_usd=frame["savings_usd"].to_numpy(float),
            structure_value_usd=np.where(
                frame["tenure"] == "owner", frame["structure_value_usd"].to_numpy(float), 0.0
            ),
            contents_value_usd=frame["contents_value_usd"].to_numpy(float),
            elevated=frame["elevated"].to_numpy(bool) & (frame["tenure"] == "owner").to_numpy(),
            insured=frame["insured"].to_numpy(bool),
            trust_insurance=frame["trust_insurance"].to_numpy(float),
            trust_neighbours=frame["trust_neighbours"].to_numpy(float),
            x=frame["x"].to_numpy(float) if "x" in frame.columns else None,
            y=frame["y"].to_numpy(float) if "y" in frame.columns else None,
            marginalised=(frame["marginalised"].to_numpy(bool)
                          if "marginalised" in frame.columns else None),
        )
    return generate_population(config.generate, config.size, seed)


def generate_population(gen: GeneratedPopulation, n: int, seed: int) -> Population:
    """Draw ``n`` households from the distributions (generator derived from the seed)."""
    rng = child_rng(seed, "population")
    is_owner = rng.random(n) < gen.owner_share
    zones = list(gen.zone_shares)
    probs = np.array([gen.zone_shares[z] for z in zones])
    zone = np.asarray(zones, dtype=object)[rng.choice(len(zones), size=n, p=probs / probs.sum())]
    income = _income(rng, gen, is_owner)
    structure = rng.lognormal(gen.structure_value_usd.ln_mean, gen.structure_value_usd.ln_sigma,
                              n)
    renter_contents = rng.lognormal(gen.renter_contents_usd.ln_mean,
                                    gen.renter_contents_usd.ln_sigma, n)
    savings = rng.uniform(gen.savings_to_income.low, gen.savings_to_income.high, n) * income
    insured = _bernoulli_by_zone(rng, gen.initial_insured, zone, is_owner)
    elevated = _bernoulli_by_zone(rng, gen.initial_elevated, zone, is_owner) & is_owner
    return Population(
        is_owner=is_owner,
        zone=zone,
        income_usd=income,
        savings_usd=savings,
        structure_value_usd=np.where(is_owner, structure, 0.0),
        contents_value_usd=np.where(is_owner, gen.contents_to_structure_ratio * structure,
                                    renter_contents),
        elevated=elevated,
        insured=insured,
        trust_insurance=rng.uniform(gen.trust_insurance.low, gen.trust_insurance.high, n),
        trust_neighbours=rng.uniform(gen.trust_neighbours.low, gen.trust_neighbours.high, n),
    )


def _income(rng: np.random.Generator, gen: GeneratedPopulation,
            is_owner: np.ndarray) -> np.ndarray:
    """Annual income (dollars).

    One lognormal draw per household, from the renters' distribution for renters when
    ``renter_income_usd`` is given (the same number of draws either way, so the draws after it do
    not move).
    """
    own = gen.income_usd
    rent = gen.renter_income_usd
    if rent is None:
        return rng.lognormal(own.ln_mean, own.ln_sigma, len(is_owner))
    return rng.lognormal(np.where(is_owner, own.ln_mean, rent.ln_mean),
                         np.where(is_owner, own.ln_sigma, rent.ln_sigma))


def _bernoulli_by_zone(rng, shares, zone: np.ndarray, is_owner: np.ndarray) -> np.ndarray:
    """Bernoulli draws with a probability per (zone, tenure); unlisted zones get 0."""
    p = np.zeros(len(zone))
    for name, by_tenure in shares.items():
        in_zone = zone == name
        p[in_zone & is_owner] = by_tenure.owner
        p[in_zone & ~is_owner] = by_tenure.renter
    return rng.random(len(zone)) < p
