"""Calibration: a sweep scored against observed yearly series (history matching).

``calibrate(experiment)`` runs (or resumes) the experiment's sweep and reports the plausible
region of its parameters; ``governed-broker calibrate EXPERIMENT.yaml`` is the command. See
docs/hindcast.md.
"""

from governed_broker.calibration.api import calibrate
from governed_broker.calibration.history import CalibrationResult, history_match
from governed_broker.calibration.refocus import WaveSettings

__all__ = ["CalibrationResult", "WaveSettings", "calibrate", "history_match"]
