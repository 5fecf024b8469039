"""``HouseholdAgent``: the Mesa agent of a household, a view of the world's household arrays.

The world (``sim.model.FloodModel``) keeps household state in numpy arrays (``model.hh``,
index = ``agent.unique_id - 1``); an agent's properties read its own entries.
"""

from __future__ import annotations

from typing import Any

import mesa

from governed_broker.sim.household_memory import HouseholdMemory


class HouseholdAgent(mesa.Agent):
    """A household (owner or renter); its state is in the model's arrays at ``self.index``."""

    def __init__(self, model: mesa.Model, index: int) -> None:
        super().__init__(model)
        self.index = index

    def _get(self, name: str) -> Any:
        return getattr(self.model.hh, name)[self.index].item()

    @property
    def tenure(self) -> str:
        """``"owner"`` or ``"renter"``."""
        return "owner" if self._get("is_owner") else "renter"

    @property
    def flood_zone(self) -> str:
        """Zone name."""
        return self.model.zones[self._get("zone_index")]

    @property
    def active(self) -> bool:
        """False once the household has relocated."""
        return not self._get("relocated")

    @property
    def insured(self) -> bool:
        """Whether a policy is in force (for this year's flood, or bought for next year's)."""
        return bool(self._get("insured"))

    @property
    def elevated(self) -> bool:
        """Whether the home is elevated."""
        return bool(self._get("elevated"))

    @property
    def savings_usd(self) -> float:
        """Current savings (dollars; negative means debt)."""
        return float(self._get("savings_usd"))

    @property
    def memory(self) -> HouseholdMemory | None:
        """This household's memory (None when the experiment's memory engine is ``none``)."""
        wm = self.model.world_memory
        return None if wm is None else wm.memory_of(self.unique_id)
