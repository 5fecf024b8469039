"""The ``calibration`` section: what ``governed-broker calibrate`` scores a sweep against.

The parameters and their ranges are the experiment's ``sweep:`` block (a sampler over
continuous settings, cases or a grid for categorical ones such as prompt variants); this
section names the observed targets (``configs/hindcast/passaic.yaml``). It cannot change a
run's outputs, so it is not part of the run hash. See docs/hindcast.md.
"""

from __future__ import annotations

from pydantic import Field

from governed_broker.config.base import StrictModel
from governed_broker.config.world import FilePath


class CalibrationConfig(StrictModel):
    """Targets of a calibration.

    Attributes:
        targets: The hindcast targets file (observed series, ranges, cutoff).
    """

    targets: FilePath = Field(description="hindcast targets file (configs/hindcast/passaic.yaml)")
