"""Mutated configurations: each is refused with a message naming the field, or runs sanely.

Leaves of the real experiments (``baseline.yaml`` and the LLM ``demo.yaml``) are replaced by
hostile values (NaN, infinities, huge and negative numbers, booleans, text, containers, deep
nesting, huge lists), scaled by odd factors, or deleted; paths get a missing file, a binary
file, a directory, a system file, a file holding a secret, an alias bomb and an oversized file.
A mutation must either raise ``ConfigError`` naming the mutated field (never quoting a named
file's content), or load; one that loads is run small (the demo with the scripted backend
instead of the embedded model) and its CSVs must hold only finite, bounded numbers. Any other
exception is a failure.

The number of mutations per experiment is ``GOVERNED_BROKER_FUZZ_N`` (default 120, a few
seconds); set it higher to fuzz by hand, e.g. ``GOVERNED_BROKER_FUZZ_N=2000 pytest -s ...``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import traceback
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from governed_broker.config.base import ConfigError
from governed_broker.config.loader import load_experiment, read_experiment_yaml
from governed_broker.runner import run_experiment

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "fixtures" / "scripted_governance.yaml"
FUZZ_N = int(os.environ.get("GOVERNED_BROKER_FUZZ_N", "120"))
PATH_KEYS = ("agent_types", "table", "file", "concepts_file", "texts_file", "prompts_dir",
             "script", "knowledge_dir", "topics_file", "model_path", "path")
#: What no message may contain: it is only inside files a mutated path names.
SECRET = "hunter2-SECRET"
NUMBERS: list[Any] = [float("nan"), float("inf"), float("-inf"), 1e308, -1e308, -1, 0, 1e42,
                      True, False, "x", [1, 2], {"a": 1}, None, "\x1b[2J" + "y" * 500,
                      0.5, 2, 10, 1000,  # plausible values too, so that some mutations run
                      "CON", "lpt1.v2", "run."]  # names Windows cannot hold
FACTORS = (0.0, 0.5, 1.5, 3.0, -1.0, 10.0, 1e3, 1e9)
#: Money magnitudes a sane run can reach (USD): far above any single home, far below overflow.
MONEY_BOUND = 1e13
#: Flood depths a sane run can draw (metres): ten times the setting bound (config.world).
DEPTH_BOUND = 200.0
#: Columns documented as empty when there is nothing to report (no flood yet / this year).
MAY_BE_EMPTY = ("years_since_flood", "mean_depth_flooded_m")
#: Also empty in an LLM run: the baseline's continuous appraisals (docs/ARCHITECTURE.md).
EMPTY_IN_LLM_RUNS = ("threat_score", "coping_score")
#: Settings that make a mutated demo runnable here: the scripted backend, no response cache.
SCRIPTED = ["llm.backend=scripted", f"llm.script={SCRIPT}", "llm.model=null",
            "llm.model_path=null", 'llm.cache.mode="off"', "population.size=3", "years=2"]


def _deep(levels: int) -> Any:
    node: Any = 1
    for _ in range(levels):
        node = {"k": node}
    return node


def _paths(tmp: Path) -> list[Any]:
    binary = tmp / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    secret_map = tmp / "secret_map.yaml"
    secret_map.write_text(f"password: {SECRET}\nrelations: [[{SECRET}, x, y]]\n"
                          f"concepts: {{{SECRET}: [1]}}\nsystem: [{SECRET}]\n")
    secret_list = tmp / "secret_list.yaml"
    secret_list.write_text(f"- {SECRET}\n- {{pattern: {SECRET}}}\n")
    secret_dir = tmp / "secret_dir"
    secret_dir.mkdir(exist_ok=True)
    for name in ("household.yaml", "reflection.yaml", "rag_topics.yaml"):
        (secret_dir / name).write_text(secret_map.read_text())
    bomb = tmp / "bomb.yaml"
    bomb.write_text("a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n"
        for i in range(9)))
    huge = tmp / "huge.yaml"
    huge.write_text("k: [" + "1," * 600_000 + "1]\n")
    fifo = tmp / "fifo.yaml"  # reading it would wait for a writer forever
    if not fifo.exists():
        os.mkfifo(fifo)
    return [str(tmp / "missing.yaml"), str(binary), str(tmp), "/etc/passwd", str(secret_map),
            str(secret_list), str(secret_dir), str(bomb), str(huge), 5, True, str(fifo),
            "/dev/zero"]


def _leaves(node: Any, prefix: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in _leaves(v, (*prefix, k))]
    return [prefix]


def _absolute(data: dict, base: Path) -> dict:
    """Paths of the experiment made absolute (the mutated copy lives in a temporary folder)."""
    data = copy.deepcopy(data)
    for leaf in _leaves(data):
        if leaf[-1] in PATH_KEYS:
            holder = data
            for key in leaf[:-1]:
                holder = holder[key]
            if isinstance(holder[leaf[-1]], str):
                holder[leaf[-1]] = str((base / holder[leaf[-1]]).resolve())
    configs = REPO / "configs"
    data.setdefault("memory", {}).setdefault("concepts_file",
                                             str(configs / "knowledge" / "flood_concepts.yaml"))
    data["memory"].setdefault("texts_file", str(configs / "prompts" / "memory.yaml"))
    data.setdefault("governance", {}).setdefault("context", {}).setdefault(
        "prompts_dir", str(configs / "prompts"))
    data.setdefault("rag", {}).setdefault("knowledge_dir", str(configs / "knowledge"))
    data.setdefault("outputs", {}).update(plots=False, progress=False)
    if "llm" in data:  # leaves for the LLM paths, so that they get mutated too
        data["llm"].setdefault("model_path", None)
        data["llm"].setdefault("cache", {"mode": "off", "path": None})
    return data


def _mutate(rng: random.Random, leaf: tuple, old: Any, paths: list[Any]) -> Any:
    """A hostile value for ``leaf`` (``_DELETE`` removes the key)."""
    if leaf[-1] in PATH_KEYS:
        return rng.choice(paths)
    kind = rng.random()
    if kind < 0.1:
        return _DELETE
    if kind < 0.15:
        return _DUPLICATE
    if kind < 0.3 and isinstance(old, int | float) and not isinstance(old, bool):
        return old * rng.choice(FACTORS)
    return rng.choice([*NUMBERS, _deep(200), list(range(10_000))])


_DELETE = object()
#: Give the leaf's top-level key a second time (YAML lets the last one win silently).
_DUPLICATE = object()


def _mutations(tmp: Path, name: str, seed: int, n: int) -> list[tuple[tuple, Any, dict]]:
    base = _absolute(read_experiment_yaml(REPO / "experiments" / name), REPO / "experiments")
    base.pop("sweep", None)
    rng = random.Random(seed)
    out = []
    paths = _paths(tmp)
    leaves = [leaf for leaf in _leaves(base) if leaf[-1] not in ("source", "description")]
    for _ in range(n):
        leaf = rng.choice(leaves)
        data = copy.deepcopy(base)
        holder = data
        for key in leaf[:-1]:
            holder = holder[key]
        value = _mutate(rng, leaf, holder[leaf[-1]], paths)
        if value is _DELETE:
            del holder[leaf[-1]]
        elif value is _DUPLICATE:
            pass  # written by _try
        else:
            holder[leaf[-1]] = value
        out.append((leaf, value, data))
    return out


def _check_outputs(run: Path, llm: bool) -> None:
    empty = list(MAY_BE_EMPTY) + (list(EMPTY_IN_LLM_RUNS) if llm else [])
    for name in ("agents_yearly.csv", "model_yearly.csv"):
        frame = pd.read_csv(run / name).drop(columns=empty, errors="ignore")
        numbers = frame.select_dtypes("number").to_numpy(dtype=float).ravel()
        assert all(math.isfinite(x) for x in numbers), name
        assert (abs(numbers) < MONEY_BOUND).all(), name
        depths = frame[[c for c in frame.columns if "depth" in c]].to_numpy(dtype=float)
        assert (depths[~pd.isna(depths)] <= DEPTH_BOUND).all(), name


def _refusal_problem(exc: ConfigError, leaf: tuple) -> str | None:
    """What is wrong with a refusal's message (None: it is fine)."""
    text = str(exc)
    # the field, its section, YAML's line, or (a size) the limit the run's cost exceeds
    named = (str(leaf[-1]), str(leaf[0]), "(line ", "above limits.")
    if not any(n in text for n in named):
        return "message does not name the field"
    if SECRET in text:
        return "message quotes a named file's content"
    if len(text) > 3000 or any(not (c.isprintable() or c == "\n") for c in text):
        return "message too long or not printable"
    return None


