"""Which calibration parameters the hindcast's fit is sensitive to.

SALib indices over the calibration design.

Every parameter point of a calibration (replicates already averaged into its score) is one
sample; for each score column of ``points.csv`` (the largest implausibility and the RMSE of
every series, and with a training window their out-of-sample and all-years counterparts) the
indices of each numeric parameter are estimated with SALib
(``analysis.sensitivity.sobol_indices``): Sobol' first- and total-order indices (``S1``,
``ST``) when the design is a Saltelli sample (``sweep.sampler.method: sobol``;
``experiments/passaic_sensitivity_small.yaml``), else RBD-FAST first-order indices, which
accept any design (the calibration's Latin hypercube; with 40 points they are too rough to
read: SALib's bootstrap half-width is reported beside them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from governed_broker.analysis.sensitivity import sobol_indices
from governed_broker.sweep.plan import PARAM_PREFIX

#: Score columns of ``points.csv`` whose sensitivity is estimated (those present).
SCORE_PREFIXES = ("max_implausibility", "rmse_", "test_max_implausibility", "test_rmse_",
                  "all_max_implausibility", "all_rmse_")

#: Fewest points RBD-FAST is run on (SALib needs N > 2M with M >= 1 and half of N bootstrapped).
MIN_POINTS = 8


def calibration_sensitivity(points: pd.DataFrame,
                            second_order: bool | None = None) -> pd.DataFrame:
    """Sensitivity indices of every score column to every numeric parameter.

    Args:
        points: A calibration's ``points`` table (``CalibrationResult.points``), in the
            design's order, with its ``sample_method`` column when the sweep recorded one.
        second_order: A Saltelli design's ``sweep.sampler.second_order`` (None: inferred
            from the number of points).

    Returns:
        One row per score and parameter: ``output, parameter, S1, S1_conf, ST, ST_conf,
        method, n_points`` (``ST`` NaN for RBD-FAST; empty when there are fewer than
        ``MIN_POINTS`` points or no numeric parameter that varies). A Saltelli design skips a
        score that is not finite at every point (its sample would lose its structure).
    """
    params = [c for c in points.columns if c.startswith(PARAM_PREFIX)
              and pd.api.types.is_numeric_dtype(points[c]) and points[c].nunique() > 1]
    outputs = [c for c in points.columns if c.startswith(SCORE_PREFIXES)
               and not c.endswith("plausible")]
    saltelli = "sample_method" in points.columns and points["sample_method"].astype(
        str).str.lower().isin({"sobol", "saltelli"}).all()
    columns = ["output", "parameter", "S1", "S1_conf", "ST", "ST_conf", "method", "n_points"]
    frames = []
    for output in outputs:
        finite = points[np.isfinite(points[output].astype(float))]
        if saltelli and len(finite) < len(points):
            continue
        if len(finite) < MIN_POINTS or not params or finite[output].nunique() < 2:
            continue
        table = sobol_indices(finite, params, output,
                              method="salib-sobol" if saltelli else "salib-rbd_fast",
                              second_order=second_order)
        frames.append(table.assign(parameter=table["parameter"].str[len(PARAM_PREFIX):]))
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]
