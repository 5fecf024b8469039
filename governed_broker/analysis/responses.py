"""How households respond to floods: insurance of flooded versus dry neighbours.

The literature finds that flood-insurance take-up rises after a flood, most among those who
were flooded, and decays over a few years (Gallagher 2014; Kousky 2017;
``shared/hindcast_data/published_findings.csv``). ``insurance_response`` compares, in every
zone and year in which some households flooded and some did not, the change in insurance of
the flooded households with that of the dry ones of the same zone:

* rows: households that stayed (``relocated_after`` false): a household that leaves drops its
  policy by leaving, which says nothing about its wish to insure;
* change per household: ``insured_after - insured_before`` (+1 bought, -1 lapsed, 0 kept or
  stayed uninsured), i.e. the policy for next year's flood minus the one in force this year;
* ``difference`` = mean change of the flooded minus mean change of the dry households.

A positive difference means flooded households insure more than their dry neighbours in the
year of the flood.

``post_flood_inaction`` asks what flooded households did, in five groups: those that could act
(not elevated before the flood, not insured whatever they choose, some protective action
open and affordable, and a decision of their own), the already elevated, those insured whatever
they choose (group ``required``: their mortgage lender enforces the mandatory purchase of
insurance, ``insurance_required``, or an aid certificate covers next year's flood,
``group_certificate``; "doing nothing" leaves them insured), those with no protective
action they could take or pay for, and those for whom the broker executed its fallback. Only the
first is behaviour in the sense of the B5 benchmark (``analysis.benchmarks``); the others are
state or broker outcomes and are reported apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from governed_broker.analysis.schema import effects_of
from governed_broker.analysis.version import stamp
from governed_broker.contracts.decision import FALLBACK_STATUSES

#: The groups of flooded household-years, in order (see the module docstring).
FLOOD_GROUPS = ("could_act", "elevated", "required", "no_means", "fallback")


def insurance_response(agents: pd.DataFrame, same_zone: bool = True) -> pd.DataFrame:
    """The insurance change of flooded versus dry households, per zone and year.

    Args:
        agents: Typed agent table of one run.
        same_zone: Compare within each zone (default); False compares all flooded with all
            dry households of the year (``flood_zone`` is then ``"all"``), which is
            computable also when a flood reaches every home of its zone.

    Returns:
        One row per (year, flood_zone) with both flooded and dry households that stayed:
        ``n_flooded``, ``n_dry``, ``change_flooded``, ``change_dry`` (mean of
        ``insured_after - insured_before``, -1..1) and ``difference`` (flooded minus dry).
    """
    stay = agents[~agents["relocated_after"].astype(bool)]
    change = stay["insured_after"].astype(int) - stay["insured_before"].astype(int)
    zone = stay["flood_zone"] if same_zone else pd.Series("all", index=stay.index)
    frame = pd.DataFrame({"year": stay["year"].astype(int), "flood_zone": zone,
                          "flooded": stay["flooded"].astype(bool), "change": change})
    grouped = frame.groupby(["year", "flood_zone", "flooded"], observed=True)["change"]
    wide = grouped.agg(["size", "mean"]).unstack("flooded")
    columns = ["year", "flood_zone", "n_flooded", "n_dry", "change_flooded", "change_dry",
               "difference"]
    if True not in wide.columns.get_level_values(1) or \
            False not in wide.columns.get_level_values(1):
        return stamp(pd.DataFrame(columns=columns))
    out = pd.DataFrame({
        "n_flooded": wide[("size", True)], "n_dry": wide[("size", False)],
        "change_flooded": wide[("mean", True)], "change_dry": wide[("mean", False)],
    }).dropna()
    out["n_flooded"] = out["n_flooded"].astype(int)
    out["n_dry"] = out["n_dry"].astype(int)
    out["difference"] = out["change_flooded"] - out["change_dry"]
    return stamp(out.reset_index()[columns])


def post_flood_rows(agents: pd.DataFrame) -> pd.DataFrame:
    """Every flooded household-year.

    ``year, agent_id, group`` (``FLOOD_GROUPS``) and ``inaction`` (the executed action has no
    effect).
    """
    flooded = agents[agents["flooded"].astype(bool)]
    fallback = flooded["status"].isin(FALLBACK_STATUSES).to_numpy()
    elevated = flooded["elevated_before"].astype(bool).to_numpy()
    required = flooded["insurance_required"].astype(bool).to_numpy()
    if "group_certificate" in flooded.columns:  # runs made before the group policy lack it
        required = required | flooded["group_certificate"].astype(bool).to_numpy()
    means = flooded["could_protect"].astype(bool).to_numpy()
    group = np.select([fallback, elevated, required, ~means],
                      ["fallback", "elevated", "required", "no_means"], "could_act")
    return pd.DataFrame({"year": flooded["year"].astype(int).to_numpy(),
                         "agent_id": flooded["agent_id"].astype(int).to_numpy(), "group": group,
                         "inaction": (effects_of(flooded, "executed_action") == "none")
                         .to_numpy(dtype=bool)})


def post_flood_inaction(agents: pd.DataFrame) -> pd.DataFrame:
    """Inaction after a flood, by group (``FLOOD_GROUPS``).

    Returns:
        One row per group: ``group``, ``n`` (flooded household-years), ``n_inaction`` and
        ``share_inaction`` (fraction 0..1; NaN for an empty group).
    """
    rows = post_flood_rows(agents)
    out = []
    for group in FLOOD_GROUPS:
        part = rows.loc[rows["group"] == group, "inaction"]
        out.append({"group": group, "n": int(len(part)), "n_inaction": int(part.sum()),
                    "share_inaction": float(part.mean()) if len(part) else float("nan")})
    return stamp(pd.DataFrame(out))
