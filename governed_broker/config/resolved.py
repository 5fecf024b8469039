"""An experiment resolved once per run: its settings, its domain and its identity.

``load_experiment`` validates the settings and every file they name; a run then needs the
parsed domain (``agent_types.yaml``) in several places (the world, the baseline, the broker's
skills and rules) and the config hash in several more (resume checks, checkpoints, the manifest,
audit run ids). ``resolve_experiment`` computes both once and the runner hands the result down,
so a run parses its domain once and hashes its inputs once.
"""

from __future__ import annotations

from dataclasses import dataclass

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.hashing import config_hash
from governed_broker.config.institutions import InstitutionsDomain
from governed_broker.config.loader import load_agent_types, load_institutions


@dataclass(frozen=True)
class ResolvedExperiment:
    """A validated experiment with its parsed domain and config hash.

    Attributes:
        config: The validated settings (``load_experiment``).
        domain: The parsed ``agent_types`` file (actions, PMT labels, rules, memory).
        config_hash: Hex sha256 of the run-relevant settings and input file contents
            (``governed_broker.config.hashing.config_hash``).
        institutions: The parsed institutions' domain (None: the experiment has none).
    """

    config: ExperimentConfig
    domain: AgentTypesConfig
    config_hash: str
    institutions: InstitutionsDomain | None = None

    @property
    def run_id(self) -> str:
        """``<name>-<first 12 hex digits of the config hash>``: the id audit records carry
        (the same id a sweep gives the run, so ablation cases sharing a name and seed never
        collide, and a resumed run keeps the ids it started with)."""
        return f"{self.config.name}-{self.config_hash[:12]}"


def resolve_experiment(config: ExperimentConfig) -> ResolvedExperiment:
    """Parse the experiment's domain and hash its inputs (once per run).

    Raises:
        ConfigError: The ``agent_types`` file no longer validates (it was checked at load).
    """
    domain = load_agent_types(config.resolve_path(config.agent_types))
    institutions = (None if config.institutions is None
                    else load_institutions(config.resolve_path(config.institutions.domain)))
    return ResolvedExperiment(config, domain, config_hash(config), institutions)
