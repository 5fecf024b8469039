"""Loading experiment and agent-type YAML files with ``--set`` overrides and clear errors.

Every problem becomes a ``ConfigError`` whose message names the file, the field path, the bad
value and what is allowed, so the command line can print it and exit with code 2.
"""

from __future__ import annotations

import io
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from pydantic import BaseModel

from governed_broker.config.agent_types import AgentTypesConfig, check_action_ids
from governed_broker.config.base import ConfigError, excerpt
from governed_broker.config.claims import load_claims
from governed_broker.config.cost import check_run_limits
from governed_broker.config.damage import DamageTable, load_damage_table
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.institutions import (
    INSTITUTION_TEMPLATE_EXTRAS,
    INSTITUTION_TEMPLATES,
    INSTITUTIONS,
    InstitutionsDomain,
)
from governed_broker.config.knowledge import load_topics
from governed_broker.config.memory import MEMORY_TEXTS
from governed_broker.config.templates import load_templates
from governed_broker.config.validation import allowed_keys, child_annotation, validate_model
from governed_broker.config.validity import BATTERY_FILES
from governed_broker.config.world import MAX_USD
from governed_broker.config.yamlsafe import load_yaml_text, read_text_file, read_yaml
from governed_broker.contracts.effects import traits_of

#: Largest population CSV read (bytes): about a million households.
MAX_POPULATION_BYTES = 256 << 20
#: Largest coordinate of a home (grid units): metres of any projected system fit well within.
MAX_COORDINATE = 1e8

#: Columns of a population CSV and their kinds (docs/configuration.md).
POPULATION_COLUMNS: dict[str, str] = {
    "tenure": "tenure",
    "flood_zone": "str",
    "income_usd": "nonneg",
    "savings_usd": "nonneg",
    "structure_value_usd": "nonneg",
    "contents_value_usd": "nonneg",
    "elevated": "bool",
    "insured": "bool",
    "trust_insurance": "unit",
    "trust_neighbours": "unit",
}
#: Columns a population CSV may add: where the home stands, in the coordinates of the hazard
#: grids (``hazard.mode: raster``; e.g. longitude and latitude in degrees).
OPTIONAL_POPULATION_COLUMNS: dict[str, str] = {"x": "coordinate", "y": "coordinate"}
#: A column a population CSV may add on its own: the household belongs to a marginalised group
#: (instead of ``population.marginalised``, the rule that derives it from income and tenure).
MARGINALISED_COLUMN: dict[str, str] = {"marginalised": "bool"}


# --------------------------------------------------------------------------------------------
# Overrides
# --------------------------------------------------------------------------------------------


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value`` into a key path and a YAML-parsed value (``null``: None)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected KEY.PATH=VALUE (e.g. seed=7)")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"--set {text!r}: empty key path; expected KEY.PATH=VALUE")
    value = load_yaml_text(raw, f"--set {key.strip()}") if raw.strip() else ""
    return parts, value


def apply_overrides(
    data: dict[str, Any], overrides: Iterable[str], model: type[BaseModel], source: Path
) -> dict[str, Any]:
    """Apply ``--set`` overrides to raw YAML data, checking each path against ``model``.

    ``KEY.PATH=null`` removes the key (the setting returns to its default), as ``key: null``
    does in a file that ``extends:`` another.
    """
    for text in overrides:
        parts, value = parse_override(text)
        annotation: Any = model
        node: dict[str, Any] = data
        for depth, key in enumerate(parts):
            ok, child = child_annotation(annotation, key)
            dotted = ".".join(parts[: depth + 1])
            if not ok:
                allowed = allowed_keys(annotation)
                hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
                raise ConfigError(
                    f"--set {text!r}: unknown setting '{dotted}' for {source}{hint}"
                )
            if depth == len(parts) - 1:
                if value is None:  # `--set a.b=null` removes the key, as `b: null` does
                    node.pop(key, None)
                else:
                    node[key] = value
                break
            nxt = node.get(key)
            if nxt is None:
                nxt = node[key] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(
                    f"--set {excerpt(text)}: '{dotted}' is {excerpt(nxt)} in {source}, not a "
                    "section; cannot set a key inside it"
                )
            node, annotation = nxt, child
    return data


# --------------------------------------------------------------------------------------------
# Public loaders
# --------------------------------------------------------------------------------------------


