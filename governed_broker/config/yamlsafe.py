"""Bounded, safe YAML reading: every YAML file the framework reads goes through here.

``yaml.safe_load`` alone is safe from code execution but not from resource exhaustion: a few
kilobytes of nested aliases ("billion laughs") expand to a structure that validation and error
messages then walk for minutes, and deeply nested flow collections exhaust Python's recursion
limit. Here a file is refused, with a ``ConfigError`` naming it, when it is larger than
``MAX_YAML_BYTES``, nests deeper than ``MAX_YAML_DEPTH`` or expands (aliases counted as often as
they are used) to more than ``MAX_YAML_NODES`` nodes, or refers to itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, SequenceNode

from governed_broker.config.base import ConfigError, printable

#: Largest YAML file read (bytes). Our largest configuration file is about 15 KB.
MAX_YAML_BYTES = 1 << 20
#: Deepest nesting of collections. Our deepest configuration nests 7 levels.
MAX_YAML_DEPTH = 40
#: Most nodes after expanding aliases. Our largest configuration has a few thousand.
MAX_YAML_NODES = 200_000


class _Refused(ComposerError):
    """Well-formed YAML beyond the bounds (too deep, too large, self-referring)."""


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses too deep and too large (alias-expanded) documents."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(None, None, f"nested more than {MAX_YAML_DEPTH} levels deep",
                                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        # a key given twice is a mistake YAML itself lets pass (the last one wins silently);
        # keys merged in with ``<<`` may still be overridden, as YAML intends
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                earlier = first_line.get(key)
            except TypeError:  # an unhashable key: construction refuses it below
                continue
            if earlier is not None:
                raise _Refused(None, None, f"duplicate key {printable(repr(key), 60)} (first "
                                    f"given on line {earlier}); remove one of them",
                                    key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _check_expanded_size(root: Node) -> None:
    """Count the nodes ``root`` expands to (shared nodes once per use), without recursion."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes and not done:
            continue
        children = _children(node)
        if done:
            on_path.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                raise _Refused(None, None, f"expands to more than {MAX_YAML_NODES:,} nodes "
                                    "(aliases counted as often as they are used)",
                                    node.start_mark)
            continue
        if id(node) in on_path:
            raise _Refused(None, None, "an alias refers to a node that contains it",
                                node.start_mark)
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
        for c in children:
            if id(c) in on_path:
                raise _Refused(None, None, "an alias refers to a node that contains it",
                                    c.start_mark)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML text safely and within bounds.

    Args:
        text: The YAML.
        source: What it is, for messages (a file path, or ``--set KEY=VALUE``).

    Raises:
        ConfigError: malformed, too large, too deep or expanding too far; names line and
            column where known, never quotes the text.
    """
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{source}: {len(text):,} characters, more than the {MAX_YAML_BYTES:,} "
                          "a configuration file may have")
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = printable(getattr(exc, "problem", None) or type(exc).__name__, 160)
        kind = "YAML refused" if isinstance(exc, _Refused) else "malformed YAML"
        raise ConfigError(f"{source}: {kind}{where}: {problem}") from exc
    except (ValueError, OverflowError) as exc:
        # a scalar whose tag promises a kind it does not hold: a date such as 2020-13-45, an
        # integer of more than 4,300 digits (Python's limit), "!!float x"; PyYAML gives no mark
        raise ConfigError(f"{source}: malformed YAML: a value cannot be read as the type its "
                          f"form or tag says ({printable(str(exc), 80)})") from exc
    except RecursionError as exc:  # pragma: no cover - the depth bound comes first
        raise ConfigError(f"{source}: YAML nested too deeply") from exc


def read_text_file(path: Path, what: str = "file", max_bytes: int = MAX_YAML_BYTES) -> str:
    """A regular UTF-8 text file of bounded size, or a ``ConfigError`` saying what is wrong.

    Args:
        path: The file.
        what: What the file is, for messages (e.g. "population CSV").
        max_bytes: Largest size accepted (bytes).
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    if not path.is_file():
        raise ConfigError(f"{path}: not a regular file (a {what} is expected)")
    size = path.stat().st_size
    if size > max_bytes:
        raise ConfigError(f"{path}: {size:,} bytes, more than the {max_bytes:,} a {what} may have")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read file ({exc.strerror})") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); a {what} is expected") \
            from exc


def read_yaml(path: Path, what: str = "YAML file") -> Any:
    """Read and parse a YAML file within bounds (see ``load_yaml_text``)."""
    return load_yaml_text(read_text_file(path, what), str(path))
