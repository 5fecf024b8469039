"""Helpers of the rag tests: situations, embedders and the shipped knowledge paths."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from governed_broker.contracts.decision import HouseholdSituation

REPO = Path(__file__).resolve().parents[2]
KNOWLEDGE_DIR = REPO / "configs" / "knowledge"
TOPICS_FILE = KNOWLEDGE_DIR / "rag_topics.yaml"


class CountingEmbedder:
    """Wraps an embedder and counts the texts it embeds (to prove what was searched)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.embed(texts)


def situation(**changes: Any) -> HouseholdSituation:
    """A quiet year for an insured, unflooded owner in the low zone; override any field."""
    base = HouseholdSituation(
        agent_id=7,
        year=3,
        tenure="owner",
        flood_zone="low",
        income_usd=60_000.0,
        savings_usd=20_000.0,
        structure_value_usd=250_000.0,
        contents_value_usd=100_000.0,
        elevated=False,
        insured=True,
        flooded=False,
        depth_m=0.0,
        damage_usd=0.0,
        payout_usd=0.0,
        years_since_flood=None,
        floods_experienced=0,
        flood_probability=0.002,
        neighbour_shares={"insured": 0.2, "elevated": 0.0, "relocated": 0.0},
        action_costs_usd={"do_nothing": 0.0, "buy_insurance": 900.0, "relocate": 30_000.0},
        affordable={"do_nothing": True, "buy_insurance": True, "relocate": True},
        allowed_actions=("do_nothing", "relocate"),
        trust_insurance=0.5,
        trust_neighbours=0.5, debt_usd=0.0, unrepaired_damage_usd=0.0,
    )
    return dataclasses.replace(base, **changes)
