"""The governed broker's loop, audit, seeds and concurrency with a scripted backend."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass

import pytest
from broker_helpers import (
    FIRST,
    FORMAT_RETRY,
    GOV_RETRY,
    make_broker,
    make_situation,
    read_jsonl,
    reply,
)

from governed_broker.config.base import ConfigError
from governed_broker.contracts.decision import DECISION_STATUSES, DecisionMaker
from governed_broker.llm.base import LLMBackend, LLMRequest, LLMResponse
from governed_broker.seeding import child_seed


def test_broker_is_a_decision_maker(close_brokers):
    broker, _ = make_broker([(FIRST, reply("M", "M", "buy_insurance"))])
    close_brokers.append(broker)
    assert isinstance(broker, DecisionMaker)
    assert broker.name == "llm:scripted/scripted:test"


def test_coherent_proposal_is_approved_first_time(close_brokers):
    broker, backend = make_broker([(FIRST, reply("H", "H", "elevate_house", "we can afford it"))])
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert (d.status, d.action, d.proposed_action, d.retries) == (
        "approved", "elevate_house", "elevate_house", 0)
    assert (d.threat_label, d.coping_label, d.reason) == ("H", "H", "we can afford it")
    assert d.decision_maker == "llm:scripted/scripted:test"
    assert len(backend.calls) == 1
    assert d.status in DECISION_STATUSES


def test_retry_conversation_keeps_prompt_prefix_and_rejected_reply(close_brokers):
    first = reply("VH", "H", "do_nothing")
    broker, backend = make_broker([(FIRST, first), (GOV_RETRY, reply("VH", "H", "relocate"))])
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert d.status == "retry_approved" and d.action == "relocate"
    assert d.proposed_action == "do_nothing"
    retry = backend.calls[1].messages
    assert retry[:2] == backend.calls[0].messages  # the cacheable prefix is unchanged
    assert retry[2]["role"] == "assistant" and '"do_nothing"' in retry[2]["content"]
    assert "very_high_threat_inaction" in retry[3]["content"]
    assert "very high (VH)" in retry[3]["content"]


def test_at_most_max_reports_rules_explained_per_retry(close_brokers):
    # A renter who cannot afford to elevate, with low threat: three ERROR rules fire.
    situation = make_situation(
        tenure="renter", affordable={"do_nothing": True, "buy_insurance": True,
                                     "elevate_house": False, "relocate": True})
    proposal = reply("L", "M", "elevate_house")
    broker, backend = make_broker(
        [(FIRST, proposal), (GOV_RETRY, reply("L", "M", "buy_insurance"))],
        max_reports_per_retry=2)
    close_brokers.append(broker)
    (d,) = broker.decide([situation])
    feedback = backend.calls[1].messages[-1]["content"]
    assert feedback.count("- [") == 2
    fired = {f["id"] for f in d.audit["rules_fired"]}
    assert fired == {"renter_cannot_elevate", "cannot_afford", "low_threat_elevation"}
    assert d.action == "buy_insurance" and d.status == "retry_approved"


def test_warning_never_blocks_and_is_recorded(close_brokers):
    proposal = reply("H", "VL", "do_nothing")  # fatalistic inaction: WARNING in strict
    broker, backend = make_broker([(FIRST, proposal)])
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert (d.status, d.action, len(backend.calls)) == ("approved", "do_nothing", 1)
    assert d.audit["rules_fired"] == [
        {"attempt": 0, "id": "fatalistic_inaction", "severity": "WARNING"}]


def test_parse_failure_budget_gives_parse_failed_with_default(close_brokers):
    broker, backend = make_broker([(r".", "I think we should buy insurance.")],
                                  max_parse_retries=2)
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert len(backend.calls) == 3
    assert (d.status, d.action, d.proposed_action) == ("parse_failed", "do_nothing", None)
    assert (d.threat_label, d.coping_label) == (None, None)
    assert d.audit["retries_by_kind"] == {"format": 2, "governance": 0, "transport": 0}
    assert all(a["parse_error"] for a in d.audit["attempts"])
    assert "could not be read" in backend.calls[1].messages[-1]["content"]
    assert d.audit["fallback"] is True


def test_format_retry_then_valid_reply_is_approved(close_brokers):
    broker, backend = make_broker(
        [(FIRST, "```json\n{\"decision\": \"buy_insurance\"}\n```"),
         (FORMAT_RETRY, reply("M", "M", "buy_insurance"))])
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert (d.status, d.action, d.retries) == ("approved", "buy_insurance", 1)
    first = d.audit["attempts"][0]
    assert first["repairs"] == ["removed a markdown code fence"]
    assert "threat_appraisal" in first["parse_error"]
    assert "missing field" in backend.calls[1].messages[-1]["content"]


def test_repairs_are_recorded_in_the_audit(close_brokers):
    messy = ('Here is my answer:\n```json\n{"threat_appraisal": "high", "coping_appraisal": '
             '{"label": "medium", "reason": "ok"}, "decision": "Buy Insurance", '
             '"reason": "cheap",}\n```')
    broker, _ = make_broker([(FIRST, messy)])
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert (d.status, d.action, d.threat_label, d.coping_label) == (
        "approved", "buy_insurance", "H", "M")
    repairs = d.audit["attempts"][0]["repairs"]
    assert "removed a markdown code fence" in repairs
    assert "removed trailing comma(s)" in repairs
    assert any("'Buy Insurance' read as buy_insurance" in r for r in repairs)
    assert any("read as M" in r for r in repairs)


def test_infeasible_action_is_never_returned_even_without_rules(close_brokers):
    renter = make_situation(tenure="renter")
    poor = make_situation(agent_id=8, affordable={"do_nothing": True, "buy_insurance": False,
                                                  "elevate_house": True, "relocate": True})
    broker, backend = make_broker(
        [(r"You rent", reply("H", "H", "elevate_house")),
         (FIRST, reply("H", "H", "buy_insurance"))], profile="disabled")
    close_brokers.append(broker)
    d_renter, d_poor = broker.decide([renter, poor])
    for d in (d_renter, d_poor):
        assert (d.status, d.action) == ("rejected", "do_nothing")
        assert d.audit["backstop"] and d.audit["fallback"]
        assert d.audit["rules_fired"] == []
    assert d_renter.proposed_action == "elevate_house"
    assert "not among" in d_renter.reason and "savings" in d_poor.reason
    assert len(backend.calls) == 2  # no re-asks in the disabled profile


def test_unknown_action_is_a_format_error_not_a_guess(close_brokers):
    broker, backend = make_broker(
        [(FIRST, reply("M", "M", "build_levee")), (FORMAT_RETRY, reply("M", "M", "do_nothing"))])
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert d.audit["attempts"][0]["parse_error"].startswith("decision 'build_levee'")
    assert d.action == "do_nothing" and d.audit["retries_by_kind"]["format"] == 1


def test_request_seeds_derive_from_experiment_agent_year_attempt(close_brokers):
    broker, backend = make_broker(
        [(FIRST, reply("H", "M", "do_nothing")), (GOV_RETRY, reply("H", "M", "buy_insurance"))],
        seed=99)
    close_brokers.append(broker)
    broker.decide([make_situation(agent_id=5, year=4)])
    assert [c.seed for c in backend.calls] == [
        child_seed(99, "decision", 5, 4, 0), child_seed(99, "decision", 5, 4, 1)]
    assert all(c.tag == "decision" and c.json_schema for c in backend.calls)
    assert backend.calls[0].json_schema["properties"]["decision"]["enum"] == [
        "do_nothing", "buy_insurance", "elevate_house", "relocate"]


def test_situations_and_memories_are_not_mutated(close_brokers):
    @dataclass
    class Memory:
        id: str = "m1"
        year: float = 1.0
        content: str = "The flood of year 1 flooded my basement."
        fidelity: str = "gist"
        kind: str = "event"
        importance: float = 1.0
        access_count: int = 0

        def text(self, fidelity=None):
            return self.content

    s = make_situation(memories=(Memory(),))
    before = copy.deepcopy(s)
    broker, _ = make_broker([(FIRST, reply("H", "M", "buy_insurance"))])
    close_brokers.append(broker)
    (d,) = broker.decide([s])
    assert s == before
    assert d.audit["memory_ids"] == ["m1"]
    assert d.audit["memory_fidelity"] == ["gist"]  # the fidelity the prompt showed it at


class SlowBackend(LLMBackend):
    """Replies after a delay that shrinks with the agent id, so completion order is reversed.

    Records the largest number of requests in flight.
    """

    kind, model_id, supports_schema, max_concurrency = "slow", "slow:test", True, 3

    def __init__(self):
        self.in_flight = self.peak = 0

    async def achat(self, request: LLMRequest) -> LLMResponse:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        agent = int(request.messages[1]["content"].split("income is $")[1].split(",")[0])
        await asyncio.sleep(0.002 * (20 - agent))
        self.in_flight -= 1
        action = "buy_insurance" if agent % 2 else "do_nothing"
        text = '{"threat_appraisal": {"label": "M", "reason": "r"}, "coping_appraisal": ' \
               f'{{"label": "M", "reason": "r"}}, "decision": "{action}", "reason": "{agent}"}}'
        return LLMResponse(text=text, backend=self.kind, model=self.model_id)


def test_concurrent_decisions_are_bounded_and_in_input_order(close_brokers):
    broker, _ = make_broker([])
    backend = SlowBackend()
    broker.backend = backend
    close_brokers.append(broker)
    situations = [make_situation(agent_id=i, income_usd=i * 1000.0) for i in range(1, 13)]
    decisions = broker.decide(situations)
    assert [d.agent_id for d in decisions] == list(range(1, 13))
    assert [d.reason for d in decisions] == [str(i) for i in range(1, 13)]
    assert 1 < backend.peak <= 3


def test_decisions_jsonl_streams_one_record_per_decision(tmp_path):
    broker, _ = make_broker(
        [(FIRST, reply("H", "M", "do_nothing")), (GOV_RETRY, reply("H", "M", "buy_insurance"))],
        tmp_path=tmp_path, audit={"prompts": True})
    broker.decide([make_situation(agent_id=1), make_situation(agent_id=2)])
    broker.decide([make_situation(agent_id=1, year=4)])
    broker.close()
    records = read_jsonl(tmp_path / "decisions.jsonl")
    assert [(r["year"], r["agent_id"]) for r in records] == [(3, 1), (3, 2), (4, 1)]
    r = records[0]
    for key in ("run_id", "context_hash", "memory_ids", "state_before", "proposed_action",
                "executed_action", "status", "retries_by_kind", "rules_fired", "attempts",
                "prompt_tokens", "completion_tokens", "latency_s", "cache_hits", "threat_label",
                "coping_label", "prompt"):
        assert key in r, key
    assert r["run_id"] == "test-run" and r["prompt"][0]["role"] == "system"
    assert (r["proposed_action"], r["executed_action"], r["status"]) == (
        "do_nothing", "buy_insurance", "retry_approved")


def test_prompt_not_in_audit_by_default(close_brokers):
    broker, _ = make_broker([(FIRST, reply("M", "M", "do_nothing"))])
    close_brokers.append(broker)
    (d,) = broker.decide([make_situation()])
    assert "prompt" not in d.audit and len(d.audit["context_hash"]) == 64


def test_same_inputs_give_identical_audit_apart_from_timings(close_brokers):
    def run():
        broker, _ = make_broker(
            [(FIRST, reply("H", "M", "do_nothing")), (GOV_RETRY, reply("H", "M", "relocate"))])
        close_brokers.append(broker)
        audits = [dict(d.audit) for d in broker.decide(
            [make_situation(agent_id=i) for i in range(4)])]
        for a in audits:
            a.pop("latency_s")
            for att in a["attempts"]:
                att.pop("latency_s")
        return audits

    assert run() == run()


def test_fallback_action_must_be_allowed(close_brokers):
    broker, _ = make_broker([(FIRST, reply("M", "M", "do_nothing"))],
                            fallback_action="buy_insurance")
    close_brokers.append(broker)
    with pytest.raises(ValueError, match="fallback action 'buy_insurance'"):
        broker.decide([make_situation(allowed_actions=("do_nothing", "relocate"))])


def test_unknown_fallback_action_is_an_error():
    with pytest.raises(ConfigError, match="not an action"):
        make_broker([], fallback_action="swim")


def test_backend_errors_propagate(close_brokers):
    broker, _ = make_broker([(r"no such prompt", "x")])
    close_brokers.append(broker)
    with pytest.raises(Exception, match="no rule matches"):
        broker.decide([make_situation()])
