"""The distribution readout (llm.readout) on a toy model: no language model needed.

Each pitfall of reading choice distributions from token probabilities has a test: the grammar
(renormalising over the allowed tokens), values of several tokens (chained conditionals over
every token path), the closing quote (never scored), the conditional path (a later field is
read after the path's own text: the greedy reply, or each of several sampled accounts), and a
source that reads elsewhere than the path.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from readout_support import (
    ACTIONS,
    AFTER_V,
    DECISION_EXPECTED,
    RULES,
    THREAT_EXPECTED,
    THREAT_ROOT,
    Tokenizer,
    ToySource,
    reply,
    schema,
)

from governed_broker.llm.base import LLMRequest
from governed_broker.llm.readout import (
    MAX_REDRAWS,
    Branch,
    Node,
    ReadoutError,
    ReadoutSettings,
    Token,
    enum_fields,
    path_schema,
    read_distributions,
    string_spans,
)


def request(actions=ACTIONS, text: str = "household A") -> LLMRequest:
    return LLMRequest.of([{"role": "user", "content": text}], json_schema=schema(actions),
                         temperature=0.7, top_k=40, max_tokens=256)


def close(got: dict[str, float], expected: dict[str, float]) -> None:
    assert set(got) >= set(expected)
    for value, p in got.items():
        assert p == pytest.approx(expected.get(value, 0.0), abs=1e-12), value


def test_threat_renormalised_over_the_allowed_tokens_and_chained_over_multi_token_labels():
    source = ToySource(reply())
    threat = read_distributions(source, request()).field("threat_appraisal.label")
    close(threat.distribution(), THREAT_EXPECTED)
    assert sum(threat.probabilities) == pytest.approx(1.0)
    assert threat.forbidden_mass == pytest.approx(0.2)
    assert {c.token.shown() for c in threat.root.forbidden} == {"|", "None"}
    assert threat.unseen_mass == pytest.approx(0.0)
    # one pass at the label, one after "V" (VL or VH); none after a settled label
    assert threat.passes == 2
    assert source.asked[:2] == ['{"threat_appraisal": {"label": "',
                                '{"threat_appraisal": {"label": "V']


def test_a_single_token_readout_would_differ():
    """The test above can tell the walk from reading first tokens only.

    taking the first token's renormalised probability as the label's would give VL 0.25 and no VH.
    """
    allowed = {k: v for k, v in THREAT_ROOT.items() if k in ("VL", "L", "M", "H")}
    naive_vl = allowed["VL"] / sum(allowed.values())
    assert abs(naive_vl - THREAT_EXPECTED["VL"]) > 0.05


def test_multi_token_actions_sharing_their_first_tokens():
    source = ToySource(reply())
    decision = read_distributions(source, request()).field("decision")
    close(decision.distribution(), DECISION_EXPECTED)
    assert decision.values == tuple(ACTIONS)
    assert decision.forbidden_mass == pytest.approx(0.05)
    # the walk went below "ele" and "el" (both lead to elevate...), and below "elevate_"
    asked = [a.split('"decision": "')[-1] for a in source.asked if '"decision"' in a]
    assert asked == ["", "ele", "elevate", "elevate_", "el", "elevate", "elevate_"]


def test_a_token_shared_by_one_allowed_action_settles_it():
    """A renter may not elevate-and-insure: "ele" then means elevate_house, read no further."""
    allowed = ["do_nothing", "buy_insurance", "elevate_house", "relocate"]
    source = ToySource(reply())
    decision = read_distributions(source, request(allowed)).field("decision")
    close(decision.distribution(), {"do_nothing": 0.40 / 0.95, "buy_insurance": 0.20 / 0.95,
                                    "elevate_house": 0.30 / 0.95, "relocate": 0.05 / 0.95})
    assert decision.passes == 1


def test_the_closing_quote_is_not_scored():
    """What the model puts on the quote after a settled label changes nothing.

    Here it prefers the format's "|"; that position is never read.
    """
    quote_rules = [(p, {"|": 0.95, '"': 0.05} if "VL|VH" in p else q) for p, q in RULES]
    first = read_distributions(ToySource(reply()), request()).field("threat_appraisal.label")
    second_source = ToySource(reply(), quote_rules)
    second = read_distributions(second_source, request()).field("threat_appraisal.label")
    assert first.probabilities == second.probabilities
    assert not any(a.endswith(('"VL', '"L', '"M', '"H', '"VH')) for a in second_source.asked)


def test_the_coping_label_is_read_after_the_greedy_replys_text():
    """The toy's coping label depends on the threat label written before it."""
    after_vh = read_distributions(ToySource(reply()), request())
    after_l = read_distributions(ToySource(reply(threat="L", coping="L"), _l_first()), request())
    close(after_vh.field("coping_appraisal.label").distribution(), {"H": 0.7, "L": 0.3})
    close(after_l.field("coping_appraisal.label").distribution(), {"H": 0.2, "L": 0.8})
    assert after_vh.field("threat_appraisal.label").path_value == "VH"
    assert after_l.field("threat_appraisal.label").path_value == "L"
    assert after_l.path == reply(threat="L", coping="L")


