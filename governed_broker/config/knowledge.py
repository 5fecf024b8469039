"""Policy topics: when a household's situation calls for knowledge, and what to search for.

The triggers are data (``configs/knowledge/rag_topics.yaml``), not code. A topic fires when any
of its ``when`` clauses holds; a clause is a list of conditions that must all hold (a formula in
disjunctive normal form). A condition compares one field of the ``HouseholdSituation`` (dotted
paths reach into mappings, e.g. ``action_costs_usd.elevate_house``) with a constant ``value``
or with another field ``other``. A key missing from a mapping (an action this household does
not have) makes the condition false; an unknown field name is a configuration error found when
the file is loaded. Each topic's ``query`` is a ``string.Template`` over the situation's plain
fields (``$tenure``, ``$flood_zone``...), which cannot reach attributes or call code.

The same file holds the MQE and HyDE prompt templates, so domain experts can read and edit
every word the LLM sees.
"""

from __future__ import annotations

import operator
from pathlib import Path
from string import Template
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from governed_broker.config.base import ConfigError, StrictModel
from governed_broker.config.validation import validate_model
from governed_broker.config.yamlsafe import read_yaml
from governed_broker.contracts.decision import (
    MISSING,
    HouseholdSituation,
    action_in_path,
    situation_path_problem,
    situation_value,
)

#: Situation fields usable as ``$name`` in query templates (plain scalars only).
TEMPLATE_FIELDS = frozenset(
    {
        "agent_id", "year", "tenure", "flood_zone", "income_usd", "savings_usd",
        "structure_value_usd", "contents_value_usd", "elevated", "insured", "flooded",
        "depth_m", "damage_usd", "payout_usd", "floods_experienced", "flood_probability",
    }
)  # fmt: skip
_OPS = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "contains": lambda a, b: b in a,
    "in": lambda a, b: a in b,
}


def _check_field_path(path: str) -> str:
    problem = situation_path_problem(path)
    if problem is not None:
        raise ValueError(problem)
    return path


class TopicCondition(StrictModel):
    """``<field> <op> <value | other field>``, e.g. ``insured eq false``."""

    field: str
    op: Literal["eq", "ne", "lt", "le", "gt", "ge", "contains", "in"]
    value: Any = None
    other: str | None = None

    @field_validator("field", "other")
    @classmethod
    def _check_paths(cls, v: str | None) -> str | None:
        return None if v is None else _check_field_path(v)

    @model_validator(mode="after")
    def _value_or_other(self) -> TopicCondition:
        if (self.other is None) == ("value" not in self.model_fields_set):
            raise ValueError("give exactly one of `value` (a constant) or `other` (a field)")
        return self

    def action_ids(self) -> list[str]:
        """The action ids the condition names.

        The value an ``allowed_actions`` condition looks for, and the actions whose cost or
        affordability it reads.
        """
        named = [a for a in map(action_in_path, (self.field, self.other or "")) if a]
        if self.field == "allowed_actions" and self.op == "contains" and self.other is None:
            named.append(str(self.value))
        return named

    def holds(self, situation: HouseholdSituation) -> bool:
        """Whether the condition is true for ``situation`` (false when a value is missing)."""
        left = situation_value(situation, self.field)
        right = self.value if self.other is None else situation_value(situation, self.other)
        if left is MISSING or right is MISSING or left is None or right is None:
            return False
        try:
            return bool(_OPS[self.op](left, right))
        except TypeError as exc:
            raise ConfigError(
                f"rag topic condition {self.field} {self.op} {right!r}: cannot compare "
                f"{left!r} with {right!r} ({exc})"
            ) from exc


class Topic(StrictModel):
    """One policy topic: trigger clauses and the retrieval query it issues."""

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    description: str = Field(min_length=1)
    when: list[list[TopicCondition]] = Field(min_length=1)
    query: str = Field(min_length=1)

    @field_validator("query")
    @classmethod
    def _check_template(cls, v: str) -> str:
        template = Template(v)
        if not template.is_valid():
            raise ValueError(f"invalid $-template {v!r} (write $$ for a literal dollar sign)")
        unknown = set(template.get_identifiers()) - TEMPLATE_FIELDS
        if unknown:
            raise ValueError(
                f"unknown template fields {sorted(unknown)}; allowed: {sorted(TEMPLATE_FIELDS)}"
            )
        return v

    def matches(self, situation: HouseholdSituation) -> bool:
        """Whether any clause has all of its conditions true."""
        return any(all(c.holds(situation) for c in clause) for clause in self.when)

    def query_for(self, situation: HouseholdSituation) -> str:
        """The topic's query with the situation's fields filled in."""
        values = {name: _template_text(getattr(situation, name)) for name in TEMPLATE_FIELDS}
        return Template(self.query).substitute(values)


def _template_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class ExpansionPrompts(StrictModel):
    """Templates of the MQE and HyDE prompts (``$query``, and ``$n`` for MQE)."""

    mqe_system: str = Field(min_length=1)
    mqe_user: str = Field(min_length=1)
    hyde_system: str = Field(min_length=1)
    hyde_user: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check_placeholders(self) -> ExpansionPrompts:
        for name, allowed in (
            ("mqe_system", {"n"}),
            ("mqe_user", {"query", "n"}),
            ("hyde_system", set()),
            ("hyde_user", {"query"}),
        ):
            template = Template(getattr(self, name))
            unknown = set(template.get_identifiers()) - allowed
            if not template.is_valid() or unknown:
                raise ValueError(f"prompts.{name}: placeholders allowed: {sorted(allowed)}")
        if "query" not in Template(self.mqe_user).get_identifiers():
            raise ValueError("prompts.mqe_user must contain $query")
        if "query" not in Template(self.hyde_user).get_identifiers():
            raise ValueError("prompts.hyde_user must contain $query")
        return self


class TopicsFile(StrictModel):
    """The whole ``rag_topics.yaml``: prompt templates and topics."""

    prompts: ExpansionPrompts
    topics: list[Topic] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> TopicsFile:
        ids = [t.id for t in self.topics]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate topic ids: {duplicates}")
        return self

    def action_ids(self) -> dict[str, list[str]]:
        """Per topic (``topic '<id>'``), the action ids its conditions name."""
        return {f"topic {t.id!r}": [a for clause in t.when for c in clause for a in c.action_ids()]
                for t in self.topics}

    def matching(self, situation: HouseholdSituation) -> list[Topic]:
        """Topics touched by ``situation``, in file order."""
        return [t for t in self.topics if t.matches(situation)]


def load_topics(path: Path) -> TopicsFile:
    """Load and validate a topics file.

    Raises:
        ConfigError: Missing file, bad YAML, or a validation error; the message names the file,
            the field path and the bad value.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(
            f"{path}: rag topics file not found; set rag.topics_file or add rag_topics.yaml to "
            "rag.knowledge_dir")
    return validate_model(TopicsFile, read_yaml(path, "rag topics file"), path)
