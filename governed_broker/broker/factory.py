"""Build the governed LLM decision maker of an experiment (``decision.maker: llm``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from governed_broker.broker.cohort import CohortBroker
from governed_broker.broker.governed import GovernedBroker, RequestSettings
from governed_broker.broker.rules import RuleSet
from governed_broker.broker.skills import SkillRegistry
from governed_broker.cognition.context import ContextBuilder, KnowledgeProvider
from governed_broker.cognition.reflection import ReflectionEngine
from governed_broker.config.base import ConfigError
from governed_broker.config.broker import GovernanceRules
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.resolved import ResolvedExperiment, resolve_experiment
from governed_broker.llm.base import LLMBackend
from governed_broker.llm.sampling import resolve_sampling

#: Files the broker writes into the run directory.
DECISIONS_FILE = "decisions.jsonl"
REFLECTIONS_FILE = "reflections.jsonl"
COHORTS_FILE = "cohorts.jsonl"
CALL_LOG_FILE = "llm_calls.sqlite"


def governance_rules(experiment: ResolvedExperiment) -> tuple[SkillRegistry, GovernanceRules]:
    """The skill registry and the rule table of the experiment's domain (``agent_types``).

    With the experiment's ``governance.rule_severity`` applied.
    """
    config, agent_types = experiment.config, experiment.domain
    path = config.resolve_path(config.agent_types)
    registry = SkillRegistry.from_actions(agent_types.actions)
    rules = agent_types.governance
    if rules is None:
        if config.governance.profile != "disabled":
            raise ConfigError(
                f"{path}: there is no 'governance:' section, but governance.profile is "
                f"{config.governance.profile!r}; add the rules or set governance.profile: disabled"
            )
        rules = GovernanceRules()
    if config.governance.rule_severity:
        try:
            rules = rules.with_severities(config.governance.profile,
                                          config.governance.rule_severity)
        except ValueError as exc:
            raise ConfigError(f"governance.rule_severity: {path}: {exc}") from None
    return registry, rules


def build_context(experiment: ResolvedExperiment,
                  knowledge: KnowledgeProvider | None = None) -> ContextBuilder:
    """The context builder of an experiment.

    Its prompt templates, its actions' descriptions, its appraisal scale and the prompt limits of
    ``governance.context`` (no LLM needed).
    """
    config, ctx = experiment.config, experiment.config.governance.context
    registry = SkillRegistry.from_actions(experiment.domain.actions)
    return ContextBuilder.from_dir(
        config.resolve_path(ctx.prompts_dir),
        registry.descriptions(),
        experiment.domain.pmt_labels,
        token_budget=ctx.token_budget,
        max_memories=ctx.max_memories,
        max_reason_chars=ctx.max_reason_chars,
        appraisal_order=ctx.appraisal_order,
        knowledge=knowledge,
    )


def _knowledge(config: ExperimentConfig, backend: LLMBackend) -> Any:
    if not config.rag.enabled:
        return None
    from governed_broker.rag import KnowledgeBase

    return KnowledgeBase.from_config(config.rag, backend=backend, seed=config.seed,
                                    base_dir=config.base_dir)


def build_decision_maker(
    experiment: ResolvedExperiment | ExperimentConfig,
    run_dir: Path,
    backend: LLMBackend | None = None,
    knowledge: KnowledgeProvider | None = None,
) -> GovernedBroker:
    """The ``GovernedBroker`` of an experiment, writing its audit into ``run_dir``.

    Args:
        experiment: The resolved experiment (``llm:`` section required); a bare
            ``ExperimentConfig`` is resolved here (scripts and tests).
        run_dir: The run's output directory: ``decisions.jsonl``, ``reflections.jsonl`` (when
            reflection is on) and ``llm_calls.sqlite`` are written there.
        backend: A ready backend (tests); by default ``backend_from_config(config.llm)`` with
            the response cache and the call log.
        knowledge: A ready knowledge provider; by default the knowledge base when
            ``rag.enabled``.

    Raises:
        ConfigError: Missing ``llm:`` section, broken rule table or prompt templates.
    """
    if isinstance(experiment, ExperimentConfig):
        experiment = resolve_experiment(experiment)
    config = experiment.config
    if config.llm is None:
        raise ConfigError("decision.maker 'llm' needs an 'llm:' section in the experiment")
    run_dir = Path(run_dir)
    registry, rules = governance_rules(experiment)
    scale = experiment.domain.pmt_labels
    ruleset = RuleSet(rules, config.governance.profile, registry, scale.labels)
    if backend is None:
        from governed_broker.llm import backend_from_config

        backend = backend_from_config(
            config.llm, call_log_path=run_dir / CALL_LOG_FILE, base_dir=config.base_dir
        )
    if knowledge is None:
        knowledge = _knowledge(config, backend)
    context = build_context(experiment, knowledge)
    prompts_dir = config.resolve_path(config.governance.context.prompts_dir)
    run_id = experiment.run_id
    sampling = resolve_sampling(config.llm)
    reflection = None
    if config.reflection.enabled:
        reflection = ReflectionEngine.from_dir(
            prompts_dir,
            backend,
            config.reflection,
            seed=config.seed,
            run_id=run_id,
            sampling=sampling,
            num_ctx=config.llm.num_ctx,
            log_path=run_dir / REFLECTIONS_FILE,
        )
    kwargs: dict[str, Any] = {}
    klass: type[GovernedBroker] = GovernedBroker
    if config.cohort.enabled:
        klass = CohortBroker
        kwargs = {"cohort": config.cohort, "cohort_log_path": run_dir / COHORTS_FILE}
    return klass(
        backend,
        context,
        registry,
        ruleset,
        config.governance,
        seed=config.seed,
        run_id=run_id,
        request=RequestSettings(
            sampling=sampling,
            max_tokens=config.llm.max_tokens,
            num_ctx=config.llm.num_ctx,
        ),
        audit_path=run_dir / DECISIONS_FILE,
        reflection=reflection,
        **kwargs,
    )
