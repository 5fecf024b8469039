"""Policy arms from one history: ``governed-broker branch RUN_DIR --from-year T --arm ...``.

A branch forks a finished run (or a finished sweep of replicate seeds of one configuration) at
year ``T`` into arms that differ only in policy settings (``config.policy.POLICY_SETTINGS``),
and writes them as a sweep directory, so that ``report``, ``status`` and ``collect`` work on it
and the report shows each arm's paired difference against the parent's policy:

* the arms are the sweep's cases: a reference arm named after ``RUN_DIR`` (the parent's
  settings, no change) and each ``--arm NAME=...`` with ``policy_change: {from_year: T,
  settings: ...}``, each run with every seed of the parent;
* they are re-simulated from the parent's saved ``config.yaml`` (finished runs keep no
  checkpoint), re-loaded against its manifest's ``config_base_dir``; every random stream is
  keyed by (seed, year), so years before ``T`` repeat the parent's, and an LLM arm's calls in
  those years come from the response cache;
* after the runs, each arm's rows for years before ``T`` (every year for the reference arm) are
  compared with the parent's (``sweep.history``); a difference is an error naming the arm, the
  file and the first differing year;
* ``branch.json`` in the branch directory records the parent (path, config hashes), ``T``, the
  arms and the outcome of that check.

Re-running the same command resumes like a sweep (done runs are kept); arms may be added later
to the same directory, but the parent and ``T`` of a branch directory are fixed.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from governed_broker.config import ConfigError, ExperimentConfig, load_experiment
from governed_broker.config.base import portable_name_problem
from governed_broker.config.loader import apply_overrides
from governed_broker.config.policy import POLICY_SETTINGS
from governed_broker.config.sweep import SweepConfig
from governed_broker.config.validation import validate_model
from governed_broker.config.yamlsafe import load_yaml_text, read_yaml
from governed_broker.run_dir import check_out_dir
from governed_broker.sweep.api import SweepLock, SweepResult, require_cards, run_plan_locked
from governed_broker.sweep.collect import load_plan
from governed_broker.sweep.history import DECISIONS_FILE, Difference, compare_run
from governed_broker.sweep.parent import Parent, read_parent
from governed_broker.sweep.plan import CASE, PlannedRun, SweepPlan, format_override, run_id_of
from governed_broker.sweep.state import SweepDir, now_iso, write_atomic
from governed_broker.sweep.worker import RunFunction

#: The record of a branch in its directory (read by ``analysis.report``).
BRANCH_FILE = "branch.json"
#: An arm's name: a sweep case name that starts with a letter or digit.
ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Where an arm's settings split: a comma followed by the next ``SETTING=`` or ``@FILE``.
_NEXT_ITEM = re.compile(r",(?=\s*(?:@|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*\s*=))")
_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*$")
#: Sweep settings ``--set`` may change: how the arms execute, never what they simulate.
EXECUTION_SETTINGS = ("executor", "max_workers", "max_attempts", "slurm", "llm_hosts")
ARM_SYNTAX = ("NAME=SETTING=VALUE[,SETTING=VALUE...] or NAME=@FILE.yaml (a YAML mapping of "
              "settings), e.g. --arm risk=insurance.pricing=risk_based")


@dataclass(frozen=True)
class Arm:
    """One ``--arm``: a name and the policy settings it changes from year ``T``.

    Attributes:
        name: The arm's name (its sweep case).
        settings: Dotted policy setting -> value (a whole ``buyout`` section may be one).
        text: The ``--arm`` value as given, for messages.
        files: The ``@FILE`` each setting read from a file came from (messages never quote a
            file's key that is not a setting: the file may be any file).
    """

    name: str
    settings: dict[str, Any]
    text: str
    files: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class BranchPlan:
    """A checked branch, ready to run (nothing written yet).

    Attributes:
        parent: The parent (``sweep.parent``).
        from_year: First year of the arms' policies.
        arms: The ``--arm`` arms (the reference arm is ``parent.name``).
        plan: The sweep plan of every arm x parent seed (reference arm first).
        out_dir: The branch directory.
    """

    parent: Parent
    from_year: int
    arms: tuple[Arm, ...]
    plan: SweepPlan
    out_dir: Path

    @property
    def reference(self) -> str:
        """The reference arm's name (the parent's policy, re-simulated)."""
        return self.parent.name

    def record(self, verification: dict[str, Any]) -> dict[str, Any]:
        """The content of ``branch.json``."""
        return {
            "parent": self.parent.to_json(),
            "from_year": self.from_year,
            "reference_arm": self.reference,
            "arms": {arm.name: arm.settings for arm in self.arms},
            "verification": verification,
        }


@dataclass
class BranchResult:
    """Outcome of running a branch.

    Attributes:
        sweep: The sweep's outcome (index, runs executed).
        checked: Runs whose history was compared with the parent's (the done ones).
        with_decisions: Of those, runs whose ``decisions.jsonl`` was compared too (LLM runs).
        differences: (arm, seed, run id, difference) for every file that departs from the
            parent's where it must not.
    """

    sweep: SweepResult
    checked: int
    with_decisions: int = 0
    differences: list[tuple[str, int, str, Difference]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when the history check failed or a run is not done, else 0."""
        return 1 if self.differences else self.sweep.exit_code


