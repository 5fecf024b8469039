"""Mutated configurations: each is refused with a message naming the field, or runs sanely.

Every leaf of the real experiments (``baseline.yaml`` and the LLM ``demo.yaml``) is replaced by
hostile values: NaN, infinities, huge and negative numbers, booleans, text, containers, deep
nesting, and for paths a missing file, a binary file, a directory and a system file. A
mutation must either raise ``ConfigError`` naming the mutated field, or load; a baseline
mutation that loads is run small and its CSVs must hold only finite, bounded numbers.
"""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.loader import load_experiment, read_experiment_yaml
from governed_broker.runner import run_experiment

REPO = Path(__file__).resolve().parents[2]
PATH_KEYS = ("agent_types", "table", "file", "concepts_file", "prompts_dir", "script",
             "knowledge_dir", "topics_file")
NUMBERS: list[Any] = [float("nan"), float("inf"), float("-inf"), 1e308, -1e308, -1, 0, 1e42,
                      True, False, "x", [1, 2], {"a": 1}, None,
                      0.5, 2, 10, 1000]  # plausible values too, so that some mutations run
#: Money magnitudes a sane run can reach (USD): far above any single home, far below overflow.
MONEY_BOUND = 1e13
#: Columns documented as empty when there is nothing to report (no flood yet / this year).
MAY_BE_EMPTY = ("years_since_flood", "mean_depth_flooded_m")


def _deep(levels: int) -> Any:
    node: Any = 1
    for _ in range(levels):
        node = {"k": node}
    return node


def _paths(tmp: Path) -> list[Any]:
    binary = tmp / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    return [str(tmp / "missing.yaml"), str(binary), str(tmp), "/etc/passwd", 5, True]


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
    data.setdefault("governance", {}).setdefault("context", {}).setdefault(
        "prompts_dir", str(configs / "prompts"))
    data.setdefault("rag", {}).setdefault("knowledge_dir", str(configs / "knowledge"))
    data.setdefault("outputs", {}).update(plots=False, progress=False)
    return data


def _mutations(tmp: Path, name: str, seed: int, n: int) -> list[tuple[tuple, Any, dict]]:
    base = _absolute(read_experiment_yaml(REPO / "experiments" / name), REPO / "experiments")
    base.pop("sweep", None)
    rng = random.Random(seed)
    out = []
    paths = _paths(tmp)
    leaves = [leaf for leaf in _leaves(base) if leaf[-1] not in ("source", "description")]
    for _ in range(n):
        leaf = rng.choice(leaves)
        pool = paths if leaf[-1] in PATH_KEYS else NUMBERS + [_deep(200), list(range(10_000))]
        value = rng.choice(pool)
        data = copy.deepcopy(base)
        holder = data
        for key in leaf[:-1]:
            holder = holder[key]
        holder[leaf[-1]] = value
        out.append((leaf, value, data))
    return out


def _check_outputs(run: Path) -> None:
    for name in ("agents_yearly.csv", "model_yearly.csv"):
        frame = pd.read_csv(run / name).drop(columns=list(MAY_BE_EMPTY), errors="ignore")
        numbers = frame.select_dtypes("number").to_numpy(dtype=float).ravel()
        assert all(math.isfinite(x) for x in numbers), name
        assert (abs(numbers) < MONEY_BOUND).all(), name


@pytest.mark.parametrize(("name", "runs"), [("baseline.yaml", True), ("demo.yaml", False)])
def test_mutated_configs_are_refused_or_run_sanely(tmp_path, name, runs) -> None:
    import yaml

    counts = {"tried": 0, "refused": 0, "ran": 0, "loaded": 0}
    for i, (leaf, value, data) in enumerate(_mutations(tmp_path, name, seed=7, n=120)):
        counts["tried"] += 1
        path = tmp_path / f"m{i}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        where = ".".join(map(str, leaf))
        try:
            config = load_experiment(path, ["population.size=12"] if runs else [])
        except ConfigError as exc:
            counts["refused"] += 1
            named = (str(leaf[-1]), where.split(".")[0], "(line ")  # a field, or YAML's line
            assert any(n in str(exc) for n in named), (where, repr(value)[:60], exc)
            assert len(str(exc)) < 3000, where  # never a dump of a file or a huge structure
            continue
        counts["loaded"] += 1
        if runs and config.years <= 40:
            small = config.model_copy(update={"years": min(config.years, 3)})
            small = small.with_base_dir(config.base_dir)
            _check_outputs(run_experiment(small, tmp_path / f"run{i}", progress=False).out_dir)
            counts["ran"] += 1
    assert counts["refused"] > counts["tried"] // 2, counts
    print(counts)


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
    import yaml

    from governed_broker.cli import main

    picked = [m for m in _mutations(tmp_path, "baseline.yaml", seed=11, n=60)
              if not isinstance(m[1], int | float) or not 0 < m[1] < 100][:8]
    for i, (_, _, data) in enumerate(picked):
        path = tmp_path / f"cli{i}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        out = tmp_path / f"out{i}"
        code = main(["run", str(path), "--out", str(out), "--set", "years=2"])
        err = capsys.readouterr().err
        assert code in (0, 2) and "Traceback" not in err, err
        if code == 2:
            assert err.startswith("configuration error:") and not out.exists()
            assert not out.with_name(out.name + ".partial").exists()
