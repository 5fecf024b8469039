"""The experiment configuration: one YAML file a user runs.

Sections live in modules of their own (``world``, ``memory``, ``llm``, ``broker``, ``sweep``);
this module composes them. Relative paths inside an experiment file are resolved against the
directory of that file, so an experiment runs the same from any working directory.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator

from governed_broker.config.base import StrictModel, portable_name_problem
from governed_broker.config.broker import GovernanceConfig, RAGConfig, ReflectionConfig
from governed_broker.config.calibration import CalibrationConfig
from governed_broker.config.cohort import CohortConfig
from governed_broker.config.institutions import InstitutionsConfig
from governed_broker.config.limits import RunLimits
from governed_broker.config.llm import LLMConfig
from governed_broker.config.memory import MemoryConfig
from governed_broker.config.policy import PolicyChangeConfig, apply_settings
from governed_broker.config.sweep import SweepConfig
from governed_broker.config.validity import ValidityConfig
from governed_broker.config.world import (
    BuyoutConfig,
    DamageConfig,
    DecisionConfig,
    ElevationConfig,
    FilePath,
    FinanceConfig,
    HazardConfig,
    InsuranceConfig,
    NetworkConfig,
    OutputConfig,
    PopulationConfig,
    RelocationConfig,
    TrustConfig,
)


class ExperimentConfig(StrictModel):
    """A complete, validated experiment.

    Attributes:
        name: Run name (see the field's description).
        description: Free text for people; copied into ``config.yaml``, changes no output.
        seed: Root of every random stream of the run (population, hazard, network, memory, LLM).
        years: Simulated years (one step = one year).
        agent_types: The behavioural domain file: actions, PMT labels, memory, governance rules.
        population: Where the households come from (a CSV or distributions).
        hazard: Floods: a fixed schedule or stochastic zones.
        damage: The depth-damage table.
        insurance: Premiums, limits, deductibles and payouts of flood insurance.
        elevation: Height, cost and subsidy of elevating a house.
        relocation: Moving costs and buyout share of relocating.
        buyout: The buyout programme's offers to repetitively flooded owners (none by default).
        finance: Savings, the protection budget, repair financing (aid, loans) and forced sales.
        network: The neighbour graph households look at.
        trust: Yearly updates of trust in insurance and in neighbours.
        decision: Who decides: the rule-based ``baseline`` or the governed ``llm`` broker.
        memory: Which memory engine households have, and per-experiment parameter overrides.
        llm: The language model (needed when ``decision.maker`` is ``llm``).
        governance: Rule profile, retries and prompt templates of the governed broker.
        reflection: Yearly reflection (LLM runs).
        cohort: Cohort mode for basin-size populations (LLM runs; off by default).
        rag: The knowledge base households may consult (LLM runs).
        outputs: Optional outputs: plots, progress bar, memory Markdown.
        limits: Sizes above which a run must be confirmed; not part of the run hash.
        validity: The behavioural-validity battery and the gate on runs; not in the run hash.
        sweep: The parameter sweep built on this experiment (``governed-broker sweep``).
        calibration: The targets ``governed-broker calibrate`` scores the sweep against.
        policy_change: Policy settings in force from a later year (``config.policy``).
        institutions: A government and an insurer that set the policy levers each year before
            the households decide (``config.institutions``; absent: the settings hold).
    """

    name: str = Field(
        min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="run name; the default output is outputs/<name>, so it starts with a letter "
                    "or digit (never '.' or '..') and has no separators",
    )
    description: str = ""
    seed: int = Field(ge=0, le=2**63 - 1)
    years: int = Field(ge=1, le=1000)
    agent_types: FilePath = Path("../agent_types.yaml")
    population: PopulationConfig
    hazard: HazardConfig
    damage: DamageConfig
    insurance: InsuranceConfig
    elevation: ElevationConfig
    relocation: RelocationConfig
    buyout: BuyoutConfig | None = None
    finance: FinanceConfig
    network: NetworkConfig = NetworkConfig()
    trust: TrustConfig
    decision: DecisionConfig
    memory: MemoryConfig = MemoryConfig()
    llm: LLMConfig | None = None
    governance: GovernanceConfig = GovernanceConfig()
    reflection: ReflectionConfig = ReflectionConfig()
    cohort: CohortConfig = CohortConfig()
    rag: RAGConfig = RAGConfig()
    outputs: OutputConfig = OutputConfig()
    limits: RunLimits = RunLimits()
    validity: ValidityConfig = ValidityConfig()
    sweep: SweepConfig | None = None
    calibration: CalibrationConfig | None = None
    policy_change: PolicyChangeConfig | None = None
    institutions: InstitutionsConfig | None = None

    @field_validator("name")
    @classmethod
    def _name_is_not_a_work_file(cls, name: str) -> str:
        # outputs/<name>.partial and .lock belong to the run <name>; a run so named would
        # collide with another run's working directory or lock
        if name.endswith((".partial", ".lock")):
            raise ValueError("must not end in '.partial' or '.lock' (names of a run's work files)")
        problem = portable_name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        return name

    @model_validator(mode="after")
    def _policy_change_fits(self) -> ExperimentConfig:
        if self.policy_change is not None:
            if self.policy_change.from_year > self.years:
                raise ValueError(
                    f"policy_change.from_year {self.policy_change.from_year} is after the last "
                    f"year ({self.years}); the change would never be in force")
            self.with_policy_change()  # every changed section validates
        return self

    @model_validator(mode="after")
    def _buyout_applications_are_for_the_baseline(self) -> ExperimentConfig:
        """A programme that takes applications needs households that can be told how to apply.

        No household prompt states an application yet, so an LLM household would see the
        buyout action open without a word of what choosing it means.
        """
        if self.decision.maker != "llm":
            return self
        later = self.with_policy_change().buyout if self.policy_change is not None else None
        for where, programme in (("buyout", self.buyout),
                                 ("policy_change.settings.buyout", later)):
            if programme is not None and programme.offer_delay_years:
                raise ValueError(
                    f"{where}.offer_delay_years is {programme.offer_delay_years}: LLM "
                    "households cannot apply to a buyout programme yet (no prompt says how); "
                    "set it to 0 or use decision.maker: baseline")
        return self

    @model_validator(mode="after")
    def _required_start_within_initial_insured(self) -> ExperimentConfig:
        """Required households start insured, within the population's initial insured share."""
        required, generate = self.insurance.mandatory_purchase, self.population.generate
        if required is None or generate is None:
            return self
        share = required.mortgage_share * required.compliance_share
        # a zone the population does not have is reported by the zone check
        for zone in (z for z in required.zones if z in generate.zone_shares):
            initial = generate.initial_insured.get(zone)
            owners = 0.0 if initial is None else initial.owner
            if share > owners + 1e-9:
                raise ValueError(
                    f"population.generate.initial_insured.{zone}.owner ({owners:g}) is below the "
                    f"share of owners whose lender requires a policy in the first year "
                    f"(insurance.mandatory_purchase: mortgage_share x compliance_share = "
                    f"{share:.3g}); they start the run insured, so raise initial_insured or "
                    "lower the requirement's shares")
        return self

    def with_policy_change(self) -> ExperimentConfig:
        """The experiment as it stands from ``policy_change.from_year`` (itself without one).

        Raises:
            ValueError: a changed setting the section does not accept.
        """
        if self.policy_change is None:
            return self
        return self.with_settings(self.policy_change.settings)

    def with_settings(self, settings: dict[str, Any]) -> ExperimentConfig:
        """The experiment with some policy settings changed.

        Settings are dotted paths of ``config.policy``, e.g. ``{"insurance.loading": 1.2}``: a
        policy change, or the levers institutions put in force for a year. The changed sections are
        validated again.

        Raises:
            ValueError: a changed setting the section does not accept.
        """
        names = {k.split(".")[0] for k in settings}
        sections = {name: getattr(self, name) for name in names}
        models = {name: _section_model(type(self).model_fields[name].annotation)
                  for name in names}
        return self.model_copy(update=apply_settings(sections, models, settings))

    #: Directory that relative paths are resolved against (the experiment file's folder).
    _base_dir: Path | None = PrivateAttr(default=None)

    @property
    def base_dir(self) -> Path:
        """Directory relative paths are resolved against (current directory if unknown)."""
        return self._base_dir if self._base_dir is not None else Path.cwd()

    def with_base_dir(self, base_dir: Path) -> ExperimentConfig:
        """A copy whose relative paths resolve against ``base_dir``."""
        copy = self.model_copy()
        copy._base_dir = Path(base_dir)
        return copy

    def resolve_path(self, path: Path) -> Path:
        """``path`` resolved against the experiment file's directory (absolute paths as is)."""
        path = Path(path)
        return path if path.is_absolute() else (self.base_dir / path).resolve()


def _section_model(annotation: Any) -> type[BaseModel]:
    """The model class of a section annotated ``Model`` or ``Model | None``."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise TypeError(f"not a section: {annotation!r}")  # pragma: no cover - a programming error
