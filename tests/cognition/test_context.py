"""The PMT context builder: section order, content, static prefix, budget, templates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from broker_helpers import PROMPTS, SCALE, make_situation, registry

from governed_broker.cognition.context import (
    ContextBudgetError,
    ContextBuilder,
    flood_chance,
    share_of,
)
from governed_broker.cognition.prompts import HOUSEHOLD_TEMPLATES
from governed_broker.config.agent_types import PMTLabels
from governed_broker.config.base import ConfigError
from governed_broker.config.templates import load_templates
from governed_broker.contracts.decision import Heuristic, SituationFacts, TypicalFlood


@dataclass
class Memory:
    """A ``Remembered`` whose text is its content at every fidelity."""

    id: str
    year: float
    content: str
    fidelity: str = "detailed"
    kind: str = "event"
    importance: float = 1.0

    def text(self, fidelity: str | None = None) -> str:
        return self.content


@dataclass
class Chunk:
    text: str
    source: str


class Knowledge:
    def __init__(self, chunks):
        self.chunks, self.seen = chunks, []

    def chunks_for(self, situation):
        self.seen.append(situation.agent_id)
        return self.chunks

    async def aretrieve_for(self, situation):
        return Found(tuple(self.chunks_for(situation)))

    def stats(self):
        return {"n_situations": len(self.seen)}


@dataclass
class Found:
    chunks: tuple

    def to_dict(self):
        return {"chunks": [c.source for c in self.chunks]}


def builder(**kw) -> ContextBuilder:
    return ContextBuilder.from_dir(PROMPTS, registry().descriptions(), SCALE, **kw)


def user_text(prompt) -> str:
    return prompt.messages[1]["content"]


def test_sections_in_spec_order_and_static_system_message():
    memories = (Memory("m1", 1, "Water filled my basement in the year-1 flood.", "summary"),)
    p = builder(knowledge=Knowledge([Chunk("NFIP policies take 30 days to start.", "nfip.md#x")]))
    a = p.build(make_situation(memories=memories))
    b = builder().build(make_situation(agent_id=9, tenure="renter", flooded=False, year=5))
    assert a.messages[0] == b.messages[0]  # identical system prefix for every household
    assert a.messages[0]["role"] == "system" and "Protection Motivation" in a.messages[0][
        "content"]
    text = user_text(a)
    markers = ["You own your home", "What you remember", "This year (year 3)", "Your neighbours",
               "What you know about flood protection", "choose one of", "Reply with this JSON"]
    positions = [text.index(m) for m in markers]
    assert positions == sorted(positions)


LOSSES = {"do_nothing": 52_000.0, "buy_insurance": 2_000.0, "elevate_house": 0.0,
          "relocate": 0.0}


def test_situation_facts_and_costs_are_shown():
    s = make_situation(payout_usd=30000.0, insured=True, savings_usd=20000.0, debt_usd=12_000.0,
                       unrepaired_damage_usd=3_000.0,
                       affordable={"do_nothing": True, "buy_insurance": True,
                                   "elevate_house": False, "relocate": False},
                       facts=SituationFacts(loss_if_flood_usd=LOSSES, spending_room_usd=23_100.0,
                                            typical_flood=TypicalFlood(0.3, 54_000.0)))
    text = " ".join(user_text(builder().build(s)).split())
    for fact in ("0.80 m deep", "$45,000 of", "insurance paid $30,000", "savings are now $20,000",
                 "flood insurance in force", "has not been elevated", "1 in 100 (1%)",
                 "30% of them had flood insurance", "home would cost about $250,000",
                 "belongings are worth about $60,000", "about 0.3 m of water",
                 "do about $54,000 of damage", "You owe $12,000", "damage of $3,000",
                 "spend up to $23,100 on flood protection"):
        assert fact in text, fact
    assert "elevate_house: Raise the house" in text and "$30,000 (more than you can pay" in text
    assert "buy_insurance: Buy (or renew)" in text and "$1,200." in text
    assert ("do_nothing: Take no new protective action this year. Cost to you this year: "
            "nothing. If a typical flood came next year, it would then cost you $52,000.")\
        in text
    assert "it would then cost you $2,000." in text  # insured: what the baseline weighs
    assert "elevate_house" in text and "it would then cost you nothing." in text


def test_a_lender_requirement_is_stated_only_where_it_holds():
    required = " ".join(user_text(builder().build(
        make_situation(facts=SituationFacts(insurance_required=True)))).split())
    assert "Your mortgage lender requires flood insurance on your home" in required
    for s in (make_situation(), make_situation(facts=SituationFacts(insurance_required=False))):
        assert "mortgage lender" not in user_text(builder().build(s))


def test_past_floods_are_known_only_from_memory():
    # floods in earlier years are world state; without memories the prompt must not state them
    s = make_situation(flooded=False, depth_m=0.0, damage_usd=0.0, years_since_flood=2,
                       floods_experienced=3, memories=())
    text = user_text(builder().build(s)).lower()
    assert "no flood at your home" in text
    for leak in ("flooded 3", "3 times", "2 years ago", "last flood", "so far"):
        assert leak not in text, leak
    remembered = (Memory("m1", 1, "My home flooded 0.9 m deep in year 1."),)
    assert "flooded 0.9 m deep" in user_text(builder().build(
        make_situation(flooded=False, years_since_flood=2, memories=remembered)))


def test_renter_sees_only_allowed_actions_and_no_elevation_status():
    p = builder().build(make_situation(tenure="renter"))
    text = user_text(p)
    assert "You rent your home" in text and "elevate_house" not in text
    assert "elevated." not in text.split("Your neighbours")[0]
    assert p.json_schema["properties"]["decision"]["enum"] == [
        "do_nothing", "buy_insurance", "relocate"]


def test_memories_show_years_and_fidelity_and_are_bounded():
    memories = tuple(Memory(f"m{i}", i, f"Memory number {i}.", f) for i, f in
                     enumerate(["detailed", "summary", "gist", "detailed"], start=1))
    p = builder(max_memories=3).build(make_situation(memories=memories))
    text = user_text(p)
    assert "- Year 1: Memory number 1." in text
    assert "- Year 2 (in outline): Memory number 2." in text
    assert "- Year 3 (a faded memory): Memory number 3." in text
    assert "Memory number 4" not in text
    assert p.memory_ids == ("m1", "m2", "m3")
    assert p.memory_fidelity == ("detailed", "summary", "gist")  # recorded in the audit


def test_memory_text_at_current_fidelity_is_used():
    class Item(Memory):
        def text(self):
            return "a short gist"

    p = builder().build(make_situation(memories=(Item("m1", 2, "long detailed text", "gist"),)))
    assert "a short gist" in user_text(p) and "long detailed" not in user_text(p)


def test_no_memories_and_no_knowledge():
    text = user_text(builder().build(make_situation()))
    assert "You have no particular memories" in text
    assert "What you know" not in text


def test_knowledge_from_memory_and_provider():
    kb = Knowledge([Chunk("Heading\n\nElevation grants cover 75%.", "grants.md#FMA")])
    s = make_situation(facts=SituationFacts(
        knowledge_facts=("Insurance pays after damage.",),
        heuristics=(Heuristic("insure after a flood", 0.8),)))
    p = builder(knowledge=kb).build(s)
    text = user_text(p)
    assert "- Insurance pays after damage." in text
    assert "insure after a flood (it has worked out 80% of the time)" in text
    assert "Heading Elevation grants cover 75%. (source: grants.md#FMA)" in text
    assert p.knowledge_sources == ("grants.md#FMA",) and kb.seen == [7]


def test_no_base_rate_nudges_in_templates():
    text = (Path(PROMPTS) / "household.yaml").read_text().lower()
    body = text.split("\nsystem:", 1)[1]
    for nudge in ("most people", "most households", "uncommon", "typically", "usually"):
        assert nudge not in body


def test_hash_is_stable_and_changes_with_content():
    a = builder().build(make_situation())
    assert a.context_hash == builder().build(make_situation()).context_hash
    assert a.context_hash != builder().build(make_situation(savings_usd=1.0)).context_hash


def test_token_budget_error_names_household_and_setting():
    with pytest.raises(ContextBudgetError, match="household 7 in year 3.*token_budget"):
        builder(token_budget=200).build(make_situation())


def test_feedback_messages():
    b = builder()
    text = b.feedback_governance([("r1", "Message one."), ("r2", "Message two.")])
    assert "- [r1] Message one.\n- [r2] Message two." in text
    assert "could not be read: bad json." in b.feedback_format("bad json.")


def test_flood_chance_wording():
    assert flood_chance(0.01) == "1 in 100 (1%)"
    assert flood_chance(0.002) == "1 in 500 (0.2%)"
    assert flood_chance(0.0) == "close to zero"


def test_template_errors_name_file_and_key(tmp_path):
    text = (Path(PROMPTS) / "household.yaml").read_text()
    (tmp_path / "household.yaml").write_text(text.replace("$flood_zone flood zone. The",
                                                          "$flood_zon flood zone. The", 1))
    with pytest.raises(ConfigError, match="identity_owner.*unknown placeholder.*flood_zon"):
        load_templates(tmp_path / "household.yaml", HOUSEHOLD_TEMPLATES,
                       frozenset({"trust_words", "section_order"}))
    (tmp_path / "household.yaml").write_text("system: hi\n")
    with pytest.raises(ConfigError, match="missing key"):
        ContextBuilder.from_dir(tmp_path, {}, SCALE)
    with pytest.raises(ConfigError, match="not found"):
        ContextBuilder.from_dir(tmp_path / "nowhere", {}, SCALE)


def test_the_domain_scale_is_the_prompt_scale_and_the_schema_enum():
    scale = PMTLabels.model_validate({
        "thresholds": [0.5], "labels": ["LOW", "HIGH"],
        "words": {"LOW": ["not worrying"], "HIGH": ["worrying", "serious"]}})
    prompt = ContextBuilder.from_dir(PROMPTS, registry().descriptions(), scale).build(
        make_situation())
    system = prompt.messages[0]["content"]
    assert "this scale: LOW = not worrying, HIGH = worrying." in system
    assert '"label": "LOW|HIGH"' in system and "VL" not in system
    for part in ("threat_appraisal", "coping_appraisal"):
        label = prompt.json_schema["properties"][part]["properties"]["label"]
        assert label["enum"] == ["LOW", "HIGH"]


def test_appraisal_order_sets_the_format_shown_and_the_schema_order():
    label_first, reason_first = builder(), builder(appraisal_order="reason_first")
    labels = "|".join(SCALE.labels)
    assert (f'{{"threat_appraisal": {{"label": "{labels}", "reason": "one short sentence"}},'
            in label_first.system)
    assert (f'{{"threat_appraisal": {{"reason": "one short sentence", "label": "{labels}"}},'
            in reason_first.system)
    assert label_first.system.replace('"label": "VL|L|M|H|VH", "reason": "one short sentence"',
                                      "X") == reason_first.system.replace(
        '"reason": "one short sentence", "label": "VL|L|M|H|VH"', "X")
    situation = make_situation()
    for built, order in ((label_first, ["label", "reason"]),
                         (reason_first, ["reason", "label"])):
        schema = built.build(situation).json_schema
        for part in ("threat_appraisal", "coping_appraisal"):
            assert list(schema["properties"][part]["properties"]) == order
            assert schema["properties"][part]["required"] == order
        assert list(schema["properties"]) == ["threat_appraisal", "coping_appraisal",
                                              "decision", "reason"]


def test_section_order_comes_from_the_templates_and_is_checked(tmp_path):
    grounded = ContextBuilder.from_dir(PROMPTS.parent / "prompts_grounded",
                                       registry().descriptions(), SCALE)
    text = user_text(grounded.build(make_situation(flooded=True, damage_usd=31_000.0,
                                                   income_usd=62_000.0)))
    assert text.startswith("This year (year 3):")
    assert text.index("This year") < text.index("You own your home") < text.index(
        "Your neighbours") < text.index("choose one of") < text.index("Reply with this JSON")
    assert "$31,000 of damage\n  to the building and belongings, 50% of your yearly income" in text
    data = yaml.safe_load((PROMPTS / "household.yaml").read_text())
    for bad in (["identity", "memories"], data["section_order"] + ["identity"], "identity"):
        (tmp_path / "household.yaml").write_text(yaml.safe_dump({**data, "section_order": bad}))
        with pytest.raises(ConfigError, match="section_order must list each of"):
            ContextBuilder.from_dir(tmp_path, registry().descriptions(), SCALE)


@pytest.mark.parametrize(("amount", "base", "text"), [
    (50.0, 200.0, "25%"), (340.0, 200.0, "170%"), (0.0, 200.0, "0%"),
    (5.0, 0.0, "more than 100%"), (5.0, -10.0, "more than 100%"), (0.0, 0.0, "0%"),
    (2_000_000.0, 100.0, "2,000,000%")])
def test_share_of(amount, base, text):
    assert share_of(amount, base) == text
