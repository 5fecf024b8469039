"""Adaptation trajectories: who is insured, elevated, relocated, by year.

States come from the ``*_after`` columns of ``agents_yearly.csv``, i.e. the state after the
year's *executed* action (a proposal the broker rejected or the world refused never counts).
Shares are of the whole initial population (every household present in the first year), so a
relocated household keeps counting, as ``relocated``, in every later year although it has no
rows any more. This matches ``model_yearly.csv``.

Each household is in exactly one *state* per year (precedence: relocated first):

========================  =====================================================
state                     definition (after execution in that year)
========================  =====================================================
``relocated``             ``relocated_after`` true (this or an earlier year)
``insured_and_elevated``  insured for next year and home elevated
``insured_only``          insured, not elevated
``elevated_only``         elevated, not insured
``none``                  neither
========================  =====================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.version import stamp

STATES: tuple[str, ...] = (
    "relocated",
    "insured_and_elevated",
    "insured_only",
    "elevated_only",
    "none",
)


def household_states(agents: pd.DataFrame) -> pd.DataFrame:
    """Return the state of every household of the initial population in every year.

    Args:
        agents: Typed agent table (``load_run(...).agents``).

    Returns:
        Long table ``year, agent_id, state, ever_insured, ever_elevated, ever_relocated`` with
        one row per household of the first year and per year; ``ever_*`` are cumulative flags
        (the measure was in place after execution in this or any earlier year).

    Raises:
        AnalysisInputError: when a household disappears without having relocated.
    """
    if agents.empty:
        raise AnalysisInputError("agent table is empty: no household-years to analyse")
    insured = agents["insured_after"].fillna(False).astype(bool)
    elevated = agents["elevated_after"].fillna(False).astype(bool)
    relocated = agents["relocated_after"].fillna(False).astype(bool)
    state = pd.Series("none", index=agents.index, dtype=object)
    state[insured & ~elevated] = "insured_only"
    state[elevated & ~insured] = "elevated_only"
    state[insured & elevated] = "insured_and_elevated"
    state[relocated] = "relocated"
    observed = pd.DataFrame(
        {"year": agents["year"].astype(int), "agent_id": agents["agent_id"].astype(int),
         "state": state, "ins": insured, "elev": elevated, "reloc": relocated}
    )
    years = sorted(observed["year"].unique())
    population = sorted(observed.loc[observed["year"] == years[0], "agent_id"].unique())
    grid = pd.MultiIndex.from_product([population, years], names=["agent_id", "year"])
    full = observed.set_index(["agent_id", "year"]).reindex(grid).sort_index()
    was_relocated = full["reloc"].fillna(False).astype(bool).groupby(level=0).cummax()
    prior_relocated = was_relocated.groupby(level=0).shift(1, fill_value=False).astype(bool)
    gap = full["state"].isna() & ~prior_relocated
    if gap.any():
        agent_id, year = gap[gap].index[0]
        raise AnalysisInputError(
            f"agent table: household {agent_id} has no row in year {year} but had not relocated"
        )
    full.loc[prior_relocated & full["state"].isna(), "state"] = "relocated"
    for column in ("ins", "elev", "reloc"):
        full[column] = full[column].fillna(False).astype(bool).groupby(level=0).cummax()
    out = full.reset_index().rename(
        columns={"ins": "ever_insured", "elev": "ever_elevated", "reloc": "ever_relocated"}
    )
    return out[["year", "agent_id", "state", "ever_insured", "ever_elevated", "ever_relocated"]]


def _initial_attributes(agents: pd.DataFrame, group_by: Sequence[str]) -> pd.DataFrame:
    first = agents[agents["year"] == agents["year"].min()]
    return first[["agent_id", *group_by]].drop_duplicates("agent_id")


def adaptation_trajectories(
    agents: pd.DataFrame, group_by: Sequence[str] | str | None = None
) -> pd.DataFrame:
    """Shares of households in each adaptation state, by year (and group).

    Args:
        agents: Typed agent table.
        group_by: Optional household attribute(s) taken from the first year, e.g. ``"tenure"``
            or ``["flood_zone"]``; shares are then of each group's initial population.

    Returns:
        One row per year (and group) with ``n_households`` (initial population of the group) and
        the shares (fractions 0..1): ``share_relocated``, ``share_insured_and_elevated``,
        ``share_insured_only``, ``share_elevated_only``, ``share_no_measure`` (these five sum to
        1), ``share_insured`` (insured only + both), ``share_elevated`` (elevated only + both),
        and cumulative ``share_ever_insured``, ``share_ever_elevated``,
        ``share_ever_relocated``, ``share_ever_adapted`` (any of the three so far).
    """
    groups = [group_by] if isinstance(group_by, str) else list(group_by or [])
    states = household_states(agents)
    if groups:
        states = states.merge(_initial_attributes(agents, groups), on="agent_id", how="left")
    states["ever_adapted"] = (
        states["ever_insured"] | states["ever_elevated"] | states["ever_relocated"]
    )
    keys = ["year", *groups]
    dummies = pd.get_dummies(states["state"]).reindex(columns=list(STATES), fill_value=False)
    frame = pd.concat([states[keys], dummies.astype(float)], axis=1)
    shares = frame.groupby(keys, observed=True).mean()
    shares.columns = [
        "share_relocated",
        "share_insured_and_elevated",
        "share_insured_only",
        "share_elevated_only",
        "share_no_measure",
    ]
    ever = states.groupby(keys, observed=True)[
        ["ever_insured", "ever_elevated", "ever_relocated", "ever_adapted"]
    ].mean()
    ever.columns = ["share_" + c for c in ever.columns]
    result = shares.join(ever)
    result.insert(0, "n_households", states.groupby(keys, observed=True).size())
    result["share_insured"] = result["share_insured_only"] + result["share_insured_and_elevated"]
    result["share_elevated"] = result["share_elevated_only"] + result["share_insured_and_elevated"]
    return stamp(result.reset_index())
