"""Patience with servers: a run rides out a server outage; past its patience it stops resumable.

The end-to-end test: the Ollama-API test server goes away for ``OUTAGE_S`` in the middle of a
governed LLM run and comes back on the same port; the run completes with every decision and
the same CSVs as a run that saw no outage, and its audit and call log say how long it waited.
The outage lasts several back-offs, which is all this test must show; that a call keeps
retrying for as long as its patience allows, whatever the outage's length (up to 300 s here),
is shown on a fake clock below without waiting for it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import pytest
from ollama_test_server import OllamaTestServer

from governed_broker.llm.base import LLMTransportError
from governed_broker.llm.reliability import RetryPolicy, RetryReport, call_with_retries
from governed_broker.runner import partial_dir, run_experiment

LABELS = ("VL", "L", "M", "H", "VH")
#: How long the server is away (seconds): several back-offs of 0.5, 1, 2 and 4 s.
OUTAGE_S = 8
OUTPUTS = ("agents_yearly.csv", "model_yearly.csv")


def decision_completion(request: dict) -> dict:
    """A test double of a model: a well-formed decision reply that is a function of the seed."""
    seed = int(request.get("seed", 0))
    content = json.dumps({
        "threat_appraisal": {"label": LABELS[seed % 5], "reason": "flood risk"},
        "coping_appraisal": {"label": LABELS[(seed // 5) % 5], "reason": "my means"},
        "decision": ("do_nothing", "buy_insurance")[seed % 2],
        "reason": f"seed {seed}",
    })
    return {"choices": [{"message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 30}}


def _settings(host: str) -> list[str]:
    llm = {"backend": "ollama", "model": "qwen2.5-coder:0.5b", "hosts": [host],
           "cache": {"mode": "off"}, "patience_s": 120, "backoff_s": 0.5, "backoff_max_s": 4,
           "timeout_s": 10}
    return ["years=3", "population.size=6", "decision.maker=llm", f"llm={json.dumps(llm)}"]


def _decisions(run) -> list[tuple]:
    records = [json.loads(line) for line in (run / "decisions.jsonl").read_text().splitlines()]
    return [(r["year"], r["agent_id"], r["status"], r["executed_action"]) for r in records]


def test_an_outage_is_ridden_out(experiments, tmp_path) -> None:
    with OllamaTestServer(decision_completion) as server:
        reference = run_experiment(experiments.config(_settings(server.host)),
                                   tmp_path / "reference", progress=False).out_dir
    server = OllamaTestServer(decision_completion).__enter__()
    port = int(server.host.rsplit(":", 1)[1])
    restarted: list[OllamaTestServer] = []

    def outage() -> None:
        while len(server.requests) < 8:  # mid-run: some decisions of year 1 or 2 are made
            time.sleep(0.01)
        server.__exit__(None, None, None)
        time.sleep(OUTAGE_S)
        restarted.append(OllamaTestServer(decision_completion, port=port).__enter__())

    thread = threading.Thread(target=outage, daemon=True)
    thread.start()
    try:
        out = run_experiment(experiments.config(_settings(server.host)), tmp_path / "run",
                             progress=False).out_dir
    finally:
        thread.join(timeout=OUTAGE_S + 30)
        for s in restarted:
            s.__exit__(None, None, None)
    assert restarted and restarted[0].requests, "the run did not wait for the restarted server"
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert _decisions(out) == _decisions(reference)
    records = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    waits = [a["llm"]["transport_wait_s"] for r in records for a in r["attempts"]]
    assert max(waits) >= OUTAGE_S - 2  # the audit says how long the decision waited
    assert sum(r["retries_by_kind"]["transport"] for r in records) >= 3
    calls = sqlite3.connect(out / "llm_calls.sqlite")
    waited, retried = calls.execute(
        "SELECT max(transport_wait_s), sum(transport_retries) FROM calls").fetchone()
    calls.close()
    assert waited >= OUTAGE_S - 2 and retried >= 3  # the call log says so too


def _stop_after(server: OllamaTestServer, requests: int) -> threading.Thread:
    def stop() -> None:
        while len(server.requests) < requests:
            time.sleep(0.01)
        server.__exit__(None, None, None)

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    return thread


def test_past_the_patience_the_run_stops_resumable(experiments, tmp_path) -> None:
    server = OllamaTestServer(decision_completion).__enter__()
    settings = _settings(server.host)
    settings[-1] = settings[-1].replace('"patience_s": 120', '"patience_s": 1')
    _stop_after(server, 8)  # gone for good in year 2
    with pytest.raises(LLMTransportError, match="run the same command again to resume"):
        run_experiment(experiments.config(settings), tmp_path / "run", progress=False)
    assert partial_dir(tmp_path / "run").is_dir()


class FakeClock:
    """A monotonic clock that advances only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_patience_keeps_retrying_beyond_the_retries_until_it_runs_out() -> None:
    clock = FakeClock()
    policy = RetryPolicy(retries=2, backoff_s=1, backoff_max_s=30, patience_s=300)
    failures = {"n": 0}

    async def attempt():
        failures["n"] += 1
        raise LLMTransportError("connection refused")

    with pytest.raises(LLMTransportError, match=r"over \d+ s \(llm.patience_s = 300\)"):
        asyncio.run(call_with_retries(attempt, policy, seed=3, what="srv", clock=clock,
                                      sleep=clock.sleep))
    assert failures["n"] > 3  # more than the guaranteed retries
    assert sum(clock.sleeps[:-1]) <= 300 and max(clock.sleeps) <= 30


def test_a_recovering_server_reports_retries_and_wait() -> None:
    clock = FakeClock()
    policy = RetryPolicy(retries=0, backoff_s=2, backoff_max_s=8, patience_s=100)
    calls = {"n": 0}

    async def attempt():
        calls["n"] += 1
        if calls["n"] <= 5:
            raise LLMTransportError("503")
        return "ok"

    report = RetryReport()
    assert asyncio.run(call_with_retries(attempt, policy, seed=1, what="srv", report=report,
                                         clock=clock, sleep=clock.sleep)) == "ok"
    assert report.retries == 5 and report.wait_s == pytest.approx(sum(clock.sleeps))


def test_without_patience_the_retries_bound_the_attempts() -> None:
    clock = FakeClock()
    calls = {"n": 0}

    async def attempt():
        calls["n"] += 1
        raise LLMTransportError("down")

    with pytest.raises(LLMTransportError, match="giving up after 4 attempt"):
        asyncio.run(call_with_retries(attempt, RetryPolicy(retries=3), seed=1, what="srv",
                                      clock=clock, sleep=clock.sleep))
    assert calls["n"] == 4
