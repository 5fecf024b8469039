"""A small deterministic stand-in for ``run_experiment`` used to test the sweep machinery.

It writes the same kind of run directory (``agents_yearly.csv``, ``model_yearly.csv``,
``manifest.json``) through ``<out_dir>.partial`` renamed on success, with values drawn from a
generator seeded by the config, so equal configurations give byte-identical outputs. Behaviours
are keyed on ``population.size`` so a sweep can contain them:

* 13: raises ``ValueError`` (a run that always fails);
* 17: on its first attempt writes ``_test_markers/<run_id>.json`` (pid, SLURM job) and sleeps
  until killed; later attempts finish normally (a task killed mid-run, then resumed);
* 19: on its first attempt kills its own process with SIGKILL (a crashed worker).

Every call appends a line to ``_test_markers/calls.log`` (to count the work done) and, when the
run has an ``llm`` block, ``<run_id> <llm.hosts>`` to ``_test_markers/hosts.log``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd


def _markers(out_dir: Path) -> Path:
    path = out_dir.parent / "_test_markers"
    path.mkdir(exist_ok=True)
    return path


def fake_run(config, out_dir, *, progress: bool = True) -> Path:
    out_dir = Path(out_dir)
    markers = _markers(out_dir)
    with open(markers / "calls.log", "a", encoding="utf-8") as log:
        log.write(out_dir.name + "\n")
    if config.llm is not None:
        with open(markers / "hosts.log", "a", encoding="utf-8") as log:
            log.write(f"{out_dir.name} {','.join(config.llm.hosts)}\n")
    size = config.population.size
    first_attempt = not (markers / f"{out_dir.name}.json").exists()
    if size == 13:
        raise ValueError(f"deliberate failure for population.size={size}")
    work = out_dir.with_name(out_dir.name + ".partial")
    work.mkdir(parents=True, exist_ok=True)
    if size in (17, 19) and first_attempt:
        info = {
            "pid": os.getpid(),
            "job": os.environ.get("SLURM_JOB_ID"),
            "array_job": os.environ.get("SLURM_ARRAY_JOB_ID"),
            "array_task": os.environ.get("SLURM_ARRAY_TASK_ID"),
        }
        # written whole, then renamed: the test reads the marker as soon as it appears
        tmp = markers / f".{out_dir.name}.tmp"
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, markers / f"{out_dir.name}.json")
        if size == 19:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(300)
    rng = np.random.default_rng(config.seed)
    rows = []
    for year in range(1, config.years + 1):
        for agent in range(size):
            depth = float(rng.gamma(2.0, 0.3))
            rows.append(
                {
                    "year": year,
                    "agent_id": agent,
                    "depth_m": round(depth, 6),
                    "premium_usd": round(100 * config.insurance.loading * (1 + depth), 2),
                    "insured_after": bool(rng.random() < 0.3),
                    "threat_label": "" if agent % 2 else "H",
                }
            )
    agents = pd.DataFrame(rows)
    agents.to_csv(work / "agents_yearly.csv", index=False)
    model = agents.groupby("year", as_index=False).agg(
        mean_depth_m=("depth_m", "mean"), total_premiums_usd=("premium_usd", "sum")
    )
    model.to_csv(work / "model_yearly.csv", index=False)
    manifest = {"seed": config.seed, "n_agent_rows": len(agents)}  # checked by sweep status
    (work / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(work, out_dir)
    return out_dir


def calls(sweep_dir: Path) -> list[str]:
    """Run ids the fake was called for, in call order."""
    log = Path(sweep_dir) / "_test_markers" / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def hosts(sweep_dir: Path) -> list[tuple[str, str]]:
    """(run id, its ``llm.hosts`` joined by commas) of each call with an ``llm`` block."""
    log = Path(sweep_dir) / "_test_markers" / "hosts.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [tuple(line.split(" ", 1)) for line in lines]
