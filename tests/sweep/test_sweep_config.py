"""Validation of the ``sweep:`` block."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from governed_broker.config.sweep import SlurmConfig, SweepConfig, slurm_time_to_minutes


@pytest.mark.parametrize("text,minutes", [("90", 90), ("01:30:00", 90), ("2-00", 2880),
                                          ("1-01:00:30", 1501), ("5:30", 6)])
def test_slurm_time(text, minutes):
    assert slurm_time_to_minutes(text) == minutes


@pytest.mark.parametrize("bad", [
    {"slurm": {"time": "1"}},
    {"slurm": {"time": "soon"}},
    {"slurm": {"extra": {"--constraint": "x"}}},
    {"slurm": {"extra": {"constraint": "x\n#SBATCH --partition=gpu"}}},
    {"slurm": {"extra": {"comment": "x\ry"}}},
    {"slurm": {"extra": {"comment": "#sbatch --qos=high"}}},
    {"slurm": {"extra": {"exclusive": False}}},
    {"slurm": {"extra": {"array": "0-99"}}},
    {"slurm": {"extra": {"output": "/tmp/x"}}},
    {"slurm": {"extra": {"ntasks-per-node": 2}}},
    {"slurm": {"extra": {"partition": "gpu"}}},
    {"slurm": {"runs_per_task": 0}},
    {"slurm": {"partitoin": "debug"}},
    {"parameters": {"sweep.replicates": [1, 2]}},
    {"parameters": {"seed": []}},
    {"sampler": {"method": "sobol", "n": 6, "bounds": {"a.b": [0, 1]}}},
    {"sampler": {"method": "lhs", "n": 4, "bounds": {"a.b": [1, 0]}}},
    {"sampler": {"method": "lhs", "n": 4, "bounds": {"a.b": [0, 1]}, "integer": ["c"]}},
    {"parameters": {"a.b": [1]}, "sampler": {"method": "lhs", "n": 4, "bounds": {"a.b": [0, 1]}}},
    {"executor": "kubernetes"},
    {"max_attempts": 0},
])
def test_bad_sweep_blocks_are_rejected(bad):
    with pytest.raises(ValidationError):
        SweepConfig.model_validate(bad)


def test_defaults_and_timeout():
    sweep = SweepConfig()
    assert sweep.executor == "local" and sweep.replicates == 1 and sweep.max_attempts == 3
    assert SlurmConfig(time="00:30:00").timeout_min == 30


def test_extra_directives_that_are_allowed_and_why_others_are_not():
    options = SlurmConfig(extra={"constraint": "skylake|icelake", "exclusive": True,
                                 "mail-type": "END", "nice": 10})
    assert options.extra["nice"] == 10
    with pytest.raises(ValidationError, match="use sweep.slurm.partition"):
        SlurmConfig(extra={"partition": "gpu"})
    with pytest.raises(ValidationError, match="one line without control characters"):
        SlurmConfig(extra={"constraint": "a\n#SBATCH --x"})