def _try(tmp: Path, i: int, name: str, data: dict, leaf: tuple, counts: dict,
         duplicate: bool = False) -> str | None:
    """Load (and if it loads, run small) one mutation; a problem's description, or None."""
    path = tmp / f"m{i}.yaml"
    text = yaml.safe_dump(data, sort_keys=False)
    path.write_text(text + (f"{leaf[0]}: {json.dumps(data[leaf[0]])}\n" if duplicate else ""))
    try:
        config = load_experiment(path, ["population.size=12"] if name == "baseline.yaml" else [])
    except ConfigError as exc:
        counts["refused"] += 1
        return _refusal_problem(exc, leaf)
    counts["loaded"] += 1
    if name != "baseline.yaml":
        try:
            config = load_experiment(path, SCRIPTED)
        except ConfigError:  # only with the scripted stand-in (e.g. a mutated llm section)
            return None
    if config.years > 40:
        return None
    small = config.model_copy(update={"years": min(config.years, 3)})
    small = small.with_base_dir(config.base_dir)
    run = run_experiment(small, tmp / f"run{i}", progress=False).out_dir
    _check_outputs(run, llm=config.decision.maker == "llm")
    counts["ran"] += 1
    return None


@pytest.mark.parametrize("name", ["baseline.yaml", "demo.yaml"])
def test_mutated_configs_are_refused_or_run_sanely(tmp_path, name) -> None:
    counts = {"tried": 0, "refused": 0, "loaded": 0, "ran": 0}
    failures = []
    for i, (leaf, value, data) in enumerate(_mutations(tmp_path, name, seed=7, n=FUZZ_N)):
        counts["tried"] += 1
        where = ".".join(map(str, leaf))
        try:
            problem = _try(tmp_path, i, name, data, leaf, counts, value is _DUPLICATE)
        except Exception as exc:  # noqa: BLE001 - any other exception is the failure sought
            problem = "".join(traceback.format_exception_only(exc)).strip()[:300]
        if problem:
            failures.append((where, repr(value)[:60], problem))
    counts["failing"] = len(failures)
    print(name, counts)
    assert not failures, failures[:10]
    assert counts["refused"] > counts["tried"] // 2 and counts["ran"] > 0, counts


