"""Memory settings (owned by the memory package; see docs/memory.md).

Two models live here:

* ``MemoryConfig``: the experiment-level choice of engine (a name of ``MEMORY_ENGINES``, e.g.
  ``humancentric`` or ``window``, or ``none``) and per-experiment overrides of the engine
  parameters;
* ``MemoryParams``: the ``memory:`` section of ``agent_types.yaml`` with every engine parameter
  and the keyword categories that encode emotion and source weights (docs/memory.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from governed_broker.config.base import StrictModel

#: Memory engines by name: the engine class, written as ``"module:Class"`` and imported only
#: when a run uses it (``governed_broker.memory.engine.make_engine``). A class satisfies
#: ``governed_broker.memory.protocol.MemoryEngine`` and is built as
#: ``Class(params, rng=rng, agent_id=agent_id)`` (``params``: the ``memory:`` section, a
#: ``MemoryParams``, whole); a new engine is such a class plus one entry here. ``none`` (no
#: memory) is not an engine and not listed.
MEMORY_ENGINES: dict[str, str] = {
    "humancentric": "governed_broker.memory.engine:HumanCentricMemoryEngine",
    "window": "governed_broker.memory.engine:WindowMemoryEngine",
}

#: The ``engine`` value that gives households no memory at all.
NO_MEMORY = "none"

_YEAR, _DEPTH = "year", "depth"
#: The sentences of ``memory.texts_file`` (``configs/prompts/memory.yaml``) and the
#: placeholders each may use (``governed_broker.memory.texts.MemoryTexts`` fills them).
MEMORY_TEXTS: dict[str, frozenset[str]] = {
    "flood_damage": frozenset({_DEPTH, "damage"}),
    "flood_payout": frozenset({"payout"}),
    "flood_no_payout": frozenset(),
    "flood_elevated": frozenset(),
    "flood_summary_payout": frozenset({_DEPTH, _YEAR}),
    "flood_summary_no_payout": frozenset({_DEPTH, _YEAR}),
    "flood_harmless": frozenset({_DEPTH}),
    "flood_harmless_elevated": frozenset({_DEPTH}),
    "flood_harmless_summary": frozenset({_YEAR}),
    "flood_gist": frozenset({_YEAR}),
    "quiet_year": frozenset({_YEAR}),
    "quiet_year_gist": frozenset({_YEAR}),
    "neighbours": frozenset({"parts"}),
    "neighbours_insured": frozenset({"share"}),
    "neighbours_elevated": frozenset({"share"}),
    "neighbours_relocated": frozenset({"share"}),
    "decision_refused": frozenset({"action", "status"}),
    "decision_renewed": frozenset({"cost"}),
    "decision_insured": frozenset({"cost"}),
    "decision_elevated": frozenset({"cost"}),
    "decision_elevated_insured": frozenset({"cost"}),
    "decision_left": frozenset({"cost"}),
    "decision_protective": frozenset({"action", "cost"}),
    "decision_none": frozenset(),
    "decision_gist": frozenset({_YEAR, "action"}),
    "decision_gist_refused": frozenset({_YEAR, "action"}),
}


class MemoryConfig(StrictModel):
    """Which memory engine households use and per-experiment parameter overrides.

    ``engine``: a name of ``MEMORY_ENGINES``, shipped are ``humancentric`` (docs/memory.md) and
    ``window`` (only the current year's working items, the ablation baseline), or ``none`` (no
    memory). ``overrides`` replaces parameters of the ``memory:`` section of
    ``agent_types.yaml`` for this experiment (same names, scalar parameters only).
    ``concepts_file`` is the households' semantic memory (concepts and relations) and
    ``texts_file`` the sentences their memories are written in (``MEMORY_TEXTS``); relative
    paths resolve against the experiment file's directory.
    """

    engine: str = Field(
        "humancentric", description="a name of MEMORY_ENGINES: humancentric | window, or none "
        "(no memory)"
    )
    overrides: dict[str, float | int] = {}
    concepts_file: Path = Path("../configs/knowledge/flood_concepts.yaml")
    texts_file: Path = Field(
        Path("../configs/prompts/memory.yaml"),
        description="the sentences memories are written in (configs/prompts/memory.yaml)")

    @field_validator("engine")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name != NO_MEMORY and name not in MEMORY_ENGINES:
            raise ValueError(f"unknown memory engine {name!r}; registered: "
                             f"{', '.join(MEMORY_ENGINES)} (or {NO_MEMORY!r}: no memory)")
        return name


class KeywordCategory(StrictModel):
    """One emotion or source category: its weight and the words that select it.

    Attributes:
        weight: ``W_emotion`` or ``W_source`` of memories in this category (0..1).
        keywords: Words matched case-insensitively on word boundaries; may be empty for the
            default category (used when nothing matches).
        source: Where the weight comes from (literature, lineage default or our rationale).
    """

    weight: float = Field(ge=0.0, le=1.0)
    keywords: list[str] = []
    source: str = ""

    @field_validator("keywords")
    @classmethod
    def _clean(cls, words: list[str]) -> list[str]:
        out = [w.strip().lower() for w in words]
        bad = [w for w in out if not w]
        if bad:
            raise ValueError("keywords must be non-empty strings")
        return out


#: Scalar parameters that ``MemoryConfig.overrides`` may replace.
SCALAR_PARAMS = (
    "window_size",
    "top_k_significant",
    "top_k_insights",
    "decay_rate",
    "consolidation_threshold",
    "consolidation_prob",
    "min_score",
    "insight_importance",
    "importance_boost",
    "fidelity_detailed_years",
    "fidelity_summary_years",
)


class MemoryParams(StrictModel):
    """Parameters of the human-centric memory engine (the ``memory:`` section).

    Times are in simulation years. Defaults are those of docs/memory.md (seed 003 and the lineage).

    Attributes:
        window_size: Working-memory capacity (items of the current year).
        top_k_significant: Long-term non-insight items retrieved per year.
        top_k_insights: Insights retrieved per year (own slots, docs/memory.md).
        decay_rate: Base forgetting rate lambda per year.
        consolidation_threshold: Importance at or above which a working item always becomes
            long-term.
        consolidation_prob: Scale of the keep probability of less important items,
            ``consolidation_prob * importance / consolidation_threshold``.
        min_score: Long-term items scoring below this are not retrieved.
        insight_importance: Importance of reflection insights.
        importance_boost: ``W_emotion`` of insights (slows their decay).
        fidelity_detailed_years: Age (years) up to which a memory is shown in detail.
        fidelity_summary_years: Age up to which it is shown as a summary; older: gist.
        emotion_categories: Emotion categories (name -> weight and keywords).
        source_categories: Source categories (name -> weight and keywords).
        default_emotion: Category used when no emotion keyword matches.
        default_source: Category used when no source keyword matches.
    """

    # Upper bounds: far above any sensible setting (the shipped values are 5, 2, 3, 0.1, 0.6,
    # 0.1, 10, 1, 3), low enough that a typo is refused rather than flooding prompts (the
    # counts are memories per prompt or per year) or giving scores no other memory can reach.
    window_size: int = Field(5, ge=1, le=1000, description="items per year; at most 1000")
    top_k_significant: int = Field(2, ge=0, le=100, description=(
        "memories per prompt; at most 100, far beyond any token budget"))
    top_k_insights: int = Field(3, ge=0, le=100, description=(
        "insights per prompt; at most 100, far beyond any token budget"))
    decay_rate: float = Field(0.1, ge=0.0, le=100.0, description=(
        "per year; at most 100 (at 100 a memory is gone, exp(-50), within a year)"))
    consolidation_threshold: float = Field(0.6, gt=0.0, le=1000.0)
    consolidation_prob: float = Field(0.7, ge=0.0, le=1.0)
    min_score: float = Field(0.1, ge=0.0, le=1000.0)
    insight_importance: float = Field(10.0, gt=0.0, le=1000.0, description=(
        "importance of insights; at most 1000 (events have importance <= 1)"))
    importance_boost: float = Field(0.9, ge=0.0, le=1.0)
    fidelity_detailed_years: float = Field(1.0, ge=0.0, le=1000.0, description=(
        "years; at most 1000, the longest run"))
    fidelity_summary_years: float = Field(3.0, ge=0.0, le=1000.0, description=(
        "years; at most 1000, the longest run"))
    # Defaults mirror the shipped agent_types.yaml (sources documented there).
    emotion_categories: dict[str, KeywordCategory] = {
        "direct_impact": KeywordCategory(
            weight=1.0,
            keywords=["flood", "floods", "flooded", "flooding", "damage", "damaged", "damages",
                      "trauma", "destroyed", "evacuated", "evacuate", "inundated",
                      "water entered"],
        ),
        "strategic": KeywordCategory(
            weight=0.8,
            keywords=["decision", "decided", "decide", "relocate", "relocated", "relocation",
                      "elevate", "elevated", "elevation", "bought", "purchased"],
        ),
        "routine": KeywordCategory(weight=0.1, keywords=[]),
    }
    source_categories: dict[str, KeywordCategory] = {
        "personal": KeywordCategory(
            weight=1.0, keywords=["i", "my", "me", "mine", "myself", "we", "our", "us"]),
        "neighbour": KeywordCategory(
            weight=0.8,
            keywords=["neighbor", "neighbors", "neighbour", "neighbours", "neighbouring",
                      "neighboring", "others", "street", "community"],
        ),
        "general": KeywordCategory(weight=0.5, keywords=[]),
    }
    default_emotion: str = "routine"
    default_source: str = "general"

    @model_validator(mode="after")
    def _consistent(self) -> MemoryParams:
        if self.default_emotion not in self.emotion_categories:
            raise ValueError(
                f"default_emotion '{self.default_emotion}' is not one of emotion_categories "
                f"{sorted(self.emotion_categories)}"
            )
        if self.default_source not in self.source_categories:
            raise ValueError(
                f"default_source '{self.default_source}' is not one of source_categories "
                f"{sorted(self.source_categories)}"
            )
        if self.fidelity_summary_years < self.fidelity_detailed_years:
            raise ValueError(
                "fidelity_summary_years must be >= fidelity_detailed_years, got "
                f"{self.fidelity_summary_years} < {self.fidelity_detailed_years}"
            )
        return self

    def with_overrides(self, overrides: Mapping[str, float | int]) -> MemoryParams:
        """Return a copy with experiment overrides applied (validated like the YAML).

        Raises:
            ValueError: an override names no scalar parameter, or its value is invalid.
        """
        if not overrides:  # already validated: every household's engine shares it
            return self
        unknown = sorted(set(overrides) - set(SCALAR_PARAMS))
        if unknown:
            raise ValueError(
                f"memory.overrides: unknown parameter(s) {unknown}; allowed: {list(SCALAR_PARAMS)}"
            )
        data = self.model_dump()
        data.update(overrides)
        return MemoryParams.model_validate(data)
