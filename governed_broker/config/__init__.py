"""Configuration: pydantic models for experiments and agent types, and their loader."""

from governed_broker.config.agent_types import ActionSpec, AgentTypesConfig, PMTLabels
from governed_broker.config.base import ConfigError, StrictModel
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.loader import dump_resolved, load_agent_types, load_experiment

__all__ = [
    "ActionSpec",
    "AgentTypesConfig",
    "ConfigError",
    "ExperimentConfig",
    "PMTLabels",
    "StrictModel",
    "dump_resolved",
    "load_agent_types",
    "load_experiment",
]
