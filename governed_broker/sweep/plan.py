"""Expanding an experiment's ``sweep:`` block into the list of runs to do.

Runs are the product of grid points, sampler points and replicates. Each run is described by
``--set`` overrides on top of the experiment file, so a worker (a local process or a SLURM
array task) rebuilds exactly the same validated configuration with ``load_experiment``. A run's
id is a hash of its resolved configuration and input files (``run_id_of``): re-submitting the
same sweep finds the same ids and skips finished runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from governed_broker.config import ConfigError, ExperimentConfig, load_experiment
from governed_broker.config.hashing import config_hash
from governed_broker.config.sweep import SamplerConfig, SweepConfig
from governed_broker.seeding import child_seed

#: Prefix of swept-parameter columns in ``sweep_runs.csv`` (``param.memory.engine``).
PARAM_PREFIX = "param."
#: Parameter name under which a run's case name is recorded (``param.case``).
CASE = "case"


def run_config(config: ExperimentConfig) -> ExperimentConfig:
    """The configuration one run of a sweep executes: the experiment without its sweep block."""
    return config.model_copy(update={"sweep": None})


def run_id_of(config: ExperimentConfig) -> str:
    """Id of a run: the first 12 hex digits of ``config_hash(run_config(config))``.

    ``governed_broker.config.hashing.config_hash`` covers the resolved settings (without the
    ``sweep`` block and ``llm.hosts``) and the contents of every input file, so a run's manifest
    ``config_hash`` starts with its id, and editing an input file gives new ids.
    """
    return config_hash(run_config(config))[:12]


def llm_host_for(run_id: str, hosts: Sequence[str]) -> str | None:
    """The LLM host of a run: ``hosts[int(run_id, 16) % len(hosts)]``, None without hosts.

    It depends only on the run id, so a run resumed or retried by a later submission uses the
    same host as before (its checkpoint and cache entries came from that server).
    """
    if not hosts:
        return None
    try:
        number = int(run_id, 16)
    except ValueError:  # not a hash (an invalid run): any stable number will do
        number = int(hashlib.sha256(run_id.encode("utf-8")).hexdigest(), 16)
    return hosts[number % len(hosts)]


def replicate_seed(seed: int, replicate: int) -> int:
    """Seed of replicate ``replicate`` of a sweep point whose experiment seed is ``seed``.

    Replicate 0 keeps ``seed`` (a one-replicate sweep reproduces ``governed-broker run``, and
    raising ``replicates`` later keeps the runs already done). Replicate r >= 1 uses child r of
    ``numpy.random.SeedSequence(seed)`` (``SeedSequence(seed).spawn(r + 1)[r]``), reduced to 63
    bits: the first 64-bit word of its state, shifted right by one.
    """
    if replicate == 0:
        return int(seed)
    child = np.random.SeedSequence(int(seed), spawn_key=(int(replicate),))
    return int(child.generate_state(1, dtype=np.uint64)[0]) >> 1


def format_override(path: str, value: Any) -> str:
    """A ``--set`` string whose YAML value parses back to exactly ``value``.

    Raises:
        ConfigError: ``value`` has no exact YAML form (NaN, infinity, other objects).
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"sweep value for {path!r}: {value!r} is not a finite number")
    # Readable Unicode first; escaped when a character (e.g. U+0085, a YAML line break) would
    # not read back.
    for allow_unicode in (True, False):
        try:
            text = yaml.safe_dump(
                value, default_flow_style=True, width=10**9, allow_unicode=allow_unicode
            )
        except yaml.YAMLError as exc:
            raise ConfigError(f"sweep value for {path!r}: {value!r} is not a YAML value") from exc
        text = text.removesuffix("\n...\n").rstrip("\n")
        if yaml.safe_load(text) == value:
            return f"{path}={text}"
    raise ConfigError(f"sweep value for {path!r}: {value!r} does not survive YAML")


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep.

    Attributes:
        index: Position in the plan (0-based; case, grid, sample, then replicate order).
        run_id: Hash of the resolved run configuration (directory name of the run).
        params: Swept values by setting path (with ``case`` first when cases are defined).
        replicate: Replicate number (0-based).
        seed: The run's experiment seed.
        overrides: ``--set`` strings applied after the sweep's base overrides.
        sample_method: ``grid``, ``lhs`` or ``sobol``.
        error: Why the configuration is invalid (the run is recorded as failed), else None.
    """

    index: int
    run_id: str
    params: dict[str, Any]
    replicate: int
    seed: int
    overrides: tuple[str, ...]
    sample_method: str = "grid"
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (see ``from_json``)."""
        data = asdict(self)
        data["overrides"] = list(self.overrides)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlannedRun:
        """Inverse of ``to_json``."""
        return cls(**{**data, "overrides": tuple(data["overrides"])})