def test_alias_bomb_and_deep_nesting_fail_fast(experiments) -> None:
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n"
        for i in range(9))
    for text, expected in ((bomb, "expands to more than"),
                           ("name: " + "[" * 3000 + "]" * 3000, "nested more than"),
                           ("a: &a [*a]\n", "refers to a node that contains it")):
        with pytest.raises(ConfigError, match=expected):
            load_experiment(experiments.write(text))


def test_a_system_file_named_as_input_is_not_echoed(experiments, tmp_path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("password: hunter2-" + "s" * 500 + "\n")
    data = experiments.data()
    data["agent_types"] = str(secret)
    with pytest.raises(ConfigError) as info:
        experiments.config(data=data)
    assert "hunter2" not in str(info.value)


def test_cli_refuses_mutations_with_exit_2_and_writes_nothing(tmp_path, capsys) -> None:
    from governed_broker.cli import main

    picked = [m for m in _mutations(tmp_path, "baseline.yaml", seed=11, n=60)
              if not isinstance(m[1], int | float) or not 0 < m[1] < 100][:8]
    refused = 0
    for i, (_, _, data) in enumerate(picked):
        path = tmp_path / f"cli{i}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        out = tmp_path / f"out{i}"
        code = main(["run", str(path), "--out", str(out), "--set", "years=2"])
        err = capsys.readouterr().err
        assert code in (0, 2) and "Traceback" not in err, err
        if code == 2:
            refused += 1
            assert err.startswith("configuration error:") and not out.exists()
            assert not out.with_name(out.name + ".partial").exists()
    assert refused >= 4, refused
