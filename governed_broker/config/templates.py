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

    def render(self, key: str, **values: Any) -> str:
        """Fill template ``key`` with ``values`` (every placeholder must be given)."""
        try:
            return self.templates[key].substitute({k: str(v) for k, v in values.items()})
        except KeyError as exc:  # a caller bug, not a user error: say which
            raise KeyError(f"{self.path}: template {key!r} needs value {exc}") from None

    def text(self, key: str) -> str:
        """The literal text of a template without placeholders."""
        return self.render(key)


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
