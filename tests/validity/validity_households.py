"""Scripted "households" for the battery's tests: replies computed from the prompt by rules.

NOT language models: each is a small function of the facts the prompt states, written so that
one known property holds (responds to every fact the directional tests vary; ignores the flood
depth; launders its labels after a block; always takes the first action listed). They reach the
battery through ``ScriptedBackend``, so everything else (context builder, broker, rules, audit)
is the real code.
"""

from __future__ import annotations

import json
import re
from typing import Any

from governed_broker.llm.base import LLMRequest
from governed_broker.llm.scripted import ScriptedBackend

LABELS = ["VL", "L", "M", "H", "VH"]


def _money(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def facts(prompt: str) -> dict[str, Any]:
    """What a household prompt states, read back with regular expressions."""
    found: dict[str, Any] = {"flooded": "A flood reached your home" in prompt}
    damage = re.search(r"caused \$([\d,]+) of", prompt)
    found["damage"] = _money(damage.group(1)) if damage else 0.0
    depth = re.search(r"The water was ([\d.]+) m deep", prompt)
    found["depth"] = float(depth.group(1)) if depth else 0.0
    # earlier floods are known only from memories ("- Year 3 (in outline): My home flooded ...")
    year = int(re.search(r"This year \(year (\d+)\)", prompt).group(1))
    flood_years = [int(y) for y in re.findall(r"^- Year (\d+)[^:]*: .*flooded", prompt, flags=re.M)]
    found["years_since"] = year - max(flood_years) if flood_years else None
    found["savings"] = _money(re.search(r"Your savings are now (\$[\d,]+)", prompt).group(1))
    found["income"] = _money(re.search(r"income is (\$[\d,]+)", prompt).group(1))
    found["actions"] = re.findall(r"^- (\w+): .*Cost to you this year: (nothing|\$[\d,]+)",
                                  prompt, flags=re.M)
    return found


def _cost(f: dict[str, Any], action: str) -> float | None:
    for a, cost in f["actions"]:
        if a == action:
            return 0.0 if cost == "nothing" else _money(cost)
    return None


def threat_rank(f: dict[str, Any]) -> int:
    """Threat from this year's damage, or from how long ago the last flood was."""
    if f["flooded"]:
        d = f["damage"]
        return 4 if d > 150_000 else 3 if d > 50_000 else 2 if d > 0 else 1
    ago = f["years_since"]
    return 0 if ago is None else 3 if ago <= 1 else 2 if ago <= 3 else 1


def coping_rank(f: dict[str, Any]) -> int:
    """Coping from savings."""
    s = f["savings"]
    return 4 if s >= 100_000 else 3 if s >= 30_000 else 2 if s >= 10_000 else 1


def choose(f: dict[str, Any], threat: int) -> str:
    """A rational choice: cheap elevation or affordable insurance when the threat is high."""
    elevate, insure = _cost(f, "elevate_house"), _cost(f, "buy_insurance")
    relocate = _cost(f, "relocate")
    insure_ok = insure is not None and insure <= 0.03 * f["income"]
    if threat >= 3:
        if elevate is not None and elevate <= 20_000:
            return "elevate_house"
        if insure_ok:
            return "buy_insurance"
        for action, cost in (("elevate_house", elevate), ("relocate", relocate),
                             ("buy_insurance", insure)):
            if cost is not None and cost <= f["savings"]:
                return action
        return "do_nothing"
    if threat == 2 and insure_ok:
        return "buy_insurance"
    return "do_nothing"


def reply(threat: int, coping: int, action: str) -> dict[str, Any]:
    """A reply in the schema's shape with a reason that agrees with the action."""
    return {"threat_appraisal": {"label": LABELS[threat], "reason": "From what happened."},
            "coping_appraisal": {"label": LABELS[coping], "reason": "From our savings."},
            "decision": action,
            "reason": f"We {action.replace('_', ' ')} given our situation."}


def _prompt(request: LLMRequest) -> str:
    return [m["content"] for m in request.messages if m["role"] == "user"][0]


def _reasked(request: LLMRequest) -> dict[str, Any] | None:
    """The rejected reply when this request is a governance re-ask."""
    if "cannot be accepted" not in request.messages[-1]["content"]:
        return None
    return json.loads([m for m in request.messages if m["role"] == "assistant"][-1]["content"])


def rational(request: LLMRequest) -> dict[str, Any]:
    """Responds to depth, damage, recency, savings and prices; re-asked, it answers anew."""
    f = facts(_prompt(request))
    threat = threat_rank(f)
    return reply(threat, coping_rank(f), choose(f, threat))


def ignores_depth(request: LLMRequest) -> dict[str, Any]:
    """Rational about money, but its threat is medium whatever happened."""
    f = facts(_prompt(request))
    return reply(2, coping_rank(f), choose(f, 2))


def launderer(request: LLMRequest) -> dict[str, Any]:
    """Rational, but when blocked it keeps the action and moves its threat label across."""
    rejected = _reasked(request)
    if rejected is None:
        return rational(request)
    low = rejected["threat_appraisal"]["label"] in ("VL", "L")
    return reply(3 if low else 1, LABELS.index(rejected["coping_appraisal"]["label"]),
                 rejected["decision"])


def first_listed(request: LLMRequest) -> dict[str, Any]:
    """Always the first action of the list, with medium appraisals."""
    f = facts(_prompt(request))
    return reply(2, 2, f["actions"][0][0])


def backend(policy: Any, name: str) -> ScriptedBackend:
    """A scripted backend answering every request with ``policy(request)``."""
    return ScriptedBackend([(".", policy)], name=name)
