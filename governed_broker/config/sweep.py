"""Sweep settings (owned by the sweep package; see docs/sweeps.md).

A ``sweep:`` block in an experiment YAML turns the experiment into many runs::

    sweep:
      cases:                           # named combinations (e.g. ablation groups)
        A: {governance.profile: disabled, memory.engine: window}
        B: {governance.profile: strict, memory.engine: window}
      parameters:                      # grid: every combination of these values
        decision.maker: [baseline]
        memory.engine: [none, window, humancentric]
      sampler:                         # and/or samples over continuous ranges (SALib)
        method: sobol                  # lhs | sobol
        n: 8                           # lhs: samples; sobol: base N (N*(2D+2) points)
        bounds:
          memory.overrides.decay_rate: [0.05, 0.5]
          memory.overrides.window_size: [1, 10]
        integer: [memory.overrides.window_size]
      replicates: 3                    # seeds derived from the experiment seed
      executor: local                  # local | slurm
      max_workers: 2
      max_attempts: 3
      slurm: {partition: debug, time: "00:30:00", cpus_per_task: 1, mem_gb: 2}

Parameter names are ``--set`` key paths of the experiment (any path, including keys inside
dict fields such as ``memory.overrides.decay_rate``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from governed_broker.config.base import StrictModel, portable_name_problem

_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")
#: sbatch options the slurm executor (submitit) writes itself -> the field that sets them
#: ("" when none may: submitit needs its own value, and more tasks would run every run twice).
_SBATCH_OWN = {
    "array": "", "output": "", "error": "", "open-mode": "", "signal": "",
    "job-name": "job_name", "time": "time", "partition": "partition", "account": "account",
    "qos": "qos", "cpus-per-task": "cpus_per_task", "mem": "mem_gb",
    "gpus-per-node": "gpus_per_node", "nodes": "", "ntasks": "", "ntasks-per-node": "",
}
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+)(?::(\d+))?$")


def _check_path(path: str, where: str) -> str:
    if not _PATH.match(path):
        raise ValueError(f"{where}: {path!r} is not a setting path like 'memory.overrides.x'")
    if path == "sweep" or path.startswith("sweep."):
        raise ValueError(f"{where}: {path!r}: a sweep cannot vary its own 'sweep' settings")
    return path


def slurm_time_to_minutes(text: str) -> int:
    """Minutes in a SLURM time limit: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM:SS``.

    Seconds are rounded up to whole minutes (submitit takes ``timeout_min``).
    """
    text = text.strip()
    if "-" in text:
        days, rest = text.split("-", 1)
        parts = [int(p) for p in rest.split(":")]
        parts += [0] * (3 - len(parts))
        hours, minutes, seconds = parts
        total_s = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            total_s = parts[0] * 60
        elif len(parts) == 2:
            total_s = parts[0] * 60 + parts[1]
        else:
            total_s = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return -(-total_s // 60)


class SamplerConfig(StrictModel):
    """Samples over continuous parameter ranges, drawn with SALib.

    Attributes:
        method: ``lhs`` (Latin hypercube, ``n`` points) or ``sobol`` (Saltelli/Sobol' design
            for Sobol sensitivity indices: ``n * (2D + 2)`` points with second-order indices,
            ``n * (D + 2)`` without; ``n`` must be a power of 2).
        n: Number of samples (lhs) or base sample size (sobol).
        bounds: ``{setting path: [low, high]}``.
        integer: Paths whose sampled values are rounded to the nearest integer.
        second_order: sobol only: also sample for second-order indices.
    """

    method: Literal["lhs", "sobol"]
    n: int = Field(ge=1, le=1_000_000)
    bounds: dict[str, tuple[float, float]] = Field(min_length=1)
    integer: list[str] = []
    second_order: bool = True

    @field_validator("bounds")
    @classmethod
    def _check_bounds(cls, bounds: dict[str, tuple[float, float]]) -> dict:
        for path, (low, high) in bounds.items():
            _check_path(path, "sweep.sampler.bounds")
            if not low < high:
                raise ValueError(f"sweep.sampler.bounds.{path}: low {low} must be < high {high}")
        return bounds

    @model_validator(mode="after")
    def _check(self) -> SamplerConfig:
        unknown = [p for p in self.integer if p not in self.bounds]
        if unknown:
            raise ValueError(f"sweep.sampler.integer: {unknown} are not in sweep.sampler.bounds")
        if self.method == "sobol" and self.n & (self.n - 1):
            raise ValueError(f"sweep.sampler.n: sobol needs a power of 2 (got {self.n})")
        return self


class SlurmConfig(StrictModel):
    """How the ``slurm`` executor submits (submitit job arrays).

    Attributes:
        partition: ``--partition``; None uses the cluster's default partition.
        time: Time limit per array task (``--time``): ``MM``, ``HH:MM:SS`` or ``D-HH:MM:SS``;
            at least 2 minutes (submitit signals the job 90 s before the limit).
        cpus_per_task: ``--cpus-per-task``.
        mem_gb: Memory per task in GB (``--mem``); None uses the cluster default.
        gpus_per_node: ``--gpus-per-node`` (e.g. for an embedded LLM per task).
        account: ``--account`` (required on clusters that enforce associations).
        qos: ``--qos``.
        extra: More ``#SBATCH`` directives, ``{name: value}`` without the dashes
            (e.g. ``{constraint: skylake, exclusive: true}``; ``true`` writes the flag alone).
            Names are sbatch long options (lower case, digits, dashes); values are one line
            without control characters and are shell-quoted. Options that the executor sets
            itself (``array``, ``output``, ...) or that have their own field here are refused.
        setup: Shell lines run in the job before Python starts (``module load ...``,
            activating the environment). They are the user's own job-script prologue, trusted
            like any script the user submits: written verbatim into the sbatch script and run
            by bash on the compute node, so only put lines there that you would run yourself.
        runs_per_task: Runs executed one after another by each array task (avoid tiny jobs).
        max_array_size: Largest array to submit (the smaller of this and the cluster's
            MaxArraySize from ``scontrol show config``); when neither is known, 1000 is
            assumed with a warning. Larger sweeps are split into several arrays.
        array_parallelism: Tasks of one array running at once (``--array=...%N``).
        job_name: Job name; default ``gb-<experiment name>``.
    """

    partition: str | None = None
    time: str = "01:00:00"
    # upper bounds: far above any one compute node (1024 cores, 100 TB, 64 GPUs); above
    # them a value is a typo that sbatch would refuse only after the sweep was planned
    cpus_per_task: int = Field(1, ge=1, le=1024)
    mem_gb: float | None = Field(None, gt=0, le=100_000)
    gpus_per_node: int = Field(0, ge=0, le=64)
    account: str | None = None
    qos: str | None = None
    extra: dict[str, str | int | float | bool] = {}
    setup: list[str] = []
    # at most a million: more than any sweep (sampler.n x replicates) we plan
    runs_per_task: int = Field(1, ge=1, le=1_000_000)
    max_array_size: int | None = Field(None, ge=1, le=1_000_000)
    array_parallelism: int | None = Field(None, ge=1, le=1_000_000)
    job_name: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("time")
    @classmethod
    def _check_time(cls, value: str) -> str:
        if not _SLURM_TIME.match(value.strip()):
            raise ValueError(
                f"sweep.slurm.time: {value!r} is not a SLURM time (MM, HH:MM:SS, D-HH:MM:SS)"
            )
        if slurm_time_to_minutes(value) < 2:
            raise ValueError(
                f"sweep.slurm.time: {value!r} is under 2 minutes; submitit signals jobs 90 s "
                "before their limit, so tasks would stop at once"
            )
        return value

    @field_validator("extra")
    @classmethod
    def _check_extra(cls, extra: dict) -> dict:
        for key, value in extra.items():
            if not re.fullmatch(r"[a-z][a-z0-9-]*", key):
                raise ValueError(
                    f"sweep.slurm.extra: {key!r} is not an sbatch option name (lower-case "
                    "letters, digits and dashes, without the leading '--')"
                )
            if key in _SBATCH_OWN:
                raise ValueError(
                    f"sweep.slurm.extra.{key}: set by the slurm executor itself"
                    + (f"; use sweep.slurm.{_SBATCH_OWN[key]}" if _SBATCH_OWN[key] else "")
                )
            if value is False:
                raise ValueError(
                    f"sweep.slurm.extra.{key}: false is not an sbatch value; leave the key out"
                )
            text = str(value)
            if any(ord(c) < 32 or ord(c) == 127 for c in text) or "#SBATCH" in text.upper():
                raise ValueError(
                    f"sweep.slurm.extra.{key}: {text!r} must be one line without control "
                    "characters or '#SBATCH'"
                )
        return extra

    @property
    def timeout_min(self) -> int:
        """The time limit in whole minutes."""
        return slurm_time_to_minutes(self.time)


class SweepConfig(StrictModel):
    """A parameter sweep over an experiment (docs/sweeps.md).

    Runs are the product of the cases, the grid points (``parameters``), the sampler's points
    and the replicates, in that nesting order.

    Attributes:
        cases: Named sets of settings applied together (``{name: {setting path: value}}``),
            for scenarios or ablation groups that change several settings at once; the name
            is recorded as parameter ``case``.
        parameters: Grid ``{setting path: [values]}``; every combination is run.
        sampler: Latin hypercube or Sobol samples over continuous bounds.
        replicates: Runs per point with different seeds. Replicate 0 keeps the point's
            seed; replicate r >= 1 uses ``numpy.random.SeedSequence(seed).spawn(...)``
            child r (see ``governed_broker.sweep.plan.replicate_seed``).
        executor: ``local`` (process pool) or ``slurm`` (submitit job arrays).
        max_workers: Local processes at once; None uses the number of CPUs.
        max_attempts: A failed run is retried on re-submission until it has failed this often.
        slurm: Options of the slurm executor.
        llm_hosts: LLM server URLs; each run gets one as its ``llm.hosts``, chosen from its
            run id (``int(run_id, 16) % len(llm_hosts)``), so a run keeps its host across
            resubmissions and retries; empty keeps the experiment's ``llm.hosts``.
    """

    cases: dict[str, dict[str, Any]] = {}
    parameters: dict[str, list] = {}
    sampler: SamplerConfig | None = None
    replicates: int = Field(1, ge=1, le=100_000)
    executor: Literal["local", "slurm"] = "local"
    max_workers: int | None = Field(None, ge=1, le=1024)  # processes of one machine
    max_attempts: int = Field(3, ge=1, le=100)
    slurm: SlurmConfig = SlurmConfig()
    llm_hosts: list[str] = []

    @field_validator("parameters")
    @classmethod
    def _check_parameters(cls, parameters: dict[str, list]) -> dict[str, list]:
        for path, values in parameters.items():
            _check_path(path, "sweep.parameters")
            if not values:
                raise ValueError(f"sweep.parameters.{path}: needs at least one value")
        return parameters

    @field_validator("cases")
    @classmethod
    def _check_cases(cls, cases: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, settings in cases.items():
            if not re.match(r"^[A-Za-z0-9_.-]+$", name):
                raise ValueError(f"sweep.cases: name {name!r} may use letters, digits, _ . -")
            problem = portable_name_problem(name)
            if problem is not None:
                raise ValueError(f"sweep.cases: name {name!r}: {problem}")
            for path in settings:
                _check_path(path, f"sweep.cases.{name}")
        return cases

    @model_validator(mode="after")
    def _check(self) -> SweepConfig:
        sources = [set(self.parameters), set(self.sampler.bounds) if self.sampler else set(),
                   {p for settings in self.cases.values() for p in settings}]
        for i, first in enumerate(sources):
            for second in sources[i + 1 :]:
                both = sorted(first & second)
                if both:
                    raise ValueError(
                        f"sweep: {both} set by more than one of cases, parameters, sampler"
                    )
        return self