@dataclass(frozen=True)
class SweepPlan:
    """All runs of a sweep and how to rebuild their configurations.

    Attributes:
        experiment: Absolute path of the experiment YAML.
        base_overrides: ``--set`` strings given on the command line (applied first).
        name: Experiment name.
        sweep: The validated sweep settings (after base overrides).
        runs: The runs, in plan order.
        base_dir: Directory the experiment's relative paths resolve against (None: the
            experiment file's own folder). A branch (``sweep.branch``) re-loads a finished
            run's ``config.yaml`` against the folder its manifest records.
    """

    experiment: Path
    base_overrides: tuple[str, ...]
    name: str
    sweep: SweepConfig
    runs: tuple[PlannedRun, ...] = field(default_factory=tuple)
    base_dir: Path | None = None

    def load(self, overrides: Sequence[str]) -> ExperimentConfig:
        """The experiment with ``overrides`` applied, its paths resolved as the plan says.

        Raises:
            ConfigError: the configuration does not validate.
        """
        return load_experiment(self.experiment, overrides, base_dir=self.base_dir)

    @property
    def parameter_names(self) -> list[str]:
        """Swept parameters: ``case`` (when cases are defined), their paths, grid, sampler."""
        names = [CASE] if self.sweep.cases else []
        for settings in self.sweep.cases.values():
            names += [p for p in settings if p not in names]
        names += list(self.sweep.parameters)
        if self.sweep.sampler is not None:
            names += list(self.sweep.sampler.bounds)
        return names

    def run_overrides(self, run: PlannedRun) -> list[str]:
        """Every ``--set`` string that rebuilds ``run``'s configuration."""
        return [*self.base_overrides, *run.overrides]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, stored as ``_sweep/plan.json`` in the sweep directory."""
        return {
            "experiment": str(self.experiment),
            "base_overrides": list(self.base_overrides),
            "name": self.name,
            "sweep": self.sweep.model_dump(mode="json"),
            "runs": [r.to_json() for r in self.runs],
            "base_dir": None if self.base_dir is None else str(self.base_dir),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepPlan:
        """Inverse of ``to_json``."""
        return cls(
            experiment=Path(data["experiment"]),
            base_overrides=tuple(data["base_overrides"]),
            name=data["name"],
            sweep=SweepConfig.model_validate(data["sweep"]),
            runs=tuple(PlannedRun.from_json(r) for r in data["runs"]),
            base_dir=Path(data["base_dir"]) if data.get("base_dir") else None,
        )


def sample_points(sampler: SamplerConfig, seed: int) -> list[dict[str, float | int]]:
    """Points of a Latin hypercube or Sobol' (Saltelli) design, drawn with SALib.

    The sampler's random seed is ``child_seed(seed, "sweep", "sampler")`` reduced to 32 bits,
    so the same experiment seed gives the same design.
    """
    names = list(sampler.bounds)
    problem = {
        "num_vars": len(names),
        "names": names,
        "bounds": [list(sampler.bounds[n]) for n in names],
    }
    salib_seed = child_seed(seed, "sweep", "sampler") % 2**32
    if sampler.method == "lhs":
        from SALib.sample import latin

        matrix = latin.sample(problem, sampler.n, seed=salib_seed)
    else:
        from SALib.sample import sobol

        matrix = sobol.sample(
            problem, sampler.n, calc_second_order=sampler.second_order, seed=salib_seed
        )
    points = []
    for row in np.asarray(matrix, dtype=float):
        point: dict[str, float | int] = {}
        for name, value in zip(names, row, strict=True):
            point[name] = int(round(value)) if name in sampler.integer else float(value)
        points.append(point)
    return points


def _points(sweep: SweepConfig, seed: int) -> list[tuple[str | None, dict[str, Any], str]]:
    """(case name, {setting path: value}, sample method) of every point, in plan order."""
    grid_names = list(sweep.parameters)
    grid = [
        dict(zip(grid_names, combo, strict=True))
        for combo in itertools.product(*(sweep.parameters[n] for n in grid_names))
    ]
    cases: list[tuple[str | None, dict[str, Any]]] = list(sweep.cases.items()) or [(None, {})]
    if sweep.sampler is None:
        return [(name, {**case, **g}, "grid") for name, case in cases for g in grid]
    samples = sample_points(sweep.sampler, seed)
    method = sweep.sampler.method
    return [(n, {**c, **g, **s}, method) for n, c in cases for g in grid for s in samples]


def build_plan(experiment: str | Path, overrides: Sequence[str] = ()) -> SweepPlan:
    """Expand the ``sweep:`` block of an experiment into runs.

    Sampler points that resolve to the same configuration share one run id (and one run).
    A point whose configuration does not validate (a bad parameter combination) becomes a run
    with ``error`` set: it is reported as failed, and the other runs go ahead. When no point
    validates, the sweep itself is a configuration error.

    Raises:
        ConfigError: unreadable experiment, no ``sweep:`` block, or no valid run at all.
    """
    path = Path(experiment).resolve()
    base = load_experiment(path, overrides)
    if base.sweep is None:
        raise ConfigError(
            f"{path}: no 'sweep:' section; add one (docs/sweeps.md) or use "
            "`governed-broker run` for a single run"
        )
    sweep = base.sweep
    runs: list[PlannedRun] = []
    for case, settings, method in _points(sweep, base.seed):
        point_overrides = [format_override(k, v) for k, v in settings.items()]
        params = {CASE: case, **settings} if case is not None else settings
        try:
            point = load_experiment(path, [*overrides, *point_overrides])
            error = None
        except ConfigError as exc:
            point, error = None, f"invalid configuration: {exc}"
        for replicate in range(sweep.replicates):
            seed = replicate_seed(point.seed if point else base.seed, replicate)
            run_overrides = list(point_overrides)
            if replicate > 0:
                run_overrides.append(f"seed={seed}")
            if point is not None:
                run_id = run_id_of(point.model_copy(update={"seed": seed}))
            else:
                key = json.dumps([list(overrides), run_overrides])
                run_id = "invalid-" + hashlib.sha256(key.encode()).hexdigest()[:8]
            runs.append(
                PlannedRun(
                    index=len(runs),
                    run_id=run_id,
                    params=params,
                    replicate=replicate,
                    seed=seed,
                    overrides=tuple(run_overrides),
                    sample_method=method,
                    error=error,
                )
            )
    if runs and all(r.error for r in runs):
        raise ConfigError(f"{path}: no valid run in the sweep; first problem:\n{runs[0].error}")
    _check_unique(runs, path)
    return SweepPlan(path, tuple(overrides), base.name, sweep, tuple(runs))


def _check_unique(runs: list[PlannedRun], path: Path) -> None:
    """Grid points must differ.

    Sampler points may coincide (a Saltelli design with an integer parameter repeats rows): such
    rows share one run, executed once.
    """
    seen: dict[str, PlannedRun] = {}
    for run in runs:
        if run.sample_method != "grid":
            continue
        other = seen.setdefault(run.run_id, run)
        if other is not run:
            raise ConfigError(
                f"{path}: sweep runs {other.index} {other.params} and {run.index} {run.params} "
                "resolve to the same configuration; remove the duplicate values"
            )
