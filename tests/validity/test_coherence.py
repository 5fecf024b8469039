"""The lexical reason-coherence check, on real and hand-written replies.

Real replies of the embedded model (committed in tests/fixtures/embedded_llm_run) and hand-written
contradictions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.validity.battery import coherence_patterns
from governed_broker.validity.measures import contradicts

REPO = Path(__file__).resolve().parents[2]
PATTERNS = coherence_patterns(REPO / "configs" / "validity")


@pytest.mark.parametrize(("effect", "reason"), [
    # from the committed embedded run (the example)
    ("none", "The decision to do nothing this year is not reasonable because the risk of a "
             "flood reaches the home in the low floodzone"),
    ("none", "It is not wise to do nothing when the water comes every year."),
    ("none", "We will buy insurance to be safe."),
    ("none", "We should buy flood insurance now."),
    ("insure", "No new protective action is needed this year."),
    ("insure", "Insurance is too expensive for us."),
    ("elevate", "Elevation is too expensive, so we decided to buy insurance."),
    ("relocate", "We will stay in our home."),
])
def test_contradictions_are_found(effect: str, reason: str) -> None:
    assert contradicts(reason, effect, PATTERNS)


@pytest.mark.parametrize(("effect", "reason"), [
    # real replies of the embedded model whose reasons fit their action
    ("none", "The house has not flooded in the years covered here, so you do not have any new "
             "protective action this year."),
    ("none", "There is no flood at your home, so you do not need to take new protective "
             "actions this year. The risk of flooding is low"),
    ("none", "No new protective action this year. Cost to you this year: nothing."),
    ("insure", "The decision to buy flood insurance for the coming year is based on the risk "
               "of a flood reaching the home in the coming"),
    ("insure", "This year, your flood insurance will be renewed, costing $988. You can also "
               "elevate the house above expected floodlevels"),
    ("insure", "flood insurance reduces financial loss, pays for flood damage, and provides a "
               "permanent insurance policy"),
    ("insure", "Rather than do nothing, we insure the house."),
    ("elevate", "Raising the house keeps the water out."),
])
def test_coherent_reasons_pass(effect: str, reason: str) -> None:
    assert not contradicts(reason, effect, PATTERNS)


def test_an_effect_without_patterns_never_contradicts() -> None:
    assert not contradicts("We will stay and do nothing.", "floodproof", PATTERNS)