# --------------------------------------------------------------------------------------------
# Arms
# --------------------------------------------------------------------------------------------


def parse_arm(text: str) -> Arm:
    """Parse one ``--arm`` value (its settings are checked against a parent by ``plan_branch``).

    ``NAME=SETTING=VALUE[,SETTING=VALUE...]``: values are YAML, as with ``--set``; a comma
    starts the next setting only where ``SETTING=`` (or ``@FILE``) follows, so a flow mapping
    such as ``buyout={min_floods: 2, price_share: 1.0}`` stays one value. ``@FILE`` reads a
    YAML mapping of settings (e.g. ``buyout: {...}``), and may be mixed with settings.

    Raises:
        ConfigError: bad syntax, bad name, a setting given twice, an unreadable file.
    """
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not name or not rest.strip():
        raise ConfigError(f"--arm {text!r}: expected {ARM_SYNTAX}")
    if not ARM_NAME.match(name):
        raise ConfigError(f"--arm {text!r}: arm name {name!r} must start with a letter or digit "
                          "and use only letters, digits, _ . - (at most 64 characters)")
    problem = portable_name_problem(name)
    if problem is not None:
        raise ConfigError(f"--arm {text!r}: arm name {name!r}: {problem}")
    settings: dict[str, Any] = {}
    files: dict[str, Path] = {}
    for item in _NEXT_ITEM.split(rest):
        for key, value, file in _arm_item(text, item.strip()):
            if key in settings:
                shown = repr(key) if file is None or _is_setting(key) else "a key"
                raise ConfigError(f"--arm {text!r}: setting {shown} is given twice")
            settings[key] = value
            if file is not None:
                files[key] = file
    return Arm(name, settings, text, files)


def _arm_item(text: str, item: str) -> list[tuple[str, Any, Path | None]]:
    """The settings of one comma-separated item of an ``--arm`` value.

    Each with the file it was read from (None: written in the value).
    """
    if item.startswith("@"):
        path = Path(item[1:]).expanduser()
        try:
            data = read_yaml(path, "arm settings file")
        except ConfigError as exc:
            raise ConfigError(f"--arm {text!r}: {exc}") from exc
        if not isinstance(data, dict) or not data or not all(isinstance(k, str) for k in data):
            raise ConfigError(f"--arm {text!r}: {path} must hold a mapping of policy settings, "
                              "e.g. 'buyout: {min_floods: 2, price_share: 1.0}' or "
                              "'insurance.pricing: risk_based'")
        return [(key, value, path) for key, value in data.items()]
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not _SETTING.match(key):
        raise ConfigError(f"--arm {text!r}: {item!r} is not SETTING=VALUE; expected {ARM_SYNTAX}")
    if not raw.strip():
        raise ConfigError(f"--arm {text!r}: {key!r} has no value (write null to remove a "
                          "section, e.g. buyout=null)")
    return [(key, load_yaml_text(raw, f"--arm {text!r}: {key}"), None)]


