"""Readable memory export (seed 002): ``memories/<agent_id>.md`` per agent."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from governed_broker.memory.item import MemoryItem
from governed_broker.memory.protocol import MemoryEngine


def _item_line(item: MemoryItem, engine: MemoryEngine, year: float | None) -> str:
    score = "" if year is None else f", score {engine.score(item, year):.3f}"
    recalled = f", recalled {item.access_count}x" if item.access_count else ""
    return (f"- [{item.kind}; importance {item.importance:.2f}; {item.emotion}/{item.source}"
            f"{score}{recalled}; now {item.fidelity}] {item.content}")


def render_markdown(agent: Any, year: float | None = None) -> str:
    """Markdown text of one agent's memory (see ``export_markdown``)."""
    engine = agent.engine
    lines = [f"# Memories of agent {agent.agent_id}", "",
             f"Engine: {engine.variant}; decay_rate {engine.decay_rate}, "
             f"window {engine.window_size},"
             f" top-k {engine.top_k_significant} events + {engine.top_k_insights} insights, "
             f"min score {engine.min_score}."
             + ("" if year is None else f" Scores at year {year:g}."), "",
             "## Episodic memory (by year)", ""]
    events = sorted((m for m in engine.items() if m.kind != "insight"),
                    key=lambda m: (m.year, m.id))
    working_ids = {m.id for m in engine.working()}
    current = None
    for item in events:
        if item.year != current:
            current = item.year
            lines += ["", f"### Year {item.year:g}"]
        tag = " (working memory)" if item.id in working_ids else ""
        lines.append(_item_line(item, engine, year) + tag)
    if not events:
        lines.append("(nothing remembered)")
    lines += ["", "## Insights", ""]
    insights = sorted(engine.insights(), key=lambda m: (m.year, m.id)) if hasattr(
        engine, "insights") else []
    lines += [_item_line(m, engine, year) for m in insights] or ["(none)"]
    lines += ["", "## Semantic memory", ""]
    semantic = getattr(agent, "semantic", None)
    if semantic is None:
        lines.append("(no knowledge graph)")
    else:
        learned = semantic.learned_facts()
        lines += [f"- {f['source'].replace('_', ' ')} {f['relation'].replace('_', ' ')} "
                  f"{f['target'].replace('_', ' ')} (year {f['year']:g}; evidence {f['evidence']})"
                  for f in learned] or ["(no facts learned from experience yet)"]
    lines += ["", "## Procedural memory (heuristics)", ""]
    procedural = getattr(agent, "procedural", None)
    heur = procedural.heuristics() if procedural is not None else []
    lines += [f"- {h.id} (since year {h.created_year:g}, used {h.use_count}x): {h.describe()}"
              for h in heur] or ["(none)"]
    lines += ["", "## Metacognitive record (strategies and outcomes)", ""]
    meta = getattr(agent, "metacognition", None)
    rows = meta.strategies() if meta is not None else []
    if rows:
        lines += ["| action | chosen | executed | spent $ | evaluated | paid off | floods | "
                  "damage $ | payout $ | damage avoided $ |", "|" + "---|" * 10]
        lines += [f"| {r.action} | {r.chosen} | {r.executed} | {r.spent_usd:,.0f} | {r.evaluated}"
                  f" | {r.paid_off} | {r.floods_while_used} | {r.damage_usd:,.0f} | "
                  f"{r.payout_usd:,.0f} | {r.damage_avoided_usd:,.0f} |" for r in rows]
    else:
        lines.append("(no decisions recorded)")
    return "\n".join(lines) + "\n"


def export_markdown(agent: Any, path: str | Path, year: float | None = None) -> Path:
    """Write an agent's memory as Markdown (atomically: temp file then rename).

    Args:
        agent: An object with ``agent_id`` and ``engine`` and optionally ``semantic``,
            ``procedural`` and ``metacognition`` (e.g. ``HouseholdMemory``).
        path: Target file; its directory is created.
        year: When given, scores at this year are shown.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render_markdown(agent, year))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
