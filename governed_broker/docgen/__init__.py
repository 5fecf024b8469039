"""Sections of the documentation generated from the code, and the check that they do not drift.

A page under ``docs/`` marks a generated section with two HTML comments::

    <!-- generated: NAME (python -m governed_broker.docgen) -->
    ...written by this module...
    <!-- end generated: NAME -->

``python -m governed_broker.docgen`` rewrites every marked section from ``SECTIONS``;
``python -m governed_broker.docgen --check`` only compares and exits 1 naming each page and
section that differs (the test suite runs the same comparison). The sections are the output
column tables (``contracts/columns.py``), the facts institutions observe and the rules of the
shipped ``institutions.yaml``, the configuration reference (the pydantic models of
``config/``), the registries of LLM backends, memory engines, hazard modes, policy
instruments and institutions, the worked decision example (``worked_example.py``: the real
broker with a scripted model), and the ODD+D page's parameter table (every sourced section of
``experiments/baseline.yaml``) and action table (``agent_types.yaml``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from governed_broker.config import institutions as institutions_config
from governed_broker.config import llm as llm_config
from governed_broker.config import memory as memory_config
from governed_broker.config import world as world_config
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.contracts.columns import (
    AGENT_YEARLY,
    INSTITUTIONS_YEARLY,
    MODEL_YEARLY_FIXED,
    Column,
)
from governed_broker.contracts.institutions import FACTS
from governed_broker.docgen.worked_example import worked_example

#: Repository root (the documentation is not part of the installed package).
REPO_ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[a-z0-9-]+) \(python -m governed_broker\.docgen\) -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- end generated: (?P=name) -->)",
    re.DOTALL,
)


# ------------------------------------------------------------------------------------------------
# output columns
# ------------------------------------------------------------------------------------------------

def column_table(columns: Sequence[Column]) -> str:
    """A Markdown table of output columns: name, kind, unit, decimals, empty allowed, meaning."""
    rows = ["| column | kind | unit | decimals | may be empty | meaning |",
            "|---|---|---|---|---|---|"]
    for c in columns:
        dec = "" if c.decimals is None else str(c.decimals)
        rows.append(f"| `{c.name}` | {c.kind} | {c.unit} | {dec} | "
                    f"{'yes' if c.nullable else ''} | {_cell(c.meaning)} |")
    return "\n".join(rows) + "\n"


def model_column_table() -> str:
    """``model_yearly.csv``: the fixed columns with the place of the per-action counts."""
    names = [c.name for c in MODEL_YEARLY_FIXED]
    cut = names.index("n_rejected")  # per-action counts come just before it
    action = Column("n_<action>", "int", "count",
                    "households that executed `<action>` this year: one column per action of "
                    "the run's `agent_types.yaml`, in its order")
    return column_table([*MODEL_YEARLY_FIXED[:cut], action, *MODEL_YEARLY_FIXED[cut:]])


# ------------------------------------------------------------------------------------------------
# configuration reference
# ------------------------------------------------------------------------------------------------

def config_reference() -> str:
    """Every key of the experiment YAML, section by section, from the pydantic models."""
    parts = []
    for path, model in _sections(ExperimentConfig, ""):
        title = f"`{path}`" if path else "top level"
        parts.append(f"#### {title}\n\n{_summary(model)}\n\n{_field_table(model)}")
    return "\n".join(parts)


def _sections(model: type[BaseModel], path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """(dotted path, model) for a model and every model nested in it, depth first."""
    yield path, model
    for name, field in model.model_fields.items():
        for suffix, sub in _nested(field.annotation):
            yield from _sections(sub, f"{path}.{name}{suffix}".lstrip("."))


def _nested(annotation: object) -> Iterator[tuple[str, type[BaseModel]]]:
    """Models inside an annotation, with the path suffix a mapping or list adds."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield "", annotation
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _nested(args[0])
    elif origin in (dict, typing.get_origin(typing.Mapping)) and len(args) == 2:
        for _, sub in _nested(args[1]):
            yield ".<name>", sub
    elif origin in (list, tuple) and args:
        for _, sub in _nested(args[0]):
            yield "[]", sub
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from _nested(arg)


def _summary(model: type[BaseModel]) -> str:
    """A model's docstring summary and the paragraph after it.

    The paragraph is left out when it is a section (``Attributes:``).
    """
    paragraphs = [p for p in inspect.cleandoc(model.__doc__ or "").split("\n\n") if p.strip()]
    kept = paragraphs[:1] + [p for p in paragraphs[1:2] if not _SECTION.match(p)]
    return _cell(" ".join(" ".join(kept).split()))