def load_agent_types(path: str | Path) -> AgentTypesConfig:
    """Load and validate ``agent_types.yaml``.

    Raises:
        ConfigError: missing file, malformed YAML or invalid content.
    """
    path = Path(path)
    return validate_model(AgentTypesConfig, read_yaml(path), path)


def load_institutions(path: str | Path) -> InstitutionsDomain:
    """Load and validate the institutions' domain file (``institutions.yaml``).

    Raises:
        ConfigError: missing file, malformed YAML or invalid content.
    """
    path = Path(path)
    return validate_model(InstitutionsDomain, read_yaml(path), path)


def read_experiment_yaml(path: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read an experiment file as a mapping, following ``extends:``.

    ``extends: other.yaml`` names an experiment file in the same directory whose settings this
    file starts from: mappings are merged key by key (recursively), anything else in this file
    replaces the inherited value, and ``key: null`` removes an inherited key (the setting
    returns to its default). Same directory, so relative paths mean the same in both.
    """
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}"
        )
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or Path(parent).name != parent:
        raise ConfigError(
            f"{path}: field 'extends': {excerpt(parent)} is not allowed; give the file name of an "
            "experiment in the same directory, e.g. 'baseline.yaml'"
        )
    base_path = path.parent / parent
    if base_path.resolve() in _seen or base_path.resolve() == path.resolve():
        raise ConfigError(f"{path}: field 'extends': {parent!r} extends itself (a cycle)")
    base = read_experiment_yaml(base_path, (*_seen, path.resolve()))
    return _merge(base, data)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if value is None:
            out.pop(key, None)  # `key: null` drops the inherited setting (back to its default)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class ReadInputs:
    """The input files an experiment names, parsed while they were checked at load.

    Attributes:
        domain: ``agent_types``.
        damage_table: ``damage.table``.
        institutions: ``institutions.domain`` (None: no institutions).
    """

    domain: AgentTypesConfig
    damage_table: DamageTable
    institutions: InstitutionsDomain | None = None


def load_experiment(path: str | Path, overrides: Iterable[str] = (), *,
                    base_dir: str | Path | None = None) -> ExperimentConfig:
    """The validated settings of an experiment YAML file.

    ``load_checked`` without the parsed inputs; a run loads with ``config.resolved.load_resolved``
    instead.
    """
    return load_checked(path, overrides, base_dir=base_dir)[0]


def load_checked(path: str | Path, overrides: Iterable[str] = (), *,
                 base_dir: str | Path | None = None) -> tuple[ExperimentConfig, ReadInputs]:
    """Load, override and validate an experiment YAML file.

    Relative paths inside the file are resolved against its directory (or ``base_dir``);
    referenced files (agent types, population CSV, damage table, hazard schedule) are checked
    and validated now, so that a run never starts with a broken input.

    Args:
        path: The experiment YAML.
        overrides: ``KEY.PATH=VALUE`` strings (``--set``); values are parsed as YAML.
        base_dir: Directory relative paths resolve against instead of the file's own: a run's
            saved ``config.yaml`` keeps the paths as written, relative to the experiment's
            folder, which its manifest records as ``config_base_dir`` (``governed-broker
            branch`` re-loads a finished run's configuration this way).

    Returns:
        The settings and the input files parsed while they were checked (``ReadInputs``).

    Raises:
        ConfigError: any problem, with a message naming file, field, value and what is allowed.
    """
    path = Path(path)
    data = read_experiment_yaml(path)
    data = apply_overrides(data, overrides, ExperimentConfig, path)
    base_dir = path.resolve().parent if base_dir is None else Path(base_dir).resolve()
    config = validate_model(ExperimentConfig, data, path, context={"base_dir": base_dir},
                            quote_values=True)
    config = config.with_base_dir(base_dir)
    return config, check_references(config, path)


def check_references(config: ExperimentConfig, source: Path) -> ReadInputs:
    """Validate the files an experiment points at and their consistency with it.

    The parsed files.
    """
    agent_types = _field(source, "agent_types",
                         lambda: load_agent_types(config.resolve_path(config.agent_types)))
    check_combinations(config, source, agent_types)
    damage_table = _field(source, "damage.table",
                          lambda: load_damage_table(config.resolve_path(config.damage.table)))
    if config.population.file is not None:
        frame = _field(source, "population.file", lambda: read_population_csv(
            config.resolve_path(config.population.file)))
        pop_zones = set(frame["flood_zone"])
        if "marginalised" in frame.columns and config.population.marginalised is not None:
            raise ConfigError(
                f"{source}: field 'population.marginalised': the population CSV has a "
                "'marginalised' column already; give the column or the rule, not both")
    else:
        frame = None
        pop_zones = set(config.population.generate.zone_shares)
    if config.hazard.mode in ("fixed", "stochastic", "raster"):
        missing = sorted(pop_zones - set(config.hazard.zones))
        if missing:
            raise ConfigError(
                f"{source}: field 'hazard.zones': population zone(s) {zone_names(missing)} "
                f"have no entry in the hazard map; defined zones: "
                f"{zone_names(config.hazard.zones)}"
            )
    zoned = {"insurance.mandatory_purchase.zones": config.insurance.mandatory_purchase,
             "insurance.preferred_risk.zones": config.insurance.preferred_risk,
             "finance.aid.group_policy.zones": config.finance.aid.group_policy}
    if config.policy_change is not None:
        zoned["policy_change.settings: finance.aid.group_policy.zones"] = \
            config.with_policy_change().finance.aid.group_policy
    for field, section in zoned.items():
        unknown = [] if section is None else sorted(
            set(section.zones) - pop_zones - set(config.hazard.zones))
        if unknown:
            raise ConfigError(
                f"{source}: field '{field}': zone(s) "
                f"{zone_names(unknown)} are neither population nor hazard-map zones; defined "
                f"zones: {zone_names(sorted(pop_zones | set(config.hazard.zones)))}")
    if config.hazard.mode == "raster":
        check_raster(config, source, pop_zones,
                     has_xy=frame is not None and "x" in frame.columns)
    elif config.hazard.mode == "fixed":
        check_fixed_schedule(config, source, pop_zones)
    if config.decision.maker == "llm" and config.llm is None:
        raise ConfigError(f"{source}: field 'decision.maker': 'llm' needs an 'llm:' section")
    institutions = None
    if config.institutions is not None:
        institutions = check_institutions(config, source)
    if config.cohort.enabled and config.decision.maker != "llm":
        raise ConfigError(f"{source}: field 'cohort.enabled': cohort mode groups the LLM's "
                          f"conversations; decision.maker is {config.decision.maker!r}")
    check_input_files(config, source, agent_types)
    # the population was counted above: the cost estimate need not read the CSV again
    check_run_limits(config, source, households=len(frame) if config.population.file else None)
    return ReadInputs(agent_types, damage_table, institutions)


def check_institutions(config: ExperimentConfig, source: Path) -> InstitutionsDomain:
    """The institutions' domain and prompts load, an LLM maker has an ``llm:`` section.

    And no policy change sets what an institution decides each year.
    """
    inst = config.institutions
    assert inst is not None
    domain = _field(source, "institutions.domain",
                    lambda: load_institutions(config.resolve_path(inst.domain)))
    for name in inst.llm_makers:
        if config.llm is None:
            raise ConfigError(f"{source}: field 'institutions.{name}.maker': 'llm' needs an "
                              "'llm:' section")
    if inst.llm_makers:
        _field(source, "institutions.prompts", lambda: load_templates(
            config.resolve_path(inst.prompts), INSTITUTION_TEMPLATES,
            INSTITUTION_TEMPLATE_EXTRAS, setting="institutions.prompts"))
    decided = {lever.setting: name for name in INSTITUTIONS
               for lever in domain.of(name).levers.values()}
    sections = {s: getattr(config, s.split(".")[0]) for s in decided}
    starts = {s: float(v) for s, section in sections.items() if section is not None
              and (v := getattr(section, s.split(".")[1])) is not None}
    problems = domain.start_problems(starts)
    if problems:
        raise ConfigError(f"{source}: field 'institutions': the experiment's starting levers "
                          f"break the limits of {config.institutions.domain}: "
                          + "; ".join(problems))
    change = config.policy_change
    for key in (change.settings if change is not None else {}):
        if key in decided:
            raise ConfigError(
                f"{source}: field 'policy_change.settings': {key!r} is set each year by the "
                f"{decided[key]} (institutions.{decided[key]}); change the {decided[key]}'s "
                "settings or rules instead")
    return domain


def _field(source: Path, field: str, read: typing.Callable[[], Any]) -> Any:
    """``read()``, with a ``ConfigError`` it raises prefixed by the experiment and field."""
    try:
        return read()
    except ConfigError as exc:
        raise ConfigError(f"{source}: field '{field}': {exc}") from exc


def _readable(source: Path, field: str, path: Path, what: str, kind: type | None) -> Any:
    """Read (and for YAML, parse) one input file; problems name the experiment and field."""
    try:
        if kind is None:
            return read_text_file(path, what)
        data = read_yaml(path, what)
    except ConfigError as exc:
        raise ConfigError(f"{source}: field '{field}': {exc}") from exc
    if not isinstance(data, kind):
        raise ConfigError(f"{source}: field '{field}': {path} holds a {type(data).__name__}, "
                          f"not the {kind.__name__} a {what} must be")
    return data


def check_input_files(config: ExperimentConfig, source: Path,
                      domain: AgentTypesConfig) -> None:
    """Every file the experiment will read exists, is a regular UTF-8 file of sane size.

    And parses, so that a run never stops halfway on a missing or broken input.
    """
    llm = config.decision.maker == "llm"
    if config.memory.engine != "none":
        graph = _readable(source, "memory.concepts_file",
                          config.resolve_path(config.memory.concepts_file), "knowledge graph", dict)
        if set(graph) - {"concepts", "relations"} or not isinstance(graph.get("concepts"), dict):
            raise ConfigError(f"{source}: field 'memory.concepts_file': "
                              f"{config.resolve_path(config.memory.concepts_file)} is not a "
                              "knowledge graph (a mapping of 'concepts' and 'relations')")
        texts = config.resolve_path(config.memory.texts_file)
        _readable(source, "memory.texts_file", texts, "memory texts file", dict)
        try:
            load_templates(texts, MEMORY_TEXTS, setting="memory.texts_file")
        except ConfigError as exc:
            raise ConfigError(f"{source}: field 'memory.texts_file': {exc}") from exc
    if llm:
        prompts = config.resolve_path(config.governance.context.prompts_dir)
        templates = ["household.yaml"] + (["reflection.yaml"] if config.reflection.enabled else [])
        read = {name: _readable(source, "governance.context.prompts_dir", prompts / name,
                                "prompt template file", dict) for name in templates}
        if "reflection.yaml" in read:
            _field(source, "governance.context.prompts_dir", lambda: load_claims(
                read["reflection.yaml"].get("claims", []), str(prompts / "reflection.yaml")))
    institutions_llm = config.institutions is not None and bool(config.institutions.llm_makers)
    if (llm or institutions_llm) and config.llm is not None:  # the model and script they use
        check_llm_files(config, source)
    actions, domain_file = list(domain.actions), config.resolve_path(config.agent_types)
    if llm and config.validity.gate != "off":
        battery = config.resolve_path(config.validity.battery_dir)
        files = {name: _readable(source, "validity.battery_dir", battery / name,
                                 "validity battery file", dict) for name in BATTERY_FILES}
        synonyms = files["vignettes.yaml"].get("synonyms")
        if isinstance(synonyms, dict):
            check_action_ids({"synonyms": synonyms}, actions, battery / "vignettes.yaml",
                             domain_file)
    if llm and config.rag.enabled:
        docs = config.resolve_path(config.rag.knowledge_dir)
        if not docs.is_dir():
            raise ConfigError(f"{source}: field 'rag.knowledge_dir': {docs} is not a directory")
        for doc in sorted(docs.glob("*.md")):
            _readable(source, "rag.knowledge_dir", doc, "knowledge document", None)
        topics = config.resolve_path(config.rag.topics_file
                                     or config.rag.knowledge_dir / "rag_topics.yaml")
        parsed = _field(source, "rag.topics_file", lambda: load_topics(topics))
        check_action_ids(parsed.action_ids(), actions, topics, domain_file)


#: First bytes of a GGUF model file and of an SQLite database (their format specifications).
GGUF_MAGIC = b"GGUF"
SQLITE_MAGIC = b"SQLite format 3\x00"


def _magic(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a file (a ``ConfigError`` when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read file ({exc.strerror})") from exc


def check_llm_files(config: ExperimentConfig, source: Path) -> None:
    """The LLM section's files.

    The scripted backend's rules, a local GGUF model and an existing response cache, so that none
    fails after the run has started.
    """
    llm = config.llm
    assert llm is not None
    if llm.script is not None:
        _check_script(source, config.resolve_path(llm.script))
    if llm.model_path is not None:
        _check_model_file(source, config.resolve_path(llm.model_path))
    if llm.cache.mode != "off" and llm.cache.path is not None:
        _check_cache_file(source, config.resolve_path(llm.cache.path))


def _check_script(source: Path, path: Path) -> None:
    """A scripted backend's rules.

    A list of ``{pattern, reply or choices, times}`` mappings (``choices``: ``{weight, reply}``
    mappings with positive weights, drawn by request seed).
    """
    rules = _readable(source, "llm.script", path, "scripted-backend rules file", list)
    for index, rule in enumerate(rules):
        times = rule.get("times") if isinstance(rule, dict) else None
        if not isinstance(rule, dict) or set(rule) - {"pattern", "reply", "choices", "times"} \
                or "pattern" not in rule or ("reply" in rule) == ("choices" in rule) or \
                (times is not None and (type(times) is not int or times < 1)) or \
                ("choices" in rule and not _weighted(rule["choices"])):
            raise ConfigError(
                f"{source}: field 'llm.script': {path}: rule {index} must be a mapping with "
                "keys pattern and reply (or choices: a list of {weight, reply} with positive "
                "weights), and optionally times (a whole number >= 1)")


def _weighted(choices: Any) -> bool:
    return isinstance(choices, list) and bool(choices) and all(
        isinstance(c, dict) and set(c) == {"weight", "reply"} and type(c["weight"]) in (int, float)
        and c["weight"] > 0 for c in choices)


def _check_model_file(source: Path, path: Path) -> None:
    """A local GGUF model: a regular file with GGUF's magic number.

    Not its size: models are gigabytes, and reading one is the backend's job.
    """
    if not path.is_file():
        raise ConfigError(f"{source}: field 'llm.model_path': {path}: "
                          f"{'not a regular file' if path.exists() else 'file not found'}")
    if _magic(path, len(GGUF_MAGIC)) != GGUF_MAGIC:
        raise ConfigError(f"{source}: field 'llm.model_path': {path} is not a GGUF model file "
                          "(it does not start with 'GGUF')")


def _check_cache_file(source: Path, path: Path) -> None:
    """A response cache: missing (it is created), empty, or an SQLite database."""
    if path.exists() and not path.is_file():
        raise ConfigError(f"{source}: field 'llm.cache.path': {path} is not a regular file "
                          "(an SQLite response cache, created if missing)")
    if path.is_file() and path.stat().st_size and _magic(path, len(SQLITE_MAGIC)) != SQLITE_MAGIC:
        raise ConfigError(f"{source}: field 'llm.cache.path': {path} is not an SQLite database; "
                          "name a new file (it is created) or an earlier cache")


def check_combinations(config: ExperimentConfig, source: Path,
                       agent_types: AgentTypesConfig) -> None:
    """Settings that would silently do nothing together are errors."""
    llm = config.decision.maker == "llm"
    remembers = config.memory.engine != "none"
    if config.reflection.enabled and not (llm and remembers):
        raise ConfigError(
            f"{source}: field 'reflection.enabled': true needs decision.maker 'llm' and a "
            f"memory engine (got maker {config.decision.maker!r}, memory.engine "
            f"{config.memory.engine!r}); set reflection.enabled: false or change them")
    if config.rag.enabled and not llm:
        raise ConfigError(
            f"{source}: field 'rag.enabled': true needs decision.maker 'llm' (the knowledge base "
            f"feeds LLM prompts); got {config.decision.maker!r}")
    if remembers:
        if agent_types.memory is None:
            raise ConfigError(
                f"{source}: field 'memory.engine': {config.memory.engine!r} needs a 'memory:' "
                f"section in {config.resolve_path(config.agent_types)}; add it or use 'none'")
        try:  # here, not when the model is built: a typo is a configuration error
            agent_types.memory.with_overrides(config.memory.overrides)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ConfigError(f"{source}: field 'memory.overrides': "
                              f"{excerpt(str(exc), 400)}") from exc
    elif config.memory.overrides:
        raise ConfigError(f"{source}: field 'memory.overrides': set, but memory.engine is "
                          "'none', so they would change nothing; remove them or choose an engine")
    severities = config.governance.rule_severity
    if severities:
        try:
            if agent_types.governance is None:
                raise ValueError("there is no 'governance:' section")
            agent_types.governance.with_severities(config.governance.profile, severities)
        except ValueError as exc:
            raise ConfigError(f"{source}: field 'governance.rule_severity': "
                              f"{config.resolve_path(config.agent_types)}: {exc}") from None
    programme = config.buyout or config.with_policy_change().buyout
    if programme is not None and not any(traits_of(a.effect).bought_out
                                         for a in agent_types.actions.values()):
        raise ConfigError(
            f"{source}: field 'buyout': a buyout programme, but no action of "
            f"{config.resolve_path(config.agent_types)} has the effect 'buyout', so no household "
            "could accept an offer; add one (agent_types.yaml's accept_buyout) or remove 'buyout'")


def check_raster(config: ExperimentConfig, source: Path, pop_zones: set[str],
                 has_xy: bool) -> None:
    """The grids cover every year of the run and share one geometry, and the homes can be placed.

    From the population's ``x``/``y`` or by a placement rule for every zone.
    """
    from governed_broker.config.grids import check_grid_headers

    raster = config.hazard.raster
    wanted = [raster.calendar_year(t) for t in range(1, config.years + 1)]
    missing = [y for y in wanted if y not in raster.grids]
    if missing:
        raise ConfigError(
            f"{source}: field 'hazard.raster.grids': no grid for calendar year(s) "
            f"{missing[:5]} of the run (start_year {raster.start_year}, {config.years} years); "
            f"grids: {min(raster.grids)}-{max(raster.grids)}")
    if has_xy and raster.placement is not None:
        raise ConfigError(f"{source}: field 'hazard.raster.placement': the population CSV has "
                          "x/y coordinates; give coordinates or a placement rule, not both")
    if not has_xy:
        if raster.placement is None:
            raise ConfigError(
                f"{source}: field 'hazard.raster.placement': the population has no x/y "
                "coordinates, so a placement rule is needed (docs/hindcast.md)")
        unplaced = sorted(pop_zones - set(raster.placement.zones))
        if unplaced:
            raise ConfigError(
                f"{source}: field 'hazard.raster.placement.zones': no rule for population "
                f"zone(s) {zone_names(unplaced)}")
    _field(source, "hazard.raster",
           lambda: check_grid_headers(raster, config.resolve_path(raster.path)))


def check_fixed_schedule(config: ExperimentConfig, source: Path, pop_zones: set[str]) -> None:
    """A fixed flood schedule names only population zones and each year once.

    A misspelt zone would silently never flood, and of two entries for one year only one would
    count.
    """
    field = "hazard.file" if config.hazard.file is not None else "hazard.events"
    events = _field(source, field, lambda: fixed_events(config))
    unknown = sorted({z for e in events for z in e.depth_m} - pop_zones)
    if unknown:
        raise ConfigError(
            f"{source}: field '{field}': flood zone(s) {zone_names(unknown)} are not zones of "
            f"the population ({zone_names(pop_zones)}); a zone no household lives in never "
            "floods")
    years = [e.year for e in events]
    twice = sorted({y for y in years if years.count(y) > 1})
    if twice:
        raise ConfigError(f"{source}: field '{field}': year(s) {twice} listed more than once; "
                          "give each flood year one entry with the depth of every zone")


def zone_names(zones: Iterable[str], most: int = 8) -> str:
    """Zone names for a message.

    Sorted, each a short printable excerpt, at most ``most`` (zones come from a population CSV or a
    hazard file, which may hold anything).
    """
    names = sorted(zones)
    shown = ", ".join(excerpt(z, 40) for z in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def fixed_events(config: ExperimentConfig) -> list[Any]:
    """The scheduled floods of a ``fixed`` hazard (inline or from its file)."""
    from governed_broker.config.world import FixedEvent, StrictModel

    hazard = config.hazard
    if hazard.file is None:
        return list(hazard.events)

    class _Schedule(StrictModel):
        source: str
        events: list[FixedEvent]

    file = config.resolve_path(hazard.file)
    return list(validate_model(_Schedule, read_yaml(file), file).events)


def hazard_with_paths(config: ExperimentConfig) -> Any:
    """The ``hazard`` section with its grid path resolved, for building the hazard.

    ``raster.path`` is resolved against the experiment's folder.
    """
    hazard = config.hazard
    if hazard.raster is None:
        return hazard
    raster = hazard.raster.model_copy(update={"path": config.resolve_path(hazard.raster.path)})
    return hazard.model_copy(update={"raster": raster})


def read_population_csv(path: Path) -> pd.DataFrame:
    """Read and validate a population CSV (lines starting with ``#`` are comments)."""
    text = read_text_file(path, "population CSV", MAX_POPULATION_BYTES)
    try:
        frame = pd.read_csv(io.StringIO(text), comment="#", dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        # pandas quotes no file content in these messages, only positions and counts
        raise ConfigError(f"{path}: cannot read population CSV: {excerpt(str(exc), 160)}") from exc
    known = {**POPULATION_COLUMNS, **OPTIONAL_POPULATION_COLUMNS, **MARGINALISED_COLUMN}
    missing = [c for c in POPULATION_COLUMNS if c not in frame.columns]
    extra = [str(c) for c in frame.columns if c not in known]
    coords = [c for c in OPTIONAL_POPULATION_COLUMNS if c in frame.columns]
    if coords and len(coords) != len(OPTIONAL_POPULATION_COLUMNS):
        missing += [c for c in OPTIONAL_POPULATION_COLUMNS if c not in coords]
    if missing or extra:
        raise ConfigError(
            f"{path}: population CSV columns wrong (missing {missing}, unknown: "
            f"{_unknown_columns(extra)}); expected: {', '.join(POPULATION_COLUMNS)} "
            f"(optional, together: {', '.join(OPTIONAL_POPULATION_COLUMNS)}; optional: "
            f"{', '.join(MARGINALISED_COLUMN)})"
        )
    if frame.empty:
        raise ConfigError(f"{path}: population CSV has no households")
    out = pd.DataFrame(index=frame.index)
    for col, kind in known.items():
        if col in frame.columns:
            out[col] = _convert_column(path, frame[col], col, kind)
    return out


#: What a column name looks like. The first line of a file that is not a population CSV (a
#: mistyped path may name a system file) is not quoted: its "columns" are only counted.
_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_ ]{0,39}")


def _unknown_columns(extra: list[str]) -> str:
    """Unknown column names for a message.

    Names that look like column names (at most 5), anything else counted only.
    """
    names = [repr(c) for c in extra if _COLUMN_NAME.fullmatch(c)]
    odd = len(extra) - len(names)
    parts = names[:5] + ([f"{len(names) - 5} more"] if len(names) > 5 else [])
    if odd:
        parts.append(f"{odd} not shown (not like column names)")
    return ", ".join(parts) or "-"


def _convert_column(path: Path, values: pd.Series, col: str, kind: str) -> pd.Series:
    def bad(i: int, allowed: str) -> ConfigError:
        return ConfigError(
            f"{path}: row {i + 1}, column '{col}': bad value {excerpt(values.iloc[i], 40)}; "
            f"{allowed}"
        )

    if kind == "tenure":
        ok = values.isin(["owner", "renter"])
        if not ok.all():
            raise bad(int((~ok).to_numpy().argmax()), "allowed: owner, renter")
        return values
    if kind == "str":
        ok = values.str.len() > 0
        if not ok.all():
            raise bad(int((~ok).to_numpy().argmax()), "a non-empty zone name is required")
        return values
    if kind == "bool":
        lowered = values.str.strip().str.lower()
        ok = lowered.isin(["true", "false", "1", "0"])
        if not ok.all():
            raise bad(int((~ok).to_numpy().argmax()), "allowed: True, False, 1, 0")
        return lowered.isin(["true", "1"])
    numbers = pd.to_numeric(values, errors="coerce")
    ok = numbers.notna() & numbers.apply(lambda v: v == v and abs(v) != float("inf"))
    if kind == "nonneg":
        ok &= (numbers >= 0) & (numbers <= MAX_USD)
        allowed = f"a number in [0, {MAX_USD:g}] (USD) is required"
    elif kind == "unit":
        ok &= (numbers >= 0) & (numbers <= 1)
        allowed = "a number in [0, 1] is required"
    else:  # coordinate
        ok &= numbers.abs() <= MAX_COORDINATE
        allowed = f"a coordinate in [-{MAX_COORDINATE:g}, {MAX_COORDINATE:g}] is required"
    if not ok.all():
        raise bad(int((~ok).to_numpy().argmax()), allowed)
    return numbers.astype(float)


def dump_resolved(config: ExperimentConfig) -> str:
    """The resolved configuration as YAML (all defaults filled, paths as given)."""
    data = config.model_dump(mode="json")
    header = (
        "# Resolved configuration written by governed_broker (all defaults filled).\n"
        f"# Relative paths are relative to: {config.base_dir}\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