def check_arm_settings(arm: Arm) -> None:
    """Every setting of ``arm`` is a policy setting (an unknown setting is said as such).

    A key read from an ``@FILE`` is quoted only when it is a setting of an experiment: the
    file may be any file (a mistyped path), whose lines must not reach a message.

    Raises:
        ConfigError: naming the flag, the setting and what is allowed.
    """
    for number, key in enumerate(arm.settings, start=1):
        if key in POLICY_SETTINGS:
            continue
        known = _is_setting(key)
        what = ("is not a policy setting (one the world reads afresh every year, so it may "
                "change from a year on)" if known else "is not a setting of an experiment")
        if known or key not in arm.files:
            shown = repr(key)
        else:
            near = difflib.get_close_matches(key, POLICY_SETTINGS, n=1, cutoff=0.8)
            what += (" (a file's keys are quoted only when they are settings)"
                     + (f"; did you mean {near[0]!r}?" if near else ""))
            shown = f"{arm.files[key]}: key number {number}"
        raise ConfigError(f"--arm {arm.text!r}: {shown} {what}; policy settings: "
                          f"{', '.join(POLICY_SETTINGS)}")


def _is_setting(key: str) -> bool:
    """Whether ``key`` is a dotted setting of an experiment (policy or not)."""
    try:
        apply_overrides({}, [f"{key}=null"], ExperimentConfig, Path("the experiment"))
    except ConfigError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------


def default_branch_dir(parent: Path, from_year: int) -> Path:
    """``<RUN_DIR>-branch-T<T>``, beside the parent."""
    return parent.with_name(f"{parent.name}-branch-T{from_year}")


def plan_branch(
    run_dir: str | Path,
    from_year: int,
    arms: Sequence[str],
    *,
    overrides: Sequence[str] = (),
    out_dir: str | Path | None = None,
) -> BranchPlan:
    """Check everything a branch needs and plan its runs; writes nothing.

    Args:
        run_dir: The parent: a finished run, or a finished sweep of replicate seeds.
        from_year: ``T``, the first year of the arms' policies (2 to the parent's years).
        arms: ``--arm`` values (``parse_arm``).
        overrides: ``--set sweep.KEY=VALUE`` strings: execution settings of the branch's sweep
            (``EXECUTION_SETTINGS``; a sweep parent's are inherited).
        out_dir: The branch directory (default ``default_branch_dir``).

    Raises:
        ConfigError: any problem, naming the flag and value (exit 2, nothing written).
    """
    parsed = [parse_arm(text) for text in arms]
    if not parsed:
        raise ConfigError(f"--arm: give at least one arm ({ARM_SYNTAX})")
    parent = read_parent(run_dir)
    if not 2 <= from_year <= parent.years:
        raise ConfigError(
            f"--from-year {from_year}: must be 2 to {parent.years} (the parent's years); the "
            "arms share years 1 to T-1 with the parent and differ from year T")
    _check_names(parsed, parent.name)
    for arm in parsed:
        check_arm_settings(arm)
    sweep = _sweep_settings(parent, overrides, parsed, from_year)
    runs = _plan_runs(parent, sweep, parsed)
    plan = SweepPlan(parent.config_file, (), parent.config.name, sweep, runs, parent.base_dir)
    out = _branch_dir(out_dir, parent, from_year)
    return BranchPlan(parent, from_year, tuple(parsed), plan, out)


def _check_names(arms: list[Arm], reference: str) -> None:
    seen: set[str] = {reference}
    for arm in arms:
        if arm.name in seen:
            what = ("the reference arm's (the parent's name)" if arm.name == reference
                    else "another arm's")
            raise ConfigError(f"--arm {arm.text!r}: the name {arm.name!r} is {what}; give each "
                              "arm a name of its own")
        seen.add(arm.name)


