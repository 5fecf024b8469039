"""Property tests: whatever the model says, the broker's outcome is consistent and feasible."""

from __future__ import annotations

import asyncio
import json

from broker_helpers import OWNER_ACTIONS, make_broker, make_situation, with_backend
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.llm.base import LLMBackend, LLMRequest, LLMResponse

LABELS = ["VL", "L", "M", "H", "VH"]
reply_st = st.one_of(
    st.builds(
        lambda tp, cp, action: json.dumps({
            "threat_appraisal": {"label": tp, "reason": "t"},
            "coping_appraisal": {"label": cp, "reason": "c"}, "decision": action,
            "reason": "r"}),
        st.sampled_from(LABELS), st.sampled_from(LABELS), st.sampled_from(OWNER_ACTIONS)),
    st.sampled_from(["", "no idea", '{"decision": "relocate"}', "```json\n{]\n```"]),
)


class ListBackend(LLMBackend):
    """Replies from a list, in order (the last one repeats)."""

    kind, model_id, supports_schema = "list", "list:test", False

    def __init__(self, replies):
        self.replies, self.n = replies, 0

    async def achat(self, request: LLMRequest) -> LLMResponse:
        text = self.replies[min(self.n, len(self.replies) - 1)]
        self.n += 1
        return LLMResponse(text=text, backend=self.kind, model=self.model_id)


@settings(max_examples=150, deadline=None)
@given(
    replies=st.lists(reply_st, min_size=1, max_size=8),
    profile=st.sampled_from(["strict", "relaxed", "disabled"]),
    tenure=st.sampled_from(["owner", "renter"]),
    elevated=st.booleans(),
    affordable=st.lists(st.booleans(), min_size=3, max_size=3),
    max_retries=st.integers(0, 3),
    max_parse_retries=st.integers(0, 2),
)
def test_outcome_is_always_consistent(replies, profile, tenure, elevated, affordable,
                                      max_retries, max_parse_retries):
    broker, _ = make_broker([], profile=profile, max_retries=max_retries,
                            max_parse_retries=max_parse_retries)
    backend = ListBackend(replies)
    with_backend(broker, backend)
    allowed = [a for a in OWNER_ACTIONS
               if not (a == "elevate_house" and (tenure == "renter" or elevated))]
    afford = dict(zip(OWNER_ACTIONS, [True, *affordable], strict=True))
    s = make_situation(tenure=tenure, elevated=elevated, allowed_actions=tuple(allowed),
                       affordable=afford)
    (d,) = asyncio.run(broker.adecide([s]))
    audit = d.audit
    assert d.action in s.allowed_actions and s.affordable[d.action]
    assert d.status in ("approved", "retry_approved", "unresolved", "rejected", "parse_failed")
    kinds = audit["retries_by_kind"]
    assert kinds["format"] <= max_parse_retries and kinds["governance"] <= max_retries
    assert d.retries == kinds["format"] + kinds["governance"] == len(audit["attempts"]) - 1
    assert backend.n == len(audit["attempts"])
    if d.status in ("approved", "retry_approved"):
        assert d.action == audit["final_proposal"]
        assert not [r for r in audit["attempts"][-1]["rules"]
                    if r["fired"] and r["severity"] == "ERROR"]
    elif d.status == "unresolved":  # a rule declaring on_exhausted: keep is still violated
        assert d.action == audit["final_proposal"] and not audit["fallback"]
        assert audit["unresolved_rules"] and kinds["governance"] == max_retries
    else:
        assert d.action == "do_nothing" and audit["fallback"]
    if d.status == "approved":
        assert kinds["governance"] == 0
    if d.status == "retry_approved":
        assert kinds["governance"] > 0
    if profile == "disabled":
        assert kinds["governance"] == 0 and audit["rules_fired"] == []
    if d.status == "parse_failed":
        assert audit["attempts"][-1]["parse_error"]
