"""Claims per policy and the SFHA share of claims in New York City's NFIP events (OpenFEMA).

They are the sourced prior of the Passaic hindcast's exposed shares (docs/hindcast.md).

No claims extract of the Passaic counties (Essex 34013, Morris 34027, Passaic 34031) could be
found in a public repository; the five NYC counties' extract (shared/hindcast_data) is the
nearest OpenFEMA record of the same region and years. For each calendar year of a named event
(Irene 2011, Sandy 2012, Ida 2021) it counts the claims with a date of loss in that year, the
share of them rated in an SFHA zone (A*, V*), and divides the claims by the city's policies by
effective year (targets_policies_by_year.csv, series nyc_policies_by_effective_year).

Usage:
    python configs/hindcast/data/derive_event_claims.py /work/shared/hindcast_data \
        > configs/hindcast/data/nyc_event_claims.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

EVENTS = {2011: "Hurricane Irene", 2012: "Hurricane Sandy", 2021: "Hurricane Ida"}


def main(folder: Path) -> pd.DataFrame:
    """Derive the per-event table from the NYC claims and policies extracts in ``folder``."""
    claims = pd.read_csv(folder / "nyc_nfip_claims_1978_2025.csv.gz",
                         usecols=["dateOfLoss", "floodEvent", "ratedFloodZone"])
    claims["year"] = pd.to_datetime(claims["dateOfLoss"]).dt.year
    series = pd.read_csv(folder / "targets_policies_by_year.csv")
    policies = series[series["series_id"] == "nyc_policies_by_effective_year"].set_index(
        "year")["value"]
    rows = []
    for year, event in EVENTS.items():
        of_year = claims[claims["year"] == year]
        named = of_year[of_year["floodEvent"] == event]
        sfha = of_year["ratedFloodZone"].astype(str).str.upper().str[0].isin(["A", "V"])
        rows.append({"year": year, "event": event, "claims_in_year": len(of_year),
                     "claims_of_event": len(named),
                     "sfha_share_of_claims": round(float(sfha.mean()), 3),
                     "policies_by_effective_year": int(policies[year]),
                     "claims_per_policy": round(len(of_year) / float(policies[year]), 4)})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1])).to_csv(sys.stdout, index=False)
