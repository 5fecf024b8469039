"""The ``validity:`` section: the behavioural-validity battery and the gate on runs.

The battery itself (vignettes, tests, thresholds) is data in ``battery_dir``
(``configs/validity/``); ``governed_broker.validity`` reads and runs it (docs/validity.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from governed_broker.config.base import StrictModel

#: The files of a battery directory.
BATTERY_FILES = ("vignettes.yaml", "tests.yaml")


class ValidityConfig(StrictModel):
    """Which battery measures the experiment's households, and whether runs depend on it.

    Attributes:
        gate: ``off`` (default): runs record the card of their configuration when one exists;
            ``warn``: a run without a passing card starts, and records the warning in its
            manifest (and report); ``block``: ``run`` and ``sweep`` refuse to start without a
            passing card for their exact model, prompts and rules (exit code 2).
        battery_dir: Directory with ``vignettes.yaml`` and ``tests.yaml``; relative paths
            resolve against the experiment file's directory.
        cards_dir: Where cards are stored, one ``<key>.json`` per configuration; default
            ``$GOVERNED_BROKER_CACHE/validity_cards`` (``~/.cache/governed_broker/...``).
    """

    gate: Literal["off", "warn", "block"] = Field(
        "off", description="off | warn | block: what a run does without a passing validity "
        "card for its model, prompts and rules (docs/validity.md)")
    battery_dir: Path = Field(
        Path("../configs/validity"),
        description="directory of the battery: vignettes.yaml and tests.yaml")
    cards_dir: Path | None = Field(
        None, description="where validity cards are stored (default "
        "$GOVERNED_BROKER_CACHE/validity_cards, i.e. ~/.cache/governed_broker/validity_cards)")
