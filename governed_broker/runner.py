"""One run of an experiment: the world stepped year by year, outputs moved into place at the end.

The run works inside ``<out_dir>.partial/`` (a deterministic name, so that an interrupted run can
be found again) and renames it to ``out_dir`` only after every file is written, so a failed run
never leaves a directory that looks complete. After every year it writes a checkpoint
(``governed_broker.checkpoint``); running the same experiment into the same ``out_dir`` again
resumes an interrupted run from its last completed year and finishes with the same outputs as an
uninterrupted run.
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from governed_broker import progress as progress_mod
from governed_broker.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointWriter,
    Verified,
    latest_checkpoint,
    remove_checkpoints,
    restore,
    rewind_outputs,
    verify_checkpoint,
)
from governed_broker.config.base import ConfigError
from governed_broker.config.cost import estimate_run_cost
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.loader import dump_resolved
from governed_broker.config.resolved import ResolvedExperiment, resolve_experiment
from governed_broker.contracts.columns import INSTITUTIONS_YEARLY, names
from governed_broker.contracts.decision import DecisionMaker
from governed_broker.contracts.institutions import InstitutionMaker
from governed_broker.contracts.jsonl import JsonlWriter
from governed_broker.run_dir import (
    TMP_PREFIX,
    RunLock,
    check_out_dir,
    output_problems,
    partial_dir,
    remove_leftovers,
    remove_run_dir,
    require_own_run,
    write_atomic,
)
from governed_broker.sim.baseline import BaselineDecisionMaker
from governed_broker.sim.csvout import format_row, format_rows
from governed_broker.sim.model import FloodModel
from governed_broker.sim.reporters import AGENT_COLUMNS

#: Where a finished run being replaced is moved (inside ``<out>.partial``) before deletion.
_REPLACED = TMP_PREFIX + "replaced"

#: Packages whose versions are recorded in the manifest.
_VERSIONED = ("governed-broker", "mesa", "numpy", "pandas", "pydantic", "pyyaml", "networkx",
              "matplotlib", "tqdm")


__all__ = ["OutputExistsError", "RunResult", "build_decision_maker", "partial_dir",
           "run_experiment"]


class OutputExistsError(RuntimeError):
    """The output directory already holds a complete run (pass ``overwrite=True``)."""


class OutputsChangedError(RuntimeError):
    """A finished run's outputs are not what it wrote; it is not published.

    Another process changed them.
    """


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced.

    Attributes:
        out_dir: The run directory.
        years: Simulated years.
        n_households: Households in the initial population.
        n_agent_rows: Rows written to ``agents_yearly.csv``.
        seconds: Wall-clock duration of the run (this process only, when resumed).
        decision_maker: Name of the decision maker.
        resumed_from_year: Last completed year of the interrupted run this one resumed
            (None: started from the beginning).
    """

    out_dir: Path
    years: int
    n_households: int
    n_agent_rows: int
    seconds: float
    decision_maker: str
    resumed_from_year: int | None = None


def build_decision_maker(experiment: ResolvedExperiment, run_dir: Path) -> DecisionMaker:
    """The decision maker the experiment asks for."""
    config = experiment.config
    if config.decision.maker == "baseline":
        return BaselineDecisionMaker(config.decision.baseline, experiment.domain, config.seed)
    from governed_broker.broker.factory import build_decision_maker as build_llm

    return build_llm(experiment, run_dir)


def build_institution_makers(experiment: ResolvedExperiment, run_dir: Path,
                             household_maker: DecisionMaker) -> dict[str, InstitutionMaker]:
    """The LLM makers of the institutions an LLM decides for.

    None: rule makers only, which the world builds itself.
    """
    inst = experiment.config.institutions
    if inst is None or not inst.llm_makers:
        return {}
    from governed_broker.broker.institutions import build_institution_makers as build_llm

    return build_llm(experiment, run_dir, household_maker)


#: Files of the institutions' outputs (runs with ``institutions:``).
INSTITUTIONS_CSV = "institutions_yearly.csv"
INSTITUTIONS_AUDIT = "institutions.jsonl"
INSTITUTION_COLUMNS = names(INSTITUTIONS_YEARLY)