def _sweep_settings(parent: Parent, overrides: Sequence[str], arms: list[Arm],
                    from_year: int) -> SweepConfig:
    """The branch's sweep: its arms as cases.

    Execution settings from ``--set`` over a sweep parent's own.
    """
    inherited: dict[str, Any] = {}
    if parent.kind == "sweep":
        own = load_plan(SweepDir(parent.path)).sweep.model_dump(mode="json")
        inherited = {k: v for k, v in own.items() if k in EXECUTION_SETTINGS}
    data: dict[str, Any] = {"sweep": inherited}
    for text in overrides:
        parts = text.split("=", 1)[0].strip().split(".")
        if parts[0] != "sweep" or len(parts) < 2 or parts[1] not in EXECUTION_SETTINGS:
            raise ConfigError(
                f"--set {text!r}: a branch takes only the execution settings of its sweep "
                f"({', '.join('sweep.' + s for s in EXECUTION_SETTINGS)}); what the arms "
                "simulate comes from the parent and --arm")
    apply_overrides(data, overrides, ExperimentConfig, Path("--set"))
    cases: dict[str, dict[str, Any]] = {parent.name: {"policy_change": None}}
    for arm in arms:
        cases[arm.name] = {"policy_change": {"from_year": from_year, "settings": arm.settings}}
    settings = {**(data.get("sweep") or {}), "cases": cases, "replicates": len(parent.runs)}
    return validate_model(SweepConfig, settings, Path("--set sweep"))


def _plan_runs(parent: Parent, sweep: SweepConfig, arms: list[Arm]) -> tuple[PlannedRun, ...]:
    """Every arm with every seed of the parent; each arm's configuration validated now."""
    by_text = {arm.name: arm.text for arm in arms}
    runs: list[PlannedRun] = []
    owner: dict[str, str] = {}
    for name, case in sweep.cases.items():
        override = format_override("policy_change", case["policy_change"])
        config = _arm_config(parent, override, by_text.get(name))
        for replicate, parent_run in enumerate(parent.runs):
            run_id = run_id_of(config.model_copy(update={"seed": parent_run.seed}))
            if run_id in owner:
                raise ConfigError(f"--arm {by_text[name]!r}: the same policy as arm "
                                  f"{owner[run_id]!r}; give each arm a policy of its own")
            owner[run_id] = name
            runs.append(PlannedRun(
                index=len(runs), run_id=run_id, params={CASE: name, **case},
                replicate=replicate, seed=parent_run.seed,
                overrides=(override, f"seed={parent_run.seed}")))
    return tuple(runs)


def _arm_config(parent: Parent, override: str, text: str | None) -> ExperimentConfig:
    """The configuration of an arm (seed aside), validated; errors name the ``--arm``."""
    try:
        return load_experiment(parent.config_file, [override], base_dir=parent.base_dir)
    except ConfigError as exc:
        if text is None:
            raise
        raise ConfigError(f"--arm {text!r}: {exc}") from exc


def _branch_dir(out_dir: str | Path | None, parent: Parent, from_year: int) -> Path:
    """The branch directory, checked.

    Confined, never in or around the parent, never a run, and when it exists a branch of the same
    parent at the same year (which it resumes).

    Raises:
        ConfigError: a place the branch may not write.
    """
    requested = out_dir if out_dir is not None else default_branch_dir(parent.path, from_year)
    out = check_out_dir(requested)
    flag = f"--out {str(requested)!r}"
    if out == parent.path or parent.path in out.parents:
        raise ConfigError(f"{flag}: inside the parent {parent.path}; a branch is written beside "
                          "its parent, never into it")
    if out in parent.path.parents:
        raise ConfigError(f"{flag}: holds the parent {parent.path}; give the branch a directory "
                          "of its own")
    if not out.exists():
        return out
    if (out / "manifest.json").exists():
        raise ConfigError(f"{flag}: {out} is a finished run; a branch never overwrites one")
    record_path = out / BRANCH_FILE
    if not record_path.is_file():
        if any(out.iterdir()):
            raise ConfigError(f"{flag}: {out} exists and is not a branch directory (no "
                              f"{BRANCH_FILE}); choose another --out")
        return out
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        other = (record["parent"]["path"], record["from_year"])
        same_runs = record["parent"]["runs"] == parent.to_json()["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{flag}: {record_path} is not readable ({exc}); choose another "
                          "--out") from exc
    if other != (str(parent.path), from_year):
        raise ConfigError(
            f"{flag}: {out} holds the branch of {other[0]} at year {other[1]}; a branch "
            "directory resumes only the same parent and year, so choose another --out")
    if not same_runs:
        raise ConfigError(
            f"{flag}: {out} was branched from {other[0]} when its runs were others (their "
            "seeds or config hashes differ from the parent's now); choose another --out")
    return out


