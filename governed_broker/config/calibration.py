"""The ``calibration`` section: what ``governed-broker calibrate`` scores a sweep against.

The parameters and their ranges are the experiment's ``sweep:`` block (a sampler over
continuous settings, cases or a grid for categorical ones such as prompt variants); this
section names the observed targets (``configs/hindcast/passaic.yaml``). It cannot change a
run's outputs, so it is not part of the run hash. See docs/hindcast.md.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from governed_broker.config.base import StrictModel
from governed_broker.config.world import FilePath


class CalibrationConfig(StrictModel):
    """Targets of a calibration.

    Attributes:
        targets: The hindcast targets file (observed series, ranges, cutoff).
        train: A training window (first, last calendar year): the region is fitted on its
            years alone and scored out of sample on the observed years after it
            (``governed-broker calibrate --train FIRST-LAST`` overrides it).
    """

    targets: FilePath = Field(description="hindcast targets file (configs/hindcast/passaic.yaml)")
    train: tuple[int, int] | None = Field(None, description=(
        "training window [first, last] calendar year; the years after it are the test"))

    @model_validator(mode="after")
    def _ordered(self) -> CalibrationConfig:
        if self.train is not None and self.train[0] > self.train[1]:
            raise ValueError(f"train {list(self.train)}: the first year is after the last")
        return self