def _l_first():
    """The rules with L the most probable threat label (so that the greedy reply writes it)."""
    return [(p, {"L": 0.5, "V": 0.1} if q is THREAT_ROOT else q) for p, q in RULES]


def test_the_threat_label_is_read_at_its_fixed_prefix_whatever_follows():
    a = read_distributions(ToySource(reply(reason="short")), request())
    b = read_distributions(ToySource(reply(reason="a longer reason with VL in it")), request())
    assert (a.field("threat_appraisal.label").probabilities
            == b.field("threat_appraisal.label").probabilities)
    assert a.path != b.path


def test_the_path_is_greedy_and_stops_after_the_last_field_read():
    source = ToySource(reply())
    read_distributions(source, request())
    sent = source.requests[0]
    assert sent.temperature == 0.0 and sent.top_k is None
    assert sent.json_schema["properties"]["reason"] == {"type": "string", "maxLength": 0}
    original = schema()
    assert sent.json_schema["properties"]["decision"] == original["properties"]["decision"]
    assert (sent.json_schema["properties"]["threat_appraisal"]
            == original["properties"]["threat_appraisal"])


def test_a_source_reading_elsewhere_than_the_path_is_an_error():
    """The greedy reply writes the most probable allowed token.

    a reply that does not (as a server that reads the position after other text would give) stops
    the readout.
    """
    with pytest.raises(ReadoutError, match="does not continue the reply"):
        read_distributions(ToySource(reply(threat="VL")), request())


def test_a_token_that_writes_the_opening_quote_and_the_label():
    """A token may write the quote and the label's first letter together (' "V').

    the field is read from that token's position, over every token that leads to an allowed value.
    """
    tokenizer = Tokenizer(extra=[' "V'])
    rules = [(r'"threat_appraisal": \{"label":$', {' "V': 0.5, ' "': 0.3, ' {"': 0.2}),
             *RULES]
    source = ToySource(reply(), rules, tokenizer)
    threat = read_distributions(source, request()).field("threat_appraisal.label")
    after_v = {"VH": 0.75, "VL": 0.25}
    expected = {k: 0.625 * after_v.get(k, 0.0) + 0.375 * THREAT_EXPECTED[k]
                for k in THREAT_EXPECTED}
    close(threat.distribution(), expected)
    assert threat.root.prefix == "" and threat.forbidden_mass == pytest.approx(0.2)
    assert threat.root.branches[1].child.prefix == ' "'  # below the quote alone


def test_no_allowed_token_among_those_read_is_an_error():
    rules = [(r'"label": "$', {"|": 0.6, "None": 0.4}), *RULES]
    with pytest.raises(ReadoutError, match="no token path among the 20 most probable"):
        read_distributions(ToySource(reply(), rules), request())


def test_a_branch_that_reaches_no_allowed_value_is_left_out_and_reported():
    """After "ele" the toy wants another word ("x".

    elevation, say): that branch reaches no action among the tokens read; its mass goes to the
    others in proportion, and is reported.
    """
    rules = [(r'"decision": "ele$', {"x": 1.0}), *RULES]
    decision = read_distributions(ToySource(reply(), rules), request()).field("decision")
    resolved = 0.40 + 0.20 + 0.05 + 0.05
    close(decision.distribution(), {
        "do_nothing": 0.40 / resolved, "buy_insurance": 0.20 / resolved,
        "elevate_house": 0.05 / resolved * 5.6 / 9,
        "elevate_and_insure": 0.05 / resolved * 3.4 / 9, "relocate": 0.05 / resolved})
    assert decision.unresolved_mass == pytest.approx(0.25 / 0.95)
    assert read_distributions(ToySource(reply()), request()).field(
        "decision").unresolved_mass == 0.0


