"""The battery read as distributions (validity.readout, ``governed-broker readout``).

A character-level toy model whose distributions are known stands in: no language model needed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest

from governed_broker.cli import main
from governed_broker.llm import LLMError, ScriptedBackend, ScriptRule
from governed_broker.llm.readout import UNDER_GRAMMAR, Candidate, ReplyPath, Token, enum_fields
from governed_broker.validity.readout import read_battery

FLOODED = "A flood reached your home"


def weights(field: str, values: Sequence[str], prompt: str) -> dict[str, float]:
    """The toy's distribution of a field (unnormalised).

    threat H when the home flooded this year, VL otherwise; coping M; the first action offered.
    """
    if field == "threat_appraisal.label":
        favourite = "H" if FLOODED in prompt else "VL"
    elif field == "coping_appraisal.label":
        favourite = "M"
    else:
        favourite = values[0]
    return {v: 4.0 if v == favourite else 1.0 for v in values}


class CharSource:
    """One token per character.

    The next character's probability is the weight of the values it may still become (so a
    field's distribution is its normalised ``weights``), and 0.1 of the mass is on a forbidden
    "|".
    """

    name = "toy characters"

    def __init__(self, weigh=weights) -> None:
        self.weigh = weigh

    def path(self, request, reuse_prompt=False) -> ReplyPath:
        prompt = request.messages[-1]["content"]
        self.fields = dict(enum_fields(request.json_schema))
        best = {f: max(w := self.weigh(f, vs, prompt), key=w.get) for f, vs in self.fields.items()}
        text = json.dumps({"threat_appraisal": {"label": best["threat_appraisal.label"],
                                                "reason": "r"},
                           "coping_appraisal": {"label": best["coping_appraisal.label"],
                                                "reason": "r"},
                           "decision": best["decision"], "reason": ""})
        return ReplyPath(text, tuple(Token(c.encode()) for c in text), prompt)

    def sampler(self, request):
        """Replies are drawn from the weights as they are."""
        return UNDER_GRAMMAR

    def top_tokens(self, reply, prefix, k) -> list[Candidate]:
        written = b"".join(t.text for t in prefix).decode()
        field = next(f for f, key in (("decision", '"decision": "'),
                                      ("coping_appraisal.label", '"coping_appraisal"'),
                                      ("threat_appraisal.label", '"threat_appraisal"'))
                     if key in written)
        partial = written[written.rindex('"') + 1:]
        w = self.weigh(field, self.fields[field], reply.prompt)
        nxt: dict[str, float] = {}
        for value, weight in w.items():
            if value.startswith(partial) and len(value) > len(partial):
                c = value[len(partial)]
                nxt[c] = nxt.get(c, 0.0) + weight
        total = sum(nxt.values()) / 0.9
        ranked = sorted([*nxt.items(), ("|", 0.1 * total)], key=lambda kv: -kv[1])[:k]
        return [Candidate(Token(c.encode()), math.log(q / total)) for c, q in ranked]


def test_every_vignette_read_with_the_battery_prompts(scripted_experiment):
    result = read_battery(scripted_experiment(), backend=ScriptedBackend([]),
                          source=CharSource())
    arms = {v.vignette.arm for v in result.vignettes}
    assert arms == {"main", "reversed_order", "synonyms"}
    for v in result.vignettes:
        for measure in ("threat", "coping", "action"):
            assert sum(v.distribution(measure).values()) == pytest.approx(1.0)
        assert list(v.distribution("action")) == list(v.allowed)
        assert v.reply.field("decision").forbidden_mass == pytest.approx(0.1)
    main_base = next(v for v in result.vignettes if "action_order_invariance:base"
                     in v.vignette.uses)
    reversed_ = next(v for v in result.vignettes if v.vignette.arm == "reversed_order")
    assert reversed_.allowed == tuple(reversed(main_base.allowed))
    # the first action offered is the toy's favourite: 4 of 4 + (n - 1)
    n = len(main_base.allowed)
    assert reversed_.distribution("action")[reversed_.allowed[0]] == pytest.approx(4 / (n + 3))


def test_level_means_say_whether_beliefs_move_with_the_facts(scripted_experiment):
    result = read_battery(scripted_experiment(), backend=ScriptedBackend([]),
                          source=CharSource())
    depth = next(t for t in result.level_means() if t["test"] == "threat_rises_with_depth")
    # no flood: VL 4/8 (rank 0); a flood: H 4/8 (rank 3); the other labels 1/8 each
    assert [lv["mean"] for lv in depth["levels"]] == pytest.approx([10 / 8, 19 / 8, 19 / 8])
    assert depth["measure"] == "threat" and depth["expect"] == "increase"
    insurance = next(t for t in result.level_means()
                     if t["test"] == "insurance_falls_with_premium")
    assert all(0.0 <= lv["mean"] <= 1.0 for lv in insurance["levels"])
    data = result.to_json()
    assert len(data["vignettes"]) == len(result.vignettes) and data["labels"][0] == "VL"
    assert data["provenance"]["source"] == "toy characters"


def test_a_backend_without_token_probabilities_is_a_clear_error(scripted_experiment):
    with pytest.raises(LLMError, match="the scripted backend .* cannot be read"):
        read_battery(scripted_experiment())


def test_the_readout_command(scripted_file, capsys, tmp_path):
    assert main(["readout", str(scripted_file), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "scripted backend" in err and "llm.backend: embedded" in err
    assert main(["readout", str(scripted_file), "--top-k", "0"]) == 2


def test_a_vignettes_request_is_the_one_the_battery_sends(scripted_experiment, tmp_path):
    """The readout reads the request the sampled battery's broker sends first for a vignette.

    Messages, schema, sampling and seed: asked through the Prober, the same request arrives.
    """
    from governed_broker.validity.battery import load_battery
    from governed_broker.validity.plan import plan_battery
    from governed_broker.validity.probe import Prober
    from governed_broker.validity.readout import vignette_request
    from governed_broker.validity.situations import zone_probabilities

    experiment = scripted_experiment()
    config = experiment.config
    battery = load_battery(config.resolve_path(config.validity.battery_dir), experiment.domain)
    plan = plan_battery(battery, experiment.domain, zone_probabilities(experiment))
    one = next(v for v in plan.vignettes.values() if v.arm == "synonyms")
    plan.vignettes = {one.key: one}
    one.replicates = 1
    backend = ScriptedBackend([ScriptRule(".", {
        "threat_appraisal": {"label": "M", "reason": "r"},
        "coping_appraisal": {"label": "M", "reason": "r"},
        "decision": "do_nothing", "reason": "r"})])
    prober = Prober(experiment, plan, tmp_path, backend=backend)
    expected, _ = vignette_request(prober, one)
    prober.ask()
    assert backend.calls[0] == expected
