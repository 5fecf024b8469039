"""The NFIP's mean premium per policy by year in the United States, and its index on 2011.

It drives the legacy premiums of the Passaic hindcast (``insurance.premium_path.legacy_index``
of experiments/passaic_hindcast.yaml, 2011-2021) and is the series the Risk Rating 2.0 arm is
checked against (2021-2024; docs/hindcast.md, "Premiums").

Source: OpenFEMA FIMA NFIP Policies v2, the sum of ``totalInsurancePremiumOfThePolicy`` and of
``policyCount`` over the policy records whose effective date falls in each calendar year, as
printed by mebauer/duckdb-fema-nfip analysis-policies.ipynb and transcribed in
shared/hindcast_data/targets_policies_by_year.csv (series us_premium_by_effective_year,
us_policies_by_effective_year). Limits: the whole United States, not the Passaic basin (no
premium series of the three counties was found); policies by effective year, not FEMA's
month-end policies in force; the mean moves with the mix of policies (coverage, zones, new
and renewed) as well as with the rates.

Usage:
    python configs/hindcast/data/derive_premium_index.py /work/shared/hindcast_data \
        > configs/hindcast/data/us_premium_per_policy.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

BASE_YEAR = 2011


def main(folder: Path) -> pd.DataFrame:
    """Mean premium per policy and its index on ``BASE_YEAR``, by calendar year."""
    series = pd.read_csv(folder / "targets_policies_by_year.csv")

    def of(series_id: str) -> pd.Series:
        return series[series["series_id"] == series_id].set_index("year")["value"]

    premium_musd = of("us_premium_by_effective_year")
    policies = of("us_policies_by_effective_year")
    per_policy = premium_musd * 1e6 / policies
    return pd.DataFrame({
        "year": per_policy.index.astype(int),
        "policies": policies.astype(int).to_numpy(),
        "premium_million_usd": premium_musd.to_numpy(),
        "premium_per_policy_usd": per_policy.round(2).to_numpy(),
        "index_on_2011": (per_policy / per_policy[BASE_YEAR]).round(4).to_numpy(),
        "change_on_last_year": per_policy.pct_change().round(4).to_numpy(),
    })


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1])).to_csv(sys.stdout, index=False)
