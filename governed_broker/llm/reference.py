"""Reference respondents: known-truth "households" that calibrate the validity battery.

They are NOT language models. Their backend kind is ``reference`` and their model id starts
with ``reference:``, and both appear in every output a run or card writes. Each answers a
household's decision request with a reply whose relation to the facts is known, so that what
the battery (``governed_broker.validity``) concludes about them can be checked against the truth:

``deaf``
    One constant reply, whatever it is asked.
``random``
    Labels and an offered action drawn uniformly, from the request (seed and messages): the
    replies change whenever the prompt changes, never with its facts.
``seed``
    Labels and the position of the action in the list drawn from the request seed alone: the
    same seed gives the same reply to any prompt.
``rule``
    Reads the facts from the prompt it receives, as a respondent does, and answers by a fixed
    rule (``RuleRespondent``): threat from this year's damage or the years since its last
    flood, coping from the money it can spend this year, and the offered, affordable action
    with the lowest expected yearly cost.
``order:Q``
    The first action listed with probability ``Q``, otherwise the rule's action (its labels
    are always the rule's): a good respondent with a bias for the first option.
``noisy_rule:S``
    A share ``S`` of its replies are the ``random`` respondent's, the rest the rule's
    (``noisy_rule:0.25`` follows the facts in 75 % of its replies).

Every draw is made from a hash of the request (its seed, and for all but ``seed`` its
messages), so the same request always gets the same reply and the response cache and the
call log behave as with a seeded model. The rule reads the wording of the shipped templates
(``configs/prompts/household.yaml``); a prompt that does not state a fact it needs is an error
that says which, never a guess. Reference respondents answer decision requests only (a run
that reflects, or institutions that ask a model, get a clear error). A change that moves any
reply bumps ``validity.CALIBRATION_VERSION`` (the battery's calibration is made of these).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from governed_broker.config.llm import REFERENCE_NAME
from governed_broker.llm.base import LLMBackend, LLMError, LLMRequest, LLMResponse

#: What the rule's reply says (reasons agree with the choice; none contradicts it).
_REASONS = {
    "threat": "Judged from this year's flood damage, or how long ago our home last flooded.",
    "coping": "Judged from how much we can spend on flood protection this year.",
}

#: The rule's thresholds (see ``RuleRespondent``): lower bounds of the ranks 1..4 (rank 0
#: below the first), as a share of income.
DAMAGE_SHARE_BOUNDS = (0.0, 0.05, 0.3, 1.0)
ROOM_SHARE_BOUNDS = (0.15, 0.25, 0.5, 1.0)
#: Threat rank without a flood this year, by the years since the last remembered flood.
RECENCY_RANKS = ((1, 3), (3, 2), (6, 1))
#: Perceived flood chance: the stated chance times beta(t) = 10 * 1.6**(-2.5 t) + 0.1, t the
#: years since the last flood (0: this year; never flooded: the floor 0.1), capped at 0.998;
#: yearly cost of a one-off, permanent measure: its cost times the capital recovery factor at
#: 3 % over 15 years. All from experiments/baseline.yaml (DYNAMO/GEB's perception decay and
#: planning horizon), so the rule values options as the project's own baseline rule does.
PERCEPTION = (10.0, 1.6, -2.5, 0.1, 0.998)
DISCOUNT_RATE, HORIZON_YEARS = 0.03, 15


def check_name(name: str) -> str:
    """``name`` if it names a reference respondent, else a ``ValueError`` listing them."""
    if not REFERENCE_NAME.match(name or ""):
        raise ValueError(
            f"unknown reference respondent {name!r}; use deaf, random, seed, rule, order:Q "
            "or noisy_rule:S (Q, S shares between 0 and 1, e.g. order:0.45, noisy_rule:0.25)")
    return name


# -- what a prompt states ------------------------------------------------------------------
@dataclass(frozen=True)
class Offer:
    """One action as the prompt offers it (in listed order).

    Attributes:
        action: Its id. cost_usd: This year's cost. affordable: Not marked as more than the
        household can pay. flood_cost_usd: What a typical flood next year would then cost.
        one_off: Described as done once / permanent (its cost is spread over the horizon).
    """

    action: str
    cost_usd: float
    affordable: bool
    flood_cost_usd: float
    one_off: bool


@dataclass(frozen=True)
class PromptFacts:
    """The facts the rule reads off a household prompt (units in the names)."""

    year: int
    chance: float
    income_usd: float
    flooded: bool
    damage_usd: float
    years_since_flood: int | None
    room_usd: float
    offers: tuple[Offer, ...]


_WS = r"\s+"


def _pattern(text: str) -> re.Pattern[str]:
    """A pattern of the template wording, any run of whitespace matching any other."""
    return re.compile(_WS.join(text.split()), flags=re.M)


_YEAR = _pattern(r"This year \(year (\d+)\):")
_CHANCE = _pattern(r"in any given year is about (?:1 in [\d,]+ \(([\d.eE+-]+)%\)|(close to "
                   r"zero))")
_INCOME = _pattern(r"Your household income is \$([\d,]+) a year")
_FLOOD = _pattern(r"A flood reached your home\. The water was [\d.]+ m deep at your home and "
                  r"caused \$([\d,]+) of damage")
_NO_FLOOD = _pattern(r"There was no flood at your home\.")
_ROOM = _pattern(r"you can spend up to \$([\d,]+) on flood protection")
_MEMORY_FLOOD = re.compile(r"^- Year (\d+)[^:\n]*:[^\n]*\b(?:flooded|flood reached)\b", re.M)
_OFFER = re.compile(
    r"^- (\w+): (.*?) Cost to you this year: (nothing|\$[\d,]+)( \(more than you can pay[^)]*\))?"
    r"\. If a typical flood came next\s+year, it would then cost you (nothing|\$[\d,]+)\.",
    re.M)
_ONE_OFF = re.compile(r"one-time|permanent|\bonce\b|for good", re.I)
_WORDING = "the wording of configs/prompts/household.yaml"


def _usd(text: str) -> float:
    return 0.0 if text == "nothing" else float(text.replace("$", "").replace(",", ""))


def _find(pattern: re.Pattern[str], prompt: str, what: str) -> re.Match[str]:
    found = pattern.search(prompt)
    if found is None:
        raise LLMError(f"reference respondent: the prompt does not state {what} in "
                       f"{_WORDING} (pattern {pattern.pattern!r}); the rule reads those "
                       "templates' sentences")
    return found


def read_prompt(prompt: str) -> PromptFacts:
    """What a household prompt states, read as a respondent would.

    Regular expressions on the shipped templates' sentences.

    Raises:
        LLMError: a fact the rule needs is not stated in that wording.
    """
    year = int(_find(_YEAR, prompt, "the year ('This year (year N):')").group(1))
    chance = _find(_CHANCE, prompt, "the zone's flood chance")
    flood = _FLOOD.search(prompt)
    if flood is None:
        _find(_NO_FLOOD, prompt, "whether a flood reached the home this year")
    floods = [int(y) for y in _MEMORY_FLOOD.findall(prompt) if int(y) < year]
    offers = tuple(
        Offer(m.group(1), _usd(m.group(3)), m.group(4) is None, _usd(m.group(5)),
              bool(_ONE_OFF.search(m.group(2))))
        for m in _OFFER.finditer(prompt))
    if not offers:
        raise LLMError(f"reference respondent: the prompt lists no action in {_WORDING} "
                       "('- id: description Cost to you this year: ...')")
    return PromptFacts(
        year=year,
        chance=0.0 if chance.group(2) else float(chance.group(1)) / 100.0,
        income_usd=_usd(_find(_INCOME, prompt, "the household income").group(1)),
        flooded=flood is not None,
        damage_usd=_usd(flood.group(1)) if flood else 0.0,
        years_since_flood=0 if flood else (year - max(floods) if floods else None),
        room_usd=_usd(_find(_ROOM, prompt, "what the household can spend this year").group(1)),
        offers=offers,
    )


# -- the rule --------------------------------------------------------------------------------
def _rank(value: float, bounds: Sequence[float], strict_first: bool = False) -> int:
    """How many of ``bounds`` ``value`` reaches (the first one strictly when asked)."""
    rank = 0
    for i, bound in enumerate(bounds):
        if value > bound if (strict_first and i == 0) else value >= bound:
            rank = i + 1
    return rank


@dataclass(frozen=True)
class RuleReply:
    """The rule's answer: threat and coping ranks (0..4) and the action."""

    threat: int
    coping: int
    action: str


