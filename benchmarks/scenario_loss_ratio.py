"""Expected annual payout against premium, per zone and tenure, of an experiment's scenario.

Usage: python benchmarks/scenario_loss_ratio.py [EXPERIMENT] [--households 20000] [--events 200]

Draws a large population from the experiment's distributions, gives every household a policy,
and estimates its expected annual payout as ``annual_probability`` (the chance a flood reaches
the home) times the mean payout over ``--events`` simulated floods (event and household depth
spreads of the hazard map); prints the mean premium, the expected payout, the loss ratio
(expected payouts over premiums) and the expected annual damage as a share of income. Needs a
generated population (``population.generate``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from governed_broker.config import load_experiment
from governed_broker.config.damage import load_damage_table
from governed_broker.seeding import child_rng
from governed_broker.sim import money
from governed_broker.sim.damage import damages_usd
from governed_broker.sim.population import generate_population

DEFAULT = Path(__file__).resolve().parent.parent / "experiments" / "baseline.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--households", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args()
    config = load_experiment(args.experiment)
    table = load_damage_table(config.resolve_path(config.damage.table))
    pop = generate_population(config.population.generate, args.households, config.seed)
    rng = child_rng(config.seed, "loss-ratio")
    ins, hazard = config.insurance, config.hazard
    preferred = (np.isin(pop.zone, ins.preferred_risk.zones) if ins.preferred_risk is not None
                 else False)
    premium = money.premium_usd(ins, pop.structure_value_usd, pop.contents_value_usd,
                                pop.is_owner, preferred=preferred)
    print(f"{args.experiment}: {args.households} households, {args.events} floods per zone")
    for zone, spec in hazard.zones.items():
        home = pop.zone == zone
        payouts, damages = np.zeros(home.sum()), np.zeros(home.sum())
        for _ in range(args.events):
            depth = spec.median_depth_m * np.exp(
                spec.event_sigma * rng.standard_normal()
                + hazard.household_sigma * rng.standard_normal(home.sum()))
            d_s, d_c = damages_usd(table, depth, pop.structure_value_usd[home],
                                   pop.contents_value_usd[home])
            payouts += money.payout_usd(ins, d_s, d_c, pop.is_owner[home], True)
            damages += d_s + d_c
        expected = payouts / args.events * spec.annual_probability
        ead = damages / args.events * spec.annual_probability
        for tenure, mask in (("owner", pop.is_owner[home]), ("renter", ~pop.is_owner[home])):
            print(f"  {zone:<8} {tenure:<7} premium {premium[home][mask].mean():8,.0f}  "
                  f"expected payout {expected[mask].mean():8,.0f}  loss ratio "
                  f"{expected[mask].sum() / premium[home][mask].sum():5.2f}  expected damage / "
                  f"income {np.mean(ead[mask] / pop.income_usd[home][mask]):.3f}")


if __name__ == "__main__":
    main()
