"""Any reply survives: fuzzed replies through the real broker never crash a run.

Every reply the scripted backend gives is drawn from a seeded generator of hostile replies
(wrong types, truncation, 100,000-deep nesting, huge strings, lone surrogates as raw characters
and as JSON escapes, NUL and control characters, non-finite numbers, prose, fences, ...). The
broker runs behind the response cache and the call log as in a real run; a second pass answers
every request from the cache (the resume path) and must give the same decisions.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from broker_helpers import OWNER_ACTIONS, SCALE, make_broker, make_situation, reply

from governed_broker.cognition.repair import parse_decision
from governed_broker.llm.cache import ResponseCache
from governed_broker.llm.call_log import CallLog
from governed_broker.llm.wrappers import CachedBackend, LoggedBackend

LABELS = ("VL", "L", "M", "H", "VH", "high", "very low", "XX", "", 3, None)
ACTIONS = (*OWNER_ACTIONS, "fly_away", "Buy Insurance", "", 7, None)
NASTY = ("\ud800", "\udfff", "\x00", "\x1b[31m", "\r\n", "\u202e", "😀", "\ufeff", "\\", '"')


def _valid(rng: random.Random) -> dict:
    return reply(rng.choice(LABELS[:5]), rng.choice(LABELS[:5]), rng.choice(OWNER_ACTIONS),
                 "".join(rng.choice(NASTY + ("a", " ")) for _ in range(rng.randint(0, 150))))


def _mutated(rng: random.Random) -> dict:
    obj = _valid(rng)
    key = rng.choice([*obj, "extra"])
    obj[key] = rng.choice([rng.choice(LABELS), rng.choice(ACTIONS), [1, 2], {"label": "H"},
                           float("nan"), 1e308, -1, True, "x" * 5000])
    if rng.random() < 0.3:
        del obj[rng.choice(list(obj))]
    return obj


def _text(rng: random.Random) -> tuple[int, str]:
    """A hostile reply and which of the kinds (``makers``) it is."""
    valid = json.dumps(_valid(rng))
    makers = [
        lambda: valid,
        lambda: json.dumps(_mutated(rng), allow_nan=True),
        lambda: valid[: rng.randint(0, len(valid))],
        lambda: "[" * 100_000 + "]" * rng.choice([0, 100_000]),
        lambda: '{"decision": ' + "{" * 5000 + "}",
        lambda: valid.replace("my", "\ud800" if rng.random() < 0.5 else "\\ud800"),
        lambda: valid.replace(" ", rng.choice(NASTY)),
        lambda: '{"threat_appraisal": {"label": "H", "reason": "' + "a" * 200_000 + '"}}',
        lambda: valid.replace("}", ', "n": NaN}', 1),
        lambda: valid.replace("}", ', "n": 1e999}', 1),
        lambda: valid.replace("}", ', "n": ' + "9" * 6000 + "}", 1),
        lambda: f"Sure! Here is my answer:\n```json\n{valid}\n```\nThanks",
        lambda: valid.replace("}", ",}", 1),
        lambda: json.dumps([_valid(rng)]),
        lambda: rng.choice(["", " ", "\n\t", "null", "42", '"text"', "{}", "{", "}"]),
        lambda: valid[:-1] + ', "decision": "relocate"}',
        lambda: "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 300))),
    ]
    kind = rng.randrange(len(makers))
    return kind, makers[kind]()


#: Kinds of hostile reply ``_text`` makes.
KINDS = 17


class FuzzedReplies:
    """A scripted rule's reply: the next hostile text from a seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.given = 0
        self.kinds = [0] * KINDS

    def __call__(self, request) -> str:
        self.given += 1
        kind, text = _text(self.rng)
        self.kinds[kind] += 1
        return text


def _situations(rng: random.Random, n: int, year: int) -> list:
    out = []
    for i in range(n):
        affordable = {a: rng.random() < 0.6 for a in OWNER_ACTIONS}
        affordable["do_nothing"] = True
        out.append(make_situation(agent_id=i, year=year, affordable=affordable))
    return out


def _run(tmp_path: Path, seed: int, rounds: int, cache_mode: str) -> tuple[list, int]:
    fuzz = FuzzedReplies(seed)
    broker, scripted = make_broker([(r".", fuzz)], tmp_path=tmp_path, concurrency=64)
    cache = ResponseCache(tmp_path / "cache.sqlite", cache_mode)
    log = CallLog(tmp_path / "llm_calls.sqlite")
    broker.backend = LoggedBackend(CachedBackend(scripted, cache), log)
    rng = random.Random(seed)
    decisions = []
    try:
        for year in range(1, rounds + 1):
            situations = _situations(rng, 250, year)
            got = broker.decide(situations)
            assert len(got) == len(situations)
            for s, d in zip(situations, got, strict=True):
                assert d.agent_id == s.agent_id
                assert d.action in s.allowed_actions and s.affordable[d.action], d
                decisions.append((d.agent_id, year, d.action, d.status, d.threat_label))
    finally:
        broker.close()
        log.close()
        cache.close()
    return decisions, fuzz


