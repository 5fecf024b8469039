"""Text templates loaded from YAML and checked when they are loaded.

Templates use Python's ``string.Template`` (``$name``), which cannot reach attributes or call
anything, so a template file is data, never code. Every template's placeholders are checked
against the names its caller provides, so a typo in a template is an error at start-up that
names the file and key, not a ``KeyError`` in year 7. The prompts (``cognition.prompts``) and
the memory sentences (``config.memory.MEMORY_TEXTS``) are template files.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_broker.config.base import ConfigError, excerpt
from governed_broker.config.yamlsafe import read_yaml


@dataclass(frozen=True)
class TemplateSet:
    """A validated set of named templates from one YAML file.

    Attributes:
        path: The file they came from (for error messages and manifests).
        templates: Compiled templates by key.
        extra: Non-template entries of the file (e.g. ``trust_words``).
    """

    path: Path
    templates: Mapping[str, string.Template]
    extra: Mapping[str, Any]

    def __post_init__(self) -> None:
        # each template split once into literal text and placeholder names: rendering joins
        # them (prompts render dozens of templates per household and year)
        object.__setattr__(self, "_parts", {k: _split(t) for k, t in self.templates.items()})

    def render(self, key: str, **values: Any) -> str:
        """Fill template ``key`` with ``values`` (every placeholder must be given).

        The result is ``string.Template.substitute``'s.
        """
        parts = self._parts[key]
        try:
            if isinstance(parts, str):
                return parts
            return "".join([str(values[p]) if named else p for named, p in parts])
        except KeyError as exc:  # a caller bug, not a user error: say which
            raise KeyError(f"{self.path}: template {key!r} needs value {exc}") from None

    def text(self, key: str) -> str:
        """The literal text of a template without placeholders."""
        return self.render(key)


def _split(template: string.Template) -> str | tuple[tuple[bool, str], ...]:
    """A template as ``(is placeholder, literal text or name)`` parts.

    Or its text when it has no placeholders (``$$`` is a literal dollar).
    """
    text, parts, pos = template.template, [], 0
    for match in template.pattern.finditer(text):
        parts.append((False, text[pos:match.start()]))
        name = match.group("named") or match.group("braced")
        if name is not None:
            parts.append((True, name))
        elif match.group("escaped") is not None:
            parts.append((False, template.delimiter))
        else:
            raise ValueError(f"invalid placeholder in template at character {match.start()}")
        pos = match.end()
    parts.append((False, text[pos:]))
    if not any(named for named, _ in parts):
        return "".join(p for _, p in parts)
    return tuple(p for p in parts if p[0] or p[1])


def load_templates(
    path: Path, spec: Mapping[str, frozenset[str]], extra_keys: frozenset[str] = frozenset(),
    setting: str = "governance.context.prompts_dir",
) -> TemplateSet:
    """Load and check a template file.

    Args:
        path: YAML file mapping keys to template strings.
        spec: The keys required and the placeholders each may use.
        extra_keys: Non-template keys the file must also hold (e.g. ``trust_words``).
        setting: The experiment setting that names the file (said when it is missing).

    Raises:
        ConfigError: The file is missing or unreadable, a key is missing or unknown, or a
            template is malformed or uses a placeholder its caller does not provide.
    """
    if not Path(path).exists():
        raise ConfigError(
            f"prompt template file {path} not found; set {setting} to where it is (the "
            f"repository ships configs/prompts/)")
    data = read_yaml(path, "prompt template file")
    if not isinstance(data, dict):
        raise ConfigError(f"prompt template file {path}: expected a mapping of templates")
    missing = sorted((set(spec) | extra_keys) - set(data))
    if missing:
        raise ConfigError(f"prompt template file {path}: missing key(s) {missing}")
    unknown_keys = sorted(set(data) - set(spec) - extra_keys)
    if unknown_keys:
        raise ConfigError(f"prompt template file {path}: unknown key(s) {unknown_keys}")
    templates: dict[str, string.Template] = {}
    for key, allowed in spec.items():
        value = data[key]
        if not isinstance(value, str):
            raise ConfigError(f"{path}: template {key!r} must be a string, got {excerpt(value)}")
        template = string.Template(value)
        if not template.is_valid():
            raise ConfigError(f"{path}: template {key!r} is malformed (write $$ for a dollar)")
        unknown = set(template.get_identifiers()) - allowed
        if unknown:
            raise ConfigError(
                f"{path}: template {key!r} uses unknown placeholder(s) {sorted(unknown)}; "
                f"allowed: {sorted(allowed) or 'none'}"
            )
        templates[key] = template
    extra = {k: data[k] for k in extra_keys}
    return TemplateSet(path=path, templates=templates, extra=extra)
