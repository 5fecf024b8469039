"""Where validity cards live and how they are read back.

Cards are files ``<cards_dir>/<key>.json`` (``card.card_key``); ``cards_dir`` is
``validity.cards_dir`` or ``$GOVERNED_BROKER_CACHE/validity_cards``
(``~/.cache/governed_broker/validity_cards``), so every experiment on a machine (or on a cluster
sharing a home directory) finds the cards made there. ``validate`` writes its card into the
store and into its output directory; a run copies the card of its configuration into its run
directory as ``validity_card.json`` and records the card's sha256 in ``manifest.json``. A card
can be shared by committing it to a folder of the project and pointing ``validity.cards_dir``
at that folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from governed_broker.config.base import ConfigError
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.yamlsafe import read_text_file
from governed_broker.llm.model_store import cache_dir
from governed_broker.run_dir import write_atomic

#: Version of the card's layout and key; a card of another version is never matched (2: three
#: outcomes, power-sized battery, common random numbers, primary tests).
CARD_FORMAT = 2
#: The card's file name in a run or ``validate`` directory.
CARD_FILE = "validity_card.json"
CARDS_DIR = "validity_cards"
#: Largest card read back (a card is a few tens of KB).
MAX_CARD_BYTES = 5_000_000


def cards_dir(config: ExperimentConfig) -> Path:
    """Where the cards of an experiment are stored."""
    if config.validity.cards_dir is not None:
        return config.resolve_path(config.validity.cards_dir.expanduser())
    return cache_dir() / CARDS_DIR


def card_text(card: dict[str, Any]) -> str:
    """The card as the file holds it."""
    return json.dumps(card, indent=2, sort_keys=False) + "\n"


def save_card(card: dict[str, Any], directory: Path) -> Path:
    """Write ``<directory>/<key>.json`` atomically; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{card['key']}.json"
    write_atomic(path, card_text(card))
    return path


def find_card(directory: Path, key: str) -> tuple[dict[str, Any], str, str, Path] | None:
    """The stored sampled card of ``key``.

    (card, the file's text, its sha256, path), or None if there is none. A card judged from
    distributions (``readout.kind``) has a key of its own and is never returned.

    Raises:
        ConfigError: A card file that is not a card of this key (unreadable, another key or
            format): it is never used, and the message says to run ``validate`` again.
    """
    path = directory / f"{key}.json"
    if not path.is_file():
        return None
    text = read_text_file(path, "validity card", max_bytes=MAX_CARD_BYTES)
    try:
        card = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not a readable validity card ({exc}); delete it and run "
                          "`governed-broker validate` again") from None
    if not isinstance(card, dict) or card.get("key") != key or \
            card.get("card_format") != CARD_FORMAT or not isinstance(card.get("tests"), list):
        raise ConfigError(f"{path}: not a validity card of key {key[:12]}... (format "
                          f"{CARD_FORMAT}); delete it and run `governed-broker validate` again")
    kind = (card.get("readout") or {"kind": "sampled"}).get("kind")
    if kind != "sampled":
        raise ConfigError(f"{path}: a card judged from {kind}s stored under a sampled card's "
                          "key; delete it and run `governed-broker validate` again")
    return card, text, hashlib.sha256(text.encode("utf-8")).hexdigest(), path