def test_top_k_limits_what_is_seen_and_reports_the_rest():
    threat = read_distributions(ToySource(reply()), request(),
                        ReadoutSettings(top_k=3)).field("threat_appraisal.label")
    # V, VL and L: H, M, "|" and "None" are beyond the top 3
    assert threat.unseen_mass == pytest.approx(0.35)
    assert threat.distribution()["H"] == threat.distribution()["M"] == 0.0
    assert threat.forbidden_mass == 0.0
    assert sum(threat.probabilities) == pytest.approx(1.0)


def test_unread_share_counts_the_tokens_beyond_the_top_k_and_unresolved_paths():
    def settled(p: float) -> Branch:
        return Branch(Token(b"a"), math.log(p), value="a")

    beyond = Node("", (settled(0.6), settled(0.2)), (), unseen_mass=0.2)
    assert beyond.unread_share() == pytest.approx(0.2)  # 0.2 / (0.8 + 0.2)
    dead_end = Branch(Token(b"b"), math.log(0.04), child=Node("b", (), (), 0.0))
    unresolved = Node("", (settled(0.76), dead_end), (), unseen_mass=0.0)
    assert unresolved.unread_share() == pytest.approx(0.05)  # 0.04 / 0.8


def test_a_reply_cut_before_a_field_is_an_error():
    cut = reply()[:60]
    with pytest.raises(ReadoutError, match="stops before field coping_appraisal.label"):
        read_distributions(ToySource(cut.replace('"L"', '"VH"')), request())


def test_the_runaway_guard():
    with pytest.raises(ReadoutError, match="more than 3 positions"):
        read_distributions(ToySource(reply()), request(), ReadoutSettings(max_passes=3))


def test_a_request_without_schema_or_enum_is_an_error():
    with pytest.raises(ReadoutError, match="reply schema"):
        read_distributions(ToySource(reply()), LLMRequest.of([{"role": "user", "content": "x"}]))
    free = LLMRequest.of([{"role": "user", "content": "x"}],
                         json_schema={"type": "object", "properties": {"a": {"type": "string"}}})
    with pytest.raises(ReadoutError, match="no field with an enum"):
        read_distributions(ToySource(reply()), free)


def test_enum_fields_in_reply_order_and_reason_first_appraisals():
    from governed_broker.cognition.schema import decision_json_schema

    fields = list(enum_fields(decision_json_schema(["a", "b"], ["L", "H"],
                                                   appraisal_order="reason_first")))
    assert fields == [("threat_appraisal.label", ("L", "H")),
                      ("coping_appraisal.label", ("L", "H")), ("decision", ("a", "b"))]
    assert path_schema(schema(), "threat_appraisal.label")["properties"]["decision"] == (
        schema()["properties"]["decision"])  # only strings are emptied


def test_string_spans_of_nested_and_spaced_json():
    text = '{\n  "a": {"b": "x\\"y", "n": [1, "z"]},\n "c" : "é"}'
    spans = string_spans(text)
    assert spans["a.b"].value == 'x"y' and text[spans["a.b"].start - 1] == '"'
    assert spans["a.n.1"].value == "z" and spans["c"].value == "é"
    assert set(string_spans(text[:20])) == set()  # inside the first string
    assert set(string_spans(text[:21])) == {"a.b"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=7, max_size=7),
       st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=3, max_size=3))
def test_any_probabilities_give_a_distribution_summing_to_one(root, after_v):
    total, total_v = sum(root) * 1.01, sum(after_v) * 1.01
    rules = [(r'"label": "V$', dict(zip(AFTER_V, (p / total_v for p in after_v),
                                        strict=True))),
             (r'"threat_appraisal": \{"label": "$',
              dict(zip(THREAT_ROOT, (p / total for p in root), strict=True))), *RULES]
    label = _greedy_label(rules)
    assume(label != "V+L")  # the toy would spell the reply's V, L as the one token VL
    source = ToySource(reply(threat=label, coping="H" if label == "VH" else "L"), rules)
    threat = read_distributions(source, request()).field("threat_appraisal.label")
    assert math.isclose(sum(threat.probabilities), 1.0, rel_tol=1e-9)
    assert all(p >= 0 for p in threat.probabilities)
    assert threat.forbidden_mass == pytest.approx(
        (root[5] + root[6]) / total)


