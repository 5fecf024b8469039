"""Physical validation at load.

The values no flood world has, and broken input files, are configuration errors (exit code 2, file,
field and value named, nothing written).

Each case is one the issue found running to exit 0 with nonsense, or dying with a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.cli import main
from governed_broker.config.base import excerpt
from governed_broker.config.loader import load_experiment

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "fixtures" / "scripted_governance.yaml"
#: The demo's LLM part, with the scripted backend instead of the embedded model.
LLM = ["decision.maker=llm", "llm.backend=scripted", f"llm.script={SCRIPT}",
       'llm.cache.mode="off"', "memory.engine=humancentric"]

#: override(s) -> (field named, value named); on the small baseline world.
SILENT_NONSENSE = {
    "ln_mean_nan": (["population.generate.income_usd.ln_mean=.nan"],
                    "population.generate.income_usd.ln_mean", "nan"),
    "ln_mean_inf": (["population.generate.income_usd.ln_mean=.inf"],
                    "population.generate.income_usd.ln_mean", "inf"),
    "depth_1e308": (["hazard.zones.high.median_depth_m=1.0e+308"],
                    "hazard.zones.high.median_depth_m", "1e+308"),
    "loading_inf": (["insurance.loading=.inf"], "insurance.loading", "inf"),
    "deductible_1e42": (["insurance.deductible_structure_usd=1.0e+42"],
                        "insurance.deductible_structure_usd", "1e+42"),
    "buyout_share_true": (["relocation.buyout_share=true"], "relocation.buyout_share", "True"),
    "savings_high_3.5e34": (["population.generate.savings_to_income.high=3.5e+34"],
                            "population.generate.savings_to_income.high", "3.5e+34"),
    "savings_low_nan": (["population.generate.savings_to_income.low=.nan"],
                        "population.generate.savings_to_income.low", "nan"),
    "size_true": (["population.size=true"], "population.size", "True"),
    "money_tail": (["population.generate.income_usd.ln_sigma=2.5"],
                   "population.generate.income_usd", "ln_sigma"),
    "renter_contents_tail": (["population.generate.renter_contents_usd.ln_sigma=2.9"],
                             "population.generate.renter_contents_usd", "ln_sigma"),
    "zone_typo": (["hazard.mode=fixed",
                   "hazard.events=[{year: 2, depth_m: {hgih: 1.0}}]"], "hazard.events", "hgih"),
    "year_twice": (["hazard.mode=fixed",
                    "hazard.events=[{year: 2, depth_m: {high: 1.0}}, "
                    "{year: 2, depth_m: {low: 1.0}}]"], "hazard.events", "[2]"),
    "event_year_huge": (["hazard.mode=fixed",
                         "hazard.events=[{year: 99999999999, depth_m: {high: 1.0}}]"],
                        "hazard.events.0.year", "99999999999"),
    "max_tokens_huge": (LLM + ["llm.max_tokens=100000000"], "llm.max_tokens", "100000000"),
    "depth_tail": (["hazard.zones.high.event_sigma=3.0"], "hazard", "zone 'high'"),
}


def _cli(experiments, tmp_path: Path, overrides: list[str], capsys) -> tuple[int, str, Path]:
    path = experiments.write(experiments.data())
    out = tmp_path / "out"
    args = ["run", str(path), "--out", str(out), "--no-progress"]
    for o in overrides:
        args += ["--set", o]
    code = main(args)
    return code, capsys.readouterr().err, out


@pytest.mark.parametrize("case", sorted(SILENT_NONSENSE))
def test_values_no_world_has_exit_2_naming_file_field_and_value(case, experiments, tmp_path,
                                                                capsys) -> None:
    overrides, field, value = SILENT_NONSENSE[case]
    code, err, out = _cli(experiments, tmp_path, overrides, capsys)
    assert code == 2, err
    assert err.startswith("configuration error:") and "Traceback" not in err
    assert "exp.yaml" in err and field in err and value in err, err
    assert not out.exists() and not out.with_name("out.partial").exists()


def _binary(tmp_path: Path) -> str:
    path = tmp_path / "binary.bin"
    path.write_bytes(bytes(range(256)))
    return str(path)


#: override(s) that named a broken file and died with a traceback -> field named.
BROKEN_FILES = {
    "missing_prompts_dir": (lambda t: LLM + [f"governance.context.prompts_dir={t}/none"],
                            "governance.context.prompts_dir"),
    "missing_script": (lambda t: [*LLM, f"llm.script={t}/none.yaml"], "llm.script"),
    "binary_script": (lambda t: [*LLM, f"llm.script={_binary(t)}"], "llm.script"),
    "binary_concepts": (lambda t: LLM + [f"memory.concepts_file={_binary(t)}"],
                        "memory.concepts_file"),
    "concepts_directory": (lambda t: LLM + [f"memory.concepts_file={t}"],
                           "memory.concepts_file"),
    "model_not_gguf": (lambda t: ["decision.maker=llm", "llm.backend=embedded",
                                  "llm.model_path=/etc/passwd"], "llm.model_path"),
    "cache_not_sqlite": (lambda t: LLM[:-2] + ["llm.cache.path=/etc/passwd"], "llm.cache.path"),
    "binary_damage_table": (lambda t: [f"damage.table={_binary(t)}"], "damage.table"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_FILES))
def test_broken_input_files_exit_2_before_anything_runs(case, experiments, tmp_path,
                                                        capsys) -> None:
    make, field = BROKEN_FILES[case]
    code, err, out = _cli(experiments, tmp_path, make(tmp_path), capsys)
    assert code == 2, err
    assert err.startswith("configuration error:") and "Traceback" not in err
    assert f"field '{field}'" in err, err
    assert not out.exists() and not out.with_name("out.partial").exists()


SECRET = "hunter2-SECRET" + "s" * 200


@pytest.mark.parametrize("field", ["agent_types", "damage.table", "memory.concepts_file",
                                   "memory.texts_file", "llm.script",
                                   "governance.context.prompts_dir",
                                   "rag.topics_file", "population.file"])
@pytest.mark.parametrize("shape", ["mapping", "list", "text"])
def test_files_a_config_names_are_never_echoed(field, shape, experiments, tmp_path,
                                               capsys) -> None:
    """A system file is never quoted; YAML in a named file at most as a short excerpt."""
    body = {"mapping": f"password: {SECRET}\nsystem: [{SECRET}]\nrelations: [[{SECRET}, a, b]]\n"
                       f"concepts: {{c: {{type: [{SECRET}]}}}}\n",
            "list": f"- {SECRET}\n- {{pattern: {SECRET}}}\n",
            "text": f"root:x:0:0:{SECRET}:/root:/bin/bash\n" * 50}[shape]
    secret = tmp_path / "secrets"
    secret.mkdir()
    for name in ("secret.yaml", "household.yaml", "reflection.yaml"):
        (secret / name).write_text(body)
    named = secret if field == "governance.context.prompts_dir" else secret / "secret.yaml"
    data = experiments.data()
    overrides = [*LLM, "rag.enabled=true"]
    if field == "population.file":  # the population section replaced: a CSV instead of draws
        data["population"] = {"source": "s", "file": str(named)}
    else:
        overrides.append(f"{field}={named}")
    out = tmp_path / "out"
    args = ["run", str(experiments.write(data)), "--out", str(out), "--no-progress"]
    code = main(args + [a for o in overrides for a in ("--set", o)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert SECRET[:40] not in err if shape == "text" else SECRET[:90] not in err, err
    assert len(err) < 3000 and all(c.isprintable() or c == "\n" for c in err)
    assert not out.exists() and not out.with_name("out.partial").exists()


def test_excerpt_is_short_and_printable() -> None:
    shown = excerpt("\x1b[2J" + "x" * 500)
    assert len(shown) <= 80 and "\x1b" not in shown and shown.endswith("...")
    assert excerpt(list(range(10_000))) == "a list of 10000 item(s)"
    assert excerpt(0.5) == "0.5"


def test_the_real_configurations_load(repo_root: Path) -> None:
    from governed_broker.config.loader import load_agent_types

    for path in sorted((repo_root / "experiments").glob("*.yaml")):
        load_experiment(path)
    load_agent_types(repo_root / "agent_types.yaml")


def test_the_committed_run_configurations_are_within_bounds(repo_root: Path) -> None:
    """The resolved configurations of the committed fixture runs still validate.

    Bounds admit every real configuration; their paths are relative to another folder, so only the
    settings are checked here.
    """
    import yaml

    from governed_broker.config.experiment import ExperimentConfig
    from governed_broker.config.validation import validate_model

    paths = sorted((repo_root / "tests" / "fixtures").rglob("config.yaml"))
    assert len(paths) >= 4
    for path in paths:
        validate_model(ExperimentConfig, yaml.safe_load(path.read_text()), path)


@pytest.mark.parametrize("override", ["network.k=100000", "memory.overrides.window_size=1000000000",
                                      "memory.overrides.decay_rate=1.0e+200"])
def test_unbounded_counts_and_rates_are_refused(override, experiments) -> None:
    from governed_broker.config.base import ConfigError

    with pytest.raises(ConfigError, match=override.split("=")[0].rsplit(".", 1)[0]):
        experiments.config([*LLM, override])


def test_keys_of_a_named_file_are_shown_printable_short_and_few(experiments, tmp_path) -> None:
    """Keys of a file a field names are file content too.

    Terminal escapes are neutralised, each key is cut short and at most 20 problems are listed.
    """
    types = tmp_path / "types.yaml"
    keys = ['"\\e]0;title\\a' + "K" * 1000 + '": 1'] + [f"key{i}: 1" for i in range(500)]
    types.write_text("\n".join(keys) + "\n")
    data = experiments.data()
    data["agent_types"] = str(types)
    from governed_broker.config.base import ConfigError

    with pytest.raises(ConfigError) as info:
        experiments.config(data=data)
    text = str(info.value)
    assert "field 'agent_types'" in text and "K" * 200 not in text
    assert all(c.isprintable() or c == "\n" for c in text)
    assert "more problem(s)" in text and len(text.splitlines()) <= 23, text


def test_a_system_file_as_population_csv_is_not_quoted(experiments, tmp_path) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$hunter2saltsecret:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n")
    data = experiments.data()
    data["population"] = {"source": "s", "file": str(shadow)}
    from governed_broker.config.base import ConfigError

    with pytest.raises(ConfigError, match="columns wrong.*1 not shown") as info:
        experiments.config(data=data)
    assert "hunter2" not in str(info.value) and "daemon" not in str(info.value)


def test_a_misnamed_population_column_is_still_named(experiments, tmp_path) -> None:
    """Column names that look like column names are quoted: a typo must be findable."""
    from governed_broker.config.base import ConfigError
    from governed_broker.config.loader import POPULATION_COLUMNS

    columns = [c if c != "income_usd" else "incme_usd" for c in POPULATION_COLUMNS]
    csv = tmp_path / "pop.csv"
    csv.write_text(",".join(columns) + "\nowner,high,1,1,1,1,0,0,0.5,0.5\n")
    data = experiments.data()
    data["population"] = {"source": "s", "file": str(csv)}
    with pytest.raises(ConfigError, match=r"missing \['income_usd'\], unknown: 'incme_usd'"):
        experiments.config(data=data)