def run_experiment(
    experiment: ResolvedExperiment | ExperimentConfig,
    out_dir: str | Path,
    *,
    progress: bool = True,
    overwrite: bool = False,
    decision_maker: DecisionMaker | None = None,
) -> RunResult:
    """Run one experiment and write its outputs (docs/ARCHITECTURE.md "Output contract").

    Args:
        experiment: The resolved experiment (``config.resolved.load_resolved``); a bare
            ``ExperimentConfig`` is resolved here.
        out_dir: The run directory to create (checked by ``run_dir.check_out_dir``).
        progress: Show the run's progress on stderr (``governed_broker.progress``: one line
            rewritten on a terminal, plain lines in a log).
        overwrite: Replace an existing complete ``out_dir`` (only one that is recognisably a
            run of ours).
        decision_maker: Use this maker instead of the one ``config.decision`` names (tests).

    An unfinished run of the same configuration in ``<out_dir>.partial`` is resumed from its
    last checkpoint (one that was killed while finishing is only finished); one of another
    configuration is an error unless ``overwrite`` is True, which discards it. The whole run
    holds ``<out_dir>.lock``, so a second run into the same directory is refused.

    Raises:
        OutputExistsError: ``out_dir`` exists, or ``<out_dir>.partial`` holds an unfinished run
            of another configuration, and ``overwrite`` is False.
        ConfigError: ``out_dir`` is not a place a run may write (see ``run_dir``), or
            another run holds its lock.
    """
    out_dir = check_out_dir(out_dir)
    with RunLock(out_dir) as lock:
        if out_dir.exists():
            if not overwrite:
                raise OutputExistsError(
                    f"{out_dir} already exists; choose another --out or pass --overwrite")
            require_own_run(out_dir, finished=True, action="replace")
        if isinstance(experiment, ExperimentConfig):
            experiment = resolve_experiment(experiment)
        return _run_locked(experiment, out_dir, progress, overwrite, decision_maker, lock)


def _run_locked(experiment: ResolvedExperiment, out_dir: Path, progress: bool, overwrite: bool,
                decision_maker: DecisionMaker | None, lock: RunLock) -> RunResult:
    from governed_broker.validity.gate import check_gate

    config, chash = experiment.config, experiment.config_hash
    gate = check_gate(experiment)  # before anything is written: a blocked run leaves no trace
    work = partial_dir(out_dir)
    finished = _finished_manifest(work, chash, overwrite)
    if finished is not None:  # killed after finishing, before the rename: only publish
        _publish(work, out_dir, finished, lock)
        return RunResult(out_dir, config.years, finished["n_households"], finished["n_agent_rows"],
                         0.0, finished["decision_maker"], finished.get("resumed_from_year"))
    ckpt, verified = _resumable(work, chash, overwrite)
    fresh = ckpt is None
    if fresh:
        work.mkdir(parents=True)
    else:
        rewind_outputs(work, ckpt)
    started, t0 = _now(), time.perf_counter()
    institution_makers: dict[str, InstitutionMaker] = {}
    maker = None
    try:
        maker = decision_maker or build_decision_maker(experiment, work)
        institution_makers = build_institution_makers(experiment, work, maker)
    except BaseException:
        for built in [*institution_makers.values(), *([maker] if maker is not None else [])]:
            built.close()
        if fresh:
            shutil.rmtree(work)  # a run that could not start leaves nothing behind
        raise
    try:
        model, rows, outputs = _simulate(experiment, maker, work, ckpt, verified,
                                         progress and config.outputs.progress,
                                         institution_makers, lock)
        llm = maker.provenance()
        institutions = (None if model.institutions is None
                        else model.institutions.provenance())
    finally:
        for built in institution_makers.values():  # before the household maker: they may
            built.close()                            # share its LLM backend
        maker.close()
    seconds = time.perf_counter() - t0
    manifest = _manifest(config, chash, maker, started, seconds, model, rows)
    manifest["outputs"] = outputs
    n_households = model.n
    model.release()
    manifest["resumed_from_year"] = None if ckpt is None else ckpt.year
    manifest["llm"] = llm
    if institutions is not None:
        manifest["institutions"] = institutions
    manifest["validity"] = gate.record
    if gate.card_text is not None:
        write_atomic(work / gate.CARD_FILE, gate.card_text)
    _finalise(config, work, manifest)
    _publish(work, out_dir, manifest, lock)
    return RunResult(out_dir, config.years, n_households, rows, seconds, maker.name,
                     None if ckpt is None else ckpt.year)


def _finalise(config: ExperimentConfig, work: Path, manifest: dict[str, Any]) -> None:
    """Write the end-of-run files; the manifest last, so that it marks a finished run.

    The final year's checkpoint stays until the manifest is in place: a run killed before that
    resumes from it, simulates no year and finishes again.
    """
    write_atomic(work / "config.yaml", dump_resolved(config))
    if config.outputs.plots:
        from governed_broker.sim.plots import summary_plot

        tmp = work / (TMP_PREFIX + "summary.png")
        summary_plot(work / "model_yearly.csv", tmp, title=config.name)
        os.replace(tmp, work / "summary.png")
    write_atomic(work / "manifest.json", json.dumps(manifest, indent=2) + "\n")


