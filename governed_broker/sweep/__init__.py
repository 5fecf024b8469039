"""Parameter sweeps: plans, executors (local process pool, SLURM job arrays), resume, collect.

Policy arms branched from a finished run (``branch``).

See docs/sweeps.md and ``governed_broker.config.sweep`` for the YAML.
"""

from governed_broker.sweep.api import SweepResult, run_sweep
from governed_broker.sweep.branch import BranchPlan, BranchResult, plan_branch, run_branch
from governed_broker.sweep.collect import collect
from governed_broker.sweep.plan import PlannedRun, SweepPlan, build_plan, replicate_seed
from governed_broker.sweep.state import SweepDir

__all__ = [
    "BranchPlan",
    "BranchResult",
    "PlannedRun",
    "SweepDir",
    "SweepPlan",
    "SweepResult",
    "build_plan",
    "collect",
    "plan_branch",
    "replicate_seed",
    "run_branch",
    "run_sweep",
]
