"""The validity card: what the battery found, keyed by what it was run on.

**Key.** A card belongs to one configuration: the model (backend, model name and file identity,
sampling settings), every prompt the battery sends (rendered by the experiment's context builder
from its templates and the battery's vignettes in its world), the templates of the re-ask
messages, the domain (actions, scale, rules), the governance settings (profile, retry budgets,
prompt limits), the knowledge base when one is used, and the battery itself (vignettes, tests,
thresholds, replicates, quick or not). ``card_key`` hashes all of it (sha256 of canonical JSON);
no model call is needed, so a run computes the key of its own configuration at start-up in a
fraction of a second and finds its card. The experiment seed, population, years and world
settings that do not reach the battery's prompts are not part of the key: every run of a sweep
over seeds shares one card.
Cards are stored by ``validity.store``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_broker.broker.factory import build_context
from governed_broker.cognition.context import ContextBuilder
from governed_broker.config.base import ConfigError
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.llm.sampling import resolve_sampling
from governed_broker.validity import CALIBRATION_VERSION
from governed_broker.validity.battery import Battery
from governed_broker.validity.measures import RESPONSIVENESS
from governed_broker.validity.plan import BatteryPlan
from governed_broker.validity.probe import battery_experiment, synonym_context
from governed_broker.validity.situations import SituationBuilder
from governed_broker.validity.store import CARD_FORMAT

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.validity.measures import TestResult


def _sha256_tree(path: Path) -> dict[str, str]:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return {p.relative_to(path).as_posix() if path.is_dir() else p.name:
            hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def model_identity(config: ExperimentConfig) -> dict[str, Any]:
    """The model as the configuration names it, and the settings that shape its replies.

    A catalogue model is identified by its name and pinned sha256, a scripted backend by its
    script's sha256, a local GGUF (``model_path``) by its path, size and modification time,
    a server model (Ollama, OpenAI-compatible) by its name only: re-pulling a tag with new
    weights is not noticed (docs/validity.md).
    """
    llm = config.llm
    assert llm is not None
    # the sampling the requests carry (catalogue defaults included), unset options left out so
    # that a card's key does not change when an option it never set is added
    sampling = {k: v for k, v in asdict(resolve_sampling(llm)).items() if v is not None}
    identity: dict[str, Any] = {"backend": llm.backend, "model": llm.model, **sampling,
                                "max_tokens": llm.max_tokens, "num_ctx": llm.num_ctx}
    if llm.backend == "embedded" and llm.model_path is None:
        from governed_broker.llm.catalogue import default_model_name, get_model_spec

        spec = get_model_spec(llm.model or default_model_name())
        identity.update(model=spec.name, sha256=spec.sha256)
    if llm.model_path is not None:
        path = config.resolve_path(llm.model_path)
        stat = path.stat()
        identity.update(model_path=str(path), size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    if llm.script is not None:
        identity["script_sha256"] = _sha256_tree(config.resolve_path(llm.script))
    if llm.backend == "embedded" and not llm.prompt_cache:
        identity["prompt_cache"] = False  # other replies (left out when on: keys unchanged)
    if llm.backend == "embedded":
        from governed_broker.llm.embedded import default_threads

        identity["threads"] = llm.threads or default_threads()  # replies depend on it
    return identity


def rendered_prompts(experiment: ResolvedExperiment, plan: BatteryPlan,
                     context: ContextBuilder) -> list[list[Any]]:
    """``[vignette key, replicates, context hash]`` of every vignette of the battery.

    The hash is of its first request as the experiment's context builder renders it
    (knowledge-base chunks left out: their documents are hashed instead). The replicates of a
    vignette differ only in their household id and request seed, which no prompt states, so one
    rendering stands for all.
    """
    battery_exp = battery_experiment(experiment, plan.battery.tests.seed)
    builder = SituationBuilder(battery_exp, plan.battery.tests.seed)
    synonyms = synonym_context(context, plan.battery.vignettes.synonyms)
    order = tuple(reversed(battery_exp.domain.actions))
    out = []
    for v in plan.vignettes.values():
        situation = builder.build(v.spec, v.agent_id(0),
                                  order if v.arm == "reversed_order" else None)
        ctx = synonyms if v.arm == "synonyms" else context
        out.append([v.key, v.replicates, ctx.build(situation, chunks=[]).context_hash])
    return out


def card_identity(experiment: ResolvedExperiment, plan: BatteryPlan) -> dict[str, Any]:
    """Everything a card depends on (see the module docstring)."""
    config = experiment.config
    context = build_context(experiment)
    governance = config.governance.model_dump(mode="json")
    governance.pop("audit", None)  # what the audit records changes no reply
    knowledge = None
    if config.rag.enabled:
        topics = config.rag.topics_file or config.rag.knowledge_dir / "rag_topics.yaml"
        knowledge = {"settings": config.rag.model_dump(mode="json"),
                     "documents": _sha256_tree(config.resolve_path(config.rag.knowledge_dir)),
                     "topics": _sha256_tree(config.resolve_path(topics))}
    return {
        "card_format": CARD_FORMAT,
        "model": model_identity(config),
        "governance": governance,
        "domain": experiment.domain.model_dump(mode="json"),
        "templates": {"templates": {k: t.template for k, t in context.templates.templates.items()},
                      "extra": json.loads(json.dumps(context.templates.extra, default=str))},
        "prompts": rendered_prompts(experiment, plan, context),
        "knowledge": knowledge,
        "battery": plan.battery.identity(),
    }


def card_key(experiment: ResolvedExperiment, plan: BatteryPlan) -> str:
    """The key of the card of this configuration (hex sha256 of ``card_identity``)."""
    text = json.dumps(card_identity(experiment, plan), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verdict(results: list[TestResult]) -> tuple[bool, str]:
    """Whether the card passes, and why in one sentence.

    It passes when every primary test that can give a verdict passes, at least one of them a
    test of a response to the facts (``measures.RESPONSIVENESS``: a respondent deaf to every
    fact passes the order test); not informative primary tests are left out, and said so.
    """
    primary = [r for r in results if r.primary]
    judged = [r for r in primary if r.outcome != "not_informative"]
    left_out = [r.name for r in primary if r.outcome == "not_informative"]
    short = [f"{r.name} ({r.outcome.replace('_', ' ')})" for r in judged if r.outcome != "pass"]
    responsive = any(r.family in RESPONSIVENESS for r in judged)
    passed = responsive and not short
    if passed:
        text = f"passed: all {len(judged)} primary tests passed"
    elif not judged:
        text = "not passed: no primary test could give a verdict"
    elif not responsive:
        text = ("not passed: no primary test of a response to the facts ("
                f"{', '.join(RESPONSIVENESS)}) could give a verdict")
    else:
        text = f"not passed: {len(short)} of {len(judged)} primary tests did not pass: " + \
            ", ".join(short)
    if left_out:
        text += f" ({', '.join(left_out)} not informative for this configuration)"
    return passed, text


def make_card(key: str, experiment: ResolvedExperiment, battery: Battery,
              results: list[TestResult], provenance: dict[str, Any],
              facts: dict[str, Any], readout: dict[str, Any] | None = None) -> dict[str, Any]:
    """The card as JSON-ready data.

    Args:
        key: ``card_key`` of the configuration.
        experiment: The experiment validated.
        battery: The battery run.
        results: Every test's result.
        provenance: The broker's model identity and call/cache statistics.
        facts: Where it came from and what it took (``experiment``, ``battery``, ``timing``).
        readout: How the replies were obtained: ``{"kind": "distribution", ...}`` for a card
            judged from the model's distributions (``validity.readout_card``); default
            ``{"kind": "sampled"}``.
    """
    from governed_broker import __version__

    tests = [r.to_json() for r in results]
    counts = {"tests": len(tests),
              **{name: sum(t["outcome"] == name for t in tests)
                 for name in ("pass", "fail", "inconclusive", "not_informative",
                              "not_measurable")}}
    summary = {"tests": counts["tests"], "passed": counts["pass"], "failed": counts["fail"],
               "inconclusive": counts["inconclusive"],
               "not_informative": counts["not_informative"],
               "not_measurable": counts["not_measurable"]}
    passed, why = verdict(results)
    if battery.quick:  # sized for a look, not for the battery's power: never a pass
        passed, why = False, f"not passed: a quick card never passes (its tests: {why})"
    calibration = calibration_of(battery)
    for test in tests:
        test["calibration"] = calibration.get("tests", {}).get(test["name"])
    config = experiment.config
    card = {
        "card_format": CARD_FORMAT,
        "key": key,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "governed_broker": __version__,
        "readout": readout or {"kind": "sampled"},
        "passed": passed,
        "verdict": why,
        "quick": battery.quick,
        "summary": summary,
        "primary": battery.tests.primaries,
        "configuration": {
            "experiment": config.name,
            "model": model_identity(config),
            "profile": config.governance.profile,
            "prompts_dir": str(config.resolve_path(config.governance.context.prompts_dir)),
            "agent_types": str(config.resolve_path(config.agent_types)),
            "battery_dir": str(battery.directory.resolve()),
            **facts.get("experiment", {}),
        },
        "scale": list(experiment.domain.pmt_labels.labels),
        "battery": facts.get("battery", {}),
        "calibration": {k: v for k, v in calibration.items() if k != "tests"},
        "llm": provenance,
        "timing": facts.get("timing", {}),
        "tests": tests,
    }
    return json.loads(json.dumps(card))  # exactly what the file will hold (string keys)


#: The calibration of a battery by the reference respondents, in its directory.
CALIBRATION_FILE = "calibration.json"


def battery_sha256(battery: Battery) -> str:
    """The sha256 of the battery's content (what a calibration was made for)."""
    text = json.dumps(battery.identity(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def calibration_of(battery: Battery) -> dict[str, Any]:
    """What the battery's ``calibration.json`` says about it.

    Per test, how often each reference respondent passed it (``tests``), with how it was made;
    ``status`` says whether it belongs to this battery and this judging code (``current``), to
    another (``out_of_date``: the battery was edited, or ``CALIBRATION_VERSION`` bumped, since)
    or is ``missing``. A quick battery is never calibrated.
    """
    path = battery.directory / CALIBRATION_FILE
    if battery.quick:
        return {"status": "not_calibrated", "note": "quick battery"}
    if not path.is_file():
        return {"status": "missing", "file": str(path)}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable calibration ({exc}); regenerate it with "
                          "the command in docs/validity.md") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), dict):
        raise ConfigError(f"{path}: not a calibration (no 'tests' object); regenerate it")
    if data.get("battery_sha256") != battery_sha256(battery):
        return {"status": "out_of_date", "file": str(path),
                "note": "the battery changed since it was calibrated; regenerate it"}
    if data.get("calibration_version") != CALIBRATION_VERSION:
        return {"status": "out_of_date", "file": str(path),
                "note": f"made by judging code of calibration version "
                f"{data.get('calibration_version')}, this is {CALIBRATION_VERSION}; regenerate it"}
    return {"status": "current", "file": str(path),
            **{k: v for k, v in data.items()
               if k not in ("battery_sha256", "calibration_version", "first_seed")}}
