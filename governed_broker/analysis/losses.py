"""Money flows by year and household group: damages, payouts, premiums, out-of-pocket losses.

All amounts are US dollars of the simulation (nominal, not discounted), summed over the
household-years in each cell; ``n_household_years`` is the number of rows (active households).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from governed_broker.analysis.version import stamp

#: Output column -> agent-table column summed into it.
_SUMS = {
    "damage_usd": "damage_usd",
    "payout_usd": "payout_usd",
    "premium_usd": "premium_usd",
    "out_of_pocket_usd": "out_of_pocket_usd",
    "action_cost_usd": "action_cost_usd",
}


def losses_by_year(
    agents: pd.DataFrame, group_by: Sequence[str] | str | None = None
) -> pd.DataFrame:
    """Sum flood losses and adaptation spending by year (and group).

    Args:
        agents: Typed agent table.
        group_by: Optional column(s) such as ``"tenure"`` or ``"flood_zone"``.

    Returns:
        One row per year (and group): ``n_household_years``, ``n_flooded``, totals in USD
        (``damage_usd``, ``payout_usd``, ``premium_usd``, ``out_of_pocket_usd``,
        ``action_cost_usd``), ``mean_damage_per_flooded_usd`` (damage / flooded households;
        NaN in a year without flooded households) and ``payout_share_of_damage`` (payout /
        damage, 0..1; NaN without damage).
    """
    groups = [group_by] if isinstance(group_by, str) else list(group_by or [])
    keys = ["year", *groups]
    grouped = agents.groupby(keys, observed=True)
    out = grouped[list(_SUMS.values())].sum().rename(columns={v: k for k, v in _SUMS.items()})
    out.insert(0, "n_household_years", grouped.size())
    out.insert(1, "n_flooded", grouped["flooded"].sum().astype(int))
    flooded = out["n_flooded"].where(out["n_flooded"] > 0)
    out["mean_damage_per_flooded_usd"] = out["damage_usd"] / flooded
    out["payout_share_of_damage"] = out["payout_usd"] / out["damage_usd"].where(
        out["damage_usd"] > 0
    )
    return stamp(out.reset_index())