class RuleRespondent:
    """Decides from a prompt's facts by a fixed rule.

    - **Threat** (rank 0..4): after a flood this year, from its damage as a share of income
      (ranks 1-4 from above 0, 5 %, 30 %, 100 %; a flood that did no damage is rank 1);
      otherwise from the years since the last flood it remembers (1: rank 3, up to 3: rank 2,
      up to 6: rank 1, longer or never: rank 0).
    - **Coping** (rank 0..4): from what it can spend on protection this year as a share of its
      income (ranks 1-4 from 15 %, 25 %, 50 %, 100 %).
    - **Action**: among the offered actions it can pay for, the one with the lowest expected
      yearly cost: a one-off measure's cost spread over 15 years at 3 % (a recurring one's as
      it is) plus the perceived chance of a flood times what a typical flood would then cost.
      The perceived chance is the stated one times the perception factor of
      ``experiments/baseline.yaml`` (``PERCEPTION``), which decays with the years since the
      last flood. Ties go to the cheaper this year, then to the action id (never to the order
      of the list).
    """

    def answer(self, facts: PromptFacts) -> RuleReply:
        """The rule's reply to a prompt's facts."""
        if facts.flooded:
            share = facts.damage_usd / max(facts.income_usd, 1.0)
            threat = max(1, _rank(share, DAMAGE_SHARE_BOUNDS, strict_first=True))
        else:
            ago = facts.years_since_flood
            threat = next((r for limit, r in RECENCY_RANKS if ago is not None and ago <= limit), 0)
        coping = _rank(facts.room_usd / max(facts.income_usd, 1.0), ROOM_SHARE_BOUNDS)
        chance = perceived_chance(facts.chance, facts.years_since_flood)
        crf = DISCOUNT_RATE / (1.0 - (1.0 + DISCOUNT_RATE) ** -HORIZON_YEARS)
        open_ = [o for o in facts.offers if o.affordable]
        if not open_:  # never fall back on the listing: the rule ignores the order
            raise LLMError("reference respondent: the prompt offers no action the household "
                           "can pay for this year (not even one that costs nothing)")
        best = min(open_, key=lambda o: ((o.cost_usd * crf if o.one_off else o.cost_usd)
                                         + chance * o.flood_cost_usd, o.cost_usd, o.action))
        return RuleReply(threat, coping, best.action)


