"""The progress line.

Per unit of a phase, LLM calls and their speed, an ETA recalibrated from what the job measured;
one line rewritten on a terminal, plain lines in a log.
"""

from __future__ import annotations

import io

import pytest

from governed_broker import progress
from governed_broker.progress import Progress, duration, kind_of


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_plain_lines_per_phase_end_and_none_in_between_too_often() -> None:
    log = io.StringIO()
    meter = Progress("demo", stream=log, min_interval_s=3600)
    meter.plan("decisions", 12, calls_per_unit=2.0)
    with progress.reporting(meter):
        meter.step("year", 1, 2)
        progress.phase("decisions", 6)
        for _ in range(6):
            progress.llm_call("decision", 10.0, cached=False)
            progress.advance()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines[-1].startswith("demo  year 1/2  decisions 6/6  | 6 LLM calls, 10.0 s/call")
    # measured 1 call per decision against the plan's 2: (6 + 2 x 3) / (6 + 3) = 1.33 calls per
    # decision for the 6 decisions left -> 8 calls, 80 s
    assert lines[-1].endswith("about 8 calls left, ETA 1m 20s")
    # said once, after 3 decisions: (3 + 2 x 3) / (3 + 3) = 1.5
    assert any("measured here 10.0 s per LLM call, 1.50 calls per decision" in x for x in lines)
    assert len(lines) <= 5  # step, phase start, recalibration, phase end (no flood)


def test_before_enough_units_the_plan_counts_calls_per_unit() -> None:
    meter = Progress("demo", stream=io.StringIO())
    meter.plan("decisions", 10, calls_per_unit=1.8)
    meter.plan("reflections", 4)
    meter.phase("decisions", 2)
    meter.llm_call("decision", 5.0, cached=False)
    meter.llm_call("decision", 7.0, cached=False)
    # 2 decisions in this phase, 8 planned after it, at 1.8 calls; 4 reflections at 1 (no
    # decision done yet: its 2 calls are in flight and count towards the rate)
    assert meter.calls_left() == pytest.approx(10 * (2 + 1.8 * 3) / 3 + 4)
    assert meter.seconds_per_call() == 6.0


def test_a_terminal_line_is_rewritten_in_place_and_ended_on_close() -> None:
    screen = Terminal()
    meter = Progress("validate demo", stream=screen, totals=True)
    meter.plan("decisions", 16)
    with progress.reporting(meter):
        progress.phase("decisions", 8)
        progress.llm_call("decision", 2.0, cached=True)
        progress.advance()
    text = screen.getvalue()
    assert text.count("\r") >= 2 and text.endswith("\n")
    assert "decisions 1/8 (1/16 in all)" in text and "1 cached" in text
    assert progress.current() is None


def test_without_llm_calls_the_eta_comes_from_the_finished_steps() -> None:
    meter = Progress("baseline", stream=io.StringIO())
    meter.step("year", 1, 10)
    meter.started -= 20  # 20 s for 2 finished years
    meter.step("year", 3, 10)
    assert meter.line().endswith("ETA 1m 20s")
    resumed = Progress("baseline", stream=io.StringIO())  # years 1-4 were done before
    resumed.step("year", 5, 10)
    assert resumed.line().endswith("elapsed")  # nothing measured in this process yet


def test_nothing_is_reported_without_an_open_progress() -> None:
    progress.phase("decisions", 3)
    progress.advance()
    progress.llm_call("decision", 1.0, cached=False)
    assert progress.current() is None


def test_kinds_and_durations() -> None:
    assert [kind_of(t) for t in ("decision", "rag_mqe", "reflection", "institution:insurer",
                                 "x")] == ["decisions", "decisions", "reflections",
                                           "institutions", "other"]
    assert [duration(s) for s in (4.4, 304, 7980)] == ["4s", "5m 04s", "2h 13m"]


def test_a_resumed_job_times_the_calls_the_model_answered_not_the_cached_ones() -> None:
    meter = Progress("validate demo", stream=io.StringIO(), totals=True)
    meter.plan("decisions", 100)
    with progress.reporting(meter):
        progress.phase("decisions", 10)
        for _ in range(10):  # the replies an earlier, interrupted run made
            progress.llm_call("decision", 0.01, cached=True)
            progress.advance()
        assert "s/call" not in meter.line() and "ETA" not in meter.line()
        progress.phase("decisions", 10)
        progress.llm_call("decision", 6.0, cached=False)
        progress.advance()
    line = meter.line()
    # 89 decisions left at 1 call each (11 calls for 11 decisions), all at the model's 6 s
    assert "11 LLM calls, 10 cached, 6.0 s/call" in line
    assert line.endswith("about 89 calls left, ETA 8m 54s")