def _publish(work: Path, out_dir: Path, manifest: Mapping[str, Any], lock: RunLock) -> None:
    """Move a finished run (``work`` holds its manifest) into place, replacing ``out_dir``.

    Only while the run still holds its lock, and only when its outputs on disk are what it
    wrote (``run_dir.output_problems``: sizes, digests, agent rows): otherwise another writer
    touched them and nothing is published. Every step may be killed and repeated by running
    again: the run being replaced is first renamed into ``work`` (one atomic step; from then
    on it is a leftover of this run), so a kill while deleting it never leaves a half-deleted
    run at ``out_dir`` that could no longer be recognised as ours; the checkpoints go only
    after the manifest is in place.

    Raises:
        LockLostError: the lock is no longer this run's.
        OutputsChangedError: the outputs differ from what the run wrote.
    """
    lock.verify()
    problems = output_problems(work, dict(manifest))
    if problems:
        raise OutputsChangedError(
            f"nothing was published: the outputs in {work} are not what the run wrote ("
            + "; ".join(problems[:3]) + "); another process wrote into them? Move "
            f"{work} away and run again")
    remove_leftovers(work)  # half-written files and a replaced run of an earlier, killed try
    if out_dir.exists():
        if out_dir.is_symlink():
            raise ConfigError(f"refusing to replace {out_dir}: it is a symbolic link")
        require_own_run(out_dir, finished=True, action="replace")
        os.rename(out_dir, work / _REPLACED)
        shutil.rmtree(work / _REPLACED)
    remove_checkpoints(work)
    os.replace(work, out_dir)


def _finished_manifest(work: Path, chash: str, overwrite: bool) -> dict[str, Any] | None:
    """The manifest of a finished run in ``work`` that was never moved into place.

    None: the run in ``work``, if any, has not finished.
    """
    if not (work / "manifest.json").is_file():
        return None
    require_own_run(work, finished=True, action="resume")
    manifest = json.loads((work / "manifest.json").read_text(encoding="utf-8"))
    if manifest["config_hash"] == chash:
        return manifest
    if not overwrite:
        raise OutputExistsError(
            f"{work} holds a finished run of a different configuration; pass --overwrite to "
            "discard it, or choose another --out")
    remove_run_dir(work, finished=True)
    return None


def _resumable(work: Path, chash: str,
               overwrite: bool) -> tuple[Checkpoint, Verified] | tuple[None, None]:
    """The verified checkpoint to resume from in ``work``.

    ``(None, None)``: start afresh, ``work`` removed. With ``overwrite``, an unfinished run of
    another configuration or with a checkpoint that fails verification is discarded; without, either
    is an error.
    """
    if not work.exists():
        return None, None
    require_own_run(work, finished=False, action="resume")
    try:
        ckpt = latest_checkpoint(work)
        if ckpt is not None and ckpt.config_hash != chash:
            if not overwrite:
                raise OutputExistsError(
                    f"{work} holds an unfinished run of a different configuration; pass "
                    "--overwrite to discard it, or choose another --out")
            ckpt = None
        if ckpt is not None:
            return ckpt, verify_checkpoint(work, ckpt)  # before anything is cut or changed
    except CheckpointError:
        if not overwrite:
            raise
    remove_run_dir(work, finished=False)  # nothing (trustworthy) completed: start again
    return None, None


def _simulate(
    experiment: ResolvedExperiment, maker: DecisionMaker, work: Path,
    ckpt: Checkpoint | None, verified: Verified | None, progress: bool,
    institution_makers: Mapping[str, InstitutionMaker] | None, lock: RunLock,
) -> tuple[FloodModel, int, dict[str, Any]]:
    """The run's world, simulated to its last year (the caller releases it once read).

    And the number of agent rows written and the outputs' sizes and digests.
    """
    config = experiment.config
    model = FloodModel(experiment, maker, run_dir=work, institution_makers=institution_makers)
    try:
        rows, outputs = _years(model, experiment, work, ckpt, verified, progress, lock)
        if model.world_memory is not None:
            model.world_memory.finish(model.year, markdown=config.outputs.memory_markdown)
    except BaseException:
        if model.world_memory is not None:
            model.world_memory.abandon()
        model.release()
        raise
    return model, rows, outputs