def perceived_chance(chance: float, years_since: int | None) -> float:
    """The stated chance times the perception factor of ``years_since`` (None: never)."""
    scale, base, exponent, floor, cap = PERCEPTION
    factor = floor if years_since is None else scale * base ** (exponent * years_since) + floor
    return min(cap, chance * factor)


# -- the backend -----------------------------------------------------------------------------
def _draw(request: LLMRequest, with_prompt: bool, salt: str) -> random.Random:
    """A generator seeded by the request seed, its messages when asked, and ``salt``.

    Each use of a draw has its own ``salt``, so each draws from its own stream.
    """
    text = json.dumps([salt, request.seed, list(request.messages) if with_prompt else None],
                      default=str, sort_keys=True)
    return random.Random(int(hashlib.sha256(text.encode()).hexdigest()[:16], 16))


def _schema_enum(schema: Mapping[str, Any] | None, *path: str) -> list[str]:
    node: Any = schema or {}
    for key in path:
        node = node.get(key, {}) if isinstance(node, Mapping) else {}
    values = node.get("enum") if isinstance(node, Mapping) else None
    if not values:
        raise LLMError("reference respondent: the request has no decision schema with "
                       f"{'.'.join(path)}.enum; reference respondents answer household "
                       "decision requests only (switch reflection and LLM institutions off)")
    return [str(v) for v in values]


def _listed(request: LLMRequest, allowed: Sequence[str]) -> list[str]:
    """The offered actions in the order the prompt lists them.

    Raises:
        LLMError: the prompt does not list exactly the schema's actions in the shipped wording
            (the order-follower would silently follow the schema's order instead).
    """
    prompt = _household_prompt(request)
    listed = [m.group(1) for m in _OFFER.finditer(prompt)]
    if sorted(listed) != sorted(allowed):
        raise LLMError(f"reference respondent: the prompt lists {', '.join(listed) or 'no action'}"
                       f" in {_WORDING}, but the reply schema offers {', '.join(allowed)}")
    return listed


def _household_prompt(request: LLMRequest) -> str:
    users = [m["content"] for m in request.messages if m.get("role") == "user"]
    if not users:
        raise LLMError("reference respondent: the request has no user message")
    return str(users[0])


