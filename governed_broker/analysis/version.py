"""The version of the metric definitions in this package.

Every table, report and benchmark result written by ``governed_broker.analysis`` carries this
string, so numbers in a paper can be traced to the exact definitions that produced them. Bump
it whenever the definition of any measure changes (not for refactors that keep the numbers).
"""

#: 2.1: B5 (post-flood inaction) leaves out households whose lender enforces the mandatory
#: purchase of insurance (reported apart as ``required``), as it leaves out elevated ones.
#: 3.0: the re-sourced benchmarks (configs/benchmarks.yaml 3.0): voluntary-policy measures
#: (lapse, post-flood rise, tenure, the event-study curve ``post_flood_excess_yearK``), owner
#: and outside-SFHA shares, ``flooded_uninsured``; ``repetitive_loss_uninsured`` and
#: ``post_flood_rise_years`` are gone; unscored targets do not enter the score.
#: 3.1: the laundering rate leaves out blocked proposals whose re-asks gave no readable reply
#: (``unreadable``), as the battery's laundering test does: they are no evidence either way.
METRIC_VERSION = "gb-metrics-3.1"


def stamp(frame):
    """Record ``METRIC_VERSION`` in ``frame.attrs["metric_version"]`` and return the frame.

    Every table a measure returns is stamped, so a table saved by a notebook (e.g. with
    ``frame.attrs`` in a parquet file) or shown in a report can be traced to its definitions.
    """
    frame.attrs["metric_version"] = METRIC_VERSION
    return frame