def _years(model: FloodModel, experiment: ResolvedExperiment, work: Path,
           ckpt: Checkpoint | None, verified: Verified | None, progress: bool,
           lock: RunLock) -> tuple[int, dict[str, Any]]:
    """Simulate the years still to run, writing each year's rows and checkpoint.

    Each year and each checkpoint only while the run still holds its lock.

    Returns:
        The number of agent rows written in all, and the outputs' sizes and digests
        (``CheckpointWriter.outputs``).
    """
    config = experiment.config
    rows, mode = 0, "w"
    checkpoints = CheckpointWriter(work, experiment.config_hash, verified)
    if ckpt is not None:
        restore(model, ckpt)
        rows, mode = ckpt.rows, "a"
    with ExitStack() as files:
        files.enter_context(_collector_tuned())
        agents_f, model_f = (files.enter_context(open(work / name, mode, encoding="utf-8",
                                                      newline=""))
                             for name in ("agents_yearly.csv", "model_yearly.csv"))
        inst_f = audit = None
        if model.institutions is not None:
            inst_f = files.enter_context(open(work / INSTITUTIONS_CSV, mode, encoding="utf-8",
                                              newline=""))
            audit = JsonlWriter(work / INSTITUTIONS_AUDIT)
            files.callback(audit.close)
        if ckpt is None:
            agents_f.write(",".join(AGENT_COLUMNS) + "\n")
            model_f.write(",".join(model.model_columns) + "\n")
            if inst_f is not None:
                inst_f.write(",".join(INSTITUTION_COLUMNS) + "\n")
        meter = files.enter_context(progress_mod.reporting(
            progress_mod.Progress(config.name, enabled=progress)))
        _plan(meter, config, model)
        for year in range(model.year + 1, config.years + 1):
            lock.verify()
            meter.step("year", year, config.years)
            model.step()
            cols = model.last_agent_columns
            agents_f.write(format_rows(AGENT_COLUMNS, cols))
            model_f.write(format_row(model.model_columns, model.last_model_row))
            agents_f.flush()
            model_f.flush()
            if inst_f is not None:
                inst_f.write(format_row(INSTITUTION_COLUMNS, model.last_institution_row))
                inst_f.flush()
                audit.write_many({"run_id": experiment.run_id, **r}
                                 for r in model.institutions.records)
            rows += len(cols["agent_id"])
            lock.verify()
            checkpoints.write(model, rows)
    return rows, checkpoints.outputs()


def _plan(meter: progress_mod.Progress, config: ExperimentConfig, model: FloodModel) -> None:
    """The LLM calls still to come, by kind, for the progress line's ETA.

    Every active household decides every year left (an upper bound), reflects in each
    reflection year left, and each LLM institution decides once a year; calls per unit as
    ``estimate_run_cost`` expects them until the run has measured its own.
    """
    years_left = config.years - model.year
    if years_left <= 0:
        return
    cost = estimate_run_cost(config, households=int((~model.hh.relocated).sum()))
    if cost.decision_calls:
        meter.plan("decisions", cost.decision_calls // config.years * years_left,
                   cost.calls_per_decision)
    if cost.reflection_calls:
        interval = config.reflection.interval_years
        due = sum(1 for y in range(model.year + 1, config.years + 1) if y % interval == 0)
        meter.plan("reflections", cost.households * due)
    if cost.institution_calls:
        makers = len(config.institutions.llm_makers) if config.institutions else 0
        meter.plan("institutions", makers * years_left,
                   cost.institution_calls / max(1, makers * config.years))


@contextmanager
def _collector_tuned() -> Iterator[None]:
    """Python's cyclic garbage collector, tuned for the yearly loop while it runs.

    A year allocates millions of short-lived containers (prompts, replies, audit records) while
    the run keeps a growing heap of long-lived ones (memories); with the default thresholds
    (700, 10, 10) the collector's passes took 10-20 % of a governed run's CPU time
    (benchmarks/bench_scale.py). The youngest generation is collected after 20,000 allocations
    instead of 700 and the older ones after 20 collections of the younger instead of 10: the
    same garbage is collected, less often. The previous thresholds are restored afterwards.
    """
    before = gc.get_threshold()
    gc.set_threshold(20_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _manifest(config, chash, maker, started, seconds, model: FloodModel,
              rows: int) -> dict[str, Any]:
    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "name": config.name,
        "config_hash": chash,
        "seed": config.seed,
        "years": config.years,
        "decision_maker": maker.name,
        "n_households": model.n,
        # the domain, so that analysis knows the run's actions, their effects and its scale
        "actions": {a: spec.effect for a, spec in model.domain.actions.items()},
        "pmt_labels": list(model.domain.pmt_labels.labels),
        "n_active_end": int((~model.hh.relocated).sum()),
        "n_agent_rows": rows,
        "config_base_dir": str(config.base_dir),
        "started_at": started,
        "finished_at": _now(),
        "seconds": round(seconds, 3),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
        "git_commit": _git_commit(),
    }


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _git_commit() -> str | None:
    """Commit of the source tree, if it is a git checkout (None otherwise)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
