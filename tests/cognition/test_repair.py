"""The tolerant decision parser: each repair is applied and recorded; nothing is guessed."""

from __future__ import annotations

import json

import pytest
from broker_helpers import SCALE
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.cognition.repair import extract_json_object, parse_decision

ACTIONS = ("do_nothing", "buy_insurance", "elevate_house", "relocate")
GOOD = {
    "threat_appraisal": {"label": "H", "reason": "we flooded"},
    "coping_appraisal": {"label": "M", "reason": "some savings"},
    "decision": "buy_insurance",
    "reason": "cheap protection",
}


def parse(text, **kw):
    return parse_decision(text, ACTIONS, SCALE, **kw)


def test_clean_json_needs_no_repair():
    r = parse(json.dumps(GOOD))
    assert r.ok and r.repairs == () and r.reply.decision == "buy_insurance"


def test_code_fence_and_surrounding_text():
    r = parse(f"Sure! Here it is:\n```json\n{json.dumps(GOOD)}\n```\nHope this helps.")
    assert r.ok and r.repairs == ("removed a markdown code fence",)
    r2 = parse(f"My answer: {json.dumps(GOOD)} -- done")
    assert r2.ok and r2.repairs == ("removed text around the JSON object",)


def test_trailing_commas():
    text = json.dumps(GOOD)[:-1] + ",}"
    text = text.replace('"we flooded"}', '"we flooded",}')
    r = parse(text)
    assert r.ok and r.repairs == ("removed trailing comma(s)",)


@pytest.mark.parametrize(
    ("word", "label"),
    [("high", "H"), ("Very High", "VH"), ("very-low", "VL"), ("moderate", "M"), ("h", "H"),
     ("LOW", "L")],
)
def test_labels_as_words(word, label):
    data = json.loads(json.dumps(GOOD))
    data["threat_appraisal"]["label"] = word
    r = parse(json.dumps(data))
    assert r.ok and r.reply.threat_appraisal.label == label
    assert r.repairs == (f"threat_appraisal label {word!r} read as {label}",)


def test_bare_label_instead_of_object():
    data = dict(GOOD, coping_appraisal="low")
    r = parse(json.dumps(data))
    assert r.ok and r.reply.coping_appraisal.label == "L"
    assert r.repairs[0].startswith("coping_appraisal given as a bare label")


def test_action_spelling_is_normalised_but_never_guessed():
    r = parse(json.dumps(dict(GOOD, decision="Elevate-House")))
    assert r.ok and r.reply.decision == "elevate_house"
    bad = parse(json.dumps(dict(GOOD, decision="insurance")))
    assert not bad.ok and "insurance" in bad.error and bad.data["decision"] == "insurance"


def test_missing_fields_unknown_labels_and_non_json_fail():
    assert "missing field(s): decision" in parse(
        json.dumps({k: v for k, v in GOOD.items() if k != "decision"})).error
    bad_label = json.loads(json.dumps(GOOD))
    bad_label["threat_appraisal"]["label"] = "extreme"
    assert "threat_appraisal.label" in parse(json.dumps(bad_label)).error
    assert parse("").error == "the reply was empty"
    assert parse("buy insurance").error == "the reply contains no JSON object"
    assert "not valid JSON" in parse('{"decision": buy}').error
    assert parse("[1, 2]").error == "the reply contains no JSON object"


def test_missing_reason_and_extra_fields_and_long_reasons():
    data = {k: v for k, v in GOOD.items() if k != "reason"}
    data["confidence"] = 0.9
    long = "Floods come often here. " * 10
    data["threat_appraisal"] = {"label": "H", "reason": long}
    data["coping_appraisal"] = {"label": "M", "reason": "x" * 200 + "."}  # one sentence: whole
    r = parse(json.dumps(data), max_reason_chars=50)
    assert r.ok and r.reply.reason == ""
    assert r.reply.threat_appraisal.reason == "Floods come often here. Floods come often here."
    assert r.reply.coping_appraisal.reason == "x" * 200 + "."
    assert r.repairs == ("ignored unexpected field(s) ['confidence']",
                         "missing reason left empty",
                         "threat_appraisal.reason: kept the first 2 whole sentence(s) of 10")


def test_a_reason_stopped_by_the_schema_cap_is_reported():
    data = dict(GOOD, reason="y" * 150)  # the hard cap of 50 is 150: stopped mid-sentence
    r = parse(json.dumps(data), max_reason_chars=50)
    assert r.ok and r.reply.reason == "y" * 150
    assert r.repairs == ("reason: stopped mid-sentence at the schema's limit of 150 characters",)
    data = dict(GOOD, reason="A whole sentence. An unfinished " + "z" * 150)
    r = parse(json.dumps(data), max_reason_chars=50)
    assert r.reply.reason == "A whole sentence."  # the unfinished sentence is dropped


def test_backend_parsed_object_is_used():
    r = parse("not used", parsed=GOOD)
    assert r.ok and r.reply.decision == "buy_insurance"


@given(st.text(max_size=200))
def test_parser_never_raises_on_arbitrary_text(text):
    result = parse(text)
    assert result.ok or result.error


def test_extract_json_object_reports_repairs():
    obj, repairs, error = extract_json_object('```\n{"a": [1, 2,],}\n```')
    assert obj == {"a": [1, 2]} and error is None
    assert repairs == ["removed a markdown code fence", "removed trailing comma(s)"]
