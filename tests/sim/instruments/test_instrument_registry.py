"""Policy instruments come from a name registry.

A new one is an ``Instrument`` subclass plus one ``INSTRUMENTS`` entry.

``PremiumAssistance`` below is such a class (here, in this test file): households with an
income under ``LIMIT_USD`` pay half the premium of any choice that insures (``amend``), and it
counts, per household, the years it paid (its state, ``execute``). Registering it lets a run
use it end to end, checkpoint and resume included; nothing else of the package changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.world import INSTRUMENTS
from governed_broker.contracts.decision import Decision
from governed_broker.contracts.effects import traits_of
from governed_broker.runner import run_experiment
from governed_broker.sim import FloodModel
from governed_broker.sim.effects import Executed, Priced
from governed_broker.sim.instruments.base import Instrument, Pricing, World

LIMIT_USD = 60_000.0


class PremiumAssistance(Instrument):
    """Half the premium of insuring choices for households under ``LIMIT_USD``."""

    name = "premium_assistance"

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.arrays = {"assisted_years": np.zeros(len(world.hh.is_owner), dtype=np.int64)}

    def _eligible(self) -> np.ndarray:
        return self.world.hh.income_usd[self.world.current.idx] < LIMIT_USD

    def amend(self, pricing: Pricing) -> None:
        half = np.where(self._eligible(), 0.5, 0.0)
        for effect, priced in pricing.priced.items():
            if traits_of(effect).insures:
                pricing.priced[effect] = Priced(
                    cost_usd=priced.cost_usd - half * priced.premium_usd,
                    premium_usd=priced.premium_usd * (1.0 - half),
                    loss_usd=priced.loss_usd, open_to=priced.open_to)

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        paid = done.insured & self._eligible()
        self.arrays["assisted_years"][self.world.current.idx] += paid
        return insured

    def facts(self) -> list[dict[str, Any]]:
        return [{} for _ in self.world.current.idx]


@pytest.fixture
def assistance(monkeypatch) -> None:
    """``PremiumAssistance`` registered as ``premium_assistance``."""
    monkeypatch.setitem(INSTRUMENTS, "premium_assistance", f"{__name__}:PremiumAssistance")


class Insure:
    """Buys insurance every year."""

    name = "insure"

    def decide(self, situations):
        return [Decision(s.agent_id, "buy_insurance", "buy_insurance", "baseline")
                for s in situations]

    def end_year(self, year, households) -> None:
        pass


def _premiums(config) -> pd.DataFrame:
    model = FloodModel(config, Insure())
    rows = []
    for _ in range(config.years):
        model.step()
        cols = model.last_agent_columns
        rows.append(pd.DataFrame({k: cols[k] for k in ("year", "agent_id", "income_usd",
                                                       "premium_usd")}))
    return pd.concat(rows)


def test_a_registered_instrument_takes_part_in_the_world(experiments, monkeypatch,
                                                         assistance) -> None:
    config = experiments.config(["years=3", "population.size=30",
                                 "insurance.mandatory_purchase=null"])
    helped = _premiums(config)
    monkeypatch.delitem(INSTRUMENTS, "premium_assistance")
    both = helped.merge(_premiums(config), on=["year", "agent_id"], suffixes=("", "_plain"))
    low = both["income_usd"] < LIMIT_USD
    assert len(both) == len(helped) and low.any() and (~low).any()
    np.testing.assert_allclose(both["premium_usd"][low], 0.5 * both["premium_usd_plain"][low])
    np.testing.assert_allclose(both["premium_usd"][~low], both["premium_usd_plain"][~low])


def test_a_run_with_it_writes_its_outputs(experiments, tmp_path, assistance) -> None:
    config = experiments.config(["years=2", "population.size=10"])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    assert len(pd.read_csv(out / "agents_yearly.csv")) == 20


def test_its_state_is_checkpointed_and_restored(experiments, assistance) -> None:
    config = experiments.config(["years=3", "population.size=30"])
    model = FloodModel(config, Insure())
    for _ in range(2):
        model.step()
    arrays, meta = model.state()
    assisted = model.instrument("premium_assistance").arrays["assisted_years"]
    assert assisted.max() == 2 and np.array_equal(arrays["assisted_years"], assisted)
    fresh = FloodModel(config, Insure())
    fresh.restore(arrays, meta)
    assert np.array_equal(fresh.instrument("premium_assistance").arrays["assisted_years"],
                          assisted)


def test_a_broken_registry_entry_says_so(monkeypatch, experiments) -> None:
    monkeypatch.setitem(INSTRUMENTS, "ghost", "no_such_module:Ghost")
    config = experiments.config(["years=1", "population.size=3"])
    with pytest.raises(ConfigError, match="instrument 'ghost': cannot load its class "
                                          "'no_such_module:Ghost'"):
        FloodModel(config, None)
