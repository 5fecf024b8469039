"""``validate --readout distribution``: a card judged from the model's exact distributions.

The battery's vignettes are read once from the model's token probabilities
(``validity.readout``) and every test is judged from the distributions (``validity.exact``).
The card says so: its ``readout.kind`` is ``distribution`` (a sampled card's is ``sampled``),
its key is the sampled card's key hashed again with the readout's settings, so a run's gate,
which looks for the sampled key, never takes it for a sampled card, and it stores every
vignette's threat, coping and action distributions (``distributions``, each summing to 1).
A readout saved by ``governed-broker readout --json`` can be judged again without the model
(``--distributions FILE``) when it was made for this configuration (its ``configuration_key``).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from governed_broker.config.base import ConfigError
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.llm.base import LLMBackend
from governed_broker.llm.readout import ReadoutSettings, TokenSource
from governed_broker.run_dir import RunLock, check_out_dir, write_atomic
from governed_broker.validity.card import card_identity, make_card
from governed_broker.validity.exact import FIELD_OF, exact_tests, laws_from_readout
from governed_broker.validity.readout import ProgressLine, read_battery
from governed_broker.validity.store import cards_dir, save_card
from governed_broker.validity.validate import (
    Prepared,
    Validation,
    empty_work_dir,
    prepare,
    publish_card,
)

#: The readout's own file in a card's directory (every distribution and the positions read).
READOUT_FILE = "readout.json"
#: How far a distribution may stray from summing to 1 (rounding) before it is refused.
SUM_TOLERANCE = 1e-6


def readout_key(sampled_key: str, settings: ReadoutSettings, primary_only: bool) -> str:
    """The key of a distribution card: the sampled card's key with the readout's settings.

    Sampled accounts, the pruning of improbable token paths, the sampler's view and the reuse
    of the first account's prompt evaluation enter the key only when they are used, so a
    readout made before any existed keeps its key.
    """
    facts: dict[str, Any] = {"configuration": sampled_key, "readout": "distribution",
                             "top_k": settings.top_k, "primary_only": primary_only}
    if settings.accounts:
        facts["accounts"] = settings.accounts
    if settings.min_path_mass:
        facts["min_path_mass"] = settings.min_path_mass
    if settings.view != "model":
        facts["view"] = settings.view
    if settings.prompt_reuse and settings.accounts > 1:
        facts["prompt_reuse"] = True
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_saved(path: Path, prepared: Prepared) -> dict[str, Any]:
    """A saved readout of this configuration (``governed-broker readout --json``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--distributions {path}: not a readable readout ({exc})") from None
    made_for = (data.get("provenance") or {}).get("configuration_key") \
        if isinstance(data, dict) else None
    if made_for != prepared.key:
        raise ConfigError(f"--distributions {path}: made for configuration "
                          f"{str(made_for)[:12]}..., not this one ({prepared.key[:12]}...: "
                          "model, prompts, domain and battery); read it again with "
                          "`governed-broker readout --json`")
    for v in data.get("vignettes", []):
        planned = prepared.plan.vignettes.get(v.get("vignette"))
        if planned is None or planned.spec.model_dump(mode="json") != v.get("spec"):
            raise ConfigError(f"--distributions {path}: vignette {v.get('vignette')!r} is not "
                              "the battery's")
    return data


def check_sums(vignettes: list[dict[str, Any]], where: str) -> None:
    """Every distribution sums to 1 (a readout that does not is refused, never carded)."""
    for v in vignettes:
        for measure in FIELD_OF:
            total = sum(v[measure].values())
            if abs(total - 1.0) > SUM_TOLERANCE:
                raise ConfigError(f"{where}: the {measure} distribution of vignette "
                                  f"{v['vignette']} sums to {total}, not 1")


def validate_distribution(experiment: ResolvedExperiment, out_dir: Path | None = None, *,
                          settings: ReadoutSettings | None = None, primary_only: bool = False,
                          saved: Path | None = None, overwrite: bool = False,
                          progress: bool = True, source: dict[str, Any] | None = None,
                          backend: LLMBackend | None = None,
                          token_source: TokenSource | None = None,
                          store: bool = True) -> Validation:
    """Read the battery's distributions (or take a saved readout), judge and store the card.

    Args:
        experiment: The experiment (``decision.maker: llm``).
        out_dir: Output directory (default ``outputs/<name>-validity-readout``).
        settings: Top-k, sampled accounts and view of the readout (a saved readout: its own).
        primary_only: Read only the primary tests' vignettes (the others not measurable).
        saved: A readout JSON of this configuration to judge instead of reading the model.
        overwrite: Replace an existing output directory of ``validate``.
        progress: Report progress on stderr.
        source: The experiment file and ``--set`` options, recorded in the card.
        backend: A ready backend (tests).
        token_source: Ready token probabilities (tests).
        store: Store the card in the cards directory (reference respondents' cards are not).

    Raises:
        ConfigError: no ``llm:`` section, a broken battery, a saved readout of another
            configuration, an output directory in the way.
        LLMError: the backend gives no token probabilities.
    """
    settings = settings or ReadoutSettings()
    prepared = prepare(experiment)
    plan = prepared.plan
    default = Path("outputs") / f"{experiment.config.name}-validity-readout"
    out = check_out_dir(out_dir if out_dir is not None else default)
    with RunLock(out):
        work = empty_work_dir(out, overwrite)
        wall = time.perf_counter()
        if saved is not None:  # judged as it was read
            data = _read_saved(saved, prepared)
            primary_only = bool(data["provenance"].get("primary_only", False))
            made = data["provenance"]  # readouts made before a setting existed: without it
            settings = ReadoutSettings(top_k=int(made["top_k"]),
                                       accounts=int(made.get("accounts", 0)),
                                       min_path_mass=float(made.get("min_path_mass", 0.0)),
                                       view=str(made.get("view", "model")),
                                       prompt_reuse=bool(made.get("prompt_reuse", False)))
        else:
            data = read_battery(experiment, settings, backend=backend, source=token_source,
                                progress=ProgressLine() if progress else None,
                                primary_only=primary_only).to_json()
        check_sums(data["vignettes"], str(saved or "the readout"))
        prompts = {k: h for k, _, h in card_identity(experiment, plan)["prompts"]}
        results = exact_tests(plan, laws_from_readout(data["vignettes"]), experiment.domain,
                              prompts)
        key = readout_key(prepared.key, settings, primary_only)
        readout = {"kind": "distribution", "configuration_key": prepared.key,
                   "primary_only": primary_only, "from_file": str(saved) if saved else None,
                   **{k: v for k, v in data["provenance"].items()
                      if k not in ("configuration_key", "primary_only")}}
        facts = {"experiment": source or {},
                 "timing": {"wall_s": data["provenance"]["wall_s"],
                            "judge_s": round(time.perf_counter() - wall, 1)},
                 "battery": {"seed": plan.battery.tests.seed, "alpha": plan.battery.tests.alpha,
                             "vignettes": len(data["vignettes"]),
                             "sampled_budget": prepared.budget.to_json()}}
        card = make_card(key, experiment, plan.battery, results,
                         {"model": data["provenance"]["model"]}, facts, readout=readout)
        card["distributions"] = [{"vignette": v["vignette"], "arm": v["arm"],
                                  "uses": v["uses"], **{m: v[m] for m in FIELD_OF}}
                                 for v in data["vignettes"]]
        write_atomic(work / READOUT_FILE, json.dumps(data, indent=1) + "\n")
        publish_card(work, out, card)
    stored = save_card(card, cards_dir(experiment.config)) if store else None
    return Validation(card, out, stored, results)
