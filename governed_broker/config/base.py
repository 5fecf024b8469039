"""Shared pieces of every configuration model.

All configuration models forbid unknown keys so that a typo in a YAML file is an error that
names the field, never a silently ignored setting.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base class for configuration sections: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class ConfigError(Exception):
    """A configuration problem the user must fix (exit code 2 on the command line).

    The message names the file, the field path, the bad value and what is allowed.
    """