def _greedy_label(rules) -> str:
    """The label a greedy reply writes under ``rules`` (its most probable allowed tokens)."""
    from readout_support import next_tokens

    root = next_tokens('"threat_appraisal": {"label": "', rules)
    first = max((t for t in root if t in ("V", "VL", "L", "M", "H")), key=root.get)
    if first != "V":
        return first
    after = next_tokens('"threat_appraisal": {"label": "V', rules)
    return "VH" if after["H"] >= after["L"] else "V+L"


# -- over sampled accounts -------------------------------------------------------------------
#: Two accounts drawn with seeds 11 and 12: after VH the toy's coping is H 0.7 / L 0.3, after L
#: it is H 0.2 / L 0.8.
ACCOUNTS = {11: reply(threat="VH", coping="H"), 12: reply(threat="L", coping="L")}


def test_a_later_field_is_the_mean_over_the_sampled_accounts():
    source = ToySource(reply(), sampled=ACCOUNTS)
    read = read_distributions(source, request(), ReadoutSettings(accounts=2), seeds=[11, 12])
    coping = read.field("coping_appraisal.label")
    close(coping.distribution(), {"H": (0.7 + 0.2) / 2, "L": (0.3 + 0.8) / 2})
    assert [(a.seed, a.value) for a in coping.accounts] == [(11, "H"), (12, "L")]
    # in the schema's order, VL, L, M, H, VH
    assert [a.probabilities for a in coping.accounts] == [
        pytest.approx((0, 0.3, 0, 0.7, 0)), pytest.approx((0, 0.8, 0, 0.2, 0))]
    # the paths were drawn as a run draws them, each with its seed
    assert [(r.seed, r.temperature, r.top_k) for r in source.requests] == [
        (11, 0.7, 40), (12, 0.7, 40)]
    assert source.requests[0].json_schema["properties"]["reason"]["maxLength"] == 0


def test_the_accounts_after_the_first_reuse_its_prompt_evaluation():
    """The first account's path evaluates the prompt whole; the later ones may reuse it."""
    source = ToySource(reply(), sampled={**ACCOUNTS, 13: ACCOUNTS[11]})
    read_distributions(source, request(), ReadoutSettings(accounts=3), seeds=[11, 12, 13])
    assert source.reused == [False, True, True]
    whole = ToySource(reply(), sampled={**ACCOUNTS, 13: ACCOUNTS[11]})
    read_distributions(whole, request(), ReadoutSettings(accounts=3, prompt_reuse=False),
                       seeds=[11, 12, 13])
    assert whole.reused == [False, False, False]
    greedy = ToySource(reply())
    read_distributions(greedy, request())
    assert greedy.reused == [False]


def test_a_field_after_fixed_text_is_read_once_and_exact():
    """Both accounts reach the threat label after the same text: one reading, the model's law."""
    read = read_distributions(ToySource(reply(), sampled=ACCOUNTS), request(),
                              ReadoutSettings(accounts=2), seeds=[11, 12])
    threat = read.field("threat_appraisal.label")
    close(threat.distribution(), THREAT_EXPECTED)
    assert threat.passes == 2  # as for one path: V's node and the root, not read again
    assert [a.value for a in threat.accounts] == ["VH", "L"]
    # the accounts' texts before the decision differ (their labels): read along each
    assert read.field("decision").passes == 2 * 7


def test_accounts_are_what_the_json_keeps():
    read = read_distributions(ToySource(reply(), sampled=ACCOUNTS), request(),
                              ReadoutSettings(accounts=2), seeds=[11, 12])
    data = read.field("coping_appraisal.label").to_json()
    assert [a["seed"] for a in data["accounts"]] == [11, 12]
    assert data["accounts"][1]["distribution"] == pytest.approx(
        {"VL": 0, "L": 0.8, "M": 0, "H": 0.2, "VH": 0})
    assert data["unread"] == 0.0
    greedy = read_distributions(ToySource(reply()), request())
    assert "accounts" not in greedy.field("decision").to_json()


