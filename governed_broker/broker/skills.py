"""The skill registry: the actions households may take, from ``agent_types.yaml``.

The registry is the broker's view of the ``actions:`` section: ids, descriptions (shown in
prompts), who may take each action, its duration and its effect. Costs and the execution of
effects belong to the world; the broker only needs to know what exists, what is the default
and which actions a tenure may take (for the dead-zone check of the rule table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Skill:
    """One action of the registry.

    Attributes:
        id: Action id, e.g. ``"buy_insurance"``.
        description: One sentence shown in prompts.
        tenure: Tenures that may take it (``owner``, ``renter``).
        duration: ``annual``, ``once`` or ``permanent``.
        effect: What the world executes: ``none``, ``insure``, ``elevate``, ``relocate``.
        default: Whether it is the default (fallback) action.
    """

    id: str
    description: str
    tenure: tuple[str, ...]
    duration: str
    effect: str
    default: bool = False


def _field(spec: Any, name: str, default: Any = None) -> Any:
    if isinstance(spec, Mapping):
        return spec.get(name, default)
    return getattr(spec, name, default)


class SkillRegistry:
    """The actions of the domain, in file order.

    Args:
        skills: The skills; exactly one must be the default.
    """

    def __init__(self, skills: list[Skill]) -> None:
        if not skills:
            raise ValueError("a skill registry needs at least one action")
        defaults = [s.id for s in skills if s.default]
        if len(defaults) != 1:
            raise ValueError(f"exactly one action must be the default, found {defaults}")
        self._skills = {s.id: s for s in skills}
        self.default_action = defaults[0]

    @classmethod
    def from_actions(cls, actions: Mapping[str, Any]) -> SkillRegistry:
        """Build from the ``actions`` mapping of ``AgentTypesConfig`` (models or plain dicts)."""
        return cls(
            [
                Skill(
                    id=action_id,
                    description=str(_field(spec, "description", "")),
                    tenure=tuple(_field(spec, "tenure", ())),
                    duration=str(_field(spec, "duration", "annual")),
                    effect=str(_field(spec, "effect", "none")),
                    default=bool(_field(spec, "default", False)),
                )
                for action_id, spec in actions.items()
            ]
        )

    def __contains__(self, action_id: object) -> bool:
        return action_id in self._skills

    def __getitem__(self, action_id: str) -> Skill:
        return self._skills[action_id]

    @property
    def ids(self) -> tuple[str, ...]:
        """All action ids, in file order."""
        return tuple(self._skills)

    def descriptions(self) -> dict[str, str]:
        """Action id -> prompt description."""
        return {a: s.description for a, s in self._skills.items()}

    def actions_by_tenure(self) -> dict[str, list[str]]:
        """Tenure -> the action ids it may take (in file order)."""
        tenures: dict[str, list[str]] = {}
        for skill in self._skills.values():
            for tenure in skill.tenure:
                tenures.setdefault(tenure, []).append(skill.id)
        return tenures
