"""``calibrate``: run the experiment's sweep, score it against its targets, write the region.

Outputs, in ``<sweep dir>/calibration/``:

* ``points.csv``: one row per parameter point (parameters, runs, max implausibility, RMSE per
  series, plausible);
* ``summary.json``: cutoff, counts, the plausible region per parameter, the best point and its
  full score (every target: observed, simulated, implausibility), the FEMA notice;
* ``fit.png``: observed vs simulated take-up (best point; range of all plausible runs);
* ``sensitivity.csv``: SALib indices of the scores to the parameters
  (``calibration.sensitivity``).

Calling it again on the same experiment and directory runs nothing already done (the sweep is
idempotent) and scores again, e.g. after editing the targets, which are not part of the runs'
hash.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.hindcast import load_targets, plot_hindcast
from governed_broker.calibration.history import CalibrationResult, history_match
from governed_broker.calibration.refocus import Wave, WaveSettings, refocus
from governed_broker.calibration.sensitivity import calibration_sensitivity
from governed_broker.config import ConfigError, load_experiment
from governed_broker.sweep.api import SweepResult, default_sweep_dir, run_sweep
from governed_broker.sweep.plan import build_plan
from governed_broker.sweep.state import write_atomic

#: Sub-directory of the sweep directory with the calibration's outputs.
CALIBRATION_DIR = "calibration"


def calibrate(
    experiment: str | Path,
    overrides: Sequence[str] = (),
    *,
    out_dir: str | Path | None = None,
    executor: str | None = None,
    max_workers: int | None = None,
    progress: bool = True,
    train: tuple[int, int] | None = None,
    wave: WaveSettings | None = None,
) -> tuple[CalibrationResult, SweepResult]:
    """Run (or resume) the sweep of ``experiment`` and history-match it to its targets.

    Args:
        experiment: The experiment YAML (with ``calibration:`` and ``sweep:`` sections).
        overrides: ``--set KEY.PATH=VALUE`` overrides applied at load.
        out_dir: The sweep's output directory (default: the sweep's default directory).
        executor: The sweep executor, as ``governed-broker sweep --executor``.
        max_workers: Parallel runs, as ``governed-broker sweep --max-workers``.
        progress: Print the sweep's progress on stderr.
        train: A training window (first, last calendar year) that replaces
            ``calibration.train``: the region is fitted on it and scored on the years after
            it (``CalibrationResult.validation``).
        wave: Narrow the design's bounds to an earlier wave's best points first
            (``calibration.refocus``); the default directory is then
            ``outputs/<name>-wave<number>``.

    Raises:
        ConfigError: no ``calibration:`` or ``sweep:`` section, unreadable targets, an
            earlier wave that cannot refocus this design, or any configuration error of the
            sweep.
    """
    config = load_experiment(experiment, overrides)
    if config.calibration is None:
        raise ConfigError(f"{experiment}: no 'calibration:' section; add "
                          "'calibration: {targets: FILE}' naming the observed targets "
                          "(docs/hindcast.md)")
    if config.sweep is None:
        raise ConfigError(f"{experiment}: calibrate needs a 'sweep:' section declaring the "
                          "parameters and their ranges (docs/sweeps.md, docs/hindcast.md)")
    try:
        targets = load_targets(config.resolve_path(config.calibration.targets))
    except AnalysisInputError as exc:
        raise ConfigError(f"{experiment}: field 'calibration.targets': {exc}") from exc
    narrowed = None
    if wave is not None:
        if config.sweep.sampler is None:
            raise ConfigError(f"{experiment}: --refocus narrows 'sweep.sampler.bounds', and "
                              "this sweep has no sampler")
        narrowed = refocus(wave, config.sweep.sampler.bounds, targets.cutoff)
        overrides = [*overrides, narrowed.override()]
    out = out_dir if out_dir is not None else _default_dir(experiment, overrides, narrowed)
    if narrowed is not None and Path(out).resolve() == Path(narrowed.previous).resolve():
        raise ConfigError(f"--out {out}: a new wave needs its own directory, not the earlier "
                          "wave's")
    sweep = run_sweep(experiment, overrides, out_dir=out, executor=executor,
                      max_workers=max_workers, progress=progress)
    window = train if train is not None else config.calibration.train
    try:
        result = history_match(sweep.sweep_dir, sweep.index, targets, window)
    except AnalysisInputError as exc:
        if window is None:
            raise
        raise ConfigError(f"{experiment}: {exc}") from exc
    sampler = config.sweep.sampler
    result = replace(result, sensitivity=calibration_sensitivity(
        result.points, sampler.second_order if sampler is not None else None),
        wave=None if narrowed is None else narrowed.summary())
    write_calibration(result, sweep.sweep_dir / CALIBRATION_DIR)
    return result, sweep


def _default_dir(experiment: str | Path, overrides: Sequence[str], wave: Wave | None) -> Path:
    plain = default_sweep_dir(build_plan(experiment, overrides))
    return plain if wave is None else plain.with_name(f"{plain.name}-wave{wave.number}")


def write_calibration(result: CalibrationResult, folder: Path) -> Path:
    """Write the calibration's tables and plot into ``folder``.

    The files are ``points.csv``, ``summary.json``, ``fit.png`` and ``sensitivity.csv``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "points.csv", result.points.to_csv(index=False))
    if result.sensitivity is not None:
        write_atomic(folder / "sensitivity.csv", result.sensitivity.to_csv(index=False))
    write_atomic(folder / "summary.json",
                 json.dumps(result.summary(), indent=2, sort_keys=False) + "\n")
    ensembles = {}
    if result.best is not None:
        ensembles[f"best fit (point {result.best})"] = result.measures[result.best]
    plausible = [m for k, runs in result.measures.items()
                 if result.points.loc[k, "plausible"] for m in runs]
    if plausible:
        ensembles[f"plausible points ({result.n_plausible})"] = plausible
    if ensembles:
        figure = plot_hindcast(ensembles, result.targets,
                               f"{result.targets.name}: calibration "
                               f"({result.n_plausible} of {len(result.points)} points plausible)")
        tmp = folder / ".fit.png.tmp"
        figure.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, folder / "fit.png")
    return folder
