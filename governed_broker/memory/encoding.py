"""Keyword encoding of memories: emotion and source categories and their weights.

See docs/memory.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_SEEN = 4096  # texts remembered; all are forgotten when full


@dataclass(frozen=True)
class CategoryTable:
    """Categories of one kind (emotion or source): weights, keyword patterns and the default.

    Matching is case-insensitive on word boundaries; multi-word keywords match as phrases.
    When several categories match, the highest weight wins (ties: first in table order).
    """

    weights: Mapping[str, float]
    patterns: Mapping[str, re.Pattern[str] | None]
    default: str
    # texts classified lately (many memories repeat word for word across households)
    _seen: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(
        cls, weights: Mapping[str, float], keywords: Mapping[str, Sequence[str]], default: str
    ) -> CategoryTable:
        """Compile the keyword lists; ``default`` must be one of ``weights``."""
        if default not in weights:
            raise ValueError(f"default category {default!r} not in {sorted(weights)}")
        unknown = sorted(set(keywords) - set(weights))
        if unknown:
            raise ValueError(f"keywords given for categories without a weight: {unknown}")
        patterns: dict[str, re.Pattern[str] | None] = {}
        for name in weights:
            words = [w.strip().lower() for w in keywords.get(name, ()) if w.strip()]
            if words:
                alts = "|".join(
                    r"\s+".join(re.escape(p) for p in w.split())
                    for w in sorted(words, key=len, reverse=True)
                )
                patterns[name] = re.compile(rf"(?<!\w)(?:{alts})(?!\w)", re.IGNORECASE)
            else:
                patterns[name] = None
        return cls(dict(weights), patterns, default)

    def classify(self, text: str) -> str:
        """The matching category with the highest weight, or the default."""
        found = self._seen.get(text)
        if found is None:
            if len(self._seen) >= _SEEN:
                self._seen.clear()
            found = self._seen[text] = self._classify(text)
        return found

    def _classify(self, text: str) -> str:
        best, best_w = self.default, None
        for name, pattern in self.patterns.items():
            if pattern is not None and pattern.search(text):
                w = self.weights[name]
                if best_w is None or w > best_w:
                    best, best_w = name, w
        return best

    def weight(self, name: str) -> float:
        """Weight of a category; unknown names are an error naming the allowed ones."""
        try:
            return float(self.weights[name])
        except KeyError:
            raise ValueError(
                f"unknown category {name!r}; allowed: {sorted(self.weights)}"
            ) from None
