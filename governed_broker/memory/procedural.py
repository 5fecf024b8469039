"""Procedural memory (seed 000): learned action heuristics "in situation S, do A".

Outcomes of (situation, action) pairs are counted; consolidation turns a pair into a
heuristic once the action succeeded at least ``min_successes`` times in that situation. A
heuristic's success rate starts at the observed success share and then follows an
exponential moving average ``rate <- (1 - alpha) * rate + alpha * outcome`` (alpha 0.1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


def situation_key(situation: Mapping[str, Any]) -> str:
    """Canonical JSON text of a situation pattern (sorted keys)."""
    return json.dumps(dict(situation), sort_keys=True)


@dataclass
class Heuristic:
    """One learned rule of thumb.

    Attributes:
        id: ``h001``...
        situation: The pattern (feature -> value) in which it applies.
        action: What to do.
        success_rate: EMA of outcomes (1 success, 0 failure).
        use_count: Outcomes recorded for it (including those before discovery).
        created_year: Year it was discovered.
    """

    id: str
    situation: dict[str, Any]
    action: str
    success_rate: float
    use_count: int
    created_year: float

    def matches(self, situation: Mapping[str, Any]) -> bool:
        """True when every feature of the pattern has the same value in ``situation``."""
        return all(situation.get(k) == v for k, v in self.situation.items())

    def describe(self) -> str:
        """Plain-language rule."""
        cond = ", ".join(f"{k} = {v}" for k, v in sorted(self.situation.items()))
        return f"when {cond}: {self.action} (success rate {self.success_rate:.2f})"


@dataclass
class _Tally:
    trials: int = 0
    successes: int = 0


@dataclass
class ProceduralMemory:
    """Outcome tallies and heuristics of one agent.

    Args:
        alpha: EMA learning rate of success rates.
        min_successes: Successes of one action in one situation that make a heuristic.
    """

    alpha: float = 0.1
    min_successes: int = 3
    _tally: dict[str, _Tally] = field(default_factory=dict)
    _heuristics: dict[str, Heuristic] = field(default_factory=dict)
    # keys changed since ``changes()`` (bookkeeping of checkpoints, not memory)
    _changed: set[str] = field(default_factory=set, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if self.min_successes < 1:
            raise ValueError(f"min_successes must be >= 1, got {self.min_successes}")

    @staticmethod
    def _key(situation: Mapping[str, Any], action: str) -> str:
        return json.dumps([situation_key(situation), action])

    def record(self, situation: Mapping[str, Any], action: str, success: bool) -> None:
        """Record one outcome; updates the matching heuristic's EMA and use count."""
        key = self._key(situation, action)
        self._changed.add(key)
        tally = self._tally.setdefault(key, _Tally())
        tally.trials += 1
        tally.successes += int(bool(success))
        h = self._heuristics.get(key)
        if h is not None:
            h.success_rate = (1 - self.alpha) * h.success_rate + self.alpha * float(bool(success))
            h.use_count += 1

    def discover(self, year: float) -> list[Heuristic]:
        """Create heuristics for pairs with >= ``min_successes`` successes; return new ones."""
        new = []
        for key in sorted(self._tally):
            tally = self._tally[key]
            if key in self._heuristics or tally.successes < self.min_successes:
                continue
            sit_text, action = json.loads(key)
            h = Heuristic(id=f"h{len(self._heuristics) + 1:03d}", situation=json.loads(sit_text),
                          action=action, success_rate=tally.successes / tally.trials,
                          use_count=tally.trials, created_year=float(year))
            self._heuristics[key] = h
            self._changed.add(key)
            new.append(h)
        return new

    def match(self, situation: Mapping[str, Any]) -> list[Heuristic]:
        """Heuristics applying to ``situation``, best success rate first."""
        found = [h for h in self._heuristics.values() if h.matches(situation)]
        return sorted(found, key=lambda h: (-h.success_rate, h.id))

    def heuristics(self) -> list[Heuristic]:
        """All heuristics in discovery order."""
        return sorted(self._heuristics.values(), key=lambda h: h.id)

    def tally(self, situation: Mapping[str, Any], action: str) -> tuple[int, int]:
        """(trials, successes) recorded for one pair."""
        t = self._tally.get(self._key(situation, action), _Tally())
        return t.trials, t.successes

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"alpha": self.alpha, "min_successes": self.min_successes,
                "tally": {k: [t.trials, t.successes] for k, t in self._tally.items()},
                "heuristics": {k: asdict(h) for k, h in self._heuristics.items()}}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ProceduralMemory:
        """Inverse of ``state``."""
        mem = cls(alpha=state["alpha"], min_successes=state["min_successes"])
        mem._tally = {k: _Tally(*v) for k, v in state["tally"].items()}
        mem._heuristics = {k: Heuristic(**h) for k, h in state["heuristics"].items()}
        return mem

    def changes(self) -> list[list[Any]] | None:
        """The (situation, action) pairs changed since the last call.

        As ``[key, trials, successes, heuristic fields or None]`` (None: no change); for checkpoint
        logs, replayed by ``apply_changes``.
        """
        if not self._changed:
            return None
        out = []
        for key in sorted(self._changed):
            t, h = self._tally[key], self._heuristics.get(key)
            out.append([key, t.trials, t.successes, None if h is None else [
                h.id, h.situation, h.action, h.success_rate, h.use_count, h.created_year]])
        self._changed = set()
        return out

    def apply_changes(self, changes: list[list[Any]]) -> None:
        """Replay one ``changes()``."""
        for key, trials, successes, h in changes:
            self._tally[key] = _Tally(trials, successes)
            if h is not None:
                self._heuristics[key] = Heuristic(*h)
