"""The gate on runs: find the card of a run's configuration, record it, refuse or warn.

Every LLM run looks for the card of its exact configuration (``card.card_key``) when it starts
and records what it found in ``manifest.json`` under ``validity``: the gate, the key, the card's
sha256 and status (``passed``, ``failed``, ``missing``), the tests that failed and, under
``warn``, the warning. ``validity.gate: block`` refuses a run (and ``sweep`` a sweep) whose card
is missing or did not pass with a ``ConfigError`` (exit code 2) that names the primary tests
that did not pass and the ``validate`` command to run. A run whose decisions no language model
makes has no card to find (status ``not_applicable``). With ``gate: off``, a battery that cannot
be read does not stop a run: the problem is recorded as status ``unavailable``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from governed_broker.config.base import ConfigError
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.validity.battery import load_battery
from governed_broker.validity.store import CARD_FILE, cards_dir, find_card


def card_of(experiment: ResolvedExperiment) -> dict[str, Any]:
    """What the cards directory holds for the experiment's configuration.

    Returns:
        ``{"key", "status", "card_path", "card_sha256", "failed_tests", "decisions", "card",
        "text"}`` with status ``passed``, ``failed`` or ``missing`` (``card`` and ``text``: the
        card and its file's text, or None).

    Raises:
        ConfigError: the battery cannot be read, or a stored card is broken.
    """
    from governed_broker.validity.card import card_key  # the broker's code: LLM runs only
    from governed_broker.validity.plan import plan_battery
    from governed_broker.validity.situations import zone_probabilities

    config = experiment.config
    battery = load_battery(config.resolve_path(config.validity.battery_dir), experiment.domain)
    plan = plan_battery(battery, experiment.domain, zone_probabilities(experiment))
    key = card_key(experiment, plan)
    found = find_card(cards_dir(config), key)
    decisions = plan.decisions()
    if found is None:
        return {"key": key, "status": "missing", "card_path": None, "card_sha256": None,
                "failed_tests": [], "decisions": decisions, "card": None, "text": None}
    card, text, sha, path = found
    failed = [t["name"] for t in card["tests"] if t.get("primary") and t["outcome"] != "pass"
              and t["outcome"] != "not_informative"]
    return {"key": key, "status": "passed" if card.get("passed") is True else "failed",
            "card_path": str(path), "card_sha256": sha, "failed_tests": failed,
            "decisions": decisions, "card": card, "text": text}


def _why(found: dict[str, Any], experiment: ResolvedExperiment) -> str:
    where = cards_dir(experiment.config)
    if found["status"] == "missing":
        return (f"there is no validity card for this configuration (model, prompts, rules and "
                f"battery; key {found['key'][:12]}) in {where}")
    card = found["card"]
    failed = [f"{t['name']} ({t['outcome'].replace('_', ' ')}: {t['statistic_name']} "
              f"{_num(t['statistic'])}, needs {t['criterion']})" for t in card["tests"]
              if t["name"] in found["failed_tests"]]
    if not failed:
        return f"its validity card {found['card_path']} did not pass ({card.get('verdict')})"
    return (f"its validity card {found['card_path']} did not pass; primary tests that did "
            "not: " + "; ".join(failed))


def _num(value: Any) -> str:
    return "undefined" if value is None else f"{value:.3g}"


@dataclass(frozen=True)
class GateResult:
    """What the gate decided for a run.

    Attributes:
        record: What ``manifest.json`` records under ``validity``.
        card_text: The card file's text, for the run directory (None: no card found).
    """

    record: dict[str, Any]
    card_text: str | None = None

    #: The card's file name in a run directory.
    CARD_FILE = CARD_FILE


def check_gate(experiment: ResolvedExperiment) -> GateResult:
    """Apply ``validity.gate`` to a run of ``experiment``.

    Raises:
        ConfigError: ``gate: block`` and the card is missing or failed (or, under ``warn`` or
            ``block``, the battery or the stored card cannot be read).
    """
    config = experiment.config
    gate = config.validity.gate
    if config.decision.maker != "llm" or config.llm is None:
        return GateResult({"gate": gate, "status": "not_applicable",
                           "note": "no language model makes this run's decisions"})
    if gate == "off" and not any(cards_dir(config).glob("*.json")):
        # nothing to find, nothing to enforce: the key is not worth computing
        return GateResult({"gate": gate, "status": "missing", "key": None})
    try:
        found = card_of(experiment)
    except ConfigError as exc:
        if gate != "off":
            raise ConfigError(f"validity.gate is {gate!r}, but the validity card cannot be "
                              f"looked up: {exc}") from exc
        return GateResult({"gate": gate, "status": "unavailable", "note": str(exc)[:500]})
    except Exception as exc:  # noqa: BLE001 - with the gate off, the lookup never stops a run
        if gate != "off":
            raise
        note = f"{type(exc).__name__}: {exc}"[:500]
        print(f"warning: the validity card could not be looked up ({note})", file=sys.stderr)
        return GateResult({"gate": gate, "status": "unavailable", "note": note})
    record = {k: v for k, v in found.items() if k not in ("card", "text", "decisions")}
    record["gate"] = gate
    if found["status"] != "passed" and gate != "off":
        why = _why(found, experiment)
        verb = "see" if found["status"] == "failed" else "make"
        command = (f"run `governed-broker validate <experiment.yaml>` with this run's --set "
                   f"options to {verb} the card ({found['decisions']} battery decisions; cards "
                   f"are stored in {cards_dir(config)})")
        if gate == "block":
            raise ConfigError(f"validity.gate is 'block' and {why}; {command}, or set "
                              "validity.gate to warn or off to run without a passing card")
        record["warning"] = f"{why}; {command}"
        print(f"warning: {record['warning']}", file=sys.stderr)
    return GateResult(record, found["text"])
