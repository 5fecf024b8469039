"""A governance rule evaluated on one proposal (ground floor: no world types).

Households' rules (``agent_types.yaml``, ``broker.rules``) and institutions' rules
(``institutions.yaml``, ``sim.institution_rules``) report what they found in this one form;
the governed conversation (``broker.conversation``) re-asks with the messages of the ERROR
rules that fired, and the audit records every outcome (``to_json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RuleOutcome:
    """One rule evaluated on one proposal.

    Attributes:
        rule_id: The rule.
        severity: ``ERROR`` or ``WARNING`` under the active profile (``LIMIT``: an
            institution's limit the world checks whatever the profile).
        fired: Whether it fired.
        message: The filled-in message ("" when it did not fire).
        category: A household rule's category (``identity``, ``financial``, ``thinking``,
            ``social``); "" for an institution's.
        kind: An institution rule's kind (``range``, ``max_change``...); "" for a household's.
    """

    rule_id: str
    severity: str
    fired: bool
    message: str = ""
    category: str = ""
    kind: str = ""

    def to_json(self) -> dict[str, Any]:
        """Audit form: id, category or kind (whichever the rule has), severity, fired.

        Message.
        """
        tags = {k: v for k, v in (("category", self.category), ("kind", self.kind)) if v}
        return {"id": self.rule_id, **tags, "severity": self.severity, "fired": self.fired,
                "message": self.message}
