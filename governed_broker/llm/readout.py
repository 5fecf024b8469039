"""The model's choice distributions, read from its token probabilities.

Every replicate of a vignette sends the same prompt: the model computes one distribution over
each choice and sampling only draws from it. This module reads those distributions directly,
for every field of a reply whose value is one of a fixed list (an ``enum`` of the reply's JSON
schema: the appraisal labels, the decision), from the raw next-token log-probabilities a
backend exposes (``llm.logprobs``). What it does, and why:

* **The path.** A reply is written in order, so a field is read after the text that precedes
  it. The path is the model's *greedy* reply under the reply grammar (temperature 0: the most
  probable token at each step, among the tokens the grammar allows). A field is read at the
  path's own tokens up to its value. The threat label comes first, after nothing generated, so
  its distribution is the model's, full stop; the coping label and the decision are
  conditional on the greedy text before them (the greedy threat label and reason, ...): they
  say what the model would choose after its most probable account. Fields after the last one
  read are not generated (the reply's closing string is constrained to be empty, which
  changes no allowed token before it).
* **Under the grammar.** At each position the grammar allows only tokens that continue one of
  the allowed values; the raw probabilities (which put 10-20 % on forbidden tokens such as
  ``|`` or ``None``) are renormalised over the allowed tokens, as the constrained sampler does.
* **Whole values, not single tokens.** A value may take several tokens (``VH`` is ``V`` +
  ``H``; ``elevate_house`` and ``elevate_and_insure`` share their first tokens), and one value
  may be spelt by several token sequences (the token ``VL``, or ``V`` then ``L``). The walk
  follows every allowed token: a token that settles the value ends its branch, a token shared
  by several values opens a node read with one more pass, and a value's probability is the sum
  over its token paths of the product of the renormalised conditional probabilities.
* **Not the closing quote.** Once a token settles the value, the grammar forces the rest of
  it and its closing quote; that token is not scored (scoring the quote after ``VL`` would mix
  in the model's wish to write ``VL|M`` and misstate P(VL)). The quote is read only where it
  is a real choice (a value that is a prefix of another).

A source reads the path with its prompt evaluated whole and the positions after it from that
same evaluation, so a readout depends only on the request, the model and the source's
settings, never on the call before it (``llm.logprobs``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from json.decoder import scanstring
from typing import Any, Protocol

from governed_broker.llm.base import LLMError, LLMRequest

#: Characters llama.cpp's JSON grammar allows between tokens of structure (its ``space`` rule).
GRAMMAR_SPACE = b" \t\n"
#: How far (natural log) below the most probable allowed token the greedy reply's own token may
#: be read at a field's first position (a server reading the text again may round otherwise).
PATH_TOLERANCE = 0.05


class ReadoutError(LLMError):
    """A distribution cannot be read (the message says why and what to change)."""


@dataclass(frozen=True)
class Token:
    """One token of a model's vocabulary.

    Attributes:
        text: The token's bytes (UTF-8; a token may hold part of a character).
        id: Its id in the model's vocabulary, where the source knows it.
    """

    text: bytes
    id: int | None = None

    def shown(self) -> str:
        """The token as text for people (partial characters replaced)."""
        return self.text.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Candidate:
    """A token a model may write next, with its raw log-probability.

    The log-probability is taken before any grammar, temperature or truncation.
    """

    token: Token
    logprob: float


@dataclass(frozen=True)
class GreedyReply:
    """The path: a model's greedy reply under the grammar, token by token.

    Attributes:
        text: The reply.
        tokens: Its tokens, in order (their bytes spell ``text``).
        prompt: The source's own handle on the prompt (token ids, messages), passed back to it.
    """

    text: str
    tokens: tuple[Token, ...]
    prompt: Any = None


class TokenSource(Protocol):
    """What the readout needs of a model (implementations: ``llm.logprobs``)."""

    #: The model and the way it is read, for messages and provenance.
    name: str

    def greedy(self, request: LLMRequest) -> GreedyReply:
        """The greedy reply (temperature 0) to ``request`` under its ``json_schema``.

        The prompt is evaluated whole (no reuse of an earlier call's evaluation).
        """
        ...

    def top_tokens(self, reply: GreedyReply, prefix: Sequence[Token], k: int
                   ) -> list[Candidate]:
        """The ``k`` most probable next tokens, with raw log-probabilities.

        They follow the prompt of ``reply`` and the tokens ``prefix`` of the reply being
        written.
        """
        ...


@dataclass(frozen=True)
class ReadoutSettings:
    """How a distribution is read.

    Attributes:
        top_k: Tokens read at each position (the mass beyond them is reported as unseen).
        max_passes: Most positions read for one field (a guard against a runaway walk).
    """

    top_k: int = 20
    max_passes: int = 200


@dataclass(frozen=True)
class Branch:
    """One allowed token at a node: the value it settles, or the node it leads to."""

    token: Token
    logprob: float
    value: str | None = None
    child: Node | None = None


@dataclass(frozen=True)
class Node:
    """One position read within a field's value.

    Attributes:
        prefix: The part of the value (and of the text before it in the same token) already
            written when this position is read ("" at the field's first position).
        branches: The tokens the grammar allows here, among the top ``k``.
        forbidden: The top-``k`` tokens the grammar forbids here (kept, with the branches, so
            that a sampler's truncation can be worked out from the raw probabilities).
        unseen_mass: Raw probability beyond the top ``k`` (one minus their sum).
    """

    prefix: str
    branches: tuple[Branch, ...]
    forbidden: tuple[Candidate, ...]
    unseen_mass: float

    @property
    def forbidden_mass(self) -> float:
        """Raw probability of the top-``k`` tokens the grammar forbids here."""
        return sum(math.exp(c.logprob) for c in self.forbidden)

    @property
    def allowed_mass(self) -> float:
        """Raw probability of the allowed tokens read here."""
        return sum(math.exp(b.logprob) for b in self.branches)

    @property
    def resolved(self) -> bool:
        """Whether some allowed token read here leads to a value.

        A node deep in a branch may have none among the top ``k`` (the model wanted to write
        another word).
        """
        return any(b.child is None or b.child.resolved for b in self.branches)

    def _resolved_branches(self) -> list[Branch]:
        return [b for b in self.branches if b.child is None or b.child.resolved]

    def distribution(self) -> dict[str, float]:
        """Probability of each value reachable from here (sums to 1).

        each allowed token's share of the allowed mass, times the distribution below it, over the
        tokens that lead to a value (an unresolved branch's mass goes to the others in proportion).
        """
        branches = self._resolved_branches()
        total = sum(math.exp(b.logprob) for b in branches)
        out: dict[str, float] = {}
        for b in branches:
            share = math.exp(b.logprob) / total
            below = {b.value: 1.0} if b.child is None else b.child.distribution()
            for value, p in below.items():
                out[value] = out.get(value, 0.0) + share * p  # type: ignore[index]
        return out

    def unresolved_share(self) -> float:
        """The share of this node's allowed mass on token paths that reach no value.

        Such paths reach no value among the tokens read; they are left out of
        ``distribution``.
        """
        total = self.allowed_mass
        lost = 0.0
        for b in self.branches:
            if b.child is not None:
                below = b.child.unresolved_share() if b.child.resolved else 1.0
                lost += math.exp(b.logprob) / total * below
        return lost

    def to_json(self) -> dict[str, Any]:
        """The node and everything below it, as JSON."""
        return {"prefix": self.prefix, "unseen_mass": self.unseen_mass,
                "branches": [{"token": b.token.shown(), "logprob": b.logprob,
                              **({"value": b.value} if b.child is None
                                 else {"child": b.child.to_json()})}
                             for b in self.branches],
                "forbidden": [[c.token.shown(), c.logprob] for c in self.forbidden]}


@dataclass(frozen=True)
class FieldDistribution:
    """The distribution of one field of the reply.

    Attributes:
        field: The field's path in the reply, e.g. ``threat_appraisal.label``.
        values: The allowed values, in the schema's order.
        probabilities: The probability of each value, same order (sums to 1).
        path_value: The value the greedy path wrote.
        root: The positions read, from the field's first token down.
        passes: Positions read (one model evaluation of one token each).
    """

    field: str
    values: tuple[str, ...]
    probabilities: tuple[float, ...]
    path_value: str
    root: Node
    passes: int

    def distribution(self) -> dict[str, float]:
        """Value -> probability, in the schema's order."""
        return dict(zip(self.values, self.probabilities, strict=True))

    @property
    def forbidden_mass(self) -> float:
        """Raw probability the model puts on forbidden tokens at the field's first token."""
        return self.root.forbidden_mass

    @property
    def unseen_mass(self) -> float:
        """Raw probability beyond the tokens read at the field's first token."""
        return self.root.unseen_mass

    @property
    def unresolved_mass(self) -> float:
        """Probability (under the grammar) of the token paths that reached no allowed value.

        Those paths are left out and the rest renormalised; the mass is small, since such
        paths begin with improbable tokens.
        """
        return self.root.unresolved_share()

    def to_json(self) -> dict[str, Any]:
        """The field's distribution and the masses left out, as JSON."""
        return {"field": self.field, "distribution": self.distribution(),
                "path_value": self.path_value, "forbidden_mass": self.forbidden_mass,
                "unseen_mass": self.unseen_mass, "unresolved_mass": self.unresolved_mass,
                "passes": self.passes,
                "tree": self.root.to_json()}


@dataclass(frozen=True)
class ReplyDistributions:
    """Every enumerated field of one request's reply.

    Attributes:
        fields: One readout per field, in reply order.
        path: The greedy reply the fields were read along.
        source: The model and how it was read.
        passes: Positions read in all (the greedy reply apart).
        seconds: Wall-clock time of the readout.
    """

    fields: tuple[FieldDistribution, ...]
    path: str
    source: str
    passes: int
    seconds: float

    def field(self, name: str) -> FieldDistribution:
        """The readout of field ``name`` (e.g. ``decision``)."""
        for f in self.fields:
            if f.field == name:
                return f
        raise KeyError(f"no field {name!r} was read (read: "
                       f"{', '.join(f.field for f in self.fields)})")

    def to_json(self) -> dict[str, Any]:
        """The reply's fields and the cost of reading them, as JSON."""
        return {"source": self.source, "path": self.path, "passes": self.passes,
                "seconds": round(self.seconds, 3), "fields": [f.to_json() for f in self.fields]}


# -- the reply's schema ---------------------------------------------------------------------
def enum_fields(schema: Mapping[str, Any], prefix: str = ""
                ) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each string field of ``schema`` whose value is one of an ``enum``.

    Yields (dotted path, allowed values) in the order of the schema's properties (the order
    the grammar writes them).
    """
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        if isinstance(sub, Mapping) and "enum" in sub:
            values = tuple(sub["enum"])
            if not values or not all(isinstance(v, str) for v in values):
                raise ReadoutError(f"reply schema field {path}: only enums of strings can be "
                                   f"read, got {list(values)!r}")
            yield path, values
        elif isinstance(sub, Mapping) and sub.get("type") == "object":
            yield from enum_fields(sub, f"{path}.")


def path_schema(schema: Mapping[str, Any], last_field: str) -> dict[str, Any]:
    """``schema`` with the free strings after ``last_field``'s property constrained to be empty.

    Each top-level free string property after the one holding ``last_field`` must be empty,
    so that the greedy path stops writing after the last field read.

    The grammar then allows the same tokens as before at every position up to that property's
    string, so no field read is changed.
    """
    top = last_field.split(".")[0]
    names = list(schema.get("properties") or {})
    if top not in names:
        raise ReadoutError(f"reply schema has no property {top!r}")
    properties = dict(schema["properties"])
    for name in names[names.index(top) + 1:]:
        sub = properties[name]
        if isinstance(sub, Mapping) and sub.get("type") == "string" and "enum" not in sub:
            properties[name] = {"type": "string", "maxLength": 0}
    return {**schema, "properties": properties}


# -- where the path writes each value --------------------------------------------------------
@dataclass(frozen=True)
class _Span:
    start: int  # offset of the value's first character (after its opening quote)
    end: int  # offset just after its closing quote
    value: str


def string_spans(text: str) -> dict[str, _Span]:
    """Where each string value of the JSON ``text`` lies, by dotted path.

    A truncated text gives the values before the cut.
    """
    out: dict[str, _Span] = {}
    try:
        _scan(text, 0, "", out)
    except (IndexError, ValueError):
        pass  # a reply cut short (max_tokens): the values before the cut are known
    return out


def _skip(text: str, i: int) -> int:
    while text[i] in " \t\n\r":
        i += 1
    return i


def _scan(text: str, i: int, path: str, out: dict[str, _Span]) -> int:
    i = _skip(text, i)
    c = text[i]
    if c == '"':
        value, end = scanstring(text, i + 1)
        out[path] = _Span(i + 1, end, value)
        return end
    if c in "{[":
        close, n = ("}" if c == "{" else "]"), 0
        i = _skip(text, i + 1)
        while text[i] != close:
            if c == "{":
                key, i = scanstring(text, _skip(text, i) + 1)
                i = _skip(text, i)
                if text[i] != ":":
                    raise ValueError(f"':' expected at {i}")
                name = f"{path}.{key}" if path else key
            else:
                name, n = f"{path}.{n}", n + 1
            i = _skip(text, _scan(text, i + 1 if c == "{" else i, name, out))
            if text[i] == ",":
                i = _skip(text, i + 1)
            elif text[i] != close:
                raise ValueError(f"',' or {close!r} expected at {i}")
        return i + 1
    _, end = json.JSONDecoder().raw_decode(text, i)
    return end


# -- the walk -------------------------------------------------------------------------------
@dataclass
class _Walk:
    """Reading one field: its targets and the passes made."""

    source: TokenSource
    reply: GreedyReply
    field: str
    targets: dict[str, bytes]  # value -> the bytes from the read position to its closing quote
    follower: bytes  # what the grammar writes after the closing quote (b"," or b"}")
    settings: ReadoutSettings
    passes: int = 0

    def consistent(self, written: bytes) -> list[str]:
        """The values ``written`` (bytes from the read position) may still become."""
        out = []
        for value, target in self.targets.items():
            if target.startswith(written):
                out.append(value)
            elif written.startswith(target) and self._follows(written[len(target):]):
                out.append(value)
        return out

    def _follows(self, rest: bytes) -> bool:
        """Whether the grammar allows ``rest`` right after a value's closing quote.

        That is spaces, then the structure's next character, then anything (not checked
        further).
        """
        rest = rest.lstrip(GRAMMAR_SPACE)
        return not rest or rest.startswith(self.follower)

    def node(self, prefix: Sequence[Token], written: bytes) -> Node:
        if self.passes >= self.settings.max_passes:
            raise ReadoutError(
                f"{self.source.name}: field {self.field} needed more than "
                f"{self.settings.max_passes} positions read; lower the readout's top_k")
        self.passes += 1
        candidates = self.source.top_tokens(self.reply, prefix, self.settings.top_k)
        branches, forbidden = [], []
        for c in candidates:
            text = written + c.token.text
            values = self.consistent(text)
            if not values:
                forbidden.append(c)
            elif len(values) == 1:  # settled: the grammar forces the rest and the quote
                branches.append(Branch(c.token, c.logprob, value=values[0]))
            else:
                child = self.node([*prefix, c.token], text)
                branches.append(Branch(c.token, c.logprob, child=child))
        shown = written.decode("utf-8", errors="replace")
        seen = sum(math.exp(c.logprob) for c in candidates)
        return Node(shown, tuple(branches), tuple(forbidden), max(0.0, 1.0 - seen))


def _check_on_path(source: TokenSource, field_name: str, root: Node, written: Token) -> None:
    """The greedy reply wrote the most probable allowed token at the field's first position.

    a source that reads that position after other text (a server that starts a new turn instead of
    continuing the reply) would not agree, and its numbers would be wrong.
    """
    best = max(root.branches, key=lambda b: b.logprob)
    mine = next((b for b in root.branches if b.token.text == written.text), None)
    if mine is None or mine.logprob < best.logprob - PATH_TOLERANCE:
        raise ReadoutError(
            f"{source.name}: field {field_name}: the position read does not continue the "
            f"greedy reply (the reply wrote {written.shown()!r}, the position's most probable "
            f"allowed token is {best.token.shown()!r}): the source does not read after the "
            "reply's own text")


def _json_body(value: str) -> bytes:
    """How a value is written inside a JSON string (escaped as the grammar writes it)."""
    return json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8")


def _read_field(source: TokenSource, reply: GreedyReply, spans: Mapping[str, _Span],
                field_name: str, values: Sequence[str],
                settings: ReadoutSettings) -> FieldDistribution:
    """The distribution of one field, read along ``reply`` (see the module's docstring)."""
    if field_name not in spans:
        raise ReadoutError(
            f"{source.name}: the greedy reply stops before field {field_name} (is "
            f"llm.max_tokens large enough?): {reply.text[-200:]!r}")
    span = spans[field_name]
    encoded = reply.text.encode("utf-8")
    start = len(reply.text[:span.start].encode("utf-8"))
    after = encoded[len(reply.text[:span.end].encode("utf-8")):].lstrip(GRAMMAR_SPACE)[:1]
    # the position read: the token that writes the value's first byte (it may start before)
    offset, index = 0, 0
    while offset + len(reply.tokens[index].text) <= start:
        offset += len(reply.tokens[index].text)
        index += 1
    lead = encoded[offset:start]
    walk = _Walk(source, reply, field_name,
                 {v: lead + _json_body(v) + b'"' for v in values}, after or b"}", settings)
    root = walk.node(reply.tokens[:index], b"")
    if not root.resolved:
        raise ReadoutError(
            f"{source.name}: field {field_name}: no token path among the "
            f"{settings.top_k} most probable tokens at each position leads to an allowed "
            "value; read more tokens (a larger top_k)")
    _check_on_path(source, field_name, root, reply.tokens[index])
    dist = root.distribution()
    return FieldDistribution(field_name, tuple(values), tuple(dist.get(v, 0.0) for v in values),
                             span.value, root, walk.passes)


def read_distributions(source: TokenSource, request: LLMRequest,
                       settings: ReadoutSettings | None = None) -> ReplyDistributions:
    """The distribution of every enumerated field of the reply to ``request``.

    Args:
        source: The model's token probabilities (``llm.logprobs.token_source``).
        request: The request a run would send (its messages and reply schema); its sampling
            settings are not used: the path is greedy and the distributions are the model's.
        settings: Top-k and guard.

    Raises:
        ReadoutError: No schema, no enumerated field, a greedy reply cut before a field, no
            allowed token among those read.
    """
    settings = settings or ReadoutSettings()
    if request.json_schema is None:
        raise ReadoutError("a readout needs the request's reply schema (json_schema)")
    fields = list(enum_fields(request.json_schema))
    if not fields:
        raise ReadoutError("the reply schema has no field with an enum of allowed values")
    start = time.perf_counter()
    path_request = replace(request, json_schema=path_schema(request.json_schema, fields[-1][0]),
                           temperature=0.0, top_p=None, top_k=None, min_p=None)
    reply = source.greedy(path_request)
    if b"".join(t.text for t in reply.tokens) != reply.text.encode("utf-8"):
        raise ReadoutError(f"{source.name}: the greedy reply's tokens do not spell its text")
    spans = string_spans(reply.text)
    read = tuple(_read_field(source, reply, spans, name, values, settings)
                 for name, values in fields)
    return ReplyDistributions(read, reply.text, source.name, sum(f.passes for f in read),
                              time.perf_counter() - start)
