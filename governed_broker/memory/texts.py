"""The sentences a household's memories are written in, from ``memory.texts_file``.

The wording lives in ``configs/prompts/memory.yaml`` (checked against
``config.memory.MEMORY_TEXTS`` when the experiment is loaded); this module only decides which
sentence fits what happened and formats the numbers that go into it: depths in metres with one
decimal, money in whole dollars, neighbour shares in whole percents, action ids as words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from governed_broker.config.memory import MEMORY_TEXTS
from governed_broker.config.templates import TemplateSet, load_templates

#: Neighbour shares in the order they are told, each with its sentence part.
_NEIGHBOUR_PARTS = (("insured", "neighbours_insured"), ("elevated", "neighbours_elevated"),
                    ("relocated", "neighbours_relocated"))


def usd(x: float) -> str:
    """Whole dollars with thousands separators: ``$12,300``."""
    return f"${x:,.0f}"


def _words(action: str) -> str:
    return action.replace("_", " ")


@dataclass(frozen=True)
class FloodTexts:
    """A flood memory at its three fidelities: full text, summary and gist."""

    text: str
    summary: str
    gist: str


class MemoryTexts:
    """Renders memory sentences from a checked template set.

    Args:
        templates: The templates of ``memory.texts_file`` (keys of ``MEMORY_TEXTS``).
    """

    def __init__(self, templates: TemplateSet) -> None:
        self.templates = templates

    @classmethod
    def from_file(cls, path: Path) -> MemoryTexts:
        """Load and check ``path`` (``ConfigError`` names the file and key on a problem)."""
        return cls(load_templates(Path(path), MEMORY_TEXTS, setting="memory.texts_file"))

    def _r(self, key: str, **values: object) -> str:
        return self.templates.render(key, **values)

    def flood(self, year: int, depth_m: float, damage_usd: float, payout_usd: float, *,
              insured: bool, elevated: bool) -> FloodTexts:
        """The home flooded ``depth_m`` metres deep (before elevation) in ``year``."""
        depth = f"{depth_m:.1f}"
        gist = self._r("flood_gist", year=year)
        if damage_usd <= 0:
            key = "flood_harmless_elevated" if elevated else "flood_harmless"
            return FloodTexts(self._r(key, depth=depth),
                              self._r("flood_harmless_summary", year=year), gist)
        text = self._r("flood_damage", depth=depth, damage=usd(damage_usd))
        if insured and payout_usd > 0:
            text += self._r("flood_payout", payout=usd(payout_usd))
            summary = self._r("flood_summary_payout", depth=depth, year=year)
        else:
            text += self._r("flood_no_payout")
            summary = self._r("flood_summary_no_payout", depth=depth, year=year)
        if elevated:
            text += self._r("flood_elevated")
        return FloodTexts(text, summary, gist)

    def quiet_year(self, year: int) -> tuple[str, str]:
        """No flood reached the home: ``(text, gist)``."""
        return self._r("quiet_year", year=year), self._r("quiet_year_gist", year=year)

    def neighbours(self, shares: Mapping[str, float]) -> str | None:
        """What the neighbours did (shares 0..1); None when no share is given."""
        parts = [self._r(key, share=f"{round(100 * float(shares[name]))}%")
                 for name, key in _NEIGHBOUR_PARTS if shares.get(name) is not None]
        return self._r("neighbours", parts=", ".join(parts)) if parts else None

    def decision(self, key: str, action: str, cost_usd: float, status: str = "") -> str:
        """A ``decision_*`` sentence (the caller picks the key from the action's effect)."""
        return self._r(key, action=_words(action), cost=usd(cost_usd), status=status)

    def decision_gist(self, year: int, action: str, *, executed: bool) -> str:
        """``Year 3: buy insurance.`` (``(not possible)`` when it was refused)."""
        key = "decision_gist" if executed else "decision_gist_refused"
        return self._r(key, year=year, action=_words(action))