# --------------------------------------------------------------------------------------------
# Running and checking
# --------------------------------------------------------------------------------------------


def run_branch(
    branch: BranchPlan,
    *,
    executor: str | None = None,
    max_workers: int | None = None,
    run_fn: RunFunction | None = None,
    progress: bool = True,
) -> BranchResult:
    """Run (or resume) the arms of a branch, then check their history against the parent's.

    ``branch.json`` is written before the runs (verification ``pending``) and again after the
    check, with its outcome.

    Raises:
        ConfigError: executor unavailable, directory in use, a gated LLM run without a card.
    """
    require_cards(branch.plan, branch.plan.runs)  # before anything is written
    sweep_dir = SweepDir(branch.out_dir)
    sweep_dir.root.mkdir(parents=True, exist_ok=True)
    with SweepLock(sweep_dir):
        _write_record(branch, {"status": "pending"})
        sweep = run_plan_locked(branch.plan, sweep_dir, executor=executor,
                                max_workers=max_workers, run_fn=run_fn, progress=progress)
        result = verify_branch(branch, sweep)
        _write_record(branch, _verification(branch, result))
    return result


def verify_branch(branch: BranchPlan, sweep: SweepResult) -> BranchResult:
    """Compare every done arm run with the parent run of the same seed.

    Non-reference arms are compared for the years before ``from_year``; the reference arm for
    every year (it is the parent, re-simulated).
    """
    sweep_dir = SweepDir(branch.out_dir)
    parent_runs = {run.seed: run for run in branch.parent.runs}
    result = BranchResult(sweep, 0)
    for run in branch.plan.runs:
        if not sweep_dir.is_done(run.run_id):
            continue
        arm = str(run.params[CASE])
        before = None if arm == branch.reference else branch.from_year
        differences = compare_run(parent_runs[run.seed].path, sweep_dir.run_dir(run.run_id),
                                  before)
        result.checked += 1
        result.with_decisions += (parent_runs[run.seed].path / DECISIONS_FILE).is_file()
        result.differences += [(arm, run.seed, run.run_id, d) for d in differences]
    return result


def _verification(branch: BranchPlan, result: BranchResult) -> dict[str, Any]:
    """The ``verification`` entry of ``branch.json``."""
    planned = len(branch.plan.runs)
    if result.differences:
        status = "failed"
    elif result.checked < planned:
        status = "incomplete"
    else:
        status = "passed"
    return {"status": status, "checked_at": now_iso(), "runs_checked": result.checked,
            "runs_planned": planned, "decisions_compared": result.with_decisions,
            "differences": format_differences(result)}


def format_differences(result: BranchResult) -> list[str]:
    """One line per file of an arm that departs from the parent's history."""
    return [f"arm {arm} (seed {seed}, run {run_id}): {difference}"
            for arm, seed, run_id, difference in result.differences]


def _write_record(branch: BranchPlan, verification: dict[str, Any]) -> None:
    write_atomic(branch.out_dir / BRANCH_FILE,
                 json.dumps(branch.record(verification), indent=1, sort_keys=False) + "\n")


def describe(branch: BranchPlan) -> str:
    """What a branch forks and into what, for the command line."""
    seeds = ", ".join(str(r.seed) for r in branch.parent.runs[:5])
    if len(branch.parent.runs) > 5:
        seeds += f" and {len(branch.parent.runs) - 5} more"
    lines = [f"branch of {branch.parent.path} ({branch.parent.kind}, seed(s) {seeds}) at year "
             f"{branch.from_year} of {branch.parent.years} into {branch.out_dir}:",
             f"  {branch.reference}: the parent's policy (reference arm)"]
    lines += [f"  {arm.name}: from year {branch.from_year} "
              + json.dumps(arm.settings, default=str) for arm in branch.arms]
    return "\n".join(lines)
