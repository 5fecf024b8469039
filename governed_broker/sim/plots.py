"""The run's summary figure: adaptation shares and damages by year."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def summary_plot(model_yearly_csv: Path, png: Path, *, title: str = "") -> None:
    """Write ``summary.png``: shares insured/elevated/relocated (top), damages and payouts (bottom).

    Uses matplotlib's non-interactive Agg backend (no display needed).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    df = pd.read_csv(model_yearly_csv)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for col, label in (("share_insured", "insured"), ("share_elevated", "elevated"),
                       ("share_relocated", "relocated"), ("share_no_measure", "no measure")):
        top.plot(df["year"], df[col], marker="o", ms=3, label=label)
    top.set_ylabel("share of households")
    top.set_ylim(0, 1)
    top.legend(loc="upper left", fontsize=8)
    top.set_title(title or "summary")
    bottom.bar(df["year"], df["total_damage_usd"] / 1e6, label="damage", color="tab:red")
    bottom.bar(df["year"], df["total_payout_usd"] / 1e6, label="insurance payout",
               color="tab:blue", alpha=0.7)
    bottom.set_ylabel("million USD")
    bottom.set_xlabel("year")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))  # years are whole steps
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
