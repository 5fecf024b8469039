"""What each household is told this year: its frozen ``HouseholdSituation``.

The situation states the household's own facts, this year's flood, what the neighbours did,
the terms of every action (``sim.quote``), what each instrument tells it
(``Instrument.facts``) and what it remembers. The flood model builds its households' situations
with ``situations``; a validity vignette's is built with it too, in a world of one household
(``sim.world_of_one``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from governed_broker.contracts.decision import HouseholdSituation, SituationFacts, TypicalFlood
from governed_broker.sim.fastbuild import build
from governed_broker.sim.instruments.base import Instrument, World
from governed_broker.sim.year_state import Quote


def allowed_actions(quote: Quote) -> list[tuple[str, ...]]:
    """Per active household, the actions open to it (in the domain's order)."""
    acts = list(quote.actions)
    allowed = quote.table("allowed")
    # a few distinct allowed sets: build each tuple once
    patterns, key = np.unique(allowed, axis=0, return_inverse=True)
    tuples = [tuple(a for a, ok in zip(acts, row, strict=True) if ok)
              for row in patterns.tolist()]
    return [tuples[k] for k in key.reshape(-1).tolist()]


def situations(world: World, instruments: Sequence[Instrument],
               allowed: Sequence[tuple[str, ...]],
               recalled: Sequence[dict[str, Any] | None] | None) -> list[HouseholdSituation]:
    """One frozen situation per active household, in agent-id order.

    Args:
        world: The world after this year's quote (``current.options``).
        instruments: Its instruments.
        allowed: The actions open to each household (``allowed_actions``, or another order).
        recalled: What each household's memory retrieved (``WorldMemory.perceive``; None
            without memory).
    """
    out = []
    facts = _world_facts(world, instruments)
    for j, fields in enumerate(_stated_facts(world)):
        memory = None if recalled is None else recalled[j]
        told = facts[j]
        if memory is not None:
            told.update(knowledge_facts=memory["knowledge_facts"],
                        heuristics=memory["heuristics"])
        fields.update(allowed_actions=allowed[j],
                      memories=() if memory is None else memory["memories"],
                      facts=build(SituationFacts, {**_NO_FACTS, **told}))
        out.append(build(HouseholdSituation, fields))
    return out


#: Every fact of ``SituationFacts`` at its default (a household told nothing more).
_NO_FACTS = {f.name: getattr(SituationFacts(), f.name) for f in dataclasses.fields(SituationFacts)}


def _world_facts(world: World, instruments: Sequence[Instrument]) -> list[dict[str, Any]]:
    """Per active household, the ``SituationFacts`` the world states, by name.

    Each action's loss of a typical flood and premium, the typical flood, the spending room, and
    what each instrument tells it.
    """
    c, hh, idx = world.current, world.hh, world.current.idx
    q = c.options
    acts = list(q.actions)
    loss, premium = (q.table(term).tolist() for term in ("loss_usd", "premium_usd"))
    depth = world.hazard.typical_depth_m[hh.zone_index[idx]].tolist()
    damage = q.typical_damage_usd.tolist()
    room = q.spending_room_usd.tolist()
    told = [told for told in (i.facts() for i in instruments) if told is not None]
    return [{"loss_if_flood_usd": dict(zip(acts, loss[j], strict=True)),
             "premium_usd": dict(zip(acts, premium[j], strict=True)),
             "typical_flood": build(TypicalFlood, {"depth_m": depth[j],
                                                   "damage_usd": damage[j]}),
             "spending_room_usd": room[j],
             **{k: v for t in told for k, v in t[j].items()}}
            for j in range(len(idx))]


def _stated_facts(world: World) -> list[dict[str, Any]]:
    """Per active household, the ``HouseholdSituation`` fields the world states, by name."""
    c, hh, idx = world.current, world.hh, world.current.idx
    q = c.options
    acts = list(q.actions)
    columns = {
        "agent_id": idx + 1, "tenure": np.where(hh.is_owner[idx], "owner", "renter"),
        "flood_zone": np.asarray(world.zones, dtype=object)[hh.zone_index[idx]],
        "income_usd": hh.income_usd[idx], "savings_usd": hh.savings_usd[idx],
        "structure_value_usd": hh.structure_value_usd[idx],
        "contents_value_usd": hh.contents_value_usd[idx],
        "elevated": c.elevated_before, "insured": c.insured_before, "flooded": c.flooded,
        "depth_m": c.depth_m, "damage_usd": c.damage_usd, "payout_usd": c.payout_usd,
        "floods_experienced": hh.floods_experienced[idx],
        "flood_probability": world.hazard.probability[hh.zone_index[idx]],
        "trust_insurance": c.trust_insurance, "trust_neighbours": c.trust_neighbours,
        "debt_usd": c.debt_before_usd + c.repairs.loan_usd,
        "unrepaired_damage_usd": hh.unrepaired_usd[idx],
    }
    values = [v.tolist() for v in columns.values()]
    share_names = list(c.neighbour_shares)
    shares = zip(*(v.tolist() for v in c.neighbour_shares.values()), strict=True)
    cost, afford = (q.table(term).tolist() for term in ("cost_usd", "affordable"))
    values += [
        [None if np.isnan(v) else int(v) for v in hh.years_since_flood[idx].tolist()],
        [dict(zip(share_names, s, strict=True)) for s in shares],
        [dict(zip(acts, row, strict=True)) for row in cost],
        [dict(zip(acts, row, strict=True)) for row in afford],
    ]
    names = [*columns, "years_since_flood", "neighbour_shares", "action_costs_usd",
             "affordable", "year"]
    year = world.year
    return [dict(zip(names, (*row, year), strict=True))
            for row in zip(*values, strict=True)]
