"""An experiment resolved once per run: its settings, its domain and its identity.

``load_resolved`` validates the settings and every file they name, and keeps what it parsed: a
run needs the domain (``agent_types.yaml``) in several places (the world, the baseline, the
broker's skills and rules), the damage table and the institutions' domain in the world, and the
config hash in several more (resume checks, checkpoints, the manifest, audit run ids). The
runner hands the one ``ResolvedExperiment`` down, so a run parses each input once and hashes
its inputs once. ``resolve_experiment`` resolves settings that were loaded or built another way
(a sweep's cases, a saved ``config.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.damage import DamageTable, load_damage_table
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.hashing import config_hash
from governed_broker.config.institutions import InstitutionsDomain
from governed_broker.config.loader import (
    ReadInputs,
    load_agent_types,
    load_checked,
    load_institutions,
)


@dataclass(frozen=True)
class ResolvedExperiment:
    """A validated experiment with its parsed domain and config hash.

    Attributes:
        config: The validated settings (``load_experiment``).
        domain: The parsed ``agent_types`` file (actions, PMT labels, rules, memory).
        config_hash: Hex sha256 of the run-relevant settings and input file contents
            (``governed_broker.config.hashing.config_hash``).
        damage_table: The parsed depth-damage table (``damage.table``).
        institutions: The parsed institutions' domain (None: the experiment has none).
    """

    config: ExperimentConfig
    domain: AgentTypesConfig
    config_hash: str
    damage_table: DamageTable
    institutions: InstitutionsDomain | None = None

    @property
    def run_id(self) -> str:
        """``<name>-<first 12 hex digits of the config hash>``.

        The id audit records carry (the same id a sweep gives the run, so ablation cases sharing a
        name and seed never collide, and a resumed run keeps the ids it started with).
        """
        return f"{self.config.name}-{self.config_hash[:12]}"


def load_resolved(path: str | Path, overrides: Iterable[str] = (), *,
                  base_dir: str | Path | None = None) -> ResolvedExperiment:
    """Load and check an experiment and resolve it with the inputs parsed while checking them.

    ``config.loader.load_checked``, which names the same arguments.
    """
    config, inputs = load_checked(path, overrides, base_dir=base_dir)
    return _resolved(config, inputs)


def resolve_experiment(config: ExperimentConfig) -> ResolvedExperiment:
    """Parse the experiment's inputs and hash them (once per run).

    Raises:
        ConfigError: An input file no longer validates (it was checked at load).
    """
    institutions = (None if config.institutions is None
                    else load_institutions(config.resolve_path(config.institutions.domain)))
    return _resolved(config, ReadInputs(
        load_agent_types(config.resolve_path(config.agent_types)),
        load_damage_table(config.resolve_path(config.damage.table)), institutions))


def _resolved(config: ExperimentConfig, inputs: ReadInputs) -> ResolvedExperiment:
    return ResolvedExperiment(config, inputs.domain, config_hash(config), inputs.damage_table,
                              inputs.institutions)