def test_thousands_of_fuzzed_replies_never_crash_and_replay_from_cache(tmp_path) -> None:
    decisions, fuzz = _run(tmp_path, seed=2026, rounds=8, cache_mode="readwrite")
    # every kind of hostile reply, many times over (each is drawn at random)
    assert fuzz.given >= 3_000 and min(fuzz.kinds) >= 100, fuzz.kinds
    lines = (tmp_path / "decisions.jsonl").read_bytes().decode("utf-8").splitlines()
    assert len(lines) == len(decisions)  # every decision audited, every line valid UTF-8 JSON
    records = [json.loads(line) for line in lines]
    statuses = {r["status"] for r in records}
    assert {"approved", "parse_failed"} <= statuses
    assert any("surrogate" in rep for r in records for a in r["attempts"]
               for rep in a["repairs"])
    (tmp_path / "decisions.jsonl").rename(tmp_path / "first.jsonl")
    replayed, again = _run(tmp_path, seed=2026, rounds=8, cache_mode="readonly")
    assert again.given == 0  # every reply from the cache, hostile ones included
    assert replayed == decisions


def test_a_lone_surrogate_escape_is_cleaned_and_recorded() -> None:
    text = json.dumps(reply("H", "M", "buy_insurance", "safe")).replace("safe", "\\ud800x")
    result = parse_decision(text, OWNER_ACTIONS, SCALE, 100)
    assert result.ok and result.reply.reason == "\ufffdx"
    assert any("surrogate" in r for r in result.repairs)


def test_deep_nesting_is_a_parse_failure_not_a_crash() -> None:
    result = parse_decision("{" + '"a":[' * 3_000 + "}", OWNER_ACTIONS, SCALE, 100)
    assert not result.ok and "nested" in result.error


# -- institutions --------------------------------------------------------------------------

#: Hostile lever values: overflowing sums, integers no float holds, non-finite, wrong types.
HOSTILE_LEVERS = (1e308, -1e308, 10 ** 400, -(10 ** 40), 1e16, float("nan"), float("inf"),
                  True, None, "1e308", [1], {"v": 1})
#: Numbers, some within the limits, some beyond them (re-asked, then rejected).
NUMBERS = (-1, 0, 0.05, 0.5, 1.2, 1000.0, 5e9, 1e15)


def _institution_reply(rng: random.Random, levers: tuple[str, ...]) -> str:
    obj = {"assessment": "fuzz.", **{lv: rng.choice(HOSTILE_LEVERS if rng.random() < 0.15
                                                    else NUMBERS) for lv in levers},
           "reason": "fuzz."}
    if rng.random() < 0.2:
        del obj[rng.choice(list(obj))]
    text = json.dumps(obj, allow_nan=True)
    if rng.random() < 0.7:
        return text
    return rng.choice([text[: rng.randint(0, len(text))],
                       text.replace("}", ', "n": ' + "9" * 5000 + "}", 1),
                       text.replace("}", ', "n": 1e999}', 1)])


def test_fuzzed_institution_replies_never_crash_a_run() -> None:
    from governed_broker.broker.institutions import TEXT_FIELDS, build_institution_makers
    from governed_broker.config import load_experiment
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.contracts.institutions import InstitutionSituation
    from governed_broker.llm.scripted import ScriptedBackend
    from governed_broker.runner import build_decision_maker
    from governed_broker.sim.institution_rules import limit_violations
    from governed_broker.sim.model import FloodModel

    repo = Path(__file__).resolve().parents[2]
    llm = {"backend": "scripted", "model": "fuzz", "cache": {"mode": "off"},
           "script": str(repo / "tests" / "fixtures" / "scripted_institutions.yaml")}
    experiment = resolve_experiment(load_experiment(repo / "experiments" / "institutions.yaml", [
        "years=40", "population.size=6", "outputs.plots=false", f"llm={json.dumps(llm)}",
        "institutions.government.maker=llm", "institutions.insurer.maker=llm",
        "hazard.zones.high.annual_probability=0.3", "governance.max_retries=1"]))
    rng = random.Random(40)

    def fuzzed(request) -> str:
        levers = [k for k in request.json_schema["properties"] if k not in TEXT_FIELDS]
        return _institution_reply(rng, tuple(levers))

    backend = ScriptedBackend([(r".", fuzzed)], name="fuzz")
    makers = build_institution_makers(experiment, Path("."), backend=backend)
    model = FloodModel(experiment.config, build_decision_maker(experiment, Path(".")),
                       institution_makers=makers)
    statuses = set()
    try:
        for _ in range(experiment.config.years):
            model.step()  # never raises, whatever the replies
            for agent, r in zip(model.institutions.agents, model.institutions.records,
                                strict=True):
                json.dumps(r, allow_nan=False)  # the audit line is strict JSON
                statuses.add(r["status"])
                seen = InstitutionSituation(r["institution"], r["year"], r["facts"],
                                            r["levers_before"], r["in_force_before"])
                assert not limit_violations(agent.domain, seen, r["levers"]), r["levers"]
    finally:
        model.institutions.close()
    assert len(backend.calls) >= 200
    assert {"parse_failed", "rejected"} <= statuses, statuses