def _field_table(model: type[BaseModel]) -> str:
    rows = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    described = _docstring_fields(model)
    for name, field in model.model_fields.items():
        meaning = field.description or described.get(name, "")
        rows.append(f"| `{name}` | {_cell(_type_name(field.annotation))} | "
                    f"{_cell(_default(field))} | {_cell(_bounds(field.metadata))} | "
                    f"{_cell(meaning)} |")
    return "\n".join(rows) + "\n"


#: A Google-style docstring section's header line (``Attributes:``, ``Args:``).
_SECTION = re.compile(r"^[A-Z][a-z]+( [a-z]+)?:\s*$", re.M)


def _docstring_fields(model: type[BaseModel]) -> dict[str, str]:
    """First line of each ``name: meaning`` or ``` ``name``: meaning ``` entry of a docstring."""
    out: dict[str, str] = {}
    for line in (model.__doc__ or "").splitlines():
        match = re.match(r"\s*(?:``)?([a-z_][a-z0-9_]*)(?:``)?\s*(?:\([^)]*\))?:\s+(.+)", line)
        if match and match.group(1) in model.model_fields:
            out.setdefault(match.group(1), match.group(2).strip())
    return out


def _type_name(annotation: object) -> str:
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "section"
        return {"Path": "path", "str": "text", "float": "number", "int": "integer",
                "bool": "true/false"}.get(annotation.__name__, annotation.__name__)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict or str(origin).endswith("Mapping"):
        return f"mapping of {_type_name(args[1])}" if len(args) == 2 else "mapping"
    return str(annotation).replace("typing.", "")


