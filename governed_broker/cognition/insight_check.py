"""Does an insight say only what its source memories say?

A reflection insight is stored only if the memories it was drawn from support its claims
(reflection of small models invents floods, payouts and numbers). Two checks, both on text:

* numbers: every number in the insight (money, depths, shares, years) must be one that a source
  memory states (within 2 %, "$45k" read as 45,000), or the year reflected on;
* claims: ``claims`` of ``configs/prompts/reflection.yaml``: each names a pattern of the
  insight (e.g. "my home flooded") and a pattern that at least one source memory must match
  (e.g. the sentence a flood memory is written in). Wording is data: edit the YAML with the
  memory sentences (``configs/prompts/memory.yaml``).

The check is a filter for claims about the household's own year, not a judge of general
lessons ("floods can come any year" passes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from governed_broker.config.claims import Claim

#: A number as written in a sentence: "$45,000", "0.8", "30%", "45k".
_NUMBER = re.compile(r"(?<![\w.])\$?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(k\b)?", re.IGNORECASE)
#: Relative tolerance when comparing a number of an insight with those of the memories.
TOLERANCE = 0.02
def numbers_in(text: str) -> list[float]:
    """The numbers written in a text (thousands separators and a ``k`` suffix read)."""
    out = []
    for digits, thousand in _NUMBER.findall(text):
        value = float(digits.replace(",", ""))
        out.append(value * 1000 if thousand else value)
    return out


def _close(value: float, known: Sequence[float]) -> bool:
    return any(abs(value - k) <= TOLERANCE * max(abs(value), abs(k)) for k in known)


def unsupported(insight: str, memories: Sequence[str], year: int,
                claims: Sequence[Claim]) -> str | None:
    """Why an insight is not supported by its source memories, or None when it is.

    Args:
        insight: The insight's text.
        memories: The texts of the memories it was drawn from.
        year: The year reflected on.
        claims: The claims to check.
    """
    stated = numbers_in(insight)
    if stated:  # most insights state no number: the memories' numbers are read only if needed
        known = [float(year)] + [n for text in memories for n in numbers_in(text)]
        for value in stated:
            if not _close(value, known):
                return f"the number {value:g} is in no source memory"
    for claim in claims:
        if claim.insight.search(insight) and not any(claim.memory.search(m) for m in memories):
            return f"claim '{claim.name}' is in no source memory"
    return None