class ReferenceBackend(LLMBackend):
    """Answers decision requests as the reference respondent ``name`` would.

    Args:
        name: ``deaf``, ``random``, ``seed``, ``rule``, ``order:Q`` or ``noisy_rule:S``.

    Raises:
        ValueError: an unknown name.
    """

    kind = "reference"
    supports_schema = True
    max_concurrency = 8

    def __init__(self, name: str) -> None:
        self.name = check_name(name)
        self.model_id = f"reference:{name}"
        kind, _, share = name.partition(":")
        self._kind = kind
        self._share = float(share) if share else 0.0
        self._rule = RuleRespondent()

    def reply(self, request: LLMRequest) -> dict[str, Any]:
        """The reply object (the reply schema's shape) to a decision request."""
        labels = _schema_enum(request.json_schema, "properties", "threat_appraisal",
                              "properties", "label")
        allowed = _schema_enum(request.json_schema, "properties", "decision")
        kind = self._kind
        if kind == "deaf":
            middle = labels[len(labels) // 2]
            return _reply(middle, middle, allowed[0] if "do_nothing" not in allowed
                          else "do_nothing", "We keep to what we always do.")
        if kind in ("random", "seed"):
            return self._random(request, labels, allowed, with_prompt=kind == "random")
        if kind == "noisy_rule" and _draw(request, True, "noise").random() < self._share:
            return self._random(request, labels, allowed, with_prompt=True)
        rule = self._rule.answer(read_prompt(_household_prompt(request)))
        action = rule.action
        if kind == "order" and _draw(request, True, "order").random() < self._share:
            action = _listed(request, allowed)[0]
        if action not in allowed:
            raise LLMError(f"reference respondent: the rule chose {action!r}, which the "
                           f"request's schema does not offer ({', '.join(allowed)})")
        return _reply(_label(labels, rule.threat), _label(labels, rule.coping), action,
                      f"It has the lowest expected yearly cost for us: {action}.",
                      reasons=_REASONS)

    def _random(self, request: LLMRequest, labels: Sequence[str], allowed: Sequence[str],
                with_prompt: bool) -> dict[str, Any]:
        draw = _draw(request, with_prompt, "reply")
        listed = _listed(request, allowed)
        return _reply(draw.choice(labels), draw.choice(labels), draw.choice(listed),
                      "No particular reason.")

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The reference respondent's reply to ``request``, as a backend's response."""
        start = time.perf_counter()
        text = json.dumps(self.reply(request))
        prompt_chars = sum(len(m["content"]) for m in request.messages)
        return LLMResponse(text=text, parsed=json.loads(text),
                           prompt_tokens=max(1, prompt_chars // 4),
                           completion_tokens=max(1, len(text) // 4),
                           latency_s=time.perf_counter() - start, backend=self.kind,
                           model=self.model_id)


def _label(labels: Sequence[str], rank: int) -> str:
    """The label of a 0..4 rank on a scale of any length (spread evenly)."""
    return labels[round(rank * (len(labels) - 1) / 4)] if len(labels) != 5 else labels[rank]


def _reply(threat: str, coping: str, action: str, reason: str,
           reasons: Mapping[str, str] | None = None) -> dict[str, Any]:
    reasons = reasons or {"threat": "No particular reason.", "coping": "No particular reason."}
    return {"threat_appraisal": {"label": threat, "reason": reasons["threat"]},
            "coping_appraisal": {"label": coping, "reason": reasons["coping"]},
            "decision": action, "reason": reason}



class ReferenceSource:
    """A reference respondent's choice distributions as token probabilities (``TokenSource``).

    A reference respondent's law is known, so its distributions can be read as a language
    model's are (``llm.readout``) and a card judged from them compared with its sampled card.
    Each field's distribution is the respondent's marginal over a decision request's draws
    (request seeds): ``deaf`` and ``rule`` their one reply; ``random`` and ``seed`` uniform over
    the labels and the actions listed; ``order:Q`` the rule's labels, and the first action
    listed with probability ``Q`` added to the rule's; ``noisy_rule:S`` ``S`` of the uniform
    law and ``1 - S`` of the rule's. Tokens are characters: the next character's probability is
    the share of the values it may still become. The fields are independent marginals, not
    conditional on the text before them (a sampled ``noisy_rule`` reply draws all its fields
    at random together; each field's marginal is the same).

    Args:
        backend: The respondent.
    """

    def __init__(self, backend: ReferenceBackend) -> None:
        self.backend = backend
        self.name = f"reference {backend.name} (exact)"

    def laws(self, request: LLMRequest) -> dict[str, dict[str, float]]:
        """Each enumerated field's distribution for ``request``, by dotted path."""
        labels = _schema_enum(request.json_schema, "properties", "threat_appraisal",
                              "properties", "label")
        allowed = _schema_enum(request.json_schema, "properties", "decision")
        uniform_labels = {v: 1 / len(labels) for v in labels}
        uniform_actions = {a: 1 / len(allowed) for a in allowed}  # the listing's order aside
        kind, share = self.backend._kind, self.backend._share
        if kind in ("random", "seed"):
            threat = coping = uniform_labels
            action = uniform_actions
        else:
            one = self.backend.reply(replace(request, seed=0)) if kind == "deaf" else None
            if one is None:
                rule = self.backend._rule.answer(read_prompt(_household_prompt(request)))
                one = _reply(_label(labels, rule.threat), _label(labels, rule.coping),
                             rule.action, "")
            threat = {one["threat_appraisal"]["label"]: 1.0}
            coping = {one["coping_appraisal"]["label"]: 1.0}
            action = {one["decision"]: 1.0}
            if kind == "order":
                action = _mix(action, {_listed(request, allowed)[0]: 1.0}, share)
            if kind == "noisy_rule":
                threat = _mix(threat, uniform_labels, share)
                coping = _mix(coping, uniform_labels, share)
                action = _mix(action, uniform_actions, share)
        return {"threat_appraisal.label": threat, "coping_appraisal.label": coping,
                "decision": action}

    def path(self, request: LLMRequest, reuse_prompt: bool = False) -> Any:
        """The reply of each field's most probable value, written character by character.

        Greedy or sampled alike: the fields are independent, so the text before a field does
        not change its distribution. A respondent evaluates no prompt (``reuse_prompt`` is
        moot).
        """
        from governed_broker.llm.readout import ReplyPath, Token

        laws = self.laws(request)
        best = {f: _greedy_value(law) for f, law in laws.items()}
        text = json.dumps(_reply(best["threat_appraisal.label"], best["coping_appraisal.label"],
                                 best["decision"], "", {"threat": "r", "coping": "r"}))
        return ReplyPath(text, tuple(Token(c.encode()) for c in text), laws)

    def sampler(self, request: LLMRequest) -> Any:
        """A respondent draws from its law as it is: the model's view (``UNDER_GRAMMAR``)."""
        from governed_broker.llm.readout import UNDER_GRAMMAR

        return UNDER_GRAMMAR

    def top_tokens(self, reply: Any, prefix: Sequence[Any], k: int) -> list[Any]:
        """The next characters' log-probabilities within the field being written."""
        from governed_broker.llm.readout import Candidate, Token

        written = b"".join(t.text for t in prefix).decode()
        field = next(f for f, key in (("decision", '"decision": "'),
                                      ("coping_appraisal.label", '"coping_appraisal"'),
                                      ("threat_appraisal.label", '"threat_appraisal"'))
                     if key in written)
        partial = written[written.rindex('"') + 1:]
        nxt = _next_chars(reply.prompt[field], partial)
        total = sum(nxt.values())
        ranked = sorted(nxt.items(), key=lambda kv: -kv[1])[:k]
        return [Candidate(Token(c.encode()), math.log(p / total)) for c, p in ranked if p > 0]


def _mix(rule: Mapping[str, float], other: Mapping[str, float], share: float
         ) -> dict[str, float]:
    """``1 - share`` of ``rule`` and ``share`` of ``other``."""
    out = {v: (1 - share) * p for v, p in rule.items()}
    for v, p in other.items():
        out[v] = out.get(v, 0.0) + share * p
    return {v: p for v, p in out.items() if p > 0}


def _next_chars(law: Mapping[str, float], partial: str) -> dict[str, float]:
    """The weight of each next character: the values it may still become."""
    out: dict[str, float] = {}
    for value, p in law.items():
        if value.startswith(partial) and len(value) > len(partial) and p > 0:
            c = value[len(partial)]
            out[c] = out.get(c, 0.0) + p
    return out


def _greedy_value(law: Mapping[str, float]) -> str:
    """The value written by always taking the heaviest next character (first on ties)."""
    partial = ""
    while partial not in law or any(v.startswith(partial) and v != partial for v in law
                                    if law[v] > 0):
        nxt = _next_chars(law, partial)
        if not nxt:
            break
        partial += max(nxt, key=lambda c: nxt[c])
    return partial
