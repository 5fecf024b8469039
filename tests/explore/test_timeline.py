"""A household's timeline joins the agent table, the audit, memories, prompts, reflections."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.explore.run_view import load_view
from governed_broker.explore.timeline import FROM_AUDIT, FROM_CALL_LOG, household_timeline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_every_year_of_an_llm_household_is_joined() -> None:
    view = load_view(FIXTURES / "embedded_llm_run", live=False)
    entries = household_timeline(view, 2)
    assert [e.year for e in entries] == [1, 2, 3, 4]
    last = entries[-1]
    assert last.row["agent_id"] == 2 and last.decision["agent_id"] == 2
    attempt = last.attempts[0]
    assert attempt.messages_source == FROM_CALL_LOG
    assert [m["role"] for m in attempt.messages] == ["system", "user"]
    assert attempt.raw == last.decision["attempts"][0]["raw"]
    assert [r["id"] for r in attempt.rules] == [
        r["id"] for r in last.decision["attempts"][0]["rules"]]
    shown = [m.id for m in last.memories]
    assert shown == last.decision["memory_ids"]
    assert all(m.memory is not None and m.memory.content in attempt.messages[1]["content"]
               or m.memory.kind == "insight" for m in last.memories)
    assert last.reflection["agent_id"] == 2 and last.reflection["year"] == 4


def test_retries_show_their_feedback_and_missing_prompts_are_said() -> None:
    view = load_view(FIXTURES / "scripted_broker_run", live=False)
    entry = next(e for e in household_timeline(view, 9) if e.year == 2)
    assert {f["id"] for f in entry.rules_fired} == {"already_elevated", "cannot_afford"}
    first, second = entry.attempts[:2]
    assert {r["id"] for r in first.fired} == {"already_elevated", "cannot_afford"}
    assert first.messages is None and second.messages is None  # no call log kept
    assert entry.memories == []  # memory engine none
    assert second.feedback is None


def test_prompts_kept_in_the_audit_are_used_and_retry_feedback_read(tmp_path) -> None:
    from governed_broker.config import load_experiment
    from governed_broker.runner import run_experiment

    root = Path(__file__).resolve().parents[2]
    config = load_experiment(root / "experiments" / "baseline.yaml", [
        "population.size=10", "years=1", "decision.maker=llm", "outputs.plots=false",
        f"llm={{backend: scripted, script: {FIXTURES / 'scripted_governance.yaml'}, "
        f"model: governance-paths, cache: {{mode: 'off'}}}}",
        "governance.audit.prompts=true"])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    view = load_view(out, live=False)
    retried = next(d for d in view.decisions.values() if d["retries_by_kind"]["governance"])
    entry = household_timeline(view, retried["agent_id"])[0]
    assert entry.attempts[0].messages_source == FROM_CALL_LOG
    reask = next(a for a in entry.attempts if a.kind == "governance")
    assert reask.feedback and retried["rules_fired"][0]["id"] in reask.feedback
    (out / "llm_calls.sqlite").unlink()  # without the call log, the audit's prompt is shown
    entry = household_timeline(load_view(out, live=False), retried["agent_id"])[0]
    assert entry.attempts[0].messages_source == FROM_AUDIT
    assert entry.attempts[0].messages == retried["prompt"]
    assert entry.attempts[1].messages is None  # a re-ask's messages are only in the call log


def test_an_unknown_household_is_an_error() -> None:
    view = load_view(FIXTURES / "baseline_run", live=False)
    with pytest.raises(KeyError, match="household 999"):
        household_timeline(view, 999)
    assert household_timeline(view, 1)[0].decision is None  # baseline: no audit
