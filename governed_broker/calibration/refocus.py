"""A further wave of history matching: the design's bounds narrowed to an earlier wave.

History matching proceeds in waves (Vernon, Goldstein & Bower 2010, Bayesian Analysis
5(4):619-670, section 3; Andrianakis et al. 2015, PLoS Computational Biology 11(1):e1003968):
each wave samples only the part of the parameter space the earlier waves did not rule out, so
the same number of runs lies denser where the model can fit. Without an emulator that part is
approximated here by the box spanning the earlier wave's points whose largest implausibility
is at most a cutoff, widened on each side by a margin (a share of the outer range), because
the kept points are a sample of the region, not its edges. The box never leaves the
experiment's own bounds.

Early waves commonly rule out less than the final one (Vernon, Goldstein & Bower 2010 judge
early waves by the second- or third-largest implausibility); a wave's cutoff is the user's
choice and is recorded in the calibration's ``summary.json`` with the bounds it gave.

A box spanned by a few points also narrows the parameters the earlier wave's fitted years
cannot tell apart (a trend that acts only after a training window, say), because the few
points it keeps happen to lie close together. Such parameters can be named ``free``: they keep
the experiment's bounds in the new wave. Whether a parameter is identified is a measurement
(a profile through the best point, docs/hindcast.md), not a default: none is free unless named.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from governed_broker.config import ConfigError
from governed_broker.sweep.plan import PARAM_PREFIX

#: The file of an earlier wave that a new one reads (in ``<sweep dir>/calibration/``).
POINTS_FILE = "points.csv"


@dataclass(frozen=True)
class WaveSettings:
    """How to narrow the design to an earlier wave.

    Attributes:
        previous: The earlier wave's sweep directory (or its ``calibration/`` folder).
        cutoff: Points of the earlier wave with largest implausibility at most this are
            kept; None: the targets' cutoff.
        margin: Each kept range is widened on both sides by this share of the experiment's
            range for that parameter (0.1: a tenth; our judgement, so that a region sampled
            by a few points is not cut at them).
        free: Parameters that keep the experiment's bounds (not narrowed).
    """

    previous: Path
    cutoff: float | None = None
    margin: float = 0.1
    free: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wave:
    """The narrowed design and where it came from (``summary.json``'s ``wave``).

    ``previous`` is the earlier wave's sweep directory, also when its ``calibration/`` folder
    was named.
    """

    number: int
    previous: str
    cutoff: float
    margin: float
    kept: int
    of: int
    bounds: dict[str, tuple[float, float]]
    free: tuple[str, ...] = ()

    def override(self) -> str:
        """The ``--set`` that gives the sweep these bounds."""
        return "sweep.sampler.bounds=" + json.dumps({k: list(v) for k, v in self.bounds.items()})

    def summary(self) -> dict:
        """Plain numbers for ``summary.json``."""
        return {"number": self.number, "previous": self.previous, "cutoff": self.cutoff,
                "margin": self.margin, "kept": self.kept, "of": self.of,
                "free": list(self.free),
                "bounds": {k: list(v) for k, v in self.bounds.items()}}


def refocus(settings: WaveSettings, bounds: dict[str, tuple[float, float]],
            default_cutoff: float) -> Wave:
    """The bounds of the next wave from the earlier wave's scored points.

    Args:
        settings: The earlier wave, cutoff and margin.
        bounds: The experiment's ``sweep.sampler.bounds`` (the outer box).
        default_cutoff: The targets' cutoff, used when ``settings.cutoff`` is None.

    Raises:
        ConfigError: no scored points in ``settings.previous``, parameters that differ from
            ``bounds``, a margin outside [0, 1], a free parameter not in ``bounds``, or no
            point at or under the cutoff.
    """
    if not 0.0 <= settings.margin <= 1.0 or math.isnan(settings.margin):
        raise ConfigError(f"--refocus-margin {settings.margin}: must be between 0 and 1")
    unknown = [name for name in settings.free if name not in bounds]
    if unknown:
        raise ConfigError(f"--refocus-free {unknown[0]}: not a parameter of this design's "
                          f"sweep.sampler.bounds {sorted(bounds)}")
    folder = _calibration_folder(settings.previous)
    points = _read_points(folder / POINTS_FILE)
    params = sorted(c[len(PARAM_PREFIX):] for c in points.columns if c.startswith(PARAM_PREFIX))
    if params != sorted(bounds):
        raise ConfigError(
            f"--refocus {settings.previous}: its parameters {params} are not this design's "
            f"sweep.sampler.bounds {sorted(bounds)}; refocus the same experiment's waves")
    cutoff = default_cutoff if settings.cutoff is None else settings.cutoff
    scores = pd.to_numeric(points["max_implausibility"], errors="coerce")
    kept = points[scores <= cutoff]
    if kept.empty:
        smallest = scores.min()
        raise ConfigError(
            f"--refocus {settings.previous}: no point has a largest implausibility at or "
            f"under {cutoff:g} (the smallest is {smallest:.3g}); pass a larger "
            "--refocus-cutoff")
    narrowed = {}
    for name, (low, high) in bounds.items():
        if name in settings.free:
            narrowed[name] = (low, high)
            continue
        values = pd.to_numeric(kept[PARAM_PREFIX + name], errors="coerce")
        pad = settings.margin * (high - low)
        narrowed[name] = (max(low, float(values.min()) - pad),
                          min(high, float(values.max()) + pad))
        if not narrowed[name][0] < narrowed[name][1]:
            raise ConfigError(
                f"--refocus {settings.previous}: the kept points span no range of {name} "
                f"({narrowed[name][0]:g}); pass a --refocus-margin above 0")
    sweep_dir = folder.parent if folder.name == "calibration" else folder
    return Wave(number=_wave_number(folder) + 1, previous=str(sweep_dir),
                cutoff=float(cutoff), margin=float(settings.margin), kept=len(kept),
                of=len(points), bounds=narrowed, free=tuple(settings.free))


def _calibration_folder(previous: Path) -> Path:
    for folder in (Path(previous) / "calibration", Path(previous)):
        if (folder / POINTS_FILE).is_file():
            return folder
    raise ConfigError(
        f"--refocus {previous}: no calibration/{POINTS_FILE} there; name the sweep directory "
        "of an earlier `governed-broker calibrate` (its --out)")


def _read_points(path: Path) -> pd.DataFrame:
    try:
        points = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--refocus: {path} cannot be read as a table: {exc}") from exc
    if "max_implausibility" not in points.columns:
        raise ConfigError(f"--refocus: {path} has no 'max_implausibility' column; it is not "
                          "a calibration's points table")
    return points


def _wave_number(folder: Path) -> int:
    """The earlier wave's number (1 unless its summary says it was itself a refocused wave)."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1
    wave = summary.get("wave") if isinstance(summary, dict) else None
    return int(wave["number"]) if isinstance(wave, dict) and "number" in wave else 1