def test_an_account_that_stops_before_a_field_is_drawn_again():
    """Seed 12's reply runs into layout whitespace; its redraw writes every field."""
    from governed_broker.seeding import child_seed

    redraw = child_seed(12, "redraw", 1)
    cut = '{"threat_appraisal": {"label": "L", "reason": "r"}' + "\n" * 40
    source = ToySource(reply(), sampled={11: ACCOUNTS[11], 12: cut, redraw: ACCOUNTS[12]})
    read = read_distributions(source, request(), ReadoutSettings(accounts=2), seeds=[11, 12])
    assert read.redrawn == 1 and read.to_json()["redrawn"] == 1
    assert [r.seed for r in source.requests] == [11, 12, redraw]
    assert source.reused == [False, True, True]
    coping = read.field("coping_appraisal.label")
    assert [(a.seed, a.value) for a in coping.accounts] == [(11, "H"), (redraw, "L")]
    # an account that never writes the field is an error, after MAX_REDRAWS more draws
    always = ToySource(reply(), sampled={11: ACCOUNTS[11], 12: cut, **{
        child_seed(12, "redraw", n): cut for n in range(1, MAX_REDRAWS + 1)}})
    with pytest.raises(ReadoutError, match=f"{MAX_REDRAWS + 1} draws of an account stopped "
                       "before field coping_appraisal.label"):
        read_distributions(always, request(), ReadoutSettings(accounts=2), seeds=[11, 12])
    # a greedy path is not drawn again: it would write the same
    with pytest.raises(ReadoutError, match="stops before field coping"):
        read_distributions(ToySource(cut.replace('"L"', '"VH"')), request())


def test_default_account_seeds_come_from_the_request_seed():
    from governed_broker.seeding import child_seed

    seeds = [child_seed(5, "account", k) for k in range(2)]
    source = ToySource(reply(), sampled=dict(zip(seeds, ACCOUNTS.values(), strict=True)))
    read_distributions(source, LLMRequest.of(request().messages, json_schema=schema(),
                                             temperature=0.7, seed=5, max_tokens=256),
                       ReadoutSettings(accounts=2))
    assert [r.seed for r in source.requests] == seeds


def test_accounts_need_a_sampling_temperature_and_one_seed_each():
    greedy_request = LLMRequest.of(request().messages, json_schema=schema(), temperature=0.0)
    with pytest.raises(ReadoutError, match="temperature"):
        read_distributions(ToySource(reply()), greedy_request, ReadoutSettings(accounts=2))
    with pytest.raises(ValueError, match="1 seeds for 2 accounts"):
        read_distributions(ToySource(reply()), request(), ReadoutSettings(accounts=2),
                           seeds=[11])
    with pytest.raises(ValueError, match="accounts -1"):
        ReadoutSettings(accounts=-1)


def test_a_sampled_token_the_readout_did_not_see_is_an_error():
    """All the mass read at the threat label, and the account wrote another label there."""
    rules = [(r'"threat_appraisal": \{"label": "$', {"V": 0.5, "VL": 0.5}), *RULES]
    source = ToySource(reply(), rules, sampled={1: reply(threat="M")})
    with pytest.raises(ReadoutError, match="does not continue the reply"):
        read_distributions(source, request(), ReadoutSettings(accounts=1), seeds=[1])


def test_improbable_token_paths_within_a_value_are_not_read_further():
    """A path below min_path_mass stops there: fewer positions, its mass counted unread.

    "ele" (0.25 of the allowed 0.95) and "el" (0.05) both lead on to two elevate actions; with
    the threshold above both paths (0.26 and 0.05 of the decision) neither is read further, and
    their share goes to the unread mass.
    """
    full = read_distributions(ToySource(reply()), request(), ReadoutSettings(min_path_mass=0))
    cut = read_distributions(ToySource(reply()), request(), ReadoutSettings(min_path_mass=0.3))
    f, c = full.field("decision"), cut.field("decision")
    assert c.passes < f.passes and f.unresolved_mass == 0.0
    assert c.unresolved_mass == pytest.approx(0.30 / 0.95)
    assert c.unread >= c.unresolved_mass
    assert sum(c.probabilities) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="min_path_mass 1.0"):
        ReadoutSettings(min_path_mass=1.0)
