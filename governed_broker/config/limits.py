"""The ``limits:`` section: sizes above which a run must be confirmed (see ``config.cost``)."""

from __future__ import annotations

from pydantic import Field

from governed_broker.config.base import StrictModel


class RunLimits(StrictModel):
    """Sizes above which a run must be confirmed (``--set limits.KEY=...``).

    Attributes:
        max_household_years: Most households x years. The default (5 million) is about 20
            minutes of the baseline world on 2 cores (docs/running.md "Performance": 4.25e-5 s
            per agent-year, plus outputs); above it a typo is likelier than intent.
        max_llm_calls: Most LLM decision and reflection calls (upper bounds from the
            configuration; the re-asks and other calls ``config.cost.estimate_run_cost``
            expects on top are not limited). The default (20,000) is
            about two days of the embedded model on 2 cores, or minutes on a GPU server.
    """

    max_household_years: int = Field(default=5_000_000, ge=1)
    max_llm_calls: int = Field(default=20_000, ge=0)