def _default(field: typing.Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if isinstance(value, Path):
        value = value.as_posix()
    text = json.dumps(value, default=str)
    return f"`{text}`" if len(text) <= 40 else "(long; see the model)"


_BOUND_SIGNS = {annotated_types.Ge: ("ge", ">="), annotated_types.Gt: ("gt", ">"),
                annotated_types.Le: ("le", "<="), annotated_types.Lt: ("lt", "<"),
                annotated_types.MinLen: ("min_length", "length >="),
                annotated_types.MaxLen: ("max_length", "length <=")}


def _bounds(metadata: Sequence[object]) -> str:
    parts = []
    for item in metadata:
        sign = _BOUND_SIGNS.get(type(item))
        if sign is not None:
            value = getattr(item, sign[0])
            parts.append(f"{sign[1]} {value:g}" if isinstance(value, float) else
                         f"{sign[1]} {value}")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------------
# ODD+D: the default experiment's parameters and the action table
# ------------------------------------------------------------------------------------------------

DEFAULT_EXPERIMENT = REPO_ROOT / "experiments" / "baseline.yaml"


def _sourced(data: dict, path: str) -> Iterator[tuple[str, dict]]:
    """(dotted path, mapping) for every mapping of ``data`` that has a ``source``."""
    if "source" in data:
        yield path, data
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _sourced(value, f"{path}.{key}".lstrip("."))


def _flat(data: dict, prefix: str = "") -> list[str]:
    """``key = value`` for every setting of a mapping except sources and nested sources."""
    out = []
    for key, value in data.items():
        if key == "source" or (isinstance(value, dict) and "source" in value):
            continue
        if isinstance(value, dict):
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append(f"`{prefix}{key}` = {json.dumps(value)}")
    return out


def parameter_table(path: Path = DEFAULT_EXPERIMENT) -> str:
    """Every sourced section of the default experiment: its settings and its source."""
    from governed_broker.config.yamlsafe import read_yaml

    rows = ["| section | settings | source |", "|---|---|---|"]
    for section, data in _sourced(read_yaml(path), ""):
        rows.append(f"| `{section}` | {_cell('; '.join(_flat(data)))} | "
                    f"{_cell(' '.join(str(data['source']).split()))} |")
    return "\n".join(rows) + "\n"


def action_table(path: Path = REPO_ROOT / "agent_types.yaml") -> str:
    """The actions of the shipped domain: id, effect, who, duration, description."""
    from governed_broker.config.loader import load_agent_types

    rows = ["| action | effect | tenure | duration | description |", "|---|---|---|---|---|"]
    for action_id, spec in load_agent_types(path).actions.items():
        rows.append(f"| `{action_id}` | `{spec.effect}` | {', '.join(spec.tenure)} | "
                    f"{spec.duration} | {_cell(' '.join(spec.description.split()))} |")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------------------------------
# institutions: what each observes, the rules of the shipped domain
# ------------------------------------------------------------------------------------------------

def fact_table() -> str:
    """The facts each institution observes (``contracts.institutions.FACTS``)."""
    rows = ["| institution | fact | unit | may be empty | meaning |", "|---|---|---|---|---|"]
    for name, facts in FACTS.items():
        rows += [f"| {name} | `{f.name}` | {f.unit} | {'yes' if f.nullable else ''} | "
                 f"{_cell(f.meaning)} |" for f in facts]
    return "\n".join(rows) + "\n"


def institution_rule_table(path: Path = REPO_ROOT / "institutions.yaml") -> str:
    """The levers and rules of the shipped institutions' domain."""
    from governed_broker.config.loader import load_institutions

    domain = load_institutions(path)
    rows = ["| institution | rule | kind | levers | limit | strict / relaxed | source |",
            "|---|---|---|---|---|---|---|"]
    for name in ("government", "insurer"):
        for rule in domain.of(name).rules:
            per = " of last year's" if rule.relative else ""
            limit = {
                "range": f"{_or(rule.min, 'no minimum')} .. {_or(rule.max, 'no maximum')}",
                "max_change": f"up {_or(rule.max_increase, 'unbounded', per)}, down "
                              f"{_or(rule.max_decrease, 'unbounded', per)}",
                "multiple_of": f"steps of {rule.step}",
                "total_within": f"sum <= `{rule.fact}`",
                "direction": f"`{rule.fact}` {rule.test.model_dump(exclude_none=True)}, "
                             f"lever {rule.change}" if rule.test else "",
            }[rule.kind]
            rows.append(f"| {name} | `{rule.id}` | {rule.kind} | "
                        f"{', '.join(f'`{lv}`' for lv in rule.levers)} | {_cell(limit)} | "
                        f"{rule.severity.strict} / {rule.severity.relaxed} | "
                        f"{_cell(' '.join(rule.source.split()))} |")
    return "\n".join(rows) + "\n"


def _or(value: float | None, missing: str, suffix: str = "") -> str:
    return missing if value is None else f"{value:g}{suffix}"


# ------------------------------------------------------------------------------------------------
# registries
# ------------------------------------------------------------------------------------------------

def registry_table(registry: dict[str, str], what: str) -> str:
    """A Markdown table of a name registry: name and the class or builder it loads."""
    rows = [f"| {what} | implemented by |", "|---|---|"]
    rows += [f"| `{name}` | `{target}` |" for name, target in registry.items()]
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|").replace("\n", " ").strip()


#: Generated section name -> function that writes it.
SECTIONS: dict[str, Callable[[], str]] = {
    "agent-columns": lambda: column_table(AGENT_YEARLY),
    "model-columns": model_column_table,
    "institution-columns": lambda: column_table(INSTITUTIONS_YEARLY),
    "institution-facts": fact_table,
    "institution-rules": institution_rule_table,
    "config-reference": config_reference,
    "llm-backends": lambda: registry_table(llm_config.LLM_BACKENDS, "backend"),
    "memory-engines": lambda: registry_table(memory_config.MEMORY_ENGINES, "engine"),
    "hazard-modes": lambda: registry_table(world_config.HAZARD_MODES, "mode"),
    "instruments": lambda: registry_table(world_config.INSTRUMENTS, "instrument"),
    "institutions": lambda: registry_table(institutions_config.INSTITUTIONS, "institution"),
    "worked-example": lambda: worked_example(REPO_ROOT),
    "odd-parameters": parameter_table,
    "odd-actions": action_table,
}


# ------------------------------------------------------------------------------------------------
# pages
# ------------------------------------------------------------------------------------------------

def render(text: str, page: str) -> str:
    """The page text with every generated section rewritten.

    Raises:
        KeyError: A marker names a section that ``SECTIONS`` does not have.
    """
    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in SECTIONS:
            raise KeyError(f"{page}: unknown generated section {name!r}; known: "
                           f"{', '.join(SECTIONS)}")
        return f"{match.group(1)}{SECTIONS[name]()}{match.group(4)}"

    return _BLOCK.sub(fill, text)


def pages(root: Path = REPO_ROOT) -> list[Path]:
    """Markdown pages that may hold generated sections."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def drifted(root: Path = REPO_ROOT) -> list[str]:
    """Pages whose generated sections differ from what the code writes now."""
    out = []
    for page in pages(root):
        text = page.read_text(encoding="utf-8")
        if render(text, page.name) != text:
            names = [m.group("name") for m in _BLOCK.finditer(text)
                     if render(m.group(0), page.name) != m.group(0)]
            out.append(f"{page.relative_to(root)}: {', '.join(names)}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the generated sections, or with ``--check`` report pages that drifted."""
    parser = argparse.ArgumentParser(prog="python -m governed_broker.docgen",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="only compare; exit 1 when a page differs from the code")
    args = parser.parse_args(argv)
    if args.check:
        stale = drifted()
        for line in stale:
            print(f"out of date: {line} (run: python -m governed_broker.docgen)",
                  file=sys.stderr)
        return 1 if stale else 0
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = render(text, page.name)
        if new != text:
            page.write_text(new, encoding="utf-8")
            print(f"rewrote {page.relative_to(REPO_ROOT)}")
    return 0
