"""The adaptation gap between marginalised (MG) and other (NMG) households.

And how much of it is composition.

A household has *adapted* when it was insured, elevated or relocated after execution in some
year of the run (``household_states``: ``ever_insured | ever_elevated | ever_relocated``); the
shares are over the households present in the last year, as benchmark B6 counts them
(``analysis.benchmarks``, measure ``mg_nmg_gap``).

MG and NMG households differ in more than income: in the default world renters are more often
MG, and a renter cannot elevate and starts less often insured. A gap can therefore come from
*who* the MG households are, without any household adapting differently from one of its own
tenure. ``adaptation_gap`` separates the two by direct standardisation over tenure:

* ``within`` = sum over tenures t of w_t * (adapted NMG_t - adapted MG_t), with w_t the share of
  the MG households in tenure t: the gap if NMG households had the MG households' tenure mix;
* ``composition`` = total gap - ``within``: the part due to the different tenure mix.

A tenure in which one group has no household contributes nothing to ``within`` (its weight's
gap is unknown), so ``composition`` then also holds that tenure's share.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.trajectories import household_states
from governed_broker.analysis.version import stamp


def adapted_households(agents: pd.DataFrame) -> pd.DataFrame:
    """The households of the last year, whether each ever adapted, its tenure and MG flag.

    Args:
        agents: Typed agent table (``load_run(...).agents``) with a ``marginalised`` column.

    Returns:
        One row per household: ``agent_id``, ``tenure``, ``marginalised`` (bool; NaN when the
        run has no MG attribute) and ``adapted`` (bool).
    """
    states = household_states(agents)
    last = states[states["year"] == states["year"].max()]
    first = agents[agents["year"] == agents["year"].min()].set_index("agent_id")
    first = first.loc[last["agent_id"]]
    marginalised = (first["marginalised"] if "marginalised" in first.columns
                    else pd.Series(np.nan, index=first.index))
    return pd.DataFrame({
        "agent_id": last["agent_id"].to_numpy(),
        "tenure": first["tenure"].to_numpy(),
        "marginalised": marginalised.to_numpy(),
        "adapted": (last["ever_insured"] | last["ever_elevated"]
                    | last["ever_relocated"]).to_numpy(bool),
    })


def adaptation_gap(agents: pd.DataFrame) -> pd.DataFrame:
    """Adapted shares of NMG and MG households, overall and per tenure.

    And the decomposition of the overall gap (module docstring):
    ``household_gap(adapted_households(agents))``.

    Args:
        agents: Typed agent table with a boolean ``marginalised`` column.
    """
    return household_gap(adapted_households(agents))


def household_gap(rows: pd.DataFrame) -> pd.DataFrame:
    """The gap table of ``adapted_households`` rows.

    Returns:
        Rows ``group`` (``all``, each tenure, ``within``, ``composition``), ``n_nmg``,
        ``n_mg``, ``adapted_nmg``, ``adapted_mg`` (fractions 0..1; NaN for an empty group) and
        ``gap`` (NMG minus MG). The ``within`` and ``composition`` rows give the overall
        counts and a ``gap`` only (their shares are NaN).
        Empty when the run has no MG attribute or no household of one of the groups.

    Raises:
        AnalysisInputError: Some households have an MG value and others none (a table put
            together from runs with and without the attribute): counting the missing ones as
            either group would bias the gap.
    """
    missing = int(rows["marginalised"].isna().sum())
    if 0 < missing < len(rows):
        raise AnalysisInputError(
            f"column 'marginalised': {missing} of {len(rows)} households have no value; the "
            "MG-NMG gap needs it for every household (analyse runs with and without an MG "
            "attribute separately)")
    if missing:  # no MG attribute at all
        return _empty()
    mg = rows["marginalised"].astype(bool)
    if mg.all() or not mg.any():
        return _empty()
    out = [_row("all", rows, mg)]
    within = 0.0
    for tenure in sorted(rows["tenure"].unique()):
        part = (rows["tenure"] == tenure).to_numpy()
        row = _row(tenure, rows[part], mg[part])
        out.append(row)
        if row["n_nmg"] and row["n_mg"]:
            within += row["n_mg"] / int(mg.sum()) * row["gap"]
    total = out[0]["gap"]
    counts = {"n_nmg": out[0]["n_nmg"], "n_mg": out[0]["n_mg"], "adapted_nmg": np.nan,
              "adapted_mg": np.nan}
    out += [{"group": "within", **counts, "gap": within},
            {"group": "composition", **counts, "gap": total - within}]
    return stamp(pd.DataFrame(out))


def _empty() -> pd.DataFrame:
    return stamp(pd.DataFrame(columns=["group", "n_nmg", "n_mg", "adapted_nmg", "adapted_mg",
                                       "gap"]))


def _row(group: str, rows: pd.DataFrame, mg: pd.Series) -> dict:
    adapted = rows["adapted"].to_numpy(bool)
    mg = mg.to_numpy(bool)
    nmg_share = float(adapted[~mg].mean()) if (~mg).any() else float("nan")
    mg_share = float(adapted[mg].mean()) if mg.any() else float("nan")
    return {"group": group, "n_nmg": int((~mg).sum()), "n_mg": int(mg.sum()),
            "adapted_nmg": nmg_share, "adapted_mg": mg_share, "gap": nmg_share - mg_share}
