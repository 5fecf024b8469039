"""Backends come from a name registry: a new one is one module plus one ``LLM_BACKENDS`` entry.

The toy backend below is that one module (here, this test file): it answers every decision
with the same well-formed reply. Registering it lets a governed run use it end to end.
"""

from __future__ import annotations

import json

import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.llm import LLM_BACKENDS
from governed_broker.llm.base import LLMBackend, LLMError, LLMRequest, LLMResponse
from governed_broker.llm.factory import build_backend
from governed_broker.runner import run_experiment

REPLY = {"threat_appraisal": {"label": "H", "reason": "floods here"},
         "coping_appraisal": {"label": "M", "reason": "some savings"},
         "decision": "do_nothing", "reason": "toy"}


class ToyBackend(LLMBackend):
    """Always the same reply (a stand-in for a new backend, not a model)."""

    kind = "toy"
    model_id = "toy:constant"
    supports_schema = True
    max_concurrency = 4

    async def achat(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(text=json.dumps(REPLY), parsed=dict(REPLY), backend=self.kind,
                           model=self.model_id)


def build_toy(cfg, base_dir) -> LLMBackend:
    """The toy backend's builder, as ``LLM_BACKENDS`` names it."""
    return ToyBackend()


def test_a_registered_backend_runs_a_governed_experiment(experiments, tmp_path,
                                                         monkeypatch) -> None:
    monkeypatch.setitem(LLM_BACKENDS, "toy", f"{__name__}:build_toy")
    config = experiments.config(["years=2", "population.size=5", "decision.maker=llm",
                                 'llm={"backend": "toy", "cache": {"mode": "off"}}'])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    records = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert len(records) == 10 and {r["executed_action"] for r in records} == {"do_nothing"}
    assert json.loads((out / "manifest.json").read_text())["llm"]["backend"]["kind"] == "toy"


class RecordingToyBackend(ToyBackend):
    """The toy backend, keeping the requests it was sent."""

    requests: list[LLMRequest] = []

    async def achat(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return await super().achat(request)


def build_recording_toy(cfg, base_dir) -> LLMBackend:
    """Builder of the recording toy backend."""
    return RecordingToyBackend()


def test_the_manifest_records_the_sampling_every_request_carried(experiments, tmp_path,
                                                                 monkeypatch) -> None:
    monkeypatch.setitem(LLM_BACKENDS, "toy", f"{__name__}:build_recording_toy")
    monkeypatch.setattr(RecordingToyBackend, "requests", [])
    config = experiments.config(["years=1", "population.size=3", "decision.maker=llm",
                                 'llm={"backend": "toy", "cache": {"mode": "off"}, "top_k": 20}'])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    # a model outside the catalogue: temperature 0.7, top_k as set, the rest the server's
    sampling = {"temperature": 0.7, "top_p": None, "top_k": 20, "min_p": None}
    assert json.loads((out / "manifest.json").read_text())["llm"]["sampling"] == sampling
    sent = {(r.temperature, r.top_p, r.top_k, r.min_p) for r in RecordingToyBackend.requests}
    assert sent == {tuple(sampling.values())}


def test_an_unknown_backend_is_a_configuration_error(experiments) -> None:
    with pytest.raises(ConfigError, match="unknown backend 'tiny'; registered: embedded"):
        experiments.config(["decision.maker=llm", 'llm={"backend": "tiny"}'])


def test_a_broken_registry_entry_says_so(experiments, monkeypatch) -> None:
    monkeypatch.setitem(LLM_BACKENDS, "ghost", "no_such_module:build")
    config = experiments.config(["decision.maker=llm", 'llm={"backend": "ghost"}'])
    with pytest.raises(LLMError, match="cannot load its builder 'no_such_module:build'"):
        build_backend(config.llm)
