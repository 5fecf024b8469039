"""Metacognitive record (seed 002): which strategies an agent used and how they turned out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class StrategyRecord:
    """Running totals for one action (money in dollars).

    Attributes:
        action: Action id.
        chosen: Years the action was decided.
        executed: Years it was actually executed (feasible and approved).
        spent_usd: Money spent on it (costs and premiums).
        evaluated: Years its outcome was judged.
        paid_off: Of those, years it paid off.
        floods_while_used: Floods experienced while it was in force.
        damage_usd: Damage suffered in those floods.
        payout_usd: Insurance paid in those floods.
        damage_avoided_usd: Damage avoided in those floods, where the world reported it.
    """

    action: str
    chosen: int = 0
    executed: int = 0
    spent_usd: float = 0.0
    evaluated: int = 0
    paid_off: int = 0
    floods_while_used: int = 0
    damage_usd: float = 0.0
    payout_usd: float = 0.0
    damage_avoided_usd: float = 0.0


class MetacognitiveRecord:
    """Per-agent strategy effectiveness, updated by the household adapter."""

    def __init__(self) -> None:
        self._rows: dict[str, StrategyRecord] = {}
        self._changed: set[str] = set()  # actions changed since ``changes()``

    def _row(self, action: str) -> StrategyRecord:
        self._changed.add(action)
        return self._rows.setdefault(action, StrategyRecord(action))

    def record_choice(self, action: str, *, executed: bool, cost_usd: float) -> None:
        """A decision: counted as chosen; as executed (with its cost) when carried out."""
        row = self._row(action)
        row.chosen += 1
        if executed:
            row.executed += 1
            row.spent_usd += float(cost_usd)

    def record_outcome(self, action: str, *, paid_off: bool, flooded: bool,
                       damage_usd: float = 0.0, payout_usd: float = 0.0,
                       damage_avoided_usd: float | None = None) -> None:
        """How a strategy in force turned out in one year."""
        row = self._row(action)
        row.evaluated += 1
        row.paid_off += int(bool(paid_off))
        if flooded:
            row.floods_while_used += 1
            row.damage_usd += float(damage_usd)
            row.payout_usd += float(payout_usd)
            row.damage_avoided_usd += float(damage_avoided_usd or 0.0)

    def strategies(self) -> list[StrategyRecord]:
        """Records sorted by action id."""
        return [self._rows[k] for k in sorted(self._rows)]

    def get(self, action: str) -> StrategyRecord | None:
        """The record of one action, if any."""
        return self._rows.get(action)

    def state(self) -> list[dict[str, Any]]:
        """JSON-serialisable state."""
        return [asdict(r) for r in self.strategies()]

    @classmethod
    def from_state(cls, state: list[Mapping[str, Any]]) -> MetacognitiveRecord:
        """Inverse of ``state``."""
        rec = cls()
        for row in state:
            rec._rows[row["action"]] = StrategyRecord(**row)
        return rec

    def changes(self) -> list[list[Any]] | None:
        """The records changed since the last call.

        Each as its field values in order (None: no change); for checkpoint logs, replayed by
        ``apply_changes``.
        """
        if not self._changed:
            return None
        out = [[getattr(self._rows[a], f) for f in _FIELDS] for a in sorted(self._changed)]
        self._changed = set()
        return out

    def apply_changes(self, changes: list[list[Any]]) -> None:
        """Replay one ``changes()``."""
        for row in changes:
            self._rows[row[0]] = StrategyRecord(*row)


_FIELDS = tuple(f.name for f in fields(StrategyRecord))
