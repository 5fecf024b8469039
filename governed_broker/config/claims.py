"""The ``claims`` of ``configs/prompts/reflection.yaml``.

What a reflection insight may claim about the household's own year, and what a source memory must
say to support it (used by ``cognition.insight_check``; checked when an experiment with reflection
is loaded).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from governed_broker.config.base import ConfigError, excerpt

#: Longest regular expression a claim may hold (characters).
MAX_PATTERN_CHARS = 400


@dataclass(frozen=True)
class Claim:
    """A claim an insight may make and what a source memory must say to support it.

    Attributes:
        name: Identifier, written to ``reflections.jsonl`` when the claim is unsupported.
        insight: Pattern of the claim in the insight (``re.search``, case-insensitive).
        memory: Pattern that at least one source memory must match.
    """

    name: str
    insight: re.Pattern[str]
    memory: re.Pattern[str]


def load_claims(entries: Any, source: str) -> tuple[Claim, ...]:
    """Claims from the ``claims`` list of ``reflection.yaml`` (``name``, ``insight``, ``memory``).

    Raises:
        ConfigError: not a list of such mappings, or a pattern that is not a regular expression.
    """
    if not isinstance(entries, list):
        raise ConfigError(f"{source}: 'claims' must be a list of {{name, insight, memory}}")
    claims = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or set(entry) != {"name", "insight", "memory"} or \
                not all(isinstance(v, str) and 0 < len(v) <= MAX_PATTERN_CHARS
                        for v in entry.values()):
            raise ConfigError(f"{source}: claims[{index}] must have exactly the text keys name, "
                              f"insight and memory (patterns at most {MAX_PATTERN_CHARS} "
                              "characters)")
        try:
            claims.append(Claim(entry["name"], re.compile(entry["insight"], re.IGNORECASE),
                                re.compile(entry["memory"], re.IGNORECASE)))
        except re.error as exc:
            raise ConfigError(f"{source}: claims[{index}] ({excerpt(entry['name'], 40)}): not a "
                              f"regular expression ({exc})") from None
    return tuple(claims)
